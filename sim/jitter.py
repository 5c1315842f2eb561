"""Waiting for the slowest GPU: the expected cost of per-iteration jitter in synchronous SGD.

A synchronous step cannot end before every worker has sent its gradients, so
each iteration goes at the pace of the slowest of the P workers. When each
worker's compute in an iteration is its mean times ``1 + cv Z`` with Z a
standard normal, independent across workers and iterations, the slowest
worker's compute is the mean times ``1 + cv E[max of P normals]`` on average
(0 for one GPU, 0.56 for 2, 1.42 for 8, 2.07 for 32, 3.24 for 1,024): the run
is timed with every compute time scaled by that factor (`sync_wait_factor`,
applied by `sim.core.workload.with_sync_wait`), which is exact to first order in
cv for every scheduler, since every message waits for the same slowest worker.
The per-worker engine (`sim.workers`, stragglers) draws the workers instead.

Stragglers and jitter in synchronous SGD: Chen et al., "Revisiting Distributed
Synchronous SGD", arXiv 1604.00981 (2016), Sec. 2; Ko et al., "An In-Depth
Analysis of Distributed Training of Deep Neural Networks", IPDPS 2021. The cv
is fitted on the validation's calibration cases (``data/sync_jitter.csv``).
"""

from __future__ import annotations

import csv
import functools
import math

import numpy as np

from sim.catalog import DATA_DIR
from sim.errors import SimInputError

__all__ = ["MAX_SYNC_JITTER_CV", "SYNC_JITTER_PATH", "default_sync_jitter_cv", "expected_max_normal",
           "sync_wait_factor"]

SYNC_JITTER_PATH = DATA_DIR / "sync_jitter.csv"
#: The largest cv accepted (a worker's compute at most doubled at one standard deviation).
MAX_SYNC_JITTER_CV = 1.0


@functools.lru_cache(maxsize=1)
def default_sync_jitter_cv() -> float:
    """The fitted default cv (``data/sync_jitter.csv``, its ``default`` row)."""
    with open(SYNC_JITTER_PATH, newline="", encoding="utf-8") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            if row.get("name") != "default":
                continue
            try:
                value = float(row["sync_jitter_cv"])
            except (TypeError, ValueError):
                raise SimInputError(f"sync_jitter.csv line {line}: sync_jitter_cv must be a number") from None
            if not (math.isfinite(value) and 0 <= value <= MAX_SYNC_JITTER_CV):
                raise SimInputError(f"sync_jitter.csv line {line}: sync_jitter_cv must be in [0, 1], got {value}")
            return value
    raise SimInputError("sync_jitter.csv has no 'default' row")


@functools.lru_cache(maxsize=1)
def _grid() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x, the standard normal density and log of its distribution function on a grid wide enough
    for 2^20 GPUs (the maximum of a million normals is about 4.9)."""
    x = np.linspace(-12.0, 12.0, 48_001)
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    cdf = 0.5 * np.array([math.erfc(-v / math.sqrt(2)) for v in x.tolist()])
    return x, pdf, np.log(np.maximum(cdf, 1e-300))


@functools.lru_cache(maxsize=4096)
def expected_max_normal(n: int) -> float:
    """E[max of ``n`` independent standard normal variables]: 0 for n = 1, 1/sqrt(pi) for 2;
    the integral of x n phi(x) Phi(x)^(n-1) (trapezoids on `_grid`, about 1e-9 off)."""
    if n <= 1:
        return 0.0
    x, pdf, log_cdf = _grid()
    density = n * pdf * np.exp((n - 1) * log_cdf)
    f = x * density
    return float(np.sum((f[1:] + f[:-1]) * np.diff(x)) / 2)


def sync_wait_factor(gpus: int, cv: float) -> float:
    """What the slowest of ``gpus`` workers' compute is on average, as a multiple of the mean:
    ``1 + cv E[max of gpus normals]`` (1 for one GPU or cv 0)."""
    return 1.0 + cv * expected_max_normal(int(gpus)) if cv > 0 else 1.0
