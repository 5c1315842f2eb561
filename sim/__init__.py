"""S-SGD Scaling Explorer: a simulator of distributed synchronous SGD iterations.

A pure library: no printing, no file writes, no plotting. Entry points:
`load_model`, `Cluster`, `simulate` and `sweep`. Further modules, imported on
demand: `sim.workers` (stragglers, heterogeneous workers), `sim.algorithms`
(BSP, ASP, SSP, EASGD, AR-SGD, GoSGD, AD-PSGD), `sim.training`, `sim.coarse`,
`sim.validation`, `sim.fit`, `sim.importers`, `sim.parallel`, `sim.gap`.
"""

from sim.api import METRIC_KEYS, SimResult, simulate, sweep
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
    "sweep",
    "zoo_names",
]
