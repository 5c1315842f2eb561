"""Seven distributed SGD algorithms, each simulated over time with many workers.

Ko, Lee, Lee and Kim ("An In-Depth Analysis of Distributed Training of Deep
Neural Networks", IPDPS 2021) compare seven ways for P workers to share what
they learn. Here each is a discrete-event simulation on `sim.workers.Engine`
(the runs are in `sim.workers.algorithm_runs`):

===========  =============  ==========================================================
algorithm    topology       one step of worker w
===========  =============  ==========================================================
BSP          server         compute; push gradient; barrier: wait for all P; pull model
ASP          server         compute; push gradient; pull model at once
SSP          server         as ASP, but worker w may start step c only when every
                            worker has finished step c - s (Ho et al., NIPS 2013)
EASGD        server         local SGD; every tau steps pull the center x~, move
                            x_w <- x_w - a(x_w - x~), push the same a(x_w - x~) to the
                            center (asynchronous EASGD, Zhang, Choromanska and LeCun,
                            NIPS 2015, Alg. 1; a = 0.9 / P)
AR-SGD       all-reduce     compute; all-reduce the gradient (the cluster's collective,
                            one message after backward); update (`sim.workers`)
GoSGD        gossip         local SGD; with probability p send (x_w, half its weight)
                            to a random peer, who merges it at its next step boundary
                            (Blot, Picard, Cord and Thome, arXiv 1611.09726, 2016)
AD-PSGD      ring           compute a gradient on x_w while averaging x_w with a random
                            ring neighbour, then apply the gradient (Lian, Zhang, Zhang
                            and Liu, ICML 2018, Alg. 1)
===========  =============  ==========================================================

Costs. A worker's step computes ``io + h2d + f (F + B)`` (``f`` its straggler
factor, `sim.workers.StragglerSpec`), plus its update ``U`` where the worker
updates a local model. Every message carries the full model, M = params x
bytes per parameter, over the cluster's inter-node ``network`` preset; its
time is the `sim.comm.CommCost` of `message_cost` (``alpha + beta M``), times
a jitter factor. One parameter server holds the model; its inbound and
outbound links each carry one message at a time, shared by every worker —
the bottleneck that grows with P. The server
applies each push in ``U``. In the gossip and ring algorithms each worker's
link carries one exchange at a time. Each GPU is an endpoint of the network
(``gpus_per_node`` only matters to AR-SGD's collective, whose all-reduce
takes the cluster's own cost, `sim.cluster.Cluster.comm_cost`).

Every run processes a budget of ``P x steps`` gradients and records each
change to a model in an **update log** (`UPDATE_COLUMNS`) that
`sim.workers.training` replays on a real problem. Models are numbered: -1 is the
server (BSP, ASP, SSP), the center variable (EASGD) or the replicated model
(AR-SGD); 0..P-1 are the workers' replicas. Two kinds of row:

* ``gradient``: ``x[target] -= lr * weight * grad(snapshot(src, src_version),
  minibatch(worker, step))``. The weight is 1/P where one model takes every
  worker's gradient (the mean of P gradients per P updates), 1 on a replica.
* ``elastic``, ``gossip``, ``average``: ``x[target] += weight *
  (snapshot(src, src_version) - snapshot(ref, ref_version))``.

``version`` is the target's version after the change (its count of changes).
The **staleness** of a change is the number of changes the target received
after the inputs were read and before this one lands, not counting gradients
computed from the very same snapshot (those add up to one synchronous
mini-batch, as in BSP). BSP and AR-SGD therefore have staleness 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.catalog import get_network
from sim.checks import check_float, check_int, check_seed
from sim.cluster import Cluster
from sim.comm import CommCost
from sim.core.timeline import from_rows
from sim.core.workload import check_workload
from sim.errors import SimInputError
from sim.model import Model, bytes_per_param, check_batch_size
from sim.workers.algorithm_engine import ar_sgd_run, worker_times
from sim.workers.algorithm_runs import NO_MODEL, SERVER, RunSetup, run_algorithm
from sim.workers.stragglers import StragglerSpec, straggler_factors

__all__ = [
    "ALGORITHMS",
    "CENTRAL",
    "MAX_STEPS",
    "MAX_WORKER_STEPS",
    "NO_MODEL",
    "SERVER",
    "UPDATE_COLUMNS",
    "AlgorithmConfig",
    "AlgorithmResult",
    "check_worker_steps",
    "message_cost",
    "simulate_algorithm",
    "simulate_algorithms",
    "sweep_algorithms",
]

ALGORITHMS = ("BSP", "ASP", "SSP", "EASGD", "AR-SGD", "GoSGD", "AD-PSGD")
#: Algorithms that go through the parameter server.
CENTRAL = ("BSP", "ASP", "SSP", "EASGD")
UPDATE_COLUMNS = (
    "time_s", "kind", "worker", "step", "target", "version", "src", "src_version", "ref", "ref_version",
    "weight", "staleness",
)
MAX_STEPS = 2000
#: Gradients per worker of a run that names none (`simulate_algorithm`).
DEFAULT_STEPS = 50
#: SSP's staleness bound beyond the steps a run takes (`MAX_STEPS`) changes nothing: a larger one is refused.
MAX_STALENESS = 1_000_000
MAX_ALGORITHM_WORKERS = 1024
#: Workers x steps of one request, over every algorithm it runs (and every worker count of a sweep): each is
#: an event of about 0.1 ms and 5 kB, so at most about 25 s and 1 GB (1,000 workers x 200 steps of each of the
#: seven ran past 120 s and 2.4 GB when the bound was per algorithm; hostile review, 2026-11-25).
MAX_WORKER_STEPS = 200_000


@dataclass(frozen=True)
class AlgorithmConfig:
    """The knobs of the algorithms (defaults are ours unless cited).

    Parameters
    ----------
    staleness : int
        SSP's bound s: a worker may run at most s steps ahead of the slowest.
    tau : int
        EASGD's communication period, in local steps (Zhang et al. try 1 to 64).
    moving_rate : float, optional
        EASGD's elastic rate a; ``0.9 / P`` when not given (Zhang et al.,
        Sec. 6: beta = a P = 0.9).
    gossip_p : float
        GoSGD's probability of sending after a local step.
    """

    staleness: int = 3
    tau: int = 4
    moving_rate: float | None = None
    gossip_p: float = 0.5

    def __post_init__(self) -> None:
        check_int("staleness", self.staleness, 0, MAX_STALENESS)
        check_int("tau", self.tau, 1)
        if self.moving_rate is not None:
            check_float("moving_rate", self.moving_rate, 0, 1, low_open=True)
        check_float("gossip_p", self.gossip_p, 0, 1)


@dataclass(frozen=True, eq=False)
class AlgorithmResult:
    """What `simulate_algorithm` returns.

    ``log`` follows `UPDATE_COLUMNS`; ``timeline`` follows
    `sim.core.timeline.TIMELINE_COLUMNS` (``iteration`` is the worker's
    local step; ``worker`` -1 is the server or the collective). ``consensus``
    names the model to evaluate: ``"server"`` (model -1) or ``"mean"`` (the
    mean of the replicas 0..P-1).
    """

    algorithm: str
    metrics: dict
    log: pd.DataFrame
    timeline: pd.DataFrame
    workers: int
    consensus: str


# --- entry points -------------------------------------------------------------------


def message_cost(cluster: Cluster) -> CommCost:
    """The cost of every message of BSP, ASP, SSP, EASGD, GoSGD and AD-PSGD.

    One message moves the whole model from one GPU to another (or to the
    server) over the cluster's inter-node ``network`` preset: ``alpha +
    beta M``. Each GPU is an endpoint of that network. AR-SGD instead takes
    the cluster's all-reduce cost (`Cluster.comm_cost`) in the engine.
    """
    net = get_network(cluster.network)
    return CommCost(net.alpha_s, net.beta_s_per_byte, f"one message over {cluster.network}")


def _setup(model, cluster, *, batch_size, steps, spec, seed, precision, gpus_by_worker) -> tuple[RunSetup, Model]:
    check_batch_size(batch_size)
    steps = check_int("steps", steps, 2, MAX_STEPS)
    seed = check_seed(seed)
    check_int("workers", cluster.gpus, 1, MAX_ALGORITHM_WORKERS)
    check_worker_steps(cluster.gpus * steps, f"{cluster.gpus} workers x {steps} steps")
    if not isinstance(spec, StragglerSpec):
        raise SimInputError(f"straggler must be a StragglerSpec, got {type(spec).__name__}")
    width = bytes_per_param(precision)
    base, fb, update = worker_times(model, cluster, batch_size, precision, gpus_by_worker)
    slow = straggler_factors(spec, np.random.default_rng(seed), cluster.gpus)
    nbytes = int(base.total_params) * width
    message_s = message_cost(cluster).message_time_s(tuple(range(base.num_layers)), nbytes)
    setup = RunSetup(
        workers=cluster.gpus, steps=steps, batch_size=int(batch_size), io_s=base.io_s, h2d_s=base.h2d_s,
        fb_s=fb * slow, update_s=update * slow, server_update_s=float(base.update_s),
        message_s=message_s, model_bytes=nbytes, spec=spec, seed=seed,
    )
    return setup, base


def _metrics(algorithm, base, cluster, setup: RunSetup, spec, precision, frame, sent, received, busy, links) -> dict:
    """The run's summary (see `simulate_algorithm`'s Returns)."""
    grads = frame.loc[frame.kind == "gradient"]
    end_s = float(grads.time_s.max())
    if not (end_s > 0 and math.isfinite(end_s)):
        raise SimInputError("the run takes no time: give the model non-zero compute times")
    staleness = frame.staleness.to_numpy()
    p = setup.workers
    return {
        "algorithm": algorithm,
        "model": base.name,
        "workers": p,
        "gpus": p,  # (the name `run` and `sweep` give a GPU count; `--gpus` sets it)
        "batch_size": setup.batch_size,
        "network": cluster.network,
        "precision": precision,
        "seed": setup.seed,
        "steps": setup.steps,
        "gradients": len(grads),
        "time_s": end_s,
        "throughput_samples_per_s": len(grads) * setup.batch_size / end_s,
        "step_time_s": end_s * p / len(grads),
        "model_bytes": setup.model_bytes,
        "message_s": setup.message_s,
        "bytes_per_worker": float(np.mean(np.asarray(sent) + np.asarray(received))),
        "server_bytes": int(sum(link.bytes for link in links)),
        "server_link_utilisation": max(link.busy_until_s(end_s) for link in links) / end_s if links else math.nan,
        "staleness_mean": float(staleness.mean()),
        "staleness_p99": float(np.percentile(staleness, 99)),
        "staleness_max": int(staleness.max()),
        "worker_idle_fraction": float(1 - np.mean(np.minimum(np.asarray(busy) / end_s, 1.0))),
        **spec.as_dict(),
    }


def simulate_algorithm(
    algorithm: str,
    model: Model,
    cluster: Cluster,
    *,
    batch_size: int,
    steps: int = DEFAULT_STEPS,
    seed: int = 0,
    straggler: StragglerSpec | None = None,
    config: AlgorithmConfig | None = None,
    precision: str = "fp32",
    gpus_by_worker: Sequence[str] | None = None,
) -> AlgorithmResult:
    """Simulate one algorithm until ``cluster.gpus x steps`` gradients are applied.

    ``model`` and ``cluster`` give the workload and the workers
    (``cluster.gpus``; the links are the ``cluster.network`` preset);
    ``batch_size`` is samples per worker per step, ``steps`` gradients per
    worker on average (the budget is P x steps). ``seed`` seeds every random
    draw (compute factors, jitter, gossip peers); ``straggler`` gives compute
    variability, persistent stragglers and link jitter; ``config`` SSP's
    bound, EASGD's period and rate and GoSGD's probability; ``precision``
    the width of the parameters on the wire; ``gpus_by_worker`` each
    worker's GPU type (zoo models only).

    Returns an `AlgorithmResult` whose ``metrics`` hold
    ``throughput_samples_per_s`` (samples of the whole budget over the time
    the last gradient lands), ``bytes_per_worker`` (sent plus received, mean
    over workers), ``server_bytes``, ``server_link_utilisation`` (the busier
    direction's busy time until the last gradient lands, over that time; NaN
    without a server), the staleness mean, p99 and max, and
    ``worker_idle_fraction``. Raises `SimInputError` for an unknown algorithm
    (the message lists the valid ones) or bad input.

    References: Ko et al., IPDPS 2021; Ho et al., NIPS 2013 (SSP); Zhang,
    Choromanska and LeCun, NIPS 2015 (EASGD); Blot et al., 2016 (GoSGD);
    Lian et al., ICML 2018 (AD-PSGD).
    """
    if algorithm not in ALGORITHMS:
        raise SimInputError(f"unknown algorithm {algorithm!r}; valid: {', '.join(ALGORITHMS)}")
    check_workload(model, cluster)
    spec = straggler if straggler is not None else StragglerSpec()
    config = config if config is not None else AlgorithmConfig()
    setup, base = _setup(model, cluster, batch_size=batch_size, steps=steps, spec=spec, seed=seed,
                         precision=precision, gpus_by_worker=gpus_by_worker)
    if algorithm == "AR-SGD":
        log, rows, sent, received, busy = ar_sgd_run(model, cluster, setup, precision, gpus_by_worker)
        links, consensus = (), "server"
    else:
        run = run_algorithm(algorithm, setup, config)
        log, rows, sent, received, busy = run.log, run.rows, run.sent, run.received, run.compute_busy_s
        links, consensus = run.server_links(), run.consensus
    frame = pd.DataFrame(log, columns=list(UPDATE_COLUMNS))
    frame = frame.astype({c: "int64" for c in ("worker", "step", "target", "version", "src", "src_version",
                                               "ref", "ref_version", "staleness")})
    metrics = _metrics(algorithm, base, cluster, setup, spec, precision, frame, sent, received, busy, links)
    timeline = from_rows(rows)
    timeline = timeline.sort_values(["start_s", "worker"], kind="stable").reset_index(drop=True)
    return AlgorithmResult(algorithm, metrics, frame, timeline, setup.workers, consensus)


def check_worker_steps(worker_steps: int, what: str) -> None:
    """Refuse a request of more than `MAX_WORKER_STEPS` worker steps, before any work."""
    if worker_steps > MAX_WORKER_STEPS:
        raise SimInputError(f"{what} is {worker_steps:,} worker steps; at most {MAX_WORKER_STEPS:,} "
                            "(sim.workers.algorithms.MAX_WORKER_STEPS): use fewer workers, steps or algorithms")


def simulate_algorithms(model: Model, cluster: Cluster, algorithms: Sequence[str] = ALGORITHMS,
                        **kwargs) -> dict[str, AlgorithmResult]:
    """`simulate_algorithm` for each name, same arguments and seed; keyed by name, in the order given.
    The request is bounded as a whole (`MAX_WORKER_STEPS` over every algorithm), and AR-SGD, whose graph
    may be refused for its size, runs first, so that a refusal comes before the other runs' work."""
    names = list(dict.fromkeys(algorithms))
    if not names:
        raise SimInputError("algorithms must name at least one algorithm")
    if unknown := [name for name in names if name not in ALGORITHMS]:
        raise SimInputError(f"unknown algorithm {unknown[0]!r}; valid: {', '.join(ALGORITHMS)}")
    steps = check_int("steps", kwargs.get("steps", DEFAULT_STEPS), 2, MAX_STEPS)
    check_workload(model, cluster)
    check_worker_steps(len(names) * cluster.gpus * steps,
                       f"{len(names)} algorithms x {cluster.gpus} workers x {steps} steps")
    done = {name: simulate_algorithm(name, model, cluster, **kwargs)
            for name in sorted(names, key=lambda name: name != "AR-SGD")}
    return {name: done[name] for name in names}


def sweep_algorithms(model: Model, cluster: Cluster, *, workers: Sequence[int],
                     algorithms: Sequence[str] = ALGORITHMS, **kwargs) -> pd.DataFrame:
    """One row of metrics per (workers, algorithm): how each scales, e.g. the
    parameter server's link saturating on 10GbE as P grows."""
    check_workload(model, cluster)
    if not workers:
        raise SimInputError("workers must list at least one worker count")
    counts = [check_int("workers", p, 1, MAX_ALGORITHM_WORKERS) for p in workers]
    names = list(dict.fromkeys(algorithms))
    steps = check_int("steps", kwargs.get("steps", DEFAULT_STEPS), 2, MAX_STEPS)
    check_worker_steps(len(names) * sum(counts) * steps,
                       f"{len(names)} algorithms x {sum(counts)} workers (over the counts) x {steps} steps")
    rows = []
    for p in counts:
        for name, res in simulate_algorithms(model, cluster.with_gpus(p), names, **kwargs).items():
            rows.append(res.metrics | {"algorithm": name})
    return pd.DataFrame(rows)
