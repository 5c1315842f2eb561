"""Interference: compute slows while communication runs beside it.

A collective overlapping the backward pass shares the GPU with it: NCCL's
kernels take streaming multiprocessors and memory bandwidth, and over TCP
the data are staged through host memory across PCIe. Measured, the
overlapped compute kernels run longer (Rashidi et al., "Enabling
Compute-Communication Overlap in Distributed Deep Learning Training
Platforms", ISCA 2021, Sec. 3; Jangda et al., "Breaking the Computation and
Communication Abstraction Barrier in Distributed Machine Learning
Workloads", ASPLOS 2022, Sec. 2). The model: a compute task (forward or
backward of one layer) of which a fraction ``f`` overlaps communication on
its worker takes ``(1 + kappa f)`` times as long, with ``kappa`` the
``compute_slowdown`` of the link the run's messages cross
(``data/interference.csv``).

The stretch and the schedule depend on each other (a longer backward moves
the messages), so `fixed_point` solves ``x = b (1 + kappa c(x) / x)`` for
every task (``b`` its unstretched time, ``c`` the part of it communication
covers): time the run, read each task's covered length and whether
communication still runs at its end, and solve the quadratic that holds
if that stays so (`stretch`: exact for a task fully covered, one that a
message leaves early, or one it reaches late); time again, until no time
moves by more than `TOLERANCE`, at most `PASSES` rounds. The timeline of the
last round shows the stretched bars; ``interference_s`` is the compute time
they added. Where the fast path's structure holds, `sim.core.backward_stretch`
reaches the same fixed point exactly in one pass, task by task, and these
rounds serve the rest.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import NamedTuple

import numpy as np

from sim.core.intervals import covered_at, covered_before, union
from sim.core.lower import COMPUTE_LANES, LAUNCH_LANE

__all__ = ["COMPUTE_KINDS", "PASSES", "TOLERANCE", "CommFactors", "CommOverlap", "GraphOverlap", "Overlap", "comm_mask",
           "comm_stretch", "fast_overlap", "fast_overlap_fractions", "fixed_point", "key_positions", "message_keys",
           "overlap_fractions", "per_layer", "stretch", "stretched_like", "stretched_model", "task_overlap", "timeline_overlap", "with_times"]

#: Lanes whose tasks do not slow compute: the worker's own, and the framework's launches on the host.
_NOT_INTERFERING = COMPUTE_LANES + (LAUNCH_LANE,)

#: Fixed-point rounds at most (each a full timing of the run).
PASSES = 3
#: A round that moves no compute time by more than this share of the row's longest
#: one has reached the fixed point.
TOLERANCE = 1e-12
COMPUTE_KINDS = ("forward", "backward")


class Overlap(NamedTuple):
    """Per row and layer: how long communication covers each forward and backward
    task, and whether it still runs when the task ends (shape (rows, layers))."""

    fwd_covered_s: np.ndarray
    bwd_covered_s: np.ndarray
    fwd_end_covered: np.ndarray
    bwd_end_covered: np.ndarray
    fwd_s: np.ndarray | None = None  # each task's duration in the run
    bwd_s: np.ndarray | None = None

    def fractions(self) -> tuple[np.ndarray, np.ndarray]:
        """The covered share of each forward and backward task (0 for a task that takes no time)."""
        def share(covered, duration):
            return np.divide(covered, duration, out=np.zeros_like(covered), where=duration > 0)

        return share(self.fwd_covered_s, self.fwd_s), share(self.bwd_covered_s, self.bwd_s)


def task_overlap(start: np.ndarray, end: np.ndarray, busy: tuple[np.ndarray, np.ndarray]):
    """For tasks [start, end) and the disjoint sorted ``busy`` intervals: how long busy
    covers each task, and whether busy runs at its end, begun before it (a message that
    begins at a task's end may be the one the task releases)."""
    if not len(busy[0]):
        return np.clip(covered_before(*busy, end) - covered_before(*busy, start), 0.0, end - start), np.zeros(
            len(end), bool)
    b_start, b_end = busy
    length = b_end - b_start
    cum = np.r_[0.0, np.cumsum(length)]  # (`covered_before` twice, its running length once)
    before_end, i = covered_at(b_start, length, cum, end)
    covered = np.clip(before_end - covered_at(b_start, length, cum, start)[0], 0.0, end - start)
    if np.all(b_start[1:] > b_start[:-1]):  # the last interval begun before each end: i, or the one before i
        at = i - ((i >= 0) & (b_start[np.clip(i, 0, None)] == end))
    else:
        at = np.searchsorted(b_start, end, side="left") - 1
    return covered, (at >= 0) & (end < b_end[np.clip(at, 0, None)])


def timeline_overlap(timeline, layer_names, iteration: int) -> Overlap:
    """The `Overlap` of worker 0's compute in ``iteration`` of a timeline (one row),
    with communication on any lane in that iteration and the two beside it."""
    it = timeline["iteration"].to_numpy()
    lane = timeline["lane"].to_numpy()
    kind = timeline["kind"].to_numpy()
    start, end = timeline["start_s"].to_numpy(dtype=float), timeline["end_s"].to_numpy(dtype=float)
    near = np.abs(it - iteration) <= 1
    is_comm = near & ~np.isin(lane, _NOT_INTERFERING)
    busy = union(start[is_comm], end[is_comm])
    mine = (it == iteration) & (timeline["worker"].to_numpy() == 0)
    index = {name: i for i, name in enumerate(layer_names)}
    layers = timeline["layer"].to_numpy()
    out = []
    for k in COMPUTE_KINDS:
        rows = np.flatnonzero(mine & (kind == k))
        idx = np.fromiter((index.get(str(n), -1) for n in layers[rows]), dtype=np.int64, count=len(rows))
        out += per_layer(idx, start[rows], end[rows], busy, len(layer_names))
    return Overlap(out[0], out[3], out[1], out[4], out[2], out[5])


def per_layer(idx: np.ndarray, start: np.ndarray, end: np.ndarray, busy, n: int) -> list[np.ndarray]:
    """`task_overlap` of tasks of layers ``idx`` (-1: none of the n), as (1, n) arrays:
    covered time, end covered, duration."""
    covered, at_end, duration = np.zeros(n), np.zeros(n, bool), np.zeros(n)
    keep = idx >= 0
    covered[idx[keep]], at_end[idx[keep]] = task_overlap(start[keep], end[keep], busy)
    duration[idx[keep]] = end[keep] - start[keep]
    return [covered[None], at_end[None], duration[None]]


class GraphOverlap:
    """`timeline_overlap` of a task graph's timeline from its arrays (the same rows, so the same figures),
    round after round: which tasks it reads is found once, each round only reads their times
    (`sim.core.timeline.graph_overlap` is one round of it)."""

    def __init__(self, graph, layer_names, iteration: int) -> None:
        graph.finish()
        near = (graph.iteration >= iteration - 1) & (graph.iteration <= iteration + 1)
        # communication on any channel, this iteration or beside
        self.comm = np.flatnonzero(near & comm_mask(graph))
        to_layer = _layer_places(graph.layer_names, layer_names)
        worker0 = (graph.iteration == iteration) & (graph.worker == 0)
        self.layers = len(layer_names)
        self.tasks = []
        for kind in COMPUTE_KINDS:
            rows = np.flatnonzero(worker0 & (graph.kind_id == graph.kinds.index(kind)))
            self.tasks.append((rows, to_layer[graph.layer_id[rows]]))

    def __call__(self, start: np.ndarray, end: np.ndarray) -> Overlap:
        begin = start[self.comm]
        if np.any(begin[1:] < begin[:-1]):  # kept in the order they start: the next round's sorts have little to do
            by_start = np.argsort(begin, kind="stable")
            self.comm, begin = self.comm[by_start], begin[by_start]
        busy = union(begin, end[self.comm])  # (the same union in any order)
        got = [per_layer(idx, start[rows], end[rows], busy, self.layers) for rows, idx in self.tasks]
        (fwd_c, fwd_e, fwd_d), (bwd_c, bwd_e, bwd_d) = got
        return Overlap(fwd_c, bwd_c, fwd_e, bwd_e, fwd_d, bwd_d)


def _layer_places(graph_names, layer_names) -> np.ndarray:
    """Per layer of a graph, its place among ``layer_names`` by name (-1: none there), then -1 (a task of no
    layer): the places themselves where the graph's are those names (distinct strings, in that order)."""
    names = tuple(layer_names)
    if graph_names == names and all(type(name) is str for name in names) and len(set(names)) == len(names):
        return np.append(np.arange(len(names), dtype=np.int64), -1)
    place = {name: i for i, name in enumerate(names)}
    return np.array([place.get(str(name), -1) for name in graph_names] + [-1], dtype=np.int64)


class CommOverlap:
    """A task graph's messages (every task on a communication lane) as `comm_stretch` reads them:
    for those of the reference ``iteration``, how long compute (any worker's forward or backward)
    covers each and whether it still runs at the message's end; and each message task's key (its
    kind, message and part), so that the factor a message of the reference iteration is slowed by
    applies to that message in every iteration, and in another graph of the same plan (a per-worker
    run), as the compute stretch's per-layer times do."""

    def __init__(self, graph, iteration: int) -> None:
        graph.finish()
        # (in numpy's index type: they index arrays every round, an int32 index would convert itself each time)
        self.comm = np.flatnonzero(comm_mask(graph))
        kinds = [graph.kinds.index(k) for k in COMPUTE_KINDS if k in graph.kinds]
        self.compute = np.flatnonzero(np.isin(graph.kind_id, kinds))
        self.base_s = graph.duration_s[self.comm]
        key = message_keys(graph, self.comm)
        self.ref = np.flatnonzero(graph.iteration[self.comm] == iteration)  # positions in ``comm``
        self.keys, self.ref_key = np.unique(key[self.ref], return_inverse=True)
        self.at_key = key_positions(self.keys, key)

    def __call__(self, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Covered time and end-covered of the reference iteration's message tasks."""
        begin = start[self.compute]
        if np.any(begin[1:] < begin[:-1]):  # kept in the order they start: the next round's sorts have little to do
            by_start = np.argsort(begin, kind="stable")
            self.compute, begin = self.compute[by_start], begin[by_start]
        busy = union(begin, end[self.compute])
        ref = self.comm[self.ref]
        return task_overlap(start[ref], end[ref], busy)

    def factors(self, ref_s: np.ndarray) -> CommFactors:
        """Per key, the factor the reference iteration's times ``ref_s`` slow its base time by."""
        base = self.base_s[self.ref]
        factor = np.divide(ref_s, base, out=np.ones_like(base), where=base > 0)
        per_key = np.ones(len(self.keys))
        np.maximum.at(per_key, self.ref_key, factor)
        return CommFactors(self.keys, per_key)

    def durations(self, factors: CommFactors) -> np.ndarray:
        """Every message task's time under ``factors`` (a task whose key the reference iteration
        lacks keeps its base time)."""
        out = factors.of(self.at_key)
        out *= self.base_s
        return out


class CommFactors(NamedTuple):
    """Per message key (`message_keys`, sorted), the factor its time is slowed by."""

    keys: np.ndarray
    factor: np.ndarray

    def of(self, at_key: np.ndarray) -> np.ndarray:
        """The factor at each of `key_positions`' positions (1 where a key is not here)."""
        return np.append(self.factor, 1.0)[at_key]

    def apply(self, graph):
        """A copy of ``graph`` whose message tasks take their base time times their key's factor."""
        graph.finish()
        out = copy.copy(graph)
        out.duration_s = graph.duration_s.copy()
        comm = np.flatnonzero(comm_mask(graph))
        out.duration_s[comm] *= self.of(key_positions(self.keys, message_keys(graph, comm)))
        return out


def comm_mask(graph) -> np.ndarray:
    """Which of a (finished) graph's tasks are communication that interferes: on a lane other than a
    worker's own and the framework's launches."""
    shared = np.array([lane not in _NOT_INTERFERING for _, lane in graph.resources] or [False])
    return shared[graph.resource]


def key_positions(keys: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Where each of ``key`` sits in the sorted ``keys``, or ``len(keys)`` where it is not there (without
    a search where ``key`` is ``keys`` again and again: every iteration's messages, as the reference's)."""
    count = len(keys)
    if count and len(key) % count == 0 and np.array_equal(key.reshape(-1, count), np.broadcast_to(
            keys, (len(key) // count, count))):
        return np.tile(np.arange(count, dtype=np.int32), len(key) // count)
    at = np.minimum(np.searchsorted(keys, key), max(len(keys) - 1, 0))
    found = keys[at] == key if len(keys) else np.zeros(len(key), bool)
    return np.where(found, at, len(keys)).astype(np.int32)


def message_keys(graph, tasks: np.ndarray) -> np.ndarray:
    """One int64 per task from its kind (by name), message and part: the same message task gets the
    same key in every iteration and in every graph lowered from the same plan."""
    names = sorted(set(graph.kinds))
    code = np.array([names.index(k) for k in graph.kinds], dtype=np.int64)
    key = code[graph.kind_id[tasks]]  # (kind << 42) | (message << 21) | part, in place
    for column in ("message", "part"):
        values = graph.rows_of(column, tasks)
        values += 1
        key <<= 21
        key |= values
    return key


def comm_stretch(base_s: np.ndarray, current_s: np.ndarray, covered_s: np.ndarray, end_covered: np.ndarray,
                 kappa_c: float) -> np.ndarray:
    """The time ``d`` of a message of work ``base_s`` that makes ``1 / (1 + kappa_c)`` of its progress
    while compute runs: ``d = t + k c(d)`` with ``k = kappa_c / (1 + kappa_c)`` and ``c`` the part of it
    compute covers (`sim.core.channel.slowed_end`). From the last round (``current_s``, ``covered_s``,
    ``end_covered``), ``c(d) = c + s (d - current)``, ``s`` 1 if compute ran at its end, else 0."""
    k = kappa_c / (1.0 + kappa_c)
    s = end_covered.astype(float)
    covered = np.clip(covered_s, 0.0, current_s)
    d = (base_s + k * (covered - s * current_s)) / (1.0 - k * s)
    return np.clip(d, base_s, base_s * (1.0 + kappa_c))


def fast_overlap(run, iteration: int) -> Overlap:
    """The `Overlap` of every row of a fast-path run (`sim.core.fast.FastRun`), from its arrays.

    Each row has its own channel (a run of ``evaluate(compute_s=...)``), so its
    messages are disjoint intervals; sorted by start they need no union, and the
    busy time before each compute boundary is their running length up to it (one
    ``searchsorted`` per row, the rest over all rows at once).
    """
    k = iteration
    lo, hi = max(k - 1, 0), min(k + 2, run.comm_start_s.shape[1])
    # the backward chain of iteration k: the end of forward, then every backward end (forward tasks
    # never meet a message here: the update waits for the last one, the next forward for the update)
    bounds = np.concatenate([run.fwd_end_s[:, k, -1:], run.bwd_end_s[:, k]], axis=1)
    rows, n = bounds.shape[0], run.fwd_end_s.shape[2]
    c_start = run.comm_start_s[:, lo:hi].reshape(rows, -1)
    c_end = run.comm_end_s[:, lo:hi].reshape(rows, -1)
    width = c_start.shape[1]
    if width == 0:
        covered, inside = np.zeros_like(bounds), np.zeros(bounds.shape, bool)
    else:
        base = np.arange(rows)[:, None] * width  # flat index of each row's first interval
        order = np.argsort(c_start, axis=1, kind="stable") + base
        c_start, c_end = c_start.ravel()[order], c_end.ravel()[order]
        length = c_end - c_start
        cum = np.zeros((rows, width + 1))  # busy time before each interval
        np.cumsum(length, axis=1, out=cum[:, 1:])
        at = np.empty(bounds.shape, dtype=np.int64)
        for r in range(rows):
            at[r] = np.searchsorted(c_start[r], bounds[r], side="right") - 1
        i = np.clip(at, 0, None)
        length_at = length.ravel()[i + base]
        inside_s = np.clip(bounds - c_start.ravel()[i + base], 0.0, length_at)
        before = cum.ravel()[i + base + np.arange(rows)[:, None]]
        covered = np.where(at >= 0, before + inside_s, 0.0)
        # running at a boundary: begun before it (a message that begins there may be the one it releases)
        j = at - ((at >= 0) & (c_start.ravel()[i + base] == bounds))
        inside = (j >= 0) & (bounds < c_end.ravel()[np.clip(j, 0, None) + base])
    dur = np.diff(bounds, axis=1)
    task = np.clip(np.diff(covered, axis=1), 0.0, dur)
    fwd_dur = np.diff(np.concatenate([run.fwd_start_s[:, k, None], run.fwd_end_s[:, k]], axis=1), axis=1)
    # backward ran layer n-1 first; task j ends at boundary j + 1
    return Overlap(np.zeros((rows, n)), task[:, ::-1], np.zeros((rows, n), bool), inside[:, 1:][:, ::-1], fwd_dur,
                   dur[:, ::-1])


def stretch(base_s: np.ndarray, current_s: np.ndarray, covered_s: np.ndarray, end_covered: np.ndarray,
            kappa) -> np.ndarray:
    """The time ``x`` of a task that takes ``base_s`` alone: ``x = b (1 + kappa c(x) / x)``.

    From the last round (the task took ``current_s``, communication covered
    ``covered_s`` of it and, if ``end_covered``, still ran at its end), the
    covered part is taken to grow with the task if its end was covered and to
    stay put if not: ``c(x) = c + s (x - current)``, ``s`` 1 or 0. Then ``x^2 -
    b (1 + kappa s) x - b kappa (c - s current) = 0``. A task nothing covers
    keeps ``base_s`` exactly; one covered throughout takes ``base_s (1 + kappa)``.
    """
    s = end_covered.astype(float)
    covered = np.clip(covered_s, 0.0, current_s)
    b1 = base_s * (1.0 + kappa * s)
    disc = np.maximum(b1 * b1 + 4.0 * base_s * kappa * (covered - s * current_s), 0.0)
    return np.clip(0.5 * (b1 + np.sqrt(disc)), base_s, base_s * (1.0 + kappa))


def fixed_point(time_rows, overlap_of, fwd_s: np.ndarray, bwd_s: np.ndarray, kappa: np.ndarray):
    """Per row, the forward and backward times (rows, layers) that interference
    stretches ``fwd_s`` and ``bwd_s`` (layers) to, and the run of them.

    ``time_rows(fwd, bwd)`` times all rows with their own compute times;
    ``overlap_of(run)`` is its `Overlap`. A row whose times a round moves by at
    most `TOLERANCE` (of its longest) keeps them; rounds stop when every row
    does, or after `PASSES`. Every row is computed on its own, so a row's
    result does not depend on the rows beside it.
    """
    rows = len(kappa)
    k = np.asarray(kappa, float)[:, None]
    fwd, bwd = np.tile(fwd_s, (rows, 1)), np.tile(bwd_s, (rows, 1))
    for _ in range(PASSES):
        run = time_rows(fwd, bwd)
        ov = overlap_of(run)
        if ov.fwd_covered_s.any() or ov.fwd_end_covered.any():
            new_fwd = stretch(fwd_s, fwd, ov.fwd_covered_s, ov.fwd_end_covered, k)
        else:  # nothing covered: every forward takes its time alone (what `stretch` gives)
            new_fwd = np.broadcast_to(fwd_s, fwd.shape)
        new_bwd = stretch(bwd_s, bwd, ov.bwd_covered_s, ov.bwd_end_covered, k)
        scale = np.maximum(fwd.max(axis=1, initial=0.0), bwd.max(axis=1, initial=0.0))
        moved = np.maximum(np.abs(new_fwd - fwd).max(axis=1, initial=0.0), np.abs(new_bwd - bwd).max(axis=1, initial=0.0))
        done = moved <= TOLERANCE * scale
        if done.all():
            return fwd, bwd, run  # the last run is of the times kept
        fwd = np.where(done[:, None], fwd, new_fwd)
        bwd = np.where(done[:, None], bwd, new_bwd)
    return fwd, bwd, time_rows(fwd, bwd)


def stretched_like(worker_model, base, stretched):
    """``worker_model`` with each layer's forward and backward stretched by the factor
    that turned ``base`` into ``stretched`` (the aggregate run's interference)."""
    def factor(new, old):
        return np.divide(new, old, out=np.ones_like(old, dtype=float), where=old > 0)

    return dataclasses.replace(worker_model, fwd_s=worker_model.fwd_s * factor(stretched.fwd_s, base.fwd_s),
                               bwd_s=worker_model.bwd_s * factor(stretched.bwd_s, base.bwd_s))


def with_times(model, fwd_s: np.ndarray, bwd_s: np.ndarray):
    """``model`` with other forward and backward times (the fixed point's, finite
    and >= 0, one per layer): a copy, not validated again."""
    out = copy.copy(model)
    object.__setattr__(out, "fwd_s", np.asarray(fwd_s, float))
    object.__setattr__(out, "bwd_s", np.asarray(bwd_s, float))
    return out


def overlap_fractions(timeline, layer_names, iteration: int) -> tuple[np.ndarray, np.ndarray]:
    """Per layer, the share of its forward and of its backward task that communication
    covers (`timeline_overlap`'s; kept for scripts written before the quadratic rounds)."""
    fwd, bwd = timeline_overlap(timeline, layer_names, iteration).fractions()
    return fwd[0], bwd[0]


def fast_overlap_fractions(run, iteration: int) -> tuple[np.ndarray, np.ndarray]:
    """`overlap_fractions` of every row of a fast-path run (`fast_overlap`'s; kept as above)."""
    return fast_overlap(run, iteration).fractions()


def stretched_model(model, timeline, iteration: int, kappa: float, *, fractions=None):
    """``model`` with each task stretched by ``1 + kappa f`` for its covered share ``f`` in
    ``timeline`` (one round of the earlier fixed point; `fixed_point` solves it)."""
    f_fwd, f_bwd = fractions if fractions is not None else overlap_fractions(timeline, model.layer_names, iteration)
    return with_times(model, model.fwd_s * (1.0 + kappa * f_fwd), model.bwd_s * (1.0 + kappa * f_bwd))
