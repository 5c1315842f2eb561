"""Control -> chart latency of the dashboard in a real browser, quiet and under load.

``python bench/latency.py`` starts ``streamlit run app.py`` on a free port and drives
Debian's Chromium (``/usr/bin/chromium``) with Playwright:

1. **quiet**: one session types GPU counts into the sidebar (32, 64, 8, 128, 16, twice
   over) on the Timeline and on the Scaling page; each sample is the time from pressing
   Enter to the chart whose title names the new count being drawn in the page;
2. **load**: 10, then 20 sessions at once do the same on the Timeline (each starting at
   another count), as ``tests/test_load.py`` does.

The bench waits in the page on DOM mutations and resolves at the next animation frame
(`browser_util.wait_quietly`); ``--wait raf`` polls on every animation frame instead, as
Playwright's ``wait_for_function`` does (and as this bench did before 2026-11-24): the polling
itself then costs each waiting page about 66 ms of Chromium CPU per second, which under load
lands on the latencies measured.

Under load the sessions' first page loads (several seconds of Chromium CPU each, mostly
parsing Streamlit's and Plotly's JavaScript) overlap the first changes of the sessions that
loaded sooner; ``--barrier`` starts the changes only once every session has loaded, to tell
the two apart. The default keeps them overlapping, as ``tests/test_load.py`` does.

It prints and writes ``artifacts/latency-bench.json``: per phase the samples, median,
p95 and max, the server's own script-run times and their CPU time (app.py logs them when
``DASHBOARD_TIMING_LOG`` names a file), the CPU time the server process and this run's
Chromium spent per change (the whole phase, first page loads included, over the samples:
less sensitive to what else the machine runs than the latencies), the errors seen
(exception or error boxes, time-outs), the server's peak resident memory, and the load
average of the machine at the start and the end (the numbers depend on what else the
machine runs; say so when you quote them).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from browser_util import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    EXCEPTION,
    PLOT,
    RUNNING,
    SELECTOR_ATTACHED,
    SELECTOR_DETACHED,
    VIEWPORT,
    streamlit_server,
    wait_quietly,
)
from soak import server_rss_mb  # noqa: E402

COUNTS = [32, 64, 8, 128, 16]
ERROR_BOX = '[data-testid="stAlertContentError"]'
TITLE_HAS = """([key, needle]) => {
    const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
    return !!(el && el.layout && el.layout.title && String(el.layout.title.text).includes(needle)
              && el.querySelector('.main-svg'));
}"""
CHART_OF = {"timeline": "timeline_chart", "scaling": "scaling_timeline"}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def stats(samples: list[float]) -> dict:
    if not samples:
        return {"n": 0}
    return {"n": len(samples), "median_ms": round(statistics.median(samples), 1),
            "p95_ms": round(percentile(samples, 0.95), 1), "max_ms": round(max(samples), 1)}


async def _wait(page, raf: bool, predicate: str, arg, timeout_ms: float) -> None:
    """Wait for ``predicate(arg)`` in the page: quietly (`wait_quietly`) or polling every frame."""
    if raf:
        await page.wait_for_function(predicate, arg=arg, timeout=timeout_ms)
    else:
        await wait_quietly(page, predicate, arg, timeout_ms)


async def _session(browser, url: str, path: str, counts: list[int], rounds: int, raf: bool = False,
                   loaded: asyncio.Barrier | None = None) -> dict:
    context = await browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(60_000)
    page = await context.new_page()
    samples, problems = [], []
    try:
        try:  # the first load of many sessions at once may take long: it is not a sample
            await page.goto(f"{url}/{path}", timeout=180_000)
            await _wait(page, raf, SELECTOR_ATTACHED, PLOT, 180_000)
            await _wait(page, raf, SELECTOR_DETACHED, RUNNING, 180_000)
        except Exception as exc:
            problems.append(f"{path}: first load: {type(exc).__name__}: {str(exc)[:120]}")
            if loaded is not None:
                await loaded.abort()
            return {"samples_ms": samples, "problems": problems}
        if loaded is not None:  # --barrier: no change while another session still loads its page
            with contextlib.suppress(asyncio.BrokenBarrierError):  # another session's load failed
                await loaded.wait()
        for gpus in counts * rounds:
            box = page.locator(".st-key-gpus input")
            try:
                t0 = time.perf_counter()
                await box.fill(str(gpus))
                await box.press("Enter")
                await _wait(page, raf, TITLE_HAS, [CHART_OF[path], f"· {gpus} GPUs"], 60_000)
                samples.append((time.perf_counter() - t0) * 1e3)
            except Exception as exc:  # a time-out is an error of the run
                problems.append(f"{path} gpus={gpus}: {type(exc).__name__}: {str(exc)[:120]}")
            for selector, what in ((EXCEPTION, "exception"), (ERROR_BOX, "error box")):
                if await page.locator(selector).count():
                    problems.append(f"{what} after gpus={gpus}")
    finally:
        await context.close()
    return {"samples_ms": samples, "problems": problems}


async def _phase(url: str, path: str, sessions: int, rounds: int, raf: bool = False, barrier: bool = False) -> dict:
    from playwright.async_api import async_playwright

    port = int(url.rsplit(":", 1)[1])
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            cpu0 = _cpu_s(port)
            loaded = asyncio.Barrier(sessions) if barrier and sessions > 1 else None
            runs = await asyncio.gather(*(
                _session(browser, url, path, COUNTS[i % len(COUNTS):] + COUNTS[: i % len(COUNTS)], rounds, raf, loaded)
                for i in range(sessions)))
            cpu1 = _cpu_s(port)
        finally:
            await browser.close()
    samples = [s for r in runs for s in r["samples_ms"]]
    changes = max(len(samples), 1)
    return {"page": path, "sessions": sessions, "rounds": rounds, **stats(samples),
            "cpu_ms_per_change": {"server": round((cpu1[0] - cpu0[0]) * 1e3 / changes),
                                  "browser": round((cpu1[1] - cpu0[1]) * 1e3 / changes)},
            "errors": sum(len(r["problems"]) for r in runs), "problems": [p for r in runs for p in r["problems"]][:20],
            "samples_ms": [round(s, 1) for s in samples]}


def _server_runs(path: Path, since: int) -> dict:
    """Server-side script run times logged by app.py (``DASHBOARD_TIMING_LOG``) after line ``since``,
    with the median CPU time of the script's thread per run."""
    runs = [json.loads(line) for line in (path.read_text(encoding="utf-8").splitlines()[since:] if path.exists() else [])]
    cpu = [run["cpu_ms"] for run in runs if "cpu_ms" in run]
    return {**stats([run["ms"] for run in runs]), **({"cpu_median_ms": round(statistics.median(cpu), 1)} if cpu else {})}


