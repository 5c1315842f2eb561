"""S-SGD Scaling Explorer: a simulator of distributed synchronous SGD iterations.

A pure library: no printing, no file writes, no plotting. Entry points:
`load_model`, `Cluster`, `simulate`, `simulate_dag` and `sweep`. Packages by
layer: `sim.core` (plan, cost, lowering, engine, fast path, timeline,
metrics), `sim.schedulers` (one module per scheduler, a registry),
`sim.workers` (per-worker runs, stragglers, the seven algorithms, training),
`sim.calib` (network fits, trace importers, validation, the coarse
predictor), `sim.zoo` and `sim.cli`; further modules `sim.parallel`,
`sim.tune`, `sim.gap`, imported on demand.
"""

from sim.api import METRIC_KEYS, SimResult, simulate, simulate_dag, sweep
from sim.cluster import Cluster
from sim.comm import COLLECTIVES, CommCost
from sim.errors import SimInputError
from sim.model import Model, load_model, model_from_frame, zoo_names
from sim.schedulers import SCHEDULERS, Plan

__all__ = [
    "COLLECTIVES",
    "METRIC_KEYS",
    "SCHEDULERS",
    "Cluster",
    "CommCost",
    "Model",
    "Plan",
    "SimInputError",
    "SimResult",
    "load_model",
    "model_from_frame",
    "simulate",
    "simulate_dag",
    "sweep",
    "zoo_names",
]
