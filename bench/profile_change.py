"""What one control change costs Chromium on a dashboard page, measured in the browser.

``python bench/profile_change.py [--page timeline|scaling] [--changes 10] [--js-profile]``
starts ``streamlit run app.py`` as ``bench/latency.py`` does, opens the page in Debian's
Chromium (one session) and changes the GPU count ``--changes`` times. Per change it reports
(medians over the changes):

* Chromium's own counters (CDP ``Performance.getMetrics``): task, script, layout and style
  time, layout and style recalculation counts, DOM nodes;
* the CPU time (Linux /proc) of each kind of Chromium process (renderer, GPU, browser, ...);
* the DOM: nodes added and removed (a MutationObserver), whether the chart's element was
  replaced (remounted) and how many SVG elements the chart has;
* the websocket bytes the server sent, and the figure: traces, points, shapes, annotations,
  characters of hover text and of its JSON;
* with ``--js-profile``, JavaScript self time by script (CDP ``Profiler``).

The numbers depend on what else the machine runs; quote them with the load average printed.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
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
    PLOT,
    RUNNING,
    SELECTOR_ATTACHED,
    SELECTOR_DETACHED,
    VIEWPORT,
    streamlit_server,
    wait_quietly,
)
from latency import CHART_OF, COUNTS, TITLE_HAS, descendants, proc_table  # noqa: E402

#: Counts React commits (a stand-in for React DevTools' hook, installed before the page's scripts).
REACT_HOOK_JS = """(() => {
    window.__commits = 0;
    window.__REACT_DEVTOOLS_GLOBAL_HOOK__ = {
        supportsFiber: true, renderers: new Map(), isDisabled: false,
        inject(r) { return 1; }, checkDCE() {}, onScheduleFiberRoot() {},
        onCommitFiberRoot() { window.__commits++; }, onCommitFiberUnmount() {}, onPostCommitFiberRoot() {},
    };
})();"""

ARM_JS = """([key, observe]) => {
    window.__commits = 0;
    window.__mut = {added: 0, removed: 0, attrs: 0, text: 0, records: 0};
    window.__where = {};
    const where = (n) => {
        const el = n.nodeType === 1 ? n : n.parentElement;
        if (!el || !el.closest) return '?';
        const box = el.closest('[data-testid="stElementContainer"], [data-testid="stSidebar"], header, [data-testid="stToolbar"]');
        if (!box) return el.tagName;
        const key = [...box.classList].find(c => c.startsWith('st-key-'));
        const inner = box.querySelector('[data-testid]');
        return (box.closest('[data-testid="stSidebar"]') ? 'sidebar:' : '') +
               (key || (inner ? inner.getAttribute('data-testid') : box.getAttribute('data-testid') || box.tagName));
    };
    if (window.__obs) window.__obs.disconnect();
    window.__obs = new MutationObserver((records) => {
        for (const r of records) {
            window.__mut.records++;
            const w = where(r.target);
            window.__where[w] = (window.__where[w] || 0) + 1;
            if (r.type === 'childList') {
                for (const n of r.addedNodes) window.__mut.added += 1 + (n.querySelectorAll ? n.querySelectorAll('*').length : 0);
                for (const n of r.removedNodes) window.__mut.removed += 1 + (n.querySelectorAll ? n.querySelectorAll('*').length : 0);
            } else if (r.type === 'attributes') window.__mut.attrs++;
            else window.__mut.text++;
        }
    });
    if (observe) window.__obs.observe(document, {childList: true, subtree: true, attributes: true, characterData: true});
    const plots = [...document.querySelectorAll('.js-plotly-plot')];
    plots.forEach(p => { p.__mark = 1; });
    const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
    if (el) el.__mark = 2;
    const blocks = [...document.querySelectorAll('[data-testid="stElementContainer"]')];
    blocks.forEach(b => { b.__mark = 1; });
    return plots.length;
}"""

READ_JS = """(key) => {
    if (window.__obs) window.__obs.disconnect();
    const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
    const plots = [...document.querySelectorAll('.js-plotly-plot')];
    const blocks = [...document.querySelectorAll('[data-testid="stElementContainer"]')];
    const fig = el ? {data: el.data, layout: el.layout} : null;
    let points = 0, hover = 0;
    for (const t of (el && el.data) || []) {
        points += (t.x && t.x.length) || 0;
        const h = t.hovertext || t.text;
        if (Array.isArray(h)) for (const s of h) hover += String(s).length;
        else if (h) hover += String(h).length;
    }
    return {
        react_commits: window.__commits,
        mutations: window.__mut,
        mutations_where: window.__where,
        chart_replaced: !(el && el.__mark === 2),
        plots_replaced: plots.filter(p => !p.__mark).length,
        plots: plots.length,
        element_containers: blocks.length,
        element_containers_new: blocks.filter(b => !b.__mark).length,
        dom_nodes: document.getElementsByTagName('*').length,
        chart_svg_nodes: el ? el.querySelectorAll('svg *').length : 0,
        all_plot_svg_nodes: plots.reduce((n, p) => n + p.querySelectorAll('svg *').length, 0),
        traces: el && el.data ? el.data.length : 0,
        points: points,
        hover_chars: hover,
        shapes: el && el.layout && el.layout.shapes ? el.layout.shapes.length : 0,
        annotations: el && el.layout && el.layout.annotations ? el.layout.annotations.length : 0,
        figure_json_chars: fig ? JSON.stringify(fig, (k, v) => (k === '_fullData' || k.startsWith('_')) ? undefined : v).length : 0,
    };
}"""


def chromium_cpu(root_pid: int) -> dict[str, float]:
    """CPU seconds by Chromium process type among the descendants of ``root_pid``."""
    procs = proc_table()
    out: dict[str, float] = collections.defaultdict(float)
    for pid in descendants(procs, root_pid):
        _, cpu, cmd = procs[pid]
        if b"chrom" not in b" ".join(cmd):
            continue
        kind = next((a.split(b"=", 1)[1].decode() for a in b" ".join(cmd).split() if a.startswith(b"--type=")), "browser")
        out[kind] += cpu
    return dict(out)


TRACE_CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8", "blink", "cc",
                    "toplevel", "gpu", "viz", "disabled-by-default-v8.gc"]


COUNTED = {"ProxyMain::BeginMainFrame", "Paint", "RasterTask", "Layout", "UpdateLayoutTree", "FunctionCall",
           "Graphics.Pipeline", "DisplayItemList::Raster", "LocalFrameView::performLayout", "Document::recalcStyle"}


def trace_self_times(trace: dict) -> dict[str, float]:
    """Self time (ms) of the trace's complete events, by thread and event name."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    per_thread: dict = collections.defaultdict(list)
    opened: dict = collections.defaultdict(list)
    for e in events:
        ph = e.get("ph")
        if ph == "X" and "dur" in e:
            per_thread[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
        elif ph == "B":
            opened[(e["pid"], e["tid"], e["name"])].append(e["ts"])
        elif ph == "E" and opened.get((e["pid"], e["tid"], e["name"])):
            start = opened[(e["pid"], e["tid"], e["name"])].pop()
            per_thread[(e["pid"], e["tid"])].append((start, e["ts"], e["name"]))
    out: dict[str, float] = collections.Counter()
    counts = collections.Counter(f"{procs.get(e['pid'], e['pid'])}: {e['name']}" for e in events
                                 if e.get("name") in COUNTED and e.get("ph") in ("X", "B"))
    for name, n in counts.items():
        out[f"count {name}"] = n
    for tid, spans in per_thread.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list = []  # [start, name, children's time, end]
        where = f"{procs.get(tid[0], tid[0])}/{threads.get(tid, tid[1])}"

        for start, end, name in [*spans, (float("inf"), float("inf"), None)]:
            while stack and stack[-1][3] <= start:
                item = stack.pop()
                out[f"{where}: {item[1]}"] += (item[3] - item[0] - item[2]) / 1e3
                if stack:
                    stack[-1][2] += item[3] - item[0]
            if name is not None:
                stack.append([start, name, 0, end])
    return out


def median_dict(rows: list[dict]) -> dict:
    out = {}
    for k in rows[0]:
        vals = [r[k] for r in rows if isinstance(r.get(k), (int, float))]
        if vals and len(vals) == len(rows):
            out[k] = round(statistics.median(vals), 1)
        elif isinstance(rows[0][k], dict):
            out[k] = median_dict([r[k] for r in rows])
    return out


async def profile(url: str, path: str, changes: int, js_profile: bool, trace: bool = False,
                  observe: bool = False) -> dict:
    from playwright.async_api import async_playwright

    key = CHART_OF[path]
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        context = await browser.new_context(viewport=VIEWPORT)
        page = await context.new_page()
        cdp = await context.new_cdp_session(page)
        await cdp.send("Performance.enable")
        await cdp.send("Network.enable")
        frames: list[int] = []
        cdp.on("Network.webSocketFrameReceived", lambda e: frames.append(len(e["response"]["payloadData"])))
        await context.add_init_script(REACT_HOOK_JS)
        await page.goto(f"{url}/{path}", timeout=120_000)
        await wait_quietly(page, SELECTOR_ATTACHED, PLOT, 120_000)
        await wait_quietly(page, SELECTOR_DETACHED, RUNNING, 120_000)
        await asyncio.sleep(2.0)
        if js_profile:
            await cdp.send("Profiler.enable")
            await cdp.send("Profiler.setSamplingInterval", {"interval": 200})
        if trace:
            await browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
        rows, self_time = [], collections.Counter()
        by_fn = collections.Counter()
        for i in range(changes):
            gpus = COUNTS[i % len(COUNTS)]
            await page.evaluate(ARM_JS, [key, observe])
            m0 = {m["name"]: m["value"] for m in (await cdp.send("Performance.getMetrics"))["metrics"]}
            c0 = chromium_cpu(os.getpid())
            frames.clear()
            if js_profile:
                await cdp.send("Profiler.start")
            box = page.locator(".st-key-gpus input")
            t0 = time.perf_counter()
            await box.fill(str(gpus))
            await box.press("Enter")
            await wait_quietly(page, TITLE_HAS, [key, f"· {gpus} GPUs"], 60_000)
            latency = (time.perf_counter() - t0) * 1e3
            await wait_quietly(page, SELECTOR_DETACHED, RUNNING, 60_000)
            await asyncio.sleep(1.5)  # the second draw and whatever follows the change
            if js_profile:
                prof = (await cdp.send("Profiler.stop"))["profile"]
                nodes = {n["id"]: n for n in prof["nodes"]}
                deltas = prof.get("timeDeltas", [])
                for sample, dt in zip(prof.get("samples", []), deltas, strict=False):
                    frame = nodes[sample]["callFrame"]
                    script = frame["url"].rsplit("/", 1)[-1] or f"({frame['functionName'] or 'program'})"
                    self_time[script] += dt / 1e3
                    by_fn[f"{script}:{frame['functionName']}:{frame['lineNumber']}"] += dt / 1e3
            c1 = chromium_cpu(os.getpid())
            m1 = {m["name"]: m["value"] for m in (await cdp.send("Performance.getMetrics"))["metrics"]}
            dom = await page.evaluate(READ_JS, key)
            row = {
                "latency_ms": latency,
                "ws_bytes_in": sum(frames), "ws_frames_in": len(frames),
                "cpu_ms": {k: (c1.get(k, 0) - c0.get(k, 0)) * 1e3 for k in c1},
                "cdp_ms": {k: (m1[k] - m0[k]) * 1e3 for k in ("TaskDuration", "ScriptDuration", "LayoutDuration",
                                                              "RecalcStyleDuration", "TaskOtherDuration")},
                "cdp_counts": {k: m1[k] - m0[k] for k in ("LayoutCount", "RecalcStyleCount")},
                "nodes_cdp": m1["Nodes"],
                **dom,
            }
            row["cpu_ms"]["total"] = sum(row["cpu_ms"].values())
            rows.append(row)
        traced = json.loads(await browser.stop_tracing()) if trace else None
        await browser.close()
    out = {"page": path, "changes": changes, "median": median_dict(rows), "first": rows[0],
           "mutation_records_where": dict(sorted(rows[-1]["mutations_where"].items(), key=lambda kv: -kv[1]))}
    if not observe:
        del out["mutation_records_where"]
    if js_profile:
        out["js_self_ms_per_change"] = {k: round(v / changes, 1) for k, v in self_time.most_common(15)}
        out["js_top_functions_ms_per_change"] = {k: round(v / changes, 1) for k, v in by_fn.most_common(40)}
    if traced is not None:
        times = trace_self_times(traced)
        out["trace_self_ms_per_change"] = {k: round(v / changes, 1) for k, v in times.most_common(45)}
        out["trace_counts_per_change"] = {k[6:]: round(v / changes, 1) for k, v in times.items() if k.startswith("count ")}
        times = collections.Counter({k: v for k, v in times.items() if not k.startswith("count ")})
        out["trace_self_ms_per_change"] = {k: round(v / changes, 1) for k, v in times.most_common(45)}
        by_thread = collections.Counter()
        for k, v in times.items():
            by_thread[k.split(": ", 1)[0]] += v
        out["trace_thread_ms_per_change"] = {k: round(v / changes, 1) for k, v in by_thread.most_common(15)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", default="timeline", choices=sorted(CHART_OF))
    parser.add_argument("--changes", type=int, default=10)
    parser.add_argument("--js-profile", action="store_true")
    parser.add_argument("--trace", action="store_true", help="a Chrome trace: self time by thread and event")
    parser.add_argument("--mutations", action="store_true",
                        help="count DOM mutations per element (a MutationObserver: costs CPU itself)")
    parser.add_argument("--out")
    args = parser.parse_args()
    load0 = os.getloadavg()
    with streamlit_server() as url:
        result = asyncio.run(profile(url, args.page, args.changes, args.js_profile, args.trace, args.mutations))
    result["loadavg"] = [round(x, 2) for x in (*load0, *os.getloadavg())]
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