def proc_table() -> dict[int, tuple[int, float, list[bytes]]]:
    """Every process (Linux /proc): pid -> (parent pid, CPU seconds so far, user + system, command line)."""
    tick = os.sysconf("SC_CLK_TCK")
    procs = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            fields = stat[stat.rindex(")") + 2:].split()
            procs[int(proc.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick,
                                     (proc / "cmdline").read_bytes().split(b"\0"))
        except (OSError, ValueError):
            continue
    return procs


def descendants(procs: dict, root: int) -> set[int]:
    """The pids below ``root`` in `proc_table`'s tree."""
    mine, todo = set(), [root]
    while todo:
        parent = todo.pop()
        children = [pid for pid, (ppid, _, _) in procs.items() if ppid == parent and pid not in mine]
        mine.update(children)
        todo.extend(children)
    return mine


def _cpu_s(port: int) -> tuple[float, float]:
    """CPU seconds so far of the streamlit server on ``port`` and of the Chromium processes
    this process started."""
    procs = proc_table()
    server = sum(cpu for _, cpu, cmd in procs.values() if b"streamlit" in b" ".join(cmd) and str(port).encode() in cmd)
    browser = sum(procs[pid][1] for pid in descendants(procs, os.getpid()) if b"chrom" in b" ".join(procs[pid][2]))
    return server, browser


def run(loads: list[int], raf: bool = False, barrier: bool = False) -> dict:
    timing = REPO / "artifacts" / "latency-server-runs.jsonl"
    timing.parent.mkdir(exist_ok=True)
    timing.write_text("")
    os.environ["DASHBOARD_TIMING_LOG"] = str(timing)  # the server started below inherits it
    report: dict = {"when_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "cores": os.cpu_count(),
                    "loadavg_start": [round(x, 2) for x in os.getloadavg()], "wait": "raf" if raf else "quiet",
                    "barrier": barrier,
                    "phases": []}
    with streamlit_server() as url:
        port = int(url.rsplit(":", 1)[1])
        peak = 0.0
        phases = [(f"quiet {path}", path, 1, 2) for path in ("timeline", "scaling")]
        phases += [(f"{n} sessions timeline", "timeline", n, 1) for n in loads]
        for name, path, sessions, rounds in phases:
            since = len(timing.read_text(encoding="utf-8").splitlines())
            phase = asyncio.run(_phase(url, path, sessions, rounds, raf, barrier))
            report["phases"].append({"name": name, **phase, "server_runs": _server_runs(timing, since),
                                      "loadavg_after": [round(x, 2) for x in os.getloadavg()]})
            peak = max(peak, server_rss_mb(port) or 0.0)
            print(f"{name}: {json.dumps({k: v for k, v in report['phases'][-1].items() if k != 'samples_ms'})}",
                  flush=True)
        report["server_rss_peak_mb"] = round(peak, 1)
    report["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", default="10,20", help="concurrent session counts, comma-separated")
    parser.add_argument("--out", default=str(REPO / "artifacts" / "latency-bench.json"))
    parser.add_argument("--wait", choices=("quiet", "raf"), default="quiet",
                        help="wait in the page on DOM mutations (quiet) or poll on every animation frame (raf)")
    parser.add_argument("--barrier", action="store_true",
                        help="under load, start changing only once every session has loaded its page (the "
                             "latency of changes alone, not of changes among first page loads)")
    args = parser.parse_args()
    report = run([int(x) for x in args.loads.split(",") if x], raf=args.wait == "raf", barrier=args.barrier)
    Path(args.out).parent.mkdir(exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    for phase in report["phases"]:
        runs = phase["server_runs"]
        cpu = phase["cpu_ms_per_change"]
        print(f"{phase['name']:>22}: n={phase.get('n', 0)} median {phase.get('median_ms')} ms, "
              f"p95 {phase.get('p95_ms')} ms, max {phase.get('max_ms')} ms, errors {phase['errors']}; "
              f"server script runs: median {runs.get('median_ms')} ms, p95 {runs.get('p95_ms')} ms (n={runs['n']}), "
              f"CPU median {runs.get('cpu_median_ms')} ms; CPU per change: server {cpu['server']} ms, "
              f"browser {cpu['browser']} ms")
    print(f"server RSS peak {report['server_rss_peak_mb']} MB; load average {report['loadavg_start']} -> "
          f"{report['loadavg_end']} on {report['cores']} cores")


if __name__ == "__main__":
    main()
