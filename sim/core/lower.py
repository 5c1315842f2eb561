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
  ``push`` and ``pull`` lanes (one ``comm`` lane when they share a link);
* with a credit of two or more (ByteScheduler) and a cost with a host-side
  launch (`sim.core.cost.CommCost.launch_s`), a ``launch`` per part on the
  framework's ``launch`` lane, then the rest of its all-reduce on ``comm``:
  the launches run ahead of the transfers instead of before each
  (`launches_ahead`).

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

import copy
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sim.core.cost import PSCost
from sim.core.messages import Messages, part_count, parts_of
from sim.core.pipeline import PipelineSteps, distinct
from sim.core.plan import SHARD_GRADIENTS, SHARD_NONE, SHARD_OPTIMIZER, SHARD_PARAMETERS, Plan
from sim.core.shard import REDUCE_SCATTER, ShardedSteps
from sim.core.taskgraph import KINDS, TAGS, Carry, TaskGraph

__all__ = ["COMPUTE_LANES", "LANES", "LAUNCH_LANE", "TaskGraph", "WorkerTimes", "launches_ahead", "lower",
           "needs_general_engine", "parts_of", "retimed", "task_count"]

#: Every lane a task can run on: a worker's loader, copy engine and compute
#: stream, the shared communication lanes, and the framework's thread that launches
#: collectives ahead of the transfers (`launches_ahead`).
LANES = ("io", "h2d", "compute", "comm", "push", "pull", "launch")
COMPUTE_LANES = ("io", "h2d", "compute")
LAUNCH_LANE = "launch"
#: The worker of a shared (communication) task.
SHARED = -1
_UPDATE, _COMM = KINDS.index("update"), KINDS.index("comm")
_STEP_TAG = {"transfer": "message"}  # a step's task tag, where it is not the step's name


def needs_general_engine(plan: Plan, cost) -> bool:
    """True when ``plan`` or ``cost`` is beyond the fast path's plain structure."""
    return isinstance(cost, PSCost) or not plan.is_plain


def launches_ahead(plan: Plan, cost) -> bool:
    """Whether each part's launch runs on the framework's own lane, ahead of the transfers.

    With a credit of two or more partitions in flight (ByteScheduler), the
    framework launches the next partition while the one before is on the wire,
    so a launch hides behind the transfers before it; with credit 1 (or none
    set) it comes before its transfer on the channel, inside the all-reduce's
    start-up cost. Only an all-reduce cost with a host-side launch
    (`sim.core.cost.CommCost.launch_s`) has one to move; the launches then run
    ahead as far as their gradients allow (the model does not bound them by
    the credit beyond that)."""
    return (plan.credit >= 2 and not isinstance(cost, PSCost) and getattr(cost, "launch_s", 0.0) > 0
            and not plan.decoupled and plan.shard == SHARD_NONE)


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


def _one(task) -> np.ndarray:
    return np.asarray([task], dtype=np.int64)


class _UpdateLayout(NamedTuple):
    """An iteration's per-layer updates (`_Lowering.layer_updates`), the same in every iteration: updates
    per message and where each message's first is; each update's message, worker, layer and place in the
    block; each all-gather's place; the block's size; per edge from a part to an update, the part
    (``wait_part``) and the update's place (``wait_update``)."""

    per_msg: np.ndarray
    u_first: np.ndarray
    u_msg: np.ndarray
    u_w: np.ndarray
    u_layer: np.ndarray
    u_pos: np.ndarray
    ag_pos: np.ndarray
    total: int
    wait_part: np.ndarray
    wait_update: np.ndarray


