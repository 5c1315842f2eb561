"""Charts keep their zoom when a control changes what they show (issue 15, item 5).

Streamlit 1.67 hashes a Plotly figure into its chart's identity: a figure with other
data is a new chart in the browser, drawn at full extent, and Plotly's ``uirevision``
keeps a zoom only within one chart. So the zoom is kept on the server, per chart key
and per session:

* `relay` mounts, once per run of the frame (``app.py``), an invisible
  ``st.components.v2`` module (``zoom_relay.js``, in this folder: no iframe, no build,
  no network). In the page, it binds a chart's ``plotly_relayout`` when the user first
  touches the chart and reports the axes the user zoomed, panned or reset, debounced,
  as one trigger value ``{chart key: {axis: [lo, hi] or None}}``: a rerun only when the
  user changed a view. `record` keeps them in ``st.session_state[STORE]``; None (a
  double-click, the modebar's autoscale) forgets that axis.
* `view` (called by `dashboard.ui.chart`) draws a chart whose figure is new since the
  last run with the kept ranges of its key (``range``, ``autorange: False``) through a
  `ZoomedFigure`: the shared figure of `dashboard.cached.figure` is never changed, and its
  data are not copied beyond what Streamlit copies anyway. A chart drawn again with the
  same figure gets the same ranges as last time, so its identity does not change and
  Plotly keeps whatever the user did since (``uirevision``): the rerun a zoom causes
  does not redraw the chart.
* The rule for data that moved away: a kept range that does not overlap the new
  figure's data on that axis at all (a shorter iteration than the zoomed window's
  start, say) is dropped, and that axis is drawn at full extent. A range that overlaps
  is kept as it is. Axes whose data are not numbers (categories, dates) keep their range.
* A chart drawn zoomed double-clicks to its full extent (Plotly's ``doubleClick:
  "autosize"``; its default would go back to the kept range first).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Hashable, MutableMapping
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

__all__ = ["STORE", "ZoomedFigure", "content_signature", "data_extent", "record", "relay", "view"]

#: Session keys: the kept ranges ({chart key: {axis: [lo, hi]}}), what each chart was last
#: drawn with ({chart key: (figure signature, run, ranges)}) and the number of the frame's run.
STORE = "chart_zoom"
DRAWN = "chart_zoom_drawn"
RUN = "chart_zoom_run"

RELAY_KEY = "zoom_relay"
_AXIS = re.compile(r"[xy]axis(?:[2-9]|[1-9]\d)?")  # xaxis .. xaxis99: more subplots than any page draws
#: At most this many charts keep a zoom per session (the least recently zoomed go first), and a
#: chart key is at most this long: a crafted report cannot grow the session without bound.
MAX_CHARTS = 64
MAX_KEY_CHARS = 200
_JS = Path(__file__).with_name("zoom_relay.js")
_component = None


def relay(session) -> None:
    """Mount the zoom relay (once per run, before the page's charts) and keep what it reports."""
    global _component
    import streamlit as st

    if _component is None:
        _component = st.components.v2.component("ssgd_zoom_relay", js=_JS.read_text(encoding="utf-8"))
    session[RUN] = session.get(RUN, 0) + 1
    result = _component(key=RELAY_KEY, on_zoom_change=_ignore)  # hidden: dashboard.ui.PHONE_CSS
    changes = getattr(result, "zoom", None)
    if changes:
        record(session, changes)


def _ignore() -> None:
    """The trigger's callback: the value is read from the component's result (`relay`)."""


def _clean_range(value) -> list | None:
    """``value`` as a [lo, hi] pair of numbers or strings (dates), or None."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return None
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
        return [float(value[0]), float(value[1])]
    if all(isinstance(v, str) and len(v) < 64 for v in value):
        return list(value)
    return None


def record(session: MutableMapping, changes) -> None:
    """Keep the relay's ``{chart key: {axis: [lo, hi] or None}}`` in ``session[STORE]``;
    None forgets that axis. Anything else the browser might send is ignored."""
    if not isinstance(changes, dict):
        return
    store = dict(session.get(STORE) or {})
    for key, axes in list(changes.items())[:MAX_CHARTS]:
        if not isinstance(key, str) or len(key) > MAX_KEY_CHARS or not isinstance(axes, dict):
            continue
        kept = dict(store.get(key) or {})
        for axis, value in axes.items():
            if not isinstance(axis, str) or not _AXIS.fullmatch(axis):
                continue
            if value is None:
                kept.pop(axis, None)
            elif (rng := _clean_range(value)) is not None:
                kept[axis] = rng
        store.pop(key, None)  # (re-inserted last: the most recently zoomed)
        if kept:
            store[key] = kept
    while len(store) > MAX_CHARTS:
        store.pop(next(iter(store)))
    session[STORE] = store


class ZoomedFigure(go.Figure):
    """A shared figure seen with other axis ranges: ``to_dict`` (what ``st.plotly_chart``
    serialises) is the shared figure's, with ``ranges`` ({axis: [lo, hi]}) set. The shared
    figure is not changed; this one holds no data of its own."""

    def __init__(self, base: go.Figure, ranges: dict):
        super().__init__()
        self._zoom_base = base
        self._zoom_ranges = ranges

    def to_dict(self) -> dict:
        spec = self._zoom_base.to_dict()  # a copy (Plotly's own deep copy)
        layout = spec.setdefault("layout", {})
        for axis, rng in self._zoom_ranges.items():
            layout[axis] = {**layout.get(axis, {}), "range": list(rng), "autorange": False}
        return spec


def _axis_ref(axis: str) -> str:
    """The trace attribute value that puts a trace on ``axis``: xaxis2 -> x2."""
    return axis[0] + axis[len("xaxis"):]


def _values(trace, name: str):
    """The numbers of a trace's ``name`` attribute as floats, or None (absent, not numbers)."""
    raw = getattr(trace, name, None) if name in getattr(trace, "_valid_props", ()) else None
    if raw is None:
        return None
    try:
        values = np.asarray(raw, dtype=float).ravel()
    except (TypeError, ValueError):
        return None
    return values[np.isfinite(values)]


def _along(trace, letter: str) -> bool:
    """Whether ``trace`` is a bar chart whose bars extend along the ``letter`` axis."""
    orientation = getattr(trace, "orientation", None) if "orientation" in trace._valid_props else None
    return trace.type == "bar" and (orientation or "v") == ("h" if letter == "x" else "v")


def _trace_extent(trace, letter: str) -> tuple[float, float] | None:
    values = _values(trace, letter)
    if values is None:
        return None
    if _along(trace, letter):  # a bar spans base .. base + value
        base = _values(trace, "base")
        base = np.zeros(1) if base is None or not len(base) else base
        ends = np.concatenate([base, (values + base) if len(base) in (1, len(values)) else values])
        values = ends
    if not len(values):
        return None
    return float(values.min()), float(values.max())


def _stacked_extent(traces, letter: str) -> tuple[float, float] | None:
    """The extent of bars stacked along ``letter`` (``barmode`` stack or relative): per position on
    the other axis, positive values add up above zero and negative ones below."""
    other = "y" if letter == "x" else "x"
    up: dict = {}
    down: dict = {}
    for trace in traces:
        values = np.asarray(getattr(trace, letter), dtype=float).ravel()
        at = getattr(trace, other, None)
        at = range(len(values)) if at is None else list(np.asarray(at).ravel())
        for where, v in zip(at, values.tolist(), strict=False):
            if math.isfinite(v):
                side = up if v >= 0 else down
                side[where] = side.get(where, 0.0) + v
    if not up and not down:
        return None
    return min([0.0, *down.values()]), max([0.0, *up.values()])


def _categories(fig: go.Figure, traces, axis: str, letter: str) -> tuple[float, float] | None:
    """A category axis's extent: its categories sit at 0, 1, ... (None: dates, or nothing to tell)."""
    layout = _axis_layout(fig, axis)
    if getattr(layout, "type", None) == "date":
        return None
    names: dict = {}
    for trace in traces:
        raw = getattr(trace, letter, None)
        names.update(dict.fromkeys([] if raw is None else np.asarray(raw, dtype=object).ravel().tolist()))
    first = next((name for name in names if isinstance(name, str)), None)
    if first is not None and getattr(layout, "type", None) != "category":
        try:
            np.datetime64(first)
            return None  # dates: kept as they are
        except ValueError:
            pass
    shown = getattr(layout, "categoryarray", None)
    count = len(shown) if shown is not None and getattr(layout, "categoryorder", None) == "array" else len(names)
    return (0.0, float(count - 1)) if count else None


def _axis_layout(fig: go.Figure, axis: str):
    """``fig.layout[axis]``, or None for an axis the layout does not define."""
    try:
        return fig.layout[axis]
    except KeyError:
        return None


def _traces_on(fig: go.Figure, axis: str) -> list:
    ref, letter = _axis_ref(axis), axis[0]
    return [t for t in fig.data if letter in t._valid_props and (getattr(t, f"{letter}axis", None) or letter) == ref]


def data_extent(fig: go.Figure, axis: str) -> tuple[float, float] | None:
    """The smallest and largest data value of ``fig`` on ``axis`` (in the axis's own units:
    log10 on a log axis; category positions 0, 1, ... on a category axis; stacked bars
    summed), or None when the traces there give nothing to tell (dates, say)."""
    letter = axis[0]
    traces = _traces_on(fig, axis)
    if not traces:
        return None
    if any(_values(t, letter) is None and getattr(t, letter, None) is not None for t in traces):
        return _categories(fig, traces, axis, letter)
    stacked = [t for t in traces if _along(t, letter)] if fig.layout.barmode in ("stack", "relative") else []
    apart = {id(t) for t in stacked}
    extents = [_trace_extent(t, letter) for t in traces if id(t) not in apart]
    if stacked:
        extents.append(_stacked_extent(stacked, letter))
    if any(e is None for e in extents):
        return None
    lo, hi = min(e[0] for e in extents), max(e[1] for e in extents)
    if getattr(_axis_layout(fig, axis), "type", None) == "log":
        if hi <= 0:
            return None
        lo, hi = math.log10(lo) if lo > 0 else -math.inf, math.log10(hi)
    return lo, hi


def _overlaps(fig: go.Figure, axis: str, rng: list) -> bool:
    if not all(isinstance(v, float) for v in rng):
        return True  # dates: kept as they are
    extent = data_extent(fig, axis)
    if extent is None:
        return True
    lo, hi = sorted(rng)
    return lo <= extent[1] and hi >= extent[0]


def content_signature(fig: go.Figure) -> str:
    """A digest of everything ``fig`` draws (for a figure not kept by `dashboard.cached.figure`)."""
    return hashlib.blake2b(pio.to_json(fig, validate=False).encode(), digest_size=16).hexdigest()


def view(session: MutableMapping, key: str, fig: go.Figure, signature: Hashable | None = None) -> go.Figure:
    """What to draw for the chart ``key`` whose figure is ``fig``: ``fig`` itself, or a
    `ZoomedFigure` of it with the kept ranges of ``key``.

    ``signature`` names the figure (a cached figure's key); without it, the figure's content
    is hashed, and only while ``key`` has ranges to keep. A figure drawn in the previous run
    with the same signature gets the ranges it had then: the chart stays the same one in the
    browser, which keeps what the user did since. Otherwise it gets the kept ranges that
    overlap its data; the others are dropped from `STORE`."""
    run = session.get(RUN, 0)
    drawn = dict(session.get(DRAWN) or {})
    last = drawn.get(key)
    kept = (session.get(STORE) or {}).get(key) or {}
    if signature is None and (kept or (last and last[2])):
        signature = content_signature(fig)
    if signature is not None and last is not None and last[0] == signature and last[1] == run - 1:
        ranges = last[2]
    else:
        # an axis no trace is drawn on (a subplot that is gone) forgets its range: it would come back stale
        ranges = {axis: rng for axis, rng in kept.items() if _traces_on(fig, axis) and _overlaps(fig, axis, rng)}
        if len(ranges) != len(kept):
            record(session, {key: {axis: None for axis in kept if axis not in ranges}})
    drawn[key] = (signature, run, ranges)
    session[DRAWN] = drawn
    return ZoomedFigure(fig, ranges) if ranges else fig
