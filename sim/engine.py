"""The engine: time any task DAG under its resource constraints.

List scheduling as a discrete-event simulation. A task is released when its
last predecessor ends (plus the edge's ``lag_s``, 0 when absent: a wait that
occupies no resource, such as Horovod's cycle). A resource runs one task at a time, never idles while
a released task waits for it, and among the released tasks starts the one
with the smallest ``priority``. Ties in time are resolved the same way on
every run (completions first, then dispatch in resource order).

Consequence, used as a check: every task starts at the later of its
predecessors' ends and the end of the task before it on its resource, so the
makespan equals the longest path of the DAG with those resource-order edges
added. Without contention it is the DAG's own longest path
(`networkx.dag_longest_path_length` with node durations on out-edges).
"""

from __future__ import annotations

import heapq

import networkx as nx
import numpy as np

__all__ = ["run_dag"]


def run_dag(g: nx.DiGraph) -> dict[object, tuple[float, float]]:
    """Start and end time of every node of ``g``.

    Each node needs ``duration_s``, ``resource`` and ``priority`` attributes.
    Returns ``{node: (start_s, end_s)}``.

    Raises
    ------
    ValueError
        If ``g`` has a cycle.
    """
    nodes = list(g.nodes)
    index = {u: i for i, u in enumerate(nodes)}
    duration = np.array([g.nodes[u]["duration_s"] for u in nodes], dtype=float)
    resource = [g.nodes[u]["resource"] for u in nodes]
    priority = [g.nodes[u]["priority"] for u in nodes]
    succ = [[index[v] for v in g.successors(u)] for u in nodes]
    lag = {(index[u], index[v]): float(d["lag_s"]) for u, v, d in g.edges(data=True) if d.get("lag_s")}
    release = np.zeros(len(nodes))
    waiting = [g.in_degree(u) for u in nodes]
    queues: dict[str, list] = {r: [] for r in dict.fromkeys(resource)}
    busy = dict.fromkeys(queues, False)
    start = np.full(len(nodes), np.nan)
    end = np.full(len(nodes), np.nan)
    events: list[tuple[float, int, int]] = []  # (time, 0 = task ends / 1 = task released, task)

    for i, w in enumerate(waiting):
        if w == 0:
            heapq.heappush(queues[resource[i]], (priority[i], i))

    def dispatch(now: float) -> None:
        for r, queue in queues.items():
            if not busy[r] and queue:
                _, i = heapq.heappop(queue)
                busy[r] = True
                start[i] = now
                end[i] = now + duration[i]
                heapq.heappush(events, (end[i], 0, i))

    dispatch(0.0)
    done = 0
    while events:
        now = events[0][0]
        while events and events[0][0] == now:
            _, what, i = heapq.heappop(events)
            if what == 1:  # a lagged task is released
                heapq.heappush(queues[resource[i]], (priority[i], i))
                continue
            done += 1
            busy[resource[i]] = False
            for j in succ[i]:
                waiting[j] -= 1
                if lag:
                    release[j] = max(release[j], now + lag.get((i, j), 0.0))
                if waiting[j] == 0:
                    if release[j] > now:
                        heapq.heappush(events, (release[j], 1, j))
                    else:
                        heapq.heappush(queues[resource[j]], (priority[j], j))
        dispatch(now)
    if done != len(nodes):
        raise ValueError("the task graph has a cycle; no schedule exists")
    return {u: (float(start[i]), float(end[i])) for i, u in enumerate(nodes)}