class _Lowering(ShardedSteps):
    """Builds the graph iteration by iteration (see the module docstring)."""

    def __init__(self, model, plan: Plan, cost, precision: str, prefetch: bool, times: WorkerTimes):
        self.plan, self.cost, self.prefetch, self.times = plan, cost, prefetch, times
        self.names = model.layer_names
        self.n = model.num_layers
        self.layer_bytes = np.asarray(model.gradient_bytes(precision)).astype(np.int64)
        self.msgs = Messages(plan.groups, self.layer_bytes, self.names, plan.partition_bytes, plan.lag_s)
        self.g = TaskGraph(self.names, _LazyLabels(self.msgs, "labels"), _LazyLabels(self.msgs, "part_labels"))
        self.group_of = np.full(self.n, -1, dtype=np.int64)
        self.group_of[self.msgs.members] = np.repeat(np.arange(len(self.msgs)), self.msgs.sizes)
        self.is_ps = isinstance(cost, PSCost)
        if launches_ahead(plan, cost):  # a part's launch, then its transfer
            self.step_lanes = (LAUNCH_LANE, "comm")
        else:  # a part's push then pull, on lanes of their own unless they share a link
            self.step_lanes = ("push", "pull") if self.is_ps and not cost.shared_lane else ("comm", "comm")
        self.grad_layer, self.grad_part, self.grad_lag = self.msgs.gradient_sources()
        self.steps = self.step_names()
        self.base_s = {step: self.msgs.step_times_s(cost, step) for step in self.steps}
        self.carry = None  # per worker: a `Carry`
        self.pipeline = self.pipeline_steps(prefetch)
        self.forwards: dict = {}  # per worker: its h2d task and forward tasks of the iteration being built
        self.updates: _UpdateLayout | None = None  # (`update_layout`)
        self._two_step: dict | None = None  # (`two_step_block`)

    def pipeline_steps(self, prefetch: bool) -> PipelineSteps | None:
        """What `sim.core.pipeline` needs to time the graph without the event loop, when it applies:
        one worker, at least one layer and one message, no sharded steps."""
        m, plan = self.msgs, self.plan
        if (self.times.workers != 1 or not self.n or not m.parts or plan.shard != SHARD_NONE
                or distinct(m.members) != len(m.members)):
            return None
        return PipelineSteps(m, two_lanes=self.step_lanes[0] != self.step_lanes[1], after_backward=plan.after_backward,
                             prefetch=prefetch, per_layer=plan.per_layer_update,
                             layer_msg=self.group_of if plan.decoupled else None)

    def step_names(self) -> tuple[str, ...]:
        if self.is_ps:
            return ("push", "pull")
        if self.step_lanes[0] == LAUNCH_LANE:
            return ("launch", "transfer")
        if self.plan.decoupled:
            return ("reduce-scatter", "all-gather")
        return ("reduce-scatter",) if self.plan.shard != SHARD_NONE else ("allreduce",)

    def run(self, iterations: int) -> TaskGraph:
        for k in range(iterations):
            self.iteration(k)
        self.g.pipeline = self.pipeline
        return self.g.finish()

    def iteration(self, k: int) -> None:
        W = self.times.workers
        chains = [self.compute_chain(k, w) for w in range(W)]
        if self.gathers_parameters():
            self.gather_parameters(k, chains)
        single = None
        if not self.plan.per_layer_update or not self.plan.groups:  # (no message: the model's one update)
            single = [self.g.add(k, w, "compute", "update", self.update_s(w)) for w in range(W)]
            for w in range(W):
                self.g.edge(chains[w][-1], single[w])
        ends = self.message_tasks(k, chains)
        if self.pipeline is not None:
            io, h2d, fwd = self.forwards[0]
            self.pipeline.add(io=io, h2d=h2d, fwd=fwd, bwd=chains[0][:-1], first=self.first_steps, last=ends,
                              single=None if single is None else single[0])
        if single is not None:
            for w in range(W):
                self.g.edges(ends, single[w])
            # a per-layer-update framework's step returns once backward has ended (as in `layer_updates`), so
            # without prefetch the next batch is read from then on, beside the update
            step = [chains[w][-1] if self.plan.per_layer_update else single[w] for w in range(W)]
            self.carry = [Carry(_one(single[w]), _one(0), step[w], chains[w][-1]) for w in range(W)]
            if self.gathers_after_update():
                self.carry = self.gather_updated(k, single, chains)
        else:
            self.carry = self.layer_updates(k, ends, chains)

    def update_s(self, w: int) -> float:
        return float(self.times.models[self.times.profile_of[w]].update_s) * float(self.times.update_scale[w])

    def compute_chain(self, k: int, w: int) -> np.ndarray:
        """Worker w's io, h2d, forward and backward of iteration k, chained; the
        array holds the backward tasks by layer index, then (last) backward 0."""
        g, n = self.g, self.n
        model = self.times.models[self.times.profile_of[w]]
        scale = float(self.times.compute_scale[k, w])
        io = g.add(k, w, "io", "io", model.io_s, tag=1)
        h2d = g.add(k, w, "h2d", "h2d", model.h2d_s, tag=1)
        g.edge(io, h2d)
        layers = np.arange(n, dtype=np.int64)
        fwd = g.add_block(n, k, w, "compute", "forward", np.asarray(model.fwd_s, dtype=float) * scale, layer=layers,
                          message=self.group_of)
        bwd = g.add_block(n, k, w, "compute", "backward", (np.asarray(model.bwd_s, dtype=float) * scale)[::-1],
                          layer=layers[::-1], message=self.group_of[::-1], nbytes=self.layer_bytes[::-1])[::-1]
        if n:
            g.edge(h2d, fwd[0])
            g.edges(fwd[:-1], fwd[1:])
            g.edge(fwd[n - 1], bwd[n - 1])
            g.edges(bwd[1:], bwd[:-1])
        self.link_previous(k, w, io, fwd)
        self.forwards[w] = (io, h2d, fwd)
        return np.append(bwd, bwd[0] if n else h2d)

    def link_previous(self, k: int, w: int, io: int, fwd: np.ndarray) -> None:
        if self.carry is None or not len(fwd):
            return
        carry = self.carry[w]
        self.g.edge(carry.backward_done, fwd[0])
        self.g.edges(carry.sources, fwd[carry.layers])
        if not self.prefetch:
            self.g.edge(carry.step_done, io)

    def part_keys(self, k: int, phase: int) -> tuple:
        """Channel keys of every part (a step of a message). FIFO: plan order;
        input_first: the layer nearest the input. A push and a pull sharing one
        lane take turns part by part; DeAR's reduce-scatters of an iteration go
        before its all-gathers."""
        m = self.msgs
        if self.plan.shard != SHARD_NONE:
            return (k, REDUCE_SCATTER, m.part_msg, m.part_j)
        if self.plan.decoupled:
            return (k, phase, m.low[m.part_msg] if phase else m.part_msg, m.part_j)
        order = m.low[m.part_msg] if self.plan.priority == "input_first" else m.part_msg
        return (k, order, m.part_j, phase)

    def part_times_s(self, k: int, step: str) -> np.ndarray:
        scale = self.times.comm_scale
        base = self.base_s[step]
        return base if scale is None else base * np.asarray(scale[k], dtype=float)[self.msgs.part_msg]

    def message_tasks(self, k: int, chains) -> np.ndarray:
        """The tasks of every message in iteration k (a part's push then pull, or its one
        task); gradient edges; returns the last task of each part, in part order."""
        g, m = self.g, self.msgs
        parts = m.parts
        if not parts:
            return np.zeros(0, dtype=np.int64)
        two = len(self.steps) == 2 and not self.plan.decoupled
        if two:  # a part's push then its pull, or its launch then its transfer
            block = self.two_step_block()
            dur = block["duration"] if self.times.comm_scale is None else self.two_step_durations(k)
            tasks = g.add_block(2 * parts, k, SHARED, block["lanes"], "comm", dur, key=(k, *block["keys"]),
                                tag=block["tags"], nbytes=block["nbytes"], part=block["part"],
                                layer=-1, message=block["message"])
            first, last = tasks[0::2], tasks[1::2]
            g.edges(first, last)
            self.first_steps = first
        else:
            step = self.steps[0]
            tag = TAGS.index("reduce-scatter") if step == "reduce-scatter" else TAGS.index("message")
            first = last = g.add_block(parts, k, SHARED, "comm", "comm", self.part_times_s(k, step),
                                       key=self.part_keys(k, 0), tag=tag, nbytes=m.part_bytes, part=m.part_suffix,
                                       layer=-1, message=m.part_msg)
            self.first_steps = first
        for bwd in chains:
            g.edges(bwd[self.grad_layer], first[self.grad_part], self.grad_lag)
            if self.plan.after_backward:
                g.edges(bwd[-1], first)
        return last

    def two_step_block(self) -> dict:
        """The columns of an iteration's two-step parts (a part's push then its pull, or its launch then
        its transfer, interleaved), built once: the same in every iteration but for the iteration's own
        key (k) and, with per-iteration communication scales, the durations. Every iteration's block
        shares these arrays (one copy in memory, not one per iteration), each in the dtype of the column
        that holds it (`sim.core.taskgraph`: the same values, half the memory or less)."""
        if self._two_step is None:
            g, m, parts = self.g, self.msgs, self.msgs.parts
            keys = [np.empty(2 * parts, dtype=np.int32) for _ in range(3)]
            for phase in range(2):
                for column, values in zip(keys, self.part_keys(0, phase)[1:], strict=True):
                    column[phase::2] = values
            lanes = np.array([g.resource_id(SHARED, lane) for lane in self.step_lanes], dtype=np.int32)
            tags = np.array([TAGS.index(_STEP_TAG.get(step, step)) for step in self.steps], dtype=np.int8)
            self._two_step = dict(
                lanes=np.tile(lanes, parts), keys=keys, tags=np.tile(tags, parts), nbytes=np.repeat(m.part_bytes, 2),
                part=m.part_suffix.astype(np.int32).repeat(2), message=m.part_msg.astype(np.int32).repeat(2),
                duration=self.two_step_durations(0))
        return self._two_step

    def two_step_durations(self, k: int) -> np.ndarray:
        dur = np.empty(2 * self.msgs.parts)
        for phase, step in enumerate(self.steps):
            dur[phase::2] = self.part_times_s(k, step)
        return dur

    def layer_updates(self, k: int, ends: np.ndarray, chains) -> list:
        """Per-layer updates (ByteScheduler, DeAR) and DeAR's all-gathers; the carry per worker.

        Per message, in plan order: each worker's updates of the message's layers
        (by layer index), each waiting for every part of the message; with
        ``decoupled``, then an all-gather per part, waiting for all those updates."""
        g, m, W = self.g, self.msgs, self.times.workers
        lay = self.update_layout()  # the same in every iteration
        u_msg, u_w, u_layer, u_pos, ag_pos = lay.u_msg, lay.u_w, lay.u_layer, lay.u_pos, lay.ag_pos
        base, total = len(g), lay.total
        cols = self.update_columns(k, base, total, u_msg, u_w, u_layer, u_pos)
        if self.plan.decoupled:
            self.all_gather_columns(k, cols, ag_pos)
        g.add_block(total, k, cols.pop("worker"), cols.pop("lane"), cols.pop("kind"), cols.pop("duration"), **cols)
        ups = base + u_pos
        g.edges(ends[lay.wait_part], base + lay.wait_update)  # every part of the message -> each of its updates
        if self.pipeline is not None:
            self.pipeline.more(ups=ups, ups_layer=u_layer, ups_msg=u_msg, ags=base + ag_pos)
        if not self.plan.decoupled:
            return [Carry(ups[u_w == w], u_layer[u_w == w], chains[w][-1], chains[w][-1]) for w in range(W)]
        ag = base + ag_pos
        reps = lay.per_msg[m.part_msg]  # every update of the message -> each of its all-gathers
        g.edges(ups[np.repeat(lay.u_first[m.part_msg], reps) + _ranges(reps)], np.repeat(ag, reps))
        reps = m.sizes[m.part_msg]  # the next forward of each layer waits for each all-gather of its message
        layers = self.sorted_members()[np.repeat(m.member_first[:-1][m.part_msg], reps) + _ranges(reps)]
        # the framework's step returns once backward has ended; without
        # prefetch the next batch is read from then on
        return [Carry(np.repeat(ag, reps), layers, chains[w][-1], chains[w][-1]) for w in range(W)]

    def update_layout(self) -> _UpdateLayout:
        """Where each update goes in an iteration's block and what it waits for (built once)."""
        if self.updates is not None:
            return self.updates
        m, W = self.msgs, self.times.workers
        members = self.sorted_members()
        per_msg = W * m.sizes  # updates per message
        ags = m.count if self.plan.decoupled else np.zeros(len(m), dtype=np.int64)
        offset = _starts(per_msg + ags)  # where each message's tasks start in the block
        u_msg = np.repeat(np.arange(len(m), dtype=np.int64), per_msg)
        q = _ranges(per_msg)  # an update's place among its message's
        size = np.maximum(m.sizes[u_msg], 1)
        u_pos = offset[u_msg] + q
        reps = m.count[u_msg]  # every part of the message -> each of its updates
        self.updates = _UpdateLayout(
            per_msg, _starts(per_msg), u_msg, q // size, members[m.member_first[:-1][u_msg] + q % size], u_pos,
            offset[m.part_msg] + per_msg[m.part_msg] + m.part_j, int(np.sum(per_msg + ags)),
            np.repeat(m.first_part[:-1][u_msg], reps) + _ranges(reps), np.repeat(u_pos, reps))
        return self.updates

    def sorted_members(self) -> np.ndarray:
        """Each message's layers, by layer index (flat, in message order)."""
        m = self.msgs
        msg_of = np.repeat(np.arange(len(m), dtype=np.int64), m.sizes)
        return m.members[np.lexsort((m.members, msg_of))]

    def update_columns(self, k: int, base: int, total: int, u_msg, u_w, u_layer, u_pos) -> dict:
        """The columns of a block of ``total`` tasks, its updates filled in."""
        g, times = self.g, self.times
        comm = g.resource_id(SHARED, "comm") if self.plan.decoupled else -1
        compute = np.asarray([g.resource_id(w, "compute") for w in range(times.workers)], dtype=np.int64)
        shares = []
        for model in times.models:
            params = np.asarray(model.params).astype(float)
            whole = float(params.sum())
            shares.append(model.update_s * params / whole if whole else np.zeros(len(params)))
        cols = dict(worker=np.full(total, SHARED), lane=np.full(total, comm), kind=np.full(total, _COMM),
                    duration=np.zeros(total), layer=np.full(total, -1), message=np.full(total, -1),
                    nbytes=np.zeros(total, np.int64), tag=np.zeros(total, np.int64), part=np.full(total, -1),
                    key=[base + np.arange(total, dtype=np.int64)] + [np.zeros(total, np.int64)] * 3)
        profile = np.asarray(times.profile_of, dtype=np.int64)[u_w]
        scale = np.asarray(times.update_scale, dtype=float)[u_w]
        share = np.array([shares[p][i] for p, i in zip(profile.tolist(), u_layer.tolist(), strict=True)]) \
            if len(shares) > 1 else shares[0][u_layer]
        for name, values in (("worker", u_w), ("lane", compute[u_w]), ("kind", _UPDATE), ("duration", share * scale),
                             ("layer", u_layer), ("message", u_msg)):
            cols[name][u_pos] = values
        return cols

    def all_gather_columns(self, k: int, cols: dict, pos: np.ndarray) -> None:
        """DeAR's all-gathers of every part, at ``pos`` in the block."""
        m = self.msgs
        key = cols["key"] = [c.copy() for c in cols["key"]]
        for c, values in zip(key, np.broadcast_arrays(*self.part_keys(k, 1)), strict=True):
            c[pos] = values
        for name, values in (("duration", self.part_times_s(k, "all-gather")), ("message", m.part_msg),
                             ("nbytes", m.part_bytes), ("tag", TAGS.index("all-gather")), ("part", m.part_suffix)):
            cols[name][pos] = values


