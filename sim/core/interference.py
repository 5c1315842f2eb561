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
the messages), so `stretch` runs a fixed point: time the run, stretch every
compute task by the overlap it had, time again; `PASSES` rounds, each from
the unstretched times. The timeline of the last round shows the stretched
bars; ``interference_s`` is the compute time they added.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np

from sim.core.intervals import covered_before, union

__all__ = ["COMPUTE_KINDS", "PASSES", "fast_overlap_fractions", "fixed_point", "overlap_fractions", "stretched_model",
           "with_times"]

#: Fixed-point rounds (each a full timing of the run).
PASSES = 3
COMPUTE_KINDS = ("forward", "backward")


def _covered(start: np.ndarray, end: np.ndarray, busy: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Length of each [start, end) that the disjoint sorted ``busy`` intervals cover."""
    return covered_before(*busy, end) - covered_before(*busy, start)


def overlap_fractions(timeline, layer_names, iteration: int) -> tuple[np.ndarray, np.ndarray]:
    """Per layer, the fraction of its forward and of its backward task in
    ``iteration`` (worker 0) that overlaps communication on any lane."""
    it = timeline["iteration"].to_numpy()
    lane = timeline["lane"].to_numpy()
    kind = timeline["kind"].to_numpy()
    start, end = timeline["start_s"].to_numpy(dtype=float), timeline["end_s"].to_numpy(dtype=float)
    near = np.abs(it - iteration) <= 1
    is_comm = near & (lane != "io") & (lane != "h2d") & (lane != "compute")
    busy = union(start[is_comm], end[is_comm])
    mine = (it == iteration) & (timeline["worker"].to_numpy() == 0)
    index = {name: i for i, name in enumerate(layer_names)}
    layers = timeline["layer"].to_numpy()
    out = []
    for k in COMPUTE_KINDS:
        rows = np.flatnonzero(mine & (kind == k))
        frac = np.zeros(len(layer_names))
        if len(rows):
            s, e = start[rows], end[rows]
            dur = e - s
            idx = np.fromiter((index.get(str(n), -1) for n in layers[rows]), dtype=np.int64, count=len(rows))
            keep = (dur > 0) & (idx >= 0)
            frac[idx[keep]] = np.clip(_covered(s[keep], e[keep], busy) / dur[keep], 0.0, 1.0)
        out.append(frac)
    return out[0], out[1]


def fast_overlap_fractions(run, iteration: int) -> tuple[np.ndarray, np.ndarray]:
    """`overlap_fractions` of every row of a fast-path run (`sim.core.fast.FastRun`), from
    its arrays: (forward, backward) fractions of shape (rows, layers).

    A row's messages share one channel, so they are disjoint intervals; sorted by
    start they need no union, and the busy time before each compute boundary is
    their running length up to it (one ``searchsorted`` per row, the rest over
    all rows at once).
    """
    k = iteration
    lo, hi = max(k - 1, 0), min(k + 2, run.comm_start_s.shape[1])
    # the compute chain of iteration k: forward start, then every forward and backward end
    bounds = np.concatenate([run.fwd_start_s[:, k, None], run.fwd_end_s[:, k], run.bwd_end_s[:, k]], axis=1)
    rows = bounds.shape[0]
    c_start = run.comm_start_s[:, lo:hi].reshape(run.comm_start_s.shape[0], -1)
    c_end = run.comm_end_s[:, lo:hi].reshape(c_start.shape)
    width = c_start.shape[1]
    if width == 0:
        covered = np.zeros_like(bounds)
    else:  # a per-worker run shares one channel: its one row serves every worker's row
        order = np.argsort(c_start, axis=1, kind="stable")
        base = np.arange(c_start.shape[0])[:, None] * width
        c_start, length = c_start.ravel()[order + base], (c_end - c_start).ravel()[order + base]
        cum = np.zeros((len(c_start), width + 1))  # busy time before each interval
        np.cumsum(length, axis=1, out=cum[:, 1:])
        at = np.empty(bounds.shape, dtype=np.int64)
        for r in range(rows):
            at[r] = np.searchsorted(c_start[0 if len(c_start) == 1 else r], bounds[r], side="right") - 1
        shared = len(c_start) == 1
        i = np.clip(at, 0, None)
        flat = i if shared else i + base
        length_at = length.ravel()[flat]
        inside = np.clip(bounds - c_start.ravel()[flat], 0.0, length_at)
        before = cum.ravel()[i if shared else i + base + np.arange(rows)[:, None]]
        covered = np.where(at >= 0, before + inside, 0.0)
    dur = np.diff(bounds, axis=1)
    frac = np.divide(np.diff(covered, axis=1), dur, out=np.zeros_like(dur), where=dur > 0)
    frac = np.clip(frac, 0.0, 1.0)
    n = run.fwd_end_s.shape[2]
    return frac[:, :n], frac[:, n:][:, ::-1]  # backward ran layer n-1 first


def fixed_point(time_rows, fwd_s: np.ndarray, bwd_s: np.ndarray, kappa: np.ndarray, iteration: int):
    """Per row, the forward and backward times (rows, layers) that interference
    stretches ``fwd_s`` and ``bwd_s`` (layers) to, and the fast-path run of them.

    ``time_rows(fwd, bwd)`` times all rows with their own compute times. A row
    stops changing once a round gives the times it had; rounds stop when no
    row changes, or after `PASSES` rounds, each from the unstretched times.
    Every row is computed on its own, so a row's result does not depend on
    the rows beside it.
    """
    rows = len(kappa)
    fwd, bwd = np.tile(fwd_s, (rows, 1)), np.tile(bwd_s, (rows, 1))
    for _ in range(PASSES):
        run = time_rows(fwd, bwd)
        f_fwd, f_bwd = fast_overlap_fractions(run, iteration)
        new_fwd = fwd_s * (1.0 + kappa[:, None] * f_fwd)
        new_bwd = bwd_s * (1.0 + kappa[:, None] * f_bwd)
        if np.array_equal(new_fwd, fwd) and np.array_equal(new_bwd, bwd):
            return fwd, bwd, run  # a fixed point already: the last run is the answer
        fwd, bwd = new_fwd, new_bwd
    return fwd, bwd, time_rows(fwd, bwd)


def with_times(model, fwd_s: np.ndarray, bwd_s: np.ndarray):
    """``model`` with other forward and backward times (the fixed point's, finite
    and >= 0, one per layer): a copy, not validated again."""
    out = copy.copy(model)
    object.__setattr__(out, "fwd_s", np.asarray(fwd_s, float))
    object.__setattr__(out, "bwd_s", np.asarray(bwd_s, float))
    return out


def stretched_model(model, timeline, iteration: int, kappa: float, *, fractions=None):
    """``model`` with each forward and backward time stretched by ``1 + kappa f``
    (``fractions``: the (forward, backward) overlap fractions, if already known)."""
    f_fwd, f_bwd = fractions if fractions is not None else overlap_fractions(timeline, model.layer_names, iteration)
    return dataclasses.replace(model, fwd_s=model.fwd_s * (1.0 + kappa * f_fwd),
                               bwd_s=model.bwd_s * (1.0 + kappa * f_bwd))
