"""The task DAG of the survey's further architectures and schedulers.

`sim.dag.build_dag` builds the standard iteration: one all-reduce per
message, one update after all of them. This module builds, for the engine
(`sim.engine.run_dag`), what the quantitative survey of Shi et al. (arXiv
2005.13247) compares beyond it:

* **partitions** (``Plan.partition_bytes``): a message is cut into parts of
  at most that many bytes, each its own task on the channel;
* **priority** (``Plan.priority == "input_first"``): among ready parts the
  channel sends the one of the layer nearest the input first (ByteScheduler,
  P3); the engine's priority among ready tasks does exactly this;
* **credit** (``Plan.credit``): how many partitions may be in flight. The
  channel stays one lane that sends one part at a time at the bandwidth it
  can reach; the credit sets that bandwidth in the parameter-server
  architecture (with c partitions in flight, min(c, S) servers are busy,
  `sim.comm.ps_cost`). That a newly ready high-priority part must wait for
  up to c parts already granted credit, not just the one on the lane, is
  left out (a simplification: credit only ever helps here);
* **per-layer updates** (``Plan.per_layer_update``): layer l is updated
  once its parts are back, and the next iteration's forward of layer l waits
  for that update only, so communication overlaps the next forward; the
  iteration is then measured between the last updates of two iterations;
* **decoupled all-reduce** (``Plan.decoupled``, DeAR): a reduce-scatter per
  message after backward, the update, and an all-gather before the next
  forward of the message's layers; each half costs T(M) / 2;
* **parameter server** (a `sim.comm.PSCost`): every part is a push then a
  pull. Push runs on the ``push`` lane (the worker's uplink and the servers'
  downlinks) and pull on the ``pull`` lane (the other direction of the
  full-duplex links), so pushes of later parts overlap pulls of earlier ones;
  with servers on the workers both share one ``comm`` lane.

All communication tasks have kind ``comm``; their resource is the lane and
their name carries the step and part (``push:fc#2``), so the timeline schema
(`sim.timeline`) is unchanged.
"""

from __future__ import annotations

import networkx as nx

from sim.comm import CommCost, PSCost
from sim.dag import add_compute_chain
from sim.model import Model
from sim.schedulers import Plan

__all__ = ["build_arch_dag", "needs_arch_dag", "parts_of"]


def needs_arch_dag(plan: Plan, cost) -> bool:
    """True when ``plan`` or ``cost`` needs this module's builder."""
    return isinstance(cost, PSCost) or not plan.is_plain


def parts_of(nbytes: int, partition_bytes: int) -> list[int]:
    """Sizes of the parts of an ``nbytes`` message: full partitions, then the rest.

    >>> parts_of(10, 4)
    [4, 4, 2]
    """
    if partition_bytes <= 0 or nbytes <= partition_bytes:
        return [int(nbytes)]
    full, rest = divmod(int(nbytes), int(partition_bytes))
    return [int(partition_bytes)] * full + ([rest] if rest else [])


