"""Per-worker discrete-event simulation: stragglers, link jitter and mixed GPUs.

`sim.simulate` times one worker and lets it stand for all: every GPU is the
same. Here each of the P workers runs its own iteration — io, h2d, forward,
backward, update — with its own compute times, and the workers meet at each
message of the plan: an all-reduce starts only when every worker has the
message's gradients ready (and the previous message has left the channel),
so a synchronous method waits for its slowest worker at every collective.

What varies between workers (all drawn from one ``numpy`` Generator seeded
by the caller, in a fixed order, so a seed gives one result):

* **compute variability**: a factor ``f`` per (iteration, worker), mean 1 and
  coefficient of variation ``cv``, multiplies that worker's forward and
  backward time in that iteration. The distribution is constant, normal
  (``1 + cv Z``, clipped at 0), lognormal, shifted exponential
  (``1 - cv + cv E``) or an empirical histogram given as measured samples
  (normalised by their mean). The update, io and h2d are not scaled: the
  variability is that of the GPU's compute kernels.
* **persistent stragglers**: ``stragglers`` workers, chosen by the seed, run
  all their compute (forward, backward, update) ``factor`` times slower.
* **heterogeneous clusters**: ``gpus_by_worker`` names each worker's GPU;
  its layer times come from ``Model.timed(gpu=...)``.
* **link jitter**: a lognormal factor (mean 1, cv ``jitter_cv``) per message
  multiplies its all-reduce time.

With no variability at all the engine reproduces `sim.simulate` exactly (a
tested property). For schedulers that send after the backward pass
(``synceasgd``, ``sequential``) the iteration period is
``io + h2d + U + T_c + max_w f_w (F + B)``, so its mean follows from the
expected maximum of P factors (`expected_max_factor`): Blom's approximation
for normal noise, ``H_P`` for exponential, exact sums for a histogram.
`monte_carlo` sets the simulated means beside that closed form.

References
----------
Blom, G. (1958). Statistical Estimates and Transformed Beta-Variables. Wiley
(E[X_(P:P)] ~ mu + sigma Phi^-1((P - 0.375) / (P + 0.25)); against Harter's
1961 tables it is 0.025 sigma high at P = 2, 0.003 at 16, 0.012 low at 256).
David, H. A. and Nagaraja, H. N. (2003). Order Statistics, 3rd ed., Wiley
(E[max of P exponentials] = theta H_P, Sec. 4.6).
Dean, J. and Barroso, L. A. (2013). The tail at scale. CACM 56(2).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
import pandas as pd

from sim.api import resolve_model
from sim.catalog import get_gpu
from sim.cluster import Cluster
from sim.dag import gradient_layers
from sim.errors import SimInputError
from sim.model import Model, bytes_per_param, check_batch_size
from sim.schedulers import DEFAULT_BUCKET_MB, make_plan
from sim.schedulers.names import SYNCEASGD, WFBP

__all__ = [
    "DISTRIBUTIONS",
    "MAX_WORKER_ITERATIONS",
    "WORKER_TIMELINE_COLUMNS",
    "Engine",
    "StragglerSpec",
    "WorkerResult",
    "blom_expected_max",
    "draw_compute_factors",
    "expected_max_factor",
    "jitter_factors",
    "monte_carlo",
    "simulate_workers",
]

DISTRIBUTIONS = ("constant", "normal", "lognormal", "exponential", "empirical")
#: One row per task of one worker; ``worker`` is -1 for an all-reduce (all take part).
#: Kinds: io, h2d, forward, backward, update, comm (worker -1), ``wait`` (idle
#: until the slowest worker's backward ends) and ``comm_wait`` (idle after that,
#: until the last all-reduce of the iteration ends).
WORKER_TIMELINE_COLUMNS = ("worker", "iteration", "kind", "start_s", "end_s", "duration_s")
MAX_WORKER_ITERATIONS = 5000
MAX_CV = 2.0


# --- the engine ---------------------------------------------------------------


class Engine:
    """A discrete-event engine: a clock and a queue of timed actions.

    Actions run in order of ``(time, priority, sequence)``. The sequence
    number is owned by the engine and grows with every scheduled action, so
    ties resolve the same way on every run and two engines never share state.

    >>> log = []
    >>> env = Engine()
    >>> env.at(2.0, log.append, "b")
    >>> env.at(1.0, log.append, "a")
    >>> env.at(2.0, log.append, "first", priority=-1)
    >>> env.run()
    >>> log
    ['a', 'first', 'b']
    """

    def __init__(self) -> None:
        self.now_s = 0.0
        self._queue: list[tuple[float, int, int, Callable, tuple]] = []
        self._seq = 0

    def at(self, time_s: float, action: Callable, *args, priority: int = 0) -> None:
        """Run ``action(*args)`` at ``time_s`` (not before now)."""
        if not time_s >= self.now_s:  # also catches NaN
            raise ValueError(f"cannot schedule at {time_s} s, before now ({self.now_s} s)")
        heapq.heappush(self._queue, (float(time_s), priority, self._seq, action, args))
        self._seq += 1

    def run(self) -> None:
        """Run every action, advancing the clock, until the queue is empty."""
        while self._queue:
            time_s, _, _, action, args = heapq.heappop(self._queue)
            self.now_s = time_s
            action(*args)

    @property
    def events_run(self) -> int:
        """Actions scheduled so far (a measure of work, for the curious)."""
        return self._seq


# --- what varies ----------------------------------------------------------------


def _finite(name: str, value, lo: float, hi: float = math.inf) -> float:
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise SimInputError(f"{name} must be a number, got {value!r}") from None
    if not (math.isfinite(value) and lo <= value <= hi):
        raise SimInputError(f"{name} must be a finite number from {lo:g} to {hi:g}, got {value!r}")
    return value


@dataclass(frozen=True)
class StragglerSpec:
    """How workers differ: compute variability, persistent stragglers, link jitter.

    Parameters
    ----------
    dist : {"constant", "normal", "lognormal", "exponential", "empirical"}
        Distribution of the per-(iteration, worker) compute factor, mean 1.
    cv : float
        Its coefficient of variation (standard deviation / mean), 0 to 2. A
        normal factor is clipped at 0; an exponential one needs ``cv <= 1``.
    samples : tuple of float, optional
        For ``dist="empirical"``: measured compute times (any unit, > 0);
        the factor is drawn from ``samples / mean(samples)``.
    stragglers : int
        Number of persistently slow workers.
    factor : float
        How many times slower they compute (>= 1).
    jitter_cv : float
        Coefficient of variation of a lognormal factor (mean 1) on every
        message's transfer time; 0 for none.
    """

    dist: str = "constant"
    cv: float = 0.0
    samples: tuple[float, ...] | None = None
    stragglers: int = 0
    factor: float = 1.0
    jitter_cv: float = 0.0

    def __post_init__(self) -> None:
        if self.dist not in DISTRIBUTIONS:
            raise SimInputError(f"unknown dist {self.dist!r}; valid: {', '.join(DISTRIBUTIONS)}")
        object.__setattr__(self, "cv", _finite("cv", self.cv, 0.0, MAX_CV))
        object.__setattr__(self, "factor", _finite("factor", self.factor, 1.0, 1000.0))
        object.__setattr__(self, "jitter_cv", _finite("jitter_cv", self.jitter_cv, 0.0, MAX_CV))
        if isinstance(self.stragglers, bool) or not isinstance(self.stragglers, (int, np.integer)) or self.stragglers < 0:
            raise SimInputError(f"stragglers must be a whole number >= 0, got {self.stragglers!r}")
        if self.dist == "exponential" and self.cv > 1:
            raise SimInputError(f"cv must be <= 1 for dist 'exponential' (the factor 1 - cv + cv E must stay >= 0), got {self.cv}")
        if self.dist == "empirical":
            if self.samples is None or len(self.samples) < 2:
                raise SimInputError("samples: dist 'empirical' needs at least 2 measured samples")
            arr = np.asarray(self.samples, dtype=float)
            if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
                raise SimInputError("samples must be finite numbers > 0")
            object.__setattr__(self, "samples", tuple(float(x) for x in arr))
        elif self.samples is not None:
            raise SimInputError(f"samples apply only to dist 'empirical', not {self.dist!r}")
        if self.dist in ("constant", "empirical") and self.cv != 0:
            raise SimInputError(f"cv applies to dist normal, lognormal or exponential, not {self.dist!r}")

    @property
    def has_compute_noise(self) -> bool:
        return self.dist == "empirical" or (self.dist != "constant" and self.cv > 0)

    @property
    def is_uniform(self) -> bool:
        """True when every worker is identical and nothing is random."""
        return not self.has_compute_noise and (self.stragglers == 0 or self.factor == 1) and self.jitter_cv == 0

    def as_dict(self) -> dict:
        return {
            "straggler_dist": self.dist, "straggler_cv": self.cv, "stragglers": int(self.stragglers),
            "straggler_factor": self.factor, "jitter_cv": self.jitter_cv,
        }


def _lognormal(rng: np.random.Generator, cv: float, size) -> np.ndarray:
    """Lognormal with mean 1 and coefficient of variation ``cv``."""
    if cv == 0:
        return np.ones(size)
    s2 = math.log1p(cv * cv)
    return rng.lognormal(mean=-s2 / 2, sigma=math.sqrt(s2), size=size)


def draw_compute_factors(spec: StragglerSpec, rng: np.random.Generator, iterations: int, workers: int) -> np.ndarray:
    """Compute factors, shape ``(iterations, workers)``, mean 1 (before clipping)."""
    size = (iterations, workers)
    if spec.dist == "empirical":
        values = np.asarray(spec.samples, dtype=float)
        return rng.choice(values / values.mean(), size=size)
    if spec.dist == "constant" or spec.cv == 0:
        return np.ones(size)
    if spec.dist == "normal":
        return np.maximum(1.0 + spec.cv * rng.standard_normal(size), 0.0)
    if spec.dist == "lognormal":
        return _lognormal(rng, spec.cv, size)
    return 1.0 - spec.cv + spec.cv * rng.standard_exponential(size)  # exponential


def jitter_factors(spec: StragglerSpec, rng: np.random.Generator, size) -> np.ndarray:
    """Per-message link factors: lognormal, mean 1, cv ``spec.jitter_cv``."""
    return _lognormal(rng, spec.jitter_cv, size)


def straggler_factors(spec: StragglerSpec, rng: np.random.Generator, workers: int) -> np.ndarray:
    """Persistent factor of each worker: ``spec.factor`` for the chosen stragglers, else 1."""
    if spec.stragglers > workers:
        raise SimInputError(f"stragglers = {spec.stragglers} exceeds the {workers} workers")
    out = np.ones(workers)
    if spec.stragglers:
        out[np.sort(rng.choice(workers, size=int(spec.stragglers), replace=False))] = spec.factor
    return out


def blom_expected_max(workers: int) -> float:
    """Blom's approximation of E[max of P standard normals]: Phi^-1((P - 0.375)/(P + 0.25))."""
    return NormalDist().inv_cdf((workers - 0.375) / (workers + 0.25))


