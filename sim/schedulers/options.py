"""`SchedulerOptions`: the settings of the fusion, partitioning and parameter-server schedulers.

Its fields, defaults and validation come from `sim.schedulers.knobs.KNOBS`.
"""

from __future__ import annotations

import functools
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
    #: Values of knobs that schedulers declare in their own modules, as sorted ``(name, value)`` pairs;
    #: read them as attributes (``options.my_knob``), which give the knob's default when not set.
    extra: tuple = field(default=(), metadata={"help": "knobs declared by scheduler modules"})

    def __post_init__(self) -> None:
        for f in fields(self):  # the values stay as given; only their type and bounds are checked
            if f.name != "extra":
                KNOBS[f.name].check(getattr(self, f.name))
        for name, value in self.extra:
            if name not in KNOBS or name in _FIELDS:
                raise SimInputError(f"unknown option {name!r}; valid: {', '.join(sorted(KNOBS))}")
            KNOBS[name].check(value)

    def __getattr__(self, name: str):
        """A knob declared by a scheduler module: its value, or its default."""
        if name.startswith("__") or name not in KNOBS:
            raise AttributeError(name)
        return dict(self.extra).get(name, KNOBS[name].default)

    def changes(self) -> dict:
        """The knobs set to something else than their default, as a dict `of` takes."""
        changed = {f.name: getattr(self, f.name) for f in fields(self)
                   if f.name != "extra" and getattr(self, f.name) != KNOBS[f.name].default}
        return changed | dict(self.extra)

    @classmethod
    def of(cls, options) -> SchedulerOptions:
        """``options`` as given: None (defaults), a dict of fields or an instance."""
        if options is None:
            return _defaults(cls)
        if isinstance(options, cls):
            return options
        if isinstance(options, dict):
            declared = set(KNOBS) - _FIELDS - {"bucket_mb"}
            unknown = sorted(set(options) - _FIELDS - declared)
            if unknown:
                valid = sorted((_FIELDS - {"extra"}) | declared)
                raise SimInputError(f"unknown option(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
            extra = tuple(sorted((k, v) for k, v in options.items() if k in declared))
            return cls(**{k: v for k, v in options.items() if k in _FIELDS}, extra=extra)
        raise SimInputError(f"options must be a dict or SchedulerOptions, got {type(options).__name__}")


_FIELDS = {f.name for f in fields(SchedulerOptions)}


@functools.cache
def _defaults(cls) -> SchedulerOptions:
    """Every knob at its default (a frozen value: made once per class)."""
    return cls()
