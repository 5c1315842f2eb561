"""A lane's list schedule when every newly released message outranks those released before it.

`sim.core.pipeline` times a lane whose tasks come in runs (one per message,
consecutive ranks, releases that do not decrease along a run) with a loop
that pushes each run onto a heap as its first part is released. Where the
runs' first parts are released in strictly decreasing rank order (a later
release, a smaller rank: ByteScheduler's partitions, the layer nearest the
input first, released as backward reaches each layer), the released runs
nobody has served yet need no heap: the one of smallest rank is the first
untouched run from the last one released on (found by `_Untouched`), and
only the runs served in part wait on a heap. A channel that is behind serves
a few parts while the backward pass releases thousands of runs; this loop's
work is then in the parts it serves, not in the releases.

The decisions are the heap loop's (whenever the lane is free, the released
part of smallest rank starts; a run goes on while nothing of a smaller rank
is released), so the times are the same to the bit.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right

import numpy as np

__all__ = ["applies", "rest_positions", "rest_released", "push_released", "serve", "serve_run"]

_INF = float("inf")


def applies(release: np.ndarray, first: np.ndarray) -> bool:
    """True when the runs' first parts (positions ``first``, by rank) are released in strictly
    decreasing rank order: run r + 1 strictly before run r."""
    head_release = release[first]
    return len(first) > 1 and bool(np.all(head_release[1:] < head_release[:-1]))


class _Untouched:
    """The runs no part of which has been served (``touched[r]`` 0): the first one from r on (`find`,
    with the path splitting of a union-find)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.skip = list(range(1, count + 1))  # a run touched: where to look next
        self.touched = bytearray(count)

    def find(self, r: int) -> int:
        skip, touched, count = self.skip, self.touched, self.count
        while r < count and touched[r]:
            nxt = skip[r]
            if nxt < count and touched[nxt]:
                skip[r] = skip[nxt]
            r = nxt
        return r



def serve(tasks: np.ndarray, release: np.ndarray, run_of: np.ndarray, run_end: np.ndarray, inner: np.ndarray,
          times, free) -> tuple[float, np.ndarray | None]:
    """The list schedule of the lane (positions are ranks; ``times`` the ``(S, E, D)`` memoryviews of
    start, end and duration by task) from ``free``, until every part is released. Returns when the
    lane is free and, if parts are left (all released), each run's next position (its last part's
    next when done): they go back to back in rank order; else ``(t, None)``."""
    count = len(tasks)
    first = np.concatenate([[0], run_end[:-1]]).astype(np.int64)
    runs = len(first)
    # a part inside a run released after the one before it may be its run's head when released
    later = np.flatnonzero(inner & (release[1:] > release[:-1])) + 1
    later = later[np.argsort(release[later], kind="stable")]
    state = _State(tasks, release, run_of, run_end, first, times, free)
    state.later, state.later_rel = later.tolist(), release[later].tolist()
    state.first_rel = release[first[::-1]].tolist()  # the runs' first releases, in release order (ascending)
    state.untouched = _Untouched(runs)
    t = state.loop(count)
    return (t, None) if state.done >= count else (t, state.head_array)


