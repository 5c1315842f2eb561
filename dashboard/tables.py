"""Pure table builders: simulator objects in, tidy DataFrames out.

They prepare what the figures in `dashboard.figures` draw and what the pages
show as tables. No Streamlit here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

import numpy as np
import pandas as pd

import sim
from sim.comm import CommCost
from sim.core.cost import lines
from sim.core.messages import ELIDED
from sim.core.timeline import COMPUTE_KINDS

__all__ = [
    "MAX_LAYER_BARS",
    "METRIC_LABELS",
    "binned_layers",
    "drawn_timeline",
    "fmt_change_pct",
    "fmt_bytes",
    "layer_table",
    "message_table",
    "metrics_table",
    "overlap_pct",
    "scaling_gpu_counts",
    "short_layers",
]

#: Metric columns shown to people, with their display names (ms, %, ...).
METRIC_LABELS = {
    "scheduler": "scheduler",
    "iteration_ms": "iteration (ms)",
    "throughput_samples_per_s": "throughput (samples/s)",
    "compute_ms": "compute (ms)",
    "comm_ms": "all-reduce (ms)",
    "comm_hidden_ms": "hidden comm (ms)",
    "comm_exposed_ms": "exposed comm (ms)",
    "overlap_pct": "overlap (%)",
    "idle_ms": "idle (ms)",
    "num_messages": "messages",
    "speedup": "speedup",
    "scaling_efficiency_pct": "scaling efficiency (%)",
}


def fmt_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``; binary units, one decimal."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def short_layers(joined: str, limit: int = 3) -> str:
    """``'a+b+c+d+e'`` -> ``'a, b, c … (+2 more)'``: a message's layers, briefly."""
    names = [x for x in str(joined).split("+") if x]
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f" … (+{len(names) - limit} more)"


def interference_note(metrics: Mapping, cluster) -> str:
    """One sentence on the interference a run was timed with, both ways (``data/interference.csv``):
    what the Timeline's bars already include, named so a reader can see and switch it."""
    kappa, kappa_c = cluster.compute_slowdown_of_link(), cluster.comm_slowdown_of_link()
    if kappa <= 0 and kappa_c <= 0:
        return "Interference is off: compute and communication beside each other run at their own speed."
    added_ms = 1e3 * float(metrics.get("interference_s", 0.0))
    return (f"Interference is in the bars: compute beside communication runs up to {1 + kappa:.2f}× as long "
            f"(κ = {kappa:g}; +{added_ms:.1f} ms of compute here), and a message beside the backward pass "
            f"makes 1/{1 + kappa_c:.2f} of its progress (κc = {kappa_c:g}); `--no-interference` or "
            "`interference=False` turns both off.")


def overlap_pct(hidden_s, comm_s):
    """Hidden ÷ all communication × 100, as HTA reports overlap; NaN without communication.

    >>> float(overlap_pct(0.5, 2.0))
    25.0
    """
    hidden, comm = np.asarray(hidden_s, dtype=float), np.asarray(comm_s, dtype=float)
    return np.where(comm > 0, hidden / np.where(comm > 0, comm, 1.0) * 100, np.nan)


def metrics_table(metrics: Iterable[Mapping]) -> pd.DataFrame:
    """One row per result's metrics dict, in display units (ms, %)."""
    frame = pd.DataFrame(list(metrics))
    out = pd.DataFrame(
        {
            "scheduler": frame["scheduler"],
            "iteration_ms": frame["iteration_time_s"] * 1e3,
            "throughput_samples_per_s": frame["throughput_samples_per_s"],
            "compute_ms": frame["compute_s"] * 1e3,
            "comm_ms": frame["comm_s"] * 1e3,
            "comm_hidden_ms": frame["comm_hidden_s"] * 1e3,
            "comm_exposed_ms": frame["comm_exposed_s"] * 1e3,
            "overlap_pct": overlap_pct(frame["comm_hidden_s"], frame["comm_s"]),
            "idle_ms": np.maximum(frame["iteration_time_s"] - frame["compute_s"] - frame["comm_exposed_s"], 0.0) * 1e3,
            "num_messages": frame["num_messages"].astype(int),
            "speedup": frame["speedup"],
            "scaling_efficiency_pct": frame["scaling_efficiency"] * 100,
        }
    )
    return out.rename(columns=METRIC_LABELS)


