"""The iteration DAG of S-SGD (Shi, Wang, Chu and Li, ICPADS 2018, arXiv 1805.03812).

One iteration is: read a mini-batch (io), copy it to the GPU (h2d), the
forward pass layer by layer, the backward pass in reverse order, one
all-reduce per message of the plan, and the update. Edges are dependencies.
Each task also names the resource that runs it:

* ``io``      the data loader (CPU and disk);
* ``h2d``     the host-to-device copy engine;
* ``compute`` the GPU's compute stream (forward, backward, update);
* ``comm``    the communication channel, one message at a time.

A resource runs one task at a time; among the tasks ready for it, the one
with the smallest ``priority`` goes first (the plan's order on the channel).
All workers are identical, so one worker's DAG stands for all of them.

A plan's ``lag_s`` holds a message back after its last gradient is ready
(an edge attribute the engine honours). Plans that partition messages,
update layer by layer or decouple the all-reduce are built by
`sim.arch.build_arch_dag`.

Iterations chain: the update of iteration k precedes the forward of k+1. With
``prefetch`` the io and h2d of iteration k+1 may run during iteration k;
without it they wait for the update of iteration k.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from sim.comm import CommCost
from sim.model import Model
from sim.schedulers import GradientLayers, Plan

__all__ = ["RESOURCES", "add_compute_chain", "build_dag", "gradient_layers"]

RESOURCES = ("io", "h2d", "compute", "comm")


def gradient_layers(model: Model, precision: str) -> GradientLayers:
    """Gradient-bearing layers with their ready times from backward start."""
    ready_all = np.cumsum(model.bwd_s[::-1])[::-1]  # r[l] = sum of t_b over layers l..n-1
    has = np.flatnonzero(model.params > 0)
    return GradientLayers(index=has, ready_s=ready_all[has], nbytes=model.gradient_bytes(precision)[has])


def build_dag(
    model: Model,
    plan: Plan,
    cost: CommCost,
    *,
    precision: str = "fp32",
    iterations: int = 1,
    prefetch: bool = False,
    include_comm: bool = True,
) -> nx.DiGraph:
    """The task DAG of ``iterations`` chained iterations.

    Node keys are ``(iteration, kind, index)``; attributes are ``iteration``,
    ``kind``, ``layer``, ``group``, ``resource``, ``duration_s``, ``bytes`` and
    ``priority``. ``include_comm=False`` leaves out all messages (P = 1).
    """
    g = nx.DiGraph()
    nbytes = model.gradient_bytes(precision)
    names = model.layer_names
    groups = plan.groups if include_comm else ()
    group_bytes = [int(sum(nbytes[i] for i in members)) for members in groups]
    group_time = [cost.message_time_s(members, b) for members, b in zip(groups, group_bytes, strict=True)]
    group_of = {i: gi for gi, members in enumerate(groups) for i in members}
    seq = 0

    def add(key, kind, resource, duration, layer="", group=-1, nbytes_=0, priority=None):
        nonlocal seq
        g.add_node(
            key, iteration=key[0], kind=kind, layer=layer, group=group, resource=resource,
            duration_s=float(duration), bytes=int(nbytes_), priority=seq if priority is None else priority,
        )
        seq += 1

    for k in range(iterations):
        add_compute_chain(g, add, k, model, group_of, nbytes)
        add((k, "update", 0), "update", "compute", model.update_s)
        g.add_edge((k, "backward", 0), (k, "update", 0))
        for gi, members in enumerate(groups):
            key = (k, "comm", gi)
            label = "+".join(names[i] for i in members)
            add(key, "comm", "comm", group_time[gi], label, gi, group_bytes[gi], priority=(k, gi))
            for i in members:
                g.add_edge((k, "backward", i), key)
            if plan.lag_s and plan.lag_s[gi] > 0:  # released lag_s after its last gradient
                g.edges[(k, "backward", min(members)), key]["lag_s"] = plan.lag_s[gi]
            if plan.after_backward:
                g.add_edge((k, "backward", 0), key)
            g.add_edge(key, (k, "update", 0))
        if k > 0:
            g.add_edge((k - 1, "update", 0), (k, "forward", 0))
            if not prefetch:
                g.add_edge((k - 1, "update", 0), (k, "io", 0))
    _uniform_priorities(g)
    return g


def add_compute_chain(g: nx.DiGraph, add, k: int, model: Model, group_of: dict, nbytes) -> None:
    """Iteration ``k``'s io, h2d, forward and backward tasks and the edges between them:
    io -> h2d -> forward 0 .. n-1 -> backward n-1 .. 0. ``add(key, kind, resource,
    duration, layer, group, bytes)`` adds one task; ``group_of`` maps a layer to its message."""
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


def _uniform_priorities(g: nx.DiGraph) -> None:
    """Give every node a comparable priority: comm keys are (iteration, group),
    others a sequence number; map both onto one ordering per resource."""
    for resource in RESOURCES:
        nodes = [u for u, d in g.nodes(data=True) if d["resource"] == resource]
        keyed = sorted(nodes, key=lambda u: g.nodes[u]["priority"])
        for rank, u in enumerate(keyed):
            g.nodes[u]["priority"] = rank
