"""Alias of `sim.core.timeline` (the one timeline schema), kept for existing imports."""

from __future__ import annotations

from sim.core.timeline import (
    COMPUTE_KINDS,
    TIMELINE_COLUMNS,
    frame,
    graph_timeline,
    interval_overlap_s,
)

__all__ = ["COMPUTE_KINDS", "TIMELINE_COLUMNS", "frame", "graph_timeline", "interval_overlap_s", "timeline_frame"]


def timeline_frame(g, times: dict):
    """The timeline of a networkx task DAG (`sim.dag.build_dag`) and the engine's
    ``{node: (start_s, end_s)}`` (`sim.engine.run_dag`), in the one schema."""
    nodes = list(g.nodes)
    attrs = [g.nodes[u] for u in nodes]

    def name(u, d) -> str:
        tail = d.get("label") or d.get("layer") or u[-1]
        return f"it{d['iteration']}/{d['kind']}/{tail}"

    return frame({
        "iteration": [d["iteration"] for d in attrs], "worker": [d.get("worker", 0) for d in attrs],
        "lane": [d["resource"] for d in attrs], "kind": [d["kind"] for d in attrs],
        "name": [name(u, d) for u, d in zip(nodes, attrs, strict=True)], "layer": [d["layer"] for d in attrs],
        "message": [d["group"] for d in attrs], "start_s": [times[u][0] for u in nodes],
        "end_s": [times[u][1] for u in nodes], "bytes": [d["bytes"] for d in attrs],
    })