def message_table(timeline: pd.DataFrame, iteration: int = 0) -> pd.DataFrame:
    """The all-reduce messages of one iteration, in sending order, in display units."""
    comm = timeline.loc[(timeline["kind"] == "comm") & (timeline["iteration"] == iteration)]
    return pd.DataFrame(
        {
            "message": [f"g{g}" for g in comm["group"]],
            # a message named by its first and last layer only (a partitioned one of very many layers,
            # `sim.core.taskgraph.MAX_PART_NAME_CHARS`) has an unknown count here: left empty
            "layers": (comm["layer"].str.count(r"\+") + 1).astype("Int64").mask(
                comm["layer"].str.contains(ELIDED, regex=False)).to_numpy(),
            "contents": comm["layer"].map(short_layers).to_numpy(),
            "size": comm["bytes"].map(fmt_bytes).to_numpy(),
            "start (ms)": (comm["start_s"] * 1e3).to_numpy(),
            "duration (ms)": (comm["duration_s"] * 1e3).to_numpy(),
        }
    )


def layer_table(model: sim.Model, cost: CommCost, precision: str, groups: list[list[str]] | None = None) -> pd.DataFrame:
    """Per-layer parameters, compute time and all-reduce time split into alpha and beta*M.

    ``model`` must carry compute times (a resolved model, e.g. ``SimResult.model``).
    The all-reduce columns are for the layer's gradient sent alone:
    ``T(M) = alpha + beta * M`` of the size regime M falls in (0 for layers without parameters). With a
    trace-driven cost (measured ``layer_s``), the measured time is the total
    and its alpha part is the fitted alpha, at most the whole.
    """
    nbytes = model.gradient_bytes(precision).astype(float)
    has = model.params > 0
    measured = getattr(cost, "layer_s", None)
    if measured:
        total_ms = np.where(has, np.asarray(measured, dtype=float) * 1e3, 0.0)
        alpha_ms = np.minimum(np.where(has, cost.alpha_s * 1e3, 0.0), total_ms)
        beta_ms = total_ms - alpha_ms
    else:  # the line of the size regime each gradient falls in (piecewise costs: size regimes, the tree's fill)
        alpha = np.array([r.alpha_s for r in lines(cost)])[cost.regime_index(nbytes)]
        alpha_ms = np.where(has, alpha * 1e3, 0.0)
        beta_ms = np.where(has, np.asarray(cost.time_s(nbytes), dtype=float) * 1e3, 0.0) - alpha_ms
    group_of = {name: gi for gi, members in enumerate(groups or []) for name in members}
    frame = pd.DataFrame(
        {
            "layer": np.arange(model.num_layers),
            "name": list(model.layer_names),
            "type": list(model.layer_types) if model.layer_types is not None else "",
            "params": model.params.astype(np.int64),
            "grad_bytes": nbytes.astype(np.int64),
            "fwd_ms": np.asarray(model.fwd_s) * 1e3,
            "bwd_ms": np.asarray(model.bwd_s) * 1e3,
            "alpha_ms": alpha_ms,
            "beta_ms": beta_ms,
            "message": [group_of.get(n, -1) for n in model.layer_names],
        }
    )
    frame["allreduce_ms"] = frame["alpha_ms"] + frame["beta_ms"]
    return frame


def fmt_change_pct(pct: float) -> str:
    """A change in percent with a sign and three significant digits, so a small change never reads as
    ``+0.00 %``; exactly no change is ``0 %``.

    >>> fmt_change_pct(0.00039), fmt_change_pct(12.345), fmt_change_pct(0.0)
    ('+0.00039 %', '+12.3 %', '0 %')
    """
    if not math.isfinite(pct):
        return "n/a"
    if pct == 0:
        return "0 %"
    return f"{pct:+,.0f} %" if abs(pct) >= 1000 else f"{pct:+.3g} %"


#: Above this many layers the Model page's per-layer bars sum consecutive layers (a browser draws a
#: few thousand bars at once; 5 panels x 100k layers hung the tab for minutes).
MAX_LAYER_BARS = 1000
_SUMMED = ("params", "fwd_ms", "bwd_ms", "alpha_ms", "beta_ms")


