"""Alias of the one engine (`sim.core.engine`) for networkx task graphs."""

from __future__ import annotations

from sim.core.engine import CycleError, run
from sim.core.graph_nx import from_networkx

__all__ = ["CycleError", "run_dag"]


def run_dag(g) -> dict[object, tuple[float, float]]:
    """Start and end time of every node of a ``networkx.DiGraph`` whose nodes
    carry ``duration_s``, ``resource`` and ``priority`` (and edges an optional
    ``lag_s``), timed by `sim.core.engine.run`. Returns ``{node: (start_s, end_s)}``.

    Raises
    ------
    ValueError
        If ``g`` has a cycle (`sim.core.engine.CycleError`).
    """
    graph, nodes = from_networkx(g)
    start, end = run(graph)
    return {u: (float(start[i]), float(end[i])) for i, u in enumerate(nodes)}
