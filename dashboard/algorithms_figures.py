"""Pure figure builders for the Algorithms page: DataFrame in, plotly Figure out.

No Streamlit here. Times are drawn in milliseconds in timelines and in
seconds on training curves. Inputs are the frames `sim.algorithms`,
`sim.training`, `sim.workers` and `sim.coarse` return.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboard.figures import IDEAL_STYLE, KIND_COLORS

__all__ = [
    "ALGORITHM_COLORS",
    "WORKER_KIND_COLORS",
    "coarse_fine_figure",
    "iteration_time_figure",
    "staleness_figure",
    "staleness_frame",
    "straggler_scaling_figure",
    "throughput_figure",
    "training_figure",
    "worker_timeline_figure",
]

ALGORITHM_COLORS = {
    "BSP": "#1F77B4",
    "ASP": "#FF7F0E",
    "SSP": "#2CA02C",
    "EASGD": "#D62728",
    "AR-SGD": "#9467BD",
    "GoSGD": "#8C564B",
    "AD-PSGD": "#E377C2",
}
#: Kinds of `sim.workers.WORKER_TIMELINE_COLUMNS` rows and their colours.
WORKER_KIND_COLORS = {
    **KIND_COLORS,
    "compute": KIND_COLORS["forward"],
    "wait": "#BDBDBD",
    "comm_wait": "#F4B6B6",
    "queue": "#E0E0E0",
    "launch": "#FF9DA6",
    "push": "#E45756",
    "pull": "#72B7B2",
    "gossip": "#8C564B",
    "average": "#E377C2",
}
WORKER_KIND_LABELS = {
    "wait": "waiting for the slowest worker",
    "comm_wait": "waiting for the all-reduce",
    "queue": "waiting for a busy link",
    "comm": "all-reduce",
    "launch": "launch (host)",
}
#: Legends below the plot, where they cannot cover a title.
_LEGEND = {"orientation": "h", "yanchor": "top", "y": -0.22, "xanchor": "left", "x": 0}


def _color(name: str, i: int = 0) -> str:
    palette = list(ALGORITHM_COLORS.values())
    return ALGORITHM_COLORS.get(name, palette[i % len(palette)])


def throughput_figure(sweep: pd.DataFrame, picked_workers: int | None = None) -> go.Figure:
    """Throughput and the server's link utilisation against workers, one curve per algorithm.

    ``sweep`` is a `sim.algorithms.sweep_algorithms` frame (``workers,
    algorithm, throughput_samples_per_s, server_link_utilisation``).
    Algorithms without a server have no utilisation curve.
    """
    fig = make_subplots(rows=1, cols=2, subplot_titles=["throughput (samples/s)", "parameter-server link utilisation"],
                        horizontal_spacing=0.1)
    for i, name in enumerate(dict.fromkeys(sweep["algorithm"])):
        part = sweep.loc[sweep["algorithm"] == name].sort_values("workers")
        style = {"color": _color(name, i)}
        fig.add_trace(go.Scatter(x=part["workers"], y=part["throughput_samples_per_s"], name=name, legendgroup=name,
                                 mode="lines+markers", line=style,
                                 hovertemplate=f"<b>{name}</b><br>%{{x}} workers<br>%{{y:,.0f}} samples/s<extra></extra>"),
                      row=1, col=1)
        util = part["server_link_utilisation"]
        if util.notna().any():
            fig.add_trace(go.Scatter(x=part["workers"], y=util, name=name, legendgroup=name, showlegend=False,
                                     mode="lines+markers", line=style,
                                     hovertemplate=f"<b>{name}</b><br>%{{x}} workers<br>%{{y:.0%}} busy<extra></extra>"),
                          row=1, col=2)
    counts = sorted(sweep["workers"].unique())
    fig.update_xaxes(type="log", tickvals=counts, ticktext=[str(c) for c in counts], title="workers")
    fig.update_yaxes(type="log", tickformat="~s", row=1, col=1)
    fig.update_yaxes(range=[0, 1.05], tickformat=".0%", row=1, col=2)
    if picked_workers is not None:
        for col in (1, 2):
            fig.add_vline(x=picked_workers, line={"color": "#999", "width": 1}, row=1, col=col)
    fig.update_layout(height=400, margin={"l": 10, "r": 10, "t": 80, "b": 40}, legend=_LEGEND, uirevision=True)
    return fig


def staleness_frame(logs: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Share of updates at each staleness, per algorithm: ``algorithm, staleness, updates, share``.

    ``logs`` maps an algorithm to its update log (`sim.algorithms.UPDATE_COLUMNS`).
    """
    rows = []
    for name, log in logs.items():
        counts = log["staleness"].value_counts().sort_index()
        total = int(counts.sum())
        for s, n in counts.items():
            rows.append((name, int(s), int(n), n / total if total else 0.0))
    return pd.DataFrame(rows, columns=["algorithm", "staleness", "updates", "share"])


