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
import os
import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from sim.catalog import USER_NETWORKS_ENV, file_stamp, get_gpu, user_networks_path
from sim.checks import MAX_TIME_S, check_choice, check_float, check_int
from sim.cluster import Cluster
from sim.compression import Compression, compressed_cost, parse_compression, refusal
from sim.core import run as core_run
from sim.core.cost import NO_COMM, CommCost, PSCost
from sim.core.fast_columns import forget_static_columns
from sim.core.metrics import METRIC_KEYS, iterations_to_run, rates
from sim.core.plan import NO_GRADIENTS, Plan, gradient_layers
from sim.core.run import single_gpu_iteration_s, time_plan
from sim.core.timeline import COMPUTE_KINDS, interval_overlap_s, kept_builder
from sim.core.workload import (
    calibrate,
    check_run_args,
    check_run_options,
    check_workload,
    resolve_model,
    with_sync_wait,
)
from sim.errors import SimInputError
from sim.frameworks import framework_name
from sim.memory import DEFAULT_OPTIMIZER, OPTIMIZERS
from sim.methods import ARCHITECTURES, resolve_method
from sim.model import Model, bytes_per_param
from sim.pricing import check_overrides
from sim.resources import RESOURCE_KEYS, resource_columns, resource_metrics
from sim.schedulers import DEFAULT_BUCKET_MB, SchedulerOptions, make_plan
from sim.schedulers.names import WFBP
from sim.schedulers.registry import get_spec, settings_of
from sim.tensors import GRADIENTS, gradients_of

if TYPE_CHECKING:  # pandas is imported where a frame is built, not with sim
    from collections.abc import Callable

    import pandas as pd

__all__ = [
    "ARCHITECTURES", "COMPUTE_KINDS", "GRADIENTS", "METRIC_KEYS", "OPTIMIZERS", "RESOURCE_KEYS", "SimResult",
    "calibrate", "check_run_args", "clear_caches", "comm_costs",
    "interval_overlap_s", "resolve_method", "resolve_model", "simulate", "simulate_dag", "single_gpu_iteration_s_of",
    "sweep",
]

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
    """What a simulation returns: `simulate`, `simulate_dag` and the per-worker
    `sim.workers.simulate_workers` alike.

    ``metrics`` holds the same keys as ``python -m sim run --format json``
    (`sim.core.metrics.METRIC_KEYS`, plus the per-worker figures for a
    per-worker run); ``timeline`` follows `sim.core.timeline.TIMELINE_COLUMNS`
    and is built on first access; ``groups`` lists the messages in sending
    order, each a list of layer names.
    """

    iteration_time_s: float
    metrics: dict
    timeline: pd.DataFrame = _Lazy()  # type: ignore[assignment]
    groups: list[list[str]]
    plan: Plan
    model: Model = field(repr=False)
    cluster: Cluster = field(repr=False)
    #: per-worker runs (`sim.workers.simulate_workers`): the period of every
    #: iteration after the first (but the last, for a plan that updates per
    #: layer: `sim.workers.engine.SyncRun.periods_s`), each worker's wait before
    #: its update, the persistently slow workers and each worker's GPU; empty otherwise
    iteration_times_s: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    wait_s: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)), repr=False)
    straggler_workers: tuple[int, ...] = ()
    gpus_by_worker: tuple[str, ...] = ()
    #: ``timeline_of(n)``: the run's first n iterations, for a small per-layer-update run (`kept_builder`); else None
    timeline_of: Callable[[int], pd.DataFrame] | None = field(default=None, repr=False)


def single_gpu_iteration_s_of(model: Model, precision: str = "fp32", prefetch: bool = False) -> float:
    """Steady-state iteration time of ``model`` (with its times) on one GPU."""
    return single_gpu_iteration_s(model, precision, prefetch)


