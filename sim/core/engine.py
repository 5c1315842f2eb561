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
"""

from __future__ import annotations

import heapq

import numpy as np

from sim.core.lower import TaskGraph

__all__ = ["CycleError", "run"]


class CycleError(ValueError):
    """The task graph has a cycle: no schedule exists."""


def run(graph: TaskGraph) -> tuple[np.ndarray, np.ndarray]:
    """Start and end time of every task of ``graph`` (arrays in task order).

    Raises
    ------
    CycleError
        If some task can never be released (the graph has a cycle).
    """
    n = len(graph)
    duration, resource, priority = graph.duration_s, graph.resource, graph.priority
    succ, lag = graph.succ, graph.lag_s
    waiting = list(graph.indegree)
    release = [0.0] * n
    queues: list[list] = [[] for _ in graph.resources]
    busy = [False] * len(graph.resources)
    start = [float("nan")] * n
    end = [float("nan")] * n
    events: list[tuple[float, int, int]] = []  # (time, 0 = task ends / 1 = task released, task)
    for t in range(n):
        if waiting[t] == 0:
            heapq.heappush(queues[resource[t]], (priority[t], t))

    def dispatch(now: float) -> None:
        for r, queue in enumerate(queues):
            if not busy[r] and queue:
                _, t = heapq.heappop(queue)
                busy[r] = True
                start[t] = now
                end[t] = e = now + duration[t]
                heapq.heappush(events, (e, 0, t))

    dispatch(0.0)
    done = 0
    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _, what, t = heapq.heappop(events)
            if what == 1:  # a lagged task is released
                heapq.heappush(queues[resource[t]], (priority[t], t))
                continue
            done += 1
            busy[resource[t]] = False
            for v in succ[t]:
                waiting[v] -= 1
                if lag:
                    release[v] = max(release[v], now + lag.get((t, v), 0.0))
                if waiting[v] == 0:
                    if release[v] > now:
                        heapq.heappush(events, (release[v], 1, v))
                    else:
                        heapq.heappush(queues[resource[v]], (priority[v], v))
        dispatch(now)
    if done != n:
        raise CycleError("the task graph has a cycle; no schedule exists")
    return np.array(start, dtype=float), np.array(end, dtype=float)
