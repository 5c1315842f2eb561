"""The dashboard in a real browser: Debian's Chromium driven by Playwright.

Starts ``streamlit run app.py`` on a free port. On every page: the charts
render, no exception box appears, changing one control redraws the chart,
and a screenshot lands in ``artifacts/screenshots/``. The time from changing
the GPU count to the redrawn chart on Timeline and Scaling is written to
``artifacts/latency.json`` (recorded, never asserted).

Set ``UPDATE_DOCS_SCREENSHOTS=1`` to copy the screenshots to ``docs/screenshots/``.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import statistics
import time

import pytest
from browser_util import (
    ARTIFACTS,
    REPO,
    SCREENSHOTS,
    VIEWPORT,
    assert_no_exception,
    chart_signature,
    choose,
    launch,
    open_first_validation_case,
    set_number,
    skip_reason,
    streamlit_server,
    wait_chart_changed,
    wait_chart_title,
    wait_idle,
    wait_input_value,
)

pytestmark = [pytest.mark.browser, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

ERROR_BOX = '[data-testid="stAlertContentError"]'


@pytest.fixture(scope="module")
def server():
    with streamlit_server() as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(60_000)
    pg = context.new_page()
    yield pg
    context.close()


def open_page(page, server: str, path: str) -> None:
    page.goto(f"{server}/{path}")
    wait_idle(page)
    assert_no_exception(page)


def screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_timeout(500)  # let plotly finish its transitions
    target = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(target))
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1" and not name.endswith("-changed"):
        _copy_to_docs(target, name)


def _copy_to_docs(png, name: str) -> None:
    """Copy a screenshot to docs/screenshots/, as a 256-colour PNG when Pillow is there."""
    docs = REPO / "docs" / "screenshots"
    docs.mkdir(parents=True, exist_ok=True)
    try:
        from PIL import Image
    except ImportError:
        shutil.copyfile(png, docs / f"{name}.png")
        return
    with Image.open(png) as im:
        im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(docs / f"{name}.png", optimize=True)


def add_to_multiselect(page, key: str, option: str) -> None:
    page.locator(f".st-key-{key} input").click()
    page.get_by_role("option", name=option, exact=True).click()
    page.keyboard.press("Escape")


def nudge_slider(page, key: str, keypress: str = "ArrowLeft") -> None:
    slider = page.locator(f".st-key-{key} input[type=range]")
    slider.focus()
    slider.press(keypress)


# Per page: (chart that must redraw, how to change one control).
CHANGES = {
    "timeline": ("timeline_chart", lambda pg: set_number(pg, "gpus", 32)),
    "compare": ("compare_chart", lambda pg: choose(pg, "net", "ib-edr-100")),
    "scaling": ("scaling_chart", lambda pg: add_to_multiselect(pg, "scale_nets", "100gbe")),
    "model": ("layer_chart", lambda pg: choose(pg, "model", "alexnet")),
    "learn": ("toy_chart", lambda pg: nudge_slider(pg, "toy_alpha_us")),
    "algorithms": ("strag_timeline", lambda pg: nudge_slider(pg, "strag_cv", "ArrowRight")),
    "validation": ("parity_chart", None),  # no control: its case table opens the Timeline page instead
}


@pytest.mark.parametrize("name", list(CHANGES))
def test_page_renders_and_a_control_redraws_its_chart(page, server, name):
    path = "" if name == "timeline" else name
    open_page(page, server, path)
    assert page.locator(".js-plotly-plot").count() >= 1
    if name == "learn":  # show the live example rather than the opening text
        page.evaluate("() => document.querySelector('.st-key-toy_alpha_us').scrollIntoView({block: 'center'})")
    screenshot(page, name)

    key, change = CHANGES[name]
    before = chart_signature(page, key)
    assert before, f"chart {key} did not render"
    if change is None:
        return
    change(page)
    wait_chart_changed(page, key, before)
    wait_idle(page)
    assert_no_exception(page)
    assert page.locator(ERROR_BOX).count() == 0
    screenshot(page, f"{name}-changed")


def test_deep_link_on_a_cold_server_gets_the_sidebar(page):
    """Streamlit treats an app with a pages/ folder as a legacy multipage app
    until st.navigation first runs; the first request must still get app.py."""
    with streamlit_server() as fresh:
        open_page(page, fresh, "scaling?gpus=64&net=ib-edr-100")
        assert page.locator(".st-key-gpus input").input_value() == "64"
        wait_chart_title(page, "scaling_timeline", "· 64 GPUs · ib-edr-100")
        nav = page.locator('[data-testid="stSidebarNav"]').inner_text()
        assert "Compare schedulers" in nav and "app" not in nav.split()


def test_model_page_draws_the_dag_of_a_small_model(page, server):
    open_page(page, server, "model?model=alexnet")
    assert page.locator(".st-key-dag_chart .js-plotly-plot").count() == 1


def test_a_link_reproduces_the_view_and_survives_navigation(page, server):
    open_page(page, server, "compare?gpus=64&net=ib-edr-100")
    assert page.locator(".st-key-gpus input").input_value() == "64"
    page.locator('[data-testid="stSidebarNav"]').get_by_text("Timeline", exact=True).click()
    wait_chart_title(page, "timeline_chart", "64 GPUs")
    assert "ib-edr-100" in page.evaluate(
        "() => document.querySelector('.st-key-timeline_chart .js-plotly-plot').layout.title.text")
    set_number(page, "gpus", 128)
    wait_chart_title(page, "timeline_chart", "128 GPUs")
    page.wait_for_function("() => location.search.includes('gpus=128')")
    assert "net=ib-edr-100" in page.url


def test_gpus_not_filling_nodes_show_an_error_and_the_app_recovers(page, server):
    open_page(page, server, "")
    set_number(page, "gpus", 10)
    page.wait_for_selector(ERROR_BOX)
    assert "does not fill whole nodes" in page.locator(ERROR_BOX).first.inner_text()
    assert_no_exception(page)
    set_number(page, "gpus", 8)
    wait_chart_title(page, "timeline_chart", "· 8 GPUs")
    assert page.locator(ERROR_BOX).count() == 0


def test_clicking_a_scaling_point_picks_that_gpu_count(page, server):
    open_page(page, server, "scaling")
    points = page.locator(".st-key-scaling_chart .scatterlayer .trace").first.locator(".points path")
    assert points.count() == 11  # 1, 2, 4, ..., 1024 GPUs
    points.nth(8).click(force=True)  # 256 GPUs
    wait_chart_title(page, "scaling_timeline", "· 256 GPUs")
    wait_input_value(page, "gpus", "256")  # fails after 30 s if the sidebar never follows the click
    page.wait_for_function("() => location.search.includes('gpus=256')")
    assert_no_exception(page)


def test_a_clicked_scaling_point_opens_its_own_curve(page, server):
    """A point of another scheduler's curve on another network picks that scheduler, that network and
    that GPU count for the timeline below (it showed the sidebar's scheduler and network)."""
    open_page(page, server, "scaling?scale_nets=ib-edr-100&scale_schedulers=wfbp&scale_schedulers=optimal")
    wait_chart_title(page, "scaling_timeline", "· 10gbe")
    names = page.evaluate("""() => document.querySelector('.st-key-scaling_chart .js-plotly-plot')._fullData
        .filter(t => t.xaxis === 'x').map(t => t.name)""")
    curve = page.locator(".st-key-scaling_chart .cartesianlayer .subplot.xy .scatterlayer .trace").nth(
        names.index("optimal · ib-edr-100"))
    curve.locator(".points path").nth(6).click(force=True)  # 64 GPUs
    wait_chart_title(page, "scaling_timeline", "optimal · 64 GPUs · ib-edr-100")
    page.wait_for_function("() => location.search.includes('net=ib-edr-100') && location.search.includes('gpus=64')")
    assert "scale_nets=10gbe" in page.evaluate("() => location.search")  # the sidebar's network stays a curve
    assert_no_exception(page)


def test_uploaded_csv_is_checked_and_used(page, server):
    open_page(page, server, "")
    choose(page, "model", "Upload a layer CSV…")
    upload = page.locator(".st-key-upload input[type=file]")
    upload.wait_for(state="attached")
    bad = b"name,params,fwd_ms,bwd_ms\nconv1,1000,1.0,2.0\nfc,lots,0.5,1.0\n"
    upload.set_input_files(files=[{"name": "bad.csv", "mimeType": "text/csv", "buffer": bad}])
    page.wait_for_selector(ERROR_BOX)
    assert page.locator(ERROR_BOX).first.inner_text() == "bad.csv row 3, column 'params': 'lots' is not a finite number"
    assert_no_exception(page)
    good = b"name,params,fwd_ms,bwd_ms\nconv1,1000,1.0,2.0\nfc,4000000,0.5,1.0\n"
    upload.set_input_files(files=[{"name": "good.csv", "mimeType": "text/csv", "buffer": good}])
    wait_chart_title(page, "timeline_chart", "good.csv")
    assert page.locator(ERROR_BOX).count() == 0


def _measure(page, chart_key: str, values: list[int]) -> list[float]:
    """Milliseconds from committing each GPU count to its redrawn chart."""
    samples = []
    for v in values:
        t0 = time.perf_counter()
        set_number(page, "gpus", v)
        wait_chart_title(page, chart_key, f"· {v} GPUs")
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples


def test_control_to_chart_latency(page, server):
    """Recorded in artifacts/latency.json; never asserted."""
    values = [32, 64, 128, 8, 16, 32, 64]
    report = {}
    pages = (("timeline", "", "timeline_chart"), ("scaling", "scaling", "scaling_timeline"))
    # the default model (resnet50, 56 layers), and resnet152 (158 layers), the speed issue's 150-layer case
    models = (("resnet50", ""), ("resnet152", "_resnet152"))
    for (model, suffix), (name, path, key) in itertools.product(models, pages):
        open_page(page, server, path + ("" if model == "resnet50" else f"?model={model}"))
        samples = _measure(page, key, values)
        assert_no_exception(page)
        report[name + suffix] = {
            "model": model,
            "chart": key,
            "gpu_counts": values,
            "samples_ms": [round(s, 1) for s in samples],
            "median_ms": round(statistics.median(samples), 1),
            "max_ms": round(max(samples), 1),
            "note": "first visit of a count simulates it; later visits hit st.cache_data",
        }
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "latency.json").write_text(json.dumps(report, indent=2))


