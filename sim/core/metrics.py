"""The one metrics builder: every figure of a run, with the same keys everywhere.

`METRIC_KEYS` are the keys of ``SimResult.metrics``, of ``run --format
json``, of every `sim.sweep` row and of the dashboard's tables.

Definitions (Shi et al., ICPADS 2018; hidden and exposed as HTA reports them):

* ``iteration_time_s``: the steady-state period, between the updates of the
  last two iterations; with per-layer updates (several per iteration),
  between the last update of each, averaged over `PIPELINED_WINDOW`
  iterations that each have a next iteration (the very last has no next
  forward pass to share the GPU with, so its updates would run early).
* phase figures come from one reference iteration: the last one, or with
  per-layer updates the one before it, whose communication overlaps the next
  iteration's forward pass as it does in the steady state.
  ``comm_s`` is the time communication is under way (the sum of its tasks on
  one lane; the union of their intervals when push and pull run on two lanes
  at once); ``comm_hidden_s`` the part of it during which the GPU computes;
  ``comm_exposed_s = comm_s - comm_hidden_s``. ``comm_s`` includes
  ``comm_wait_s``: after the backward pass, time the GPU waits for its
  update with no message on the wire (a message held for Horovod's
  negotiation tick). No kernel runs then, yet the step waits on
  communication, as an all-reduce waiting for its peers counts as
  communication in a GPU trace; so with identical workers
  ``compute_s + comm_exposed_s`` is the iteration, I/O and copies aside.
* ``speedup = P * T_1 / T_P``, ``scaling_efficiency = T_1 / T_P``,
  ``throughput_samples_per_s = batch * P / T_P``.
"""

from __future__ import annotations

import numpy as np

from sim.core.intervals import joined, joined_overlap_s
from sim.core.taskgraph import KINDS
from sim.core.timeline import COMPUTE_KINDS

__all__ = [
    "METRIC_KEYS", "PHASE_KEYS", "PIPELINED_ITERATIONS", "PIPELINED_WINDOW", "busy_after_backward", "graph_figures",
    "rates", "steady_iteration_s",
]

METRIC_KEYS = (
    "model", "scheduler", "gpus", "gpus_per_node", "nodes", "batch_size", "precision",
    "network", "intra", "collective", "alpha_s", "beta_s_per_byte",
    "iteration_time_s", "throughput_samples_per_s",
    "compute_s", "forward_s", "backward_s", "update_s", "io_s", "h2d_s",
    "comm_s", "comm_hidden_s", "comm_exposed_s", "comm_wait_s",
    "single_gpu_iteration_time_s", "speedup", "scaling_efficiency",
    "num_messages", "groups", "framework", "interference_s", "params", "gradients",
)
PHASE_KEYS = ("compute_s", "forward_s", "backward_s", "update_s", "io_s", "h2d_s",
              "comm_s", "comm_hidden_s", "comm_exposed_s", "comm_wait_s")
#: Iterations timed when layers are updated one by one and the next forward
#: overlaps communication: the period settles after the first iteration. Five
#: give the period of eight and of sixteen to 2e-12 (relative) on 336 runs of
#: bytescheduler, dear and the ByteScheduler methods (7 zoo models, 4 networks,
#: 4-64 GPUs; `tests/test_engine_paths.py` keeps checking it on random models).
PIPELINED_ITERATIONS = 5
#: ... and the period is averaged over this many of the iterations that have a
#: next one, after the first (whose period still holds the start-up): two, the
#: mean of a cycle of period 2 of the max-plus system as well as of period 1.
PIPELINED_WINDOW = 2


def iterations_to_run(plan, iterations: int) -> int:
    """Iterations the engine times so that the steady state is reached."""
    return max(iterations, PIPELINED_ITERATIONS if plan.per_layer_update else 2)


def steady_iteration_s(update_ends_s: np.ndarray, pipelined: bool) -> float:
    """The steady-state period from each iteration's last update end (in order)."""
    ends = np.asarray(update_ends_s, dtype=float)
    if len(ends) < 2:
        return float(ends[-1])
    if not pipelined:
        return float(ends[-1] - ends[-2])
    # the last iteration has no next forward pass to share the GPU with, so its
    # updates run early: measure over the iterations before it
    if len(ends) >= 3:
        ends = ends[:-1]
    w = min(PIPELINED_WINDOW, len(ends) - 1)
    return float((ends[-1] - ends[-1 - w]) / w)


#: An iteration shorter than the one-GPU iteration by less than this (relative) is rounding: the
#: two are sums of the same durations in different orders, and the efficiency is reported as 1.
ROUNDING_RTOL = 1e-12


def rates(batch_size, gpus, iteration_time_s, single_gpu_iteration_s) -> dict:
    """Throughput, speedup and efficiency (scalars or arrays alike).

    Where all communication hides, T_P equals T_1 up to the rounding of two
    summation orders; an efficiency above 1 by less than `ROUNDING_RTOL` is
    that rounding and is reported as exactly 1 (anything more is left as it
    is, for the invariants to catch).
    """
    efficiency = single_gpu_iteration_s / iteration_time_s
    efficiency = np.where((efficiency > 1) & (efficiency <= 1 + ROUNDING_RTOL), 1.0, efficiency)
    if np.ndim(efficiency) == 0:
        efficiency = float(efficiency)
    return {
        "throughput_samples_per_s": batch_size * gpus / iteration_time_s,
        "single_gpu_iteration_time_s": single_gpu_iteration_s,
        "speedup": gpus * efficiency,
        "scaling_efficiency": efficiency,
    }


