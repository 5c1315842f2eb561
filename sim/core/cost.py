"""The one cost model: every communication time the engine uses comes from here.

A cost object answers, per message, how long one step of it takes on its
lane (`step_time_s`): an all-reduce (``"allreduce"``), the two halves of a
decoupled all-reduce (``"reduce-scatter"``, ``"all-gather"``, DeAR), or the
``"push"`` and ``"pull"`` of the parameter-server architecture. The
schedulers plan with ``time_s`` (and ``message_time_s`` for measured
single-layer messages); the lowering (`sim.core.lower`) asks `step_time_s`
for every communication task, and the fast path (`sim.core.fast`) asks the
same function for the messages it times. The collectives' formulas that
build these objects live in `sim.comm`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.errors import SimInputError

__all__ = ["NO_COMM", "STEPS", "CommCost", "MeasuredCommCost", "PSCost", "measured_cost"]

#: The communication steps a cost object times.
STEPS = ("allreduce", "reduce-scatter", "all-gather", "push", "pull")


@dataclass(frozen=True)
class CommCost:
    """All-reduce time of one message: ``T(M) = alpha_s + beta_s_per_byte * M``.

    ``alpha_s`` is the start-up cost that merging two messages saves, the
    quantity the MG-WFBP merge rule compares waiting time against.
    """

    alpha_s: float
    beta_s_per_byte: float
    label: str = ""
    #: Interference (`sim.core.interference`): compute overlapped by communication runs
    #: ``1 + compute_slowdown x (overlapped fraction)`` times as long; 0 turns it off.
    compute_slowdown: float = 0.0

    def __post_init__(self) -> None:
        for name in ("alpha_s", "beta_s_per_byte", "compute_slowdown"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise SimInputError(f"{name} must be a finite number >= 0, got {value}")

    def time_s(self, nbytes):
        """Time to all-reduce ``nbytes`` (scalar or array)."""
        return self.alpha_s + self.beta_s_per_byte * np.asarray(nbytes, dtype=float)

    @property
    def is_free(self) -> bool:
        return self.alpha_s == 0 and self.beta_s_per_byte == 0

    @property
    def is_measured(self) -> bool:
        """True when single-layer messages take measured times (trace-driven)."""
        return False

    def message_time_s(self, members, nbytes) -> float:
        """Time of one message carrying the gradients of layers ``members``."""
        return float(self.time_s(nbytes))

    def step_time_s(self, step: str, members, nbytes, *, whole: bool = True) -> float:
        """Time of one step of a message on its lane.

        ``whole`` is False for a partition of a message (a part was never
        measured on its own, so it takes ``time_s``). A decoupled all-reduce's
        reduce-scatter and all-gather each take half of ``time_s`` (exact for
        ring and halving-doubling).
        """
        if step == "allreduce":
            return self.message_time_s(members, nbytes) if whole else float(self.time_s(nbytes))
        if step in ("reduce-scatter", "all-gather"):
            return 0.5 * float(self.time_s(nbytes))
        raise SimInputError(f"an all-reduce cost has no step {step!r}; valid: allreduce, reduce-scatter, all-gather")


@dataclass(frozen=True)
class MeasuredCommCost(CommCost):
    """Trace-driven communication: measured times for single-layer messages.

    ``layer_s[i]`` is the measured all-reduce time of model layer i's gradient
    alone. A message of one layer takes that time; a merged message, which was
    never measured, takes ``alpha_s + beta_s_per_byte * M`` from a least-squares
    fit of the measured points (`measured_cost`).
    """

    layer_s: tuple = ()

    @property
    def is_measured(self) -> bool:
        return True

    def message_time_s(self, members, nbytes) -> float:
        if len(members) == 1:
            return float(self.layer_s[members[0]])
        return float(self.time_s(nbytes))


def measured_cost(layer_comm_s, layer_bytes) -> MeasuredCommCost:
    """Fit ``T(M) = alpha + beta M`` to the measured per-layer all-reduce times
    (ordinary least squares over the layers that send something, alpha and
    beta clipped at 0) and keep the measured times for single-layer messages."""
    comm = np.asarray(layer_comm_s, dtype=float)
    nbytes = np.asarray(layer_bytes, dtype=float)
    sends = (nbytes > 0) & (comm > 0)
    if sends.sum() >= 2 and np.ptp(nbytes[sends]) > 0:
        beta, alpha = np.polyfit(nbytes[sends], comm[sends], 1)
        alpha, beta = max(float(alpha), 0.0), max(float(beta), 0.0)
    elif sends.any():
        alpha, beta = 0.0, float(comm[sends].sum() / nbytes[sends].sum())
    else:
        alpha, beta = 0.0, 0.0
    return MeasuredCommCost(alpha, beta, "measured per layer, alpha-beta fit for merged messages",
                            layer_s=tuple(comm.tolist()))


NO_COMM = CommCost(0.0, 0.0, "P = 1: no communication")


@dataclass(frozen=True)
class PSCost:
    """Push and pull times of one message in the parameter-server architecture.

    ``push_time_s(M) = push_alpha_s + push_beta_s_per_byte * M`` and likewise
    for pull (see `ps_cost` for the formulas). ``shared_lane`` is True when
    push and pull go through the same direction of the same interface
    (servers colocated with the workers), so they take turns on one lane;
    otherwise push uses the worker's uplink and pull its downlink (full
    duplex) and they overlap.
    """

    push_alpha_s: float
    push_beta_s_per_byte: float
    pull_alpha_s: float
    pull_beta_s_per_byte: float
    shared_lane: bool = False
    label: str = "ps"
    compute_slowdown: float = 0.0  # as `CommCost.compute_slowdown`

    def __post_init__(self) -> None:
        for name in ("push_alpha_s", "push_beta_s_per_byte", "pull_alpha_s", "pull_beta_s_per_byte",
                     "compute_slowdown"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise SimInputError(f"{name} must be a finite number >= 0, got {value}")

    def push_time_s(self, nbytes):
        """Time to push ``nbytes`` of gradient to the servers (scalar or array)."""
        return self.push_alpha_s + self.push_beta_s_per_byte * np.asarray(nbytes, dtype=float)

    def pull_time_s(self, nbytes):
        """Time to pull ``nbytes`` of updated parameters back (scalar or array)."""
        return self.pull_alpha_s + self.pull_beta_s_per_byte * np.asarray(nbytes, dtype=float)

    def time_s(self, nbytes):
        """Push then pull, unpipelined: the all-reduce-equivalent time."""
        return self.push_time_s(nbytes) + self.pull_time_s(nbytes)

    def step_time_s(self, step: str, members, nbytes, *, whole: bool = True) -> float:
        """Time of a push or a pull of one message or part."""
        if step == "push":
            return float(self.push_time_s(nbytes))
        if step == "pull":
            return float(self.pull_time_s(nbytes))
        raise SimInputError(f"a parameter-server cost has no step {step!r}; valid: push, pull")
