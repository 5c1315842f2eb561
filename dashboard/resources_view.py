"""Memory per GPU, cost and energy on the dashboard (`sim.resources`).

`memory_panel` (Timeline page): the memory parts of one run against the GPU's
memory, for an optimizer picked here. `grey_unfit` (Scaling page): points
whose memory per GPU does not fit are covered by grey markers.
`cost_section` (Scaling page): samples per dollar and energy per 1,000
samples against the GPU count.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import sim
from dashboard import ui
from sim.memory import DEFAULT_OPTIMIZER, OPTIMIZERS
from sim.pricing import gpu_price
from sim.resources import run_memory

__all__ = ["MEMORY_PARTS", "cost_section", "grey_unfit", "memory_figure", "memory_panel", "samples_per_dollar_figure"]

#: The parts of the memory per GPU, as metric key and label, in stacking order.
MEMORY_PARTS = (
    ("memory_weights_bytes", "weights"), ("memory_gradients_bytes", "gradients"),
    ("memory_optimizer_bytes", "optimizer state"), ("memory_activations_bytes", "activations"),
    ("memory_buffers_bytes", "buffers (communication, ZeRO-3's gathered layer, compression state)"),
)
_PART_COLORS = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#9D755D")
UNFIT_COLOR = "#c8c8c8"
_LINE_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
GB = 1e9
#: Session key of the memory panel's optimizer, kept while the panel is closed.
_KEPT_OPTIMIZER = "mem_optimizer_kept"


def memory_figure(metrics: dict) -> go.Figure:
    """One horizontal bar of the memory parts (GB), with the GPU's memory as a line."""
    fig = go.Figure()
    for (key, label), color in zip(MEMORY_PARTS, _PART_COLORS, strict=True):
        fig.add_trace(go.Bar(x=[metrics[key] / GB], y=["per GPU"], orientation="h", name=label,
                             marker={"color": color}, hovertemplate=f"{label}: %{{x:.3g}} GB<extra></extra>"))
    cap = metrics["gpu_memory_bytes"] / GB
    fig.add_vline(x=cap, line={"color": "#d62728", "width": 2, "dash": "dash"})
    fig.add_annotation(x=cap, y=1, yref="paper", text=f"{metrics['gpu']}: {cap:.3g} GB", showarrow=False,
                       xanchor="right", yanchor="bottom", font={"size": 11, "color": "#d62728"})
    verdict = "fits" if metrics["fits_in_memory"] else "does NOT fit"
    fig.update_layout(
        barmode="stack", height=190, margin={"l": 10, "r": 10, "t": 40, "b": 30},
        title={"text": f"Memory per GPU: {metrics['memory_per_gpu_bytes'] / GB:.3g} GB ({verdict})", "x": 0.01},
        xaxis={"title": "GB", "range": [0, 1.08 * max(cap, metrics["memory_per_gpu_bytes"] / GB)]},
        legend={"orientation": "h", "y": -0.45}, yaxis={"showticklabels": False},
    )
    return fig


def memory_panel(res: sim.SimResult, batch_size: int, precision: str) -> None:
    """The memory parts of ``res`` on one GPU, for the optimizer chosen in the panel."""
    m = res.metrics
    fits = bool(m["fits_in_memory"])
    # Lazy: a closed panel computes and sends nothing (its chart cost the browser ~90 ms on every
    # rerun). One key per verdict, so a run that does not fit opens the panel by itself again.
    panel = st.expander("Memory per GPU" + ("" if fits else " — does NOT fit at the default optimizer"),
                        expanded=not fits, key=f"memory_panel_{'fits' if fits else 'unfit'}", on_change="rerun")
    if not panel.open:
        return
    session = st.session_state
    with panel:  # the choice outlives the selectbox, which a closed panel does not draw
        optimizer = st.selectbox(
            "Optimizer state", OPTIMIZERS, index=OPTIMIZERS.index(session.get(_KEPT_OPTIMIZER, DEFAULT_OPTIMIZER)),
            key="mem_optimizer", on_change=lambda: session.update({_KEPT_OPTIMIZER: session["mem_optimizer"]}),
            help="sgd keeps no state, momentum one fp32 buffer per parameter, adam two; with fp16 the optimizer "
                 "also keeps fp32 master weights (ZeRO paper's accounting); with amp the weights stay fp32 and "
                 "autocast's fp16 copies (2 bytes per parameter) count with them. The iteration time does not change.")
        if optimizer != m["optimizer"]:
            est = ui.guarded(run_memory, res.model, gpus=res.cluster.gpus, scheduler=m["scheduler"], groups=res.groups,
                             batch_size=batch_size, precision=precision, optimizer=optimizer,
                             compression=m.get("compression"))
            m = {**m, **est.metrics(m["gpu_memory_bytes"])}
        ui.chart(memory_figure(m), "memory_chart", "memory-per-gpu")
        if m["memory_activations_bytes"] == 0:
            st.caption("Activations are not estimated for a layer CSV (it has no layer shapes): a lower bound.")
        st.caption("Weights, gradients and optimizer state as in the ZeRO paper (Rajbhandari et al., SC 2020); "
                   "activations per layer type (transformers: Korthikanti et al. 2022); DDP's two buckets or "
                   "Horovod's 64 MB fusion buffer; ZeRO-3's largest layer gathered whole (DeepSpeed's estimator); "
                   "gradient compression's state. The CUDA context and fragmentation are not counted. "
                   "Details: `sim/memory.py`.")


