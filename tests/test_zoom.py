"""Charts keep their zoom across control changes (`dashboard.zoom`): the server side.

The browser side (the relay reporting a mouse zoom, the new chart drawn zoomed) is
``tests/test_browser_zoom.py``."""

from __future__ import annotations

import json
from pathlib import Path

import plotly.graph_objects as go
import pytest
from streamlit.testing.v1 import AppTest

from dashboard import cached, zoom

REPO = Path(__file__).resolve().parent.parent


def gantt(end_ms: float = 100.0) -> go.Figure:
    """Two horizontal bars from 0 to ``end_ms`` on two lanes, as a Gantt chart draws them."""
    return go.Figure([go.Bar(y=["gpu0", "net"], x=[end_ms / 2, end_ms / 4], base=[0.0, end_ms * 3 / 4],
                             orientation="h")])


def session_at(run: int = 1, **kept) -> dict:
    return {zoom.RUN: run, zoom.STORE: {key: dict(axes) for key, axes in kept.items()}}


def test_record_keeps_ranges_per_key_and_none_forgets_an_axis():
    session: dict = {}
    zoom.record(session, {"a": {"xaxis": [1, 2], "yaxis": [0, 3]}, "b": {"xaxis2": [5, 6]}})
    assert session[zoom.STORE] == {"a": {"xaxis": [1.0, 2.0], "yaxis": [0.0, 3.0]}, "b": {"xaxis2": [5.0, 6.0]}}
    zoom.record(session, {"a": {"yaxis": None}})
    assert session[zoom.STORE] == {"a": {"xaxis": [1.0, 2.0]}, "b": {"xaxis2": [5.0, 6.0]}}
    zoom.record(session, {"a": {"xaxis": None}})  # a double-click: the chart is back to its full extent
    assert session[zoom.STORE] == {"b": {"xaxis2": [5.0, 6.0]}}


@pytest.mark.parametrize("changes", [
    {"a": {"title": [1, 2]}},  # not an axis
    {"a": {"xaxis": [1, 2, 3]}},
    {"a": {"xaxis": [1, float("nan")]}},
    {"a": {"xaxis": [True, 2]}},
    {"a": {"xaxis": "1,2"}},
    {"a": [1, 2]},
    {3: {"xaxis": [1, 2]}},
    "xaxis",
])
def test_record_ignores_what_is_not_a_range(changes):
    session = {zoom.STORE: {"a": {"xaxis": [7.0, 8.0]}}}
    zoom.record(session, changes)
    assert session[zoom.STORE] == {"a": {"xaxis": [7.0, 8.0]}}


def test_record_keeps_date_ranges_as_text():
    session: dict = {}
    zoom.record(session, {"a": {"xaxis": ["2026-01-01", "2026-02-01"]}})
    assert session[zoom.STORE] == {"a": {"xaxis": ["2026-01-01", "2026-02-01"]}}


def test_view_applies_the_kept_range_of_that_key_only():
    fig = gantt()
    session = session_at(a={"xaxis": [10.0, 40.0]})
    shown = zoom.view(session, "a", fig, signature=1)
    assert isinstance(shown, zoom.ZoomedFigure)
    xaxis = shown.to_dict()["layout"]["xaxis"]
    assert xaxis["range"] == [10.0, 40.0] and xaxis["autorange"] is False
    assert zoom.view(session, "b", fig, signature=1) is fig


def test_view_never_changes_the_shared_figure():
    key = ("test_zoom", "shared")
    fig = cached.figure(key, gantt)
    before = fig.to_json()
    spec = zoom.view(session_at(a={"xaxis": [10.0, 40.0], "yaxis": [-0.5, 0.5]}), "a", fig, signature=hash(key)).to_dict()
    assert spec["layout"]["xaxis"]["range"] == [10.0, 40.0]
    assert spec["data"] == fig.to_dict()["data"]
    assert cached.figure(key, gantt) is fig
    assert fig.to_json() == before
    assert fig.layout.xaxis.range is None and fig.layout.yaxis.range is None


def test_the_same_figure_in_the_next_run_keeps_the_ranges_it_was_drawn_with():
    """The rerun a zoom causes must not change the chart (its identity), or the browser redraws it."""
    fig, session = gantt(), session_at(run=1)
    assert zoom.view(session, "a", fig, signature="v1") is fig
    zoom.record(session, {"a": {"xaxis": [10.0, 40.0]}})  # the user zoomed; Plotly shows it already
    session[zoom.RUN] = 2
    assert zoom.view(session, "a", fig, signature="v1") is fig
    session[zoom.RUN] = 3  # a control changed the figure: drawn zoomed
    changed = zoom.view(session, "a", gantt(90.0), signature="v2")
    assert changed.to_dict()["layout"]["xaxis"]["range"] == [10.0, 40.0]
    session[zoom.RUN] = 5  # the chart was not drawn in run 4 (another page): drawn afresh, with the kept range
    zoom.record(session, {"a": {"xaxis": [20.0, 30.0]}})
    assert zoom.view(session, "a", gantt(90.0), signature="v2").to_dict()["layout"]["xaxis"]["range"] == [20.0, 30.0]


def test_a_reset_zoom_draws_the_next_figure_at_full_extent():
    session = session_at(a={"xaxis": [10.0, 40.0]})
    assert isinstance(zoom.view(session, "a", gantt(), signature="v1"), zoom.ZoomedFigure)
    zoom.record(session, {"a": {"xaxis": None}})
    session[zoom.RUN] += 1
    fig = gantt(90.0)
    assert zoom.view(session, "a", fig, signature="v2") is fig