def expected_max_factor(spec: StragglerSpec, workers: int) -> float:
    """E[max of P compute factors] in closed form, or NaN where none exists.

    * constant: 1;
    * normal: ``1 + cv Phi^-1((P - 0.375)/(P + 0.25))`` (Blom 1958; the
      clipping at 0 only touches the lower tail);
    * exponential: ``1 - cv + cv H_P`` with ``H_P = sum_{i<=P} 1/i``, exact;
    * empirical: ``sum_i x_(i) ((i/n)^P - ((i-1)/n)^P)``, exact, with
      ``x_(i)`` the sorted normalised samples;
    * lognormal: NaN (no closed form).
    """
    p = int(workers)
    if p < 1:
        raise SimInputError(f"workers must be >= 1, got {workers}")
    if spec.dist == "constant" or (spec.dist != "empirical" and spec.cv == 0):
        return 1.0
    if spec.dist == "normal":
        return 1.0 + spec.cv * blom_expected_max(p)
    if spec.dist == "exponential":
        return 1.0 - spec.cv + spec.cv * float(np.sum(1.0 / np.arange(1, p + 1)))
    if spec.dist == "empirical":
        x = np.sort(np.asarray(spec.samples, dtype=float))
        x = x / x.mean()
        n = len(x)
        i = np.arange(1, n + 1)
        return float(np.sum(x * ((i / n) ** p - ((i - 1) / n) ** p)))
    return math.nan


