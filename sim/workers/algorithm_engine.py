"""What the algorithms take from the per-worker engine (`sim.workers`).

Each worker's compute times from its GPU type (`worker_times`), and AR-SGD,
which is synchronous data-parallel SGD with one all-reduce of the gradient
per step, run by the engine with the algorithms' per-worker compute factors
(`ar_sgd_run`).

"""

from __future__ import annotations

import numpy as np

from sim.core.run import check_task_budget
from sim.core.timeline import coalesce, to_rows
from sim.schedulers import DEFAULT_BUCKET_MB
from sim.schedulers.names import SYNCEASGD
from sim.workers.algorithm_runs import NO_MODEL, SERVER, FactorStreams, RunSetup
from sim.workers.engine import run_sync, with_waits, worker_models

__all__ = ["ar_sgd_run", "worker_times"]


def worker_times(model, cluster, batch_size: int, precision: str, gpus_by_worker):
    """The resolved model, then each worker's forward + backward time and its
    update time (before any straggler factor), from its own GPU type."""
    base, timed, profile_of, _ = worker_models(model, cluster, batch_size, precision, False, None, gpus_by_worker)
    fb = np.array([float(timed[i].fwd_s.sum()) + float(timed[i].bwd_s.sum()) for i in profile_of])
    update = np.array([float(timed[i].update_s) for i in profile_of])
    return base, fb, update


def ar_sgd_run(model, cluster, setup: RunSetup, precision: str, gpus_by_worker):
    """AR-SGD through the per-worker engine: one all-reduce of the gradient per
    step, timed by the cluster's collective (`Cluster.comm_cost`), with the
    same per-worker compute factors as the other algorithms.

    Returns the update log's rows, the timeline's rows, the bytes each worker
    sent and received, and each worker's busy compute time.
    """
    run = run_sync(
        model, cluster, SYNCEASGD, batch_size=setup.batch_size, spec=setup.spec, iterations=setup.steps,
        seed=setup.seed, gpus_by_worker=gpus_by_worker, precision=precision, prefetch=False,
        bucket_mb=DEFAULT_BUCKET_MB, calibrate_iteration_s=None, factors=FactorStreams(setup).table(setup.steps),
    )
    check_task_budget(run.base, run.plan, run.cost, precision, setup.steps, setup.workers)  # the timeline below
    p = setup.workers
    log = []
    ends = run.update_end_s.max(axis=1)
    for k in range(setup.steps):
        for i in range(p):
            log.append((float(ends[k]), "gradient", i, k, SERVER, k * p + i + 1, SERVER, k * p, NO_MODEL, -1,
                        1.0 / p, 0))
    ring = np.full(p, 2 * (p - 1) / p * setup.model_bytes * setup.steps)
    rows = coalesce(with_waits(run))
    computing = rows.loc[rows.kind.isin(["forward", "backward", "update"])]
    busy = computing.groupby("worker")["duration_s"].sum().reindex(range(p), fill_value=0.0).to_numpy()
    return log, to_rows(rows), ring, ring.copy(), busy
