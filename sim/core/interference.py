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

import dataclasses

import numpy as np

from sim.core.intervals import covered_before, union

__all__ = ["COMPUTE_KINDS", "PASSES", "fast_overlap_fractions", "overlap_fractions", "stretched_model"]

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
    """`overlap_fractions` from a fast-path run's arrays (`sim.core.fast.FastRun`, row 0),
    without building its timeline: the same intervals."""
    k = iteration
    fwd_end = run.fwd_end_s[0, k]
    fwd_start = np.concatenate([run.fwd_start_s[0, k, None], fwd_end[:-1]])
    bwd_end = run.bwd_end_s[0, k]  # backward order: layer n-1 first
    bwd_start = np.concatenate([fwd_end[-1:], bwd_end[:-1]])
    lo, hi = max(k - 1, 0), min(k + 2, run.comm_start_s.shape[1])
    busy = union(run.comm_start_s[0, lo:hi].ravel(), run.comm_end_s[0, lo:hi].ravel())
    out = []
    for s, e in ((fwd_start, fwd_end), (bwd_start[::-1], bwd_end[::-1])):
        dur = e - s
        frac = np.zeros(len(s))
        ok = dur > 0
        frac[ok] = np.clip(_covered(s[ok], e[ok], busy) / dur[ok], 0.0, 1.0)
        out.append(frac)
    return out[0], out[1]


def stretched_model(model, timeline, iteration: int, kappa: float, *, fractions=None):
    """``model`` with each forward and backward time stretched by ``1 + kappa f``
    (``fractions``: the (forward, backward) overlap fractions, if already known)."""
    f_fwd, f_bwd = fractions if fractions is not None else overlap_fractions(timeline, model.layer_names, iteration)
    return dataclasses.replace(model, fwd_s=model.fwd_s * (1.0 + kappa * f_fwd),
                               bwd_s=model.bwd_s * (1.0 + kappa * f_bwd))
