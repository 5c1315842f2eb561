"""The pure entry points: `simulate` one configuration, `sweep` many.

>>> import sim
>>> model = sim.load_model("tests/data/tiny.csv")          # doctest: +SKIP
>>> cluster = sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe", intra="pcie3")
>>> res = sim.simulate(model, cluster, scheduler=sim.schedulers.names.MGWFBP, batch_size=64)  # doctest: +SKIP
>>> res.iteration_time_s, res.metrics, res.timeline, res.groups          # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sim import fast
from sim.arch import build_arch_dag, needs_arch_dag
from sim.cluster import Cluster
from sim.comm import NO_COMM, CommCost, PSCost
from sim.dag import build_dag, gradient_layers
from sim.engine import run_dag
from sim.errors import SimInputError
from sim.model import Model, bytes_per_param, check_batch_size
from sim.schedulers import (
    DEFAULT_BUCKET_MB,
    SCHEDULER_OPTIONS,
    GradientLayers,
    Plan,
    SchedulerOptions,
    make_plan,
)
from sim.schedulers.names import BYTESCHEDULER, DEAR, WFBP
from sim.timeline import COMPUTE_KINDS, interval_overlap_s, timeline_frame

__all__ = [
    "ARCHITECTURES",
    "METRIC_KEYS", "SimResult", "calibrate", "resolve_model", "simulate", "simulate_dag",
    "single_gpu_iteration_s_of", "sweep",
]

METRIC_KEYS = (
    "model", "scheduler", "gpus", "gpus_per_node", "nodes", "batch_size", "precision",
    "network", "intra", "collective", "alpha_s", "beta_s_per_byte",
    "iteration_time_s", "throughput_samples_per_s",
    "compute_s", "forward_s", "backward_s", "update_s", "io_s", "h2d_s",
    "comm_s", "comm_hidden_s", "comm_exposed_s",
    "single_gpu_iteration_time_s", "speedup", "scaling_efficiency",
    "num_messages", "groups",
)
MAX_ITERATIONS = 1000
#: Communication architectures: all-reduce among the workers, or push to and
#: pull from parameter servers (`sim.comm.ps_cost`).
ARCHITECTURES = ("allreduce", "ps")
#: Iterations timed when layers are updated one by one and the next forward
#: overlaps communication: the period settles after the first iteration.
PIPELINED_ITERATIONS = 8
#: ... and the period is averaged over this many of the last iterations, so
#: that what is left of the start-up transient (and any cycle of period > 1 of
#: the max-plus system) is averaged out.
PIPELINED_WINDOW = 5
_NO_GRADIENTS = GradientLayers(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))


class _Lazy:
    """A dataclass field that may be given as a zero-argument callable.

    The callable runs on first access and its value replaces it, so a field
    that is costly to build (the timeline) is built only when read. It still
    pickles: the callable is pickled instead of its value.
    """

    def __set_name__(self, owner, name: str) -> None:
        self._slot = f"_{name}_value"

    def __get__(self, obj, objtype=None):
        if obj is None:
            raise AttributeError("no default")  # tells dataclass the field has no default
        value = obj.__dict__[self._slot]
        if callable(value):
            value = obj.__dict__[self._slot] = value()
        return value

    def __set__(self, obj, value) -> None:
        obj.__dict__[self._slot] = value


@dataclass(frozen=True, eq=False)
class SimResult:
    """What one simulation returns.

    ``metrics`` holds the same keys as ``python -m sim run --format json``;
    ``timeline`` follows `sim.timeline.TIMELINE_COLUMNS` and is built on
    first access; ``groups`` lists the messages in sending order, each a list
    of layer names.
    """

    iteration_time_s: float
    metrics: dict
    timeline: pd.DataFrame = _Lazy()  # type: ignore[assignment]
    groups: list[list[str]]
    plan: Plan
    model: Model = field(repr=False)
    cluster: Cluster = field(repr=False)


def _check_run_args(batch_size: int, iterations: int, precision: str) -> None:
    check_batch_size(batch_size)
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or not 1 <= iterations <= MAX_ITERATIONS:
        raise SimInputError(f"iterations must be a whole number from 1 to {MAX_ITERATIONS}, got {iterations!r}")
    bytes_per_param(precision)


def _run(model, cluster, scheduler, precision, iterations, prefetch, bucket_mb):
    """The reference evaluation: plan, build the DAG and time ``iterations``
    iterations with the engine; return plan, timeline, cost."""
    cost = cluster.comm_cost(model, precision)
    plan = make_plan(scheduler, gradient_layers(model, precision), cost, bucket_mb=bucket_mb)
    if cluster.gpus == 1:
        plan = Plan(plan.scheduler, ())
    return plan, _dag_timeline(model, plan, cost, precision, iterations, prefetch), cost


def _dag_timeline(model: Model, plan: Plan, cost, precision: str, iterations: int, prefetch: bool) -> pd.DataFrame:
    """The timeline of ``plan``'s DAG timed by the engine (the reference evaluation)."""
    if plan.groups and needs_arch_dag(plan, cost):
        g = build_arch_dag(model, plan, cost, precision=precision, iterations=iterations, prefetch=prefetch)
    else:
        g = build_dag(model, plan, cost, precision=precision, iterations=iterations, prefetch=prefetch)
    return timeline_frame(g, run_dag(g))


