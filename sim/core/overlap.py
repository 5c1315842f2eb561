"""The fast path's reading of communication overlap from arrays (`sim.core.fast`):
messages in the timeline's order, and the part of them hidden behind compute."""

from __future__ import annotations

import math
from bisect import bisect_left

import numpy as np

__all__ = ["hidden_row_s", "hidden_s", "time_order", "wait_s"]


def time_order(c_start: np.ndarray, c_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's messages in the timeline's order (start, end, then plan order)."""
    if np.all(c_start[:, 1:] >= c_start[:, :-1]) and np.all(c_end[:, 1:] >= c_end[:, :-1]):
        return c_start, c_end  # served in plan order
    plan_order = np.broadcast_to(np.arange(c_start.shape[1]), c_start.shape)
    order = np.lexsort((plan_order, c_end, c_start), axis=-1)
    return np.take_along_axis(c_start, order, axis=1), np.take_along_axis(c_end, order, axis=1)


def hidden_s(c_start: np.ndarray, c_end: np.ndarray, backward_end_s: np.ndarray) -> np.ndarray:
    """Overlap of each row's messages with compute, as `sim.timeline.interval_overlap_s` sums it.

    Messages of one iteration all start after its forward pass begins and end
    before its update starts, so of all compute they can only overlap the
    span from the start of the forward pass to the end of backward (merged
    with the update when that follows at once, which changes nothing before
    it). Touching messages merge into one busy period, as in that function's
    union; each period adds ``min(period end, backward end) - period start``
    when positive, summed one after another in time order.
    """
    rows, n_msg = c_start.shape
    if n_msg == 0:
        return np.zeros(rows)
    if rows == 1:  # one row: the same steps on Python floats (numpy's per-call cost dominates)
        return np.array([hidden_row_s(c_start[0].tolist(), c_end[0].tolist(), float(backward_end_s[0]))])
    valid = c_end > c_start
    run_end = np.maximum.accumulate(np.where(valid, c_end, -np.inf), axis=1)
    before = np.concatenate([np.full((rows, 1), -np.inf), run_end[:, :-1]], axis=1)
    opens = valid & (c_start > before)
    # a busy period ends just before the next one opens (or at the last message)
    idx = np.arange(n_msg)
    next_open = np.minimum.accumulate(np.where(opens, idx, n_msg)[:, ::-1], axis=1)[:, ::-1]
    next_open = np.concatenate([next_open[:, 1:], np.full((rows, 1), n_msg)], axis=1)
    period_end = np.take_along_axis(run_end, next_open - 1, axis=1)
    hi = np.minimum(period_end, backward_end_s[:, None])
    piece = np.where(opens & (hi > c_start), hi - c_start, 0.0)
    return np.cumsum(piece, axis=1)[:, -1]


def wait_s(c_start: np.ndarray, c_end: np.ndarray, after_s: np.ndarray, until_s: np.ndarray) -> np.ndarray:
    """Per row, the part of [after_s, until_s] with no message on the wire: after its
    backward pass, the time a GPU waits for communication that has not started
    (Horovod's negotiation tick).

    The messages of a row are disjoint and in time order (one channel); the
    pieces inside the span are summed in that order, as `sim.core.intervals.overlap_s`
    sums them for the general engine.
    """
    span = np.maximum(until_s - after_s, 0.0)
    if c_start.shape[1] == 0:
        return span
    lo = np.maximum(c_start, after_s[:, None])
    hi = np.minimum(c_end, until_s[:, None])
    covered = np.cumsum(np.where(hi > lo, hi - lo, 0.0), axis=1)[:, -1]
    return np.maximum(span - covered, 0.0)


def hidden_row_s(c_start: list[float], c_end: list[float], backward_end_s: float) -> float:
    """`hidden_s` of one row (messages in time order): the same busy periods, pieces and sum in the
    same order (the same bits). Messages that start once compute has ended add nothing: the first of
    them that takes time closes the loop (it may carry the open period past the end of compute)."""
    total, run_end, opened = 0.0, -math.inf, None
    cut = bisect_left(c_start, backward_end_s)
    for s, e in zip(c_start[:cut], c_end[:cut], strict=True):
        if not e > s:  # a message that takes no time opens nothing and extends nothing
            continue
        if s > run_end:  # a busy period opens: the one before ends at the running end
            if opened is not None:
                total = _add_piece(total, opened, run_end, backward_end_s)
            opened = s
        run_end = e if e > run_end else run_end
    for g in range(cut, len(c_start)):
        s, e = c_start[g], c_end[g]
        if e > s:  # opening a period that hides nothing, or extending the open one
            run_end = e if s <= run_end < e else run_end
            break
    return total if opened is None else _add_piece(total, opened, run_end, backward_end_s)


def _add_piece(total: float, start: float, period_end: float, backward_end_s: float) -> float:
    hi = period_end if period_end < backward_end_s else backward_end_s
    return total + (hi - start) if hi > start else total