def grey_unfit(fig: go.Figure, sweep: pd.DataFrame) -> go.Figure:
    """``fig`` (`dashboard.figures.scaling_figure`) with grey markers over the points that do not fit."""
    if "fits_in_memory" not in sweep or sweep["fits_in_memory"].astype(bool).all():
        return fig
    bad = sweep.loc[~sweep["fits_in_memory"].astype(bool)]
    text = [f"{r.scheduler} · {r.network}: {r.memory_per_gpu_bytes / GB:.3g} GB of {r.gpu_memory_bytes / GB:.3g} GB"
            for r in bad.itertuples()]
    for col, key in enumerate(("throughput_samples_per_s", "speedup", "scaling_efficiency"), start=1):
        fig.add_trace(go.Scatter(
            x=bad["gpus"], y=bad[key], mode="markers", name="does not fit in GPU memory", legendgroup="unfit",
            showlegend=col == 1, marker={"color": UNFIT_COLOR, "size": 11, "line": {"color": "#888", "width": 1}},
            text=text, hovertemplate="<b>does not fit</b><br>%{x} GPUs<br>%{text}<extra></extra>",
        ), row=1, col=col)
    return fig


def samples_per_dollar_figure(sweep: pd.DataFrame) -> go.Figure:
    """Samples per dollar against GPUs, one line per (scheduler, network); unfit points grey."""
    fig = go.Figure()
    networks = list(dict.fromkeys(sweep["network"]))
    for i, ((sched, net), part) in enumerate(sweep.groupby(["scheduler", "network"], sort=False)):
        part = part.sort_values("gpus")
        per_dollar = 1000.0 / part["cost_usd_per_1000_samples"]
        color = _LINE_COLORS[i % len(_LINE_COLORS)]
        fig.add_trace(go.Scatter(
            x=part["gpus"], y=per_dollar, mode="lines+markers", name=sched if len(networks) == 1 else f"{sched} · {net}",
            line={"color": color},
            marker={"size": 8, "color": [color if f else UNFIT_COLOR for f in part["fits_in_memory"].astype(bool)]},
            customdata=part[["energy_j_per_1000_samples"]].to_numpy() / 1e3,
            hovertemplate="%{x} GPUs<br>%{y:,.0f} samples/$<br>%{customdata[0]:.3g} kJ per 1,000 samples"
                          "<extra></extra>",
        ))
    fig.update_xaxes(type="log", title="GPUs", tickvals=sorted(sweep["gpus"].unique()))
    fig.update_yaxes(title="samples per dollar", rangemode="tozero")
    fig.update_layout(title={"text": "Throughput per dollar", "x": 0.01}, height=360,
                      margin={"l": 10, "r": 10, "t": 40, "b": 40})
    return fig


def cost_section(sweep: pd.DataFrame, gpu: str, cache_key: tuple | None = None) -> None:
    """Samples per dollar of the sweep, with the price and power it assumes and their sources
    (the chart kept for every session under ``cache_key`` when given, `dashboard.ui.chart`)."""
    st.subheader("Throughput per dollar")
    row = gpu_price(gpu)
    if row is None or row.price_usd_per_hour is None or not sweep["cost_usd_per_1000_samples"].map(math.isfinite).any():
        st.info(f"No on-demand price for {gpu} in data/prices.csv: the command line takes one "
                "(--price-usd-per-hour).")
        return
    if cache_key is None:
        ui.chart(samples_per_dollar_figure(sweep), "samples_per_dollar_chart", "samples-per-dollar")
    else:
        ui.chart(lambda: samples_per_dollar_figure(sweep), "samples_per_dollar_chart", "samples-per-dollar",
                 cache_key=("samples-per-dollar", cache_key))
    st.caption(f"At ${row.price_usd_per_hour:g} per GPU-hour ({row.price_source}) and {row.power_w:g} W per GPU "
               f"({row.power_source}); energy = board power × GPUs × iteration time, an upper bound. Grey points "
               "do not fit in GPU memory.")
