"""Tuning sweeps: one knob of a scheduler over a list of values, the best value and its gain.

PyTorch users ask which ``bucket_cap_mb`` is best for their model and
cluster (pytorch/pytorch#118421); Horovod's fusion threshold, ByteScheduler's
partition size and credit raise the same question. `tune` simulates each
value and reports the fastest against the default.

>>> import sim
>>> from sim.tune import tune
>>> res = tune(sim.load_model("resnet50"), sim.Cluster(gpus=16, gpus_per_node=4), "bucket-mb",
...            [1, 5, 25, 100], batch_size=64)                      # doctest: +SKIP
>>> res.best["value"], res.best["gain_pct"]                          # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.api import plan_run, resolve_method, resolve_model, simulate
from sim.core.metrics import iterations_to_run
from sim.core.run import MAX_TASKS, estimated_tasks
from sim.errors import SimInputError
from sim.runs import DEFAULT_ARCHITECTURE, DEFAULT_SCHEDULER
from sim.schedulers.knobs import DEFAULT_BUCKET_MB
from sim.schedulers.knobs import KNOBS as REGISTRY_KNOBS
from sim.schedulers.registry import PS_ARCHITECTURE, check_knobs_apply, knob_users

__all__ = ["KNOBS", "MAX_VALUES", "TuneResult", "check_scan_tasks", "knob_label", "tune", "tune_setup"]

#: Values of one tune: each is a full simulation (up to about a second), so at most a few minutes.
MAX_VALUES = 1000


def knob_label(name: str) -> str:
    """A knob's name in `tune` and on the command line: ``bucket_mb`` -> ``bucket-mb``."""
    return REGISTRY_KNOBS[name].flag.removeprefix("--")


#: knob -> (SchedulerOptions field or "bucket_mb", the scheduler it tunes by default), for every knob
#: of the registry (`sim.schedulers.knobs.KNOBS`); a knob no scheduler reads is tuned on the parameter server.
class _Tunable(Mapping):
    """The live view: a knob a scheduler module declares is tunable as soon as it is registered."""

    def _items(self) -> dict[str, tuple[str, str]]:
        out = {}
        for k in REGISTRY_KNOBS.values():
            users = [u for u in knob_users(k.name) if not u.startswith("architecture")]
            declared = users and k.name not in _BUILTIN_KNOBS  # by a scheduler module: tuned on it
            owner = k.tune_scheduler or (users[0] if declared else DEFAULT_SCHEDULER)
            out[knob_label(k.name)] = (k.name, owner)
        return out

    def __getitem__(self, key: str):
        return self._items()[key]

    def __iter__(self):
        return iter(self._items())

    def __len__(self) -> int:
        return len(self._items())


#: The knobs of the built-in registry, tuned on their ``tune_scheduler`` (or the default scheduler).
_BUILTIN_KNOBS = frozenset(REGISTRY_KNOBS)
KNOBS: Mapping[str, tuple[str, str]] = _Tunable()


@dataclass(frozen=True, eq=False)
class TuneResult:
    """``frame``: one row per value (knob, value, iteration_time_s,
    throughput_samples_per_s, gain_pct over the default); ``best``: the
    fastest row with the default's value and time, and ``same_for_every_value``: True when some
    value other than the default was tried and every value gives the default's iteration time
    (the knob does not change this configuration's timing, e.g. ``credit`` for ``bytescheduler``
    on all-reduce, whose partitions the model sends one at a time)."""

    frame: pd.DataFrame
    best: dict


def check_scan_tasks(model, cluster, scheduler: str, architecture: str, knob: str, values, opts, batch_size: int,
                     precision: str, bucket_mb: float) -> None:
    """Refuse, before any run, a scan whose runs together would build more than `MAX_TASKS` tasks (the budget
    of one run): 1,000 partition sizes of 4 kB ran past 120 s, each run within its own budget (hostile review,
    2026-11-25). Each value's plan is made (`sim.api.plan_run`) and its tasks counted from sizes alone."""
    name = KNOBS[knob][0]
    resolved = resolve_model(model, cluster, batch_size, precision)
    total = 0
    for value in values:
        value = _value(knob, name, value)
        size, knobs = (value, opts) if name == "bucket_mb" else (bucket_mb, _with_option(opts, name, value))
        plan = plan_run(resolved, cluster, scheduler, architecture, knobs, precision, size)[0]
        total += estimated_tasks(resolved, plan, precision, iterations_to_run(plan, 1))
        if total > MAX_TASKS:
            raise SimInputError(f"tune: the runs of {len(values) - 1:,} values would build over {MAX_TASKS:,} tasks "
                                "together (sim.core.run.MAX_TASKS, the budget of one run): try fewer values, or "
                                "larger partitions")


def _with_option(opts, name: str, value):
    """``opts`` with knob ``name`` set: a field, or a knob a scheduler module declared (kept in ``extra``)."""
    if name in {f.name for f in dataclasses.fields(opts)}:
        return dataclasses.replace(opts, **{name: value})
    return dataclasses.replace(opts, extra=tuple(sorted({**dict(opts.extra), name: value}.items())))


