"""The Validation page's pure parts: figures, and a case turned into sidebar settings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

import sim
from dashboard.state import UPLOAD
from sim.calib.validation import method_or_scheduler
from sim.methods import METHODS

__all__ = ["case_settings", "error_figure", "parity_figure"]

SOURCE_COLOURS = {"ddl-benchmarks": "#1f77b4", "b-caffe": "#ff7f0e", "b-caffe-trace": "#2ca02c",
                  "ddl-benchmarks-100gib": "#9467bd", "ddl-benchmarks-100gbe": "#8c564b",
                  "nvidia-dle-dgx1": "#d62728", "nvidia-dle-dgxa100": "#e377c2"}


def parity_figure(results: pd.DataFrame, band_pct: float = 10.0, by: str = "source") -> go.Figure:
    """Measured against simulated throughput, log-log, with y = x and a ±band; one
    colour per ``by`` (source or method); calibration cases drawn hollow."""
    done = results.loc[results["status"] == "ok"]
    if by == "method":  # the scheduler of a case that names no survey method
        done = done.assign(method=method_or_scheduler(done))
    lo = float(min(done["measured"].min(), done["simulated"].min())) * 0.8
    hi = float(max(done["measured"].max(), done["simulated"].max())) * 1.25
    line = np.geomspace(lo, hi, 50)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=line, y=line, mode="lines", name="simulated = measured",
                             line={"color": "black", "width": 1}))
    for sign in (1, -1):
        fig.add_trace(go.Scatter(x=line, y=line * (1 + sign * band_pct / 100), mode="lines",
                                 name=f"±{band_pct:g} %", showlegend=sign == 1,
                                 line={"color": "grey", "width": 1, "dash": "dot"}))
    for name, grp in done.groupby(by, sort=True):
        hollow = grp["split"].eq("calibration").to_numpy() if "split" in grp else np.zeros(len(grp), bool)
        fig.add_trace(go.Scatter(
            x=grp["measured"], y=grp["simulated"], mode="markers", name=name,
            marker={"size": 9, "color": SOURCE_COLOURS.get(name) if by == "source" else None,
                    "symbol": np.where(hollow, "circle-open", "circle")},
            customdata=grp[["case", "error_pct"]],
            hovertemplate="%{customdata[0]}<br>measured %{x:,.1f}<br>simulated %{y:,.1f}"
                          "<br>error %{customdata[1]:+.1f} %<extra></extra>",
        ))
    fig.update_layout(xaxis={"type": "log", "title": "measured throughput (samples/s)"},
                      yaxis={"type": "log", "title": "simulated throughput (samples/s)"},
                      height=480, margin={"t": 30}, legend={"orientation": "h", "y": -0.18}, uirevision="parity")
    return fig


def error_figure(results: pd.DataFrame) -> go.Figure:
    """Signed error of every case, sorted, coloured by source."""
    done = results.loc[results["status"] == "ok"].sort_values("error_pct")
    fig = go.Figure(go.Bar(
        x=done["error_pct"], y=done["case"], orientation="h",
        marker={"color": [SOURCE_COLOURS.get(s, "#888") for s in done["source"]]},
        hovertemplate="%{y}<br>error %{x:+.1f} %<extra></extra>",
    ))
    fig.update_layout(xaxis={"title": "error (%), simulated vs measured"}, yaxis={"title": None},
                      height=max(300, 14 * len(done)), margin={"t": 20, "l": 10})
    return fig


def case_settings(row: pd.Series, model: sim.Model) -> tuple[dict, str]:
    """Sidebar settings (session-state keys of `dashboard.state`) that show ``row`` in the
    Timeline page, and a note on how faithfully they do.

    A zoo case calibrated on one GPU maps onto the sidebar exactly. Any other case
    (a transformer at another sequence length, a trace, a multi-GPU calibration point)
    is handed over as a layer table holding the calibrated per-layer times.
    """
    settings = {
        "batch": int(row["batch_size"]), "precision": row["precision"], "gpu": row["gpu"],
        "gpus": int(row["gpus"]), "per_node": int(row["gpus_per_node"]), "net": row["network"],
        "intra": row["intra"], "topo": row.get("topology") or "flat", "coll": row["collective"],
        "fw": row.get("framework") or "auto", "ab": False, "scheduler": row["scheduler"],
        "method": row["method"] if row["method"] in METHODS else "",
    }
    plain = (row["model"] in sim.model.zoo_names() and not str(row["model_kwargs"]).strip()
             and int(row["calib_gpus"]) == 1)
    if plain:
        settings.update(model=row["model"], calib=True,
                        calib_s=float(row["batch_size"]) / float(row["calib_samples_per_s"]))
        return settings, "exact: zoo model, calibrated to the measured one-GPU speed"
    table = model.layers_frame()
    keep = [c for c in ("name", "params", "fwd_ms", "bwd_ms", "comm_ms", "tensors") if c in table.columns]
    scalars = "".join(f"# {key}_ms: {getattr(model, key + '_s') * 1e3!r}\n" for key in ("io", "h2d", "update")
                      if getattr(model, key + "_s") > 0)
    settings.update(model=UPLOAD, calib=False, csv_text=table[keep].to_csv(index=False) + scalars,
                    csv_name=f"{row['case']}.csv")
    note = "as a layer table with the calibrated per-layer times" + (
        f" and its update time ({model.update_s * 1e3:.1f} ms)" if model.update_s > 0 else "")
    return settings, note
