"""A coarse-grained predictor of the iteration time, set beside the fine-grained one.

Li, Paolieri, Golubchik, Lin and Yan ("Predicting throughput of distributed
stochastic gradient descent", IEEE TPDS 33(11), 2022) contrast two classes
of performance model. A *fine-grained* model represents the elementary
operations and their dependencies — here, `sim.simulate`'s DAG of per-layer
forward, backward and per-message all-reduce tasks, in which communication
overlaps the backward pass. A *coarse-grained* model represents a step as
high-level phases in sequence, with no parallelism between computation and
communication:

    t_iter = t_io + t_h2d + t_fwd + t_bwd + t_comm(M) + t_update

where ``t_comm(M) = alpha + beta M`` is one all-reduce of all M gradient
bytes (`sim.comm`). Li et al. find that coarse models come close when
"augmented with ad hoc heuristics". Ours, in that spirit (the form is our
choice, not theirs), is an overlap factor rho in [0, 1]: communication may
hide behind a fraction rho of the backward pass,

    t_iter(rho) = t_io + t_h2d + t_fwd + t_bwd + max(t_comm(M) - rho t_bwd, 0) + t_update,

and `fit_overlap` picks the rho that best matches a set of fine predictions.

Relations that hold exactly (and are tested): the coarse time is never below
the fine time of ``synceasgd`` (one message after backward: equal when the
first layer has parameters), nor below ``optimal``'s; with alpha = 0 it is
never below ``wfbp``'s either.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from sim.api import resolve_model, simulate
from sim.cluster import Cluster
from sim.errors import SimInputError
from sim.model import Model, bytes_per_param, check_batch_size
from sim.schedulers.names import SYNCEASGD

__all__ = ["COARSE_PHASES", "coarse_iteration", "compare_coarse_fine", "fit_overlap"]

COARSE_PHASES = ("io_s", "h2d_s", "forward_s", "backward_s", "comm_s", "update_s")


def _check_overlap(overlap: float) -> float:
    if not (isinstance(overlap, (int, float)) and math.isfinite(overlap) and 0 <= overlap <= 1):
        raise SimInputError(f"overlap must be a number from 0 to 1, got {overlap!r}")
    return float(overlap)


def coarse_iteration(model: Model, cluster: Cluster, *, batch_size: int, precision: str = "fp32",
                     overlap: float = 0.0, calibrate_iteration_s: float | None = None) -> dict:
    """The coarse-grained iteration time and its phases.

    Parameters
    ----------
    model, cluster, batch_size, precision, calibrate_iteration_s
        As in `sim.simulate`.
    overlap : float
        The heuristic's rho: the fraction of the backward pass that may hide
        communication. 0 is the plain coarse model.

    Returns
    -------
    dict
        `COARSE_PHASES`, ``comm_exposed_s`` and ``iteration_time_s``.

    Examples
    --------
    io 0.5 + h2d 0.25 + forward 2 + backward 4 + one all-reduce of 8000 bytes
    at 1 ms + 1e-9 s/B (1.008 ms) + update 1 = 8.758 ms.
    """
    check_batch_size(batch_size)
    rho = _check_overlap(overlap)
    width = bytes_per_param(precision)
    timed = resolve_model(model, cluster, batch_size, precision, False, calibrate_iteration_s)
    nbytes = int(timed.total_params) * width
    whole = tuple(range(timed.num_layers)) if timed.num_layers > 1 else (0, 0)  # one merged message
    # one all-reduce of every gradient, with the per-message costs the fine model's SyncEASGD run has
    cost = cluster.framework_cost(cluster.comm_cost(timed, precision), SYNCEASGD)
    comm = cost.message_time_s(whole, nbytes) if cluster.gpus > 1 and nbytes > 0 else 0.0
    phases = {
        "io_s": float(timed.io_s),
        "h2d_s": float(timed.h2d_s),
        "forward_s": float(timed.fwd_s.sum()),
        "backward_s": float(timed.bwd_s.sum()),
        "comm_s": comm,
        "update_s": float(timed.update_s),
    }
    exposed = max(comm - rho * phases["backward_s"], 0.0)
    total = phases["io_s"] + phases["h2d_s"] + phases["forward_s"] + phases["backward_s"] + exposed + phases["update_s"]
    return {**phases, "comm_exposed_s": exposed, "iteration_time_s": total}


def compare_coarse_fine(model: Model, cluster: Cluster, *, gpus: Sequence[int], schedulers: Sequence[str],
                        batch_size: int, precision: str = "fp32", overlap: float = 0.5,
                        prefetch: bool = False, calibrate_iteration_s: float | None = None) -> pd.DataFrame:
    """Coarse and fine predictions side by side, one row per (gpus, scheduler).

    Returns
    -------
    pandas.DataFrame
        ``gpus``, ``scheduler``, ``fine_s`` (`sim.simulate`), ``coarse_s``
        (rho = 0), ``coarse_overlap_s`` (rho = ``overlap``), the phases of
        the coarse model, and the relative errors of both coarse predictions
        against the fine one, ``(coarse - fine) / fine``.
    """
    if not gpus or not schedulers:
        raise SimInputError("compare needs at least one GPU count and one scheduler")
    rho = _check_overlap(overlap)
    rows = []
    for p in gpus:
        c = cluster.with_gpus(int(p))
        plain = coarse_iteration(model, c, batch_size=batch_size, precision=precision,
                                 calibrate_iteration_s=calibrate_iteration_s)
        heur = coarse_iteration(model, c, batch_size=batch_size, precision=precision, overlap=rho,
                                calibrate_iteration_s=calibrate_iteration_s)
        for name in schedulers:
            fine = simulate(model, c, name, batch_size=batch_size, precision=precision, prefetch=prefetch,
                            calibrate_iteration_s=calibrate_iteration_s).iteration_time_s
            rows.append({
                "gpus": int(p), "scheduler": name, "fine_s": fine, "coarse_s": plain["iteration_time_s"],
                "coarse_overlap_s": heur["iteration_time_s"], "overlap": rho,
                **{k: plain[k] for k in COARSE_PHASES},
                "coarse_rel_error": (plain["iteration_time_s"] - fine) / fine,
                "coarse_overlap_rel_error": (heur["iteration_time_s"] - fine) / fine,
            })
    return pd.DataFrame(rows)


def fit_overlap(frame: pd.DataFrame, *, grid: int = 1001) -> float:
    """The rho in [0, 1] that minimises the mean squared relative error of the
    heuristic against ``frame.fine_s`` (a `compare_coarse_fine` frame); the
    smallest such rho when several tie."""
    if len(frame) == 0:
        raise SimInputError("fit_overlap needs at least one row")
    rho = np.linspace(0.0, 1.0, grid)[:, None]
    base = (frame.io_s + frame.h2d_s + frame.forward_s + frame.backward_s + frame.update_s).to_numpy()[None, :]
    exposed = np.maximum(frame.comm_s.to_numpy()[None, :] - rho * frame.backward_s.to_numpy()[None, :], 0.0)
    fine = frame.fine_s.to_numpy()[None, :]
    err = np.mean(((base + exposed - fine) / fine) ** 2, axis=1)
    return float(rho[int(np.argmin(err)), 0])
