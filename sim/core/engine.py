"""The one engine: time a task graph under its lanes' constraints.

List scheduling as a discrete-event simulation. A task is released when its
last predecessor ends (plus the edge's lag, 0 when absent: a wait that
occupies no lane, such as Horovod's cycle). A lane runs one task at a time,
never idles while a released task waits for it, and among the released tasks
starts the one with the smallest priority. The event queue is keyed by
``(time, what, task)``: at one instant, tasks end before lagged tasks are
released, in task order, and every lane is then served; ties resolve the same
way on every run, and all state lives in one call.

Consequence, used as a check: every task starts at the later of its
predecessors' ends and the end of the task before it on its lane, so the
makespan equals the longest path of the graph with those lane-order edges
added. Without contention it is the graph's own longest path
(`networkx.dag_longest_path_length` with task durations on out-edges).

The loop reads the graph's arrays through memoryviews (no Python object per
task is kept), a lane's queue holds the tasks' global ranks (one integer
each, `sim.core.taskgraph.TaskGraph.order` maps a rank back to its task),
and only the lanes touched at an instant are served.
"""

from __future__ import annotations

import heapq

import numpy as np

from sim.core import pipeline
from sim.core.rerun import remember, rerun
from sim.core.taskgraph import TaskGraph

__all__ = ["CycleError", "run"]


class CycleError(ValueError):
    """The task graph has a cycle: no schedule exists."""


def run(graph: TaskGraph, *, general: bool = False, out=None, replay: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Start and end time of every task of ``graph`` (arrays in task order).

    A graph the lowering marked as a plain pipeline of one worker is timed
    lane by lane (`sim.core.pipeline`, the same times); ``general`` forces
    the event loop. ``out``: two arrays of ``len(graph)`` to write the times into.
    ``replay`` False skips timing from the last run's orders (`sim.core.rerun`), for durations
    that moved so far that those orders seldom hold (the same times either way).

    Raises
    ------
    CycleError
        If some task can never be released (the graph has a cycle).
    """
    graph.finish()
    n = len(graph)
    start, end = (np.empty(n), np.empty(n)) if out is None else out
    if n == 0:
        return start, end
    if graph.pipeline is not None and not general:
        times = pipeline.run(graph, graph.pipeline, out=(start, end))  # (it times every task)
        if times is not None:
            return times
    start.fill(np.nan)  # (the pipeline may have timed some tasks before it gave up)
    end.fill(np.nan)
    if not general and replay and rerun(graph, start, end):  # the last run's orders hold (`sim.core.rerun`)
        return start, end
    started: list = []
    done = _simulate(graph, memoryview(start), memoryview(end), started)
    if done != n:
        raise CycleError("the task graph has a cycle; no schedule exists")
    if started:
        remember(graph, started, end)
    return start, end


def _simulate(graph: TaskGraph, start, end, started: list | None = None) -> int:
    """The event loop; writes ``start`` and ``end``; returns how many tasks ended. Without lags,
    the tasks are appended to ``started`` (if given) as they start."""
    if not graph.has_lags:
        return _simulate_without_lags(graph, start, end, started)
    push, pop = heapq.heappush, heapq.heappop
    duration, resource = memoryview(graph.duration_s), memoryview(graph.resource)
    rank, order = memoryview(graph.rank), memoryview(graph.order)
    ptr, succ, lag = memoryview(graph.succ_ptr), memoryview(graph.succ_index), memoryview(graph.succ_lag_s)
    indegree = graph.indegree
    waiting = indegree.tolist()
    release = [0.0] * len(waiting)
    queues, busy, touched = _lanes(graph, indegree)
    events: list[tuple[float, int, int]] = []  # (time, 0 = task ends / 1 = task released, task)
    now, done = 0.0, 0
    while True:
        for r in touched:  # serve the lanes something happened to (the order does not matter)
            queue = queues[r]
            if queue and not busy[r]:
                t = order[pop(queue)]
                busy[r] = True
                start[t] = now
                end[t] = e = now + duration[t]
                push(events, (e, 0, t))
        touched.clear()
        if not events:
            return done
        now = events[0][0]
        while events and events[0][0] == now:
            _, what, t = pop(events)
            r = resource[t]
            touched.add(r)
            if what == 1:  # a lagged task is released
                push(queues[r], rank[t])
                continue
            done += 1
            busy[r] = False
            for i in range(ptr[t], ptr[t + 1]):
                v = succ[i]
                waiting[v] -= 1
                ready = now + lag[i]
                if ready > release[v]:
                    release[v] = ready
                if waiting[v] == 0:
                    if release[v] > now:
                        push(events, (release[v], 1, v))
                    else:
                        rv = resource[v]
                        push(queues[rv], rank[v])
                        touched.add(rv)


def _lanes(graph: TaskGraph, indegree: np.ndarray) -> tuple[list, list, set]:
    """Per lane, its queue of the ranks of the tasks released at the start; every lane idle and touched."""
    lanes = len(graph.resources)
    queues: list[list] = [[] for _ in range(lanes)]
    for r, k in zip(graph.resource[indegree == 0].tolist(), graph.rank[indegree == 0].tolist(), strict=True):
        queues[r].append(k)
    for queue in queues:
        heapq.heapify(queue)
    return queues, [False] * lanes, set(range(lanes))


def _simulate_without_lags(graph: TaskGraph, start, end, started: list | None = None) -> int:
    """`_simulate` of a graph without lags: each event is a task's end, ``(time, task)``."""
    push, pop = heapq.heappush, heapq.heappop
    duration, resource = memoryview(graph.duration_s), memoryview(graph.resource)
    rank, order = memoryview(graph.rank), memoryview(graph.order)
    ptr, succ = memoryview(graph.succ_ptr), memoryview(graph.succ_index)
    indegree = graph.indegree
    waiting = indegree.tolist()
    queues, busy, touched = _lanes(graph, indegree)
    events: list[tuple[float, int]] = []
    now, done, note = 0.0, 0, ([] if started is None else started).append
    while True:
        for r in touched:  # serve the lanes something happened to (the order does not matter)
            if not busy[r]:
                queue = queues[r]
                if queue:
                    t = order[pop(queue)]
                    busy[r] = True
                    start[t] = now
                    end[t] = e = now + duration[t]
                    push(events, (e, t))
                    note(t)
        touched.clear()
        if not events:
            return done
        now, t = pop(events)
        while True:
            r = resource[t]
            touched.add(r)
            busy[r] = False
            done += 1
            for v in succ[ptr[t]:ptr[t + 1]]:
                waiting[v] -= 1
                if not waiting[v]:
                    rv = resource[v]
                    push(queues[rv], rank[v])
                    touched.add(rv)
            if not events or events[0][0] != now:
                break
            t = pop(events)[1]
