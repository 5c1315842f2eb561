"""The straggler flags (run, sweep, algorithms): they switch to the per-worker engine, `sim.workers`."""

from __future__ import annotations

import argparse

from sim.cli.args import nonneg_float, positive_float, positive_int, seed
from sim.cli.workload import bucket_mb, cluster, model, options
from sim.errors import SimInputError
from sim.runs import with_worker_metrics

__all__ = ["STRAGGLER_ITERATIONS", "add_straggler_flags", "straggler_given", "straggler_spec", "with_stragglers"]

#: Iterations the per-worker engine runs for --straggler-* statistics (at least).
STRAGGLER_ITERATIONS = 100

FLAGS = ("straggler_dist", "straggler_cv", "stragglers", "straggler_factor", "straggler_jitter_cv", "seed")


def add_straggler_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("stragglers (any of these switches to the per-worker engine, sim.workers)")
    g.add_argument("--straggler-dist", choices=["constant", "normal", "lognormal", "exponential"], default=None,
                   help="distribution of each worker's compute time per iteration (mean 1)")
    g.add_argument("--straggler-cv", type=nonneg_float, default=None, help="its coefficient of variation")
    g.add_argument("--stragglers", type=positive_int, default=None, help="number of persistently slow workers")
    g.add_argument("--straggler-factor", type=positive_float, default=None,
                   help="how many times slower they compute (default 2 with --stragglers)")
    g.add_argument("--straggler-jitter-cv", type=nonneg_float, default=None,
                   help="coefficient of variation of a lognormal factor on every message's time")
    g.add_argument("--seed", type=seed, default=None, help="seed of every random draw (default 0)")


def straggler_given(args) -> bool:
    given = [n for n in FLAGS if getattr(args, n, None) is not None]
    if given == ["seed"]:
        raise SimInputError("--seed does nothing without a straggler flag (--straggler-dist, --stragglers, "
                            "--straggler-jitter-cv): nothing else is random")
    return bool(given)


def _check_cv(dist: str, cv: float | None) -> None:
    if cv is not None and dist == "constant":
        raise SimInputError("--straggler-cv needs --straggler-dist normal, lognormal or exponential")
    if dist != "constant" and cv is None:
        raise SimInputError(f"--straggler-dist {dist} needs --straggler-cv (its coefficient of variation)")
    if dist == "exponential" and cv > 1:
        raise SimInputError(f"--straggler-cv must be <= 1 for --straggler-dist exponential, got {cv:g}")
    if cv is not None and cv > 2:
        raise SimInputError(f"--straggler-cv must be <= 2, got {cv:g}")


def straggler_spec(args, gpus: list[int]):
    """The `StragglerSpec` the flags describe; errors name the flag."""
    from sim.workers import StragglerSpec

    dist = args.straggler_dist or "constant"
    cv = args.straggler_cv
    _check_cv(dist, cv)
    if args.straggler_factor is not None and args.stragglers is None:
        raise SimInputError("--straggler-factor needs --stragglers K")
    factor = args.straggler_factor if args.straggler_factor is not None else 2.0
    if not 1 <= factor <= 1000:
        raise SimInputError(f"--straggler-factor must be from 1 to 1000 (times slower), got {factor:g}")
    k = args.stragglers or 0
    if k > min(gpus):
        raise SimInputError(f"--stragglers {k} exceeds --gpus {min(gpus)}")
    jitter = args.straggler_jitter_cv or 0.0
    if jitter > 2:
        raise SimInputError(f"--straggler-jitter-cv must be <= 2, got {jitter:g}")
    return StragglerSpec(dist=dist, cv=cv or 0.0, stragglers=k, factor=factor if k else 1.0, jitter_cv=jitter)


def worker_run(args, the_model, row: dict, spec):
    """The per-worker run of one row: its scheduler, and its method, architecture and knobs."""
    from sim.workers import simulate_workers

    return simulate_workers(
        the_model, cluster(args, int(row["gpus"])), row["scheduler"], batch_size=args.batch_size, straggler=spec,
        iterations=max(getattr(args, "iterations", 1), STRAGGLER_ITERATIONS), seed=args.seed or 0,
        precision=args.precision, prefetch=args.prefetch, bucket_mb=bucket_mb(args),
        calibrate_iteration_s=args.calibrate_iteration_s, method=row.get("method"),
        architecture=row.get("architecture") or "allreduce", options=options(args),
        timeline_iterations=1,  # its metrics only: the per-layer times of one iteration kept, not of all
    )


def with_stragglers(args, rows: list[dict], gpus: list[int], the_model=None) -> list[dict]:
    """Each row of plain metrics with the per-worker engine's statistics under the straggler flags."""
    spec = straggler_spec(args, gpus)
    the_model = the_model if the_model is not None else model(args)
    return [with_worker_metrics(row, worker_run(args, the_model, row, spec).metrics) for row in rows]