def _iterations_to_run(plan: Plan, iterations: int) -> int:
    return max(iterations, PIPELINED_ITERATIONS if plan.per_layer_update else 2)


def _dag_figures(model: Model, plan: Plan, cost, precision: str, iterations: int, prefetch: bool) -> tuple[float, dict]:
    """Iteration time and phase metrics of ``plan`` by the reference evaluation."""
    timeline = _dag_timeline(model, plan, cost, precision, _iterations_to_run(plan, iterations), prefetch)
    return _steady_iteration_s(timeline), _phase_metrics(timeline)


def single_gpu_iteration_s_of(model: Model, precision: str = "fp32", prefetch: bool = False) -> float:
    """Steady-state iteration time of ``model`` (with its times) on one GPU."""
    return fast.single_gpu_iteration_s(model, precision, prefetch)


def _single_gpu_iteration_dag_s(model: Model, precision: str = "fp32", prefetch: bool = False) -> float:
    return _steady_iteration_s(_dag_timeline(model, Plan(WFBP, ()), NO_COMM, precision, 2, prefetch))


def calibrate(model: Model, measured_iteration_s: float, *, precision: str = "fp32", prefetch: bool = False) -> Model:
    """Scale ``model``'s compute times so its one-GPU iteration takes ``measured_iteration_s``.

    One factor s multiplies every forward, backward and update time, keeping
    the per-layer proportions. io and h2d stay as given. The one-GPU
    iteration is io + h2d + s * C without prefetch (C the compute time), so
    s = (T - io - h2d) / C; with prefetch it is max(io, h2d, s * C), so s = T / C.
    """
    t = float(measured_iteration_s)
    if not (math.isfinite(t) and t > 0):
        raise SimInputError(f"calibrate_iteration_s must be a finite number > 0, got {measured_iteration_s}")
    compute = float(model.fwd_s.sum() + model.bwd_s.sum() + model.update_s)
    if compute <= 0:
        raise SimInputError("cannot calibrate a model with no compute time")
    fixed = max(model.io_s, model.h2d_s) if prefetch else model.io_s + model.h2d_s
    target = t if prefetch else t - fixed
    if target <= 0 or (prefetch and t < fixed):
        raise SimInputError(
            f"calibrate_iteration_s = {t:g} s is shorter than the model's io and h2d time ({fixed:g} s)"
        )
    return model.scaled(target / compute)


def resolve_model(model: Model, cluster: Cluster, batch_size: int, precision: str, prefetch: bool = False,
                  calibrate_iteration_s: float | None = None) -> Model:
    """The model with compute times for this GPU and batch, calibrated if asked."""
    model = model.timed(gpu=cluster.gpu, batch_size=batch_size, precision=precision)
    if calibrate_iteration_s is not None:
        model = calibrate(model, calibrate_iteration_s, precision=precision, prefetch=prefetch)
    return model


def _steady_iteration_s(timeline: pd.DataFrame) -> float:
    """Period between the updates of the last two iterations.

    When layers are updated one by one (several updates per iteration), the
    period between the last update of each, averaged over the last
    `PIPELINED_WINDOW` iterations.
    """
    updates = timeline.loc[timeline["kind"] == "update"]
    ends = updates.groupby("iteration")["end_s"].max().to_numpy()
    if len(ends) < 2:
        return float(timeline["end_s"].max())
    if len(updates) == len(ends):
        return float(ends[-1] - ends[-2])
    w = min(PIPELINED_WINDOW, len(ends) - 1)
    return float((ends[-1] - ends[-1 - w]) / w)


