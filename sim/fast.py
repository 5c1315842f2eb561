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
`sim.timeline.timeline_frame` of the DAG. Everything is vectorised over K
communication costs that share one plan (rows of the arrays), so a sweep over
GPU counts or networks costs one pass per plan.

The DAG and the engine stay the reference and the independent check
(``tests/test_fast.py``); plans the channel recurrence does not describe
(messages out of ready order, overlapping or empty messages) are refused by
`supports`, and the caller falls back to the DAG.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.comm import NO_COMM, CommCost
from sim.model import Model
from sim.schedulers import Plan
from sim.schedulers.names import WFBP
from sim.timeline import TIMELINE_COLUMNS

__all__ = ["FastRun", "evaluate", "message_times_s", "single_gpu_iteration_s", "supports"]

#: Above this many rows the channel recurrence steps through messages with
#: numpy over all rows; below it, plain floats row by row are faster.
_ROWS_FOR_NUMPY_SCAN = 8


def supports(plan: Plan, num_layers: int) -> bool:
    """True when the fast path times ``plan`` exactly as the engine would.

    The plan must be plain (`Plan.is_plain`: whole messages, one update, a
    first-in-first-out channel; a ``lag_s`` is fine), each message non-empty,
    no layer sent twice, and either every message held until backward ends
    or each message's lowest layer below the previous message's. Then
    messages whose gradients are ready at the same instant reach the channel
    in plan order, as in the engine. (A cost model other than all-reduce,
    such as parameter servers, is the caller's to refuse: see
    `sim.arch.needs_arch_dag`.)
    """
    if not plan.is_plain:
        return False
    seen: set[int] = set()
    prev_low = num_layers
    for members in plan.groups:
        if not members:
            return False
        for i in members:
            if not 0 <= i < num_layers or i in seen:
                return False
            seen.add(i)
        low = min(members)
        if not plan.after_backward and low >= prev_low:
            return False
        prev_low = low
    return True


def _chain_ends(start: np.ndarray, durations: np.ndarray) -> np.ndarray:
    """Ends of tasks run back to back from ``start`` (K,): ``end[i] = end[i-1] + d[i]``.

    A running sum that starts from ``start``, added in the same order as the
    engine adds, so the ends are the engine's to the last bit.
    """
    buf = np.empty((start.shape[0], durations.shape[0] + 1))
    buf[:, 0] = start
    buf[:, 1:] = durations
    return np.cumsum(buf, axis=1)[:, 1:]


