"""What varies between workers: compute noise, persistent stragglers, link jitter.

Every draw comes from one ``numpy`` Generator seeded by the caller, in a
fixed order, so a seed gives one result. See `sim.workers` for the model and
the references (Blom 1958; David and Nagaraja 2003).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from sim.checks import check_float, check_int
from sim.errors import SimInputError

__all__ = [
    "DISTRIBUTIONS", "MAX_CV", "StragglerSpec", "blom_expected_max", "clipped_normal_lift", "draw_compute_factors",
    "expected_max_factor",
    "jitter_factors", "straggler_factors",
]

DISTRIBUTIONS = ("constant", "normal", "lognormal", "exponential", "empirical")
MAX_CV = 2.0


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
        object.__setattr__(self, "cv", check_float("cv", self.cv, 0.0, MAX_CV))
        object.__setattr__(self, "factor", check_float("factor", self.factor, 1.0, 1000.0))
        object.__setattr__(self, "jitter_cv", check_float("jitter_cv", self.jitter_cv, 0.0, MAX_CV))
        object.__setattr__(self, "stragglers", check_int("stragglers", self.stragglers, 0))
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


def clipped_normal_lift(cv: float, workers: int) -> float:
    """E[max(-M, 0)] for M the largest of P normals of mean 1 and sd ``cv``: what clipping each factor at 0
    adds to E[M] (E[max(M, 0)] = E[M] + E[max(-M, 0)]), cv times the integral of Phi(-u)^P over u >= 1/cv.

    Simpson's rule over [1/cv, 1/cv + 12] (beyond it Phi(-u) < 1e-33); for P = 1 it matches the exact
    cv phi(1/cv) - Phi(-1/cv) to 1e-9 (tests/test_review_formulas.py).
    """
    if cv <= 0:
        return 0.0
    u = np.linspace(1.0 / cv, 1.0 / cv + 12.0, 2401)
    y = np.array([0.5 * math.erfc(x / math.sqrt(2.0)) for x in u]) ** workers
    h = float(u[1] - u[0])
    return cv * h / 3.0 * float(y[0] + y[-1] + 4.0 * y[1:-1:2].sum() + 2.0 * y[2:-1:2].sum())


def expected_max_factor(spec: StragglerSpec, workers: int) -> float:
    """E[max of P compute factors] in closed form, or NaN where none exists.

    * constant: 1;
    * normal: ``1 + cv Phi^-1((P - 0.375)/(P + 0.25))`` (Blom 1958) plus what
      the clipping of each factor at 0 adds (`clipped_normal_lift`: 0.40 at
      P = 1 with cv = 2, below 1e-4 once cv <= 0.25 or P >= 8 with cv <= 1);
    * exponential: ``1 - cv + cv H_P`` with ``H_P = sum_{i<=P} 1/i``, exact;
    * empirical: ``sum_i x_(i) ((i/n)^P - ((i-1)/n)^P)``, exact, with
      ``x_(i)`` the sorted normalised samples;
    * lognormal: NaN (no closed form).
    """
    p = check_int("workers", workers, 1)
    if spec.dist == "constant" or (spec.dist != "empirical" and spec.cv == 0):
        return 1.0
    if spec.dist == "normal":
        return 1.0 + spec.cv * blom_expected_max(p) + clipped_normal_lift(spec.cv, p)
    if spec.dist == "exponential":
        return 1.0 - spec.cv + spec.cv * float(np.sum(1.0 / np.arange(1, p + 1)))
    if spec.dist == "empirical":
        x = np.sort(np.asarray(spec.samples, dtype=float))
        x = x / x.mean()
        n = len(x)
        i = np.arange(1, n + 1)
        return float(np.sum(x * ((i / n) ** p - ((i - 1) / n) ** p)))
    return math.nan