def _phase_metrics(timeline: pd.DataFrame) -> dict:
    """Compute and communication figures of the last (steady-state) iteration."""
    last = timeline["iteration"].max()
    it = timeline.loc[timeline["iteration"] == last]
    by_kind = it.groupby("kind")["duration_s"].sum()
    comm = it.loc[it["kind"] == "comm"]
    compute = timeline.loc[timeline["kind"].isin(COMPUTE_KINDS)]
    comm_s = float(comm["duration_s"].sum())
    hidden = interval_overlap_s(comm["start_s"], comm["end_s"], compute["start_s"], compute["end_s"])
    hidden = min(hidden, comm_s)
    return {
        "compute_s": float(sum(by_kind.get(k, 0.0) for k in COMPUTE_KINDS)),
        "forward_s": float(by_kind.get("forward", 0.0)),
        "backward_s": float(by_kind.get("backward", 0.0)),
        "update_s": float(by_kind.get("update", 0.0)),
        "io_s": float(by_kind.get("io", 0.0)),
        "h2d_s": float(by_kind.get("h2d", 0.0)),
        "comm_s": comm_s,
        "comm_hidden_s": hidden,
        "comm_exposed_s": max(comm_s - hidden, 0.0),
    }


def simulate(
    model: Model,
    cluster: Cluster,
    scheduler: str = WFBP,
    *,
    batch_size: int,
    precision: str = "fp32",
    iterations: int = 1,
    prefetch: bool = False,
    bucket_mb: float = DEFAULT_BUCKET_MB,
    single_gpu_iteration_s: float | None = None,
    calibrate_iteration_s: float | None = None,
    method: str | None = None,
    architecture: str = "allreduce",
    options: SchedulerOptions | dict | None = None,
) -> SimResult:
    """Time training iterations of ``model`` on ``cluster`` under ``scheduler``.

    Parameters
    ----------
    model : Model
        The workload; its compute times are per GPU at ``batch_size``.
    cluster : Cluster
        GPUs, nodes, links and collective.
    scheduler : str
        A name from `sim.schedulers.SCHEDULERS`.
    batch_size : int
        Samples per GPU per iteration.
    precision : {"fp32", "fp16"}
        Gradient width: 4 or 2 bytes per parameter.
    iterations : int
        Iterations in the returned timeline. The iteration time is that of
        the steady state: the period between the last two updates of a run of
        at least two iterations.
    prefetch : bool
        Let io and h2d of the next iteration overlap the current one.
    bucket_mb : float
        Bucket size for the ``bucket`` scheduler, in MiB.
    single_gpu_iteration_s : float, optional
        The one-GPU iteration time for speedup; simulated when not given.
    calibrate_iteration_s : float, optional
        A measured one-GPU iteration time at ``batch_size``. Every compute time
        of the model is scaled by one factor, keeping the per-layer
        proportions, so that the simulated one-GPU iteration takes exactly this.
    method : str, optional
        A method of the survey (`sim.methods.METHODS`, e.g. ``"BSP-PS"``):
        it sets ``architecture``, ``scheduler`` and the scheduler's options,
        and overrides the ``scheduler`` and ``architecture`` arguments;
        ``options`` given as a dict then change single settings.
    architecture : {"allreduce", "ps"}
        All-reduce among the workers, or a parameter server
        (`sim.comm.ps_cost`; servers and placement in ``options``).
    options : SchedulerOptions or dict, optional
        Settings of ``horovod``, ``ddp``, ``bytescheduler`` and the parameter
        server (`sim.schedulers.SchedulerOptions`). When ``method``,
        ``architecture = "ps"`` or ``options`` is given, ``metrics`` also
        holds ``method``, ``architecture`` and ``settings``.

    Returns
    -------
    SimResult
    """
    return _simulate(model, cluster, scheduler, batch_size, precision, iterations, prefetch, bucket_mb,
                     single_gpu_iteration_s, calibrate_iteration_s, engine="fast", method=method,
                     architecture=architecture, options=options)


def simulate_dag(
    model: Model,
    cluster: Cluster,
    scheduler: str = WFBP,
    *,
    batch_size: int,
    precision: str = "fp32",
    iterations: int = 1,
    prefetch: bool = False,
    bucket_mb: float = DEFAULT_BUCKET_MB,
    single_gpu_iteration_s: float | None = None,
    calibrate_iteration_s: float | None = None,
    method: str | None = None,
    architecture: str = "allreduce",
    options: SchedulerOptions | dict | None = None,
) -> SimResult:
    """`simulate` by the reference evaluation: every task of the DAG
    (`sim.dag.build_dag`) timed by the engine (`sim.engine.run_dag`), the
    timeline built at once and every metric read from it.

    Slower than `simulate` by one to two orders of magnitude; it is the
    independent check of the fast path (`sim.fast`) and gives the same result.
    """
    return _simulate(model, cluster, scheduler, batch_size, precision, iterations, prefetch, bucket_mb,
                     single_gpu_iteration_s, calibrate_iteration_s, engine="dag", method=method,
                     architecture=architecture, options=options)


