"""A lane's list schedule from a guessed order, in array operations, checked, to the bit.

`sim.core.pipeline` times each lane of an iteration by a loop over its tasks
(a list schedule: whenever the lane is free, the released task of smallest
rank starts). The order a lane serves its tasks in rarely changes from one
iteration to the next, nor from one interference round to the next. Given
an order, the times follow from one recurrence per lane, ``start = max(release,
end of the task before)`` and ``end = start + duration``, which `scan` evaluates
with numpy: where the lane idles a new run begins at a release, and within a
run each end is the one before plus a duration, added one at a time in the
loop's order (`running_sums`), so the same bits.

`is_list_schedule` then checks the times against the rule itself: every task
that was released and waiting when another started has a larger rank
(`sparse_max`, a range maximum), and the lane idles only until the earliest
release of what is left. A guessed order that passes both is the order of
the unique list schedule, so the times are the loop's; one that fails is
dropped and the loop runs.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ENABLED", "by_value", "is_list_schedule", "order_of", "range_max", "replayed", "running_sums", "scan",
           "sparse_max", "updates_by_release", "updates_then_forward"]

#: Off: every lane is timed by its loop (the tests compare the two).
ENABLED = True
#: Runs longer than this are summed one `np.cumsum` each; the shorter ones a position at a time, all together.
_LONG = 16
#: Guessed run boundaries corrected this many times at most before `scan` gives up.
_FIXES = 4


def running_sums(first: np.ndarray, value: np.ndarray, duration: np.ndarray) -> np.ndarray:
    """``end`` with ``end[p] = value[r] + duration[p]`` at each run's first position ``first[r]`` and
    ``end[p] = end[p - 1] + duration[p]`` inside a run: the additions of a loop, in its order."""
    n = len(duration)
    end = np.empty(n)
    bounds = np.append(first, n)
    length = np.diff(bounds)
    end[first] = value + duration[first]
    long = np.flatnonzero(length > _LONG)
    for r in long.tolist():
        s, e = int(bounds[r]), int(bounds[r + 1])
        buf = duration[s:e].copy()
        buf[0] = end[s]
        np.cumsum(buf, out=end[s:e])
    short = np.flatnonzero((length > 1) & (length <= _LONG))
    j = 1
    while len(short):  # the short runs longer than j: their positions j, all together
        at = bounds[short] + j
        end[at] = end[at - 1] + duration[at]
        j += 1
        short = short[length[short] > j]
    return end


def scan(release: np.ndarray, duration: np.ndarray, free: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Start and end of tasks served in the given order on a lane free from ``free``:
    ``start = max(release, end before)``, ``end = start + duration``. None if the
    lane's idle points could not be settled (near-ties of the guess)."""
    n = len(release)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    got = _busy(release, duration, free)
    if got is not None:
        return got
    before = np.cumsum(duration)  # approximate: where the lane idles, not the times
    before -= duration
    approx_end = np.subtract(release, before)  # (in place from here: fewer arrays of n)
    np.maximum.accumulate(approx_end, out=approx_end)
    np.maximum(approx_end, free, out=approx_end)
    approx_end += before
    approx_end += duration
    new = np.empty(n, bool)
    new[0] = True
    np.greater(release[1:], approx_end[:-1], out=new[1:])
    for _ in range(_FIXES):
        first = np.flatnonzero(new)
        value = release[first].copy()
        value[0] = max(float(release[0]), free)
        end = running_sums(first, value, duration)
        settled = np.empty(n, bool)
        settled[0] = True
        np.greater(release[1:], end[:-1], out=settled[1:])
        if np.array_equal(settled, new):
            start = np.empty(n)
            start[0] = value[0]
            start[1:] = np.where(new[1:], release[1:], end[:-1])
            return start, end
        new = settled
    return None


def _busy(release: np.ndarray, duration: np.ndarray, free: float) -> tuple[np.ndarray, np.ndarray] | None:
    """`scan` of a lane that never idles after its first task starts (a channel that is behind): one
    running sum from the first start (`running_sums` of one run, the same additions); None if the
    lane would idle."""
    head = min(len(release), 64)  # (a lane that idles early, first: the same sums, on few tasks)
    end = duration[:head].copy()
    end[0] += max(float(release[0]), free)
    if np.any(release[1:head] > np.cumsum(end, out=end)[:-1]):
        return None
    end = duration.copy()
    end[0] += max(float(release[0]), free)
    np.cumsum(end, out=end)
    if np.any(release[1:] > end[:-1]):
        return None
    start = np.empty(len(end))
    start[0] = max(float(release[0]), free)
    start[1:] = end[:-1]
    return start, end


def sparse_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``max(values[lo[i]:hi[i]])`` for each i (every range non-empty), by a sparse table."""
    n = len(values)
    span = hi - lo
    top = int(span.max()).bit_length() - 1 if len(span) else 0
    table = np.empty((top + 1, n), dtype=values.dtype)
    table[0] = values
    for level in range(1, top + 1):
        width = 1 << (level - 1)
        np.maximum(table[level - 1, :n - width], table[level - 1, width:], out=table[level, :n - width])
    k = np.log2(span).astype(np.int64)
    k -= (1 << k) > span  # guard the float log at powers of two
    k += (1 << (k + 1)) <= span
    flat = table.ravel()
    return np.maximum(flat[k * n + lo], flat[k * n + hi - (1 << k)])


def range_max(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``max(values[lo[i]:hi[i]])`` for each i (every range non-empty): the last value of the range, and
    the last value of every non-decreasing run that ends inside it (`sparse_max` over those alone)."""
    ends = np.flatnonzero(values[1:] < values[:-1])  # where a run ends
    out = values[hi - 1].copy()
    first, stop = np.searchsorted(ends, lo, side="left"), np.searchsorted(ends, hi - 1, side="left")
    inner = np.flatnonzero(first < stop)
    if len(inner):
        out[inner] = np.maximum(out[inner], sparse_max(values[ends], first[inner], stop[inner]))
    return out