class _State:
    """The loop's state: the lane's time, the runs' next positions, the heap of runs served in part."""

    def __init__(self, tasks, release, run_of, run_end, first, times, free) -> None:
        self.task, self.rel = memoryview(tasks), memoryview(release)
        self.run_of, self.run_end = memoryview(run_of), memoryview(run_end)
        self.head_array = first
        self.first = first.tolist()
        self.S, self.E, self.D = times
        self.t = -_INF if free is None else free
        self.done = 0

    def loop(self, count: int) -> float:
        S, E, D = self.S, self.E, self.D
        task, rel, run_of, run_end = self.task, self.rel, self.run_of, self.run_end
        head = memoryview(self.head_array)
        later, later_rel, first_rel, first = self.later, self.later_rel, self.first_rel, self.first
        untouched = self.untouched
        touched = untouched.touched
        runs, n_later = len(first), len(later)
        heap: list = []
        push, pop = heapq.heappush, heapq.heappop
        t, done, p, cur = self.t, 0, 0, -1
        released = bisect_right(first_rel, t)  # runs whose first part is released: runs - released on
        while done < count:
            if p < n_later and later_rel[p] <= t:
                p = push_released(later, later_rel, p, t, head, run_of, cur, heap)
            if released < runs:
                released = bisect_right(first_rel, t, released)
            if p == n_later and released == runs:  # every part released: the rest back to back
                break
            upcoming = min(later_rel[p] if p < n_later else _INF, first_rel[released] if released < runs else _INF)
            u = runs - released  # the last run released, or the first untouched one after it
            if u < runs and touched[u]:
                u = untouched.find(u)
            fresh = first[u] if u < runs else count
            if 0 <= cur < fresh and (not heap or cur < heap[0]):
                x = cur  # the run goes on
            else:
                if cur >= 0:
                    push(heap, cur)
                if heap and heap[0] < fresh:
                    x = pop(heap)
                elif u < runs:
                    x = fresh
                    touched[u] = 1
                else:  # idle until the next release
                    cur = -1
                    t = upcoming
                    continue
            r = run_of[x]
            stop = run_end[r]
            y, t = serve_run(x, stop, t, upcoming, task, rel, S, E, D)
            done += y - x
            head[r] = y
            cur = y if y < stop and rel[y] <= t else -1
        self.done = done
        return t


def push_released(order, rel_o, p: int, t: float, head, run_of, cur: int, heap: list) -> int:
    """Take the positions ``order[p:]`` released by ``t`` (``rel_o``: their releases, in order): each
    that is still its run's head, and not the one that goes on (``cur``), onto the heap; the next p."""
    n = len(order)
    while p < n and rel_o[p] <= t:
        q = order[p]
        p += 1
        if q == head[run_of[q]] and q != cur:
            heapq.heappush(heap, q)
    return p


def serve_run(x: int, stop: int, t: float, upcoming: float, task, rel, S, E, D) -> tuple[int, float]:
    """Serve a run from position x on (``task``, ``rel``: memoryviews by position; ``S``, ``E``, ``D``:
    by task) until its end (``stop``), its next part is not yet released, or something else is
    (at ``upcoming``); the next position and when the lane is free."""
    while True:
        i = task[x]
        S[i] = t
        t = t + D[i]
        E[i] = t
        x += 1
        if x >= stop or rel[x] > t or upcoming <= t:
            return x, t


def rest_positions(head: np.ndarray, run_end: np.ndarray) -> np.ndarray:
    """The positions ``head[r] .. run_end[r] - 1`` of every run r, in order (rank order)."""
    first, stop = np.asarray(head, dtype=np.int64), np.asarray(run_end, dtype=np.int64)
    size = stop - first
    total = int(size.sum())
    return np.repeat(first - (np.cumsum(size) - size), size) + np.arange(total, dtype=np.int64)


def rest_released(by_rank: np.ndarray, release: np.ndarray, head: np.ndarray, run_end: np.ndarray, t: float,
                  duration: np.ndarray, probe: int = 64) -> bool:
    """True when the parts left (`rest_positions`), served in rank order back to back from ``t``, are
    each released by the time it starts: the list schedule from ``t`` is then that order (the part of
    smallest rank left is released whenever the lane is free). The starts are the running sum a loop
    makes (`numpy.cumsum`, in order: the same bits). The parts of the first ``probe`` runs with parts
    left are checked first (a check that fails usually fails there, at little cost)."""
    head = np.asarray(head)
    live = np.flatnonzero(head < run_end)
    for runs in (live[:probe], live):
        pos = rest_positions(head[runs], run_end[runs])
        times = np.empty(len(pos))
        if len(pos):
            times[0] = t
            times[1:] = duration[by_rank[pos[:-1]]]
            np.cumsum(times, out=times)
        if np.any(release[pos] > times):
            return False
    return True
