"""Interference's fixed point on the fast path, solved task by task in one pass.

On the fast path (`sim.core.fast`) communication never meets a forward task:
the update waits for the last message and the next forward for the update. In
the backward pass, a message is released when the backward of its lowest layer
ends (plus the plan's lag), so the only messages that can cover backward task
``p`` (in backward order) are those whose lowest layer is an earlier task, all
of them known once tasks ``0 .. p-1`` have their times. The fixed point of
`sim.core.interference` (``x = b (1 + kappa c(x) / x)``, ``c(x)`` the time
communication covers of the task's first ``x`` seconds) is therefore
triangular: solved for task 0, then task 1, and so on, it is exact in one
pass. Where ``c`` is piecewise linear (slope 1 while a message runs, 0 in a
gap), each piece gives a quadratic, and the task's time is the smallest
positive root: the first moment the task's work is done (the only one, for
kappa <= 1, `sim.core.cost.MAX_COMPUTE_SLOWDOWN`).

`fixed_point` reaches the same times by timing the whole run again until no
time moves; here one pass replaces two or three timings and their overlap
reads. Plans whose channel this does not follow (messages released out of
plan order, which the channel then serves by priority) return None, and the
caller iterates.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections import deque

import numpy as np

__all__ = ["backward_times", "backward_times_row"]

_INF = math.inf


def _task_time(b: float, kappa: float, t: float, starts: list, ends: list, i: int) -> float:
    """Time of a task of base ``b`` starting at ``t``, covered by the sorted disjoint messages
    ``starts[i:]``/``ends[i:]`` (the first ends after ``t``): the smallest ``x > 0`` with
    ``g(x) = x^2 - b x - b kappa c(x) = 0``.

    Before that root g is negative, and on each piece (a gap, or a message running) g is
    a convex quadratic, so the root lies in the first piece at whose end g >= 0: the larger
    root of that piece's quadratic, of ``x^2 = b1 x + b kappa c(x)`` with ``c(x) = c0 + (x - u)``
    and ``b1 = b (1 + kappa)`` while a message runs, ``c(x) = c0`` and ``b1 = b`` in a gap.
    Choosing the piece by the sign of g at its end, and clamping the root into it, keeps a
    root at a piece's end from being lost to rounding (a task that ends as a message begins)."""
    u = c0 = 0.0  # piece start (relative to t) and the covered time before it
    bk = b * kappa
    for j in range(i, len(starts)):
        s = starts[j] - t
        if s > u:  # a gap before message j
            if s * s - b * s - bk * c0 >= 0.0:
                disc = b * b + 4.0 * b * kappa * c0
                x = 0.5 * (b + math.sqrt(disc if disc > 0.0 else 0.0))
                return u if x < u else s if x > s else x
            u = s
        e = ends[j] - t
        if e > u:
            covered = c0 + (e - u)
            if e * e - b * e - bk * covered >= 0.0:
                b1 = b * (1.0 + kappa)
                disc = b1 * b1 + 4.0 * b * kappa * (c0 - u)
                x = 0.5 * (b1 + math.sqrt(disc if disc > 0.0 else 0.0))
                return u if x < u else e if x > e else x
            c0, u = covered, e
    disc = b * b + 4.0 * b * kappa * c0
    x = 0.5 * (b + math.sqrt(disc if disc > 0.0 else 0.0))
    return u if x < u else x


def backward_times_row(bwd_rev_s: list[float], t_c_s: list[float], lowest_at: list[int], lag_s: list[float] | None,
                       kappa: float) -> list[float] | None:
    """One row's stretched backward times, in backward order; None when the channel would
    serve by priority (a message released before the one ahead of it in plan order).

    ``lowest_at[g]``: the position (in backward order) of message g's lowest layer;
    ``lag_s``: each message's release lag (None: none). Times run from the start of
    the backward pass; the channel is free then (the last iteration's messages ended
    before its update).
    """
    if not all(map(operator.le, lowest_at, lowest_at[1:])):
        return None
    if lag_s is None:
        released = [0.0] * len(bwd_rev_s)
        if len(set(lowest_at)) == len(lowest_at) == len(t_c_s):  # one message per task at most: set, no sum
            deque(map(released.__setitem__, lowest_at, t_c_s), maxlen=0)  # (0.0 + t is t; -0.0 releases nothing)
        else:
            for at, t_c in zip(lowest_at, t_c_s, strict=True):
                released[at] += t_c
        return _without_lag(bwd_rev_s, released, kappa)
    starts: list[float] = []
    ends: list[float] = []
    task_end: list[float] = []
    out: list[float] = []
    t, free, last_ready, g, i, n_sent = 0.0, -_INF, -_INF, 0, 0, 0
    n_msg, k1 = len(t_c_s), 1.0 + kappa
    next_low = lowest_at[0] if n_msg else len(bwd_rev_s)  # the next message's lowest layer
    for p, b in enumerate(bwd_rev_s):
        while next_low < p:  # released by a task already timed
            ready = task_end[next_low] + lag_s[g]
            if ready < last_ready:
                return None
            last_ready = ready
            start = ready if ready > free else free
            free = start + t_c_s[g]
            starts.append(start)
            ends.append(free)
            g += 1
            n_sent += 1
            next_low = lowest_at[g] if g < n_msg else len(bwd_rev_s)
        while i < n_sent and ends[i] <= t:
            i += 1
        if i == n_sent or b <= 0.0:
            x = b
        else:  # at least b, at most b (1 + kappa)
            cap, e = b * k1, ends[i] - t
            if starts[i] - t <= 0.0 and e * e - b * e - (b * kappa) * e >= 0.0:
                # message i runs from the task's start past its stretched end: `_task_time`'s first piece,
                # whose root is b (1 + kappa) (the same operations), capped as below
                b1 = b * (1.0 + kappa)
                disc = b1 * b1 + 4.0 * b * kappa * (0.0 - 0.0)
                x = 0.5 * (b1 + math.sqrt(disc if disc > 0.0 else 0.0))
                x = 0.0 if x < 0.0 else e if x > e else x
            else:
                x = _task_time(b, kappa, t, starts, ends, i)
            x = cap if cap < (x := b if b > x else x) else x
        out.append(x)
        t += x
        task_end.append(t)
    return out


