"""Per-worker runs on the one timing core: stragglers, link jitter and mixed GPUs.

Each of the P workers runs its own iterations with its own compute times;
the plan's messages are shared, and each is released when every worker has
its gradients: the task graph of `sim.core.lower` with P workers
(`sim.core.lower.WorkerTimes`), timed by the one engine, or by the fast path
(`sim.core.fast.evaluate` with ``times``) where it applies, to the same bit.
Every scheduler, method and cost model (trace-driven, parameter server) that
`sim.simulate` takes, this takes too; with identical workers each worker's
tasks take the aggregate run's times exactly.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.api import SimResult, plan_run, resolve_method, resolve_model, run_metrics
from sim.catalog import get_gpu
from sim.checks import check_int, check_seed
from sim.cluster import Cluster
from sim.core import fast
from sim.core import run as core_run
from sim.core.budget import PS_CELL_WEIGHT
from sim.core.cost import PSCost
from sim.core.lower import WorkerTimes
from sim.core.metrics import iterations_to_run, steady_iteration_s
from sim.core.run import (
    check_cell_budget,
    estimated_tasks,
    single_gpu_iteration_s,
    time_plan,
    time_workers,
)
from sim.core.workload import check_workload
from sim.errors import SimInputError
from sim.model import Model, bytes_per_param, check_batch_size
from sim.schedulers import DEFAULT_BUCKET_MB
from sim.schedulers.names import WFBP
from sim.tensors import gradients_of
from sim.workers.phases import message_times_s, run_phases
from sim.workers.stragglers import (
    StragglerSpec,
    draw_compute_factors,
    jitter_factors,
    straggler_factors,
)

__all__ = ["MAX_WORKER_ITERATIONS", "SyncRun", "WorkerResult", "check_timeline_rows", "ideal_iteration_s", "run_sync",
           "simulate_workers", "worker_models"]

MAX_WORKER_ITERATIONS = 5000
#: A per-worker run returns the one result type.
WorkerResult = SimResult


def worker_models(model: Model, cluster: Cluster, batch_size: int, precision: str, prefetch: bool,
                  calibrate_iteration_s, gpus_by_worker):
    """``(base, timed, profile_of, names)``: the model timed for the cluster's GPU,
    one timed model per distinct GPU type, each worker's index into that list
    and each worker's GPU name."""
    base = resolve_model(model, cluster, batch_size, precision, prefetch, calibrate_iteration_s)
    if gpus_by_worker is None:
        return base, [base], np.zeros(cluster.gpus, dtype=int), (cluster.gpu,) * cluster.gpus
    if isinstance(gpus_by_worker, str):
        raise SimInputError("gpus_by_worker must list one GPU name per worker, not one string")
    names = tuple(str(g) for g in gpus_by_worker)
    if len(names) != cluster.gpus:
        raise SimInputError(f"gpus_by_worker names {len(names)} GPUs for a cluster of {cluster.gpus}")
    for name in names:
        get_gpu(name)
    if len(set(names)) > 1 or names[0] != cluster.gpu:
        if model.is_timed:
            raise SimInputError("gpus_by_worker needs a zoo model: a CSV model carries its own times for one GPU type")
        if calibrate_iteration_s is not None:
            raise SimInputError("calibrate_iteration_s applies to one GPU type; leave it out with gpus_by_worker")
    kinds = list(dict.fromkeys(names))
    timed = [base if g == cluster.gpu else model.timed(gpu=g, batch_size=batch_size, precision=precision)
             .with_gradients(gradients_of(base)) for g in kinds]
    return base, timed, np.array([kinds.index(g) for g in names], dtype=int), names


