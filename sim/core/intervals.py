"""Unions of time intervals and how much of them lies before a time, vectorised.

Shared by the trace importer (`sim.calib.kineto`: busy time and overlap of
measured kernels) and interference (`sim.core.interference`: how much of a
compute task runs beside communication).
"""

from __future__ import annotations

import numpy as np

__all__ = ["covered_at", "covered_before", "joined", "joined_overlap_s", "overlap_s", "union"]


def union(start, end) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals [start, end) as sorted, disjoint intervals."""
    start, end = np.asarray(start, float), np.asarray(end, float)
    if len(start) == 0:
        return start, end
    if np.any(start[1:] < start[:-1]):  # (already in order: the stable sort would keep it)
        order = np.argsort(start, kind="stable")
        start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    new = np.r_[True, start[1:] > reach[:-1]]
    return start[new], np.maximum.reduceat(end, np.flatnonzero(new))


def covered_before(start: np.ndarray, end: np.ndarray, t) -> np.ndarray:
    """Length of the disjoint sorted intervals [start, end) that lies before each time ``t``."""
    t = np.asarray(t, float)
    if len(start) == 0:
        return np.zeros_like(t)
    length = end - start
    return covered_at(start, length, np.r_[0.0, np.cumsum(length)], t)[0]


def covered_at(start: np.ndarray, length: np.ndarray, cum: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`covered_before` of the intervals of ``start`` and ``length`` (``cum``: 0, then their running
    length), and at each time the last interval that starts at or before it (-1: none)."""
    i = np.searchsorted(start, t, side="right") - 1
    at = np.clip(i, 0, None)
    inside = np.clip(t - start[at], 0.0, length[at])
    return np.where(i >= 0, cum[at] + inside, 0.0), i


def overlap_s(a_start, a_end, b_start, b_end) -> float:
    """Total length of the intersection of two sets of intervals [start, end): the union of each set's
    intervals of positive length, every piece where a union interval of one meets one of the other,
    summed one at a time in time order (the order a merge of the two lists finds them)."""
    a = joined(a_start, a_end)
    b = a if b_start is a_start and b_end is a_end else joined(b_start, b_end)  # (a set with itself: one union)
    return joined_overlap_s(a, b)


def joined(start, end) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals [start, end) of positive length (what `overlap_s` intersects)."""
    start, end = np.asarray(start, float), np.asarray(end, float)
    keep = end > start
    return union(start[keep], end[keep])


def joined_overlap_s(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """`overlap_s` of two sets of intervals given as their unions (`joined`): one union made once can
    meet several sets."""
    (a_lo, a_hi), (b_lo, b_hi) = a, b
    first = np.searchsorted(b_hi, a_lo, side="right")  # per a: the first b that ends after it starts
    count = np.maximum(np.searchsorted(b_lo, a_hi, side="left") - first, 0)  # ... and the b's that start before it ends
    total = int(count.sum())
    if not total:
        return 0.0
    i = np.repeat(np.arange(len(a_lo)), count)
    j = np.repeat(first - (np.cumsum(count) - count), count) + np.arange(total)
    lo, hi = np.maximum(a_lo[i], b_lo[j]), np.minimum(a_hi[i], b_hi[j])
    piece = (hi - lo)[hi > lo]
    return float(np.cumsum(piece)[-1]) if len(piece) else 0.0
