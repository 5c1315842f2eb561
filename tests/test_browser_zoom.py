"""A chart keeps its zoom when a control changes what it shows (`dashboard.zoom`), in a real browser.

Debian's Chromium driven by Playwright, as in ``tests/test_browser.py``. The server logs
one line per script run (``DASHBOARD_TIMING_LOG``), so the test also counts the reruns:
one per control change (the relay adds none) and one per zoom or reset (the relay's report).
"""

from __future__ import annotations

import os
import time

import pytest
from browser_util import (
    ARTIFACTS,
    VIEWPORT,
    assert_no_exception,
    launch,
    set_number,
    skip_reason,
    streamlit_server,
    wait_chart_title,
    wait_idle,
)

pytestmark = [pytest.mark.browser, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

GANTT = ".st-key-timeline_chart .js-plotly-plot"
#: How long to watch for a rerun nobody asked for: well past the relay's debounce (350 ms).
SETTLE_S = 1.5


@pytest.fixture(scope="module")
def server_and_log():
    ARTIFACTS.mkdir(exist_ok=True)
    log = ARTIFACTS / "zoom-runs.log"
    log.write_text("")
    before = os.environ.get("DASHBOARD_TIMING_LOG")
    os.environ["DASHBOARD_TIMING_LOG"] = str(log)
    try:
        with streamlit_server() as url:
            yield url, log
    finally:
        if before is None:
            os.environ.pop("DASHBOARD_TIMING_LOG", None)
        else:
            os.environ["DASHBOARD_TIMING_LOG"] = before


@pytest.fixture
def page():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        context = browser.new_context(viewport=VIEWPORT)
        context.set_default_timeout(60_000)
        yield context.new_page()
        browser.close()


def runs(log) -> int:
    return len(log.read_text().splitlines())


def wait_runs(log, count: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while runs(log) < count:
        assert time.monotonic() < deadline, f"no script run {count} within {timeout_s} s"
        time.sleep(0.1)


def x_range(page) -> list[float]:
    return page.evaluate(f"() => document.querySelector('{GANTT}')._fullLayout.xaxis.range.slice()")


def mark_chart(page, mark: int) -> None:
    """Tag the chart's div: a redrawn chart is a new div without the tag."""
    page.evaluate(f"(mark) => {{ document.querySelector('{GANTT}').__zoomTestMark = mark; }}", mark)


def chart_mark(page):
    return page.evaluate(f"() => document.querySelector('{GANTT}').__zoomTestMark ?? null")


def plot_area(page) -> dict:
    return page.locator(f"{GANTT} .nsewdrag").first.bounding_box()


def drag_zoom(page) -> tuple[list[float], dict, float]:
    """Drag across a quarter of the Gantt (Plotly zooms the x axis only): the zoomed x range, the
    plot area and the height the drag ran at."""
    box = plot_area(page)
    x0, y = box["x"] + box["width"] * 0.30, box["y"] + box["height"] * 0.5
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(x0 + box["width"] * 0.25, y + 2, steps=8)
    page.mouse.up()
    return x_range(page), box, y


def settled(page, log, count: int) -> None:
    """Wait for script run ``count`` to finish drawing, then for any run nobody asked for."""
    wait_runs(log, count)
    wait_idle(page)
    time.sleep(SETTLE_S)
    wait_idle(page)
    assert_no_exception(page)


def test_the_gantt_keeps_its_zoom_when_the_gpu_count_changes(page, server_and_log):
    url, log = server_and_log
    page.goto(f"{url}/timeline")
    wait_idle(page)
    time.sleep(SETTLE_S)
    loaded = runs(log)
    full = x_range(page)
    mark_chart(page, 1)

    zoomed, box, y = drag_zoom(page)
    assert zoomed[1] - zoomed[0] < 0.5 * (full[1] - full[0])

    settled(page, log, loaded + 1)  # the relay reported the zoom: one rerun...
    assert runs(log) == loaded + 1
    assert chart_mark(page) == 1  # ...which left the chart as it was (not redrawn)
    assert x_range(page) == pytest.approx(zoomed, rel=1e-9)

    set_number(page, "gpus", 32)
    wait_chart_title(page, "timeline_chart", "· 32 GPUs")
    settled(page, log, loaded + 2)
    assert runs(log) == loaded + 2  # one run for the change; the relay adds none
    assert chart_mark(page) is None  # a new chart (new data)...
    assert x_range(page) == pytest.approx(zoomed, rel=1e-9)  # ...drawn with the zoom
    assert x_range(page) != pytest.approx(full, rel=1e-3)
    autorange = page.evaluate(f"""() => {{
        const gd = document.querySelector('{GANTT}');
        return Math.max(...gd.data.filter(t => t.orientation === 'h')
                                  .flatMap(t => t.x.map((w, i) => w + (Array.isArray(t.base) ? t.base[i] : t.base || 0))));
    }}""")
    assert autorange > 2 * zoomed[1]  # the data reach well past the zoomed window

    mark_chart(page, 2)
    page.mouse.dblclick(box["x"] + box["width"] * 0.5, y)  # reset: full extent, and the kept zoom is forgotten
    settled(page, log, loaded + 3)
    assert runs(log) == loaded + 3
    assert chart_mark(page) == 2
    reset = x_range(page)
    assert reset[0] == pytest.approx(0.0, abs=1e-9) and reset[1] >= autorange

    set_number(page, "gpus", 16)
    wait_chart_title(page, "timeline_chart", "· 16 GPUs")
    settled(page, log, loaded + 4)
    assert runs(log) == loaded + 4
    assert x_range(page) == pytest.approx(full, rel=1e-9)  # the first view again, at full extent


def test_a_zoom_made_just_before_a_control_change_is_kept(page, server_and_log):
    """The relay sends a waiting zoom as soon as the user turns to a control (here within the
    350 ms it otherwise waits), so the chart the change draws is already zoomed; drawn zoomed,
    the modebar offers autoscale but not Plotly's "reset axes" (which would go back to the
    kept window, not to the full extent)."""
    url, log = server_and_log
    page.goto(f"{url}/timeline")
    wait_idle(page)
    time.sleep(SETTLE_S)
    reset = f"{GANTT} .modebar-btn[data-title='Reset axes']"
    assert page.locator(reset).count() == 1  # not zoomed: the usual modebar
    full = x_range(page)
    zoomed, _, _ = drag_zoom(page)
    assert zoomed[1] - zoomed[0] < 0.5 * (full[1] - full[0])
    set_number(page, "gpus", 32)  # at once: the relay's quiet time has not run out
    wait_chart_title(page, "timeline_chart", "· 32 GPUs")
    wait_idle(page)
    time.sleep(SETTLE_S)
    wait_idle(page)
    assert_no_exception(page)
    assert x_range(page) == pytest.approx(zoomed, rel=1e-9)
    assert page.locator(reset).count() == 0
    assert page.locator(f"{GANTT} .modebar-btn[data-title='Autoscale']").count() == 1