@dataclass(frozen=True, eq=False)
class SyncRun:
    """One synchronous per-worker run.

    ``update_end_s[k, w]`` is when worker w's step k ends (its last update);
    ``backward_end_s[k, w]`` when its backward pass ends; ``update_s[k, w]`` the
    time it computes between the two (its update); ``wait_s`` the rest (waiting for
    the slowest worker's gradients and for the network). ``timeline()`` builds the rows.
    """

    base: Model
    plan: object
    plan_cost: object
    cost: object
    update_end_s: np.ndarray
    backward_end_s: np.ndarray
    update_s: np.ndarray
    slow: np.ndarray
    names: tuple
    timeline: object
    #: the compute factors of each (iteration, worker), as drawn or given (`run_sync`'s ``factors``)
    factors: np.ndarray | None = None
    #: the run's precision (its messages' bytes, so its task count: `check_timeline_rows`)
    precision: str = "fp32"
    #: the link factors drawn (iterations x messages)
    jitter: np.ndarray | None = None

    @property
    def wait_s(self) -> np.ndarray:
        """Each worker's time between its backward end and its step's end that it spends not updating."""
        return np.maximum(self.update_end_s - self.backward_end_s - self.update_s, 0.0)

    @property
    def periods_s(self) -> np.ndarray:
        """Periods between the ends of successive iterations (an iteration ends with the last worker's step). A plan
        that updates per layer leaves out the last iteration's unless it is the only one, as the aggregate run's
        steady state does (`sim.core.metrics.steady_iteration_s`): it has no next forward pass, so its updates run
        early (up to 46 % short), and its mean made a run of mixed GPUs faster than one GPU of worker 0's type."""
        ends = self.update_end_s.max(axis=1)
        return np.diff(ends[:-1] if self.plan.per_layer_update and len(ends) >= 3 else ends)


def _check(batch_size, precision, spec, iterations, seed) -> int:
    check_batch_size(batch_size)
    bytes_per_param(precision)
    if not isinstance(spec, StragglerSpec):
        raise SimInputError(f"straggler must be a StragglerSpec, got {type(spec).__name__}")
    check_seed(seed)
    return check_int("iterations", iterations, 2, MAX_WORKER_ITERATIONS)


def run_sync(model, cluster, scheduler, *, batch_size, spec, iterations, seed, gpus_by_worker=None,
             precision="fp32", prefetch=False, bucket_mb=DEFAULT_BUCKET_MB, calibrate_iteration_s=None,
             factors=None, method=None, architecture="allreduce", options=None, rows=None,
             keep_iterations=None) -> SyncRun:
    """One synchronous per-worker run. ``factors`` (iterations x workers) replaces
    the drawn compute factors (`sim.workers.algorithms` passes its own). ``rows``, if given,
    times only the first ``rows`` workers (the cost is still the whole cluster's): what
    `ideal_iteration_s` does for identical workers on all-reduce, whose messages wait for
    workers that all end alike; ``factors`` must then have ``rows`` columns. ``keep_iterations``,
    if given, keeps every task time (the timeline) of the first ones only (`sim.core.fast.evaluate`)."""
    iterations = _check(batch_size, precision, spec, iterations, seed)
    base, timed, profile_of, names = worker_models(model, cluster, batch_size, precision, prefetch,
                                                   calibrate_iteration_s, gpus_by_worker)
    scheduler, architecture, opts = resolve_method(method, scheduler, architecture, options)
    plan, plan_cost, cost = plan_run(base, cluster, scheduler, architecture, opts, precision, bucket_mb)
    p = cluster.gpus if rows is None else check_int("rows", rows, 1, cluster.gpus)
    if keep_iterations is not None:
        check_int("keep_iterations", keep_iterations, 1)
    profile_of, names = profile_of[:p], names[:p]
    weight = PS_CELL_WEIGHT if isinstance(cost, PSCost) else 1
    # before the draws (they too grow with workers x iterations); only the fast path holds fewer than it times
    kept = keep_iterations if fast.supports(plan, cost, base.num_layers) else None
    check_cell_budget(base, plan, iterations, p, weight, kept)
    rng = np.random.default_rng(int(seed))
    slow = straggler_factors(spec, rng, p)
    drawn = draw_compute_factors(spec, rng, iterations, p)
    factors = drawn if factors is None else np.asarray(factors, dtype=float)
    if factors.shape != (iterations, p):
        raise SimInputError(f"factors must be {iterations} iterations x {p} workers, got shape {factors.shape}")
    # no link jitter: no draws (the link factors of 1 multiplied nothing: the same bits, less memory)
    jitter = jitter_factors(spec, rng, (iterations, len(plan.groups))) if spec.jitter_cv > 0 else None
    times = WorkerTimes(tuple(timed), profile_of, slow[None, :] * factors, slow, jitter)
    ends, backward, update_s, timeline = time_workers(base, plan, cost, times, precision=precision,
                                                      iterations=iterations, prefetch=prefetch,
                                                      keep_iterations=keep_iterations)
    return SyncRun(base, plan, plan_cost, cost, ends, backward, update_s, slow, names, timeline, factors, precision,
                   jitter)


