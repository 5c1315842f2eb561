"""A workload ready to time: the model with compute times for a GPU, batch
and precision, calibrated to a measured one-GPU iteration if asked; and the
checks every run shares."""

from __future__ import annotations

import threading
import weakref

import numpy as np

from sim.checks import MAX_TIME_S, check_float, check_int
from sim.errors import SimInputError
from sim.model import Model, bytes_per_param, check_batch_size

__all__ = ["MAX_ITERATIONS", "calibrate", "check_run_args", "check_workload", "resolve_model", "with_sync_wait"]

#: No training step takes under a microsecond: a shorter measured iteration is a unit mistake.
MIN_ITERATION_S = 1e-6

MAX_ITERATIONS = 1000


def check_workload(model, cluster) -> None:
    """Refuse a model that is not a `sim.Model` or a cluster that is not a `sim.Cluster`."""
    from sim.cluster import Cluster  # (sim.cluster reaches this module: imported when used)

    if not isinstance(model, Model):
        raise SimInputError(f"model must be a sim.Model (sim.load_model(name) makes one), got {type(model).__name__}")
    if not isinstance(cluster, Cluster):
        raise SimInputError(f"cluster must be a sim.Cluster, got {type(cluster).__name__}")


def check_run_options(prefetch, bucket_mb) -> None:
    """Refuse a ``prefetch`` that is not a bool, or a ``bucket_mb`` that is no bucket size, whichever
    scheduler reads it (`sim.simulate` and a sweep's rows alike)."""
    from sim.schedulers.knobs import KNOBS  # (the schedulers reach this module: imported when used)

    if not isinstance(prefetch, bool | np.bool_):
        raise SimInputError(f"prefetch must be True or False, got {prefetch!r}")
    KNOBS["bucket_mb"].check(bucket_mb)


def check_run_args(batch_size: int, iterations: int, precision: str) -> None:
    """Check the arguments every run shares; a `SimInputError` names the bad one."""
    check_batch_size(batch_size)
    check_int("iterations", iterations, 1, MAX_ITERATIONS)
    bytes_per_param(precision)


def calibrate(model, measured_iteration_s: float, *, precision: str = "fp32", prefetch: bool = False):
    """Scale ``model``'s compute times so its one-GPU iteration takes ``measured_iteration_s``.

    One factor s multiplies every forward, backward and update time, keeping
    the per-layer proportions. io and h2d stay as given. The one-GPU
    iteration is io + h2d + s * C without prefetch (C the compute time), so
    s = (T - io - h2d) / C; with prefetch it is max(io, h2d, s * C), so s = T / C.
    """
    t = check_float("calibrate_iteration_s", measured_iteration_s, MIN_ITERATION_S, MAX_TIME_S)
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


#: Resolved models kept per model (a model is immutable): `resolve_model` of the same
#: arguments returns the same object. At most `_KEPT` per model, the oldest dropped first.
_RESOLVED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_RESOLVED_LOCK = threading.Lock()
_KEPT = 32


def resolve_model(model, cluster, batch_size: int, precision: str, prefetch: bool = False,
                  calibrate_iteration_s: float | None = None, gradients: str | None = None,
                  optimizer: str | None = None):
    """The model with compute times for this GPU and batch (a zoo model's update
    timed for ``optimizer``, `sim.compute.update_time_s`), calibrated if asked,
    in the granularity schedulers plan over: one gradient per parameter tensor
    or per layer (``gradients``, else the model's own choice, else
    `sim.tensors.DEFAULT_GRADIENTS`; `sim.model.Model.with_gradients`).
    Worked out once per model and arguments. A model that is not a `sim.Model` or a cluster that is
    not a `sim.Cluster` is refused here, for every entry point (`check_workload`)."""
    check_workload(model, cluster)
    # each argument with its type: True == 1 and hash(True) == hash(1), and a bool must meet the checks, not a
    # result kept for the number
    key = tuple((type(v), v) for v in (cluster.gpu, batch_size, precision, bool(prefetch), calibrate_iteration_s,
                                       gradients, optimizer)) + (_fingerprint(model),)
    try:
        with _RESOLVED_LOCK:
            kept = _RESOLVED.get(model)
            if kept is not None and key in kept:
                return kept[key]
    except TypeError:  # an unhashable argument: the checks below name it
        kept = None
    resolved = model.timed(gpu=cluster.gpu, batch_size=batch_size, precision=precision, optimizer=optimizer)
    if calibrate_iteration_s is not None:
        resolved = calibrate(resolved, calibrate_iteration_s, precision=precision, prefetch=prefetch)
    resolved = resolved.with_gradients(gradients)
    if resolved is model:  # already resolved: kept as it is (a value must not hold its own key)
        return resolved
    _read_only(resolved, model)
    try:
        with _RESOLVED_LOCK:
            kept = _RESOLVED.setdefault(model, {})
            if len(kept) >= _KEPT:
                del kept[next(iter(kept))]
            kept[key] = resolved
    except TypeError:
        pass
    return resolved


_ARRAYS = ("params", "fwd_s", "bwd_s", "comm_s", "fwd_flops", "out_elems")


def _fingerprint(model) -> int:
    """A hash of what the model's numbers are now (a caller may have changed an array in place)."""
    parts = [getattr(model, a, None) for a in _ARRAYS]
    return hash((tuple(None if p is None else hash(p.tobytes()) for p in parts),
                 getattr(model, "io_s", 0.0), getattr(model, "h2d_s", 0.0), getattr(model, "update_s", 0.0)))


def _read_only(resolved, given) -> None:
    """Make a resolved model's own arrays read-only: it is shared by every run that asks
    for it (arrays it shares with the caller's model are left as they are)."""
    for attr in _ARRAYS:
        arr, mine = getattr(resolved, attr, None), getattr(given, attr, None)
        if isinstance(arr, np.ndarray) and arr.base is None and not (
                isinstance(mine, np.ndarray) and np.may_share_memory(arr, mine)):
            arr.flags.writeable = False


def with_sync_wait(model, cluster):
    """``model`` as the slowest of the cluster's workers computes it on average: every compute time
    times `sim.cluster.Cluster.sync_wait_factor` (`sim.jitter`); ``model`` itself on one GPU or
    without jitter. The one-GPU baseline is timed on ``model`` as given."""
    factor = cluster.sync_wait_factor()
    return model if factor == 1.0 else model.scaled(factor)
