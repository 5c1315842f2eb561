"""One channel's message times and one compute chain's task ends, as the engine computes them.

Shared by the fast path (`sim.core.fast`, many rows at once with numpy) and
its one-row form on Python floats (`sim.core.scalar`): every start is a
maximum of earlier ends and every end one addition, in the engine's order,
so the times are the engine's to the last bit.

Communication slowed by compute (``comm_slowdown``, `slowed_end`): while the
worker's compute runs, a message makes ``1 / (1 + comm_slowdown)`` of its
progress (NCCL's kernels get fewer SMs and less memory bandwidth; over TCP
the CPU threads and the PCIe path that stage the data are shared with the
running step). On the fast path the worker computes without a gap from the
start of the backward pass to its end ``B``, and a message never starts
before the backward pass, so a message of work ``t`` starting at ``s``
ends at ``s + t (1 + k)`` if that is before ``B``, else at ``B + t - (B -
s) / (1 + k)`` (the work left after ``B`` at full rate), and at ``s + t``
when it starts after ``B``.
"""

from __future__ import annotations

import heapq
import math
import operator
from itertools import accumulate

import numpy as np

__all__ = ["chain_ends", "channel", "channel_by_priority", "channel_row", "slowed_end"]

#: Above this many rows the channel recurrence steps through messages with
#: numpy over all rows; below it, plain floats row by row are faster.
_ROWS_FOR_NUMPY_SCAN = 8


def chain_ends(start: np.ndarray, durations: np.ndarray, scale: np.ndarray | None = None) -> np.ndarray:
    """Ends of tasks run back to back from ``start`` (K,): ``end[i] = end[i-1] + d[i]``; ``durations`` (n,) or (K, n),
    each row's times multiplied by ``scale[row]`` first when given (the product the engine takes).

    A running sum that starts from ``start``, added in the same order as the
    engine adds, so the ends are the engine's to the last bit. It is summed in place
    in one buffer (a per-worker run of 8,192 workers sums 1.3 million times a task).
    """
    buf = np.empty((start.shape[0], durations.shape[-1] + 1))
    buf[:, 0] = start
    if scale is None:
        buf[:, 1:] = durations
    else:
        np.multiply(scale[:, None], durations, out=buf[:, 1:])
    np.cumsum(buf, axis=1, out=buf)
    return buf[:, 1:]


def slowed_end(start_s: float, t_c_s: float, busy_until_s: float, k1: float) -> float:
    """End of a message of work ``t_c_s`` started at ``start_s`` when compute runs until
    ``busy_until_s`` and slows it ``k1 = 1 + comm_slowdown`` times while it does: ``start + t +
    min(t (k1 - 1), max(busy_until - start, 0) (1 - 1/k1))`` (the first term while the whole
    message runs beside compute, the second once compute ends first; 0 when it starts after)."""
    left = busy_until_s - start_s
    if left <= 0.0:
        return start_s + t_c_s
    extra = t_c_s * (k1 - 1.0)
    during = left * (1.0 - 1.0 / k1)
    return start_s + t_c_s + (extra if extra < during else during)