def is_list_schedule(start: np.ndarray, end: np.ndarray, release: np.ndarray, rank: np.ndarray, free: float) -> bool:
    """True when tasks that ran in this order at these times (every duration > 0) are the list schedule
    of their releases and ranks on a lane free from ``free``: each task started the smallest rank
    released, and the lane idled only until the next release."""
    n = len(start)
    if n == 0:
        return True
    # a task of larger rank released no earlier than the task before it waited only behind what that one
    # waited behind, and that one: it holds if the one before holds (left out of the check)
    follows = np.zeros(n, bool)
    follows[1:] = (rank[1:] > rank[:-1]) & (release[1:] >= release[:-1])
    check = np.flatnonzero(~follows)
    waits_from = np.searchsorted(start, release[check], side="left")  # the first start that sees it released
    waited = waits_from < check
    waits_from, waited = waits_from[waited], check[waited]
    if len(waited) and np.any(range_max(rank, waits_from, waited) >= rank[waited]):
        return False
    idle = np.flatnonzero(start[1:] > end[:-1]) + 1  # where the lane idled before a task
    if start[0] > free:
        idle = np.concatenate([[0], idle])
    if not len(idle):
        return True
    # the earliest release of what is left at each of them: of every position from the last back, or (few of
    # them) of each stretch between them, then from the last back
    if len(idle) > n // 16:
        left_min = np.minimum.accumulate(release[::-1])[::-1][idle]
    else:
        left_min = np.minimum.accumulate(np.minimum.reduceat(release, idle)[::-1])[::-1]
    return not np.any(left_min < start[idle])


def order_of(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """The order tasks ran in on one lane: by start, then end (tasks of no duration before the one that
    starts with them and takes time), then position."""
    order = np.lexsort((end, start))
    return order.astype(np.int32) if len(order) < 2**31 else order  # (kept from round to round: half the memory)


def replayed(guesses, release: np.ndarray, rank: np.ndarray, duration: np.ndarray, free: float):
    """The first of the ``guesses`` (orders of the tasks, or None) that is the list schedule of the
    tasks (every duration > 0): ``(order, start, end)`` with the times in that order; else None.
    ``rank`` None: each task's rank is its position."""
    for order in guesses:
        if order is None or len(order) != len(release):
            continue
        at = order.astype(np.intp, copy=False)  # (an int32 order indexes at half the speed)
        rel = release[at]
        got = scan(rel, duration[at], free)
        if got is not None and is_list_schedule(*got, rel, order if rank is None else rank[at], free):
            return (order, *got)
    return None


def updates_then_forward(guesses, up_release: np.ndarray, duration: np.ndarray, update_of: np.ndarray,
                         first_ready: float, free: float):
    """`replayed` for a compute lane after backward: U updates (released at ``up_release``, ranked
    by position) then F forwards (ranked after every update, in order; forward i waits for forward
    i - 1, for update ``update_of[i]`` if >= 0, and the first for ``first_ready``); ``duration`` of
    the U + F tasks (all > 0). ``(order, start, end)`` or None."""
    u_count = len(up_release)
    n = len(duration)
    release = np.full(n, -np.inf)
    release[:u_count] = up_release
    if n > u_count:
        release[u_count] = first_ready
    has = np.flatnonzero(update_of >= 0)
    rank = np.arange(n)
    for order in guesses:
        if order is None or len(order) != n:
            continue
        at = order.astype(np.intp, copy=False)  # (an int32 order indexes at half the speed)
        pos = np.empty(n, dtype=np.int64)
        pos[at] = rank
        fwd_pos = pos[u_count:]
        if np.any(fwd_pos[1:] <= fwd_pos[:-1]) or np.any(pos[update_of[has]] >= fwd_pos[has]):
            continue  # a forward before what it waits for
        rel = release[at]
        got = scan(rel, duration[at], free)
        if got is None:
            continue
        end_of = np.empty(n)
        end_of[at] = got[1]
        ready = release.copy()  # a forward is released as the last task it waits for ends
        ready[u_count + 1:] = end_of[u_count:-1]
        ready[u_count + has] = np.maximum(ready[u_count + has], end_of[update_of[has]])
        if is_list_schedule(*got, ready[at], order, free):
            return (order, *got)
    return None


def updates_by_release(up_release: np.ndarray, update_of: np.ndarray) -> np.ndarray:
    """A guess for `updates_then_forward` where the compute lane keeps up: the updates in release
    order (ties by rank), each forward at once after the last update it or a forward before it
    waits for (the forwards that wait for none first)."""
    u_count, f_count = len(up_release), len(update_of)
    place = np.empty(u_count, dtype=np.int64)
    place[np.argsort(up_release, kind="stable")] = np.arange(u_count)
    after = np.where(update_of >= 0, place[np.maximum(update_of, 0)] if u_count else -1, -1)
    if f_count:
        after = np.maximum.accumulate(after)
    which = np.concatenate([np.zeros(u_count, np.int8), np.ones(f_count, np.int8)])  # an update before a forward
    return np.lexsort((np.arange(u_count + f_count), which, np.concatenate([place, after])))


def by_value(values: np.ndarray) -> tuple[list, list]:
    """The positions of ``values`` in increasing order (ties by position), and the values in that order."""
    order = np.argsort(values, kind="stable")
    return order.tolist(), values[order].tolist()