def ideal_iteration_s(model, cluster: Cluster, scheduler, run: SyncRun, common: dict, iterations: int,
                      reuse: bool = False) -> float:
    """The steady-state iteration of ``run``'s plan with identical workers (`steady_iteration_s`), from a run of
    ``iterations``, or more where the steady state needs them (`iterations_to_run`): ``run`` itself when ``reuse``
    (nothing varies in it) and it ran that many, else a run without noise (``common``: `run_sync`'s other
    arguments). A plan that updates per layer needs five: the last iteration has no next forward pass, so its
    updates run early, and a run of two timed that period alone (ByteScheduler: 2 % to 35 % short; `monte_carlo`
    reported a slowdown of 1.12 with nothing varying, and identical workers missed the aggregate iteration)."""
    needed = iterations_to_run(run.plan, iterations)
    if not (reuse and needed == run.update_end_s.shape[0]):
        # its workers are identical (``common`` holds no ``gpus_by_worker``: each has the cluster's GPU), and on
        # all-reduce they end every step alike: one row times them all (8,192 rows took 0.9 GB); parameter
        # servers are timed with every worker's pushes, which queue at the servers
        run = run_sync(model, cluster, scheduler, spec=StragglerSpec(), **{**common, "iterations": needed},
                       rows=None if isinstance(run.cost, PSCost) else 1, keep_iterations=1)  # its ends only
    return steady_iteration_s(run.update_end_s.max(axis=1), run.plan.per_layer_update)


def _metrics(run: SyncRun, spec: StragglerSpec, cluster: Cluster, scheduler: str, batch_size: int,
             precision: str, prefetch: bool, seed: int, ideal: float, mean: float,
             reference: float | None = None) -> dict:
    """`sim.METRIC_KEYS` (iteration time, throughput, speedup and efficiency from the mean period; the
    phase figures of identical workers, or of the run where it varies: `sim.workers.phases`), then the
    per-worker figures."""
    varies, jittered = reference is not None, spec.jitter_cv > 0
    # identical workers' timeline only to weigh the link jitter's draws by each message's time
    timing = time_plan(run.base, run.plan, [run.cost], precision=precision, prefetch=prefetch,
                       keep_timeline=varies and jittered)
    phases = {key: float(value[0]) for key, value in timing.phases.items()}
    straggler_wait = 0.0
    if varies:  # the run's own compute, exposed and hidden communication (not identical workers')
        message_s = message_times_s(timing.timeline(0, 1), len(run.plan.groups)) if jittered else None
        measured = run_phases(run.update_end_s, run.backward_end_s, run.update_s, len(run.periods_s),
                              run.jitter if jittered else None, message_s, phases["comm_s"])
        straggler_wait = measured.pop("straggler_wait_s")
        phases |= measured
    groups = [[run.base.layer_names[i] for i in members] for members in run.plan.groups]
    # a run that varies: one GPU of worker 0's type with worker 0's draws (`_reference_s`); identical
    # workers: one GPU of the cluster's (on one GPU the run itself)
    if reference is not None:
        single = float(reference)
    elif cluster.gpus == 1:
        single = float(mean)
    else:
        single = single_gpu_iteration_s(run.base, precision, prefetch, update_overlaps_io=run.plan.per_layer_update)
    metrics = run_metrics(run.base, cluster, scheduler, batch_size, precision, run.plan_cost, mean, phases, single,
                          groups, "ps" if isinstance(run.cost, PSCost) else "allreduce")
    periods, waits = run.periods_s, run.wait_s[1:]
    return metrics | {
        "seed": int(seed), **spec.as_dict(), "iterations": int(run.update_end_s.shape[0]),
        "iteration_p50_s": float(np.percentile(periods, 50)), "iteration_p99_s": float(np.percentile(periods, 99)),
        "iteration_min_s": float(periods.min()), "iteration_max_s": float(periods.max()),
        "ideal_iteration_time_s": ideal, "straggler_slowdown": mean / ideal,
        "wait_mean_s": float(waits.mean()) if waits.size else 0.0, "straggler_wait_s": straggler_wait,
        "straggler_workers": [int(w) for w in np.flatnonzero(run.slow != 1.0)],
    }