def _channel(free_s: np.ndarray, ready_s: np.ndarray, t_c_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of each message on one channel, per row, in plan order.

    Messages released in plan order go in plan order: ``start[g] =
    max(end[g-1], ready[g])`` and ``end[g] = start[g] + t_c[g]`` with
    ``end[-1] = free_s``, the WFBP recurrence step by step (a prefix scan such
    as `sim.schedulers.comm_end_s` rounds differently). A row whose messages
    are released out of plan order (lags, as Horovod's ticks, can do that,
    if only by rounding) is served as the engine serves it: whenever the
    channel is free, the released message first in plan order.
    """
    rows, n_msg = ready_s.shape
    in_order = np.all(ready_s[:, 1:] >= ready_s[:, :-1], axis=1)
    start = np.empty((rows, n_msg))
    end = np.empty((rows, n_msg))
    if rows >= _ROWS_FOR_NUMPY_SCAN and in_order.all():
        e = free_s.copy()
        for g in range(n_msg):
            s = np.maximum(e, ready_s[:, g])
            e = s + t_c_s[:, g]
            start[:, g] = s
            end[:, g] = e
        return start, end
    for r in range(rows):
        ready, t_c = ready_s[r].tolist(), t_c_s[r].tolist()
        if in_order[r]:
            e = float(free_s[r])
            st, en = [], []
            for rd, tc in zip(ready, t_c, strict=True):
                s = rd if rd > e else e
                e = s + tc
                st.append(s)
                en.append(e)
            start[r], end[r] = st, en
        else:
            start[r], end[r] = _channel_by_priority(float(free_s[r]), ready, t_c)
    return start, end


def _channel_by_priority(free_s: float, ready_s: list[float], t_c_s: list[float]) -> tuple[list, list]:
    """One channel serving, whenever free, the released message first in plan order."""
    n_msg = len(ready_s)
    by_release = sorted(range(n_msg), key=lambda g: (ready_s[g], g))
    start, end = [0.0] * n_msg, [0.0] * n_msg
    waiting: list[int] = []
    t, nxt = free_s, 0
    for _ in range(n_msg):
        if not waiting:  # idle until the next release
            t = max(t, ready_s[by_release[nxt]])
        while nxt < n_msg and ready_s[by_release[nxt]] <= t:
            heapq.heappush(waiting, by_release[nxt])
            nxt += 1
        g = heapq.heappop(waiting)
        start[g] = t
        t = end[g] = t + t_c_s[g]
    return start, end


def _time_order(c_start: np.ndarray, c_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's messages in the timeline's order (start, end, then plan order)."""
    if np.all(c_start[:, 1:] >= c_start[:, :-1]) and np.all(c_end[:, 1:] >= c_end[:, :-1]):
        return c_start, c_end  # served in plan order
    plan_order = np.broadcast_to(np.arange(c_start.shape[1]), c_start.shape)
    order = np.lexsort((plan_order, c_end, c_start), axis=-1)
    return np.take_along_axis(c_start, order, axis=1), np.take_along_axis(c_end, order, axis=1)


@dataclass(frozen=True, eq=False)
class FastRun:
    """Task times of ``N`` iterations under K communication costs and one plan.

    Arrays are indexed ``[row, iteration, ...]``; backward arrays run in
    backward order (layer n-1 first), message arrays in plan order.
    """

    model: Model
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

    @property
    def iterations(self) -> int:
        return self.update_end_s.shape[1]

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
        fwd_start = np.concatenate([self.fwd_start_s[:, -1, None], self.fwd_end_s[:, -1, :-1]], axis=1)
        fwd_end = self.fwd_end_s[:, -1]
        bwd_end = self.bwd_end_s[:, -1]
        bwd_start = np.concatenate([fwd_end[:, -1:], bwd_end[:, :-1]], axis=1)
        forward = (fwd_end - fwd_start).sum(axis=1)
        backward = (bwd_end - bwd_start).sum(axis=1)
        update = self.update_end_s[:, -1] - self.update_start_s[:, -1]
        c_start, c_end = _time_order(self.comm_start_s[:, -1], self.comm_end_s[:, -1])
        comm = np.ascontiguousarray(c_end - c_start).sum(axis=1)
        hidden = np.minimum(_hidden_s(c_start, c_end, bwd_end[:, -1]), comm)
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
        }

    def timeline(self, row: int = 0, iterations: int | None = None) -> pd.DataFrame:
        """The timeline of row ``row`` for the first ``iterations`` iterations.

        Equal to ``sim.timeline.timeline_frame`` of the DAG and the engine's
        times (same rows, order, names and dtypes).
        """
        n_it = self.iterations if iterations is None else min(iterations, self.iterations)
        model = self.model
        n, n_msg = model.num_layers, len(self.groups)
        names = list(model.layer_names)
        group_of = {i: gi for gi, members in enumerate(self.groups) for i in members}
        labels = ["+".join(names[i] for i in members) for members in self.groups]
        layer_group = [group_of.get(i, -1) for i in range(n)]
        kinds = ["io", "h2d"] + ["forward"] * n + ["backward"] * n + ["update"] + ["comm"] * n_msg
        layers = ["", ""] + names + names[::-1] + [""] + labels
        tails = ["0", "0"] + names + names[::-1] + ["0"] + labels
        resources = ["io", "h2d"] + ["compute"] * (2 * n + 1) + ["comm"] * n_msg
        groups = [-1, -1] + layer_group + layer_group[::-1] + [-1] + list(range(n_msg))
        nbytes = np.concatenate(
            [np.zeros(2 + n, np.int64), self.layer_bytes[::-1], np.zeros(1, np.int64), self.group_bytes]
        )
        per_it = len(kinds)

        def times(arr):
            return arr[row, :n_it]

        fwd_end = times(self.fwd_end_s)
        bwd_end = times(self.bwd_end_s)
        start = np.concatenate(
            [
                times(self.io_start_s)[:, None], times(self.h2d_start_s)[:, None],
                times(self.fwd_start_s)[:, None], fwd_end[:, :-1], fwd_end[:, -1:], bwd_end[:, :-1],
                times(self.update_start_s)[:, None], times(self.comm_start_s),
            ],
            axis=1,
        ).ravel()
        end = np.concatenate(
            [
                times(self.io_end_s)[:, None], times(self.h2d_end_s)[:, None], fwd_end, bwd_end,
                times(self.update_end_s)[:, None], times(self.comm_end_s),
            ],
            axis=1,
        ).ravel()
        frame = pd.DataFrame(
            {
                "iteration": np.repeat(np.arange(n_it, dtype=np.int64), per_it),
                "kind": kinds * n_it,
                "name": [f"it{k}/{kind}/{tail}" for k in range(n_it) for kind, tail in zip(kinds, tails, strict=True)],
                "layer": layers * n_it,
                "group": np.tile(np.asarray(groups, dtype=np.int64), n_it),
                "resource": resources * n_it,
                "start_s": start,
                "end_s": end,
                "duration_s": end - start,
                "bytes": np.tile(nbytes, n_it),
            },
            columns=list(TIMELINE_COLUMNS),
        )
        frame = frame.sort_values(["start_s", "end_s", "iteration"], kind="stable").reset_index(drop=True)
        return frame.astype({"iteration": "int64", "group": "int64", "bytes": "int64"})


