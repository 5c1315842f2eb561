"""Many configurations at once: in this process, on local cores or on a Dask cluster.

A grid is a list of configuration dicts, each with the arguments of
`sim.simulate` and the fields of `sim.Cluster` (see `GRID_KEYS`); `run_grid`
returns one row of `simulate` metrics per configuration, in order. The rows
are those `simulate` gives, to the last bit, however the grid ran.

How it stays fast. The caller's process validates every configuration and
resolves each distinct workload once (the model timed for its GPU, batch and
precision, calibrated if asked, and its one-GPU iteration time). The grid then
shrinks to distinct evaluations: (workload, scheduler, bucket size for the
``bucket`` scheduler, all-reduce cost); one GPU needs no plan. A
worker plans each evaluation and times together, in one vectorised pass of
`sim.fast.evaluate`, all evaluations of a workload whose plans are the same
(for most schedulers the plan does not depend on the cost, so every GPU count
and network of a workload is one pass). Chunks of evaluations go to a process
pool or to a Dask cluster, and each row is filled from its evaluation.

>>> import sim
>>> from sim.parallel import run_grid
>>> from sim.schedulers.names import MGWFBP, WFBP
>>> model = sim.load_model("resnet50")                               # doctest: +SKIP
>>> grid = [{"model": model, "gpus": p, "scheduler": s, "batch_size": 32}
...         for p in (1, 2, 4, 8) for s in (WFBP, MGWFBP)]
>>> frame = run_grid(grid)                                           # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from sim.checks import check_int
from sim.core.metrics import METRIC_KEYS, PHASE_KEYS, rates
from sim.core.run import time_plan
from sim.errors import SimInputError
from sim.frameworks import framework_name
from sim.grid import GRID_KEYS, ConfigProduct, Grid, check_distinct
from sim.sweep_plans import PlanCache, updates_per_layer
from sim.tensors import gradients_of

__all__ = ["GRID_KEYS", "MAX_CONFIGS", "ConfigProduct", "MAX_JOBS_PER_CORE", "SERIAL_WORK_LIMIT", "check_grid_size", "default_jobs",
           "max_jobs", "run_grid"]

#: Below this much work (layers summed over the distinct evaluations; every
#: scheduler's plan is linear in layers) a grid runs in this process: starting a
#: pool of worker processes costs more than it saves. Measured on the 2-core
#: development machine (BENCHMARKS.md): a pool costs 50-60 ms; the two break even
#: at about 150,000 units, some 100 ms of serial work.
SERIAL_WORK_LIMIT = 150_000
_CHUNKS_PER_WORKER = 8
_PHASES = (*PHASE_KEYS, "interference_s")

Progress = Callable[[int, int], None]

#: Worker processes at most per core: more only compete for the same cores (raise it here).
MAX_JOBS_PER_CORE = 4
#: Configurations in one grid at most (raise it here). A million configurations of
#: the zoo take under a minute on 2 cores and under 1 GiB (BENCHMARKS.md).
MAX_CONFIGS = 2_000_000


def max_jobs() -> int:
    """The most worker processes a grid may ask for: `MAX_JOBS_PER_CORE` per core."""
    return MAX_JOBS_PER_CORE * default_jobs()


def check_grid_size(count: int, clusters: int = 0) -> None:
    """Refuse a grid of more than `MAX_CONFIGS` configurations, or of more than
    `sim.grid.MAX_CLUSTERS` distinct clusters, before any work."""
    if count > MAX_CONFIGS:
        raise SimInputError(f"the sweep has {count:,} configurations; at most {MAX_CONFIGS:,} are allowed "
                            "(sim.parallel.MAX_CONFIGS): split it")
    check_distinct("clusters", clusters)


def default_jobs() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def _evaluate_units(payload: tuple[dict, np.ndarray, list[tuple]]) -> tuple[np.ndarray, dict]:
    """Plan and time evaluations (the worker's task; pure, picklable in and out).

    Evaluations of one workload with the same plan are timed in one pass.
    Returns the evaluation ids and, per evaluation, ``iteration_time_s``,
    the phase metrics, ``num_messages`` and ``groups`` (layer names).
    """
    workloads, ids, units = payload
    plans = PlanCache(workloads)
    by_plan: dict[tuple, list[int]] = {}
    for pos, (wid, scheduler, bucket_mb, cost) in enumerate(units):
        by_plan.setdefault((wid, plans.get(wid, scheduler, bucket_mb, cost)), []).append(pos)
    size = len(units)
    out: dict = {k: np.empty(size) for k in ("iteration_time_s", *_PHASES)}
    out["num_messages"] = np.empty(size, dtype=np.int64)
    out["groups"] = np.empty(size, dtype=np.int64)  # per evaluation, its plan's position in out["plans"]
    out["plans"], coded = [], {}  # each plan's messages once, as `_coded_groups`
    for (wid, plan_id), positions in by_plan.items():
        plan, w = plans.by_id[plan_id], workloads[wid]
        costs = [units[p][3] for p in positions]
        idx = np.asarray(positions)
        timing = time_plan(w.model, plan, costs, precision=w.precision, iterations=1, prefetch=w.prefetch,
                           keep_timeline=False)
        out["iteration_time_s"][idx] = timing.iteration_time_s
        for name, values in timing.phases.items():
            out[name][idx] = values
        code = coded.get(plan_id)
        if code is None:
            code = coded[plan_id] = len(out["plans"])
            out["plans"].append(_coded_groups(plan.groups))
        out["num_messages"][idx] = len(plan.groups)
        out["groups"][idx] = code
    return ids, out


def _coded_groups(groups) -> tuple[bytes, bytes]:
    """A plan's messages (lists of layer indices) as two byte strings, the indices and each
    message's count: small to send back from a worker, and a key the caller merges equal
    plans by (the caller names the layers, once per plan and model: `_named_groups`)."""
    counts = np.fromiter((len(m) for m in groups), dtype=np.int64, count=len(groups))
    members = np.fromiter((i for m in groups for i in m), dtype=np.int64, count=int(counts.sum()))
    return members.tobytes(), counts.tobytes()


def _named_groups(code: tuple[bytes, bytes], names, messages: dict) -> list[list[str]]:
    """`_coded_groups` back to lists of layer names, each message's list taken from ``messages``
    (keyed by its indices) when an earlier plan of the same layers had it: many plans of a sweep
    share most of their messages."""
    members, counts = code
    bounds = np.cumsum(np.frombuffer(counts, dtype=np.int64) * 8).tolist()
    out = []
    for a, b in zip([0, *bounds[:-1]] if bounds else [], bounds, strict=True):
        key = members[a:b]
        found = messages.get(key)
        if found is None:
            found = messages[key] = [names[i] for i in np.frombuffer(key, dtype=np.int64).tolist()]
        out.append(found)
    return out


def _pool_context():
    """How to start worker processes: fork when this process runs one thread
    (fastest, nothing re-imported); forking a threaded process (a dashboard,
    a Dask client) may deadlock, so then from a fork server, else spawn.

    Both of those import the main module again in every worker. A main
    *script* (``python sweep.py``, no ``if __name__ == "__main__"`` guard
    needed with fork) would run again there, start its own Dask client or
    sweep, and break the pool: then None, and the caller runs the chunks in
    this process (the same rows; pass the Dask client as ``client=`` to use
    its workers instead)."""
    import multiprocessing
    import sys
    import threading

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) is None and getattr(main, "__file__", None):
        return None  # a main script: a worker would run it again
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _leave_interrupt_to_parent() -> None:
    """A pool worker's start: Ctrl-C reaches every process of the terminal's group, and a worker that
    raised KeyboardInterrupt printed its own traceback. The worker ends quietly (the default action of
    SIGINT); the process that made the pool raises KeyboardInterrupt and reports it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _run_chunks(payloads, jobs: int, client, report: Callable, count: int) -> None:
    if client is not None:
        from distributed import as_completed

        futures = [client.submit(_evaluate_units, p, pure=False) for p in payloads]
        for future in as_completed(futures):
            report(future.result())
        return
    context = _pool_context() if jobs > 1 else None
    if context is None:
        for p in payloads:
            report(_evaluate_units(p))
        return
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    workers = min(jobs, count)
    pending = iter(payloads)  # made as they are sent: at most two per worker held at once
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_leave_interrupt_to_parent) as pool:
        running = {pool.submit(_evaluate_units, p) for p in itertools.islice(pending, 2 * workers)}
        while running:
            finished, running = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                report(future.result())
                running |= {pool.submit(_evaluate_units, p) for p in itertools.islice(pending, 1)}


