"""The one lowering: a plan becomes a task graph for the engine.

The iteration DAG of S-SGD (Shi, Wang, Chu and Li, ICPADS 2018, arXiv
1805.03812), for one worker or for P workers, with every further decision of
the survey's methods (Shi et al., arXiv 2005.13247). Per worker and
iteration: read a mini-batch (``io``), copy it to the GPU (``h2d``), the
forward pass layer by layer and the backward pass in reverse, all on the
worker's ``compute`` lane. Per message of the plan, shared by all workers:

* an all-reduce on the ``comm`` lane, released when every worker has the
  message's gradients (plus the plan's ``lag_s``; after the whole backward
  pass when ``after_backward``);
* with ``partition_bytes``, one task per part of the message;
* with ``decoupled`` (DeAR), a reduce-scatter after backward and an
  all-gather before the next forward of the message's layers;
* with ``shard`` (ZeRO, FSDP), a reduce-scatter as the gradients are ready
  and the all-gathers of sharded parameters (`sim.core.shard`);
* with a parameter-server cost, a ``push`` then a ``pull`` per part, on the
  ``push`` and ``pull`` lanes (one ``comm`` lane when they share a link).

Then either one update per worker after every message (the plain plan), or,
with ``per_layer_update``, an update of each layer once its message is back,
and the next forward of layer l waits for layer l only. Without ``prefetch``
the next io waits for the end of the step.

A lane runs one task at a time; among its released tasks the one with the
smallest priority goes first: on a compute lane the order the tasks were
added (so an update of iteration k goes before the forward of k+1), on the
channel the plan's order (``priority == "fifo"``) or the layer nearest the
input first (``"input_first"``, ByteScheduler and P3), DeAR's reduce-scatters
before its all-gathers. All workers identical (P = 1 stands for all) gives
the aggregate run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.core.cost import PSCost
from sim.core.plan import SHARD_NONE, Plan
from sim.core.shard import REDUCE_SCATTER, ShardedSteps, shard_key

__all__ = ["COMPUTE_LANES", "LANES", "TaskGraph", "WorkerTimes", "lower", "needs_general_engine", "parts_of"]

#: Every lane a task can run on: a worker's loader, copy engine and compute
#: stream, and the shared communication lanes.
LANES = ("io", "h2d", "compute", "comm", "push", "pull")
COMPUTE_LANES = ("io", "h2d", "compute")
#: The worker of a shared (communication) task.
SHARED = -1


def parts_of(nbytes: int, partition_bytes: int) -> list[int]:
    """Sizes of the parts of an ``nbytes`` message: full partitions, then the rest.

    >>> parts_of(10, 4)
    [4, 4, 2]
    """
    if partition_bytes <= 0 or nbytes <= partition_bytes:
        return [int(nbytes)]
    full, rest = divmod(int(nbytes), int(partition_bytes))
    return [int(partition_bytes)] * full + ([rest] if rest else [])


def needs_general_engine(plan: Plan, cost) -> bool:
    """True when ``plan`` or ``cost`` is beyond the fast path's plain structure."""
    return isinstance(cost, PSCost) or not plan.is_plain


@dataclass(frozen=True, eq=False)
class WorkerTimes:
    """What varies between workers: each worker's timed model and scale factors.

    ``models[profile_of[w]]`` is worker w's model. Its forward and backward
    times in iteration k are multiplied by ``compute_scale[k, w]``, its update
    by ``update_scale[w]``; message g of iteration k takes
    ``comm_scale[k, g]`` times its cost. All ones: identical workers.
    """

    models: tuple
    profile_of: np.ndarray
    compute_scale: np.ndarray
    update_scale: np.ndarray
    comm_scale: np.ndarray | None = None

    @property
    def workers(self) -> int:
        return len(self.profile_of)

    @classmethod
    def identical(cls, model, iterations: int, workers: int = 1) -> WorkerTimes:
        return cls((model,), np.zeros(workers, dtype=int), np.ones((iterations, workers)), np.ones(workers))


