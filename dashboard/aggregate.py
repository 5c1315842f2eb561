"""Large timelines, drawn small: adjacent bars of one lane and kind merged into time bins.

A browser draws a few thousand Plotly bars quickly; a 100k-layer model has
hundreds of thousands. Above `MAX_BARS` bars, `display_bars` merges the bars
of each (lane, kind) whose start falls in the same one of `BINS` equal time
bins into one bar from the first start to the last end, with the number of
tasks and their summed busy time in the hover; the hidden and exposed pieces
of communication are merged the same way. What is merged is said in a
`Aggregation` note; the full trace stays downloadable (CSV, Chrome trace).
No Streamlit here.

>>> import pandas as pd
>>> bars = pd.DataFrame({"lane": ["GPU compute"] * 4, "kind": ["backward"] * 4,
...                      "start_ms": [0.0, 1.0, 2.0, 9.0], "duration_ms": [1.0, 1.0, 1.0, 1.0],
...                      "what": list("abcd"), "bytes": [0, 0, 0, 0], "iteration": [0] * 4})
>>> merged = merge_bars(bars, bins=2)
>>> merged[["start_ms", "duration_ms", "tasks", "busy_ms"]].values.tolist()
[[0.0, 3.0, 3.0, 3.0], [9.0, 1.0, 1.0, 1.0]]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from dashboard.tables import fmt_bytes, short_layers

__all__ = ["BINS", "MAX_BARS", "Aggregation", "merge_bars", "merge_pieces"]

#: Above this many bars, a timeline is drawn merged (the issue's threshold; a browser draws it in well under a second).
MAX_BARS = 5000
#: Time bins per lane and kind when merged: about one per pixel of a wide chart.
BINS = 1000


@dataclass(frozen=True)
class Aggregation:
    """What `merge_bars` did to one timeline, for the note under the chart."""

    tasks: int  # bars in the full timeline
    shown: int  # bars drawn
    bin_ms: float  # width of one time bin

    def note(self) -> str:
        return (f"This timeline has {self.tasks:,} bars; to stay quick in the browser, adjacent bars of the same "
                f"lane and kind are merged into {self.shown:,} bars (time bins of {self.bin_ms:.3g} ms; the hover "
                "gives each merged bar's task count and busy time). The downloads below hold every task.")


def _bin_of(start_ms: np.ndarray, t0: float, width: float, bins: int) -> np.ndarray:
    return np.clip(((start_ms - t0) / width).astype(np.int64), 0, bins - 1)


def _span(frame: pd.DataFrame) -> tuple[float, float]:
    t0 = float(frame["start_ms"].min())
    t1 = float((frame["start_ms"] + frame["duration_ms"]).max())
    return t0, max(t1 - t0, 1e-9)


def merge_bars(bars: pd.DataFrame, bins: int = BINS) -> pd.DataFrame:
    """`dashboard.figures.gantt_frame` rows merged per (lane, kind, time bin).

    Each merged bar runs from its first task's start to its last task's end;
    ``tasks`` counts its tasks and ``busy_ms`` sums their durations (less than
    ``duration_ms`` where the tasks leave gaps). ``what`` names the first and
    last task, ``bytes`` is the sum, ``iteration`` the first.
    """
    if bars.empty:
        return bars.assign(tasks=[], busy_ms=[])
    t0, span = _span(bars)
    frame = bars.assign(bin=_bin_of(bars["start_ms"].to_numpy(float), t0, span / bins, bins),
                        end_ms=bars["start_ms"] + bars["duration_ms"])
    out = frame.groupby(["lane", "kind", "bin"], sort=False).agg(
        start_ms=("start_ms", "min"), end_ms=("end_ms", "max"), busy_ms=("duration_ms", "sum"),
        tasks=("start_ms", "size"), first=("what", "first"), last=("what", "last"),
        bytes=("bytes", "sum"), iteration=("iteration", "min"),
    ).reset_index()
    out["duration_ms"] = out["end_ms"] - out["start_ms"]
    out["tasks"] = out["tasks"].astype(float)
    out["first"] = out["first"].astype(str).map(short_layers)  # a merged message lists every layer: keep a few
    out["last"] = out["last"].astype(str).map(short_layers)
    many = out["tasks"] > 1
    out["what"] = out["first"].astype(str)
    out.loc[many, "what"] = [f"{int(n):,} tasks merged ({busy:.3g} ms busy): {a} … {b}" for n, busy, a, b in
                             zip(out.loc[many, "tasks"], out.loc[many, "busy_ms"], out.loc[many, "first"],
                                 out.loc[many, "last"], strict=True)]
    out["bytes_text"] = [fmt_bytes(b) if b else "—" for b in out["bytes"]]
    out["label"] = ""
    out["layer"] = ""
    return out.drop(columns=["bin", "end_ms", "first", "last"])


def merge_pieces(pieces: pd.DataFrame, bins: int = BINS) -> pd.DataFrame:
    """Hidden and exposed communication pieces (with a ``lane`` column) merged per
    (lane, hidden, time bin), the same way as `merge_bars`."""
    if pieces.empty:
        return pieces
    ms = pieces.assign(start_ms=pieces["start_s"] * 1e3, duration_ms=pieces["duration_s"] * 1e3)
    t0, span = _span(ms)
    ms = ms.assign(bin=_bin_of(ms["start_ms"].to_numpy(float), t0, span / bins, bins), end_s=pieces["end_s"])
    out = ms.groupby(["lane", "hidden", "bin"], sort=False).agg(start_s=("start_s", "min"), end_s=("end_s", "max"))
    out = out.reset_index()
    out["duration_s"] = out["end_s"] - out["start_s"]
    return out.drop(columns=["bin"])
