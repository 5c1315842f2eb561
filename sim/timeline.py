"""The one timeline schema, and every metric derived from it.

A timeline is a DataFrame with one row per task and the columns in
`TIMELINE_COLUMNS`:

==============  ===========================================================
iteration       iteration number, from 0
kind            io, h2d, forward, backward, comm or update
name            unique task name, e.g. ``it0/backward/conv1``; a part of a
                message names its step and partition, e.g.
                ``it0/comm/push:fc#2``
layer           the layer (forward, backward) or the ``+``-joined layers of
                a message (comm); empty for io, h2d and update
group           the message a layer's gradient travels in; -1 if none
resource        io, h2d, compute or comm; ``push`` and ``pull`` in the
                parameter-server architecture
start_s, end_s  start and end time, in seconds from the first task
duration_s      end_s - start_s
bytes           gradient bytes (backward: the layer's; comm: the message's)
==============  ===========================================================
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd

__all__ = ["COMPUTE_KINDS", "TIMELINE_COLUMNS", "interval_overlap_s", "timeline_frame"]

TIMELINE_COLUMNS = (
    "iteration", "kind", "name", "layer", "group", "resource", "start_s", "end_s", "duration_s", "bytes",
)
COMPUTE_KINDS = ("forward", "backward", "update")


def timeline_frame(g: nx.DiGraph, times: dict) -> pd.DataFrame:
    """Build the timeline from a DAG and the engine's ``{node: (start, end)}``."""
    rows = []
    for u, d in g.nodes(data=True):
        start, end = times[u]
        k, kind, i = u
        rows.append(
            (d["iteration"], kind, f"it{k}/{kind}/{d.get('label') or d['layer'] or i}", d["layer"], d["group"], d["resource"],
             start, end, end - start, d["bytes"])
        )
    frame = pd.DataFrame(rows, columns=list(TIMELINE_COLUMNS))
    frame = frame.sort_values(["start_s", "end_s", "iteration"], kind="stable").reset_index(drop=True)
    return frame.astype({"iteration": "int64", "group": "int64", "bytes": "int64"})


def _union(starts: np.ndarray, ends: np.ndarray) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for s, e in sorted(zip(starts.tolist(), ends.tolist(), strict=True)):
        if e <= s:
            continue
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def interval_overlap_s(a_start, a_end, b_start, b_end) -> float:
    """Total length of the intersection of two sets of intervals."""
    a = _union(np.asarray(a_start, float), np.asarray(a_end, float))
    b = _union(np.asarray(b_start, float), np.asarray(b_end, float))
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total
