"""The event loop's schedule of a task graph timed again with other durations, from the order
its lanes ran in before (`sim.core.replay` for any graph without lags), in array operations.

The interference rounds (`sim.core.interference.fixed_point`) time one graph several times,
each with the compute stretched a little; the order each lane serves its tasks in seldom
changes. With every lane's order given, each task starts at the later of its last
predecessor's end and the end of the task before it on its lane: each lane is one
`sim.core.replay.scan` of the releases its predecessors give, and the lanes are timed in
turn from the others' ends until no end moves (the orders and the edges form a DAG, so the
one fixed point is the schedule of those orders). The orders are then checked against the
event loop's rule, lane by lane (`sim.core.replay.is_list_schedule`), on keys (time, round):
within an instant the loop serves the lanes in rounds, and a task of no duration ends, and
releases its successors, one round after it starts. A guess that fails leaves the event loop
to time the graph.
"""

from __future__ import annotations

import heapq

import numpy as np

from sim.core import replay

__all__ = ["MAX_LANES", "remember", "rerun"]

#: Graphs with more lanes than this (per-worker runs) are left to the event loop.
MAX_LANES = 16
#: Passes over the lanes before a guess is given up.
_PASSES = 12
#: Tasks still moving after the third pass at or below which the rest is settled task by task.
_FRONT = 4096


def remember(graph, started: list, end: np.ndarray) -> None:
    """Keep the order the event loop started the tasks in (and their ends, the next first estimate)."""
    if replay.ENABLED and len(graph.resources) <= MAX_LANES:
        graph.memo["started"] = np.asarray(started, dtype=np.int64)
        graph.memo["end"] = np.array(end, dtype=float)


def rerun(graph, start: np.ndarray, end: np.ndarray) -> bool:
    """Time ``graph`` (no lags) from its last run's orders into ``start`` and ``end``; False (nothing
    kept) where the orders no longer give the event loop's schedule."""
    started = graph.memo.get("started")
    if not replay.ENABLED or started is None or len(started) != len(graph) or graph.has_lags:
        return False
    lanes = _lanes(graph, started)
    preds = _predecessors(graph)
    dur = graph.duration_s
    got = _fixed_point(lanes, preds, dur, graph.memo["end"], graph.memo.get("chained", False))
    if isinstance(got, np.ndarray):  # a long chain from lane to lane: settled task by task from there
        got = _settle(graph, started, lanes, preds, got, budget=len(graph) // 4 + 1024)
    if got is None:  # the chains go from lane to lane all along (ZeRO-3): every task in turn
        graph.memo["chained"] = True  # (the next rerun tries one pass only before it)
        got = _in_order(graph, started, preds)
    if got is None or not _keys_hold(lanes, preds, got, graph.rank):
        return False
    start[:], end[:] = got
    graph.memo["end"] = got[1].copy()
    return True


def _lanes(graph, started: np.ndarray) -> list:
    """Each lane's tasks in the order they started."""
    return _grouped(graph.resource[started], started, len(graph.resources))


def _grouped(resource: np.ndarray, tasks: np.ndarray, lanes: int) -> list:
    """``tasks`` split by their ``resource`` (each lane's in their order); the lanes with any."""
    by_lane = tasks[np.argsort(resource, kind="stable")]
    bounds = np.concatenate([[0], np.cumsum(np.bincount(resource, minlength=lanes))])
    return [by_lane[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True) if b > a]


def _predecessors(graph) -> tuple:
    """Each task's predecessors (compressed, by target; kept with the graph's edges)."""
    memo = graph.memo
    if "preds" not in memo:
        n, ptr, succ = len(graph), graph.succ_ptr, graph.succ_index
        source = np.repeat(np.arange(n, dtype=np.int64), np.diff(ptr))
        order = np.argsort(succ, kind="stable")
        counts = np.bincount(succ, minlength=n)
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])
        memo["preds"] = (source[order], first, counts > 0)
    return memo["preds"]


