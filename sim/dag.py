"""The iteration DAG as a networkx graph (an alias of the one lowering).

`build_dag` and `sim.arch.build_arch_dag` are the same function: the task
graph of `sim.core.lower.lower`, as a ``networkx.DiGraph`` for drawing and
for checks against networkx (`sim.core.graph_nx`).
"""

from __future__ import annotations

from sim.core.cost import NO_COMM
from sim.core.graph_nx import to_networkx
from sim.core.lower import LANES, lower
from sim.core.plan import Plan, gradient_layers

__all__ = ["RESOURCES", "add_compute_chain", "build_dag", "gradient_layers"]

#: The lanes of one worker and the channel (the parameter server's push and pull add two).
RESOURCES = LANES[:4]


def build_dag(model, plan: Plan, cost, *, precision: str = "fp32", iterations: int = 1, prefetch: bool = False,
              include_comm: bool = True):
    """The task DAG of ``iterations`` chained iterations as a ``networkx.DiGraph``.

    Node keys are ``(iteration, kind, index)``; attributes ``iteration, kind,
    layer, group, resource, duration_s, bytes, priority``.
    ``include_comm=False`` leaves out all messages (P = 1).
    """
    if not include_comm:
        plan, cost = Plan(plan.scheduler, ()), NO_COMM
    graph = lower(model, plan, cost, precision=precision, iterations=iterations, prefetch=prefetch)
    return to_networkx(graph, model.layer_names)


def add_compute_chain(g, add, k: int, model, group_of: dict, nbytes) -> None:
    """Iteration ``k``'s io, h2d, forward and backward tasks and the edges between them,
    added to a networkx graph: io -> h2d -> forward 0 .. n-1 -> backward n-1 .. 0.
    ``add(key, kind, resource, duration, layer, group, bytes)`` adds one task; ``group_of``
    maps a layer to its message. (Kept for scripts that build their own DAGs; the
    simulator itself lowers plans with `sim.core.lower`.)"""
    n, names = model.num_layers, model.layer_names
    add((k, "io", 0), "io", "io", model.io_s)
    add((k, "h2d", 0), "h2d", "h2d", model.h2d_s)
    for i in range(n):
        add((k, "forward", i), "forward", "compute", model.fwd_s[i], names[i], group_of.get(i, -1))
    for i in range(n - 1, -1, -1):
        add((k, "backward", i), "backward", "compute", model.bwd_s[i], names[i], group_of.get(i, -1), nbytes[i])
    g.add_edge((k, "io", 0), (k, "h2d", 0))
    g.add_edge((k, "h2d", 0), (k, "forward", 0))
    for i in range(1, n):
        g.add_edge((k, "forward", i - 1), (k, "forward", i))
    g.add_edge((k, "forward", n - 1), (k, "backward", n - 1))
    for i in range(n - 1, 0, -1):
        g.add_edge((k, "backward", i), (k, "backward", i - 1))
