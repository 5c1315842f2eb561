"""Runs as the command line and scripts ask for them: methods or schedulers, on an architecture.

`resolve_runs` turns a list of survey methods (`sim.methods`) or of
schedulers into ``(method, scheduler, architecture)`` runs and checks the
names; `simulate_runs` simulates each run at each GPU count;
`with_worker_metrics` puts the per-worker engine's iteration statistics
(`sim.workers`) in place of the plain engine's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import pandas as pd

from sim.api import simulate
from sim.checks import check_choice
from sim.cluster import Cluster
from sim.errors import SimInputError
from sim.methods import ARCHITECTURES, DEFAULT_ARCHITECTURE, DEFAULT_SCHEDULER, method_config
from sim.model import Model
from sim.schedulers.names import MGWFBP, WFBP
from sim.schedulers.registry import get_spec

__all__ = ["DEFAULT_ARCHITECTURE", "DEFAULT_SCHEDULER", "DEFAULT_SWEEP_SCHEDULERS", "Run", "resolve_runs", "simulate_runs",
           "with_worker_metrics"]

#: The schedulers of a sweep that names none (a run's: `sim.methods.DEFAULT_SCHEDULER`, on
#: `sim.methods.DEFAULT_ARCHITECTURE`, all-reduce among the workers).
DEFAULT_SWEEP_SCHEDULERS = (WFBP, MGWFBP)


class Run(NamedTuple):
    """One configuration to simulate: a method (or None), its scheduler and architecture."""

    method: str | None
    scheduler: str
    architecture: str


def resolve_runs(methods: Sequence[str] = (), schedulers: Sequence[str] = (), architecture: str | None = None,
                 default: Sequence[str] = (DEFAULT_SCHEDULER,)) -> list[Run]:
    """The runs of ``methods`` (each sets its scheduler and architecture), else of
    ``schedulers`` (``default`` when empty) on ``architecture`` (default all-reduce).

    Unknown names raise a `SimInputError` listing the valid ones.
    """
    if methods:
        if schedulers or architecture is not None:
            raise SimInputError("a method sets the scheduler and the architecture: give a method or those, not both")
        return [Run(name, cfg.scheduler, cfg.architecture) for name, cfg in ((m, method_config(m)) for m in methods)]
    architecture = check_choice("architecture", architecture or DEFAULT_ARCHITECTURE, ARCHITECTURES)
    return [Run(None, get_spec(name).name, architecture) for name in (schedulers or default)]


def simulate_runs(model: Model, cluster_of: Callable[[int], Cluster], gpus: Sequence[int], runs: Sequence[Run],
                  **kwargs) -> pd.DataFrame:
    """One row of `sim.simulate` metrics per (GPU count, run), in that order.

    ``cluster_of(p)`` is the cluster with ``p`` GPUs; ``kwargs`` go to every
    `sim.simulate` (batch_size, precision, options, ...).
    """
    rows = []
    for p in gpus:
        for method, scheduler, architecture in runs:
            res = simulate(model, cluster_of(p), scheduler, method=method, architecture=architecture, **kwargs)
            rows.append(res.metrics)
    return pd.DataFrame(rows)


#: The per-worker engine's statistics that `with_worker_metrics` adds.
WORKER_KEYS = ("iteration_p50_s", "iteration_p99_s", "ideal_iteration_time_s", "straggler_slowdown", "wait_mean_s",
               "seed", "straggler_dist", "straggler_cv", "stragglers", "straggler_factor", "jitter_cv",
               "straggler_workers", "straggler_wait_s")
#: The phase figures a per-worker run measures on itself where its workers differ (`sim.workers.phases`):
#: they replace the plain run's, so that compute + straggler wait + exposed is the iteration shown.
WORKER_PHASE_KEYS = ("compute_s", "comm_s", "comm_hidden_s", "comm_exposed_s")


def with_worker_metrics(metrics: dict, worker_metrics: dict) -> dict:
    """Plain ``metrics`` with the iteration time (and what follows from it) and the phase figures of the
    per-worker engine."""
    t = worker_metrics["iteration_time_s"]
    out = dict(metrics)
    out.update(  # speedup and efficiency against the per-worker run's own one-GPU reference (on one GPU: itself)
        iteration_time_s=t, throughput_samples_per_s=worker_metrics["throughput_samples_per_s"],
        single_gpu_iteration_time_s=worker_metrics["single_gpu_iteration_time_s"],
        speedup=worker_metrics["speedup"], scaling_efficiency=worker_metrics["scaling_efficiency"],
    )
    out.update({k: worker_metrics[k] for k in (*WORKER_KEYS, *WORKER_PHASE_KEYS)})
    out["straggler_iterations"] = worker_metrics["iterations"]
    return out
