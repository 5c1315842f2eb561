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

__all__ = ["RESOURCES", "build_dag", "gradient_layers"]

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