def channel(free_s: np.ndarray, ready_s: np.ndarray, t_c_s: np.ndarray, busy_until_s: np.ndarray | None = None,
            k1: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
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
    slow = k1 is not None and bool(np.any(k1 != 1.0))
    t_c_s = np.broadcast_to(t_c_s, (rows, n_msg))
    if rows >= _ROWS_FOR_NUMPY_SCAN and in_order.all():
        _scan_rows(free_s, ready_s, t_c_s, busy_until_s if slow else None, k1, start, end)
        return start, end
    for r in range(rows):
        busy = (float(busy_until_s[r]), float(k1[r])) if slow and k1[r] != 1.0 else None
        start[r], end[r] = channel_row(float(free_s[r]), ready_s[r].tolist(), t_c_s[r].tolist(), bool(in_order[r]),
                                       busy)
    return start, end


def _scan_rows(free_s: np.ndarray, ready_s: np.ndarray, t_c_s: np.ndarray, busy_until_s: np.ndarray | None,
               k1: np.ndarray | None, start: np.ndarray, end: np.ndarray) -> None:
    """`channel`'s recurrence over every row at once, message by message, for messages released in plan
    order (``busy_until_s`` None: not slowed); fills ``start`` and ``end``.

    Once every row's channel is behind for good (the end so far at or after the last release, and
    after compute: each later message starts as the one before ends, not slowed; no time negative),
    the rest is a running sum per row (`chain_ends`: the same additions in the same order). That is
    checked at messages 0, 1, 3, 7, ...: a plan whose messages wait for the backward pass (or a
    backlog from early on) is summed at once, another pays a few checks."""
    n_msg = ready_s.shape[1]
    e = free_s.copy()
    slow = busy_until_s is not None
    if slow:  # `slowed_end`'s arithmetic over rows: the extra time of each message if all slowed
        extra = t_c_s * (k1 - 1.0)[:, None]
        shrink = 1.0 - 1.0 / k1
        left = np.empty(len(e))
    latest = ready_s[:, -1] if n_msg and t_c_s.min() >= 0.0 else None
    check = 0
    for g in range(n_msg):
        s = np.maximum(e, ready_s[:, g], out=start[:, g])
        e = np.add(s, t_c_s[:, g], out=end[:, g])
        if slow:
            np.subtract(busy_until_s, s, out=left)
            np.maximum(left, 0.0, out=left)
            left *= shrink
            np.minimum(extra[:, g], left, out=left)
            e += left
        if g == check and latest is not None and g + 1 < n_msg:
            check = 2 * g + 1
            if np.all(e >= latest) and (not slow or np.all(e >= busy_until_s)):
                end[:, g + 1:] = chain_ends(e, t_c_s[:, g + 1:])
                start[:, g + 1:] = end[:, g:-1]
                return


def channel_row(free_s: float, ready_s: list[float], t_c_s: list[float], in_order: bool | None = None,
                slowed: tuple[float, float] | None = None):
    """`channel` of one row on Python floats: the (start, end) lists of its messages.
    ``in_order``: whether the messages are released in plan order (checked if None);
    ``slowed``: ``(busy_until_s, k1)`` of `slowed_end`, or None (no slowdown)."""
    if slowed is not None:
        if in_order is False:
            return channel_by_priority(free_s, ready_s, t_c_s, slowed)
        return _slowed_in_order(free_s, ready_s, t_c_s, *slowed, checked=bool(in_order))
    if in_order is False:
        return channel_by_priority(free_s, ready_s, t_c_s)
    start: list[float] = []
    end: list[float] = []
    add_start, add_end = start.append, end.append
    e, last = free_s, -math.inf
    # the last release, if they come in plan order (a running sum needs no negative time after it)
    latest = ready_s[-1] if ready_s and min(t_c_s) >= 0.0 else math.inf
    for g, (rd, tc) in enumerate(zip(ready_s, t_c_s, strict=True)):
        if rd < last:  # released out of plan order (checked as it goes when not told)
            return channel_by_priority(free_s, ready_s, t_c_s)
        last = rd
        s = rd if rd > e else e  # max(end before, ready)
        e = s + tc
        add_start(s)
        add_end(e)
        if e >= latest:  # every later message is released by now: the rest is a running sum
            if in_order or all(map(operator.le, ready_s[g:], ready_s[g + 1:])):
                return _backlogged(start, end, t_c_s, g + 1)
            return channel_by_priority(free_s, ready_s, t_c_s)
    return start, end


def _backlogged(start: list, end: list, t_c_s: list[float], g: int) -> tuple[list, list]:
    """``start``, ``end`` of messages 0 .. g-1 completed by messages g on, which all wait for the one
    before (each released by the time the channel frees, plain, not slowed): ``start[h] = end[h-1]``
    and ``end[h] = start[h] + t_c[h]``, a running sum (the recurrence's ``max`` picks ``end[h-1]``)."""
    ends = list(accumulate(t_c_s[g:], initial=end[-1]))
    start += ends[:-1]
    del ends[0]
    end += ends
    return start, end


def _slowed_in_order(free_s: float, ready_s: list[float], t_c_s: list[float], busy_until_s: float,
                     k1: float, checked: bool = True) -> tuple[list, list]:
    """`channel_row` of messages released in plan order, slowed by compute (`slowed_end`); unless
    ``checked``, the order is checked as it goes (out of it, `channel_by_priority` serves them)."""
    start: list[float] = []
    end: list[float] = []
    add_start, add_end = start.append, end.append
    e, last, shrink, k = free_s, -math.inf, 1.0 - 1.0 / k1, k1 - 1.0
    latest = ready_s[-1] if ready_s and min(t_c_s) >= 0.0 else math.inf  # the last release (in plan order)
    for g, (rd, tc) in enumerate(zip(ready_s, t_c_s, strict=True)):  # `slowed_end`, inline
        if rd < last:
            return channel_by_priority(free_s, ready_s, t_c_s, (busy_until_s, k1))
        last = rd
        s = rd if rd > e else e
        left = busy_until_s - s
        if left <= 0.0:
            e = s + tc
            if e >= latest:  # the rest starts after compute (s >= busy_until_s), each at the end before
                if not (checked or all(map(operator.le, ready_s[g:], ready_s[g + 1:]))):
                    return channel_by_priority(free_s, ready_s, t_c_s, (busy_until_s, k1))
                add_start(s)
                add_end(e)
                return _backlogged(start, end, t_c_s, g + 1)
        else:
            extra, during = tc * k, left * shrink
            e = s + tc + (extra if extra < during else during)
        add_start(s)
        add_end(e)
    return start, end


def channel_by_priority(free_s: float, ready_s: list[float], t_c_s: list[float],
                        slowed: tuple[float, float] | None = None) -> tuple[list, list]:
    """One channel serving, whenever free, the released message first in plan order
    (``slowed``: as `channel_row`)."""
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
        t = end[g] = t + t_c_s[g] if slowed is None else slowed_end(t, t_c_s[g], *slowed)
    return start, end