def test_a_validation_case_opens_in_the_timeline_with_one_click(page, server):
    open_page(page, server, "validation")
    open_first_validation_case(page)
    assert page.get_by_role("heading", name="Timeline of an iteration").count() == 1
    assert page.locator(".js-plotly-plot").count() >= 1


def test_every_pinned_snapshot_is_compared(page, server):
    """Streamlit identifies the picker of snapshots by its key alone, so a third pin left it at its old value:
    the third snapshot was not compared, and the next pin forgot it (AppTest does not show this)."""
    open_page(page, server, "compare?model=alexnet")
    for gpus in (8, 16, 32, 64):
        set_number(page, "gpus", gpus)
        wait_input_value(page, "gpus", str(gpus))
        page.locator(".st-key-snap_name input").fill(f"g{gpus}")
        page.locator(".st-key-snap_name input").press("Enter")
        page.locator(".st-key-snap_pin button").click()
        if gpus > 8:
            wait_chart_title_count = """(n) => {
                const el = document.querySelector('.st-key-snap_chart .js-plotly-plot');
                return !!(el && el.layout && (el.layout.annotations || []).length === n);
            }"""
            page.wait_for_function(wait_chart_title_count, arg=[8, 16, 32, 64].index(gpus) + 1, timeout=30_000)
    assert_no_exception(page)
    assert page.url.count("snap=") == 4
    chips = page.locator(".st-key-snap_pick").inner_text()
    assert all(f"g{g}" in chips for g in (8, 16, 32, 64)), chips
