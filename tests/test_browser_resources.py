"""In a real browser (Debian's Chromium): the Kineto trace upload on the Validation page, the
memory panel on the Timeline page and the throughput-per-dollar chart on the Scaling page."""

from __future__ import annotations

from pathlib import Path

import pytest
import test_browser
from browser_util import (
    PLOT,
    assert_no_exception,
    chart_title,
    choose,
    skip_reason,
    wait_chart_title,
    wait_idle,
)

pytestmark = [pytest.mark.browser, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

TRACE = Path(__file__).parent / "data" / "kineto" / "nccl_data.json.gz"
ERROR_BOX = '[data-testid="stAlertContentError"]'


# test_browser's fixtures: one Streamlit server and one Chromium per module
server = test_browser.server
browser = test_browser.browser


@pytest.fixture
def page(browser):  # a long timeout: the Validation page simulates every case first
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(90_000)
    yield context.new_page()
    context.close()


def test_trace_upload_shows_measured_beside_simulated(page, server):
    page.goto(f"{server}/validation")
    wait_idle(page, timeout_ms=120_000)
    upload = page.locator(".st-key-trace_upload input[type=file]")
    upload.wait_for(state="attached")
    upload.set_input_files(files=[{"name": "bad.json", "mimeType": "application/json", "buffer": b"{not json"}])
    page.wait_for_selector(ERROR_BOX)
    assert page.locator(ERROR_BOX).first.inner_text() == "bad.json: not valid JSON at character 1 (Expecting value)"
    assert page.locator(".st-key-parity_chart " + PLOT).count() == 1  # the rest of the page still works
    assert_no_exception(page)

    upload.set_input_files(files=[{"name": TRACE.name, "mimeType": "application/gzip", "buffer": TRACE.read_bytes()}])
    wait_chart_title(page, "trace_measured_chart", "Measured · nccl_data.json.gz · iteration 222")
    wait_chart_title(page, "trace_simulated_chart", "Simulated · resnet50 · 2 GPUs a100")
    assert page.locator(ERROR_BOX).count() == 0
    assert_no_exception(page)
    table = page.locator('.st-key-trace_table [data-testid="stDataFrame"]')
    table.wait_for()

    page.locator(".st-key-trace_mode").get_by_text("the trace's DDP buckets (trace-driven)").click()
    wait_chart_title(page, "trace_simulated_chart", "nccl_data.json.gz buckets")
    assert "Measured" in chart_title(page, "trace_measured_chart")
    assert_no_exception(page)


def test_memory_panel_and_throughput_per_dollar(page, server):
    # GPT-2 at batch 8 on a 16 GB T4 does not fit: the panel opens by itself
    page.goto(f"{server}/?model=gpt2&gpus=8&gpu=t4&batch=8")
    wait_idle(page)
    wait_chart_title(page, "memory_chart", "(does NOT fit)")
    before = chart_title(page, "memory_chart")
    choose(page, "mem_optimizer", "adam")  # two more fp32 buffers per parameter
    page.wait_for_function(
        "([key, before]) => { const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);"
        " return !!(el && el.layout && el.layout.title && String(el.layout.title.text) !== before); }",
        arg=["memory_chart", before])
    assert_no_exception(page)

    page.goto(f"{server}/scaling?model=resnet50&gpu=a100")
    wait_idle(page)
    wait_chart_title(page, "samples_per_dollar_chart", "Throughput per dollar")
    assert_no_exception(page)
