"""How far MG-WFBP falls short of the optimal merge, on random models.

MG-WFBP's merge rule is a greedy heuristic: it decides layer by layer, from
the output down, and never revisits a merge. `sim.schedulers.optimal` finds
the best grouping of consecutive layers under the same cost model. This
module draws seeded random models and clusters and measures the gap of the
iteration time: ``gap = t_mgwfbp / t_optimal - 1`` (never negative).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.api import simulate, single_gpu_iteration_s_of
from sim.checks import check_int, check_seed
from sim.cluster import Cluster
from sim.model import Model
from sim.schedulers.names import MGWFBP, OPTIMAL

__all__ = ["MAX_TRIALS", "gap_study", "gap_summary", "random_model"]

#: Random cases of one study: about 1 ms each on one core, so at most about a minute.
MAX_TRIALS = 50_000


def random_model(rng: np.random.Generator, *, min_layers: int = 5, max_layers: int = 60) -> Model:
    """A random layer table: parameters log-uniform in [1e3, 1e7], backward
    time log-uniform in [0.05, 5] ms, forward half of backward."""
    n = int(rng.integers(min_layers, max_layers + 1))
    params = np.round(10 ** rng.uniform(3, 7, n)).astype(np.int64)
    bwd_s = 10 ** rng.uniform(np.log10(0.05e-3), np.log10(5e-3), n)
    return Model(
        name=f"random{n}",
        layer_names=tuple(f"L{i}" for i in range(n)),
        params=params,
        fwd_s=bwd_s / 2,
        bwd_s=bwd_s,
        source="sim.gap.random_model",
    )


def gap_study(trials: int = 1000, seed: int = 0, gpus: int = 16) -> pd.DataFrame:
    """One row per random case: alpha, beta, layers, both iteration times and the gap.

    Clusters use a user alpha-beta cost with alpha log-uniform in [10 us, 1 ms]
    and bandwidth log-uniform in [1, 100] Gb/s.
    """
    trials = check_int("trials", trials, 1, MAX_TRIALS)
    rng = np.random.default_rng(check_seed(seed))
    rows = []
    for _ in range(trials):
        model = random_model(rng)
        alpha_s = 10 ** rng.uniform(-5, -3)
        beta = 8 / (10 ** rng.uniform(9, 11))
        cluster = Cluster(gpus=gpus, alpha_s=alpha_s, beta_s_per_byte=beta)
        one = single_gpu_iteration_s_of(model)  # worked out once for both runs (speedup is not read here)
        mg = simulate(model, cluster, MGWFBP, batch_size=1, single_gpu_iteration_s=one).iteration_time_s
        opt = simulate(model, cluster, OPTIMAL, batch_size=1, single_gpu_iteration_s=one).iteration_time_s
        rows.append((model.num_layers, alpha_s, beta, mg, opt, max(mg / opt - 1.0, 0.0)))
    return pd.DataFrame(rows, columns=["layers", "alpha_s", "beta_s_per_byte", "mgwfbp_s", "optimal_s", "gap"])


def gap_summary(cases: pd.DataFrame, seed: int) -> dict:
    """What `gap_study`'s ``cases`` say: how often MG-WFBP is slower, and by how much (in %)."""
    worse = cases.loc[cases["gap"] > 1e-9, "gap"]
    return {
        "trials": len(cases),
        "seed": seed,
        "mgwfbp_slower_fraction": len(worse) / len(cases),
        "gap_mean_pct": 100 * float(cases["gap"].mean()),
        "gap_median_pct_when_slower": 100 * float(worse.median()) if len(worse) else 0.0,
        "gap_p95_pct_when_slower": 100 * float(worse.quantile(0.95)) if len(worse) else 0.0,
        "gap_max_pct": 100 * float(cases["gap"].max()),
    }