def run_grid(
    configs: Sequence[dict],
    *,
    jobs: int | None = None,
    client=None,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """One row of `sim.simulate` metrics per configuration, in order.

    Parameters
    ----------
    configs : sequence of dict, or ConfigProduct
        Each with ``model`` (a `sim.Model`, a zoo name or a CSV path) and
        ``batch_size``, and any of ``scheduler``, ``precision``,
        ``prefetch``, ``bucket_mb``, ``calibrate_iteration_s`` and the
        fields of `sim.Cluster` (``gpus``, ``network``, ...); missing keys
        take `simulate`'s and `Cluster`'s defaults.
    jobs : int, optional
        Worker processes on this machine. ``None`` picks: this process for
        a small grid (`SERIAL_WORK_LIMIT`), otherwise one per core. ``1``
        runs here.
    client : dask.distributed.Client, optional
        Run the chunks on this Dask cluster instead (``jobs`` is ignored).
        Its workers need ``sim`` importable.
    progress : callable, optional
        Called as ``progress(done, total)`` with configurations done, after
        each chunk. `sim` never prints; the CLI draws a bar with it.

    Returns
    -------
    pandas.DataFrame
        Columns `sim.METRIC_KEYS`; row i is ``configs[i]``. Rows of one plan
        share their ``groups`` list.

    Raises
    ------
    SimInputError
        For a bad configuration, naming its position.
    """
    grid = Grid(_checked(configs, jobs, client, progress))
    if not grid.units:
        return pd.DataFrame(columns=list(METRIC_KEYS))
    if client is not None:
        workers = max(1, sum(client.nthreads().values()))
    elif jobs is None:
        workers = default_jobs() if grid.work(range(len(grid.units))) >= SERIAL_WORK_LIMIT else 1
    else:
        workers = jobs
    parallel = client is not None or workers > 1
    parts = workers * _CHUNKS_PER_WORKER if parallel else (16 if progress else 1)
    chunks = grid.chunks(min(parts, len(grid.units)))
    collector = _Results(grid, len(configs), progress)
    payloads = [grid.payload(c) for c in chunks] if client is not None else (grid.payload(c) for c in chunks)
    _run_chunks(payloads, workers if parallel else 1, client, collector, len(chunks))
    return _frame(grid, collector.results)


def _checked(configs, jobs, client, progress) -> Sequence[dict]:
    """`run_grid`'s arguments checked, and the configurations as a list (a `ConfigProduct` as it is)."""
    if jobs is not None:
        check_int("jobs", jobs, 1, max_jobs())
    if client is not None and not (hasattr(client, "submit") and hasattr(client, "nthreads")):
        raise SimInputError(f"client must be a dask.distributed.Client, got {type(client).__name__}")
    if progress is not None and not callable(progress):
        raise SimInputError(f"progress must be a function progress(done, total), got {type(progress).__name__}")
    if not isinstance(configs, ConfigProduct):
        if isinstance(configs, (str, bytes, dict)) or not hasattr(configs, "__iter__"):
            raise SimInputError(f"configs must be a list of configuration dicts or a ConfigProduct, got "
                                f"{type(configs).__name__}")
        configs = list(configs)
    check_grid_size(len(configs))
    return configs


def _strings(values: list[str], index: np.ndarray):
    """``values[index]`` as the frame's string column, converting each distinct string once."""
    return pd.array(values, dtype=pd.Series(values[:1] or [""]).dtype).take(index)


class _Results:
    """Fills each evaluation's figures as chunks finish, and reports progress."""

    def __init__(self, grid: Grid, total_rows: int, progress):
        n = len(grid.units)
        self.results: dict = {k: np.empty(n) for k in ("iteration_time_s", *_PHASES)}
        self.results["num_messages"] = np.empty(n, dtype=np.int64)
        self.results["groups"] = [None] * n
        self.grid, self.named, self.messages = grid, {}, {}  # one list of names per plan and per message
        self.rows_per_unit = np.bincount(grid.unit_of_row, minlength=n)
        self.total_rows, self.progress, self.done = total_rows, progress, 0

    def __call__(self, result) -> None:
        uids, out = result
        for key, values in out.items():
            if key == "plans":
                continue
            if key == "groups":
                self._name_groups(uids, values, out["plans"])
            else:
                self.results[key][uids] = values
        self.done += int(self.rows_per_unit[uids].sum())
        if self.progress is not None:
            self.progress(self.done, self.total_rows)

    def _name_groups(self, uids: np.ndarray, codes: np.ndarray, plans: list) -> None:
        """Each evaluation's messages as layer names: one list per message and model, and one
        list of them per plan, shared by its rows across every chunk (the models, and so their
        names, live as long as the grid; the message lists as long as these results)."""
        groups, units, workloads = self.results["groups"], self.grid.units, self.grid.workloads
        here: dict[tuple, list] = {}
        for u, code in zip(uids.tolist(), codes.tolist(), strict=True):
            names = workloads[units[u][0]].model.layer_names
            found = here.get((code, id(names)))
            if found is None:
                named = _named_groups(plans[code], names, self.messages.setdefault(id(names), {}))
                found = here[(code, id(names))] = self.named.setdefault(tuple(map(id, named)), named)
            groups[u] = found


def _refuse_untimed(t_iter: np.ndarray, single: np.ndarray, samples: np.ndarray) -> None:
    """Refuse rows `simulate` refuses (`sim.api.run_metrics`): an iteration that takes no time, a one-GPU
    iteration that takes none (only communication), an iteration too short for a finite throughput."""
    bad = np.flatnonzero(~(np.isfinite(t_iter) & (t_iter > 0)))
    if bad.size:
        raise SimInputError(f"configuration {int(bad[0])}: the iteration takes no time: give the model non-zero "
                            "compute times")
    bad = np.flatnonzero(~(single > 0))
    if bad.size:
        raise SimInputError(f"configuration {int(bad[0])}: the one-GPU iteration takes no time: give the model "
                            "non-zero compute times")
    with np.errstate(over="ignore"):
        bad = np.flatnonzero(~np.isfinite(samples / t_iter))
    if bad.size:
        raise SimInputError(f"configuration {int(bad[0])}: the iteration takes {t_iter[bad[0]]:g} s, too short for a "
                            "throughput: give the model larger compute times")


def _frame(grid: Grid, results: dict) -> pd.DataFrame:
    """The rows, from each row's cluster, workload and evaluation."""
    unit, wl, cl = grid.unit_of_row, grid.workload_of_row, grid.cluster_of_row
    t_iter = results["iteration_time_s"][unit]

    def per_cluster(get, dtype=None):
        values = [get(c, cost) for c, cost in grid.clusters]
        return np.asarray(values, dtype=dtype)[cl] if dtype is not None else _strings(values, cl)

    def per_workload(get, dtype=None):
        values = [get(w) for w in grid.workloads]
        return np.asarray(values, dtype=dtype)[wl] if dtype is not None else _strings(values, wl)

    gpus = per_cluster(lambda c, _: c.gpus, np.int64)
    code = grid.scheduler_code_of_row
    pairs, pair_of_row = np.unique(cl * len(grid.schedulers) + code, return_inverse=True)  # (cluster, scheduler)
    frameworks = [framework_name(grid.clusters[p // len(grid.schedulers)][0], grid.schedulers[p % len(grid.schedulers)])
                  for p in pairs.tolist()]
    batch = per_workload(lambda w: w.batch_size, np.int64)
    per_layer = np.array([updates_per_layer(name) for name in grid.schedulers], dtype=bool)
    # a plan that updates per layer reads the next batch while the GPU updates, on one GPU too
    # (`sweep_plans.ONE_GPU_PER_LAYER`): its reference, on every GPU count, as in `simulate`
    single = np.where(per_layer[code], per_workload(lambda w: w.single_gpu_iteration_overlap_s, float),
                      per_workload(lambda w: w.single_gpu_iteration_s, float))
    _refuse_untimed(t_iter, single, batch * gpus)
    data = {
        "model": per_workload(lambda w: w.model.name),
        "scheduler": _strings(grid.schedulers, code),
        "gpus": gpus,
        "gpus_per_node": per_cluster(lambda c, _: c.gpus_per_node, np.int64),
        "nodes": per_cluster(lambda c, _: c.nodes, np.int64),
        "batch_size": batch,
        "precision": per_workload(lambda w: w.precision),
        "network": per_cluster(lambda c, _: c.network),
        "intra": per_cluster(lambda c, _: c.intra),
        "collective": per_cluster(lambda c, _: c.collective),
        "alpha_s": np.array([u[3].alpha_s for u in grid.units], dtype=float)[unit],  # per unit: trace-driven
                                                                                      # models bring their own
        "beta_s_per_byte": np.array([u[3].beta_s_per_byte for u in grid.units], dtype=float)[unit],
        "iteration_time_s": t_iter,
        # the same function, so the same operations in the same order, as `simulate`
        "throughput_samples_per_s": rates(batch, gpus, t_iter, single)["throughput_samples_per_s"],
        **{k: results[k][unit] for k in _PHASES},
        **{k: v for k, v in rates(batch, gpus, t_iter, single).items() if k != "throughput_samples_per_s"},
        "num_messages": results["num_messages"][unit],
        "groups": [results["groups"][u] for u in unit.tolist()],
        "framework": _strings(frameworks, pair_of_row.ravel()),
        "params": per_workload(lambda w: w.model.total_params, np.int64),
        "gradients": per_workload(lambda w: gradients_of(w.model)),
    }
    return pd.DataFrame(data, columns=list(METRIC_KEYS), copy=False)  # the arrays are this frame's alone

