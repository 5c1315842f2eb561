"""Gradient-communication schedulers: the scheduler decides, the engine times.

A scheduler is a small pure function from the gradient-bearing layers (their
ready times and sizes) and a communication cost to a `Plan`: which layers'
gradients travel together in one message, and in what order the messages go.
Layers without parameters send nothing and never appear in a plan.

Notation (Shi, Chu and Li, "MG-WFBP", INFOCOM 2019, Sec. III): layers are
numbered from input (0) to output (n-1); backward runs from n-1 down to 0.
``tau_b[l]`` is the backward start of layer l, ``t_b[l]`` its duration, so its
gradient is ready at ``r[l] = tau_b[l] + t_b[l]``; ``t_c`` is the all-reduce
time of a message and ``tau_c`` its start on the communication channel.

Adding a scheduler means one function and one entry in `SCHEDULERS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import numpy as np

from sim.comm import CommCost
from sim.core.plan import GradientLayers, Plan
from sim.errors import SimInputError

__all__ = [
    "DEFAULT_BUCKET_MB",
    "SCHEDULERS",
    "SCHEDULER_OPTIONS",
    "GradientLayers",
    "Plan",
    "SchedulerOptions",
    "bucket",
    "bytescheduler",
    "ddp",
    "dear",
    "horovod",
    "comm_end_s",
    "make_plan",
    "mgwfbp",
    "optimal",
    "sequential",
    "synceasgd",
    "wfbp",
]

DEFAULT_BUCKET_MB = 25.0
MIB = 1 << 20


def _help(text: str, **kw):
    return field(metadata={"help": text}, **kw)


@dataclass(frozen=True)
class SchedulerOptions:
    """Settings of the fusion, partitioning and parameter-server schedulers.

    Each field has its unit in its name; ``bucket_mb`` (for ``bucket`` and
    ``ddp``) stays a separate argument of `sim.simulate`, as before.
    """

    fusion_threshold_mb: float = _help(
        "Horovod fusion threshold in MiB (HOROVOD_FUSION_THRESHOLD; 0 disables fusion)", default=64.0)
    cycle_time_ms: float = _help("Horovod cycle time in ms (HOROVOD_CYCLE_TIME; 0: no wait)", default=1.0)
    first_bucket_mb: float = _help("PyTorch DDP's first bucket cap in MiB (_DEFAULT_FIRST_BUCKET_BYTES)",
                                   default=1.0)
    partition_bytes: int = _help("partition size in bytes (ByteScheduler; BytePS's 4,096,000)", default=4_096_000)
    credit: int = _help("partitions in flight at once (ByteScheduler's credit)", default=4)
    servers: int | None = _help("parameter servers S (default: as many as worker machines)", default=None)
    colocated: bool = _help("parameter servers on the worker machines instead of separate hosts", default=False)
    ps_link_efficiency: float = _help(
        "fraction of the network's effective rate that parameter-server push and pull reach (1: all of it)",
        default=1.0)

    def __post_init__(self) -> None:
        for name in ("fusion_threshold_mb", "cycle_time_ms", "first_bucket_mb"):
            value = getattr(self, name)
            unbounded_ok = name == "fusion_threshold_mb" and value == math.inf
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)) or not (
                    (math.isfinite(value) or unbounded_ok) and value >= 0):
                raise SimInputError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.first_bucket_mb == 0:
            raise SimInputError("first_bucket_mb must be > 0")
        for name in ("partition_bytes", "credit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise SimInputError(f"{name} must be a whole number >= 1, got {value!r}")
        if self.servers is not None and (isinstance(self.servers, bool) or not isinstance(self.servers, (int, np.integer))
                                         or self.servers < 1):
            raise SimInputError(f"servers must be a whole number >= 1, got {self.servers!r}")
        eff = self.ps_link_efficiency
        if isinstance(eff, bool) or not isinstance(eff, (int, float, np.floating, np.integer)) or not 0 < eff <= 1:
            raise SimInputError(f"ps_link_efficiency must be in (0, 1], got {eff!r}")
        if not isinstance(self.colocated, (bool, np.bool_)):
            raise SimInputError(f"colocated must be true or false, got {self.colocated!r}")

    @classmethod
    def of(cls, options) -> SchedulerOptions:
        """``options`` as given: None (defaults), a dict of fields or an instance."""
        if options is None:
            return cls()
        if isinstance(options, cls):
            return options
        if isinstance(options, dict):
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(options) - known)
            if unknown:
                raise SimInputError(f"unknown option(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}")
            return cls(**options)
        raise SimInputError(f"options must be a dict or SchedulerOptions, got {type(options).__name__}")


def _plan(name: str, grads: GradientLayers, spans: list[tuple[int, int]], after_backward: bool = False) -> Plan:
    """Turn spans of gradient positions [hi down to lo] into a plan of model indices."""
    groups = tuple(tuple(int(grads.index[i]) for i in range(hi, lo - 1, -1)) for hi, lo in spans)
    return Plan(name, groups, after_backward)


def comm_end_s(ready_s: np.ndarray, t_c_s: np.ndarray) -> np.ndarray:
    """End time of each message sent in order on one channel.

    ``end[g] = max(end[g-1], ready[g]) + t_c[g]``, the WFBP recurrence
    (MG-WFBP paper, Eq. 5), evaluated as a max-plus prefix scan:
    ``end = C + cummax(ready - C_prev)`` with ``C`` the cumulative sum of t_c.
    """
    c = np.cumsum(t_c_s)
    c_prev = c - t_c_s
    return c + np.maximum.accumulate(ready_s - c_prev)


def sequential(grads: GradientLayers, cost: CommCost) -> Plan:
    """No overlap: one message per layer, all sent after backward ends."""
    return _plan("sequential", grads, [(i, i) for i in range(grads.n - 1, -1, -1)], after_backward=True)


def wfbp(grads: GradientLayers, cost: CommCost) -> Plan:
    """Wait-free backpropagation: one message per layer, sent as soon as its
    gradient is ready; the channel serves messages in order.

    tau_c(l) = max(tau_c(l+1) + t_c(l+1), tau_b(l) + t_b(l))  (MG-WFBP, Eq. 5).
    """
    return _plan("wfbp", grads, [(i, i) for i in range(grads.n - 1, -1, -1)])


def synceasgd(grads: GradientLayers, cost: CommCost) -> Plan:
    """SyncEASGD: one message with every gradient, sent after backward ends."""
    return _plan("synceasgd", grads, [(grads.n - 1, 0)] if grads.n else [])


def mgwfbp(grads: GradientLayers, cost: CommCost) -> Plan:
    """Merged-gradient WFBP (Shi, Chu and Li, INFOCOM 2019, arXiv 1811.11141),
    with the merge rule of the authors' published implementation.

    Walk l from the last layer down to the second. Let r = tau_b(l-1) +
    t_b(l-1), when layer l-1's gradient is ready. If r < tau_c(l) + t_c(l),
    merge layer l into layer l-1 when either tau_c(l) > r (l would not start
    before l-1 is ready anyway) or r - tau_c(l) < alpha (waiting costs less
    than the start-up a merge saves). t_c and tau_c of the merged message are
    recomputed after each merge; messages already committed do not change, so
    one pass in O(n) suffices.
    """
    n = grads.n
    if n == 0:
        return Plan("mgwfbp", ())
    r = grads.ready_s
    spans: list[tuple[int, int]] = []
    prev_end = -np.inf
    hi = n - 1
    group_bytes = float(grads.nbytes[n - 1])
    for l in range(n - 1, 0, -1):
        tau_c = max(prev_end, r[l])  # the current message is ready once layer l is
        if cost.is_measured:  # a single-layer message takes its measured time
            t_c = cost.message_time_s(tuple(int(i) for i in grads.index[l : hi + 1]), group_bytes)
        else:
            t_c = float(cost.time_s(group_bytes))
        r_next = r[l - 1]
        if r_next < tau_c + t_c and (tau_c > r_next or r_next - tau_c < cost.alpha_s):
            group_bytes += float(grads.nbytes[l - 1])
        else:
            spans.append((hi, l))
            prev_end = tau_c + t_c
            hi = l - 1
            group_bytes = float(grads.nbytes[l - 1])
    spans.append((hi, 0))
    return _plan("mgwfbp", grads, spans)


def optimal(grads: GradientLayers, cost: CommCost) -> Plan:
    """The fastest grouping of consecutive layers into messages, exactly.

    Dynamic programming over prefixes in sending order (output layer first).
    With E[j] the earliest end of the first j+1 layers' messages, a message
    holding layers j..i (sending positions) ends at
    ``max(E[j-1], r_i) + T(bytes_j..i)``; that is non-decreasing in E[j-1],
    so the best prefix is part of the best whole, and
    ``E[i] = min_j max(E[j-1], r_i) + T(B_j..i)``. O(n^2) time, vectorised
    over j. Among equal ends it keeps the smaller last message (merges only
    where merging strictly helps).

    E is non-decreasing, and so are the ready times r. Every j with
    E[j-1] <= r_i gives r_i + T(B_j..i), which falls as j grows, so the
    search over j starts at the largest such j: the channel's backlog bounds
    the work, and a model whose messages hide behind backward costs O(n).
    """
    n = grads.n
    if n == 0:
        return Plan("optimal", ())
    r = grads.ready_s[::-1]  # sending order: output layer first, ready times non-decreasing
    b = grads.nbytes[::-1].astype(float)
    cum = np.concatenate(([0.0], np.cumsum(b)))
    choice = np.empty(n, dtype=np.int64)
    prev = np.empty(n)  # prev[j] = E[j-1], with E[-1] = -inf
    prev[0] = -np.inf
    prev_list, r_list = [-np.inf], r.tolist()
    # Trace-driven costs time single-layer messages by measurement, not by T(M):
    # the bound below then no longer holds, so the search covers every j.
    measured = cost.is_measured
    monotone = bool(np.all(np.diff(r) >= 0) and np.all(b >= 0)) and not measured
    lo = 0  # the largest j with E[j-1] <= r_i, when monotone
    for i in range(n):
        if monotone:
            while lo < i and prev_list[lo + 1] <= r_list[i]:
                lo += 1
        ends = np.maximum(prev[lo : i + 1], r[i]) + cost.time_s(cum[i + 1] - cum[lo : i + 1])
        if measured:  # the message of layer i alone
            ends[-1] = max(prev[i], r[i]) + cost.message_time_s((int(grads.index[n - 1 - i]),), b[i])
        k = ends.shape[0] - 1 - int(np.argmin(ends[::-1]))  # the largest j among the minima
        choice[i] = lo + k
        if i + 1 < n:
            prev[i + 1] = ends[k]
            prev_list.append(float(ends[k]))
    spans_send: list[tuple[int, int]] = []
    i = n - 1
    while i >= 0:
        j = int(choice[i])
        spans_send.append((j, i))
        i = j - 1
    spans_send.reverse()
    # sending positions j..i map to gradient positions n-1-j down to n-1-i
    return _plan("optimal", grads, [(n - 1 - j, n - 1 - i) for j, i in spans_send])


def bucket(grads: GradientLayers, cost: CommCost, bucket_mb: float = DEFAULT_BUCKET_MB) -> Plan:
    """Fixed-size buckets in gradient-ready order, as PyTorch DDP and Horovod
    tensor fusion do: gradients join the open bucket, which is sent once it
    holds at least ``bucket_mb`` MiB (2^20 bytes, as DDP's ``bucket_cap_mb``);
    the last bucket takes what is left.
    """
    if not (np.isfinite(bucket_mb) and bucket_mb > 0):
        raise SimInputError(f"bucket_mb must be > 0, got {bucket_mb}")
    return _plan("bucket", grads, _fill_buckets(grads, bucket_mb * MIB, bucket_mb * MIB))


def _fill_buckets(grads: GradientLayers, first_cap_bytes: float, cap_bytes: float) -> list[tuple[int, int]]:
    """Spans of gradient positions, in ready order: a gradient joins the open bucket,
    which closes once it holds at least its cap (the first bucket's cap may differ)."""
    spans: list[tuple[int, int]] = []
    cap, hi, filled = first_cap_bytes, grads.n - 1, 0.0
    for l in range(grads.n - 1, -1, -1):
        filled += float(grads.nbytes[l])
        if filled >= cap:
            spans.append((hi, l))
            cap, hi, filled = cap_bytes, l - 1, 0.0
    if hi >= 0:
        spans.append((hi, 0))
    return spans


def horovod(grads: GradientLayers, cost: CommCost, options: SchedulerOptions | None = None) -> Plan:
    """Horovod tensor fusion (Sergeev and Del Balso, arXiv 1802.05799; Horovod 0.19).

    Horovod's background thread wakes every cycle (``cycle_time_ms``, default
    1 ms) and packs the gradients that have become ready since the last tick,
    in ready order, into fusion buffers of at most ``fusion_threshold_mb`` MiB
    (default 64); a gradient larger than the threshold goes alone, and a
    threshold of 0 sends every gradient alone. Ticks fall at j x cycle from
    the start of backward, so a gradient ready at r waits for
    ``ceil(r / cycle) x cycle`` (``Plan.lag_s``). With a cycle of 0 a message
    leaves when its gradients are ready: threshold 0 is then `wfbp`, and an
    unbounded threshold with a cycle equal to the backward time is
    `synceasgd`.
    """
    opt = SchedulerOptions.of(options)
    cycle_s = opt.cycle_time_ms * 1e-3
    cap = opt.fusion_threshold_mb * MIB
    spans: list[tuple[int, int]] = []
    lags: list[float] = []
    hi, filled, tick_open = grads.n - 1, 0.0, None
    for l in range(grads.n - 1, -1, -1):
        r = float(grads.ready_s[l])
        tick = r if cycle_s == 0 else math.ceil(r / cycle_s - 1e-9) * cycle_s
        b = float(grads.nbytes[l])
        if tick_open is not None and (tick != tick_open or filled + b > cap):
            spans.append((hi, l + 1))
            lags.append(tick_open - float(grads.ready_s[l + 1]))
            hi, filled = l, 0.0
        tick_open = tick
        filled += b
    if grads.n:
        spans.append((hi, 0))
        lags.append(tick_open - float(grads.ready_s[0]))
    plan = _plan("horovod", grads, spans)
    return Plan("horovod", plan.groups, lag_s=tuple(max(x, 0.0) for x in lags))


def ddp(grads: GradientLayers, cost: CommCost, bucket_mb: float = DEFAULT_BUCKET_MB,
        options: SchedulerOptions | None = None) -> Plan:
    """PyTorch DDP's gradient buckets (Li et al., VLDB 2020; ``compute_bucket_assignment_by_size``).

    Parameters are assigned to buckets in reverse order (the order their
    gradients become ready); a bucket closes once it holds at least its cap:
    ``first_bucket_mb`` (1 MiB, ``dist._DEFAULT_FIRST_BUCKET_BYTES``) for the
    first, ``bucket_mb`` (``bucket_cap_mb``, 25 MiB) for the rest. A bucket's
    all-reduce starts when all its gradients are ready.
    """
    opt = SchedulerOptions.of(options)
    if not (np.isfinite(bucket_mb) and bucket_mb > 0):
        raise SimInputError(f"bucket_mb must be > 0, got {bucket_mb}")
    return _plan("ddp", grads, _fill_buckets(grads, opt.first_bucket_mb * MIB, bucket_mb * MIB))


def bytescheduler(grads: GradientLayers, cost: CommCost, options: SchedulerOptions | None = None) -> Plan:
    """ByteScheduler (Peng et al., SOSP 2019) and P3 (Jayarajan et al., MLSys 2019): priority with partitions.

    Every layer's gradient is cut into partitions of ``partition_bytes``;
    the channel always sends the ready partition of highest priority, the
    layer nearest the input first; at most ``credit`` partitions are in
    flight. Each layer is updated once its partitions are back, and the next
    iteration's forward of layer l starts as soon as layer l is updated, so
    communication overlaps the next forward as well as backward.
    """
    opt = SchedulerOptions.of(options)
    return Plan("bytescheduler", wfbp(grads, cost).groups, partition_bytes=int(opt.partition_bytes),
                priority="input_first", credit=int(opt.credit), per_layer_update=True)


def dear(grads: GradientLayers, cost: CommCost, options: SchedulerOptions | None = None) -> Plan:
    """DeAR (Zhang et al., "Decoupling the All-Reduce Primitive for Accelerating
    Distributed Deep Learning", arXiv 2302.12445): reduce-scatter with backward, all-gather with the next forward.

    Each layer's all-reduce is split into its two halves: the reduce-scatter
    is sent as the gradient is ready (WFBP order); the layer's shard is then
    updated, and the all-gather of the updated parameters runs during the next
    iteration's forward, layer 0 first, each just before the forward that
    needs it. Each half costs T(M) / 2 (exact for ring and halving-doubling).
    """
    return Plan("dear", wfbp(grads, cost).groups, per_layer_update=True, decoupled=True)


SCHEDULERS: dict[str, Callable[..., Plan]] = {
    "sequential": sequential,
    "wfbp": wfbp,
    "synceasgd": synceasgd,
    "mgwfbp": mgwfbp,
    "optimal": optimal,
    "bucket": bucket,
    "horovod": horovod,
    "ddp": ddp,
    "bytescheduler": bytescheduler,
    "dear": dear,
}

#: The `SchedulerOptions` fields (and ``bucket_mb``) each scheduler reads.
SCHEDULER_OPTIONS: dict[str, tuple[str, ...]] = {
    "bucket": ("bucket_mb",),
    "horovod": ("fusion_threshold_mb", "cycle_time_ms"),
    "ddp": ("bucket_mb", "first_bucket_mb"),
    "bytescheduler": ("partition_bytes", "credit"),
    "dear": (),
}


def make_plan(name: str, grads: GradientLayers, cost: CommCost, *, bucket_mb: float = DEFAULT_BUCKET_MB,
              options: SchedulerOptions | dict | None = None) -> Plan:
    """Run the scheduler called ``name``; an unknown name lists the valid ones."""
    if name not in SCHEDULERS:
        raise SimInputError(f"unknown scheduler {name!r}; valid: {', '.join(SCHEDULERS)}")
    if name == "bucket":
        return bucket(grads, cost, bucket_mb=bucket_mb)
    if name == "ddp":
        return ddp(grads, cost, bucket_mb=bucket_mb, options=options)
    if name in ("horovod", "bytescheduler", "dear"):
        return SCHEDULERS[name](grads, cost, options=options)
    SchedulerOptions.of(options)
    return SCHEDULERS[name](grads, cost)
