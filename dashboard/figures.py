"""Pure figure builders: DataFrame (or DAG) in, plotly Figure out. No Streamlit here.

Times are drawn in milliseconds. Every timeline figure reads the one timeline
schema of `sim.timeline` (``kind, layer, group, resource, start_s, end_s,
duration_s, bytes, iteration``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import networkx as nx
import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.aggregate import BINS, MAX_BARS, Aggregation, merge_bars, merge_pieces
from dashboard.tables import (
    MAX_LAYER_BARS,
    binned_layers,
    fmt_bytes,
    fmt_change_pct,
    overlap_pct,
    short_layers,
)
from sim.core.intervals import union
from sim.core.messages import ELIDED
from sim.core.timeline import COMPUTE_KINDS
from sim.schedulers.names import BUCKET, MGWFBP, OPTIMAL, SEQUENTIAL, SYNCEASGD, WFBP

__all__ = [
    "KIND_COLORS",
    "LANES",
    "MAX_BARS",
    "OWN_STYLE",
    "aggregation_note",
    "display_frames",
    "tune_figure",
    "SCHEDULER_COLORS",
    "alpha_sweep_figure",
    "breakdown_figure",
    "breakdown_frame",
    "comm_overlap_segments",
    "dag_figure",
    "dag_positions",
    "gantt_figure",
    "gantt_frame",
    "gantt_svg",
    "gantt_stack_figure",
    "layer_figure",
    "mark_gpus",
    "scaling_figure",
    "selection_cleared",
    "shading_runs",
    "stale_selection",
    "styled",
]

KIND_COLORS = {
    "io": "#9D755D",
    "h2d": "#B279A2",
    "forward": "#4C78A8",
    "backward": "#F58518",
    "update": "#54A24B",
    "comm": "#E45756",
}
KIND_LABELS = {
    "io": "read batch (I/O)",
    "h2d": "copy to GPU (H2D)",
    "forward": "forward",
    "backward": "backward",
    "update": "update",
    "comm": "all-reduce",
}
#: Resource -> lane name, top to bottom.
LANES = {"io": "I/O", "h2d": "H2D copy", "compute": "GPU compute", "comm": "all-reduce",
         "push": "PS push", "pull": "PS pull", "launch": "launch (host)"}
SCHEDULER_COLORS = {
    SEQUENTIAL: "#7F7F7F",
    WFBP: "#1F77B4",
    SYNCEASGD: "#9467BD",
    MGWFBP: "#D62728",
    OPTIMAL: "#2CA02C",
    BUCKET: "#FF7F0E",
}
#: Communication shaded by overlap: hidden behind compute (light) or exposed (the GPU waits).
HIDDEN_COLOR = "#F4A6A6"
EXPOSED_COLOR = KIND_COLORS["comm"]
#: Legends go below the plot, where they cannot cover a title.
LEGEND_BELOW = {"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0}
#: Compute bars carry their layer name only up to this many per kind (text costs render time).
MAX_LABELLED_BARS = 20
IDEAL_STYLE = {"color": "#444444", "dash": "dot", "width": 1.5}
_HOVER = (
    "<b>%{customdata[0]}</b> %{customdata[1]}<br>"
    "bytes: %{customdata[2]}<br>"
    "start: %{customdata[3]:.3f} ms<br>"
    "duration: %{customdata[4]:.3f} ms<br>"
    "iteration %{customdata[5]}<extra></extra>"
)


_FONT = '"Source Sans", sans-serif'
_AXIS_STYLE = {"showgrid": False, "zeroline": False, "automargin": True, "ticklabelposition": "outside",
               "tickfont": {"family": _FONT, "size": 12, "color": "#808495"}}
#: The look Streamlit's chart theme gives a figure in the light theme (read from the page's
#: ``_fullLayout``), written into the layout itself, without a template. A timeline drawn with its
#: own style goes to ``st.plotly_chart(theme=None)`` (`dashboard.ui.chart`, ``own_style``): the
#: theme puts a template into the figure, and Plotly.react redraws every bar of a figure that has
#: one even when nothing changed, which Streamlit's chart does a second time after every remount.
OWN_STYLE = {
    "font": {"family": _FONT, "size": 12, "color": "#808495"},
    "title": {"font": {"family": _FONT, "size": 16, "color": "#2F2D2B", "weight": 700}},
    "paper_bgcolor": "#FFFFFF",
    "plot_bgcolor": "#FFFFFF",
    "legend": {"font": {"family": _FONT, "size": 12, "color": "#262730"}, "bgcolor": "#FFFFFF",
               "bordercolor": "rgba(0,0,0,0)", "valign": "top"},
    "hoverlabel": {"bgcolor": "#FFFFFF", "bordercolor": "#DCD8D4",
                   "font": {"family": _FONT, "size": 12, "color": "#808495"}},
    "hovermode": "closest",
    "xaxis": {**_AXIS_STYLE, "title": {"font": {"family": _FONT, "size": 14, "color": "#808495"}, "standoff": 20}},
    "yaxis": {**_AXIS_STYLE, "title": {"font": {"family": _FONT, "size": 14, "color": "#808495"}, "standoff": 24}},
    "margin": {"pad": 8},
}


def styled(layout: dict, style: Mapping = OWN_STYLE) -> dict:
    """``layout`` over ``style``: nested dicts merged, the layout's own values kept."""
    out = dict(style)
    for key, value in layout.items():
        out[key] = styled(value, style[key]) if isinstance(value, dict) and isinstance(style.get(key), dict) else value
    return out