def _without_lag(bwd_rev_s: list[float], released_s: list[float], kappa: float) -> list[float]:
    """`backward_times_row` when every message is released as its last gradient is ready
    (``released_s[p]``: the time of the messages task p releases, in backward order). The
    messages a task can meet were all released by its start, so the channel is busy from the
    start until ``free`` without a gap, ``c(x) = min(x, F)`` with ``F = free - start``, and
    ``x = b (1 + kappa)`` if that fits in F, else the root of ``x^2 = b x + b kappa F``.

    No message covers a task up to the first that releases one: those take their base times,
    and ``t`` their sum (the same additions in the same order)."""
    first = next(itertools.compress(itertools.count(), released_s), len(released_s))
    out = bwd_rev_s[:first + 1]
    if first >= len(released_s) - 1:
        return out
    add, sqrt = out.append, math.sqrt
    t = functools.reduce(operator.add, out, 0.0)
    free = t + released_s[first]
    k1, k4 = 1.0 + kappa, 4.0 * kappa
    for b, released in zip(bwd_rev_s[first + 1:], released_s[first + 1:], strict=True):
        cover = free - t
        if cover <= 0.0 or b <= 0.0:
            x = b
        elif (x := b * k1) > cover:  # else the whole stretch fits
            cap = x
            x = 0.5 * (b + sqrt(b * b + k4 * b * cover))
            x = b if x < b else cap if x > cap else x
        add(x)
        t += x
        if released:
            free = (t if t > free else free) + released
    return out


def backward_times(bwd_s: np.ndarray, t_c_s: np.ndarray, lowest_at: np.ndarray, lag_s, after_backward: bool,
                   kappa: np.ndarray) -> np.ndarray | None:
    """Per row, the backward times (rows, layers; layer order) interference stretches ``bwd_s``
    (layers) to, under each row's message times ``t_c_s`` (rows, messages) and ``kappa``
    (rows); None when a row's channel serves by priority."""
    rows = len(kappa)
    if after_backward or not t_c_s.shape[1] or (not lag_s and lowest_at.min() >= len(bwd_s) - 1):
        return np.tile(bwd_s, (rows, 1))  # no message runs beside a backward task (the last releases them all)
    bwd_rev = bwd_s[::-1].tolist()
    out = np.empty((rows, len(bwd_rev)))
    if not lag_s and rows == 1:  # one row: `backward_times_row` on Python floats (it checks the order)
        got = backward_times_row(bwd_rev, t_c_s[0].tolist(), lowest_at.tolist(), None, float(kappa[0]))
        if got is None:
            return None
        out[0] = got[::-1]
        return out
    if not lag_s and np.all(lowest_at[1:] >= lowest_at[:-1]):
        released = np.zeros((rows, len(bwd_rev)))  # each task's messages' time, released at its end
        if np.all(lowest_at[1:] > lowest_at[:-1]):  # one message per task at most: set, no sum (as one row)
            released[:, lowest_at] = t_c_s
        else:
            np.add.at(released, (slice(None), lowest_at), t_c_s)
        for r, (row, k) in enumerate(zip(released.tolist(), kappa.tolist(), strict=True)):
            out[r, ::-1] = _without_lag(bwd_rev, row, k)
        return out
    at, lag = lowest_at.tolist(), list(lag_s) if lag_s else None
    for r in range(rows):
        got = backward_times_row(bwd_rev, t_c_s[r].tolist(), at, lag, float(kappa[r]))
        if got is None:
            return None
        out[r] = got[::-1]
    return out
