"""Unions of time intervals and how much of them lies before a time, vectorised.

Shared by the trace importer (`sim.calib.kineto`: busy time and overlap of
measured kernels) and interference (`sim.core.interference`: how much of a
compute task runs beside communication).
"""

from __future__ import annotations

import numpy as np

__all__ = ["covered_before", "union"]


def union(start, end) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals [start, end) as sorted, disjoint intervals."""
    order = np.argsort(start, kind="stable")
    start, end = np.asarray(start, float)[order], np.asarray(end, float)[order]
    if len(start) == 0:
        return start, end
    reach = np.maximum.accumulate(end)
    new = np.r_[True, start[1:] > reach[:-1]]
    return start[new], np.maximum.reduceat(end, np.flatnonzero(new))


def covered_before(start: np.ndarray, end: np.ndarray, t) -> np.ndarray:
    """Length of the disjoint sorted intervals [start, end) that lies before each time ``t``."""
    t = np.asarray(t, float)
    if len(start) == 0:
        return np.zeros_like(t)
    cum = np.r_[0.0, np.cumsum(end - start)]
    i = np.searchsorted(start, t, side="right") - 1
    inside = np.clip(t - start[np.clip(i, 0, None)], 0.0, (end - start)[np.clip(i, 0, None)])
    return np.where(i >= 0, cum[np.clip(i, 0, None)] + inside, 0.0)