def simulate(
    model: Model, cluster: Cluster,
    scheduler: str = WFBP,
    *,
    batch_size: int,
    precision: str = "fp32", iterations: int = 1, prefetch: bool = False, bucket_mb: float = DEFAULT_BUCKET_MB,
    single_gpu_iteration_s: float | None = None, calibrate_iteration_s: float | None = None,
    method: str | None = None, architecture: str = "allreduce", options: SchedulerOptions | dict | None = None,
    engine: str = "auto", compression: str | Compression | None = None, gradients: str | None = None,
    optimizer: str = DEFAULT_OPTIMIZER, price_usd_per_hour: float | None = None, power_w: float | None = None,
) -> SimResult:
    """Time training iterations of ``model`` on ``cluster`` under ``scheduler``.

    Parameters
    ----------
    model, cluster : Model, Cluster
        The workload (compute times per GPU at ``batch_size``); GPUs, nodes, links, collective.
    scheduler : str
        A name from `sim.schedulers.SCHEDULERS`.
    batch_size : int
        Samples per GPU per iteration.
    precision : {"fp32", "tf32", "fp16", "amp"}
        `sim.model.PRECISIONS`: the compute rate and the gradient width (fp32 and tf32 4 bytes per parameter;
        fp16, an fp16 model with fp32 master weights, 2; amp, autocast: fp16 compute, fp32 gradients, 4).
    iterations : int
        Iterations in the returned timeline; the iteration time is the steady state's (`sim.core.metrics`).
    prefetch : bool
        Let io and h2d of the next iteration overlap the current one.
    bucket_mb : float
        Bucket size of ``bucket`` and ``ddp``, in MiB.
    single_gpu_iteration_s : float, optional
        The one-GPU iteration time for speedup (default: simulated).
    calibrate_iteration_s : float, optional
        A measured one-GPU iteration time at ``batch_size``: compute times are
        scaled by one factor so the one-GPU iteration takes exactly this.
    method : str, optional
        A method of the survey (`sim.methods.METHODS`, e.g. ``"BSP-PS"``): it sets architecture,
        scheduler and options (a dict of ``options`` then changes single settings).
    architecture : {"allreduce", "ps"}
        All-reduce, or a parameter server (`sim.comm.ps_cost`).
    options : SchedulerOptions or dict, optional
        The schedulers' and the parameter server's knobs (`sim.schedulers.knobs.KNOBS`);
        with it, a method or ``ps``, ``metrics`` adds ``method``, ``architecture`` and ``settings``.
    engine : {"auto", "general"}
        The fast path where it applies, or always the task graph (`simulate_dag`).
    compression : {"fp16", "bf16", "topk:RATIO", "powersgd:RANK"}, optional
        Gradient compression (`sim.compression`); ``metrics`` adds ``compression``.
    gradients : {"tensor", "layer"}, optional
        One gradient per parameter tensor or per layer (`sim.tensors`); default the model's, else ``DEFAULT_GRADIENTS``.
    optimizer, price_usd_per_hour, power_w : str, float, float
        Memory, update time and cost (`sim.resources`; ``metrics`` adds `RESOURCE_KEYS` after
        `METRIC_KEYS`): the optimizer's state and step (sgd, momentum, adam, adamw, lamb);
        per-GPU price and power.

    Returns ``SimResult``.
    """
    return _simulate(model, cluster, scheduler, batch_size, precision, iterations, prefetch, bucket_mb,
                     single_gpu_iteration_s, calibrate_iteration_s, engine=engine, method=method,
                     architecture=architecture, options=options, compression=compression, gradients=gradients,
                     resources=(optimizer, price_usd_per_hour, power_w))


def check_resource_args(optimizer=DEFAULT_OPTIMIZER, price_usd_per_hour=None, power_w=None) -> dict:
    """The memory and cost arguments of `simulate` and `sweep`, checked, as a dict."""
    check_choice("optimizer", optimizer, OPTIMIZERS)
    check_overrides(price_usd_per_hour, power_w)
    return {"optimizer": optimizer, "price_usd_per_hour": price_usd_per_hour, "power_w": power_w}


def simulate_dag(model: Model, cluster: Cluster, scheduler: str = WFBP, **kwargs) -> SimResult:
    """`simulate` by the general engine always: every task of the lowered graph
    (`sim.core.lower.lower`) timed by the engine (`sim.core.engine.run`),
    never the fast path (`sim.core.fast`), which it checks: the two give the
    same result. Takes `simulate`'s arguments but ``engine``.
    """
    if "engine" in kwargs:
        raise SimInputError("simulate_dag always runs the general engine: leave engine out (simulate takes it)")
    return simulate(model, cluster, scheduler, engine="general", **kwargs)