def _released(values: np.ndarray, preds, none) -> np.ndarray:
    """Per task, the largest of ``values`` over its predecessors (``none`` without any)."""
    index, first, has = preds
    if not len(has):
        return np.zeros(0, dtype=values.dtype)
    gathered = np.concatenate([values[index], np.full(1, none, dtype=values.dtype)])  # (a task without any: none)
    return np.where(has, np.maximum.reduceat(gathered, first), none)


def _fixed_point(lanes, preds, dur: np.ndarray, guess: np.ndarray, chained: bool = False):
    """Start and end of every task, each lane in its order, the lanes timed from each other's ends
    (from ``guess``) until none moves. Where they still move after `_PASSES` (more on a small graph),
    or after the third pass only a few move (the front of a chain that goes from lane to lane, one
    lane a pass), the ends reached so far (an array, for `_settle`); None where a scan cannot settle
    its lane or after the third pass more than a twentieth still moves (the event loop is quicker),
    and, if ``chained`` (the last rerun went task by task), after a first pass where any moves."""
    end, n = guess, len(dur)
    for done in range(_PASSES if n > 100_000 else 4 * _PASSES):
        release = _released(end, preds, 0.0)  # (a task without predecessors: released at 0)
        start, new = np.empty(len(dur)), np.empty(len(dur))
        for tasks in lanes:
            got = replay.scan(release[tasks], dur[tasks], -np.inf)
            if got is None:
                return None
            start[tasks], new[tasks] = got
        moved = int(np.count_nonzero(new != end))
        if not moved:
            return start, new
        if chained:
            return None
        if done >= 2 and moved > n // 20 + 64:
            return None
        end = new
        if done >= 2 and moved <= _FRONT:
            return end
    return end


def _settle(graph, started: np.ndarray, lanes, preds, guess: np.ndarray, budget: int | None = None):
    """The schedule of the lanes' orders from ``guess`` (any ends), exactly: a worklist of the tasks
    whose start rule ``start = max(predecessors' ends, the lane's task before), end = start + duration``
    (the additions of `replay.scan`) does not hold, taken in the order the tasks started before (an
    order of the graph with the lanes' orders added, so each task is settled once, after everything
    it waits for); a task whose end moves puts its successors and the next task on its lane on the list.
    Its work is the tasks that move, not the graph; None once more than ``budget`` tasks were
    settled (a task at a time in Python: past a fraction of the graph, the event loop is quicker)."""
    n, dur = len(guess), graph.duration_s
    before = np.full(n, -1, dtype=np.int64)
    after = np.full(n, -1, dtype=np.int64)
    for tasks in lanes:
        before[tasks[1:]], after[tasks[:-1]] = tasks[:-1], tasks[1:]
    start = np.maximum(_released(guess, preds, 0.0), np.where(before >= 0, guess[before], -np.inf))
    position = np.empty(n, dtype=np.int64)
    position[started] = np.arange(n)
    queue = position[np.flatnonzero(start + dur != guess)].tolist()
    heapq.heapify(queue)
    queued = set(queue)
    index, first, has = preds
    count = np.diff(np.append(first, len(index)))
    ptr, succ = graph.succ_ptr, graph.succ_index
    end, begin, started_list = guess.tolist(), start.tolist(), started.tolist()
    limit = len(queue) + n if budget is None else budget
    while queue:
        limit -= 1
        if limit < 0:
            return None
        t = started_list[heapq.heappop(queue)]
        a = int(first[t])
        release = max([end[p] for p in index[a:a + count[t]].tolist()]) if has[t] else 0.0
        prev = int(before[t])
        lane_free = end[prev] if prev >= 0 else -np.inf
        begin[t] = release if release > lane_free else lane_free
        finish = begin[t] + float(dur[t])
        if finish == end[t]:
            continue
        end[t] = finish
        for u in [*succ[ptr[t]:ptr[t + 1]].tolist(), int(after[t])]:
            if u >= 0 and position[u] not in queued:
                queued.add(int(position[u]))
                heapq.heappush(queue, int(position[u]))
    return np.array(begin), np.array(end)


