"""S-SGD Scaling Explorer: a simulator of distributed synchronous SGD iterations.

A pure library: no printing, no file writes, no plotting. Entry points:
`load_model`, `Cluster`, `simulate`, `simulate_dag` and `sweep`. Packages by
layer: `sim.core` (plan, cost, lowering, engine, fast path, timeline,
metrics), `sim.schedulers` (one module per scheduler, a registry),
`sim.workers` (per-worker runs, stragglers, the seven algorithms, training),
`sim.calib` (network fits, trace importers, validation, the coarse
predictor), `sim.zoo` and `sim.cli`; further modules `sim.parallel`,
`sim.tune`, `sim.gap`.

The names below are loaded on first use (lazy loading as in the Scientific
Python ecosystem's SPEC 1, PEP 562): ``import sim`` reads this file only, and
the first ``sim.simulate`` (or ``from sim import simulate``) imports the
engine and numpy. Submodules are reached as attributes too (``sim.parallel``).
"""

import importlib
from typing import TYPE_CHECKING

from sim.errors import SimInputError, SimInputWarning
from sim.lazy import submodule

if TYPE_CHECKING:  # (what editors and type checkers read: the names below, loaded lazily at run time)
    from sim.api import METRIC_KEYS, SimResult, simulate, simulate_dag, sweep
    from sim.cluster import Cluster
    from sim.comm import COLLECTIVES, CommCost
    from sim.model import Model, load_model, model_from_frame, zoo_names
    from sim.schedulers import SCHEDULERS, Plan

#: Each public name and the module that defines it.
_WHERE = {
    "COLLECTIVES": "sim.comm",
    "CommCost": "sim.comm",
    "Cluster": "sim.cluster",
    "METRIC_KEYS": "sim.api",
    "SimResult": "sim.api",
    "simulate": "sim.api",
    "simulate_dag": "sim.api",
    "sweep": "sim.api",
    "Model": "sim.model",
    "load_model": "sim.model",
    "model_from_frame": "sim.model",
    "zoo_names": "sim.model",
    "SCHEDULERS": "sim.schedulers",
    "Plan": "sim.schedulers",
}

__all__ = [
    "COLLECTIVES",
    "METRIC_KEYS",
    "SCHEDULERS",
    "Cluster",
    "CommCost",
    "Model",
    "Plan",
    "SimInputError",
    "SimInputWarning",
    "SimResult",
    "load_model",
    "model_from_frame",
    "simulate",
    "simulate_dag",
    "sweep",
    "zoo_names",
]


def __getattr__(name: str):
    """A public name from its module, or a submodule (``sim.parallel``), imported on first use."""
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value  # (found once: later reads do not come here)
        return value
    return submodule(__name__, name)


def __dir__():
    return list(__all__)