def _darker(hex_color: str, factor: float = 0.7) -> str:
    """``'#4C78A8'`` -> the same hue, darker (bar outlines that stay visible on thin bars)."""
    rgb = [int(hex_color[i:i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{int(c * factor):02X}" for c in rgb)


def _scheduler_color(name: str, i: int = 0) -> str:
    palette = ["#1F77B4", "#D62728", "#2CA02C", "#9467BD", "#FF7F0E", "#8C564B", "#E377C2"]
    return SCHEDULER_COLORS.get(name, palette[i % len(palette)])


# --- timelines -----------------------------------------------------------------


def gantt_frame(timeline: pd.DataFrame, texts: bool = True) -> pd.DataFrame:
    """One row per task of non-zero duration, ready to draw.

    Adds ``lane``, ``start_ms``, ``duration_ms`` and, with ``texts``, ``label``
    (a message bar's text: ``"g3 (5 layers)"`` when merged, else its layer's
    name), ``what`` (layer or message contents for the hover) and ``bytes_text``
    (`display_frames` leaves the texts out of a timeline it merges, and writes
    those of the merged bars only).
    """
    df = timeline.loc[timeline["duration_s"] > 0].copy()
    df["lane"] = df["resource"].map(LANES).fillna(df["resource"])
    df["start_ms"] = df["start_s"] * 1e3
    df["duration_ms"] = df["duration_s"] * 1e3
    layers = df["layer"].fillna("").astype(str)
    is_comm = df["kind"] == "comm"
    if not texts:
        df["what"] = layers.where(layers != "", df["kind"].map(KIND_LABELS))
        return df.reset_index(drop=True)
    n_layers = layers.str.count(r"\+") + 1
    df["n_layers"] = np.where(is_comm, n_layers, 1)
    df["label"] = ""
    df.loc[is_comm, "label"] = [
        f"g{g} (many layers)" if ELIDED in name else f"g{g} ({n} layers)" if n > 1 else name
        for g, n, name in zip(df.loc[is_comm, "group"], n_layers[is_comm], layers[is_comm], strict=True)
    ]
    joined = layers.str.contains("+", regex=False)
    what = layers.where(~joined, layers[joined].map(short_layers))
    what = what.where(~is_comm, "g" + df["group"].astype(str) + ": " + what)
    what = what.where(layers != "", df["kind"].map(KIND_LABELS))
    df["what"] = what
    df["bytes_text"] = [fmt_bytes(b) if b else "—" for b in df["bytes"]]
    return df.reset_index(drop=True)


def _split(starts: np.ndarray, ends: np.ndarray, cs: np.ndarray, ce: np.ndarray):
    """Every ``[start, end]`` cut against disjoint compute intervals: ``(which, start, end, hidden)``
    arrays of the pieces of non-zero length, in order. The compute intervals and the gaps
    between them partition the time axis; a task's pieces are its overlaps with those parts."""
    edges = np.concatenate(([-np.inf], np.column_stack((cs, ce)).ravel(), [np.inf]))
    lo = np.searchsorted(edges, starts, side="right") - 1  # the part each task starts in
    hi = np.searchsorted(edges, ends, side="left") - 1  # the part it ends in
    counts = np.maximum(hi - lo + 1, 0)
    which = np.repeat(np.arange(len(starts)), counts)
    part = np.repeat(lo - np.cumsum(np.concatenate(([0], counts[:-1]))), counts) + np.arange(counts.sum())
    a = np.maximum(starts[which], edges[part])
    b = np.minimum(ends[which], edges[part + 1])
    keep = b > a
    return which[keep], a[keep], b[keep], (part[keep] % 2) == 1  # odd parts are compute intervals


def _owners(timeline: pd.DataFrame) -> np.ndarray:
    """Each task's worker, a task of worker -1 (shared by all) set against the first worker, as the
    metrics do (0 without a ``worker`` column)."""
    if "worker" not in timeline.columns:
        return np.zeros(len(timeline), np.int64)
    workers = timeline["worker"].to_numpy()
    own = workers[workers >= 0]
    return np.where(workers >= 0, workers, own.min() if len(own) else 0)


def comm_overlap_segments(timeline: pd.DataFrame) -> pd.DataFrame:
    """Every communication task cut into the pieces hidden behind computation and the
    pieces exposed (no computation under way on the same worker), as HTA counts them.

    Returns one row per piece: ``task`` (the index of the comm row in ``timeline``),
    ``start_s``, ``end_s``, ``duration_s`` and ``hidden`` (bool). Computation is
    forward, backward and update (`sim.core.timeline.COMPUTE_KINDS`); a ``worker``
    column, when present, keeps workers apart, and a task of worker -1 (shared by
    all, as in the identical-worker timeline) is set against the first worker, as
    the metrics do. The hidden pieces of a task add up to its overlap with the
    union of the worker's compute intervals.
    """
    workers = pd.Series(_owners(timeline), index=timeline.index)
    rows = []
    for worker in pd.unique(workers):
        mine = timeline.loc[workers == worker]
        compute = mine.loc[mine["kind"].isin(COMPUTE_KINDS) & (mine["duration_s"] > 0)]
        cs, ce = union(compute["start_s"].to_numpy(float), compute["end_s"].to_numpy(float))
        comm = mine.loc[(mine["kind"] == "comm") & (mine["duration_s"] > 0)]
        which, a, b, hidden = _split(comm["start_s"].to_numpy(float), comm["end_s"].to_numpy(float), cs, ce)
        rows.append(pd.DataFrame({"task": comm.index.to_numpy()[which], "start_s": a, "end_s": b,
                                  "duration_s": b - a, "hidden": hidden}))
    if not rows:
        return pd.DataFrame({"task": pd.Series(dtype=int), "start_s": pd.Series(dtype=float),
                             "end_s": pd.Series(dtype=float), "duration_s": pd.Series(dtype=float),
                             "hidden": pd.Series(dtype=bool)})
    return pd.concat(rows, ignore_index=True)


def comm_wait_segments(bars: pd.DataFrame) -> pd.DataFrame:
    """The waits the metrics count as exposed communication (``comm_wait_s``): per worker and
    iteration with one update, the time from the end of backward to the update's start with no
    message on the wire (a message held for Horovod's negotiation tick), as exposed pieces
    (``task`` -1) on the lane of the iteration's messages.

    Spans that one lane's messages fill (every scheduler without a tick) are set aside from
    sums alone; only the others are cut message by message."""
    kind = bars["kind"].to_numpy()
    _, key = np.unique(np.column_stack([_owners(bars), bars["iteration"].to_numpy()]), axis=0, return_inverse=True)
    key = key.ravel()
    n = int(key.max()) + 1 if len(key) else 0
    start, end = bars["start_s"].to_numpy(float), bars["end_s"].to_numpy(float)
    lo, hi = np.full(n, -np.inf), np.full(n, np.inf)
    np.maximum.at(lo, key[kind == "backward"], end[kind == "backward"])
    np.minimum.at(hi, key[kind == "update"], start[kind == "update"])
    ok = (np.bincount(key[kind == "update"], minlength=n) == 1) & np.isfinite(lo) & (hi > lo)
    comm = np.flatnonzero((kind == "comm") & ok[key])
    if not len(comm):
        return pd.DataFrame()
    k = key[comm]
    covered = np.bincount(k, np.clip(np.minimum(end[comm], hi[k]) - np.maximum(start[comm], lo[k]), 0.0, None), n)
    lanes = bars["lane"].to_numpy()[comm]
    pairs = np.unique(np.column_stack([k, pd.factorize(lanes)[0]]), axis=0)
    several = np.bincount(pairs[:, 0], minlength=n) > 1  # two lanes at once may overlap: cut them exactly
    rows = []
    for kk in np.flatnonzero(ok & (np.bincount(k, minlength=n) > 0) & ((covered < hi - lo) | several)).tolist():
        mine = comm[k == kk]
        a, b = lo[kk], hi[kk]
        cs, ce = union(start[mine], end[mine])
        edges = np.concatenate([[a], np.clip(np.ravel(np.column_stack([cs, ce])), a, b), [b]])
        gap_lo, gap_hi = edges[0::2], edges[1::2]  # the spans between messages, clipped to [lo, hi]
        keep = gap_hi > gap_lo
        rows.append(pd.DataFrame({"task": -1, "start_s": gap_lo[keep], "end_s": gap_hi[keep],
                                  "duration_s": gap_hi[keep] - gap_lo[keep], "hidden": False,
                                  "lane": lanes[k == kk][-1]}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def display_frames(timeline: pd.DataFrame, max_bars: int = MAX_BARS):
    """What a timeline chart draws: ``(bars, pieces, aggregation)``.

    ``bars`` is `gantt_frame`'s, ``pieces`` the communication cut into hidden and
    exposed parts (`comm_overlap_segments`, with each piece's ``lane``). Above
    ``max_bars`` bars both are merged into time bins (`dashboard.aggregate`) and
    ``aggregation`` says so; otherwise it is None.
    """
    big = int((timeline["duration_s"] > 0).sum()) > max_bars
    bars = gantt_frame(timeline, texts=not big)
    pieces = comm_overlap_segments(bars)
    pieces["lane"] = bars.loc[pieces["task"], "lane"].to_numpy() if len(pieces) else []
    waits = comm_wait_segments(bars)
    if len(waits):
        pieces = pd.concat([pieces, waits], ignore_index=True)
    if not big:
        return bars, pieces, None
    merged = merge_bars(bars)
    span = float((bars["start_ms"] + bars["duration_ms"]).max() - bars["start_ms"].min())
    return merged, merge_pieces(pieces), Aggregation(len(bars), len(merged), span / BINS)


def shading_runs(pieces: pd.DataFrame) -> pd.DataFrame:
    """The pieces of one shading (`comm_overlap_segments` with a ``lane``) joined where they touch
    or overlap in a lane: ``lane, start_s, end_s``. Drawn without outlines, the joined bars look the
    same as the pieces; the browser draws a few bars instead of one per message (162 -> 2 for
    ResNet-50 under wfbp, whose messages follow each other)."""
    rows = []
    for lane, part in pieces.groupby("lane", sort=False):
        starts, ends = union(part["start_s"].to_numpy(float), part["end_s"].to_numpy(float))
        rows.append(pd.DataFrame({"lane": lane, "start_s": starts, "end_s": ends}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=["lane", "start_s", "end_s"])


def _overlap_traces(pieces: pd.DataFrame, showlegend: bool) -> list[dict]:
    """Communication bars filled by overlap: the hidden pieces light, the exposed ones dark
    (touching pieces of one shading drawn as one bar, `shading_runs`; the hover is the outline's)."""
    traces = []
    # a parameter server's lanes are its pushes and pulls, each shaded on its own lane
    what = "push and pull" if set(pieces["lane"]) & {LANES["push"], LANES["pull"]} else "all-reduce"
    for hidden, label, color in ((True, f"{what} hidden behind compute", HIDDEN_COLOR),
                                 (False, f"{what} exposed (GPU waits)", EXPOSED_COLOR)):
        part = shading_runs(pieces.loc[pieces["hidden"] == hidden])
        if part.empty:
            continue
        traces.append(dict(
            type="bar", name=label, legendgroup=f"overlap-{'hidden' if hidden else 'exposed'}", showlegend=showlegend,
            orientation="h", y=part["lane"].tolist(), x=((part["end_s"] - part["start_s"]) * 1e3).tolist(),
            base=(part["start_s"] * 1e3).tolist(), marker={"color": color, "line": {"width": 0}}, hoverinfo="skip",
        ))
    return traces


def _gantt_traces(bars: pd.DataFrame, pieces: pd.DataFrame, *, showlegend: bool = True) -> list[dict]:
    """One trace per kind of task; communication is drawn as outlines over its
    hidden and exposed pieces (`display_frames`), which carry the legend."""
    traces = _overlap_traces(pieces, showlegend)
    merged = "tasks" in bars.columns
    for kind in KIND_COLORS:
        part = bars.loc[bars["kind"] == kind]
        if part.empty:
            continue
        labelled = kind == "comm" or len(part) <= MAX_LABELLED_BARS
        traces.append(
            dict(
                type="bar",
                name=KIND_LABELS[kind],
                legendgroup=kind,
                showlegend=showlegend and kind != "comm",
                orientation="h",
                y=part["lane"].tolist(),
                x=part["duration_ms"].tolist(),
                base=part["start_ms"].tolist(),
                marker={"color": "rgba(0,0,0,0)" if kind == "comm" else KIND_COLORS[kind],
                        "line": {"color": _darker(KIND_COLORS[kind]), "width": 0 if merged else 0.6}},
                text=None if merged or not labelled else (part["label"] if kind == "comm" else part["layer"]).tolist(),
                textposition="inside",
                insidetextanchor="middle",
                textangle=0,
                textfont={"color": "#222222" if kind == "comm" else "white", "size": 11},
                customdata=np.stack(
                    [part["kind"].map(KIND_LABELS), part["what"], part["bytes_text"], part["start_ms"].round(4),
                     part["duration_ms"].round(4), part["iteration"]],
                    axis=-1,
                ).tolist(),
                hovertemplate=_HOVER,
            )
        )
    return traces


def _lane_order(bars: pd.DataFrame) -> list[str]:
    """Lanes present, bottom to top (plotly draws the first category lowest)."""
    present = set(bars["lane"])
    known = [lane for lane in reversed(LANES.values()) if lane in present]
    return sorted(present - set(known)) + known  # a lane this module does not know goes to the bottom


#: Where the Streamlit theme's automargin puts a timeline's plot area on the Timeline page of a
#: desktop browser: left of it the lane names; below it the time axis and the legend (which sits
#: `LEGEND_BELOW` ["y"] of the plot's height lower, this many px tall: two rows). See `settled_margin`.
GANTT_LEFT_PX = 122
GANTT_LEGEND_PX = 68
#: The same for `scaling_figure`: the throughput axis's tick labels, a one-row legend.
SCALING_LEFT_PX = 45
SCALING_LEGEND_PX = 39
#: Right of the plot: room for half the last tick label of the x axis ("1024", "1,250"), which
#: hangs over the plot's end. With 10 px, Plotly grew the margin to 17-18 px and drew the chart
#: again on most GPU changes (counted with the browser's debugger: two or three draws a change).
RIGHT_PX = 30
#: A few px more left and below than measured: Plotly grew a margin by 1-2 px (and drew again) as
#: the plot's width changed with the title's or the tick labels' lengths.
SLACK_PX = 4


def settled_margin(height: int, top: int, left: int, legend_px: int) -> dict:
    """A layout margin that Plotly's automargin does not have to grow on a desktop-wide chart
    ``height`` px high, with ``top`` px above the plot, ``left`` px of tick labels, `RIGHT_PX`
    for the last x tick label and a `LEGEND_BELOW` legend ``legend_px`` tall.

    Plotly draws a chart a second time whenever the margins its axes and legend push differ
    from the layout's (measured with the browser's profiler: a third of a chart's drawing
    time). Starting from the margins they settle at, a chart is drawn once; where they need
    more (a phone, whose legend wraps), Plotly still grows them.
    """
    drop = -LEGEND_BELOW["y"]  # the bottom margin b must hold drop x (height - top - b) + the legend
    return {"l": left + SLACK_PX, "r": RIGHT_PX, "t": top,
            "b": int(np.ceil((legend_px + SLACK_PX + drop * (height - top)) / (1 + drop)))}


#: The top pad of a two-line Gantt title. Plotly.js sets the first line's baseline at the pad of
#: a multi-line title anchored at the top (a single line is moved down 0.7 em), so a pad of 8 px
#: cut the top of the first line off; 20 px leaves its 16 px bold glyphs inside the chart.
TITLE_PAD_MULTILINE_PX = 20


def gantt_figure(timeline: pd.DataFrame, title: str = "", height: int | None = None,
                 max_bars: int = MAX_BARS) -> go.Figure:
    """A Gantt chart of a timeline: one bar per task, one lane per resource.

    Above ``max_bars`` bars, adjacent bars are merged for display
    (`display_frames`); ``fig.layout.meta["aggregated"]`` then holds the note.
    """
    bars, pieces, aggregation = display_frames(timeline, max_bars)
    # Traces and layout are plain dicts, built from this module's own columns: Plotly's
    # validation took most of a rerun's time (85 ms of the Timeline's, now about 20).
    lanes = _lane_order(bars)
    layout = {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "y": 1.0, "yanchor": "top",
                  "pad": {"t": TITLE_PAD_MULTILINE_PX if "<br>" in title else 8}},
        "barmode": "overlay",
        "bargap": 0.25,
        "height": height or 170 + 55 * len(lanes),
        "margin": settled_margin(height or 170 + 55 * len(lanes), (45 + 20 * title.count("<br>")) if title else 20,
                                 GANTT_LEFT_PX, GANTT_LEGEND_PX),
        "legend": LEGEND_BELOW,
        "uirevision": "timeline",
        "uniformtext": {"minsize": 9, "mode": "hide"},
        "hoverlabel": {"align": "left"},
        "yaxis": {"categoryorder": "array", "categoryarray": lanes, "title": {"text": ""}},
        "xaxis": {"title": {"text": "time (ms)"}, "rangemode": "tozero"},
    }
    if aggregation is not None:
        layout["meta"] = {"aggregated": aggregation.note()}
    # No template (`OWN_STYLE`), and plain lists rather than numpy arrays (which Plotly's JSON
    # sends as typed arrays): with either, Plotly.react redraws the chart although nothing changed.
    fig = go.Figure({"data": _gantt_traces(bars, pieces), "layout": styled(layout)}, _validate=False)
    _iteration_marks(fig, timeline)
    fig.layout.template = None  # not Plotly's default one (sent as "template": null)
    return fig


def aggregation_note(fig: go.Figure) -> str | None:
    """The note `gantt_figure` or `gantt_stack_figure` left when it merged bars, or None."""
    meta = fig.layout.meta
    return meta.get("aggregated") if isinstance(meta, dict) else None


def _svg_escape(text: str) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def gantt_svg(timeline: pd.DataFrame, title: str = "", width: int = 1200) -> str:
    """The Gantt chart as a standalone SVG document (vector, for papers and slides).

    The same bars as `gantt_figure`: one ``<rect>`` per task, communication
    outlined over its hidden (light) and exposed (red) pieces, one lane per
    resource, a time axis in ms. Built here, so no image-export engine is needed.
    """
    bars, pieces, _ = display_frames(timeline)
    lanes = list(reversed(_lane_order(bars)))  # top to bottom
    left, top, lane_h, right = 110, 40 if title else 12, 34, 20
    height = top + lane_h * len(lanes) + 40
    end_ms = float((bars["start_ms"] + bars["duration_ms"]).max()) if len(bars) else 1.0
    scale = (width - left - right) / (end_ms or 1.0)
    y_of = {lane: top + i * lane_h for i, lane in enumerate(lanes)}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    if title:
        out.append(f'<text x="{left}" y="22" font-size="14">{_svg_escape(title.replace("<b>", "").replace("</b>", "").replace("<br>", " · "))}</text>')
    for lane, y in y_of.items():
        out.append(f'<text x="{left - 8}" y="{y + lane_h / 2 + 4}" text-anchor="end">{_svg_escape(lane)}</text>')

    def rect(x_ms, w_ms, lane, fill, stroke, extra=""):
        y = y_of[lane] + 4
        return (f'<rect x="{left + x_ms * scale:.2f}" y="{y}" width="{max(w_ms * scale, 0.5):.2f}" '
                f'height="{lane_h - 8}" fill="{fill}" stroke="{stroke}" stroke-width="0.6"{extra}/>')

    for piece in pieces.itertuples():
        color = HIDDEN_COLOR if piece.hidden else EXPOSED_COLOR
        out.append(rect(piece.start_s * 1e3, piece.duration_s * 1e3, piece.lane, color, "none"))
    for bar in bars.itertuples():
        fill = "none" if bar.kind == "comm" else KIND_COLORS.get(bar.kind, "#888888")
        tip = f"<title>{_svg_escape(KIND_LABELS.get(bar.kind, bar.kind))} {_svg_escape(bar.what)}</title>"
        out.append(rect(bar.start_ms, bar.duration_ms, bar.lane, fill, _darker(KIND_COLORS.get(bar.kind, "#888888")))
                   .replace("/>", f">{tip}</rect>"))
    axis_y = top + lane_h * len(lanes) + 4
    for tick in np.linspace(0, end_ms, 6):
        x = left + tick * scale
        out.append(f'<line x1="{x:.2f}" y1="{top}" x2="{x:.2f}" y2="{axis_y}" stroke="#dddddd"/>')
        out.append(f'<text x="{x:.2f}" y="{axis_y + 14}" text-anchor="middle">{tick:.3g}</text>')
    out.append(f'<text x="{left + (width - left - right) / 2}" y="{axis_y + 30}" text-anchor="middle">time (ms)</text>')
    out.append("</svg>")
    return "\n".join(out)


def _iteration_marks(fig: go.Figure, timeline: pd.DataFrame, **where) -> None:
    """Dotted lines where each iteration after the first starts."""
    if timeline.empty or timeline["iteration"].max() < 1:
        return
    starts = timeline.groupby("iteration")["start_s"].min() * 1e3
    for it, x in starts.items():
        if it > 0:
            fig.add_vline(x=float(x), line={"color": "#888", "dash": "dot", "width": 1}, **where)


def gantt_stack_figure(timelines: Mapping[str, pd.DataFrame], titles: Mapping[str, str] | None = None) -> go.Figure:
    """Several timelines stacked on one shared time axis, one row each."""
    names = list(timelines)
    titles = titles or {}
    fig = make_subplots(
        rows=len(names), cols=1, shared_xaxes=True, vertical_spacing=0.35 / max(len(names), 1) if len(names) > 1 else 0.1,
        subplot_titles=[titles.get(n, n) for n in names],
    )
    seen: set[str] = set()
    notes = []
    for row, name in enumerate(names, start=1):
        bars, pieces, aggregation = display_frames(timelines[name], max(MAX_BARS // len(names), 1))
        if aggregation is not None:
            notes.append(f"{titles.get(name, name)}: {aggregation.note()}")
        for trace in _gantt_traces(bars, pieces):
            trace["showlegend"] = trace.get("showlegend") is not False and trace["legendgroup"] not in seen
            seen.add(trace["legendgroup"])
            fig.add_trace(trace, row=row, col=1)
        fig.update_yaxes(categoryorder="array", categoryarray=_lane_order(bars), row=row, col=1)
    fig.update_layout(
        barmode="overlay",
        bargap=0.25,
        height=110 + 150 * len(names),
        margin={"l": 10, "r": 10, "t": 40, "b": 40},
        legend={**LEGEND_BELOW, "y": -0.6 / len(names)},
        uirevision="stack",
        uniformtext={"minsize": 9, "mode": "hide"},
        hoverlabel={"align": "left"},
    )
    if notes:
        fig.update_layout(meta={"aggregated": " ".join(notes)})
    fig.update_xaxes(title="time (ms)", row=len(names), col=1)
    fig.update_xaxes(rangemode="tozero")
    for ann in fig.layout.annotations:  # subplot titles: left-aligned, small
        ann.update(x=0, xanchor="left", font={"size": 13})
    return fig


# --- comparison ------------------------------------------------------------------


def breakdown_frame(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per run: compute, hidden, exposed and idle time (ms), and overlap (%).

    ``idle = iteration - compute - exposed`` (I/O and host copies the GPU waits
    for; a wait for communication, such as Horovod's tick, is in exposed), clipped at 0; ``over_ms`` is what was clipped, i.e. how far
    compute + exposed overshoots the iteration (0 when the breakdown is
    consistent). ``overlap_pct`` is hidden / all communication * 100 (HTA's
    definition), NaN without communication.
    """
    it = metrics["iteration_time_s"].to_numpy(float) * 1e3
    compute = metrics["compute_s"].to_numpy(float) * 1e3
    exposed = metrics["comm_exposed_s"].to_numpy(float) * 1e3
    comm = metrics["comm_s"].to_numpy(float) * 1e3
    hidden = metrics["comm_hidden_s"].to_numpy(float) * 1e3
    raw_idle = it - compute - exposed
    overlap = overlap_pct(hidden, comm)
    return pd.DataFrame({
        "scheduler": metrics["scheduler"].to_numpy(), "iteration_ms": it, "compute_ms": compute,
        "hidden_ms": hidden, "exposed_ms": exposed, "idle_ms": np.maximum(raw_idle, 0.0),
        "over_ms": np.maximum(-raw_idle, 0.0), "overlap_pct": overlap,
    })


def breakdown_figure(metrics: pd.DataFrame) -> go.Figure:
    """Per scheduler, along the iteration: compute, exposed communication and idle
    time, which add up to the iteration (the diamond); hidden communication is a
    thin bar inside compute, since it runs at the same time.

    ``metrics`` needs ``scheduler, compute_s, comm_s, comm_hidden_s,
    comm_exposed_s, iteration_time_s``; see `breakdown_frame`.
    """
    frame = breakdown_frame(metrics)
    y = frame["scheduler"]
    parts = [
        ("compute", frame["compute_ms"], 0.0, KIND_COLORS["forward"], 0.7),
        ("all-reduce exposed (GPU waits)", frame["exposed_ms"], frame["compute_ms"], EXPOSED_COLOR, 0.7),
        ("idle (neither compute nor all-reduce)", frame["idle_ms"], frame["compute_ms"] + frame["exposed_ms"],
         "#BBBBBB", 0.7),
        ("all-reduce hidden behind compute", frame["hidden_ms"], 0.0, HIDDEN_COLOR, 0.3),
    ]
    fig = go.Figure()
    for label, x, base, color, width in parts:
        fig.add_trace(
            go.Bar(
                name=label, y=y, x=x, base=base, width=width, orientation="h", marker={"color": color},
                customdata=frame[["overlap_pct"]],
                hovertemplate=f"{label}: %{{x:.2f}} ms<br>overlap %{{customdata[0]:.1f}} %<extra>%{{y}}</extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            name="iteration time", y=y, x=frame["iteration_ms"], mode="markers",
            marker={"symbol": "diamond", "size": 11, "color": "black"},
            hovertemplate="iteration: %{x:.2f} ms<extra>%{y}</extra>",
        )
    )
    fig.update_layout(
        barmode="overlay",
        height=170 + 45 * len(metrics),
        margin={"l": 10, "r": 10, "t": 20, "b": 40},
        legend={**LEGEND_BELOW, "traceorder": "normal"},
        uirevision="breakdown",
    )
    fig.update_xaxes(title="time per iteration (ms)")
    fig.update_yaxes(autorange="reversed", title=None)
    return fig


# --- scaling -----------------------------------------------------------------------


def scaling_figure(sweep: pd.DataFrame, picked_gpus: int | None = None) -> go.Figure:
    """Throughput, speedup and scaling efficiency against GPU count (log2 axis).

    ``sweep`` has the `sim.METRIC_KEYS` columns (``gpus, scheduler, network,
    throughput_samples_per_s, speedup, scaling_efficiency, batch_size,
    single_gpu_iteration_time_s``); one curve per (scheduler, network), and a
    dotted ideal-scaling line in each panel (throughput: from the fastest one-GPU reference).
    """
    panels = [
        ("throughput_samples_per_s", "throughput (samples/s)"),
        ("speedup", "speedup over 1 GPU"),
        ("scaling_efficiency", "scaling efficiency"),
    ]
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t in panels], horizontal_spacing=0.07)
    counts = sorted(sweep["gpus"].unique())
    networks = list(dict.fromkeys(sweep["network"]))
    schedulers = list(dict.fromkeys(sweep["scheduler"]))
    dashes = ["solid", "dash", "dashdot", "longdash", "dot"]
    for si, sched in enumerate(schedulers):
        for ni, net in enumerate(networks):
            part = sweep.loc[(sweep["scheduler"] == sched) & (sweep["network"] == net)].sort_values("gpus")
            if part.empty:
                continue
            name = sched if len(networks) == 1 else f"{sched} · {net}"
            for col, (key, _) in enumerate(panels, start=1):
                fig.add_trace(
                    go.Scatter(
                        x=part["gpus"], y=part[key], name=name, legendgroup=name, showlegend=col == 1,
                        mode="lines+markers", customdata=[[sched, net]] * len(part),  # what a click picks
                        line={"color": _scheduler_color(sched, si), "dash": dashes[ni % len(dashes)]},
                        marker={"size": 7},
                        hovertemplate=f"<b>{name}</b><br>%{{x}} GPUs<br>%{{y:.3~g}}<extra></extra>",
                    ),
                    row=1, col=col,
                )
    # ideal scaling: throughput P * B / t1, speedup P, efficiency 1; t1 the fastest one-GPU reference of
    # the rows (a scheduler that updates per layer reads the next batch during its update, on one GPU too,
    # so its reference is shorter than the others' with io: the first row's put DeAR's curve above "ideal")
    t1 = float(sweep["single_gpu_iteration_time_s"].min())
    batch = float(sweep["batch_size"].iloc[0])
    x = np.array(counts, dtype=float)
    ideal = [x * batch / t1, x, np.ones_like(x)]
    for col, y in enumerate(ideal, start=1):
        fig.add_trace(
            go.Scatter(
                x=x, y=y, name="ideal (linear) scaling", legendgroup="ideal", showlegend=col == 1,
                mode="lines", line=IDEAL_STYLE, hoverinfo="skip",
            ),
            row=1, col=col,
        )
    ticks = counts if len(counts) <= 6 else counts[::2] + ([counts[-1]] if len(counts) % 2 == 0 else [])
    fig.update_xaxes(type="log", tickvals=ticks, ticktext=[str(c) for c in ticks], title="GPUs", tickangle=0)
    fig.update_yaxes(type="log", dtick=1, tickformat="~s", row=1, col=1)
    fig.update_yaxes(type="log", dtick=1, tickformat="~s", row=1, col=2)
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%", row=1, col=3)
    fig.update_layout(
        height=430,
        margin=settled_margin(430, 40, SCALING_LEFT_PX, SCALING_LEGEND_PX),
        legend=LEGEND_BELOW,
        uirevision="scaling",
        clickmode="event+select",
    )
    return fig if picked_gpus is None else mark_gpus(fig, picked_gpus)


def mark_gpus(fig: go.Figure, gpus: int) -> go.Figure:
    """A copy of a `scaling_figure` with a grey line at ``gpus`` in each panel and its label.

    Built from the figure's dict without Plotly's validation (4 ms rather than 80), so that
    a page can keep the sweep's figure and mark the picked count on every rerun.
    """
    spec = fig.to_dict()
    layout = spec["layout"]
    line = {"color": "#999", "width": 1}
    layout["shapes"] = [*layout.get("shapes", []), *(
        {"type": "line", "x0": gpus, "x1": gpus, "y0": 0, "y1": 1, "xref": f"x{col if col > 1 else ''}",
         "yref": f"y{col if col > 1 else ''} domain", "line": line} for col in (1, 2, 3))]
    # on a log axis an annotation's x is log10 of the value
    layout["annotations"] = [*layout.get("annotations", []), {
        "x": float(np.log10(gpus)), "xref": "x", "y": 1, "yref": "y domain", "text": f"{gpus} GPU{'' if gpus == 1 else 's'}",
        "showarrow": False, "xanchor": "right", "yanchor": "top", "font": {"size": 10, "color": "#666"}}]
    return go.Figure(spec, _validate=False)


def stale_selection(event, gpus: int) -> bool:
    """Whether a `scaling_figure` chart's selection (``st.plotly_chart``'s event, or None) holds
    a clicked point at another GPU count than ``gpus`` (the count changed elsewhere since)."""
    selection = getattr(event, "selection", None) or (event or {}).get("selection") or {}
    return any(int(round(point.get("x", gpus))) != gpus for point in selection.get("points", []))


def selection_cleared(fig: go.Figure, clears: int) -> go.Figure:
    """``fig`` itself, or after ``clears`` > 0 a copy whose ``layout.meta`` counts them: a figure
    that differs in nothing else, which Streamlit draws afresh, without the old selection."""
    if not clears:
        return fig
    spec = fig.to_dict()
    spec["layout"]["meta"] = {**(spec["layout"].get("meta") or {}), "selection_clears": clears}
    return go.Figure(spec, _validate=False)


# --- the model -----------------------------------------------------------------------


def layer_figure(layers: pd.DataFrame) -> go.Figure:
    """Per layer: parameters, compute time, and all-reduce time split into alpha and beta*M.

    ``layers`` is `dashboard.tables.layer_table`'s output. Shared x axis: the
    layer index, input to output; names in the hover. Above `MAX_LAYER_BARS`
    layers a bar sums consecutive layers (`binned_layers`), and the panels say so.
    """
    layers, per = binned_layers(layers, MAX_LAYER_BARS)
    unit = "per layer" if per == 1 else f"per bar of {per:,} consecutive layers (summed)"
    fig = make_subplots(
        rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.08,
        subplot_titles=[
            f"parameters {unit}",
            f"compute time {unit} (ms)",
            "all-reduce time of each layer's gradient sent alone (ms): start-up α vs transfer β·M"
            + ("" if per == 1 else f", {unit}"),
        ],
    )
    x = layers["layer"]
    names = layers["name"]

    def bar(y, label, color, row, fmt):
        return go.Bar(
            x=x, y=y, name=label, marker={"color": color}, customdata=names,
            hovertemplate=f"%{{customdata}}<br>{label}: %{{y:{fmt}}}<extra></extra>",
        ), row

    for trace, row in (
        bar(layers["params"], "parameters", "#72B7B2", 1, ",.0f"),
        bar(layers["fwd_ms"], "forward", KIND_COLORS["forward"], 2, ".3f"),
        bar(layers["bwd_ms"], "backward", KIND_COLORS["backward"], 2, ".3f"),
        bar(layers["alpha_ms"], "α (start-up)", "#6A3D9A", 3, ".3f"),
        bar(layers["beta_ms"], "β·M (transfer)", KIND_COLORS["comm"], 3, ".3f"),
    ):
        fig.add_trace(trace, row=row, col=1)
    fig.update_layout(
        barmode="stack", bargap=0.1, height=640,
        margin={"l": 10, "r": 10, "t": 40, "b": 40},
        legend={**LEGEND_BELOW, "y": -0.12, "traceorder": "normal"},
        uirevision="layers",
    )
    if len(layers) <= 40:
        fig.update_xaxes(tickvals=list(x), ticktext=list(names), tickangle=-45, row=3, col=1)
    else:
        fig.update_xaxes(title="layer (input → output)", row=3, col=1)
    for ann in fig.layout.annotations:
        ann.update(x=0, xanchor="left", font={"size": 13})
    return fig


def dag_positions(g: nx.DiGraph) -> dict:
    """Layout of an iteration DAG: forward left to right on top, backward
    below it (so backpropagation reads right to left), messages under the
    layers whose gradients they carry; io and h2d before the first layer,
    the update after the last backward. Iterations sit side by side.

    Node keys are ``(iteration, kind, index)`` as built by `sim.dag.build_dag`.
    """
    n = 1 + max((i for (_, kind, i) in g.nodes if kind in ("forward", "backward")), default=0)
    width = n + 4
    rows = {"io": 2, "h2d": 2, "forward": 2, "backward": 1, "update": 1, "comm": 0}
    pos: dict = {}
    for node in g.nodes:
        k, kind, i = node
        off = k * width
        if kind == "io":
            x = -2
        elif kind == "h2d":
            x = -1
        elif kind in ("forward", "backward"):
            x = i
        elif kind == "update":
            x = -1
        elif kind == "comm":
            members = [p[2] for p in g.predecessors(node) if p[1] == "backward" and p[0] == k]
            x = float(np.mean(members)) if members else n
        else:
            x = n + 1
        pos[node] = (off + float(x), float(rows.get(kind, -1)))
    return pos


def dag_figure(g: nx.DiGraph, title: str = "") -> go.Figure:
    """Draw an iteration DAG: nodes coloured by kind, edges as light lines."""
    pos = dag_positions(g)
    ex, ey = [], []
    for u, v in g.edges:
        (x0, y0), (x1, y1) = pos[u], pos[v]
        ex += [x0, x1, None]
        ey += [y0, y1, None]
    fig = go.Figure(go.Scatter(x=ex, y=ey, mode="lines", line={"color": "#BBBBBB", "width": 1},
                               hoverinfo="skip", showlegend=False))
    for kind, color in KIND_COLORS.items():
        nodes = [u for u, d in g.nodes(data=True) if d["kind"] == kind]
        if not nodes:
            continue
        data = [g.nodes[u] for u in nodes]
        text = [short_layers(d["layer"], 2) if kind != "comm" else f"g{d['group']}" for d in data]
        fig.add_trace(
            go.Scatter(
                x=[pos[u][0] for u in nodes], y=[pos[u][1] for u in nodes], mode="markers+text",
                name=KIND_LABELS[kind], marker={"color": color, "size": 16 if kind == "comm" else 12,
                                                "symbol": "diamond" if kind == "comm" else "circle"},
                text=text, textposition="bottom center" if kind == "comm" else "top center",
                textfont={"size": 9},
                customdata=np.array(
                    [[KIND_LABELS[kind], short_layers(d["layer"], 4) or KIND_LABELS[kind], d["duration_s"] * 1e3,
                      fmt_bytes(d["bytes"]) if d["bytes"] else "—"] for d in data],
                    dtype=object,
                ),
                hovertemplate="<b>%{customdata[0]}</b> %{customdata[1]}<br>%{customdata[2]:.3f} ms<br>"
                              "bytes: %{customdata[3]}<extra></extra>",
            )
        )
    fig.update_layout(
        title={"text": title}, height=360, margin={"l": 10, "r": 10, "t": 50 if title else 20, "b": 10},
        legend={**LEGEND_BELOW, "y": 0},
        uirevision="dag",
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False, range=[-0.6, 2.6])
    return fig


# --- the Learn page ----------------------------------------------------------------


def alpha_sweep_figure(sweep: pd.DataFrame, marked_alpha_us: float | None = None) -> go.Figure:
    """Iteration time and message count against alpha (log axis), per scheduler.

    ``sweep`` has ``alpha_us, scheduler, iteration_ms, num_messages``.
    """
    fig = make_subplots(rows=1, cols=2, subplot_titles=["iteration time (ms)", "messages per iteration"],
                        horizontal_spacing=0.1)
    for i, (sched, part) in enumerate(sweep.groupby("scheduler", sort=False)):
        color = _scheduler_color(str(sched), i)
        for col, key in ((1, "iteration_ms"), (2, "num_messages")):
            fig.add_trace(
                go.Scatter(x=part["alpha_us"], y=part[key], name=str(sched), legendgroup=str(sched),
                           showlegend=col == 1, mode="lines+markers", line={"color": color, "shape": "linear"},
                           hovertemplate=f"<b>{sched}</b><br>α = %{{x:.0f}} µs<br>%{{y:.3~g}}<extra></extra>"),
                row=1, col=col,
            )
    fig.update_xaxes(type="log", title="α, start-up cost per message (µs)")
    if marked_alpha_us is not None:
        for col in (1, 2):
            fig.add_vline(x=marked_alpha_us, line={"color": "#999", "width": 1}, row=1, col=col)
    fig.update_layout(height=400, margin={"l": 10, "r": 10, "t": 40, "b": 40}, legend=LEGEND_BELOW,
                      uirevision="alpha")
    return fig


def scheduler_order(names: Sequence[str]) -> list[str]:
    """Schedulers in a stable, readable order (as in `SCHEDULER_COLORS`)."""
    order = list(SCHEDULER_COLORS)
    return sorted(names, key=lambda s: order.index(s) if s in order else len(order))


def tune_figure(frame: pd.DataFrame, best: dict) -> go.Figure:
    """Iteration time against one knob's values (`sim.tune.tune`), the best value
    marked with its gain over the default, and the default drawn as a line."""
    knob = str(frame["knob"].iloc[0])
    fig = go.Figure(go.Scatter(
        x=frame["value"], y=frame["iteration_time_s"] * 1e3, mode="lines+markers", name=knob,
        customdata=frame[["gain_pct"]],
        hovertemplate=knob + " %{x}<br>iteration %{y:.2f} ms<br>%{customdata[0]:+.1f} % vs default<extra></extra>",
    ))
    fig.add_trace(go.Scatter(
        x=[best["value"]], y=[best["iteration_time_s"] * 1e3], mode="markers+text", name="best",
        marker={"size": 14, "symbol": "star", "color": "#2ca02c"},
        text=[f"best {best['value']:g}: {fmt_change_pct(best['gain_pct'])}"], textposition="top center",
    ))
    fig.add_hline(y=best["default_iteration_time_s"] * 1e3, line_dash="dot", line_color="grey",
                  annotation_text=f"default {best['default_value']:g}", annotation_position="bottom right")
    fig.update_layout(xaxis={"title": knob, "type": "log"}, yaxis={"title": "iteration time (ms)"},
                      height=360, margin={"t": 30}, showlegend=False, uirevision="tune")
    return fig