def comm_costs(model: Model, cluster: Cluster, precision: str, scheduler: str, architecture: str,
               options: SchedulerOptions) -> tuple[CommCost, CommCost | PSCost]:
    """The cost a scheduler plans with and the one the DAG is timed with.

    For the parameter server, planning sees push + pull as one all-reduce
    (`sim.comm.ps`); timing uses push and pull apart, with ByteScheduler's
    credit bounding the servers busy at once.
    """
    if architecture != "ps":
        key = None if getattr(model, "comm_s", None) is not None else (cluster, precision, scheduler, _presets_stamp())
        try:
            cost = _ALLREDUCE_COSTS.get(key)
        except TypeError:  # an unhashable field: worked out, not kept
            cost, key = None, None
        if cost is None:
            cost = cluster.framework_cost(cluster.comm_cost(model, precision), scheduler)
            if key is not None:
                with _COSTS_LOCK:  # (sessions of the dashboard run in threads)
                    if len(_ALLREDUCE_COSTS) >= _COSTS_KEPT:
                        _ALLREDUCE_COSTS.pop(next(iter(_ALLREDUCE_COSTS)), None)
                    _ALLREDUCE_COSTS[key] = cost
        return cost, cost
    spec = get_spec(scheduler)
    if spec.allreduce_only:
        raise SimInputError(f"scheduler {scheduler!r} decouples an all-reduce; it needs architecture 'allreduce'")
    in_flight = getattr(options, spec.ps_in_flight_knob) if spec.ps_in_flight_knob else None
    timing = cluster.framework_cost(
        cluster.ps_cost(servers=options.servers, colocated=options.colocated, in_flight=in_flight, model=model,
                        link_efficiency=options.ps_link_efficiency), scheduler, architecture)
    planning = CommCost(timing.push_alpha_s + timing.pull_alpha_s,
                        timing.push_beta_s_per_byte + timing.pull_beta_s_per_byte, timing.label)
    return planning, timing


#: All-reduce costs worked out (`comm_costs`), by cluster, precision, scheduler and the state of the
#: user's network presets file (`_presets_stamp`): a cost is a frozen value, shared by the runs that
#: ask for it; a model's measured times are not kept. At most `_COSTS_KEPT`, the oldest dropped first.
_ALLREDUCE_COSTS: dict = {}
_COSTS_LOCK = threading.Lock()
_COSTS_KEPT = 256
_PRESETS_PATHS: dict = {}


def _presets_stamp() -> tuple:
    """What the network presets depend on besides the built-in table: the user's presets file
    (`sim.catalog.user_networks_path`) and its `sim.catalog.file_stamp` (as the catalog reads it again)."""
    where = (os.environ.get(USER_NETWORKS_ENV), os.environ.get("HOME"))  # what the file's path depends on
    path = _PRESETS_PATHS.get(where)
    if path is None:
        if len(_PRESETS_PATHS) >= _COSTS_KEPT:
            _PRESETS_PATHS.clear()
        path = _PRESETS_PATHS[where] = str(user_networks_path())
    try:
        stat = os.stat(path)
    except OSError:  # no file (or none readable): the built-in table alone
        return (path,)
    return path, *file_stamp(stat), stat.st_mode


def clear_caches() -> None:
    """Drop what `simulate` keeps between runs (all-reduce costs, plans, one-GPU iteration times, costs
    without interference, the timeline's shared columns), so that the next run works them out
    again: for measuring a cold run. Results do not depend on it."""
    with _COSTS_LOCK:
        _ALLREDUCE_COSTS.clear()
        _PLANS.clear()
    _PRESETS_PATHS.clear()
    core_run.forget_kept()
    forget_static_columns()


def compress(model: Model, cluster: Cluster, scheduler: str, architecture: str, cost: CommCost, precision: str,
             compression: Compression) -> CommCost:
    """``cost`` with ``compression`` (`sim.compression`); refused where there is no all-reduce to compress."""
    reason = refusal(scheduler, architecture)
    if reason:
        raise SimInputError(reason)
    if cluster.gpus == 1:
        return cost
    gpu = get_gpu(cluster.gpu)
    return compressed_cost(cost, compression, model.params, elem_bytes=bytes_per_param(precision), gpus=cluster.gpus,
                           mem_bw_bytes_per_s=gpu.mem_bw_bytes_per_s, peak_flops=gpu.peak_flops("fp32"))


