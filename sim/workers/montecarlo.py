"""Monte Carlo of the per-worker engine beside the closed form for the expected maximum."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.checks import check_int
from sim.cluster import Cluster
from sim.core.workload import check_workload
from sim.errors import SimInputError
from sim.model import Model
from sim.schedulers.names import SYNCEASGD
from sim.workers.engine import ideal_iteration_s, run_sync
from sim.workers.stragglers import StragglerSpec, expected_max_factor

__all__ = ["Profile", "monte_carlo", "predicted_period_s", "profile"]


@dataclass(frozen=True)
class Profile:
    """One GPU type's compute: totals and each message's ready offset from backward start."""

    forward_s: float
    backward_s: float
    update_s: float
    message_ready_s: np.ndarray


def profile(model: Model, plan) -> Profile:
    """Compute totals of a timed model and each message's ready time from backward start."""
    ready_all = np.cumsum(model.bwd_s[::-1])[::-1]  # r[l] = sum of t_b over layers l..n-1
    backward = float(model.bwd_s.sum())
    if plan.after_backward:
        ready = np.full(len(plan.groups), backward)
    else:
        ready = np.array([max(float(ready_all[i]) for i in members) for members in plan.groups], dtype=float)
    return Profile(float(model.fwd_s.sum()), backward, float(model.update_s), ready)


def predicted_period_s(spec: StragglerSpec, ideal_s: float, prof: Profile, workers: int, prefetch: bool) -> float:
    """Closed-form mean period where one exists (see the module docstring), else NaN.

    It needs every message to wait for the whole backward pass (no overlap of
    communication with compute) and no prefetch, so that the period is
    ``io + h2d + U + T_c + max_w f_w (F + B)``.
    """
    if prefetch or np.any(prof.message_ready_s < prof.backward_s):
        return math.nan
    if spec.stragglers and spec.factor != 1:
        if spec.has_compute_noise:
            return math.nan
        return ideal_s + (spec.factor - 1) * (prof.forward_s + prof.backward_s + prof.update_s)
    return ideal_s + (prof.forward_s + prof.backward_s) * (expected_max_factor(spec, workers) - 1)


def monte_carlo(
    model: Model,
    cluster: Cluster,
    scheduler: str = SYNCEASGD,
    *,
    batch_size: int,
    straggler: StragglerSpec,
    workers: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
    iterations: int = 300,
    seed: int = 0,
    precision: str = "fp32",
    prefetch: bool = False,
) -> pd.DataFrame:
    """Iteration-time distribution as workers are added, beside the closed form.

    For each P in ``workers`` the per-worker engine runs ``iterations``
    iterations (seed ``seed + P``); with fewer workers than stragglers, every
    worker is a straggler. The closed form, where one exists, is
    ``t_ideal + (F + B) (E[max of P factors] - 1)`` when every message waits
    for the whole backward pass (``synceasgd``, ``sequential``), without prefetch, with ``E[max]`` from `expected_max_factor`
    (persistent stragglers without noise: ``t_ideal + (factor - 1)(F + B + U)``).

    Returns
    -------
    pandas.DataFrame
        One row per P: ``workers``, ``ideal_s``, ``mean_s``, ``sem_s``
        (standard error of the mean), ``p50_s``, ``p99_s``, ``slowdown``
        (mean / ideal), ``closed_form_s``, ``closed_form_slowdown``,
        ``rel_error`` ((mean - closed form) / closed form) and ``z_score``
        ((mean - closed form) / sem; |z| of a few is agreement).
    """
    check_workload(model, cluster)
    if not isinstance(straggler, StragglerSpec):
        raise SimInputError(f"straggler must be a StragglerSpec, got {type(straggler).__name__}")
    if not workers:
        raise SimInputError("workers must list at least one worker count")
    rows = []
    for p in workers:
        p = check_int("workers", p, 1)
        c = cluster.with_gpus(int(p))
        spec = dataclasses.replace(straggler, stragglers=min(straggler.stragglers, int(p)))
        common = dict(batch_size=batch_size, seed=int(seed) + int(p), precision=precision, prefetch=prefetch)
        run = run_sync(model, c, scheduler, spec=spec, iterations=iterations, keep_iterations=1, **common)
        periods = run.periods_s
        ideal = ideal_iteration_s(model, c, scheduler, run, common, 2)  # (5 for a plan that updates per layer)
        mean = float(periods.mean())
        sem = float(periods.std(ddof=1) / math.sqrt(len(periods))) if len(periods) > 1 else 0.0
        closed = predicted_period_s(spec, ideal, profile(run.base, run.plan), int(p), prefetch)
        rows.append({
            "workers": int(p), "ideal_s": ideal, "mean_s": mean, "sem_s": sem,
            "p50_s": float(np.percentile(periods, 50)), "p99_s": float(np.percentile(periods, 99)),
            "slowdown": mean / ideal, "closed_form_s": closed, "closed_form_slowdown": closed / ideal,
            "rel_error": (mean - closed) / closed if math.isfinite(closed) else math.nan,
            "z_score": (mean - closed) / sem if math.isfinite(closed) and sem > 0 else math.nan,
        })
    return pd.DataFrame(rows)

