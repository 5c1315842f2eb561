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
from dataclasses import dataclass

import pandas as pd

from sim.api import resolve_method, simulate
from sim.errors import SimInputError
from sim.schedulers import DEFAULT_BUCKET_MB

__all__ = ["KNOBS", "TuneResult", "tune"]

#: knob -> (SchedulerOptions field or "bucket_mb", the scheduler it tunes by default)
KNOBS: dict[str, tuple[str, str]] = {
    "bucket-mb": ("bucket_mb", "ddp"),
    "fusion-threshold-mb": ("fusion_threshold_mb", "horovod"),
    "partition-bytes": ("partition_bytes", "bytescheduler"),
    "credit": ("credit", "bytescheduler"),
}


@dataclass(frozen=True, eq=False)
class TuneResult:
    """``frame``: one row per value (knob, value, iteration_time_s,
    throughput_samples_per_s, gain_pct over the default); ``best``: the
    fastest row with the default's value and time."""

    frame: pd.DataFrame
    best: dict


def tune(model, cluster, knob: str, values, *, batch_size: int, scheduler: str | None = None,
         method: str | None = None, architecture: str = "allreduce", options: dict | None = None,
         precision: str = "fp32", bucket_mb: float = DEFAULT_BUCKET_MB) -> TuneResult:
    """Simulate ``knob`` at each of ``values``; the best value and its gain over the default.

    Parameters
    ----------
    knob : {"bucket-mb", "fusion-threshold-mb", "partition-bytes", "credit"}
    values : sequence of numbers
        Whole numbers for ``partition-bytes`` and ``credit``.
    scheduler : str, optional
        Default: the scheduler the knob belongs to (`KNOBS`), unless a
        ``method`` sets it.

    Returns
    -------
    TuneResult
        ``gain_pct`` = (t_default / t - 1) x 100: how much faster than the
        default value (``bucket_mb`` 25, fusion threshold 64 MiB, partition
        4,096,000 bytes, credit 4, or the method's setting). Ties go to the
        first value given.
    """
    if knob not in KNOBS:
        raise SimInputError(f"unknown knob {knob!r}; valid: {', '.join(KNOBS)}")
    values = list(values)
    if not values:
        raise SimInputError("tune needs at least one value")
    name, owner = KNOBS[knob]
    sched, arch, opts = resolve_method(method, scheduler or owner, architecture, options)
    if method is not None and scheduler is not None:
        raise SimInputError("give a method or a scheduler, not both")

    def run(value):
        if name == "bucket_mb":
            return simulate(model, cluster, sched, batch_size=batch_size, precision=precision, bucket_mb=value,
                            architecture=arch, options=opts)
        if name in ("partition_bytes", "credit"):
            if isinstance(value, bool) or float(value) != int(value):
                raise SimInputError(f"{knob} values must be whole numbers, got {value!r}")
            value = int(value)
        return simulate(model, cluster, sched, batch_size=batch_size, precision=precision, bucket_mb=bucket_mb,
                        architecture=arch, options=dataclasses.replace(opts, **{name: value}))

    default = bucket_mb if name == "bucket_mb" else getattr(opts, name)
    if name == "bucket_mb" and not math.isfinite(float(default)):
        raise SimInputError("bucket_mb must be finite")
    t_default = run(default).iteration_time_s
    rows = []
    for value in values:
        res = run(value)
        rows.append({"knob": knob, "value": value, "scheduler": sched, "method": method,
                     "iteration_time_s": res.iteration_time_s,
                     "throughput_samples_per_s": res.metrics["throughput_samples_per_s"],
                     "gain_pct": 100.0 * (t_default / res.iteration_time_s - 1)})
    frame = pd.DataFrame(rows)
    i = int(frame["iteration_time_s"].to_numpy().argmin())
    best = {**frame.iloc[i].to_dict(), "default_value": default, "default_iteration_time_s": t_default}
    return TuneResult(frame, best)