def plan_run(model: Model, cluster: Cluster, scheduler: str, architecture: str, opts: SchedulerOptions,
             precision: str, bucket_mb: float, compression: Compression | None = None,
             ) -> tuple[Plan, CommCost, CommCost | PSCost]:
    """The scheduler's plan of a resolved run, with the cost it planned with and the one it is timed with
    (with ``compression``, the planning cost is reported uncompressed and both are compressed)."""
    plan_cost, cost = comm_costs(model, cluster, precision, scheduler, architecture, opts)
    planning = plan_cost
    if compression is not None:
        planning = cost = compress(model, cluster, scheduler, architecture, cost, precision, compression)
    if cluster.gpus > 1:
        plan = kept_plan(model, precision, scheduler, planning, bucket_mb, opts)
        if architecture == "ps" and not plan.partition_bytes:  # BytePS partitions every message
            plan = dataclasses.replace(plan, partition_bytes=int(opts.partition_bytes))
    else:  # one GPU sends nothing: only check the scheduler and its arguments (a per-layer-update
        # framework's step still returns at the end of backward: `single_gpu_iteration_s`'s update_overlaps_io)
        probe = make_plan(scheduler, NO_GRADIENTS, plan_cost, bucket_mb=bucket_mb, options=opts)
        plan = Plan(probe.scheduler, (), per_layer_update=probe.per_layer_update)
    return plan, plan_cost, cost


#: Plans made, per resolved model (its times and sizes frozen: `_frozen`) and what else a plan reads
#: (precision, scheduler, planning cost, bucket size, options): a plan is a frozen value, made once
#: per distinct plan and shared by the runs that ask for it. At most `_PLANS_KEPT` per model.
_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_PLANS_KEPT = 64


def kept_plan(model: Model, precision: str, scheduler: str, planning, bucket_mb: float, opts) -> Plan:
    """``make_plan`` of the model's gradients, made once per distinct plan of a model whose times and
    sizes cannot change (read-only arrays it owns, as `resolve_model` leaves them); else made afresh."""
    key = (precision, scheduler, planning, (type(bucket_mb), bucket_mb), opts)
    kept = None
    if _frozen(model):
        try:
            with _COSTS_LOCK:
                kept = _PLANS.setdefault(model, {})
                plan = kept.get(key)
        except TypeError:  # an unhashable planning cost (measured times): made afresh, not kept
            kept, plan = None, None
        if plan is not None:
            return plan
    plan = make_plan(scheduler, gradient_layers(model, precision), planning, bucket_mb=bucket_mb, options=opts)
    if kept is not None:
        with _COSTS_LOCK:
            if len(kept) >= _PLANS_KEPT:
                kept.pop(next(iter(kept)), None)
            kept[key] = plan
    return plan


def _frozen(model) -> bool:
    """True when every array a plan reads of ``model`` (sizes, times) is read-only and owns its data."""
    return all(isinstance(a, np.ndarray) and a.base is None and not a.flags.writeable
               for a in (model.params, model.fwd_s, model.bwd_s))


def group_names(plan: Plan, layer_names) -> list[list[str]]:
    """The plan's messages as lists of layer names, in sending order (new lists every call)."""
    if not plan.groups:
        return []
    layers = plan.message_layers
    names = list(map(layer_names.__getitem__, layers.flat.tolist()))
    if len(names) == len(plan.groups) and not layers.has_empty:  # one layer each
        return [[name] for name in names]
    bounds = layers.offsets.tolist()
    bounds.append(len(names))
    return [names[lo:hi] for lo, hi in zip(bounds, bounds[1:], strict=False)]


def run_metrics(model: Model, cluster: Cluster, scheduler: str, batch_size: int, precision: str,
                plan_cost: CommCost, t_iter: float, phases: dict, single_s: float, groups: list,
                architecture: str = "allreduce") -> dict:
    """The metrics dict of one run (`METRIC_KEYS`), from its figures."""
    if t_iter <= 0 or not math.isfinite(t_iter):
        raise SimInputError("the iteration takes no time: give the model non-zero compute times")
    if not math.isfinite(batch_size * cluster.gpus / t_iter):  # a subnormal time (1e-310 s)
        raise SimInputError(f"the iteration takes {t_iter:g} s, too short for a throughput: give the model "
                            "larger compute times")
    if not single_s > 0:  # only communication: no speedup to speak of
        raise SimInputError("the one-GPU iteration takes no time: give the model non-zero compute times")
    return {
        "model": model.name, "scheduler": scheduler, "gpus": cluster.gpus, "gpus_per_node": cluster.gpus_per_node,
        "nodes": cluster.nodes, "batch_size": int(batch_size), "precision": precision, "network": cluster.network,
        "intra": cluster.intra, "collective": cluster.collective, "alpha_s": plan_cost.alpha_s,
        "beta_s_per_byte": plan_cost.beta_s_per_byte, "iteration_time_s": t_iter,
        "throughput_samples_per_s": batch_size * cluster.gpus / t_iter, **phases,
        **{k: v for k, v in rates(batch_size, cluster.gpus, t_iter, single_s).items() if k != "throughput_samples_per_s"},
        "num_messages": len(groups), "groups": groups, "params": model.total_params, "gradients": gradients_of(model),
        "framework": framework_name(cluster, scheduler, architecture),  # sim.frameworks
        "interference_s": float(phases.get("interference_s", 0.0)),
    }