def _in_order(graph, started: np.ndarray, preds) -> tuple[np.ndarray, np.ndarray] | None:
    """The schedule of the lanes' orders, one task at a time in the order they started before (an
    order of the graph with the lanes' orders added); None where the first eighth of it (a part
    closed under predecessors, timed first) already breaks the event loop's rule (`_keys_hold`)."""
    n = len(started)
    start, end = np.empty(n), np.empty(n)
    release, lane_free = [0.0] * n, [0.0] * len(graph.resources)
    head = started[:n // 8]
    _time_in_order(graph, head, start, end, release, lane_free)
    if len(head) and not _head_holds(graph, head, preds, start, end):
        return None
    _time_in_order(graph, started[len(head):], start, end, release, lane_free)
    return start, end


def _time_in_order(graph, tasks: np.ndarray, start: np.ndarray, end: np.ndarray, release: list, lane_free: list):
    """Time ``tasks`` in turn (each after its predecessors and its lane's tasks before it): ``start =
    max(predecessors' ends, the lane's task before)``, ``end = start + duration`` (the event loop's
    additions; every end is at least 0); ``release`` and ``lane_free`` carry on to the next call."""
    resource, dur = memoryview(graph.resource), memoryview(graph.duration_s)
    ptr, succ = memoryview(graph.succ_ptr), memoryview(graph.succ_index)
    begin, finish = memoryview(start), memoryview(end)
    for t in tasks.tolist():
        r = resource[t]
        s = release[t]
        free = lane_free[r]
        if free > s:
            s = free
        begin[t] = s
        finish[t] = e = s + dur[t]
        lane_free[r] = e
        for v in succ[ptr[t]:ptr[t + 1]]:
            if e > release[v]:
                release[v] = e


def _head_holds(graph, head: np.ndarray, preds, start: np.ndarray, end: np.ndarray) -> bool:
    """`_keys_hold` of the tasks ``head`` only (every predecessor of one among them), renumbered by
    their place in it: a break there is one of the whole schedule."""
    index, first, has = preds
    position = np.empty(len(graph), dtype=np.int64)
    position[head] = np.arange(len(head))
    count = np.diff(np.append(first, len(index)))[head]
    ends = np.cumsum(count)
    offsets = ends - count
    flat = np.repeat(first[head] - offsets, count) + np.arange(int(ends[-1]))
    lanes = _grouped(graph.resource[head], np.arange(len(head)), len(graph.resources))
    return _keys_hold(lanes, (position[index[flat]], offsets, count > 0), (start[head], end[head]), graph.rank[head])


def _keys_hold(lanes, preds, times, rank: np.ndarray) -> bool:
    """The lanes' orders are the event loop's: on keys (time, round), each lane started the released
    task of smallest rank whenever free, and idled only until the next release."""
    start, end = times
    n = len(start)
    every = np.concatenate([start, end, [0.0]])
    by_time = np.argsort(every, kind="stable")
    ordered = every[by_time]
    dense = np.empty(len(every), dtype=np.int64)
    dense[by_time] = np.cumsum(np.concatenate([[1], ordered[1:] != ordered[:-1]]))
    zero = end == start
    width = int(np.count_nonzero(zero)) + 3
    t_start, t_end, t_zero = dense[:n] * width, dense[n:2 * n] * width, int(dense[-1]) * width
    end_key = t_end + 1  # a task that takes time ends in the instant's first round
    for _ in range(width):  # a task of no duration ends a round after it starts: settle the chains of them
        release = _released(end_key, preds, t_zero + 1)
        start_key = np.empty(n, dtype=np.int64)
        for tasks in lanes:
            before = np.concatenate([[0], end_key[tasks][:-1]])
            start_key[tasks] = np.maximum(before, release[tasks])
        new = np.where(zero, start_key + 1, t_end + 1)
        if np.array_equal(new, end_key):
            break
        end_key = new
    else:
        return False
    if np.any(start_key // width != t_start // width):
        return False
    return all(replay.is_list_schedule(start_key[tasks], end_key[tasks], release[tasks], rank[tasks], 0)
               for tasks in lanes)