def staleness_figure(frame: pd.DataFrame) -> go.Figure:
    """Grouped bars: the share of each algorithm's updates at each staleness (a `staleness_frame`)."""
    fig = go.Figure()
    for i, name in enumerate(dict.fromkeys(frame["algorithm"])):
        part = frame.loc[frame["algorithm"] == name]
        fig.add_trace(go.Bar(x=part["staleness"], y=part["share"], name=name, marker_color=_color(name, i),
                             customdata=part["updates"],
                             hovertemplate=f"<b>{name}</b><br>staleness %{{x}}<br>%{{y:.1%}} of updates "
                                           "(%{customdata})<extra></extra>"))
    fig.update_layout(barmode="group", height=340, margin={"l": 10, "r": 10, "t": 60, "b": 40}, legend=_LEGEND, uirevision=True,
                      xaxis_title="staleness (updates the model received since the inputs were read)",
                      yaxis={"title": "share of updates", "tickformat": ".0%"})
    return fig


def training_figure(curves: pd.DataFrame, target_accuracy: float | None = None) -> go.Figure:
    """Test loss and accuracy against simulated time, one line per algorithm (`sim.training.CURVE_COLUMNS`)."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=["test loss", "test accuracy"], horizontal_spacing=0.08)
    for i, name in enumerate(dict.fromkeys(curves["algorithm"])):
        part = curves.loc[curves["algorithm"] == name]
        for col, key, fmt in ((1, "loss", ".3f"), (2, "accuracy", ".1%")):
            fig.add_trace(go.Scatter(x=part["time_s"], y=part[key], name=name, legendgroup=name, showlegend=col == 1,
                                     mode="lines", line={"color": _color(name, i), "width": 2},
                                     customdata=part["gradients"],
                                     hovertemplate=f"<b>{name}</b><br>%{{x:.3g}} s, %{{customdata}} gradients"
                                                   f"<br>{key} %{{y:{fmt}}}<extra></extra>"),
                          row=1, col=col)
    if target_accuracy is not None:
        fig.add_hline(y=target_accuracy, line=IDEAL_STYLE, row=1, col=2,
                      annotation_text=f"target {target_accuracy:.1%}", annotation_position="bottom right")
    fig.update_xaxes(title="simulated time (s)", type="log")
    fig.update_yaxes(tickformat=".0%", row=1, col=2)
    fig.update_layout(height=380, margin={"l": 10, "r": 10, "t": 80, "b": 40}, legend=_LEGEND, uirevision=True)
    return fig


def worker_timeline_figure(timeline: pd.DataFrame, workers: Sequence[int] | None = None,
                           stragglers: Sequence[int] = (), title: str = "") -> go.Figure:
    """A Gantt chart with one lane per worker (and one for the network, worker -1).

    ``timeline`` follows `sim.workers.WORKER_TIMELINE_COLUMNS`. Grey bars are
    a worker idling: for the slowest worker's gradients, then for the
    all-reduce. ``workers`` picks the lanes (default: all).
    """
    rows = timeline if workers is None else timeline.loc[timeline["worker"].isin([*workers, -1])]
    slow = set(int(w) for w in stragglers)
    # ByteScheduler's launches run on the host's launch lane, a row of their own beside the network's
    launch = (rows["lane"] == "launch").to_numpy() if "lane" in rows else np.zeros(len(rows), dtype=bool)
    kinds = rows["kind"].where(~launch, "launch")

    def lane(w: int, host: bool = False) -> str:
        if w < 0:
            return "host launches" if host else "network / server"
        return f"worker {w}{' (slow)' if w in slow else ''}"

    lanes = [lane(int(w), bool(h)) for w, h in
             sorted(set(zip(rows["worker"].tolist(), launch.tolist(), strict=True)), key=lambda wh: (wh[0] < 0, wh[0], wh[1]))]
    fig = go.Figure()
    for kind in dict.fromkeys(kinds):
        part = rows.loc[(kinds == kind).to_numpy()]
        label = WORKER_KIND_LABELS.get(kind, kind)
        fig.add_trace(go.Bar(
            y=[lane(int(w), kind == "launch") for w in part["worker"]], x=part["duration_s"] * 1e3,
            base=part["start_s"] * 1e3,
            orientation="h", name=label, marker_color=WORKER_KIND_COLORS.get(kind, "#999999"),
            customdata=np.stack([part["iteration"], part["duration_s"] * 1e3], axis=1),
            hovertemplate=f"<b>{label}</b><br>%{{y}}, step %{{customdata[0]}}<br>%{{base:.4g}} ms, "
                          "lasting %{customdata[1]:.4g} ms<extra></extra>",
        ))
    fig.update_layout(
        barmode="overlay", title=title or None, height=140 + 36 * len(lanes),
        xaxis_title="time (ms)", yaxis={"categoryorder": "array", "categoryarray": lanes[::-1]},
        margin={"l": 10, "r": 10, "t": 80 if title else 50, "b": 40}, legend=_LEGEND, uirevision=True,
    )
    return fig


def iteration_time_figure(times_s: Sequence[float], ideal_s: float | None = None) -> go.Figure:
    """Histogram of iteration times with the median, the 99th percentile and the identical-workers time."""
    ms = np.asarray(times_s, dtype=float) * 1e3
    fig = go.Figure(go.Histogram(x=ms, nbinsx=40, marker_color="#4C78A8", name="iterations",
                                 hovertemplate="%{x} ms: %{y} iterations<extra></extra>"))
    marks = [("p50", float(np.percentile(ms, 50)), "#333333"), ("p99", float(np.percentile(ms, 99)), "#D62728")]
    if ideal_s is not None:
        marks.append(("identical workers", ideal_s * 1e3, "#2CA02C"))
    for label, x, color in marks:
        fig.add_vline(x=x, line={"color": color, "dash": "dash", "width": 1.5},
                      annotation_text=f"{label} {x:.4g} ms", annotation_position="top")
    fig.update_layout(height=320, margin={"l": 10, "r": 10, "t": 50, "b": 40}, showlegend=False,
                      xaxis_title="iteration time (ms)", yaxis_title="iterations")
    return fig


def straggler_scaling_figure(mc: pd.DataFrame) -> go.Figure:
    """Slowdown against workers: the Monte-Carlo mean and p99 beside the closed form (a `sim.workers.monte_carlo` frame)."""
    fig = go.Figure()
    x = mc["workers"]
    fig.add_trace(go.Scatter(x=x, y=mc["slowdown"], name="simulated mean", mode="lines+markers",
                             line={"color": "#1F77B4", "width": 2},
                             error_y={"type": "data", "array": 2 * mc["sem_s"] / mc["ideal_s"], "visible": True},
                             hovertemplate="%{x} workers: mean %{y:.4f}×<extra></extra>"))
    fig.add_trace(go.Scatter(x=x, y=mc["p99_s"] / mc["ideal_s"], name="simulated p99", mode="lines+markers",
                             line={"color": "#D62728", "dash": "dot"},
                             hovertemplate="%{x} workers: p99 %{y:.4f}×<extra></extra>"))
    if mc["closed_form_slowdown"].notna().any():
        fig.add_trace(go.Scatter(x=x, y=mc["closed_form_slowdown"], name="closed form E[max of P]",
                                 mode="lines", line={"color": "#333333", "dash": "dash"},
                                 hovertemplate="%{x} workers: closed form %{y:.4f}×<extra></extra>"))
    counts = sorted(x.unique())
    fig.update_xaxes(type="log", tickvals=counts, ticktext=[str(c) for c in counts], title="workers")
    fig.update_layout(height=340, margin={"l": 10, "r": 10, "t": 60, "b": 40}, legend=_LEGEND, uirevision=True,
                      yaxis_title="iteration time / identical workers")
    return fig


def coarse_fine_figure(frame: pd.DataFrame) -> go.Figure:
    """Iteration time against GPUs: the fine DAG simulation per scheduler, the coarse
    model, and the coarse model with its overlap heuristic (a `sim.coarse.compare_coarse_fine` frame)."""
    fig = go.Figure()
    dashes = ["solid", "dashdot", "longdash", "dot"]
    for i, name in enumerate(dict.fromkeys(frame["scheduler"])):
        part = frame.loc[frame["scheduler"] == name].sort_values("gpus")
        fig.add_trace(go.Scatter(x=part["gpus"], y=part["fine_s"] * 1e3, name=f"fine: {name}", mode="lines+markers",
                                 line={"dash": dashes[i % len(dashes)]},
                                 hovertemplate=f"fine {name}<br>%{{x}} GPUs: %{{y:.4g}} ms<extra></extra>"))
    one = frame.drop_duplicates("gpus").sort_values("gpus")
    rho = float(one["overlap"].iloc[0]) if "overlap" in one and len(one) else 0.0
    fig.add_trace(go.Scatter(x=one["gpus"], y=one["coarse_s"] * 1e3, name="coarse: phases in sequence", mode="lines",
                             line={"color": "#333333", "width": 3},
                             hovertemplate="coarse<br>%{x} GPUs: %{y:.4g} ms<extra></extra>"))
    fig.add_trace(go.Scatter(x=one["gpus"], y=one["coarse_overlap_s"] * 1e3, name=f"coarse, overlap ρ = {rho:.2g}",
                             mode="lines", line={"color": "#777777", "width": 2, "dash": "dash"},
                             hovertemplate="coarse with overlap<br>%{x} GPUs: %{y:.4g} ms<extra></extra>"))
    counts = sorted(frame["gpus"].unique())
    fig.update_xaxes(type="log", tickvals=counts, ticktext=[str(c) for c in counts], title="GPUs")
    fig.update_layout(height=360, margin={"l": 10, "r": 10, "t": 60, "b": 40}, legend=_LEGEND, uirevision=True,
                      yaxis_title="iteration time (ms)")
    return fig