def _simulate(model, cluster, scheduler, batch_size, precision, iterations, prefetch, bucket_mb,
              single_gpu_iteration_s, calibrate_iteration_s, *, engine, method=None, architecture="allreduce",
              options=None, compression=None, resources=None, gradients=None):
    extended = method is not None or architecture != "allreduce" or options is not None
    check_workload(model, cluster)
    if method is None:
        get_spec(scheduler)  # an unknown name, or not a name, is refused before anything reads it
    check_run_options(prefetch, bucket_mb)
    compression = parse_compression(compression)
    resources = check_resource_args(*(resources or ()))
    scheduler, architecture, opts = resolve_method(method, scheduler, architecture, options)
    check_run_args(batch_size, iterations, precision)
    if single_gpu_iteration_s is not None:
        check_float("single_gpu_iteration_s", single_gpu_iteration_s, 0, MAX_TIME_S, low_open=True)
    one_gpu = resolve_model(model, cluster, batch_size, precision, prefetch, calibrate_iteration_s, gradients,
                            optimizer=resources["optimizer"])
    model = with_sync_wait(one_gpu, cluster)  # the slowest worker's compute (sim.jitter)
    plan, plan_cost, cost = plan_run(model, cluster, scheduler, architecture, opts, precision, bucket_mb, compression)
    timing = time_plan(model, plan, [cost], precision=precision, iterations=iterations, prefetch=prefetch,
                       engine=engine)
    t_iter = float(timing.iteration_time_s[0])
    phases = {key: float(value[0]) for key, value in timing.phases.items()}
    if single_gpu_iteration_s is not None and single_gpu_iteration_s > t_iter * (1 + 1e-9):
        # speedup and efficiency would pass P (4 GPUs of a model computing 7 ms each gave speedup 148 for 1 s)
        raise SimInputError(f"single_gpu_iteration_s = {single_gpu_iteration_s:g} s is longer than the simulated "
                            f"{cluster.gpus}-GPU iteration ({t_iter:.6g} s): one GPU at the same batch is never "
                            "slower; give this model's one-GPU time, or calibrate_iteration_s to scale the model to it")
    if single_gpu_iteration_s is None:
        # (the argument shadows the function of the same name: reach it through its module)
        single_gpu_iteration_s = t_iter if cluster.gpus == 1 and not plan.per_layer_update else (
            core_run.single_gpu_iteration_s(one_gpu, precision, prefetch, engine, plan.per_layer_update))
    groups = group_names(plan, model.layer_names)
    metrics = run_metrics(model, cluster, scheduler, batch_size, precision, plan_cost, t_iter, phases,
                          single_gpu_iteration_s, groups, architecture)
    metrics.update(resource_metrics(model, gpu=cluster.gpu, gpus=cluster.gpus, scheduler=scheduler, groups=groups,
                                    batch_size=batch_size, precision=precision, iteration_time_s=t_iter,
                                    bucket_mb=bucket_mb, options=opts, compression=compression, **resources))
    if extended:
        metrics.update(method=method, architecture=architecture,
                       settings=settings_of(scheduler, architecture, opts, bucket_mb))
    if compression is not None:
        metrics["compression"] = str(compression)
    layers = None if model.tensor_layers is None else (model.layer_names, model.tensor_layers)
    timeline = functools.partial(timing.timeline, 0, iterations, layers)
    return SimResult(t_iter, metrics, timeline, groups, plan, model, cluster,
                     timeline_of=kept_builder(timing.timeline, layers, plan,
                                              model.num_layers * iterations_to_run(plan, iterations)))


