"""The seven lossless methods of the quantitative survey, as presets.

Shi et al., "A Quantitative Survey of Communication Optimizations in
Distributed Deep Learning", arXiv 2005.13247 (IEEE Network 2021), compare
BSP-A2A, WFBP-A2A, MG-WFBP, ByteScheduler-A2A, BSP-PS, WFBP-PS and
ByteScheduler-PS on one cluster. Each maps to an architecture, a scheduler
and its settings:

>>> from sim.methods import method_config
>>> from sim.schedulers.names import SYNCEASGD
>>> method_config("BSP-PS").scheduler == SYNCEASGD
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.errors import SimInputError
from sim.schedulers.names import BYTESCHEDULER, MGWFBP, SYNCEASGD, WFBP
from sim.schedulers.options import SchedulerOptions

__all__ = ["ARCHITECTURES", "DEFAULT_ARCHITECTURE", "DEFAULT_SCHEDULER", "METHODS", "MethodConfig", "method_config",
           "method_table", "resolve_method"]

#: Where the gradients are summed: an all-reduce among the workers, or a parameter server.
ARCHITECTURES = ("allreduce", "ps")
#: The scheduler and the architecture of a run that names none (`sim.simulate`, the CLI).
DEFAULT_SCHEDULER, DEFAULT_ARCHITECTURE = WFBP, ARCHITECTURES[0]

#: BytePS's partition size (BYTEPS_PARTITION_BYTES), as in the survey's runs.
BYTEPS_PARTITION_BYTES = 4_096_000
#: ByteScheduler's partition and credit in the survey's launch scripts:
#: BYTESCHEDULER_PARTITION=4000000 and BYTESCHEDULER_CREDIT=16000000, both
#: counted in parameters (bytescheduler/common/bytecore.py), so 16,000,000
#: bytes in fp32 and 4 partitions in flight.
BYTESCHEDULER_PARTITION_BYTES = 16_000_000
BYTESCHEDULER_CREDIT = 4
#: Share of the network's effective rate that BytePS 0.2 push and pull reach
#: over TCP on the survey's 10GbE cluster. **Fitted** (`python -m sim fit-validation`,
#: `sim.calib.fit_validation`) on the parameter-server rows of the calibration
#: split (8 and 32 GPUs, 18 cases); the rest (4 GPUs, one node, and 16) are held out. It stands for
#: what the alpha-beta link does not see: ps-lite's copies through host memory
#: and TCP's per-connection limits. `tests/test_frameworks.py` refits it.
BYTEPS_TCP_LINK_EFFICIENCY = 0.63


@dataclass(frozen=True)
class MethodConfig:
    """One method: ``architecture`` (`sim.api.ARCHITECTURES`), ``scheduler``
    (`sim.schedulers.SCHEDULERS`) and ``options`` (`sim.schedulers.SchedulerOptions` fields)."""

    name: str
    architecture: str
    scheduler: str
    options: dict = field(default_factory=dict)
    description: str = ""


METHODS: dict[str, MethodConfig] = {m.name: m for m in (
    MethodConfig("BSP-A2A", "allreduce", SYNCEASGD, {},
                 "Horovod all-reduce, every gradient in one message after backward"),
    MethodConfig("WFBP-A2A", "allreduce", WFBP, {},
                 "Horovod all-reduce, one message per layer as soon as it is ready (wait-free backpropagation)"),
    MethodConfig("MG-WFBP", "allreduce", MGWFBP, {},
                 "merged-gradient WFBP (Shi, Chu and Li, INFOCOM 2019)"),
    MethodConfig("ByteScheduler-A2A", "allreduce", BYTESCHEDULER,
                 {"partition_bytes": BYTESCHEDULER_PARTITION_BYTES, "credit": BYTESCHEDULER_CREDIT},
                 "ByteScheduler over all-reduce: partitions, layer nearest the input first, next forward overlapped"),
    MethodConfig("BSP-PS", "ps", SYNCEASGD,
                 {"partition_bytes": BYTEPS_PARTITION_BYTES, "ps_link_efficiency": BYTEPS_TCP_LINK_EFFICIENCY},
                 "BytePS parameter server, fusion threshold 512 MB: all gradients pushed after backward, "
                 "one server per worker machine"),
    MethodConfig("WFBP-PS", "ps", WFBP,
                 {"partition_bytes": BYTEPS_PARTITION_BYTES, "ps_link_efficiency": BYTEPS_TCP_LINK_EFFICIENCY},
                 "BytePS parameter server, fusion threshold 0: each layer pushed as soon as it is ready"),
    MethodConfig("ByteScheduler-PS", "ps", BYTESCHEDULER,
                 {"partition_bytes": BYTESCHEDULER_PARTITION_BYTES, "credit": BYTESCHEDULER_CREDIT,
                  "ps_link_efficiency": BYTEPS_TCP_LINK_EFFICIENCY},
                 "ByteScheduler over the BytePS parameter server"),
)}


def method_config(name: str) -> MethodConfig:
    """The preset called ``name``; an unknown name lists the valid ones."""
    if not isinstance(name, str) or name not in METHODS:
        raise SimInputError(f"unknown method {name!r}; valid: {', '.join(METHODS)}")
    return METHODS[name]


def resolve_method(method: str | None, scheduler: str, architecture: str,
                   options: SchedulerOptions | dict | None) -> tuple[str, str, SchedulerOptions]:
    """(scheduler, architecture, options) of a run: a method's, or as given.

    A method sets the scheduler and the architecture: beside it, a scheduler or an architecture that is neither
    the default (`DEFAULT_SCHEDULER`, `DEFAULT_ARCHITECTURE`) nor the method's own is refused, as the CLI refuses
    ``--method`` beside ``--scheduler``. The method's settings hold where ``options`` does not set the knob: a
    dict's keys, or the knobs of a `SchedulerOptions` that differ from their defaults (`SchedulerOptions.changes`).
    """
    if method is None:
        if architecture not in ARCHITECTURES:
            raise SimInputError(f"unknown architecture {architecture!r}; valid: {', '.join(ARCHITECTURES)}")
        return scheduler, architecture, SchedulerOptions.of(options)
    cfg = method_config(method)
    if scheduler not in (DEFAULT_SCHEDULER, cfg.scheduler):
        raise SimInputError(f"method {method} sets the scheduler ({cfg.scheduler}): give method or scheduler "
                            f"{scheduler!r}, not both")
    if architecture not in (DEFAULT_ARCHITECTURE, cfg.architecture):
        raise SimInputError(f"method {method} sets the architecture ({cfg.architecture}): give method or "
                            f"architecture {architecture!r}, not both")
    given = SchedulerOptions.of(options).changes() if not isinstance(options, dict) else options
    return cfg.scheduler, cfg.architecture, SchedulerOptions.of({**cfg.options, **given})


def method_table() -> list[dict]:
    """Every method as a dict: name, architecture, scheduler, settings, description."""
    return [{"name": m.name, "architecture": m.architecture, "scheduler": m.scheduler, "settings": dict(m.options),
             "description": m.description} for m in METHODS.values()]