def _hidden_s(c_start: np.ndarray, c_end: np.ndarray, backward_end_s: np.ndarray) -> np.ndarray:
    """Overlap of each row's messages with compute, as `sim.timeline.interval_overlap_s` sums it.

    Messages of one iteration all start after its forward pass begins and end
    before its update starts, so of all compute they can only overlap the
    span from the start of the forward pass to the end of backward (merged
    with the update when that follows at once, which changes nothing before
    it). Touching messages merge into one busy period, as in that function's
    union; each period adds ``min(period end, backward end) - period start``
    when positive, summed one after another in time order.
    """
    rows, n_msg = c_start.shape
    if n_msg == 0:
        return np.zeros(rows)
    valid = c_end > c_start
    run_end = np.maximum.accumulate(np.where(valid, c_end, -np.inf), axis=1)
    before = np.concatenate([np.full((rows, 1), -np.inf), run_end[:, :-1]], axis=1)
    opens = valid & (c_start > before)
    # a busy period ends just before the next one opens (or at the last message)
    idx = np.arange(n_msg)
    next_open = np.minimum.accumulate(np.where(opens, idx, n_msg)[:, ::-1], axis=1)[:, ::-1]
    next_open = np.concatenate([next_open[:, 1:], np.full((rows, 1), n_msg)], axis=1)
    period_end = np.take_along_axis(run_end, next_open - 1, axis=1)
    hi = np.minimum(period_end, backward_end_s[:, None])
    piece = np.where(opens & (hi > c_start), hi - c_start, 0.0)
    return np.cumsum(piece, axis=1)[:, -1]


def message_times_s(costs, groups, group_bytes: np.ndarray) -> np.ndarray:
    """All-reduce time of each message (columns) under each cost (rows).

    As `sim.dag.build_dag` takes them: a plain `CommCost` is
    ``alpha_s + beta_s_per_byte * M`` (all rows at once); any other cost
    model (e.g. measured per-layer times) is asked message by message.
    """
    times = np.empty((len(costs), len(groups)))
    plain = [k for k, c in enumerate(costs) if type(c) is CommCost]
    if plain:
        alpha = np.array([costs[k].alpha_s for k in plain])
        beta = np.array([costs[k].beta_s_per_byte for k in plain])
        times[plain] = alpha[:, None] + beta[:, None] * group_bytes.astype(float)[None, :]
    for k, cost in enumerate(costs):
        if type(cost) is not CommCost:
            per_message = getattr(cost, "message_time_s", None)
            times[k] = [float(per_message(members, int(b)) if per_message else cost.time_s(int(b)))
                        for members, b in zip(groups, group_bytes, strict=True)]
    return times