def _check_sweep_lists(model, cluster, gpus, schedulers, networks, bucket_mbs) -> None:
    """`sweep`'s workload and lists: each a list (networks and bucket sizes optional), none empty."""
    check_workload(model, cluster)
    for name, values in (("gpus", gpus), ("schedulers", schedulers), ("networks", networks), ("bucket_mbs", bucket_mbs)):
        optional = name in ("networks", "bucket_mbs")
        if (values is not None or not optional) and (isinstance(values, (str, bytes, dict)) or np.ndim(values) != 1):
            raise SimInputError(f"sweep: {name} must be a list, got {type(values).__name__} {repr(values)[:40]}")
    if len(gpus) == 0 or len(schedulers) == 0:
        raise SimInputError("sweep needs at least one GPU count and one scheduler")
    if networks is not None and not networks:
        raise SimInputError("networks, when given, needs at least one network")
    if networks is not None and (cluster.alpha_s is not None or getattr(model, "comm_s", None) is not None):
        # every network would cost the same, under rows labelled with each (the CLI refuses --network here too)
        raise SimInputError("sweep: networks does nothing when the cluster sets alpha_s and beta_s_per_byte or the "
                            "model has measured comm_ms: leave networks out")
    if bucket_mbs is not None and not bucket_mbs:
        raise SimInputError("bucket_mbs, when given, needs at least one bucket size")


def sweep(
    model: Model, cluster: Cluster, *, gpus: list[int], schedulers: list[str], batch_size: int,
    precision: str = "fp32", prefetch: bool = False, bucket_mb: float = DEFAULT_BUCKET_MB,
    calibrate_iteration_s: float | None = None, networks: list[str] | None = None,
    bucket_mbs: list[float] | None = None, jobs: int | None = None, client=None, progress=None,
    optimizer: str = DEFAULT_OPTIMIZER, price_usd_per_hour: float | None = None, power_w: float | None = None,
    gradients: str | None = None,
) -> pd.DataFrame:
    """One row of `simulate` metrics per (gpus, scheduler), in that order.

    With ``networks``, one block of such rows per network, in that order.
    With ``bucket_mbs``, each (gpus, scheduler) row becomes one row per
    bucket size, in that order, and a ``bucket_mb`` column is added (it only
    changes the ``bucket`` scheduler).

    The grid runs through `sim.parallel.run_grid`: in this process when it is
    small, else on ``jobs`` local processes (default: every core), or on a
    Dask cluster when ``client`` (a ``dask.distributed.Client``) is given.
    The rows are the same whichever way it ran. ``progress(done, total)`` is called as configurations
    finish. The `RESOURCE_KEYS` columns follow, as `simulate` gives them (``optimizer``, price, power).
    ``gradients`` as in `simulate`.
    """
    from sim.parallel import check_grid_size, run_grid

    _check_sweep_lists(model, cluster, gpus, schedulers, networks, bucket_mbs)
    check_run_args(batch_size, 1, precision)
    resources = check_resource_args(optimizer, price_usd_per_hour, power_w)
    check_grid_size(len(networks or [0]) * len(gpus) * len(schedulers) * len(bucket_mbs or [0]),
                    clusters=len(networks or [0]) * len(gpus))
    model = resolve_model(model, cluster, batch_size, precision, prefetch, calibrate_iteration_s, gradients,
                          optimizer=resources["optimizer"])
    base = dataclasses.asdict(cluster)
    configs = []
    for network in networks or [cluster.network]:
        for p in gpus:
            p = check_int("gpus", p, 1)
            dataclasses.replace(cluster, network=network, gpus=p)  # bad values raise here, unprefixed
            for name in schedulers:
                for size in bucket_mbs or [bucket_mb]:
                    make_plan(name, NO_GRADIENTS, NO_COMM, bucket_mb=size)  # likewise
                    configs.append({**base, "network": network, "gpus": p, "model": model, "scheduler": name,
                                    "batch_size": batch_size, "precision": precision, "prefetch": prefetch,
                                    "bucket_mb": size})
    frame = run_grid(configs, jobs=jobs, client=client, progress=progress)
    sizes = [c["bucket_mb"] for c in configs]
    frame = resource_columns(frame, model, gpu=cluster.gpu, bucket_mbs=sizes, **resources)
    if bucket_mbs is not None:
        frame["bucket_mb"] = sizes
    return frame
