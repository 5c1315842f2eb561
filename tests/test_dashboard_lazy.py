"""What the dashboard leaves out of a rerun to stay fast under load (issue 15, item 6):
a closed memory panel sends nothing, an open one its chart; closed download popovers and the
closed "start here" panel send no buttons and no text; the imports are
frozen out of the garbage collector's way once per process; a GPU change on the Scaling
page does not send the sweep's chart again."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import plotly.graph_objects as go
from streamlit.testing.v1 import AppTest

from dashboard import figures, warmup

REPO = Path(__file__).resolve().parent.parent


def timeline(**session) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    for key, value in {"model": "resnet50", "gpus": 16, "gpu": "v100-sxm2", **session}.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def chart_keys(at: AppTest) -> list[str]:
    return [el.proto.id.rsplit("-", 1)[-1] for el in at.get("plotly_chart")]


def test_a_closed_memory_panel_sends_no_chart():
    at = timeline()
    panel = [e for e in at.expander if e.label.startswith("Memory per GPU")]
    assert panel and "does NOT fit" not in panel[0].label
    assert "memory_chart" not in chart_keys(at)
    assert "mem_optimizer" not in [s.key for s in at.selectbox]
    assert chart_keys(at) == ["timeline_chart"]


def test_an_open_memory_panel_draws_its_chart_and_keeps_the_optimizer():
    at = timeline(memory_panel_fits=True)  # what a click on the closed panel leaves
    assert "memory_chart" in chart_keys(at)
    assert chart_keys(at) == ["timeline_chart", "memory_chart"]
    at.selectbox(key="mem_optimizer").set_value("adam").run()
    at.session_state["memory_panel_fits"] = False  # closed: the selectbox is gone ...
    at.run()
    assert "mem_optimizer" not in [s.key for s in at.selectbox]
    at.session_state["memory_panel_fits"] = True  # ... and opened again, the choice is still there
    at.run()
    assert at.selectbox(key="mem_optimizer").value == "adam"


def test_closed_popovers_and_panels_send_no_downloads_and_no_text():
    """Five download buttons and the "start here" text cost the browser about 50 ms per GPU change
    (bench/latency.py's Chromium CPU): closed, their popovers and panel send none of them."""
    at = timeline()
    assert not at.get("download_button")
    assert not any("New here?" in m.value for m in at.markdown)
    for key in ("export_timeline_chart", "downloads", "start_here"):  # what a click on each leaves
        at.session_state[key] = True
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert [el.proto.label for el in at.get("download_button")] == [
        "SVG", "PDF", "Metrics (CSV)", "Timeline (Chrome trace JSON)", "Timeline (CSV)"]
    assert any("New here?" in m.value for m in at.markdown)
    at.session_state["downloads"] = False  # closed again: its buttons go, the chart's stay
    at.run()
    assert [el.proto.label for el in at.get("download_button")] == ["SVG", "PDF"]


def test_the_imports_are_frozen_once_per_process():
    warmup.freeze_imports()
    assert gc.get_freeze_count() > 0
    assert warmup.freeze_imports() is False


def chart_ids(at: AppTest) -> dict[str, str]:
    """Chart key -> Streamlit element id (a hash of the figure: a new id is a chart drawn anew)."""
    return {el.proto.id.rsplit("-", 1)[-1]: el.proto.id for el in at.get("plotly_chart")}


def test_a_gpu_change_on_the_scaling_page_leaves_the_sweep_chart_as_it_is():
    at = timeline()
    at.switch_page(str(REPO / "pages" / "scaling.py")).run()
    before = chart_ids(at)
    at.session_state["gpus"] = 64
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    after = chart_ids(at)
    assert after["scaling_chart"] == before["scaling_chart"]  # not sent anew: the browser keeps it
    assert after["scaling_timeline"] != before["scaling_timeline"]  # the picked count's timeline is
    assert "64 GPUs" in json.loads(next(el.proto.spec for el in at.get("plotly_chart")
                                        if el.proto.id == after["scaling_timeline"]))["layout"]["title"]["text"]


class _Event:
    def __init__(self, *xs):
        self.selection = {"points": [{"x": x, "y": 1.0} for x in xs]}


def test_a_clicked_point_is_stale_once_the_gpu_count_changed_elsewhere():
    assert not figures.stale_selection(None, 16)
    assert not figures.stale_selection(_Event(), 16)
    assert not figures.stale_selection(_Event(16.0), 16)  # the click that set the count
    assert figures.stale_selection(_Event(256.0), 16)
    assert figures.stale_selection({"selection": {"points": [{"x": 8}]}}, 16)


def test_clearing_a_selection_changes_only_the_meta_of_a_copy():
    fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]), layout={"meta": {"aggregated": "note"}})
    assert figures.selection_cleared(fig, 0) is fig
    cleared = figures.selection_cleared(fig, 2)
    assert cleared is not fig and fig.layout.meta == {"aggregated": "note"}
    assert cleared.layout.meta == {"aggregated": "note", "selection_clears": 2}
    assert cleared.to_dict()["data"] == fig.to_dict()["data"]


def _spec(at: AppTest, key: str) -> tuple[dict, str]:
    el = next(el for el in at.get("plotly_chart") if el.proto.id.endswith(key))
    return json.loads(el.proto.spec), el.proto.theme


def test_the_timelines_carry_their_own_style_so_a_redraw_of_the_same_figure_is_cheap():
    """Streamlit draws a chart whose figure changed twice; Plotly.react redraws every bar the
    second time if the figure has a template (Streamlit's theme adds one) or typed arrays, or
    no datarevision. The two timelines a GPU change redraws have none of these."""
    at = timeline()
    spec, theme = _spec(at, "timeline_chart")
    assert theme == ""  # st.plotly_chart(theme=None): no template added in the browser
    assert spec["layout"].get("template") is None
    assert spec["layout"]["datarevision"] == "timeline_chart"
    assert "bdata" not in json.dumps(spec)  # plain JSON arrays, not base64 typed arrays
    assert spec["layout"]["font"] == figures.OWN_STYLE["font"]
    assert spec["layout"]["title"]["font"]["weight"] == 700  # bold, as the theme made it
    at.switch_page(str(REPO / "pages" / "scaling.py")).run()
    spec, theme = _spec(at, "scaling_timeline")
    assert theme == "" and spec["layout"].get("template") is None and "bdata" not in json.dumps(spec)
    assert spec["layout"]["datarevision"] == "scaling_timeline"
    assert _spec(at, "scaling_chart")[1] == "streamlit"  # the other charts keep Streamlit's theme