def simulate_workers(
    model: Model,
    cluster: Cluster,
    scheduler: str = WFBP,
    *,
    batch_size: int,
    straggler: StragglerSpec | None = None,
    iterations: int = 20,
    seed: int = 0,
    gpus_by_worker: Sequence[str] | None = None,
    precision: str = "fp32",
    prefetch: bool = False,
    bucket_mb: float = DEFAULT_BUCKET_MB,
    calibrate_iteration_s: float | None = None,
    method: str | None = None,
    architecture: str = "allreduce",
    options: dict | None = None,
    timeline_iterations: int | None = None,
) -> SimResult:
    """Simulate ``iterations`` synchronous iterations of every worker.

    Parameters
    ----------
    model, cluster, scheduler, batch_size, precision, prefetch, bucket_mb, calibrate_iteration_s, method, ...
        As in `sim.simulate` (the plan is made for ``cluster.gpu``; no ``sync_jitter_cv``: the draws stand for it).
    straggler : StragglerSpec, optional
        What varies between workers (default: nothing).
    iterations, seed : int
        Iterations, 2 to `MAX_WORKER_ITERATIONS` (the first is start-up); the seed of the one ``numpy``
        Generator of every random draw.
    gpus_by_worker : sequence of str, optional
        The GPU type of each worker (a zoo model is needed to mix types).
    timeline_iterations : int, optional
        Keep only the first iterations in ``timeline`` (default: all), and the task times of those alone.

    Returns a `sim.api.SimResult`: ``iteration_time_s`` is the mean period from the second iteration on
    (identical workers: the steady state, as `sim.simulate`); ``metrics`` add p50, p99, the ideal iteration
    and the slowdown; ``timeline`` has every worker's tasks and its waits (`with_waits`).
    """
    check_workload(model, cluster)
    spec = straggler or StragglerSpec()
    cluster = _without_sync_jitter(cluster)
    if timeline_iterations is not None:
        check_int("timeline_iterations", timeline_iterations, 1)
    common = dict(batch_size=batch_size, iterations=iterations, seed=seed, precision=precision, prefetch=prefetch,
                  bucket_mb=bucket_mb, calibrate_iteration_s=calibrate_iteration_s, method=method,
                  architecture=architecture, options=options)
    run = run_sync(model, cluster, scheduler, spec=spec, gpus_by_worker=gpus_by_worker, **common,
                   keep_iterations=timeline_iterations)
    uniform = spec.is_uniform and gpus_by_worker is None
    ideal = ideal_iteration_s(model, cluster, scheduler, run, common, run.update_end_s.shape[0], reuse=uniform)
    mean = ideal if uniform else float(run.periods_s.mean())
    if not (mean > 0 and math.isfinite(mean)):
        raise SimInputError("the iteration takes no time: give the model non-zero compute times")
    reference = None if uniform else _reference_s(model, cluster, scheduler, run, gpus_by_worker, common)
    metrics = _metrics(run, spec, cluster, resolve_method(method, scheduler, architecture, options)[0], batch_size,
                       precision, prefetch, seed, ideal, mean, reference)
    return SimResult(mean, metrics, functools.partial(with_waits, run, timeline_iterations), metrics["groups"],
                     run.plan, run.base, cluster, run.periods_s, run.wait_s,
                     tuple(np.flatnonzero(run.slow != 1.0).tolist()), run.names)


def _reference_s(model, cluster: Cluster, scheduler, run: SyncRun, gpus_by_worker, common: dict) -> float:
    """The one-GPU reference of a run that varies: the mean period of one GPU of worker 0's type computing
    with worker 0's drawn factors (no persistent slowdown, no link jitter), over the same iterations. Against
    the ideal one-GPU iteration a sample mean of the draws below 1 made the speedup exceed P, and a cluster of
    GPUs faster than ``cluster.gpu`` did the same; the P-GPU run, which waits for worker 0 among others, is
    no faster than this one."""
    one = run_sync(model, cluster.with_gpus(1), scheduler, spec=StragglerSpec(), factors=run.factors[:, :1],
                   gpus_by_worker=None if gpus_by_worker is None else [gpus_by_worker[0]], keep_iterations=1, **common)
    return float(one.periods_s.mean())


