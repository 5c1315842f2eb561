"""One channel's message times and one compute chain's task ends, as the engine computes them.

Shared by the fast path (`sim.core.fast`, many rows at once with numpy) and
its one-row form on Python floats (`sim.core.scalar`): every start is a
maximum of earlier ends and every end one addition, in the engine's order,
so the times are the engine's to the last bit.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

__all__ = ["chain_ends", "channel", "channel_by_priority", "channel_row"]

#: Above this many rows the channel recurrence steps through messages with
#: numpy over all rows; below it, plain floats row by row are faster.
_ROWS_FOR_NUMPY_SCAN = 8


def chain_ends(start: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """Ends of tasks run back to back from ``start`` (K,): ``end[i] = end[i-1] + d[i]``; ``durations`` (n,) or (K, n).

    A running sum that starts from ``start``, added in the same order as the
    engine adds, so the ends are the engine's to the last bit.
    """
    buf = np.empty((start.shape[0], durations.shape[-1] + 1))
    buf[:, 0] = start
    buf[:, 1:] = durations
    return np.cumsum(buf, axis=1)[:, 1:]


def channel(free_s: np.ndarray, ready_s: np.ndarray, t_c_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of each message on one channel, per row, in plan order.

    Messages released in plan order go in plan order: ``start[g] =
    max(end[g-1], ready[g])`` and ``end[g] = start[g] + t_c[g]`` with
    ``end[-1] = free_s``, the WFBP recurrence step by step (a prefix scan such
    as `sim.schedulers.comm_end_s` rounds differently). A row whose messages
    are released out of plan order (lags, as Horovod's ticks, can do that,
    if only by rounding) is served as the engine serves it: whenever the
    channel is free, the released message first in plan order.
    """
    rows, n_msg = ready_s.shape
    in_order = np.all(ready_s[:, 1:] >= ready_s[:, :-1], axis=1)
    start = np.empty((rows, n_msg))
    end = np.empty((rows, n_msg))
    if rows >= _ROWS_FOR_NUMPY_SCAN and in_order.all():
        e = free_s.copy()
        for g in range(n_msg):
            s = np.maximum(e, ready_s[:, g])
            e = s + t_c_s[:, g]
            start[:, g] = s
            end[:, g] = e
        return start, end
    for r in range(rows):
        start[r], end[r] = channel_row(float(free_s[r]), ready_s[r].tolist(), t_c_s[r].tolist(), bool(in_order[r]))
    return start, end


def channel_row(free_s: float, ready_s: list[float], t_c_s: list[float], in_order: bool | None = None):
    """`channel` of one row on Python floats: the (start, end) lists of its messages.
    ``in_order``: whether the messages are released in plan order (checked if None)."""
    if in_order is False:
        return channel_by_priority(free_s, ready_s, t_c_s)
    start: list[float] = []
    end: list[float] = []
    add_start, add_end = start.append, end.append
    e, last = free_s, -math.inf
    for rd, tc in zip(ready_s, t_c_s, strict=True):
        if rd < last:  # released out of plan order (checked as it goes when not told)
            return channel_by_priority(free_s, ready_s, t_c_s)
        last = rd
        s = rd if rd > e else e  # max(end before, ready)
        e = s + tc
        add_start(s)
        add_end(e)
    return start, end


def channel_by_priority(free_s: float, ready_s: list[float], t_c_s: list[float]) -> tuple[list, list]:
    """One channel serving, whenever free, the released message first in plan order."""
    n_msg = len(ready_s)
    by_release = sorted(range(n_msg), key=lambda g: (ready_s[g], g))
    start, end = [0.0] * n_msg, [0.0] * n_msg
    waiting: list[int] = []
    t, nxt = free_s, 0
    for _ in range(n_msg):
        if not waiting:  # idle until the next release
            t = max(t, ready_s[by_release[nxt]])
        while nxt < n_msg and ready_s[by_release[nxt]] <= t:
            heapq.heappush(waiting, by_release[nxt])
            nxt += 1
        g = heapq.heappop(waiting)
        start[g] = t
        t = end[g] = t + t_c_s[g]
    return start, end