# --- one synchronous run ------------------------------------------------------------


@dataclass(frozen=True)
class _Profile:
    """One GPU type's compute: totals and each message's ready offset from backward start."""

    forward_s: float
    backward_s: float
    update_s: float
    message_ready_s: np.ndarray


def _profile(model: Model, groups, after_backward: bool) -> _Profile:
    ready_all = np.cumsum(model.bwd_s[::-1])[::-1]  # r[l] = sum of t_b over layers l..n-1
    backward = float(model.bwd_s.sum())
    if after_backward:
        ready = np.full(len(groups), backward)
    else:
        ready = np.array([max(float(ready_all[i]) for i in members) for members in groups], dtype=float)
    return _Profile(float(model.fwd_s.sum()), backward, float(model.update_s), ready)


class _SyncRun:
    """The events of synchronous data-parallel SGD over P workers.

    Per worker: io -> h2d -> forward -> backward -> (wait) -> update, chained
    over iterations as in `sim.dag` (forward k+1 after update k; io k+1 after
    update k, or after io k with prefetch). Per message g of iteration k: it
    is ready when every worker has its gradients; the channel sends messages
    one at a time in plan order; every worker's update waits for the last.
    """

    def __init__(self, *, profiles, profile_of, slow, factors, jitter, message_bytes, cost, io_s, h2d_s,
                 prefetch, record):
        self.env = Engine()
        self.p = len(profile_of)
        self.k_total = factors.shape[0]
        self.profiles = profiles
        self.profile_of = profile_of
        self.slow = slow
        self.factors = factors
        self.jitter = jitter
        self.comm_base_s = np.array([float(cost.time_s(b)) for b in message_bytes], dtype=float)
        self.n_messages = len(message_bytes)
        self.io_s, self.h2d_s = io_s, h2d_s
        self.prefetch = prefetch
        self.record = record
        self.rows: list[tuple] = []
        self.update_end = np.zeros((self.k_total, self.p))
        self.wait_s = np.zeros((self.k_total, self.p))
        self.backward_end = np.zeros((self.k_total, self.p))
        # NaN until iteration k's last message ends; with no messages nobody waits
        self.comm_end = np.full(self.k_total, np.nan if message_bytes else -np.inf)
        # per-iteration barrier state
        self.ready_max = np.full((self.k_total, self.n_messages), -np.inf)
        self.arrived = np.zeros(self.k_total, dtype=int)
        self.waiting: list[list[int]] = [[] for _ in range(self.k_total)]
        self.h2d_done = np.zeros((self.k_total, self.p), dtype=bool)
        self.update_done = np.zeros((self.k_total, self.p), dtype=bool)
        self.h2d_free = np.zeros(self.p)
        self.io_free = np.zeros(self.p)

    def _row(self, worker, k, kind, start, end):
        if self.record:
            self.rows.append((worker, k, kind, start, end, end - start))

    # io and h2d: a loader chain per worker
    def start_io(self, w, k):
        now = self.env.now_s
        start = max(now, self.io_free[w])
        end = start + self.io_s
        self.io_free[w] = end
        self._row(w, k, "io", start, end)
        self.env.at(end, self.io_done, w, k)

    def io_done(self, w, k):
        if self.prefetch and k + 1 < self.k_total:
            self.start_io(w, k + 1)
        start = max(self.env.now_s, self.h2d_free[w])
        end = start + self.h2d_s
        self.h2d_free[w] = end
        self._row(w, k, "h2d", start, end)
        self.env.at(end, self.h2d_end, w, k)

    def h2d_end(self, w, k):
        self.h2d_done[k, w] = True
        if k == 0 or self.update_done[k - 1, w]:
            self.start_compute(w, k)

    def start_compute(self, w, k):
        prof = self.profiles[self.profile_of[w]]
        scale = self.slow[w] * self.factors[k, w]
        t0 = self.env.now_s
        fwd_end = t0 + scale * prof.forward_s
        bwd_end = fwd_end + scale * prof.backward_s
        self._row(w, k, "forward", t0, fwd_end)
        self._row(w, k, "backward", fwd_end, bwd_end)
        self.backward_end[k, w] = bwd_end
        if self.n_messages:
            np.maximum(self.ready_max[k], fwd_end + scale * prof.message_ready_s, out=self.ready_max[k])
        self.arrived[k] += 1
        if self.n_messages and self.arrived[k] == self.p:  # every worker has announced its gradient times
            self.env.at(self.ready_max[k, 0], self.message_ready, k, 0, priority=-1)
        self.env.at(bwd_end, self.backward_done, w, k)

    def message_ready(self, k, g):
        """Message g of iteration k: all gradients are in, and message g-1 has left."""
        start = self.env.now_s
        end = start + self.comm_base_s[g] * self.jitter[k, g]
        self._row(-1, k, "comm", start, end)
        if g + 1 < self.n_messages:
            self.env.at(max(end, self.ready_max[k, g + 1]), self.message_ready, k, g + 1, priority=-1)
        else:
            self.env.at(end, self.all_reduced, k, priority=-1)

    def all_reduced(self, k):
        self.comm_end[k] = self.env.now_s
        for w in self.waiting[k]:
            self.start_update(w, k)
        self.waiting[k] = []

    def backward_done(self, w, k):
        if np.isnan(self.comm_end[k]):
            self.waiting[k].append(w)
        else:
            self.start_update(w, k)

    def start_update(self, w, k):
        now = self.env.now_s
        own = self.backward_end[k, w]
        self.wait_s[k, w] = now - own
        if now > own:  # idle: first for the slowest worker's gradients, then for the network
            slowest = min(max(float(self.backward_end[k].max()), own), now)
            if slowest > own:
                self._row(w, k, "wait", own, slowest)
            if now > slowest:
                self._row(w, k, "comm_wait", slowest, now)
        end = now + self.slow[w] * self.profiles[self.profile_of[w]].update_s
        self._row(w, k, "update", now, end)
        self.env.at(end, self.update_end_event, w, k)

    def update_end_event(self, w, k):
        self.update_end[k, w] = self.env.now_s
        self.update_done[k, w] = True
        if k + 1 < self.k_total:
            if not self.prefetch:
                self.start_io(w, k + 1)
            if self.h2d_done[k + 1, w]:
                self.start_compute(w, k + 1)

    def run(self):
        for w in range(self.p):
            self.env.at(0.0, self.start_io, w, 0)
        self.env.run()
        return self


