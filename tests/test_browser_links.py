"""Links in a real browser: every page answers at its own path with its query, the root
goes on to /timeline, a bad value is named, and a validation case or a Compare row
opens the Timeline at a /timeline?... address that reproduces it."""

from __future__ import annotations

import re

import pytest
import test_browser
from browser_util import (
    assert_no_exception,
    chart_title,
    choose,
    open_first_validation_case,
    skip_reason,
    wait_idle,
)

pytestmark = [pytest.mark.browser, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

# test_browser's fixtures: one Streamlit server and one Chromium per module
server = test_browser.server
browser = test_browser.browser

NOT_FOUND = "Page not found"
PAGES = ("timeline", "compare", "scaling", "model", "algorithms", "validation", "learn")


@pytest.fixture
def page(browser):  # a longer timeout than test_browser's: the Validation page simulates every case first
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(90_000)
    yield context.new_page()
    context.close()


def metric_value(page, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]').filter(has=page.get_by_text(label, exact=True)).first
    return box.locator('[data-testid="stMetricValue"]').inner_text()


@pytest.mark.parametrize("path", PAGES)
def test_every_page_answers_at_its_path_with_a_query(page, server, path):
    page.goto(f"{server}/{path}?model=resnet50&gpus=8")
    wait_idle(page)
    assert_no_exception(page)
    assert page.get_by_text(NOT_FOUND).count() == 0
    assert page.locator(".st-key-gpus input").input_value() == "8"
    assert urlpath(page) == f"/{path}"


def urlpath(page) -> str:
    return page.evaluate("() => location.pathname")


def test_the_root_goes_on_to_timeline_with_its_query(page, server):
    page.goto(f"{server}/?gpus=8&scheduler=optimal")
    wait_idle(page)
    page.wait_for_function("() => location.pathname === '/timeline'")
    assert "gpus=8" in page.evaluate("() => location.search")
    assert "optimal" in chart_title(page, "timeline_chart") and "· 8 GPUs" in chart_title(page, "timeline_chart")
    assert re.fullmatch(r"\d+\.\d %", metric_value(page, "Overlap"))


def test_a_bad_value_is_named(page, server):
    page.goto(f"{server}/timeline?gpus=lots&net=bogus")
    wait_idle(page)
    warnings = page.locator('[data-testid="stAlertContentWarning"]')
    warnings.first.wait_for()
    text = " ".join(warnings.all_inner_texts())
    assert "gpus=lots" in text and "using gpus = 16 instead" in text
    assert "net=bogus" in text and "using net = 10gbe instead" in text


def test_a_validation_case_opens_at_a_timeline_link(page, server):
    page.goto(f"{server}/validation")
    wait_idle(page)
    open_first_validation_case(page)
    page.wait_for_function("() => location.pathname === '/timeline'")
    search = page.evaluate("() => location.search")
    assert "method=BSP-A2A" in search and "calib=true" in search
    shown = metric_value(page, "Samples/s")
    # the link alone, in a new session, shows the same view
    page.goto(f"{server}/timeline{search}")
    wait_idle(page)
    assert metric_value(page, "Samples/s") == shown


def test_a_compare_row_opens_at_a_timeline_link(page, server):
    page.goto(f"{server}/compare?gpus=32")
    wait_idle(page)
    page.locator(".st-key-compare_open").scroll_into_view_if_needed()
    choose(page, "compare_open", "optimal")
    page.wait_for_timeout(1000)
    wait_idle(page)
    page.locator(".st-key-compare_open_button button").click()
    page.wait_for_function("() => location.pathname === '/timeline'")
    page.wait_for_function("() => location.search.includes('scheduler=optimal')")
    wait_idle(page)
    assert "· 32 GPUs" in chart_title(page, "timeline_chart") and "optimal" in chart_title(page, "timeline_chart")


def test_sessions_opening_together_on_a_fresh_server_all_get_the_frame(browser):
    """Streamlit 1.67 starts every session of a fresh server as a legacy multipage app until one
    run calls st.navigation: sessions that open at once all begin with a bare page, and each must
    rerun through app.py (`dashboard.ui.ensure_frame`), not only the first to clear the flag."""
    from browser_util import streamlit_server

    with streamlit_server() as url:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        context.set_default_timeout(90_000)
        pages = [context.new_page() for _ in range(4)]
        for i, p in enumerate(pages):  # the navigations overlap: each returns once its response starts
            p.goto(f"{url}/{PAGES[i]}?gpus=8", wait_until="commit")
        try:
            for p in pages:
                p.wait_for_selector(".st-key-gpus input", state="attached", timeout=90_000)
                assert p.locator(".st-key-gpus input").input_value() == "8"
                assert_no_exception(p)
        finally:
            context.close()
