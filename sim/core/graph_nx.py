"""A task graph as a networkx DiGraph, and back: for drawing the DAG and for
checking the engine against networkx's longest path.

networkx is imported here only, when a graph is converted.
"""

from __future__ import annotations

from sim.core.taskgraph import TaskGraph

__all__ = ["from_networkx", "to_networkx"]


def _keys(graph: TaskGraph, kind, layer) -> list[tuple]:
    """Node keys ``(iteration, kind, index)``: the layer for forward, backward and
    per-layer updates, a running number per iteration for messages' tasks, else 0;
    per-worker graphs put the worker after the iteration."""
    keys, comm_seen = [], {}
    layer_index = {}
    iteration, worker = graph.iteration.tolist(), graph.worker.tolist()
    many = any(w > 0 for w in worker)
    for t in range(len(graph)):
        k, w = iteration[t], worker[t]
        if kind[t] == "comm":
            idx = comm_seen.get(k, 0)
            comm_seen[k] = idx + 1
        elif layer[t] and kind[t] in ("forward", "backward", "update"):
            idx = layer_index.setdefault(layer[t], len(layer_index))
        else:
            idx = 0
        keys.append((k, w, kind[t], idx) if many else (k, kind[t], idx))
    return keys


def to_networkx(graph: TaskGraph, layer_names=None):
    """The graph as a ``networkx.DiGraph``; node attributes ``iteration, kind, layer,
    group, resource, duration_s, bytes, priority, label`` and ``lag_s`` on lagged edges."""
    import networkx as nx

    kind, layer, label = graph.kind, graph.layer, graph.label
    iteration, lanes = graph.iteration.tolist(), graph.lane_names
    if layer_names is not None:  # layer index by model order
        order = {name: i for i, name in enumerate(layer_names)}
        fallback = _keys(graph, kind, layer)
        keys = [(iteration[t], kind[t], order.get(layer[t], 0))
                if kind[t] in ("forward", "backward", "update") and layer[t] else fallback[t]
                for t in range(len(graph))]
    else:
        keys = _keys(graph, kind, layer)
    g = nx.DiGraph()
    columns = zip(iteration, kind, layer, graph.message.tolist(), lanes, graph.worker.tolist(),
                  graph.duration_s.tolist(), graph.nbytes.tolist(), graph.priority.tolist(), label, strict=True)
    for key, (k, kd, ly, msg, lane, w, d, b, p, lb) in zip(keys, columns, strict=True):
        g.add_node(key, iteration=k, kind=kd, layer=ly, group=msg, resource=lane, worker=w, duration_s=d, bytes=b,
                   priority=p, label=lb)
    eu, ev, lag = graph.edge_list()
    for u, v, d in zip(eu.tolist(), ev.tolist(), lag.tolist(), strict=True):
        g.add_edge(keys[u], keys[v])
        if d > 0:
            edge = g.edges[keys[u], keys[v]]
            edge["lag_s"] = max(d, edge.get("lag_s", 0.0))
    return g


def from_networkx(g) -> tuple[TaskGraph, list]:
    """A ``networkx.DiGraph`` whose nodes carry ``duration_s``, ``resource`` and
    ``priority`` as a task graph for the engine, with the node of each task."""
    graph = TaskGraph()
    nodes = list(g.nodes)
    index = {u: i for i, u in enumerate(nodes)}
    for u in nodes:
        d = g.nodes[u]
        graph.add(d.get("iteration", 0), d.get("worker", 0), d["resource"], d.get("kind", ""), d["duration_s"],
                  key=(d["priority"],))
    for u, v, d in g.edges(data=True):
        graph.edge(index[u], index[v], float(d.get("lag_s", 0.0) or 0.0))
    graph.priority = [g.nodes[u]["priority"] for u in nodes]
    return graph, nodes