class TaskGraph:
    """Tasks as parallel lists; edges as successor lists with optional lags.

    ``resource[t]`` indexes ``resources``, a list of ``(worker, lane)``;
    ``priority[t]`` is the task's rank among the tasks of its resource
    (`rank_priorities`), ``key[t]`` what it is ranked by.
    """

    #: One list per task attribute, in task order.
    COLUMNS = ("duration_s", "resource", "key", "iteration", "worker", "kind", "layer", "message", "nbytes", "label",
               "succ", "indegree")

    def __init__(self) -> None:
        for name in self.COLUMNS:
            setattr(self, name, [])
        self.lag_s: dict = {}
        self.resources: list = []
        self.priority: list = []
        self._resource_id: dict = {}

    def __len__(self) -> int:
        return len(self.duration_s)

    def add(self, k, worker, lane, kind, duration, layer="", message=-1, nbytes=0, key=None, label=""):
        """Add one task; return its index. ``key`` orders it on its lane (default: insertion order)."""
        r = self._resource_id.get((worker, lane))
        if r is None:
            r = self._resource_id[(worker, lane)] = len(self.resources)
            self.resources.append((worker, lane))
        t = len(self.duration_s)
        self.duration_s.append(float(duration))
        self.resource.append(r)
        self.key.append((t,) if key is None else key)
        self.iteration.append(k)
        self.worker.append(worker)
        self.kind.append(kind)
        self.layer.append(layer)
        self.message.append(message)
        self.nbytes.append(int(nbytes))
        self.label.append(label)
        self.succ.append([])
        self.indegree.append(0)
        return t

    def edge(self, u: int, v: int, lag_s: float = 0.0) -> None:
        self.succ[u].append(v)
        self.indegree[v] += 1
        if lag_s > 0:
            self.lag_s[(u, v)] = max(lag_s, self.lag_s.get((u, v), 0.0))

    def rank_priorities(self) -> None:
        """Each task's rank among its resource's tasks, by key (then index)."""
        self.priority = [0] * len(self.duration_s)
        by_resource: dict[int, list[int]] = {}
        for t, r in enumerate(self.resource):
            by_resource.setdefault(r, []).append(t)
        for tasks in by_resource.values():
            keyed = sorted(tasks, key=lambda t: (self.key[t], t))
            for rank, t in enumerate(keyed):
                self.priority[t] = rank

    def lane(self, t: int) -> str:
        return self.resources[self.resource[t]][1]


@dataclass
class _Messages:
    """The plan's messages with their sizes and labels."""

    groups: tuple
    nbytes: list
    labels: list
    parts: list
    lags: tuple


def _messages(model, plan: Plan, precision: str) -> _Messages:
    layer_bytes = model.gradient_bytes(precision)
    names = model.layer_names
    groups = plan.groups
    nbytes = [int(sum(int(layer_bytes[i]) for i in members)) for members in groups]
    labels = ["+".join(names[i] for i in members) for members in groups]
    parts = [parts_of(b, plan.partition_bytes) for b in nbytes]
    return _Messages(groups, nbytes, labels, parts, plan.lag_s or (0.0,) * len(groups))