# --- the entry points ---------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class WorkerResult:
    """What `simulate_workers` returns.

    ``iteration_times_s`` are the periods between the ends of successive
    iterations (an iteration ends with the last worker's update), from the
    second iteration on; ``iteration_time_s`` is their mean. ``timeline``
    follows `WORKER_TIMELINE_COLUMNS`; ``wait_s`` is each worker's idle time
    before its update in each iteration, shape ``(iterations, workers)``.
    """

    iteration_time_s: float
    iteration_times_s: np.ndarray
    metrics: dict
    timeline: pd.DataFrame
    wait_s: np.ndarray
    straggler_workers: tuple[int, ...]
    gpus_by_worker: tuple[str, ...] = field(default=())


def _check_iterations(iterations) -> int:
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or not 2 <= iterations <= MAX_WORKER_ITERATIONS:
        raise SimInputError(f"iterations must be a whole number from 2 to {MAX_WORKER_ITERATIONS}, got {iterations!r}")
    return int(iterations)


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise SimInputError(f"seed must be a whole number >= 0, got {seed!r}")
    return int(seed)


def _worker_models(model: Model, cluster: Cluster, batch_size: int, precision: str, prefetch: bool,
                   calibrate_iteration_s, gpus_by_worker):
    """The timed model per distinct GPU, and each worker's index into that list."""
    base = resolve_model(model, cluster, batch_size, precision, prefetch, calibrate_iteration_s)
    if gpus_by_worker is None:
        return base, [base], np.zeros(cluster.gpus, dtype=int), (cluster.gpu,) * cluster.gpus
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
             for g in kinds]
    return base, timed, np.array([kinds.index(g) for g in names], dtype=int), names