def evaluate(
    model: Model,
    plan: Plan,
    costs,
    *,
    precision: str = "fp32",
    iterations: int = 2,
    prefetch: bool = False,
) -> FastRun:
    """Time ``iterations`` iterations of ``model`` under ``plan`` for K costs.

    Parameters
    ----------
    model : Model
        A model with compute times (`Model.timed`).
    plan : Plan
        Messages in sending order; ``Plan(name, ())`` for one GPU. Must pass
        `supports`.
    costs : CommCost or sequence of K CommCost
        The all-reduce cost of each row (see `message_times_s`).
    precision : {"fp32", "fp16"}
        Gradient width.
    iterations : int
        Iterations to time, >= 1.
    prefetch : bool
        Let io and h2d of the next iteration overlap the current one.

    Returns
    -------
    FastRun
    """
    costs = [costs] if isinstance(costs, CommCost) else list(costs)
    rows = len(costs)
    n = model.num_layers
    groups = plan.groups
    n_msg = len(groups)
    layer_bytes = model.gradient_bytes(precision)
    if n_msg:
        flat = np.fromiter((i for members in groups for i in members), dtype=np.int64)
        offsets = np.cumsum([0] + [len(m) for m in groups[:-1]])
        group_bytes = np.add.reduceat(layer_bytes[flat], offsets)
        lowest = np.minimum.reduceat(flat, offsets)
    else:
        group_bytes = np.zeros(0, np.int64)
        lowest = np.zeros(0, np.int64)
    # backward arrays run from layer n-1 down to 0: layer i sits at n-1-i
    lowest_at = n - 1 - lowest
    t_c = message_times_s(costs, groups, group_bytes)
    lag = np.asarray(plan.lag_s, dtype=float) if plan.lag_s else np.zeros(n_msg)  # Horovod's wait for a tick
    fwd, bwd_rev = model.fwd_s, model.bwd_s[::-1].copy()
    io_s, h2d_s, update_s = float(model.io_s), float(model.h2d_s), float(model.update_s)

    shape = (rows, iterations)
    io_start, io_end = np.empty(shape), np.empty(shape)
    h2d_start, h2d_end = np.empty(shape), np.empty(shape)
    fwd_start, upd_start, upd_end = np.empty(shape), np.empty(shape), np.empty(shape)
    fwd_end, bwd_end = np.empty(shape + (n,)), np.empty(shape + (n,))
    c_start, c_end = np.empty(shape + (n_msg,)), np.empty(shape + (n_msg,))

    free = np.full(rows, -np.inf)  # when the channel is next free
    for k in range(iterations):
        if k == 0:
            io_start[:, 0] = 0.0
        elif prefetch:
            io_start[:, k] = io_end[:, k - 1]
        else:
            io_start[:, k] = np.maximum(upd_end[:, k - 1], io_end[:, k - 1])
        io_end[:, k] = io_start[:, k] + io_s
        h2d_start[:, k] = io_end[:, k] if k == 0 else np.maximum(io_end[:, k], h2d_end[:, k - 1])
        h2d_end[:, k] = h2d_start[:, k] + h2d_s
        fwd_start[:, k] = h2d_end[:, k] if k == 0 else np.maximum(h2d_end[:, k], upd_end[:, k - 1])
        fwd_end[:, k] = _chain_ends(fwd_start[:, k], fwd)
        bwd_end[:, k] = _chain_ends(fwd_end[:, k, -1], bwd_rev)
        backward_done = bwd_end[:, k, -1]
        if n_msg:
            # released lag_s after the message's lowest layer (the last of its gradients) is ready
            ready = bwd_end[:, k, lowest_at] + lag
            if plan.after_backward:
                ready = np.maximum(ready, backward_done[:, None])
            c_start[:, k], c_end[:, k] = _channel(free, ready, t_c)
            free = c_end[:, k].max(axis=1)
            upd_start[:, k] = np.maximum(backward_done, free)
        else:
            upd_start[:, k] = backward_done
        upd_end[:, k] = upd_start[:, k] + update_s
    return FastRun(
        model, groups, layer_bytes, group_bytes, io_start, io_end, h2d_start, h2d_end,
        fwd_start, fwd_end, bwd_end, upd_start, upd_end, c_start, c_end,
    )


def single_gpu_iteration_s(model: Model, precision: str = "fp32", prefetch: bool = False) -> float:
    """Steady-state iteration time of ``model`` on one GPU (no communication)."""
    run = evaluate(model, Plan(WFBP, ()), NO_COMM, precision=precision, iterations=2, prefetch=prefetch)
    return float(run.iteration_time_s[0])