def build_arch_dag(
    model: Model,
    plan: Plan,
    cost: CommCost | PSCost,
    *,
    precision: str = "fp32",
    iterations: int = 1,
    prefetch: bool = False,
) -> nx.DiGraph:
    """The task DAG of ``iterations`` chained iterations under ``plan`` and ``cost``.

    Node keys are ``(iteration, kind, index)`` with the attributes of
    `sim.dag.build_dag` (plus ``label`` for parts of messages). With a
    `PSCost` each part is a push and a pull; otherwise an all-reduce (or, when
    ``plan.decoupled``, a reduce-scatter and an all-gather).
    """
    g = nx.DiGraph()
    nbytes = model.gradient_bytes(precision)
    names = model.layer_names
    groups = plan.groups
    group_bytes = [int(sum(nbytes[i] for i in members)) for members in groups]
    group_of = {i: gi for gi, members in enumerate(groups) for i in members}
    lags = plan.lag_s or (0.0,) * len(groups)
    is_ps = isinstance(cost, PSCost)
    push_lane = "comm" if (not is_ps or cost.shared_lane) else "push"
    pull_lane = "comm" if (not is_ps or cost.shared_lane) else "pull"
    params = model.params.astype(float)
    total_params = float(params.sum())
    seq = 0

    def add(key, kind, resource, duration, layer="", group=-1, nbytes_=0, priority=None, label=""):
        nonlocal seq
        g.add_node(key, iteration=key[0], kind=kind, layer=layer, group=group, resource=resource,
                   duration_s=float(duration), bytes=int(nbytes_), priority=seq if priority is None else priority,
                   label=label)
        seq += 1

    def channel_key(k, phase, gi, j):
        """FIFO: plan order; input_first: the layer nearest the input. A push
        and a pull sharing one lane take turns part by part; DeAR's
        reduce-scatters of an iteration go before its all-gathers."""
        if plan.decoupled:  # reduce-scatters in plan order, then all-gathers from the input
            return (k, phase, min(groups[gi]) if phase else gi, j)
        order = min(groups[gi]) if plan.priority == "input_first" else gi
        return (k, order, j, phase)

    carry: tuple[dict[int, list], object] | None = None  # (layer -> tasks its next forward waits for, step end)
    for k in range(iterations):
        add_compute_chain(g, add, k, model, group_of, nbytes)
        if carry is not None:
            ready, step_done = carry
            g.add_edge((k - 1, "backward", 0), (k, "forward", 0))
            for i, tasks in ready.items():
                for task in tasks:
                    g.add_edge(task, (k, "forward", i))
            if not prefetch:
                g.add_edge(step_done, (k, "io", 0))
        idx = 0
        done_of_group: list[list] = []  # per message, the last task of each part
        for gi, members in enumerate(groups):
            label = "+".join(names[i] for i in members)
            parts = parts_of(group_bytes[gi], plan.partition_bytes)
            ends = []
            for j, b in enumerate(parts):
                suffix = f"#{j}" if len(parts) > 1 else ""
                if is_ps:
                    first, last = (k, "comm", idx), (k, "comm", idx + 1)
                    add(first, "comm", push_lane, cost.push_time_s(b), label, gi, b, channel_key(k, 0, gi, j),
                        f"push:{label}{suffix}")
                    add(last, "comm", pull_lane, cost.pull_time_s(b), label, gi, b, channel_key(k, 1, gi, j),
                        f"pull:{label}{suffix}")
                    g.add_edge(first, last)
                    idx += 2
                elif plan.decoupled:
                    first = last = (k, "comm", idx)
                    add(first, "comm", "comm", 0.5 * float(cost.time_s(b)), label, gi, b, channel_key(k, 0, gi, j),
                        f"reduce-scatter:{label}{suffix}")
                    idx += 1
                else:
                    first = last = (k, "comm", idx)
                    t = cost.message_time_s(members, b) if len(parts) == 1 else float(cost.time_s(b))
                    add(first, "comm", "comm", t, label, gi, b, channel_key(k, 0, gi, j), f"{label}{suffix}")
                    idx += 1
                for i in members:
                    g.add_edge((k, "backward", i), first)
                if lags[gi] > 0:
                    g.edges[(k, "backward", min(members)), first]["lag_s"] = lags[gi]
                if plan.after_backward:
                    g.add_edge((k, "backward", 0), first)
                ends.append(last)
            done_of_group.append(ends)
        ready: dict[int, list] = {}
        if plan.per_layer_update:
            for gi, members in enumerate(groups):
                ups = []
                for i in sorted(members):
                    share = model.update_s * params[i] / total_params if total_params else 0.0
                    ups.append((k, "update", i))
                    add(ups[-1], "update", "compute", share, names[i], gi)
                    for e in done_of_group[gi]:
                        g.add_edge(e, ups[-1])
                if plan.decoupled:
                    label = "+".join(names[i] for i in members)
                    parts = parts_of(group_bytes[gi], plan.partition_bytes)
                    for j, b in enumerate(parts):
                        suffix = f"#{j}" if len(parts) > 1 else ""
                        ag = (k, "comm", idx)
                        add(ag, "comm", "comm", 0.5 * float(cost.time_s(b)), label, gi, b, channel_key(k, 1, gi, j),
                            f"all-gather:{label}{suffix}")
                        idx += 1
                        for up in ups:
                            g.add_edge(up, ag)
                        for i in members:
                            ready.setdefault(i, []).append(ag)
                else:
                    for i, up in zip(sorted(members), ups, strict=True):
                        ready.setdefault(i, []).append(up)
            # the framework's step returns once backward has ended; without
            # prefetch the next batch is read from then on
            carry = (ready, (k, "backward", 0))
        else:
            up = (k, "update", 0)
            add(up, "update", "compute", model.update_s)
            g.add_edge((k, "backward", 0), up)
            for ends in done_of_group:
                for e in ends:
                    g.add_edge(e, up)
            carry = ({0: [up]}, up)
    _rank_priorities(g)
    return g


def _rank_priorities(g: nx.DiGraph) -> None:
    """One comparable priority per resource: its tasks ranked by their keys."""
    by_resource: dict[str, list] = {}
    for u, d in g.nodes(data=True):
        by_resource.setdefault(d["resource"], []).append(u)
    for nodes in by_resource.values():
        for rank, u in enumerate(sorted(nodes, key=lambda u: g.nodes[u]["priority"])):
            g.nodes[u]["priority"] = rank