def _run_sync(model, cluster, scheduler, *, batch_size, spec, iterations, seed, gpus_by_worker, precision,
              prefetch, bucket_mb, calibrate_iteration_s, record, factors=None):
    """One synchronous run. ``factors`` (iterations x workers) replaces the drawn
    compute factors; `sim.algorithms` passes its own, drawn per worker."""
    check_batch_size(batch_size)
    bytes_per_param(precision)
    if not isinstance(spec, StragglerSpec):
        raise SimInputError(f"straggler must be a StragglerSpec, got {type(spec).__name__}")
    iterations = _check_iterations(iterations)
    seed = _check_seed(seed)
    base, timed, profile_of, names = _worker_models(
        model, cluster, batch_size, precision, prefetch, calibrate_iteration_s, gpus_by_worker
    )
    cost = cluster.comm_cost()
    plan = make_plan(scheduler, gradient_layers(base, precision), cost, bucket_mb=bucket_mb)
    if not plan.is_plain or any(plan.lag_s):
        raise SimInputError(f"scheduler {scheduler!r}: the per-worker engine times plain plans (messages and one "
                            "update) only; stragglers are not modelled for it")
    groups = plan.groups if cluster.gpus > 1 else ()
    nbytes = base.gradient_bytes(precision)
    message_bytes = [int(sum(nbytes[i] for i in members)) for members in groups]
    profiles = [_profile(m, groups, plan.after_backward) for m in timed]
    p = cluster.gpus
    rng = np.random.default_rng(seed)
    slow = straggler_factors(spec, rng, p)
    drawn = draw_compute_factors(spec, rng, iterations, p)
    factors = drawn if factors is None else np.asarray(factors, dtype=float)
    jitter = jitter_factors(spec, rng, (iterations, len(groups)))
    run = _SyncRun(
        profiles=profiles, profile_of=profile_of, slow=slow, factors=factors, jitter=jitter,
        message_bytes=message_bytes, cost=cost, io_s=base.io_s, h2d_s=base.h2d_s, prefetch=prefetch,
        record=record,
    ).run()
    ends = run.update_end.max(axis=1)
    periods = np.diff(ends)
    return run, base, plan, periods, slow, names, message_bytes


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
) -> WorkerResult:
    """Simulate ``iterations`` synchronous iterations of every worker.

    Parameters
    ----------
    model, cluster, scheduler, batch_size, precision, prefetch, bucket_mb, calibrate_iteration_s
        As in `sim.simulate`. The plan is made for ``cluster.gpu``.
    straggler : StragglerSpec, optional
        What varies between workers; none by default.
    iterations : int
        Iterations to simulate, 2 to `MAX_WORKER_ITERATIONS`; the first is
        start-up and is left out of the statistics.
    seed : int
        Seed of the one ``numpy`` Generator every random draw comes from.
    gpus_by_worker : sequence of str, optional
        The GPU type of each worker (a zoo model is needed to mix types).

    Returns
    -------
    WorkerResult

    Raises
    ------
    SimInputError
        For a bad batch size, iteration count, seed, GPU list or straggler count.

    Examples
    --------
    >>> import sim
    >>> from sim.workers import StragglerSpec, simulate_workers
    >>> m = sim.load_model("resnet50")
    >>> res = simulate_workers(m, sim.Cluster(gpus=8), sim.schedulers.names.SYNCEASGD, batch_size=32,
    ...                        straggler=StragglerSpec("normal", cv=0.1), seed=0)  # doctest: +SKIP
    >>> res.metrics["iteration_p99_s"] >= res.metrics["iteration_p50_s"]          # doctest: +SKIP
    True
    """
    spec = straggler if straggler is not None else StragglerSpec()
    common = dict(batch_size=batch_size, iterations=iterations, seed=seed, gpus_by_worker=gpus_by_worker,
                  precision=precision, prefetch=prefetch, bucket_mb=bucket_mb,
                  calibrate_iteration_s=calibrate_iteration_s)
    run, base, plan, periods, slow, names, message_bytes = _run_sync(
        model, cluster, scheduler, spec=spec, record=True, **common
    )
    if spec.is_uniform and gpus_by_worker is None:
        ideal = float(periods[-1])
    else:
        ideal_run = _run_sync(model, cluster, scheduler, spec=StragglerSpec(), record=False,
                              **{**common, "iterations": 2, "gpus_by_worker": None})
        ideal = float(ideal_run[3][-1])
    mean = float(periods.mean())
    if not (mean > 0 and math.isfinite(mean)):
        raise SimInputError("the iteration takes no time: give the model non-zero compute times")
    timeline = pd.DataFrame(run.rows, columns=list(WORKER_TIMELINE_COLUMNS))
    timeline = timeline.sort_values(["start_s", "worker"], kind="stable").reset_index(drop=True)
    p = cluster.gpus
    waits = run.wait_s[1:]
    metrics = {
        "model": base.name,
        "scheduler": scheduler,
        "gpus": p,
        "batch_size": int(batch_size),
        "precision": precision,
        "network": cluster.network,
        "seed": int(seed),
        **spec.as_dict(),
        "iterations": int(iterations),
        "iteration_time_s": mean,
        "iteration_p50_s": float(np.percentile(periods, 50)),
        "iteration_p99_s": float(np.percentile(periods, 99)),
        "iteration_min_s": float(periods.min()),
        "iteration_max_s": float(periods.max()),
        "ideal_iteration_time_s": ideal,
        "straggler_slowdown": mean / ideal,
        "throughput_samples_per_s": batch_size * p / mean,
        "wait_mean_s": float(waits.mean()) if waits.size else 0.0,
        "num_messages": len(message_bytes),
        "straggler_workers": [int(w) for w in np.flatnonzero(slow != 1.0)],
    }
    return WorkerResult(mean, periods, metrics, timeline, run.wait_s,
                        tuple(int(w) for w in np.flatnonzero(slow != 1.0)), names)


