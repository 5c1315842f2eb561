"""Ten people at once: one Streamlit server, ten browser contexts driven from asyncio.

Each session opens the Timeline page and changes the GPU count several times;
no session may see an exception or an error box. The time from each change
to the redrawn chart is recorded (p50, p95, max) in ``artifacts/load.json``,
never asserted.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time

import pytest
from browser_util import (
    ARTIFACTS,
    CHROMIUM,
    CHROMIUM_ARGS,
    EXCEPTION,
    PLOT,
    RUNNING,
    SELECTOR_ATTACHED,
    SELECTOR_DETACHED,
    VIEWPORT,
    skip_reason,
    streamlit_server,
    wait_quietly,
)

pytestmark = [pytest.mark.browser, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

SESSIONS = int(os.environ.get("LOAD_SESSIONS", "10"))
CHANGES = [32, 64, 8, 128, 16]
ERROR_BOX = '[data-testid="stAlertContentError"]'
TITLE_HAS = """([needle]) => {
    const el = document.querySelector('.st-key-timeline_chart .js-plotly-plot');
    return !!(el && el.layout && el.layout.title && String(el.layout.title.text).includes(needle));
}"""


async def _session(browser, url: str, index: int) -> dict:
    context = await browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(120_000)
    page = await context.new_page()
    samples, problems = [], []
    try:
        await page.goto(url)
        # waits in the page, not polling every frame (`wait_quietly`): ten polling pages load the machine
        await wait_quietly(page, SELECTOR_ATTACHED, PLOT, 120_000)
        await wait_quietly(page, SELECTOR_DETACHED, RUNNING, 120_000)
        counts = CHANGES[index % len(CHANGES):] + CHANGES[: index % len(CHANGES)]
        for gpus in counts:
            box = page.locator(".st-key-gpus input")
            t0 = time.perf_counter()
            await box.fill(str(gpus))
            await box.press("Enter")
            await wait_quietly(page, TITLE_HAS, [f"· {gpus} GPUs"], 120_000)
            samples.append((time.perf_counter() - t0) * 1e3)
            for selector, what in ((EXCEPTION, "exception"), (ERROR_BOX, "error box")):
                if await page.locator(selector).count():
                    problems.append(f"{what} after gpus={gpus}: {await page.locator(selector).first.inner_text()}")
    finally:
        await context.close()
    return {"session": index, "samples_ms": samples, "problems": problems}


async def _run_all(url: str) -> list[dict]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            return await asyncio.gather(*(_session(browser, url, i) for i in range(SESSIONS)))
        finally:
            await browser.close()


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def test_ten_sessions_at_once():
    with streamlit_server() as url:
        started = time.perf_counter()
        results = asyncio.run(_run_all(url))
        wall_s = time.perf_counter() - started
    samples = [s for r in results for s in r["samples_ms"]]
    report = {
        "sessions": SESSIONS,
        "changes_per_session": len(CHANGES),
        "page": "timeline",
        "control": "sidebar GPU count",
        "p50_ms": round(statistics.median(samples), 1),
        "p95_ms": round(_percentile(samples, 0.95), 1),
        "max_ms": round(max(samples), 1),
        "wall_s": round(wall_s, 1),
        "sessions_detail": results,
    }
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "load.json").write_text(json.dumps(report, indent=2))
    problems = [p for r in results for p in r["problems"]]
    assert not problems, problems
    assert len(samples) == SESSIONS * len(CHANGES)


def test_soak_short():
    """`bench/soak.py` briefly: sessions changing pages, opening heavy URLs and uploading CSVs
    at once: no exception and no timeout anywhere; the heavy URLs refused with the app's own
    line. The server's memory is recorded in ``artifacts/soak-short.json``, not asserted: a
    minute is mostly the caches' warm-up (the five-minute run's numbers are in the README)."""
    import sys

    sys.path.insert(0, str(ARTIFACTS.parent / "bench"))
    from soak import soak

    report = soak(int(os.environ.get("SOAK_SESSIONS", "6")), float(os.environ.get("SOAK_SECONDS", "60")))
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "soak-short.json").write_text(json.dumps(report, indent=2))
    assert report["errors"] == 0, report["problems"]
    assert report["steps"] >= report["sessions"] * 3
    assert report["refusals"] >= 1  # the heavy URLs are refused with the app's own line
