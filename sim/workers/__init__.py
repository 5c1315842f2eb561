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
for normal noise (plus what the clipping of the factors at 0 adds,
`clipped_normal_lift`), ``H_P`` for exponential, exact sums for a histogram.
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

from sim.core.timeline import TIMELINE_COLUMNS as WORKER_TIMELINE_COLUMNS
from sim.workers.engine import (
    MAX_WORKER_ITERATIONS,
    SyncRun,
    WorkerResult,
    run_sync,
    simulate_workers,
    with_waits,
    worker_models,
)
from sim.workers.events import Engine
from sim.workers.montecarlo import monte_carlo, predicted_period_s
from sim.workers.stragglers import (
    DISTRIBUTIONS,
    MAX_CV,
    StragglerSpec,
    blom_expected_max,
    clipped_normal_lift,
    draw_compute_factors,
    expected_max_factor,
    jitter_factors,
    straggler_factors,
)

__all__ = [
    "DISTRIBUTIONS",
    "MAX_CV",
    "MAX_WORKER_ITERATIONS",
    "WORKER_TIMELINE_COLUMNS",
    "Engine",
    "StragglerSpec",
    "SyncRun",
    "WorkerResult",
    "blom_expected_max",
    "clipped_normal_lift",
    "draw_compute_factors",
    "expected_max_factor",
    "jitter_factors",
    "monte_carlo",
    "predicted_period_s",
    "run_sync",
    "simulate_workers",
    "straggler_factors",
    "with_waits",
    "worker_models",
]