def _sum(values) -> float:
    return float(np.sum(np.asarray(values, dtype=float))) if len(values) else 0.0


def graph_figures(graph, start: np.ndarray, end: np.ndarray, pipelined: bool, worker: int = 0) -> tuple[float, dict]:
    """Iteration time and phase figures of one worker of an engine run (a `sim.core.taskgraph.TaskGraph`)."""
    graph.finish()
    kinds, iters, workers = graph.kind_id, graph.iteration, graph.worker
    start, end = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    last = int(iters.max())
    update_end = np.full(last + 1, -np.inf)
    mine = workers == worker
    updates = (kinds == KINDS.index("update")) & mine
    np.maximum.at(update_end, iters[updates], end[updates])
    # no update at all (a per-layer plan of a model without parameters): the makespan, as before
    t_iter = steady_iteration_s(update_end, pipelined) if np.isfinite(update_end).all() else float(np.max(end))
    ref = last - 1 if (pipelined and last >= 1) else last
    in_ref = (iters == ref) & (mine | (workers == -1))
    ref_tasks = np.flatnonzero(in_ref)  # (the same durations, in the same order, as masks over every task)
    ref_kinds, ref_dur = kinds[ref_tasks], end[ref_tasks] - start[ref_tasks]
    dur = {KINDS[k]: ref_dur[ref_kinds == k] for k in np.unique(ref_kinds).tolist()}
    comm = np.flatnonzero(in_ref & (kinds == KINDS.index("comm")))
    lanes = graph.resource[comm]
    c_start, c_end = start[comm], end[comm]
    c_joined = joined(c_start, c_end)  # (`sim.core.intervals.overlap_s` of each set with them, one union)
    comm_s = _sum(dur.get("comm", []))
    if np.any(lanes != lanes[:1]):  # push and pull at once: the time communication is under way
        comm_s = joined_overlap_s(c_joined, c_joined)
    # compute anywhere (any iteration); what lies wholly outside the span of communication adds nothing
    compute = np.isin(kinds, [KINDS.index(k) for k in COMPUTE_KINDS]) & mine
    if len(comm):
        compute &= (end >= c_start.min()) & (start <= c_end.max())
    compute = np.flatnonzero(compute)
    wait = 0.0 if pipelined else _wait_s(kinds, in_ref & mine, start, end, c_joined)
    comm_s += wait
    hidden = min(joined_overlap_s(c_joined, joined(start[compute], end[compute])), comm_s)
    by_kind = {k: _sum(v) for k, v in dur.items()}
    return t_iter, {
        "compute_s": float(sum(by_kind.get(k, 0.0) for k in COMPUTE_KINDS)),
        "forward_s": by_kind.get("forward", 0.0),
        "backward_s": by_kind.get("backward", 0.0),
        "update_s": by_kind.get("update", 0.0),
        "io_s": by_kind.get("io", 0.0),
        "h2d_s": by_kind.get("h2d", 0.0),
        "comm_s": comm_s,
        "comm_hidden_s": hidden,
        "comm_exposed_s": max(comm_s - hidden, 0.0),
        "comm_wait_s": wait,
    }


def _wait_s(kinds, mine_in_ref, start, end, c_joined) -> float:
    """The reference iteration's span from the end of backward to the update's start with
    no message on the wire (`sim.core.overlap.wait_s`, for the general engine)."""
    backward = mine_in_ref & (kinds == KINDS.index("backward"))
    update = mine_in_ref & (kinds == KINDS.index("update"))
    if not backward.any() or not update.any():
        return 0.0
    after, until = float(end[backward].max()), float(start[update].min())
    if until <= after:
        return 0.0
    return max((until - after) - joined_overlap_s(c_joined, joined([after], [until])), 0.0)


def busy_after_backward(graph, start, end, backward_end: np.ndarray, update_end: np.ndarray) -> np.ndarray:
    """Per (iteration k, worker w): the time worker w computes between the end of its backward pass k and
    the end of its step k (its last update): updates of iteration k and forwards of iteration k + 1 alike,
    so that the rest of that span is the time it waits."""
    kind = np.asarray(graph.kind_id)
    mine = np.flatnonzero(np.isin(kind, [KINDS.index("forward"), KINDS.index("update")]) & (graph.worker >= 0))
    it, w = np.asarray(graph.iteration)[mine], np.asarray(graph.worker)[mine]
    s, e = np.asarray(start, float)[mine], np.asarray(end, float)[mine]
    busy = np.zeros(update_end.shape)
    for back in (0, 1):  # an update of iteration k, a forward of iteration k + 1
        k = it - back
        ok = (k >= 0) & (k < busy.shape[0])
        lo, hi = backward_end[k[ok], w[ok]], update_end[k[ok], w[ok]]
        piece = np.minimum(e[ok], hi) - np.maximum(s[ok], lo)
        np.add.at(busy, (k[ok], w[ok]), np.maximum(piece, 0.0))
    return busy
