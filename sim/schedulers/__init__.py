"""Gradient-communication schedulers: the scheduler decides, the engine times.

A scheduler is a small pure function from the gradient-bearing layers (their
ready times and sizes) and a communication cost to a `Plan`: which layers'
gradients travel together in one message, and in what order the messages go.
Layers without parameters send nothing and never appear in a plan.

Notation (Shi, Chu and Li, "MG-WFBP", INFOCOM 2019, Sec. III): layers are
numbered from input (0) to output (n-1); backward runs from n-1 down to 0.
``tau_b[l]`` is the backward start of layer l, ``t_b[l]`` its duration, so its
gradient is ready at ``r[l] = tau_b[l] + t_b[l]``; ``t_c`` is the all-reduce
time of a message and ``tau_c`` its start on the communication channel.

Each scheduler is one module of this package that registers a
`SchedulerSpec` (`sim.schedulers.registry`); importing the package imports
them all: the ten below in this order (the order of `SCHEDULERS`), then any
other module of the package, by name. Adding a scheduler means one new module
(and its tests); see the README's "Add a scheduler".
"""

from __future__ import annotations

import importlib
import pkgutil

from sim.core.plan import GradientLayers, Plan
from sim.schedulers.base import comm_end_s, plan_from_spans
from sim.schedulers.options import DEFAULT_BUCKET_MB, SchedulerOptions
from sim.schedulers.registry import LiveView, make_plan, settings_of

# Registration order is the order of SCHEDULERS and of every listing.
from sim.schedulers.sequential import sequential  # isort: skip
from sim.schedulers.wfbp import wfbp  # isort: skip
from sim.schedulers.synceasgd import synceasgd  # isort: skip
from sim.schedulers.mgwfbp import mgwfbp  # isort: skip
from sim.schedulers.optimal import optimal  # isort: skip
from sim.schedulers.bucket import bucket  # isort: skip
from sim.schedulers.horovod import horovod  # isort: skip
from sim.schedulers.ddp import ddp  # isort: skip
from sim.schedulers.bytescheduler import bytescheduler  # isort: skip
from sim.schedulers.dear import dear  # isort: skip

#: The package's modules that are not schedulers.
SUPPORT_MODULES = frozenset({"base", "knobs", "names", "options", "registry"})
for _module in pkgutil.iter_modules(__path__):
    if _module.name not in SUPPORT_MODULES:
        importlib.import_module(f"{__name__}.{_module.name}")

_FUNCTIONS = (sequential, wfbp, synceasgd, mgwfbp, optimal, bucket, horovod, ddp, bytescheduler, dear)

__all__ = [
    "DEFAULT_BUCKET_MB",
    "SCHEDULERS",
    "SCHEDULER_OPTIONS",
    "GradientLayers",
    "Plan",
    "SchedulerOptions",
    "comm_end_s",
    "make_plan",
    "settings_of",
    *(f.__name__ for f in _FUNCTIONS),
]

#: The old private name of `plan_from_spans`, still imported by tests/test_fast.py.
_plan = plan_from_spans

#: name -> the scheduler's function, in registration order (a live view of the registry).
SCHEDULERS = LiveView(lambda spec: spec.function or spec.plan)

#: name -> the `SchedulerOptions` fields (and ``bucket_mb``) the scheduler reads.
SCHEDULER_OPTIONS = LiveView(lambda spec: spec.knobs)