def resolve_method(method: str | None, scheduler: str, architecture: str,
                   options: SchedulerOptions | dict | None) -> tuple[str, str, SchedulerOptions]:
    """(scheduler, architecture, options) of a run: a method's, or as given."""
    if method is not None:
        from sim.methods import method_config

        cfg = method_config(method)
        scheduler, architecture = cfg.scheduler, cfg.architecture
        if isinstance(options, SchedulerOptions):
            return scheduler, architecture, options
        return scheduler, architecture, SchedulerOptions.of({**cfg.options, **(options or {})})
    if architecture not in ARCHITECTURES:
        raise SimInputError(f"unknown architecture {architecture!r}; valid: {', '.join(ARCHITECTURES)}")
    return scheduler, architecture, SchedulerOptions.of(options)


def comm_costs(model: Model, cluster: Cluster, precision: str, scheduler: str, architecture: str,
               options: SchedulerOptions) -> tuple[CommCost, CommCost | PSCost]:
    """The cost a scheduler plans with and the one the DAG is timed with.

    For the parameter server, planning sees push + pull as one all-reduce
    (`sim.comm.ps`); timing uses push and pull apart, with ByteScheduler's
    credit bounding the servers busy at once.
    """
    if architecture != "ps":
        cost = cluster.comm_cost(model, precision)
        return cost, cost
    if scheduler == DEAR:
        raise SimInputError(f"scheduler {DEAR!r} decouples an all-reduce; it needs architecture 'allreduce'")
    in_flight = options.credit if scheduler == BYTESCHEDULER else None
    timing = cluster.ps_cost(servers=options.servers, colocated=options.colocated, in_flight=in_flight, model=model,
                             link_efficiency=options.ps_link_efficiency)
    planning = CommCost(timing.push_alpha_s + timing.pull_alpha_s,
                        timing.push_beta_s_per_byte + timing.pull_beta_s_per_byte, timing.label)
    return planning, timing


def _settings(scheduler: str, architecture: str, options: SchedulerOptions, bucket_mb: float) -> dict:
    values = {**dataclasses.asdict(options), "bucket_mb": bucket_mb}
    keys = list(SCHEDULER_OPTIONS.get(scheduler, ()))
    if architecture == "ps":
        keys += ["partition_bytes", "servers", "colocated"]
    return {k: values[k] for k in dict.fromkeys(keys)}