def _value(knob: str, name: str, value):
    """A value to try, as the knob's type: whole numbers for int knobs, 0 or 1 for a switch."""
    spec = REGISTRY_KNOBS[name]
    kind = spec.kind
    if value is None or (kind is bool and isinstance(value, bool)):  # a default: None (servers) or a switch
        return value
    if kind in (int, bool):
        if (isinstance(value, bool) or not math.isfinite(float(value)) or float(value) != int(value)
                or (kind is bool and value not in (0, 1))):
            raise SimInputError(f"{knob} values must be {'0 or 1' if kind is bool else 'whole numbers'}, got {value!r}")
        value = kind(int(value))
    return spec.check(value)


def tune_setup(knob: str, *, scheduler: str | None = None, method: str | None = None,
               architecture: str | None = None, options: dict | None = None):
    """``(scheduler, architecture, SchedulerOptions)`` of the runs that tune ``knob``;
    an unknown knob, or one these runs do not read, is an error."""
    if knob not in KNOBS:
        raise SimInputError(f"unknown knob {knob!r}; valid: {', '.join(KNOBS)}")
    if method is not None and scheduler is not None:
        raise SimInputError("give a method or a scheduler, not both")
    name, owner = KNOBS[knob]
    if architecture is None and method is None:
        only_ps = knob_users(name) == [f"architecture {PS_ARCHITECTURE}"]
        architecture = PS_ARCHITECTURE if only_ps else DEFAULT_ARCHITECTURE
    # a method sets the scheduler itself: the knob's owner is the default only without one
    sched, arch, opts = resolve_method(method, scheduler or (owner if method is None else DEFAULT_SCHEDULER),
                                       architecture or DEFAULT_ARCHITECTURE, options)
    check_knobs_apply([name], [(sched, arch)], label=knob_label)
    return sched, arch, opts


def tune(model, cluster, knob: str, values, *, batch_size: int, scheduler: str | None = None,
         method: str | None = None, architecture: str | None = None, options: dict | None = None,
         precision: str = "fp32", bucket_mb: float = DEFAULT_BUCKET_MB) -> TuneResult:
    """Simulate ``knob`` at each of ``values``; the best value and its gain over the default.

    Parameters
    ----------
    knob : str
        One of `KNOBS`: ``bucket-mb``, ``fusion-threshold-mb``, ``partition-bytes``, ``credit``, ...
    values : sequence of numbers
        Whole numbers for the whole-number knobs, 0 or 1 for a switch.
    scheduler : str, optional
        Default: the scheduler the knob belongs to (`KNOBS`), unless a
        ``method`` sets it.
    architecture : str, optional
        Default: ``ps`` for a knob only the parameter server reads, else ``allreduce``.

    Returns
    -------
    TuneResult
        ``gain_pct`` = (t_default / t - 1) x 100: how much faster than the
        default value (``bucket_mb`` 25, fusion threshold 64 MiB, partition
        4,096,000 bytes, credit 4, or the method's setting). Ties go to the
        first value given. A knob the run does not read is an error.
    """
    sched, arch, opts = tune_setup(knob, scheduler=scheduler, method=method, architecture=architecture,
                                   options=options)
    values = list(values)
    if not values or len(values) > MAX_VALUES:
        raise SimInputError(f"tune needs at least one value and at most {MAX_VALUES:,}, got {len(values):,}")
    name = KNOBS[knob][0]

    def run(value):
        if name == "bucket_mb":
            value = _value(knob, name, value)
            return simulate(model, cluster, sched, batch_size=batch_size, precision=precision, bucket_mb=value,
                            architecture=arch, options=opts)
        return simulate(model, cluster, sched, batch_size=batch_size, precision=precision, bucket_mb=bucket_mb,
                        architecture=arch, options=_with_option(opts, name, _value(knob, name, value)))

    default = bucket_mb if name == "bucket_mb" else getattr(opts, name)
    if name == "bucket_mb" and not math.isfinite(float(default)):
        raise SimInputError("bucket_mb must be finite")
    check_scan_tasks(model, cluster, sched, arch, knob, [default, *values], opts, batch_size, precision, bucket_mb)
    t_default = run(default).iteration_time_s
    rows = []
    for value in values:
        res = run(value)
        rows.append({"knob": knob, "value": value, "scheduler": sched, "method": method,
                     "iteration_time_s": res.iteration_time_s,
                     "throughput_samples_per_s": res.metrics["throughput_samples_per_s"],
                     "gain_pct": 100.0 * (t_default / res.iteration_time_s - 1)})
    frame = pd.DataFrame(rows)
    times = frame["iteration_time_s"].to_numpy()
    i = int(times.argmin())
    best = {**frame.iloc[i].to_dict(), "default_value": default, "default_iteration_time_s": t_default,
            # (only when some value other than the default was tried: one value alone says nothing)
            "same_for_every_value": bool(np.all(times == t_default)) and any(v != default for v in values)}
    return TuneResult(frame, best)
