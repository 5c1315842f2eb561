"""A task graph as a networkx DiGraph, and back: for drawing the DAG and for
checking the engine against networkx's longest path.

networkx is imported here only, when a graph is converted.
"""

from __future__ import annotations

from sim.core.lower import TaskGraph

__all__ = ["from_networkx", "to_networkx"]


def _keys(graph: TaskGraph) -> list[tuple]:
    """Node keys ``(iteration, kind, index)``: the layer for forward, backward and
    per-layer updates, a running number per iteration for messages' tasks, else 0;
    per-worker graphs put the worker after the iteration."""
    keys, comm_seen = [], {}
    layer_index = {}
    many = any(w > 0 for w in graph.worker)
    for t in range(len(graph)):
        k, kind, w = graph.iteration[t], graph.kind[t], graph.worker[t]
        if kind == "comm":
            idx = comm_seen.get(k, 0)
            comm_seen[k] = idx + 1
        elif graph.layer[t] and kind in ("forward", "backward", "update"):
            idx = layer_index.setdefault(graph.layer[t], len(layer_index))
        else:
            idx = 0
        keys.append((k, w, kind, idx) if many else (k, kind, idx))
    return keys


def to_networkx(graph: TaskGraph, layer_names=None):
    """The graph as a ``networkx.DiGraph``; node attributes ``iteration, kind, layer,
    group, resource, duration_s, bytes, priority, label`` and ``lag_s`` on lagged edges."""
    import networkx as nx

    if layer_names is not None:  # layer index by model order
        order = {name: i for i, name in enumerate(layer_names)}
        keys = [(graph.iteration[t], graph.kind[t], order.get(graph.layer[t], 0))
                if graph.kind[t] in ("forward", "backward", "update") and graph.layer[t] else None
                for t in range(len(graph))]
        fallback = _keys(graph)
        keys = [key if key is not None else fallback[t] for t, key in enumerate(keys)]
    else:
        keys = _keys(graph)
    g = nx.DiGraph()
    for t, key in enumerate(keys):
        g.add_node(key, iteration=graph.iteration[t], kind=graph.kind[t], layer=graph.layer[t],
                   group=graph.message[t], resource=graph.lane(t), worker=graph.worker[t],
                   duration_s=graph.duration_s[t], bytes=graph.nbytes[t], priority=graph.priority[t],
                   label=graph.label[t])
    for u, succ in enumerate(graph.succ):
        for v in succ:
            g.add_edge(keys[u], keys[v])
    for (u, v), lag in graph.lag_s.items():
        g.edges[keys[u], keys[v]]["lag_s"] = lag
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
