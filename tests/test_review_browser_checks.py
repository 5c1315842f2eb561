"""Defects found by a review in a real browser (Debian's Chromium), each with its check.

* The Timeline's two-line chart title (model · scheduler · GPUs, then network · iteration)
  had the top of its first line cut off: Plotly.js puts the first line's baseline at the
  title's top pad when the title has several lines, and the pad was 8 px
  (`dashboard.figures.gantt_figure`).
"""

from __future__ import annotations

import pytest
import test_browser
from browser_util import assert_no_exception, skip_reason, wait_idle

from dashboard import figures

# test_browser's fixtures: one Streamlit server and one Chromium per module
server = test_browser.server
browser = test_browser.browser

_TITLE_TOP_JS = """(key) => {
    const plot = document.querySelector(`.st-key-${key} .js-plotly-plot`);
    const title = plot.querySelector('.gtitle');
    return title.getBoundingClientRect().top - plot.getBoundingClientRect().top;
}"""


def test_a_two_line_gantt_title_is_pushed_below_the_top_edge():
    fig = figures.gantt_figure(figures_timeline(), "model · sched<br>net · iteration 1 ms")
    font = fig.layout.title.font.size or 16
    assert fig.layout.title.pad.t >= font  # the first line's glyphs sit above its baseline, at the pad


def figures_timeline():
    import pandas as pd

    import sim

    layers = pd.DataFrame({"name": ["a", "b"], "params": [1000, 2000], "fwd_ms": [1.0, 2.0], "bwd_ms": [2.0, 4.0]})
    cluster = sim.Cluster(gpus=4, alpha_s=1e-3, beta_s_per_byte=1e-9)
    return sim.simulate(sim.model_from_frame(layers, "two"), cluster, "mgwfbp", batch_size=8).timeline


@pytest.mark.browser
@pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))
@pytest.mark.parametrize("viewport", [{"width": 1280, "height": 800}, {"width": 390, "height": 844}])
def test_the_timeline_title_is_not_cut_off_at_the_top(browser, server, viewport):
    context = browser.new_context(viewport=viewport)
    context.set_default_timeout(90_000)
    page = context.new_page()
    try:
        page.goto(f"{server}/timeline")
        wait_idle(page)
        assert_no_exception(page)
        assert page.evaluate(_TITLE_TOP_JS, "timeline_chart") >= 0
    finally:
        context.close()