def test_a_range_off_the_new_data_is_dropped_and_one_overlapping_kept():
    session = session_at(a={"xaxis": [150.0, 180.0]}, b={"xaxis": [80.0, 180.0]})
    fig = gantt(100.0)  # the data end at 100 ms
    assert zoom.view(session, "a", fig, signature="v") is fig
    assert "a" not in session[zoom.STORE]
    assert zoom.view(session, "b", fig, signature="v").to_dict()["layout"]["xaxis"]["range"] == [80.0, 180.0]


def test_data_extent_of_bars_lines_and_log_axes():
    assert zoom.data_extent(gantt(100.0), "xaxis") == (0.0, 100.0)
    assert zoom.data_extent(gantt(100.0), "yaxis") == (0.0, 1.0)  # two lanes: categories at 0 and 1
    bars = go.Figure([go.Bar(x=["a", "b"], y=[3.0, -1.0])])
    assert zoom.data_extent(bars, "yaxis") == (-1.0, 3.0)
    lines = go.Figure([go.Scatter(x=[1, 10, 1000], y=[5, 6, 7]), go.Scatter(x=[2, 3], y=[8, 9], xaxis="x2")])
    lines.update_layout(xaxis={"type": "log"}, xaxis2={})
    assert zoom.data_extent(lines, "xaxis") == (0.0, 3.0)
    assert zoom.data_extent(lines, "xaxis2") == (2.0, 3.0)
    assert zoom.data_extent(lines, "yaxis") == (5.0, 9.0)
    assert zoom.data_extent(lines, "yaxis3") is None  # no trace there


def test_content_signature_follows_the_figure():
    assert zoom.content_signature(gantt(100.0)) == zoom.content_signature(gantt(100.0))
    assert zoom.content_signature(gantt(100.0)) != zoom.content_signature(gantt(90.0))


def _timeline_xaxis(at: AppTest) -> dict:
    chart = next(c for c in at.get("plotly_chart") if "timeline_chart" in c.proto.id)
    return json.loads(chart.proto.spec)["layout"]["xaxis"]


def test_two_sessions_share_the_cached_timeline_but_not_its_zoom():
    zoomed = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    zoomed.session_state[zoom.STORE] = {"timeline_chart": {"xaxis": [10.0, 20.0]}}
    zoomed.run()
    assert not zoomed.exception
    assert _timeline_xaxis(zoomed)["range"] == [10.0, 20.0]
    other = AppTest.from_file(str(REPO / "app.py"), default_timeout=120).run()
    assert not other.exception
    assert "range" not in _timeline_xaxis(other)
    assert zoom.STORE not in other.session_state or not other.session_state[zoom.STORE]


def test_stacked_bars_extend_to_their_sum():
    """Forward and backward stacked on one row reach their sum (the Model page's compute row)."""
    fig = go.Figure([go.Bar(x=["conv1", "fc"], y=[0.97, 0.3]), go.Bar(x=["conv1", "fc"], y=[1.94, 0.6])])
    fig.update_layout(barmode="stack")
    assert zoom.data_extent(fig, "yaxis") == pytest.approx((0.0, 2.91), rel=1e-12)
    session = session_at(2, chart={"yaxis": [2.16, 3.01]})  # a window above the taller single bar
    assert isinstance(zoom.view(session, "chart", fig, "fig"), zoom.ZoomedFigure)
    assert session[zoom.STORE] == {"chart": {"yaxis": [2.16, 3.01]}}


def test_a_window_past_the_last_category_is_dropped():
    """Three rows, then one: a window over rows 2 to 3 would show no bar at all."""
    rows = go.Figure([go.Bar(y=["a"], x=[5.0], orientation="h")])
    session = session_at(2, breakdown={"yaxis": [1.97, 3.42], "xaxis": [0.0, 4.0]})
    shown = zoom.view(session, "breakdown", rows, "one row")
    assert shown.to_dict()["layout"]["xaxis"]["range"] == [0.0, 4.0] and "range" not in shown.to_dict()["layout"].get(
        "yaxis", {})
    assert session[zoom.STORE] == {"breakdown": {"xaxis": [0.0, 4.0]}}


def test_an_axis_whose_subplot_is_gone_forgets_its_range():
    """Four linked timelines zoomed, two removed: their axes' ranges are forgotten, not kept for later."""
    four = go.Figure([go.Bar(x=[100.0], y=["a"], orientation="h", xaxis=f"x{i}" if i > 1 else "x") for i in (1, 2)])
    session = session_at(2, timelines={f"xaxis{i}" if i > 1 else "xaxis": [81.6, 163.2] for i in (1, 2, 3, 4)})
    zoom.view(session, "timelines", four, "two plots")
    assert session[zoom.STORE] == {"timelines": {"xaxis": [81.6, 163.2], "xaxis2": [81.6, 163.2]}}


def test_the_store_is_bounded():
    """A crafted report of many charts and axes keeps at most MAX_CHARTS charts and real axis names."""
    session: dict = {}
    for round_ in range(3):
        zoom.record(session, {f"c{round_}-{i}": {"xaxis": [0, 1], "xaxis123": [0, 1], "zaxis": [0, 1]}
                              for i in range(10_000)})
    store = session[zoom.STORE]
    assert len(store) == zoom.MAX_CHARTS
    assert all(axes == {"xaxis": [0.0, 1.0]} for axes in store.values())
    zoom.record(session, {"k" * (zoom.MAX_KEY_CHARS + 1): {"xaxis": [0, 1]}})
    assert len(session[zoom.STORE]) == zoom.MAX_CHARTS and "k" * (zoom.MAX_KEY_CHARS + 1) not in session[zoom.STORE]