def _predicted_period_s(spec: StragglerSpec, ideal_s: float, prof: _Profile, workers: int, prefetch: bool) -> float:
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
    if not workers:
        raise SimInputError("workers must list at least one worker count")
    rows = []
    for p in workers:
        if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 1:
            raise SimInputError(f"workers must be whole numbers >= 1, got {p!r}")
        c = cluster.with_gpus(int(p))
        spec = dataclasses.replace(straggler, stragglers=min(straggler.stragglers, int(p)))
        common = dict(batch_size=batch_size, seed=int(seed) + int(p), gpus_by_worker=None, precision=precision,
                      prefetch=prefetch, bucket_mb=DEFAULT_BUCKET_MB, calibrate_iteration_s=None, record=False)
        run, base, plan, periods, *_ = _run_sync(model, c, scheduler, spec=spec, iterations=iterations, **common)
        ideal = float(_run_sync(model, c, scheduler, spec=StragglerSpec(), iterations=2, **common)[3][-1])
        mean = float(periods.mean())
        sem = float(periods.std(ddof=1) / math.sqrt(len(periods))) if len(periods) > 1 else 0.0
        prof = run.profiles[0]
        closed = _predicted_period_s(spec, ideal, prof, int(p), prefetch)
        rows.append({
            "workers": int(p), "ideal_s": ideal, "mean_s": mean, "sem_s": sem,
            "p50_s": float(np.percentile(periods, 50)), "p99_s": float(np.percentile(periods, 99)),
            "slowdown": mean / ideal, "closed_form_s": closed, "closed_form_slowdown": closed / ideal,
            "rel_error": (mean - closed) / closed if math.isfinite(closed) else math.nan,
            "z_score": (mean - closed) / sem if math.isfinite(closed) and sem > 0 else math.nan,
        })
    return pd.DataFrame(rows)