class _Lowering(ShardedSteps):
    """Builds the graph iteration by iteration (see the module docstring)."""

    def __init__(self, model, plan: Plan, cost, precision: str, prefetch: bool, times: WorkerTimes):
        self.g = TaskGraph()
        self.plan, self.cost, self.prefetch, self.times = plan, cost, prefetch, times
        self.msgs = _messages(model, plan, precision)
        self.names = model.layer_names
        self.n = model.num_layers
        self.layer_bytes = model.gradient_bytes(precision)
        self.group_of = {i: gi for gi, members in enumerate(plan.groups) for i in members}
        shared = not isinstance(cost, PSCost) or cost.shared_lane
        self.push_lane, self.pull_lane = ("comm", "comm") if shared else ("push", "pull")
        self.carry = None  # per worker: (layer -> tasks its next forward waits for, end of the step)
        self.forwards: dict = {}  # per worker: its h2d task and forward tasks of the iteration being built

    def run(self, iterations: int) -> TaskGraph:
        for k in range(iterations):
            self.iteration(k)
        self.g.rank_priorities()
        return self.g

    def iteration(self, k: int) -> None:
        W = self.times.workers
        chains = [self.compute_chain(k, w) for w in range(W)]
        if self.gathers_parameters():
            self.gather_parameters(k, chains)
        single = None
        if not self.plan.per_layer_update:
            single = [self.g.add(k, w, "compute", "update", self.update_s(w)) for w in range(W)]
            for w in range(W):
                self.g.edge(chains[w][-1], single[w])
        ends = [self.message_tasks(k, gi, chains) for gi in range(len(self.msgs.groups))]
        if single is not None:
            for w in range(W):
                for tasks in ends:
                    for t in tasks:
                        self.g.edge(t, single[w])
            self.carry = [({0: [single[w]]}, single[w], chains[w][-1]) for w in range(W)]
            if self.gathers_after_update():
                self.carry = self.gather_updated(k, single, chains)
        else:
            self.carry = self.layer_updates(k, ends, chains)

    def update_s(self, w: int) -> float:
        return float(self.times.models[self.times.profile_of[w]].update_s) * float(self.times.update_scale[w])

    def compute_chain(self, k: int, w: int) -> list[int]:
        """Worker w's io, h2d, forward and backward of iteration k, chained; the
        list holds the backward tasks by layer index, then (last) backward 0."""
        g, names, n = self.g, self.names, self.n
        model = self.times.models[self.times.profile_of[w]]
        scale = float(self.times.compute_scale[k, w])
        io = g.add(k, w, "io", "io", model.io_s, label="0")
        h2d = g.add(k, w, "h2d", "h2d", model.h2d_s, label="0")
        g.edge(io, h2d)
        fwd = [g.add(k, w, "compute", "forward", model.fwd_s[i] * scale, names[i], self.group_of.get(i, -1))
               for i in range(n)]
        bwd = [0] * n
        for i in range(n - 1, -1, -1):
            bwd[i] = g.add(k, w, "compute", "backward", model.bwd_s[i] * scale, names[i], self.group_of.get(i, -1),
                           self.layer_bytes[i])
        if n:
            g.edge(h2d, fwd[0])
        for i in range(1, n):
            g.edge(fwd[i - 1], fwd[i])
        if n:
            g.edge(fwd[n - 1], bwd[n - 1])
        for i in range(n - 1, 0, -1):
            g.edge(bwd[i], bwd[i - 1])
        self.link_previous(k, w, io, fwd)
        self.forwards[w] = (h2d, fwd)
        return bwd + [bwd[0] if n else h2d]

    def link_previous(self, k: int, w: int, io: int, fwd: list[int]) -> None:
        if self.carry is None or not fwd:
            return
        ready, step_done, backward_done = self.carry[w]
        self.g.edge(backward_done, fwd[0])
        for i, tasks in ready.items():
            for t in tasks:
                self.g.edge(t, fwd[i])
        if not self.prefetch:
            self.g.edge(step_done, io)

    def channel_key(self, k: int, phase: int, gi: int, j: int) -> tuple:
        """FIFO: plan order; input_first: the layer nearest the input. A push
        and a pull sharing one lane take turns part by part; DeAR's
        reduce-scatters of an iteration go before its all-gathers."""
        groups = self.msgs.groups
        if self.plan.shard != SHARD_NONE:
            return shard_key(k, REDUCE_SCATTER, gi, j)
        if self.plan.decoupled:
            return (k, phase, min(groups[gi]) if phase else gi, j)
        order = min(groups[gi]) if self.plan.priority == "input_first" else gi
        return (k, order, j, phase)

    def comm_s(self, k: int, gi: int, step: str, nbytes: int, whole: bool) -> float:
        t = self.cost.step_time_s(step, self.msgs.groups[gi], nbytes, whole=whole)
        scale = self.times.comm_scale
        return t if scale is None else t * float(scale[k, gi])

    def message_tasks(self, k: int, gi: int, chains) -> list[int]:
        """The tasks of message gi in iteration k; returns the last task of each part."""
        g, m = self.g, self.msgs
        parts = m.parts[gi]
        is_ps = isinstance(self.cost, PSCost)
        ends = []
        for j, b in enumerate(parts):
            suffix = f"#{j}" if len(parts) > 1 else ""
            whole = len(parts) == 1
            if is_ps:
                first = g.add(k, SHARED, self.push_lane, "comm", self.comm_s(k, gi, "push", b, whole), m.labels[gi],
                              gi, b, self.channel_key(k, 0, gi, j), f"push:{m.labels[gi]}{suffix}")
                last = g.add(k, SHARED, self.pull_lane, "comm", self.comm_s(k, gi, "pull", b, whole), m.labels[gi],
                             gi, b, self.channel_key(k, 1, gi, j), f"pull:{m.labels[gi]}{suffix}")
                g.edge(first, last)
            else:
                halves = self.plan.decoupled or self.plan.shard != SHARD_NONE
                step = "reduce-scatter" if halves else "allreduce"
                name = f"reduce-scatter:{m.labels[gi]}" if halves else m.labels[gi]
                first = last = g.add(k, SHARED, "comm", "comm", self.comm_s(k, gi, step, b, whole), m.labels[gi], gi,
                                     b, self.channel_key(k, 0, gi, j), name + suffix)
            self.gradient_edges(gi, first, chains)
            ends.append(last)
        return ends

    def gradient_edges(self, gi: int, first: int, chains) -> None:
        members, lag = self.msgs.groups[gi], self.msgs.lags[gi]
        low = min(members)
        for bwd in chains:
            for i in members:
                self.g.edge(bwd[i], first, lag if (i == low and lag > 0) else 0.0)
            if self.plan.after_backward:
                self.g.edge(bwd[-1], first)

    def layer_updates(self, k: int, ends, chains) -> list:
        """Per-layer updates (ByteScheduler, DeAR) and DeAR's all-gathers; the carry per worker."""
        g, m, W = self.g, self.msgs, self.times.workers
        ready: list[dict[int, list]] = [{} for _ in range(W)]
        for gi, members in enumerate(m.groups):
            ups = [[self.layer_update(k, w, i, gi, ends[gi]) for i in sorted(members)] for w in range(W)]
            if not self.plan.decoupled:
                for w in range(W):
                    for i, up in zip(sorted(members), ups[w], strict=True):
                        ready[w].setdefault(i, []).append(up)
                continue
            for j, b in enumerate(m.parts[gi]):
                suffix = f"#{j}" if len(m.parts[gi]) > 1 else ""
                ag = g.add(k, SHARED, "comm", "comm", self.comm_s(k, gi, "all-gather", b, len(m.parts[gi]) == 1),
                           m.labels[gi], gi, b, self.channel_key(k, 1, gi, j), f"all-gather:{m.labels[gi]}{suffix}")
                for w in range(W):
                    for up in ups[w]:
                        g.edge(up, ag)
                    for i in members:
                        ready[w].setdefault(i, []).append(ag)
        # the framework's step returns once backward has ended; without
        # prefetch the next batch is read from then on
        return [(ready[w], chains[w][-1], chains[w][-1]) for w in range(W)]

    def layer_update(self, k: int, w: int, i: int, gi: int, ends) -> int:
        model = self.times.models[self.times.profile_of[w]]
        total = float(model.params.astype(float).sum())
        share = model.update_s * float(model.params[i]) / total if total else 0.0
        t = self.g.add(k, w, "compute", "update", share * float(self.times.update_scale[w]), self.names[i], gi)
        for e in ends:
            self.g.edge(e, t)
        return t


def lower(model, plan: Plan, cost, *, precision: str = "fp32", iterations: int = 1, prefetch: bool = False,
          times: WorkerTimes | None = None) -> TaskGraph:
    """The task graph of ``iterations`` chained iterations of ``plan``.

    Parameters
    ----------
    model : Model
        A timed model (forward, backward, update, io and h2d times).
    plan : Plan
        What the scheduler decided (`sim.core.plan.Plan`).
    cost : CommCost or PSCost
        The cost model every communication task asks (`sim.core.cost`).
    times : WorkerTimes, optional
        Per-worker models and scale factors; default one worker standing for all.
    """
    if times is None:
        times = WorkerTimes.identical(model, iterations)
    return _Lowering(model, plan, cost, precision, prefetch, times).run(iterations)
