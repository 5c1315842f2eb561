"""`SchedulerOptions`: the settings of the fusion, partitioning and parameter-server schedulers.

Its fields, defaults and validation come from `sim.schedulers.knobs.KNOBS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from sim.errors import SimInputError
from sim.schedulers.knobs import DEFAULT_BUCKET_MB, KNOBS

__all__ = ["DEFAULT_BUCKET_MB", "MIB", "SchedulerOptions"]

MIB = 1 << 20


def _knob(name: str):
    knob = KNOBS[name]
    return field(default=knob.default, metadata={"help": knob.help})


@dataclass(frozen=True)
class SchedulerOptions:
    """Settings of the fusion, partitioning and parameter-server schedulers.

    Each field has its unit in its name; ``bucket_mb`` (for ``bucket`` and
    ``ddp``) stays a separate argument of `sim.simulate`, as before.
    """

    fusion_threshold_mb: float = _knob("fusion_threshold_mb")
    cycle_time_ms: float = _knob("cycle_time_ms")
    first_bucket_mb: float = _knob("first_bucket_mb")
    partition_bytes: int = _knob("partition_bytes")
    credit: int = _knob("credit")
    servers: int | None = _knob("servers")
    colocated: bool = _knob("colocated")
    ps_link_efficiency: float = _knob("ps_link_efficiency")

    def __post_init__(self) -> None:
        for f in fields(self):  # the values stay as given; only their type and bounds are checked
            KNOBS[f.name].check(getattr(self, f.name))

    @classmethod
    def of(cls, options) -> SchedulerOptions:
        """``options`` as given: None (defaults), a dict of fields or an instance."""
        if options is None:
            return cls()
        if isinstance(options, cls):
            return options
        if isinstance(options, dict):
            known = {f.name for f in fields(cls)}
            unknown = sorted(set(options) - known)
            if unknown:
                raise SimInputError(f"unknown option(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}")
            return cls(**options)
        raise SimInputError(f"options must be a dict or SchedulerOptions, got {type(options).__name__}")
