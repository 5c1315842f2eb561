"""The fast path: time the standard iteration from arrays, in O(layers).

`sim.dag.build_dag` always builds the same structure: io -> h2d -> a chain of
forward, backward and update on the compute stream, and one all-reduce per
message on the channel, released when its last gradient is ready. The engine
(`sim.engine.run_dag`) starts every task at the later of its predecessors'
ends and the end of the task before it on its resource. For this structure
that is, per iteration k (``N`` iterations, ``G`` messages):

* io:      starts at 0 (k = 0), at the end of io k-1 (prefetch) or at the end
           of update k-1 (no prefetch);
* h2d:     starts at max(end io k, end h2d k-1);
* compute: forward starts at max(end h2d k, end update k-1); forward and
           backward run back to back, so their ends are one running sum;
* channel: ``start[g] = max(end[g-1], ready[g])``, ``end[g] = start[g] +
           t_c[g]`` (MG-WFBP, Eq. 5), with ``ready[g]`` the end of the
           backward of the message's lowest layer plus the plan's ``lag_s``
           (no earlier than the end of backward when the plan holds messages
           until then); messages released out of plan order are served as
           the engine serves them, the released one first in plan order;
* update:  starts at max(end of backward, end of the last message).

Every start is the maximum of earlier ends and every end one addition, the
same operations the engine performs, so the task times here are bit-identical
to the engine's; the timeline built from them equals
`sim.core.timeline.graph_timeline` of the lowered graph. Everything is vectorised over K
communication costs that share one plan (rows of the arrays), so a sweep over
GPU counts or networks costs one pass per plan.

The DAG and the engine stay the reference and the independent check
(``tests/test_fast.py``); plans the channel recurrence does not describe
(messages out of ready order, overlapping or empty messages) are refused by
`supports`, and the caller falls back to the DAG.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from sim.checks import check_int
from sim.core.backward_stretch import backward_times_row
from sim.core.channel import chain_ends, channel
from sim.core.cost import NO_COMM, CommCost, PSCost
from sim.core.fast_columns import comm_columns, row_columns, static_columns, worker_columns
from sim.core.lower import WorkerTimes
from sim.core.overlap import hidden_s, time_order, wait_s
from sim.core.plan import Plan
from sim.core.scalar import LastRow, evaluate_row, row_phase_metrics
from sim.core.timeline import frame
from sim.errors import SimInputError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["FastRun", "Layout", "evaluate", "layout", "message_times_s", "single_gpu_iteration_s", "solved_row", "supports",
           "supports_cost"]

def supports(plan: Plan, cost, num_layers: int | None = None) -> bool:
    """True when the fast path times ``plan`` under ``cost`` exactly as the engine would.

    The plan must be plain (`Plan.is_plain`: whole messages, one update, a
    first-in-first-out channel; a ``lag_s`` is fine), each message non-empty,
    no layer sent twice, and either every message held until backward ends
    or each message's lowest layer below the previous message's. Then
    messages whose gradients are ready at the same instant reach the channel
    in plan order, as in the engine. The cost must be an all-reduce cost (a
    parameter server's push and pull need the engine). For backward
    compatibility ``supports(plan, num_layers)`` is accepted too.
    """
    if num_layers is None:
        cost, num_layers = None, cost
    if not plan.is_plain or isinstance(cost, PSCost):
        return False
    if not plan.groups:
        return True
    layers = plan.message_layers
    if layers.has_empty or layers.repeats or layers.flat.min() < 0 or layers.flat.max() >= num_layers:
        return False  # an empty message, a layer out of range or sent twice
    if plan.after_backward:
        return True
    low = layers.lowest
    return bool(low[0] < num_layers and np.all(low[1:] < low[:-1]))  # each message's lowest below the last's


def supports_cost(cost) -> bool:
    """True when the fast path times messages under ``cost`` (an all-reduce cost, not a parameter server's)."""
    return not isinstance(cost, PSCost)


@dataclass(frozen=True, eq=False)
class FastRun:
    """Task times of ``N`` iterations under K communication costs and one plan.

    Arrays are indexed ``[row, iteration, ...]``; backward arrays run in
    backward order (layer n-1 first), message arrays in plan order.
    """

    model: object
    groups: tuple[tuple[int, ...], ...]
    layer_bytes: np.ndarray
    group_bytes: np.ndarray
    io_start_s: np.ndarray
    io_end_s: np.ndarray
    h2d_start_s: np.ndarray
    h2d_end_s: np.ndarray
    fwd_start_s: np.ndarray
    fwd_end_s: np.ndarray
    bwd_end_s: np.ndarray
    update_start_s: np.ndarray
    update_end_s: np.ndarray
    comm_start_s: np.ndarray
    comm_end_s: np.ndarray
    #: a one-row run's last iteration as `sim.core.scalar.evaluate_row` recorded it (or None)
    last: LastRow | None = None
    #: each row's backward end per iteration (rows, iterations) when ``fwd_end_s``, ``bwd_end_s`` and the
    #: ``comm_*`` arrays keep only the first iterations (`evaluate`'s ``keep_iterations``); None: they keep all
    backward_done_s: np.ndarray | None = None

    @property
    def iterations(self) -> int:
        return self.update_end_s.shape[1]

    @property
    def kept_iterations(self) -> int:
        """The first iterations whose every task time is kept (the timeline can show them)."""
        return self.fwd_end_s.shape[1]

    def first(self, kept: int) -> FastRun:
        """This run keeping the per-layer times of its first ``kept`` iterations only (`evaluate`)."""
        if kept >= self.kept_iterations:
            return self
        return replace(self, fwd_end_s=self.fwd_end_s[:, :kept].copy(), bwd_end_s=self.bwd_end_s[:, :kept].copy(),
                       comm_start_s=self.comm_start_s[:, :kept].copy(), comm_end_s=self.comm_end_s[:, :kept].copy(),
                       backward_done_s=self.backward_end_s.copy())

    @property
    def backward_end_s(self) -> np.ndarray:
        """Each row's backward end per iteration (rows, iterations), kept or not."""
        return self.bwd_end_s[:, :, -1] if self.backward_done_s is None else self.backward_done_s

    @property
    def iteration_time_s(self) -> np.ndarray:
        """Steady-state iteration time per row: the period between the last two updates."""
        ends = self.update_end_s
        if ends.shape[1] >= 2:
            return ends[:, -1] - ends[:, -2]
        return ends[:, -1].copy()  # one iteration: the update ends last

    def phase_metrics(self) -> dict[str, np.ndarray]:
        """Compute and communication figures of the last iteration, per row.

        The same definitions as ``sim.api._phase_metrics`` on the timeline:
        durations are end - start; hidden communication is the overlap of the
        last iteration's messages with all compute, found as that function
        finds it (unions of touching intervals, overlaps summed in time order),
        so hidden and exposed time agree with it to the last bit.
        """
        if self.kept_iterations < self.iterations:
            raise SimInputError(f"this run kept the task times of its first {self.kept_iterations} iterations only: "
                                "time it without keep_iterations for its phase figures")
        got = None if self.last is None else row_phase_metrics(self.last)  # one row: on its floats
        if got is not None:
            return got
        fwd_start = np.concatenate([self.fwd_start_s[:, -1, None], self.fwd_end_s[:, -1, :-1]], axis=1)
        fwd_end = self.fwd_end_s[:, -1]
        bwd_end = self.bwd_end_s[:, -1]
        bwd_start = np.concatenate([fwd_end[:, -1:], bwd_end[:, :-1]], axis=1)
        forward = (fwd_end - fwd_start).sum(axis=1)
        backward = (bwd_end - bwd_start).sum(axis=1)
        update = self.update_end_s[:, -1] - self.update_start_s[:, -1]
        c_start, c_end = time_order(self.comm_start_s[:, -1], self.comm_end_s[:, -1])
        comm = np.ascontiguousarray(c_end - c_start).sum(axis=1)
        wait = wait_s(c_start, c_end, bwd_end[:, -1], self.update_start_s[:, -1])
        comm = comm + wait
        hidden = np.minimum(hidden_s(c_start, c_end, bwd_end[:, -1]), comm)
        return {
            "compute_s": forward + backward + update,
            "forward_s": forward,
            "backward_s": backward,
            "update_s": update,
            "io_s": self.io_end_s[:, -1] - self.io_start_s[:, -1],
            "h2d_s": self.h2d_end_s[:, -1] - self.h2d_start_s[:, -1],
            "comm_s": comm,
            "comm_hidden_s": hidden,
            "comm_exposed_s": np.maximum(comm - hidden, 0.0),
            "comm_wait_s": wait,
        }

    def timeline(self, row: int | None = 0, iterations: int | None = None, rename=None) -> pd.DataFrame:
        """The timeline of row ``row`` for the first ``iterations`` iterations.

        Equal to `sim.core.timeline.graph_timeline` of the lowered graph and the
        engine's times (same rows, order, names and dtypes). For a per-worker
        run, ``row=None`` gives every worker, the messages once (worker -1).
        ``rename`` (a function of a ``layer`` cell, e.g. `sim.tensors.layer_renamer`'s)
        gives the ``layer`` column's text.
        """
        n_it = self.iterations if iterations is None else min(iterations, self.iterations)
        if n_it > self.kept_iterations:
            raise SimInputError(f"this run kept the task times of its first {self.kept_iterations} iterations only "
                                f"(keep_iterations, timeline_iterations); its timeline of {n_it} cannot be built")
        rows = range(self.update_end_s.shape[0]) if row is None else [row]
        static = static_columns(tuple(self.model.layer_names), self.groups, self.layer_bytes, rename)
        if row is not None:
            return frame(row_columns(self, static, row, n_it, 0 if self.comm_start_s.shape[0] == 1 else row))
        parts = [worker_columns(self, static, r, n_it, True) for r in rows]
        parts.append(comm_columns(self, static, 0 if self.comm_start_s.shape[0] == 1 else rows[0], n_it, -1))
        return frame({key: np.concatenate([p[key] for p in parts]) for key in parts[0]})


def message_times_s(costs, groups, group_bytes: np.ndarray) -> np.ndarray:
    """All-reduce time of each message (columns) under each cost (rows).

    As the lowering takes them (`sim.core.lower`): a plain `CommCost` by its
    ``time_s`` over all messages at once (the same arithmetic as one by one);
    any other cost model (e.g. measured per-layer times) message by message
    through its ``step_time_s``.
    """
    times = np.empty((len(costs), len(groups)))
    if len(costs) > 1 and all(type(cost) is CommCost and not cost.regimes for cost in costs):
        # plain alpha-beta lines: ``alpha + beta M`` of every cost at once (the same product and sum)
        np.multiply(np.array([c.beta_s_per_byte for c in costs], dtype=float)[:, None],
                    np.asarray(group_bytes, dtype=float), out=times)
        times += np.array([c.alpha_s for c in costs], dtype=float)[:, None]
        return times
    for k, cost in enumerate(costs):
        if type(cost) is CommCost:  # its own time_s, over all messages at once
            times[k] = cost.time_s(group_bytes)
        else:
            times[k] = [cost.step_time_s("allreduce", members, int(b))
                        for members, b in zip(groups, group_bytes, strict=True)]
    return times


def evaluate(
    model,
    plan: Plan,
    costs,
    *,
    precision: str = "fp32",
    iterations: int = 2,
    prefetch: bool = False,
    times: WorkerTimes | None = None,
    compute_s: tuple[np.ndarray, np.ndarray] | None = None,
    prepared: Layout | None = None,
    keep_iterations: int | None = None,
) -> FastRun:
    """Time ``iterations`` iterations of ``model`` under ``plan``.

    Parameters
    ----------
    model : Model
        A model with compute times (`Model.timed`).
    plan : Plan
        Messages in sending order; ``Plan(name, ())`` for one GPU. Must pass `supports`.
    costs : CommCost or sequence of K CommCost
        The all-reduce cost of each row (see `message_times_s`); its ``comm_slowdown`` slows its
        messages during the backward pass (`sim.core.channel`).
    iterations : int
        Iterations to time, >= 1.
    prefetch : bool
        Let io and h2d of the next iteration overlap the current one.
    times : WorkerTimes, optional
        A per-worker run: one cost, and each row is a worker with its own
        compute times (`sim.core.lower.WorkerTimes`); a message is released
        when every worker's gradients are ready, so the channel is shared.
    compute_s : (forward, backward) arrays of shape (K, layers), optional
        Each row's own compute times (interference's), each row on its own channel.
    prepared : Layout, optional
        `layout` of the same model, plan, costs and precision, made once.
    keep_iterations : int, optional
        Keep the per-layer times of the first ``keep_iterations`` iterations only (their timeline), so
        that memory grows with them, not with ``iterations`` (`FastRun.backward_done_s`). Default: all.

    Returns
    -------
    FastRun
    """
    costs = [costs] if isinstance(costs, CommCost) else list(costs)
    group_bytes, lowest, t_c = prepared if prepared is not None else layout(model, plan, costs, precision)
    k1 = comm_k1(costs)
    kept = iterations if keep_iterations is None else min(check_int("keep_iterations", keep_iterations, 1), iterations)
    if times is None and t_c.shape[0] == 1:  # one row: the same recurrences on Python floats (small: cut after)
        return _one_row(model, plan, Layout(group_bytes, lowest, t_c), compute_s, precision, iterations, prefetch,
                        k1[0]).first(kept)
    work = _Work.of(model, times, len(costs), iterations) if compute_s is None else _Work.own(model, *compute_s)
    arrays = _Arrays(work.rows, iterations, model.num_layers, len(plan.groups), 1 if times is not None else work.rows,
                     kept)
    lag = np.asarray(plan.lag_s, dtype=float) if plan.lag_s else np.zeros(len(plan.groups))  # Horovod's ticks
    free = np.full(arrays.c_start.shape[0], -np.inf)  # when the channel is next free
    for k in range(iterations):
        arrays.compute(k, work, prefetch)
        free = arrays.communicate(k, work, plan, t_c, lag, model.num_layers - 1 - lowest, free, times is not None, k1)
    return arrays.result(model, plan.groups, model.gradient_bytes(precision), group_bytes)


class Layout(NamedTuple):
    """What `evaluate` needs of a plan under its costs, besides the compute times."""

    group_bytes: np.ndarray
    lowest: np.ndarray
    t_c_s: np.ndarray


def layout(model, plan: Plan, costs, precision: str = "fp32") -> Layout:
    """Each message's bytes and lowest layer, and its time under each cost (rows)."""
    costs = [costs] if isinstance(costs, CommCost) else list(costs)
    group_bytes, lowest = _message_layout(plan, model.gradient_bytes(precision))
    return Layout(group_bytes, lowest, message_times_s(costs, plan.groups, group_bytes))


def comm_k1(costs) -> np.ndarray:
    """``1 + comm_slowdown`` of each cost (`sim.core.channel.slowed_end`)."""
    return np.array([1.0 + float(getattr(c, "comm_slowdown", 0.0)) for c in costs])


def solved_row(model, plan: Plan, prepared: Layout, kappa: float, k1: float, precision: str, iterations: int,
               prefetch: bool) -> tuple[np.ndarray, np.ndarray, FastRun] | None:
    """`sim.core.run`'s interference on one row (``prepared``'s one cost: compute slowdown ``kappa``,
    ``k1 = 1 + comm_slowdown``), on Python floats throughout: the backward times it stretches the
    model's to, solved in one pass (`sim.core.backward_stretch.backward_times_row`, each message
    ``k1`` times slower while backward runs), and the run of them as `evaluate` times it (the same
    values); ``(forward (1, n), backward (1, n), FastRun)``, or None where the channel serves by
    priority (the caller iterates)."""
    bwd_rev = model.bwd_s[::-1].tolist()
    t_c, lag = prepared.t_c_s[0].tolist(), list(plan.lag_s) if plan.lag_s else None
    lowest_at = (model.num_layers - 1 - prepared.lowest).tolist()
    if t_c and not plan.after_backward:  # else no message runs beside a backward task
        slowed = t_c if k1 == 1.0 else (prepared.t_c_s[0] * k1).tolist()
        bwd_rev = backward_times_row(bwd_rev, slowed, lowest_at, lag, kappa)
        if bwd_rev is None:
            return None
    row = evaluate_row(model.fwd_s.tolist(), bwd_rev, float(model.io_s), float(model.h2d_s), float(model.update_s),
                       t_c, lowest_at, lag, plan.after_backward, iterations, prefetch, k1)
    run = FastRun(model, plan.groups, model.gradient_bytes(precision), prepared.group_bytes, **row)
    return np.tile(model.fwd_s, (1, 1)), np.array(bwd_rev[::-1], dtype=float)[None], run


def _one_row(model, plan: Plan, prepared: Layout, compute_s, precision: str, iterations: int,
             prefetch: bool, k1: float) -> FastRun:
    """`evaluate` of one row by `sim.core.scalar.evaluate_row`."""
    fwd, bwd = compute_s if compute_s is not None else (model.fwd_s[None], model.bwd_s[None])
    row = evaluate_row(fwd[0].tolist(), bwd[0, ::-1].tolist(), float(model.io_s), float(model.h2d_s),
                       float(model.update_s), prepared.t_c_s[0].tolist(),
                       (model.num_layers - 1 - prepared.lowest).tolist(),
                       list(plan.lag_s) if plan.lag_s else None, plan.after_backward,
                       iterations, prefetch, float(k1))
    return FastRun(model, plan.groups, model.gradient_bytes(precision), prepared.group_bytes, **row)


class _Arrays:
    """The task times being filled, iteration by iteration (see the module docstring)."""

    def __init__(self, rows: int, iterations: int, n: int, n_msg: int, channel_rows: int, kept: int):
        shape = (rows, iterations)
        self.io_start, self.io_end, self.h2d_start, self.h2d_end = (np.empty(shape) for _ in range(4))
        self.fwd_start, self.upd_start, self.upd_end = np.empty(shape), np.empty(shape), np.empty(shape)
        # the per-layer ends of the first ``kept`` iterations, and one slot the later ones reuse
        self.kept, slots = kept, kept + (kept < iterations)
        self.fwd_end, self.bwd_end = np.empty((rows, slots, n)), np.empty((rows, slots, n))
        self.bwd_done = np.empty(shape)
        self.c_start, self.c_end = np.empty((channel_rows, slots, n_msg)), np.empty((channel_rows, slots, n_msg))

    def result(self, model, groups, layer_bytes: np.ndarray, group_bytes: np.ndarray) -> FastRun:
        kept, cut = self.kept, self.kept < self.io_start.shape[1]
        return FastRun(model, groups, layer_bytes, group_bytes, self.io_start, self.io_end, self.h2d_start,
                       self.h2d_end, self.fwd_start, self.fwd_end[:, :kept], self.bwd_end[:, :kept], self.upd_start,
                       self.upd_end, self.c_start[:, :kept], self.c_end[:, :kept],
                       backward_done_s=self.bwd_done if cut else None)

    def compute(self, k: int, work: _Work, prefetch: bool) -> None:
        """io, h2d, forward and backward of iteration k."""
        if k == 0:
            self.io_start[:, 0] = 0.0
        elif prefetch:
            self.io_start[:, k] = self.io_end[:, k - 1]
        else:
            self.io_start[:, k] = np.maximum(self.upd_end[:, k - 1], self.io_end[:, k - 1])
        self.io_end[:, k] = self.io_start[:, k] + work.io_s
        self.h2d_start[:, k] = self.io_end[:, k] if k == 0 else np.maximum(self.io_end[:, k], self.h2d_end[:, k - 1])
        self.h2d_end[:, k] = self.h2d_start[:, k] + work.h2d_s
        self.fwd_start[:, k] = (self.h2d_end[:, k] if k == 0
                                else np.maximum(self.h2d_end[:, k], self.upd_end[:, k - 1]))
        s = min(k, self.kept)
        self.fwd_end[:, s] = chain_ends(self.fwd_start[:, k], *work.scaled(work.fwd, k))
        self.bwd_end[:, s] = chain_ends(self.fwd_end[:, s, -1], *work.scaled(work.bwd_rev, k))
        self.bwd_done[:, k] = self.bwd_end[:, s, -1]

    def communicate(self, k, work, plan, t_c, lag, lowest_at, free, shared: bool, k1: np.ndarray):
        """The messages and the update of iteration k; returns when the channel is next free
        (``k1``: each cost's ``1 + comm_slowdown``; a message slows while the backward pass runs)."""
        backward_done, s = self.bwd_done[:, k], min(k, self.kept)  # s: the slot of iteration k's task times
        if t_c.shape[1]:
            # released lag_s after the message's lowest layer (the last of its gradients) is ready
            ready, busy_until = self.bwd_end[:, s, lowest_at], backward_done
            if shared:  # every worker's gradients, on one shared channel (slowed while any worker computes):
                # the latest worker's, then its lag (adding is monotone: the same bits as the latest of the sums)
                ready, busy_until = ready.max(axis=0, keepdims=True), backward_done.max(keepdims=True)
            ready = ready + lag
            if plan.after_backward:
                ready = np.maximum(ready, busy_until[:, None])
            self.c_start[:, s], self.c_end[:, s] = channel(free, ready, t_c * work.comm_scale(k), busy_until, k1)
            free = self.c_end[:, s].max(axis=1)
            self.upd_start[:, k] = np.maximum(backward_done, free)
        else:
            self.upd_start[:, k] = backward_done
        self.upd_end[:, k] = self.upd_start[:, k] + work.update_s
        return free


def _message_layout(plan: Plan, layer_bytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each message's bytes and lowest layer."""
    if not plan.groups:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    layers = plan.message_layers
    lowest = np.minimum.reduceat(layers.flat, layers.offsets) if layers.lowest is None else layers.lowest
    return np.add.reduceat(layer_bytes[layers.flat], layers.offsets), lowest


@dataclass(frozen=True, eq=False)
class _Work:
    """Per-row compute durations: the same model on every row (K costs), or
    each worker's own (a per-worker run), as the lowering computes them."""

    rows: int
    io_s: np.ndarray | float
    h2d_s: np.ndarray | float
    update_s: np.ndarray | float
    fwd: np.ndarray  # (profiles, n)
    bwd_rev: np.ndarray
    profile_of: np.ndarray | None
    compute_scale: np.ndarray | None
    comm_scale_of: np.ndarray | None

    @classmethod
    def of(cls, model, times: WorkerTimes | None, rows: int, iterations: int) -> _Work:
        if times is None:
            return cls(rows, float(model.io_s), float(model.h2d_s), float(model.update_s), model.fwd_s,
                       model.bwd_s[::-1].copy(), None, None, None)
        models = times.models
        profile = np.asarray(times.profile_of)
        pick = np.array([[float(m.io_s), float(m.h2d_s), float(m.update_s)] for m in models])[profile]
        update = np.array([float(pick[w, 2]) * float(times.update_scale[w]) for w in range(len(profile))])
        return cls(len(profile), pick[:, 0], pick[:, 1], update, np.stack([m.fwd_s for m in models]),
                   np.stack([m.bwd_s[::-1] for m in models]), profile, np.asarray(times.compute_scale, float),
                   None if times.comm_scale is None else np.asarray(times.comm_scale, float))

    @classmethod
    def own(cls, model, fwd: np.ndarray, bwd: np.ndarray) -> _Work:
        """Each row's own forward and backward times (K, layers), the model's io, h2d and update."""
        return cls(fwd.shape[0], float(model.io_s), float(model.h2d_s), float(model.update_s), fwd, bwd[:, ::-1],
                   None, None, None)

    def scaled(self, times: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray | None]:
        """``(durations, scale)`` of iteration k for `chain_ends`: ``times`` (``fwd`` or ``bwd_rev``) as each
        row has them, and each row's compute factor (None: the times as they are). One profile is
        broadcast to every row rather than copied per row."""
        if self.profile_of is None:
            return times, None
        return times[0] if len(times) == 1 else times[self.profile_of], self.compute_scale[k]

    def comm_scale(self, k: int):
        return 1.0 if self.comm_scale_of is None else self.comm_scale_of[k][None, :]


def single_gpu_iteration_s(model, precision: str = "fp32", prefetch: bool = False) -> float:
    """Steady-state iteration time of ``model`` on one GPU (no communication)."""
    run = evaluate(model, Plan("", ()), NO_COMM, precision=precision, iterations=2, prefetch=prefetch)
    return float(run.iteration_time_s[0])