def binned_layers(layers: pd.DataFrame, max_bars: int = MAX_LAYER_BARS) -> tuple[pd.DataFrame, int]:
    """`layer_table`'s per-layer bars, at most ``max_bars`` of them: ``(bars, layers per bar)``.

    Up to ``max_bars`` layers every layer is a bar (``layer``, ``name`` and the columns as given).
    Above, each bar sums ``ceil(n / max_bars)`` consecutive layers: ``layer`` is its first layer's
    index and ``name`` says which layers it holds.

    >>> t = pd.DataFrame({"layer": range(5), "name": list("abcde"), "params": [1, 2, 3, 4, 5],
    ...                   "fwd_ms": 1.0, "bwd_ms": 1.0, "alpha_ms": 0.0, "beta_ms": 0.0})
    >>> bars, per = binned_layers(t, max_bars=2)
    >>> per, bars["params"].tolist(), bars["name"].tolist()
    (3, [6, 9], ['a … c (3 layers)', 'd … e (2 layers)'])
    """
    n = len(layers)
    if n <= max_bars:
        return layers, 1
    per = -(-n // max_bars)
    bin_of = np.arange(n) // per
    bars = layers.groupby(bin_of, sort=True)[list(_SUMMED)].sum()
    names = layers["name"].astype(str).to_numpy()
    first, last = np.arange(0, n, per), np.minimum(np.arange(0, n, per) + per, n) - 1
    bars.insert(0, "name", [f"{names[a]} … {names[b]} ({b - a + 1} layers)" for a, b in zip(first, last, strict=True)])
    bars.insert(0, "layer", layers["layer"].to_numpy()[first])
    return bars.reset_index(drop=True), per


def scaling_gpu_counts(gpus_per_node: int, current: int | None = None, max_gpus: int = 1024) -> list[int]:
    """GPU counts for a scaling sweep that fill whole nodes.

    Powers of two and ``gpus_per_node`` times powers of two up to ``max_gpus``,
    plus ``current``; counts below one node are one partly filled node. Counts
    that do not fill whole nodes are left out (the cluster would refuse them).
    """
    candidates = {1 << k for k in range(max_gpus.bit_length())}
    candidates |= {gpus_per_node << k for k in range(max_gpus.bit_length())}
    if current is not None:
        candidates.add(int(current))
    return sorted(
        p for p in candidates
        if p >= 1 and (p <= max_gpus or p == current) and (p <= gpus_per_node or p % gpus_per_node == 0)
    )


#: Rows of a shown timeline up to which `drawn_timeline` runs one more iteration to draw the next forward pass
#: (a larger chart is merged for display anyway, and a second run of it would double the page's memory).
NEXT_FORWARD_MAX_ROWS = 20_000


def drawn_timeline(res: sim.SimResult, longer: Callable[[], sim.SimResult] | None = None) -> pd.DataFrame:
    """The timeline a page draws of ``res``: its iterations, and where the plan updates per layer
    (DeAR, ByteScheduler: the last messages run beside the next iteration's forward pass) the next
    iteration's compute tasks that start before the last message ends. The chart then shades those
    messages hidden behind that forward pass, as the metrics count them (drawn without it, they
    looked exposed: 144 ms against the metrics' 14 for DeAR on vgg16, 64 GPUs). ``longer``: the same
    run with one iteration more, for when ``res`` timed no more than it shows."""
    shown = res.timeline
    if not res.plan.per_layer_update or res.timeline_of is None or shown.empty:
        return shown  # (a large run keeps no timeline_of: its last messages are drawn without the next forward)
    n = int(shown["iteration"].max()) + 1
    more = res.timeline_of(n + 1)
    if more["iteration"].max() < n and longer is not None and len(shown) <= NEXT_FORWARD_MAX_ROWS:
        more = longer().timeline
    comm_end = shown.loc[~shown["kind"].isin(COMPUTE_KINDS + ("io", "h2d")), "end_s"].max()
    ahead = more[(more["iteration"] == n) & more["kind"].isin(COMPUTE_KINDS) & (more["start_s"] < comm_end)]
    return shown if ahead.empty else pd.concat([shown, ahead], ignore_index=True)