def _simulate(model, cluster, scheduler, batch_size, precision, iterations, prefetch, bucket_mb,
              single_gpu_iteration_s, calibrate_iteration_s, *, engine, method=None, architecture="allreduce",
              options=None):
    extended = method is not None or architecture != "allreduce" or options is not None
    scheduler, architecture, opts = resolve_method(method, scheduler, architecture, options)
    _check_run_args(batch_size, iterations, precision)
    model = resolve_model(model, cluster, batch_size, precision, prefetch, calibrate_iteration_s)
    multi = cluster.gpus > 1
    plan_cost, cost = comm_costs(model, cluster, precision, scheduler, architecture, opts)
    if multi:
        plan = make_plan(scheduler, gradient_layers(model, precision), plan_cost, bucket_mb=bucket_mb, options=opts)
        if architecture == "ps" and not plan.partition_bytes:  # BytePS partitions every message
            plan = dataclasses.replace(plan, partition_bytes=int(opts.partition_bytes))
    else:  # one GPU sends nothing: only check the scheduler and its arguments
        plan = Plan(make_plan(scheduler, _NO_GRADIENTS, plan_cost, bucket_mb=bucket_mb, options=opts).scheduler, ())
    n_run = _iterations_to_run(plan, iterations)
    if engine == "fast" and not needs_arch_dag(plan, cost) and fast.supports(plan, model.num_layers):
        run = fast.evaluate(model, plan, cost, precision=precision, iterations=n_run, prefetch=prefetch)
        t_iter = float(run.iteration_time_s[0])
        phases = {key: float(value[0]) for key, value in run.phase_metrics().items()}
        timeline = functools.partial(run.timeline, 0, iterations)
        single_of = single_gpu_iteration_s_of
    else:
        full = _dag_timeline(model, plan, cost, precision, n_run, prefetch)
        t_iter = _steady_iteration_s(full)
        phases = _phase_metrics(full)
        timeline = full.loc[full["iteration"] < iterations].reset_index(drop=True)
        single_of = _single_gpu_iteration_dag_s
    if single_gpu_iteration_s is None:
        single_gpu_iteration_s = t_iter if cluster.gpus == 1 else single_of(model, precision, prefetch)
    names = model.layer_names
    groups = [[names[i] for i in members] for members in plan.groups]
    if t_iter <= 0 or not math.isfinite(t_iter):
        raise SimInputError("the iteration takes no time: give the model non-zero compute times")
    metrics = {
        "model": model.name,
        "scheduler": scheduler,
        "gpus": cluster.gpus,
        "gpus_per_node": cluster.gpus_per_node,
        "nodes": cluster.nodes,
        "batch_size": int(batch_size),
        "precision": precision,
        "network": cluster.network,
        "intra": cluster.intra,
        "collective": cluster.collective,
        "alpha_s": plan_cost.alpha_s,
        "beta_s_per_byte": plan_cost.beta_s_per_byte,
        "iteration_time_s": t_iter,
        "throughput_samples_per_s": batch_size * cluster.gpus / t_iter,
        **phases,
        "single_gpu_iteration_time_s": single_gpu_iteration_s,
        "speedup": cluster.gpus * single_gpu_iteration_s / t_iter,
        "scaling_efficiency": single_gpu_iteration_s / t_iter,
        "num_messages": len(groups),
        "groups": groups,
    }
    if extended:
        metrics.update(method=method, architecture=architecture,
                       settings=_settings(scheduler, architecture, opts, bucket_mb))
    return SimResult(t_iter, metrics, timeline, groups, plan, model, cluster)


def sweep(
    model: Model,
    cluster: Cluster,
    *,
    gpus: list[int],
    schedulers: list[str],
    batch_size: int,
    precision: str = "fp32",
    prefetch: bool = False,
    bucket_mb: float = DEFAULT_BUCKET_MB,
    calibrate_iteration_s: float | None = None,
    networks: list[str] | None = None,
    bucket_mbs: list[float] | None = None,
    jobs: int | None = None,
    client=None,
    progress=None,
) -> pd.DataFrame:
    """One row of `simulate` metrics per (gpus, scheduler), in that order.

    With ``networks``, one block of such rows per network, in that order.
    With ``bucket_mbs``, each (gpus, scheduler) row becomes one row per
    bucket size, in that order, and a ``bucket_mb`` column is added (it only
    changes the ``bucket`` scheduler).

    The grid runs through `sim.parallel.run_grid`: in this process when it is
    small, else on ``jobs`` local processes (default: every core), or on a
    Dask cluster when ``client`` (a ``dask.distributed.Client``) is given.
    The rows are the same whichever way it ran. ``progress(done, total)`` is
    called as configurations finish.
    """
    from sim.parallel import run_grid

    if not gpus or not schedulers:
        raise SimInputError("sweep needs at least one GPU count and one scheduler")
    if networks is not None and not networks:
        raise SimInputError("networks, when given, needs at least one network")
    if bucket_mbs is not None and not bucket_mbs:
        raise SimInputError("bucket_mbs, when given, needs at least one bucket size")
    _check_run_args(batch_size, 1, precision)
    model = resolve_model(model, cluster, batch_size, precision, prefetch, calibrate_iteration_s)
    base = dataclasses.asdict(cluster)
    configs = []
    for network in networks or [cluster.network]:
        for p in gpus:
            dataclasses.replace(cluster, network=network, gpus=int(p))  # bad values raise here, unprefixed
            for name in schedulers:
                for size in bucket_mbs or [bucket_mb]:
                    make_plan(name, _NO_GRADIENTS, NO_COMM, bucket_mb=size)  # likewise
                    configs.append({**base, "network": network, "gpus": int(p), "model": model, "scheduler": name,
                                    "batch_size": batch_size, "precision": precision, "prefetch": prefetch,
                                    "bucket_mb": size})
    frame = run_grid(configs, jobs=jobs, client=client, progress=progress)
    if bucket_mbs is not None:
        frame["bucket_mb"] = [c["bucket_mb"] for c in configs]
    return frame
