"""The schedulers as data: each scheduler module registers a `SchedulerSpec`.

A spec holds the scheduler's name, a one-line description, its citation, a
``plan`` function with one signature for all, ``(grads, cost, options,
bucket_mb) -> Plan``, and the knobs (`KNOBS`) it reads. `make_plan`, the CLI's
flags and checks, `sim.tune`, the listing and the dashboard read the registry,
so adding a scheduler is one new module in `sim.schedulers` (and its tests).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from sim.checks import check_choice
from sim.comm import CommCost
from sim.core.plan import SHARD_LEVELS, SHARD_NONE, GradientLayers, Plan
from sim.errors import SimInputError
from sim.schedulers.knobs import DEFAULT_BUCKET_MB, KNOBS, Knob
from sim.schedulers.options import SchedulerOptions

__all__ = [
    "KNOBS", "Knob", "LiveView", "SchedulerSpec", "check_knobs_apply", "get_spec", "ignoring_options", "knob_reads", "knob_users", "make_plan",
    "register", "scheduler_names", "settings_of", "specs", "unregister",
]

#: The architecture whose runs read the knobs marked ``ps``.
PS_ARCHITECTURE = "ps"


@dataclass(frozen=True)
class SchedulerSpec:
    """One scheduler, as data.

    ``plan(grads, cost, options, bucket_mb)`` returns its `Plan`; ``knobs``
    are the knobs it reads: names of `KNOBS`, or a new `Knob` (name, type,
    unit, default, bounds, help), which `register` adds to `KNOBS` so that it
    gets its flag, its check and its place in `sim.tune`, and which the plan
    reads as ``getattr(options, name)``; ``allreduce_only`` refuses the parameter
    server; ``ps_in_flight_knob`` names the knob that bounds the servers busy
    at once under the parameter server; ``per_worker`` says whether the
    per-worker engine (`sim.workers`) times its plans; ``function`` is the
    scheduler's own function with its natural signature (default: ``plan``);
    ``shard`` is what each GPU keeps 1/P of (`sim.core.plan.SHARD_LEVELS`:
    ``"none"``, or ZeRO's ``"optimizer"``, ``"gradients"``, ``"parameters"``),
    which `sim.memory` reads for the per-GPU memory.
    """

    name: str
    description: str
    citation: str
    plan: Callable[[GradientLayers, CommCost, SchedulerOptions, float], Plan]
    knobs: tuple[str, ...] = ()
    allreduce_only: bool = False
    ps_in_flight_knob: str | None = None
    per_worker: bool = True
    function: Callable[..., Plan] | None = None
    new_knobs: tuple[Knob, ...] = dataclasses.field(default=(), repr=False)
    shard: str = SHARD_NONE

    def __post_init__(self) -> None:
        if not self.name or not self.description or not self.citation:
            raise SimInputError("a scheduler needs a name, a description and a citation")
        check_choice("shard", self.shard, SHARD_LEVELS)
        declared = tuple(k for k in self.knobs if isinstance(k, Knob))
        object.__setattr__(self, "new_knobs", self.new_knobs + declared)
        object.__setattr__(self, "knobs", tuple(k.name if isinstance(k, Knob) else k for k in self.knobs))
        own = {k.name for k in self.new_knobs}
        for knob in (*self.knobs, *([self.ps_in_flight_knob] if self.ps_in_flight_knob else [])):
            if knob not in KNOBS and knob not in own:
                raise SimInputError(f"scheduler {self.name!r} reads unknown knob {knob!r}; valid: {', '.join(KNOBS)}")


_REGISTRY: dict[str, SchedulerSpec] = {}


def register(spec: SchedulerSpec) -> SchedulerSpec:
    """Add ``spec`` to the registry (after the ones already there); returns it."""
    if spec.name in _REGISTRY:
        raise SimInputError(f"a scheduler called {spec.name!r} is registered already")
    for knob in spec.new_knobs:
        if knob.name in KNOBS and KNOBS[knob.name] != knob:
            raise SimInputError(f"scheduler {spec.name!r} declares knob {knob.name!r}, which exists already")
    for knob in spec.new_knobs:
        KNOBS[knob.name] = knob
    _REGISTRY[spec.name] = spec
    return spec


def unregister(name: str) -> SchedulerSpec:
    """Remove the scheduler called ``name`` (for tests of the registry), and the knobs
    it declared that no other scheduler reads; returns its spec."""
    spec = _REGISTRY.pop(get_spec(name).name)
    for knob in spec.new_knobs:
        if not any(knob.name in other.knobs for other in _REGISTRY.values()):
            KNOBS.pop(knob.name, None)
    return spec


def get_spec(name: str) -> SchedulerSpec:
    """The spec of the scheduler called ``name``; an unknown name lists the valid ones."""
    return _REGISTRY[check_choice("scheduler", name, scheduler_names())]


def scheduler_names() -> tuple[str, ...]:
    """Every registered scheduler's name, in registration order."""
    return tuple(_REGISTRY)


def specs() -> tuple[SchedulerSpec, ...]:
    """Every registered spec, in registration order."""
    return tuple(_REGISTRY.values())


def ignoring_options(function: Callable[[GradientLayers, CommCost], Plan]):
    """The ``plan`` of a scheduler that reads no knob: ``function(grads, cost)``."""
    return lambda grads, cost, options, bucket_mb: function(grads, cost)


class LiveView(Mapping):
    """A read-only mapping name -> ``value(spec)`` over the registry as it is now."""

    def __init__(self, value: Callable[[SchedulerSpec], object]):
        self._value = value

    def __getitem__(self, name: str):
        if name not in _REGISTRY:
            raise KeyError(name)
        return self._value(_REGISTRY[name])

    def __iter__(self) -> Iterator[str]:
        return iter(scheduler_names())

    def __len__(self) -> int:
        return len(_REGISTRY)

    def __repr__(self) -> str:
        return repr(dict(self))


def make_plan(name: str, grads: GradientLayers, cost: CommCost, *, bucket_mb: float = DEFAULT_BUCKET_MB,
              options: SchedulerOptions | dict | None = None) -> Plan:
    """Run the scheduler called ``name``; an unknown name lists the valid ones."""
    spec = get_spec(name)
    return spec.plan(grads, cost, SchedulerOptions.of(options), bucket_mb)


def knob_reads(knob: str, scheduler: str, architecture: str) -> bool:
    """Whether a run of ``scheduler`` on ``architecture`` reads ``knob``."""
    return knob in get_spec(scheduler).knobs or (architecture == PS_ARCHITECTURE and KNOBS[knob].ps)


def knob_users(knob: str) -> list[str]:
    """Who reads ``knob``: the schedulers' names, then ``architecture ps`` if it does."""
    users = [s.name for s in specs() if knob in s.knobs]
    return users + ([f"architecture {PS_ARCHITECTURE}"] if KNOBS[knob].ps else [])


def check_knobs_apply(knobs: Iterable[str], runs: Iterable[tuple[str, str]], *,
                      label: Callable[[str], str] = str) -> None:
    """A `SimInputError` for the first of ``knobs`` that none of ``runs``
    (``(scheduler, architecture)`` pairs) reads; ``label`` names a knob in the message."""
    runs = list(runs)
    for knob in knobs:
        if not any(knob_reads(knob, s, a) for s, a in runs):
            names = list(dict.fromkeys(s for s, _ in runs))
            which = f"scheduler{'s' if len(names) > 1 else ''} {', '.join(names)}"
            raise SimInputError(f"{label(knob)} does nothing for {which}; it applies to: {', '.join(knob_users(knob))}")


def settings_of(name: str, architecture: str, options: SchedulerOptions, bucket_mb: float) -> dict:
    """The settings a run of ``name`` on ``architecture`` reads, as ``{knob: value}``."""
    keys = list(get_spec(name).knobs)
    if architecture == PS_ARCHITECTURE:
        keys += [k.name for k in KNOBS.values() if k.ps and k.setting]
    return {k: bucket_mb if k == "bucket_mb" else getattr(options, k) for k in dict.fromkeys(keys)}
