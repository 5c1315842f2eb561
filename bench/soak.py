"""Load and soak: many browser sessions against one dashboard server for minutes.

Each session loops until the time is up over a mix of what people do: open a
page by its URL (every page in turn), open a heavy URL (4,096 GPUs one per
node with stragglers, 65,536 GPUs, a large model at 1,024 GPUs on the Scaling
page, out-of-range values), and upload a layer CSV (a good one, one with a
shifted row, one too large). After every step the page must show no
exception box (a refused request shows the app's own error line, which is
counted, not an error) and answer within the timeout. The server's resident
memory is sampled every few seconds.

    python bench/soak.py                    # 20 sessions, 5 minutes (the issue's soak)
    python bench/soak.py --sessions 5 --seconds 60 --out artifacts/soak.json

Prints and writes a JSON summary: steps, errors (must be 0), refusals, step
latency p50/p95/max and the server's RSS at the start, in the middle and at
the end of the run. `tests/test_load.py::test_soak_short` runs it briefly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from browser_util import (  # noqa: E402
    CHROMIUM,
    CHROMIUM_ARGS,
    EXCEPTION,
    PAGES,
    PLOT,
    RUNNING,
    VIEWPORT,
    streamlit_server,
)

UPLOAD_OPTION = "Upload a layer CSV…"
ERROR_BOX = '[data-testid="stAlertContentError"]'
HEAVY_URLS = [  # the Timeline is the default page, at the root
    "?gpus=4096&per_node=1&strag=true",
    "?gpus=65536&per_node=1",
    "scaling?model=bert-large&gpus=1024",
    "compare?gpus=1024&per_node=8&strag=true",
    "?gpus=100000000&batch=-3",
    "?model=" + "x" * 300,
]
GOOD_CSV = "name,params,fwd_ms,bwd_ms\n" + "".join(f"l{i},{1000 * (i + 1)},0.5,1.0\n" for i in range(40))
UPLOADS = {
    "good.csv": GOOD_CSV,
    "shifted.csv": "name,params,fwd_ms,bwd_ms\na,100,1,1,5\nb,200,1,1\n",
    "large.csv": "name,params,fwd_ms,bwd_ms\n" + "a,1,1,1\n" * 900_000,  # ~6 MB: over the 5 MB limit
}


def server_rss_mb(port: int) -> float | None:
    """Resident memory of the streamlit process listening on ``port``, in MB (Linux /proc)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            if b"streamlit" not in b" ".join(cmdline) or str(port).encode() not in cmdline:
                continue
            for line in (proc / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            continue
    return None


async def _settle(page) -> None:
    await page.wait_for_load_state("domcontentloaded")
    await page.wait_for_timeout(300)
    await page.wait_for_selector(RUNNING, state="detached")


async def _step(page, url: str, kind: str, arg: str, files: dict[str, Path]) -> tuple[str | None, bool]:
    """One step; returns (problem or None, refused)."""
    if kind == "upload":  # the link the model box makes when "Upload a layer CSV…" is picked
        await page.goto(f"{url}/?model={urllib.parse.quote(UPLOAD_OPTION)}")
        await _settle(page)
        upload = page.locator(".st-key-upload input[type=file]")
        await upload.wait_for(state="attached")
        await upload.set_input_files(str(files[arg]))
        # the good table draws the chart; the shifted and the oversized one get the app's error line
        # (the uploader itself refuses a file over its limit, in its own words)
        if arg == "good.csv":
            await page.wait_for_selector(PLOT)
        else:
            refusal = page.locator(ERROR_BOX).or_(page.get_by_text(re.compile("or smaller|too large", re.I)))
            await refusal.first.wait_for()
            await _settle(page)
            return None, True
    else:
        await page.goto(f"{url}/{arg}")
    await _settle(page)
    if await page.locator(EXCEPTION).count():
        return f"{kind} {arg[:60]}: exception {await page.locator(EXCEPTION).first.inner_text()}", False
    return None, await page.locator(ERROR_BOX).count() > 0


def _plan(index: int) -> list[tuple[str, str]]:
    steps = [("page", "" if name == "timeline" else name) for name in PAGES] + [("heavy", u) for u in HEAVY_URLS]
    steps += [("upload", name) for name in UPLOADS]
    shift = (index * 3) % len(steps)
    return steps[shift:] + steps[:shift]


async def _session(browser, url: str, index: int, until: float, files: dict[str, Path]) -> dict:
    context = await browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(180_000)
    page = await context.new_page()
    samples, problems, refusals, steps = [], [], 0, 0
    plan = _plan(index)
    try:
        while time.monotonic() < until:
            kind, arg = plan[steps % len(plan)]
            t0 = time.perf_counter()
            try:
                problem, refused = await _step(page, url, kind, arg, files)
            except Exception as exc:  # a timeout or a crashed page is an error of the run
                problem, refused = f"{kind} {arg[:60]}: {type(exc).__name__}: {str(exc)[:200]}", False
            samples.append((time.perf_counter() - t0) * 1e3)
            steps += 1
            refusals += refused
            if problem:
                problems.append(problem)
    finally:
        await context.close()
    return {"session": index, "steps": steps, "refusals": refusals, "samples_ms": samples, "problems": problems}


async def _sample_memory(port: int, until: float, every_s: float, out: list) -> None:
    start = time.monotonic()
    while time.monotonic() < until:
        rss = server_rss_mb(port)
        if rss is not None:
            out.append((round(time.monotonic() - start, 1), round(rss, 1)))
        await asyncio.sleep(every_s)


async def _run(url: str, sessions: int, seconds: float, files: dict[str, Path]) -> tuple[list, list]:
    from playwright.async_api import async_playwright

    port = int(url.rsplit(":", 1)[1])
    memory: list = []
    until = time.monotonic() + seconds
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            sampler = asyncio.create_task(_sample_memory(port, until, 5.0, memory))
            results = await asyncio.gather(*(_session(browser, url, i, until, files) for i in range(sessions)))
            await sampler
        finally:
            await browser.close()
    return results, memory


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(results: list, memory: list, sessions: int, seconds: float) -> dict:
    samples = [s for r in results for s in r["samples_ms"]]
    rss = [m for _, m in memory]
    minutes: dict[int, list[float]] = {}
    for t, m in memory:
        minutes.setdefault(int(t // 60), []).append(m)
    return {
        "sessions": sessions, "seconds": seconds, "steps": len(samples),
        "errors": sum(len(r["problems"]) for r in results),
        "refusals": sum(r["refusals"] for r in results),
        "step_p50_ms": round(statistics.median(samples), 1) if samples else None,
        "step_p95_ms": round(_percentile(samples, 0.95), 1) if samples else None,
        "step_max_ms": round(max(samples), 1) if samples else None,
        "rss_start_mb": rss[0] if rss else None,
        "rss_max_mb": max(rss) if rss else None,
        "rss_end_mb": rss[-1] if rss else None,
        "rss_median_per_minute_mb": [round(statistics.median(v), 1) for _, v in sorted(minutes.items())],
        "memory_mb": memory,
        "problems": [p for r in results for p in r["problems"]][:50],
    }


def soak(sessions: int = 20, seconds: float = 300.0) -> dict:
    """Run the soak against a fresh server; the summary dict."""
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, text in UPLOADS.items():
            files[name] = Path(tmp) / name
            files[name].write_text(text, encoding="utf-8")
        with streamlit_server() as url:
            results, memory = asyncio.run(_run(url, sessions, seconds, files))
    return summary(results, memory, sessions, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--out", default=str(REPO / "artifacts" / "soak.json"))
    args = parser.parse_args()
    report = soak(args.sessions, args.seconds)
    Path(args.out).parent.mkdir(exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if k != "memory_mb"}, indent=2))


if __name__ == "__main__":
    main()