def _without_sync_jitter(cluster: Cluster) -> Cluster:
    """``cluster`` without the aggregate engine's jitter (the fitted default too: the per-worker draws stand for
    it); a jitter given is refused, for the per-worker engine draws each worker's compute itself."""
    if cluster.sync_jitter_cv:
        raise SimInputError(f"sync_jitter_cv = {cluster.sync_jitter_cv} is the aggregate engine's jitter; the "
                            "per-worker engine draws each worker's compute itself: give the straggler spec's "
                            "jitter_cv (--straggler-jitter-cv) instead")
    return dataclasses.replace(cluster, sync_jitter_cv=0.0)


def with_waits(run: SyncRun, iterations: int | None = None) -> pd.DataFrame:
    """The run's timeline (its first ``iterations``) with a ``wait`` row (until the
    slowest worker's backward ends) and a ``comm_wait`` row (then until the
    network is done) per worker and iteration in which it idles before its update.

    A plan that updates per layer (ByteScheduler, DeAR) has no one update to wait
    for: its updates run between the messages, and the next forward pass may start
    before the last of them, so its idle time is the gaps its timeline shows
    between those tasks, and no wait rows are added (they covered its updates)."""
    check_timeline_rows(run, iterations)
    timeline = run.timeline(iterations)
    if run.plan.per_layer_update:
        return timeline
    slowest = run.backward_end_s.max(axis=1, keepdims=True)
    own, idle_end = run.backward_end_s, run.backward_end_s + run.wait_s
    wait_end = np.minimum(np.maximum(slowest, own), idle_end)
    rows = []
    for kind, lo, hi in (("wait", own, wait_end), ("comm_wait", wait_end, idle_end)):
        k, w = np.nonzero(hi > lo)
        if iterations is not None:
            k, w = k[k < iterations], w[k < iterations]
        rows.append(pd.DataFrame({
            "iteration": k, "worker": w, "lane": "compute", "kind": kind,
            "name": [f"it{a}/w{b}/{kind}" for a, b in zip(k.tolist(), w.tolist(), strict=True)],
            "layer": "", "message": -1, "start_s": lo[k, w], "end_s": hi[k, w],
            "duration_s": hi[k, w] - lo[k, w], "bytes": 0,
        }))
    extra = pd.concat(rows, ignore_index=True)
    extra["group"], extra["resource"] = extra["message"], extra["lane"]
    extra = extra[list(timeline.columns)].astype(timeline.dtypes.to_dict())
    out = pd.concat([timeline, extra], ignore_index=True)
    return out.sort_values(["start_s", "end_s", "iteration"], kind="stable").reset_index(drop=True)


def check_timeline_rows(run: SyncRun, iterations: int | None = None) -> None:
    """Refuse, before it is built, a timeline of ``run``'s first ``iterations`` (None: all) of more rows than the
    task budget (`sim.core.run.MAX_TASKS`; the timeline has a row per task). The fast path times per-worker runs
    within `sim.core.run.check_cell_budget`, up to `sim.core.budget.CELLS_PER_TASK` times as many tasks, and a
    row of the frame takes some 460 bytes: 8,192 workers x 24 iterations of ResNet-50 (64 million rows) passed
    24 GB before it was killed."""
    ran, workers = run.update_end_s.shape
    shown = ran if iterations is None else min(int(iterations), ran)
    rows = estimated_tasks(run.base, run.plan, run.precision, shown, workers, run.cost)
    if rows > core_run.MAX_TASKS:
        fit = core_run.MAX_TASKS // max(estimated_tasks(run.base, run.plan, run.precision, 1, workers, run.cost), 1)
        raise SimInputError(
            f"the timeline of this run would have about {rows:,} rows ({shown} iterations of {workers:,} workers); "
            f"the limit is {core_run.MAX_TASKS:,} (${core_run.MAX_TASKS_ENV} or sim.core.run.MAX_TASKS): "
            + (f"keep at most {fit} iterations of it (timeline_iterations)" if fit else "use fewer workers"))