def _starts(counts: np.ndarray) -> np.ndarray:
    """Where each of consecutive runs of ``counts`` items starts."""
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if len(counts) else np.zeros(0, np.int64)


def _ranges(counts: np.ndarray) -> np.ndarray:
    """``0 .. c - 1`` for each c of ``counts``, joined."""
    counts = np.asarray(counts, dtype=np.int64)
    return np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(_starts(counts), counts)


class _LazyLabels:
    """The messages' labels, built when first read (a timeline or a drawing)."""

    def __init__(self, msgs: Messages, which: str) -> None:
        self.msgs, self.which = msgs, which

    def __iter__(self):
        return iter(getattr(self.msgs, self.which))

    def __len__(self) -> int:
        return len(self.msgs)


def task_count(model, plan: Plan, cost, *, precision: str = "fp32", iterations: int = 1, workers: int = 1) -> int:
    """How many tasks `lower` creates for ``iterations`` iterations of ``workers`` workers, from the
    sizes alone (exact; ``cost`` None counts two steps per part, as for a parameter server)."""
    W, n, m = int(workers), int(model.num_layers), len(plan.groups)
    parts = part_count(plan.groups, model.gradient_bytes(precision), plan.partition_bytes)
    steps = 2 if cost is None or isinstance(cost, PSCost) or plan.decoupled or launches_ahead(plan, cost) else 1
    per_iteration = W * (2 + 2 * n) + steps * parts
    # per-layer updates, or the one update (a per-layer plan with no message has the one update too)
    per_iteration += W * sum(len(g) for g in plan.groups) if plan.per_layer_update and m else W
    if plan.shard in (SHARD_OPTIMIZER, SHARD_GRADIENTS):
        per_iteration += m
    elif plan.shard == SHARD_PARAMETERS:  # before each unit's forward, and before its backward but the last's
        per_iteration += m + max(m - 1, 0)
    return int(iterations) * per_iteration if iterations > 0 else 0


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


def retimed(graph: TaskGraph, fwd_s, bwd_s, out_s: np.ndarray | None = None) -> TaskGraph:
    """``graph`` (lowered by `lower` for identical workers) with each forward and backward task taking
    its layer's ``fwd_s`` and ``bwd_s``: a copy that shares every array but the durations (written into
    ``out_s`` if given), as `lower` of a model with those times would build it (each time times a scale
    of 1.0, the same bits)."""
    graph.finish()
    out = copy.copy(graph)
    out.duration_s = graph.duration_s.copy() if out_s is None else out_s
    if out_s is not None:
        np.copyto(out_s, graph.duration_s)
    for kind, times in (("forward", fwd_s), ("backward", bwd_s)):
        rows = np.flatnonzero(graph.kind_id == graph.kinds.index(kind))
        out.duration_s[rows] = np.asarray(times, dtype=float)[graph.layer_id[rows]]
    return out
