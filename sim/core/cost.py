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

import bisect
import dataclasses
import math
import numbers
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from sim.errors import SimInputError

__all__ = ["MAX_COMM_SLOWDOWN", "MAX_COMPUTE_SLOWDOWN", "MAX_SLOWDOWN", "NO_COMM", "STEPS", "CommCost", "MeasuredCommCost", "PSCost",
           "Regime", "check_regimes", "check_slowdown", "lines", "lower_envelope", "measured_cost"]

#: The communication steps a cost object times. ``"launch"`` and ``"transfer"`` split an
#: all-reduce into the framework's host-side launch (`CommCost.launch_s`) and the rest, for a
#: plan whose launches run ahead of the transfers (ByteScheduler's credit, `sim.core.lower`).
STEPS = ("allreduce", "reduce-scatter", "all-gather", "push", "pull", "launch", "transfer")


#: The largest ``compute_slowdown``: the stretch x = b (1 + kappa c(x) / x) of a task
#: (`sim.core.interference`) has exactly one root for kappa <= 1 (``g(x) = x^2 - b x - b kappa c(x)``
#: is negative below b and rises at least b (1 - kappa) per second above it, c rising at most 1 per
#: second), and may have several above 1, where the engines could settle on different ones and more
#: slowdown could finish sooner. At 1, fully overlapped compute takes twice as long; every fitted or
#: derived coefficient is under 0.8 (``data/interference.csv``).
MAX_COMPUTE_SLOWDOWN = 1.0
#: Communication slowed more than this many times over by overlapped compute is absurd (its
#: equation, d = t + kappa_c / (1 + kappa_c) c(d), has one root for any kappa_c).
MAX_COMM_SLOWDOWN = 10.0
#: Each interference coefficient's largest value.
MAX_SLOWDOWN = {"compute_slowdown": MAX_COMPUTE_SLOWDOWN, "comm_slowdown": MAX_COMM_SLOWDOWN}
_WHY_MAX = {"compute_slowdown": " (one root of its stretch; sim.core.cost)", "comm_slowdown": ""}


def check_slowdown(value: float, name: str = "compute_slowdown") -> None:
    high, why = MAX_SLOWDOWN[name], _WHY_MAX[name]
    if not value <= high:
        raise SimInputError(f"{name} must be <= {high:g}{why}, got {value}")


def _check_nonnegative(owner, **values) -> None:
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise SimInputError(f"{owner}{name} must be a finite number >= 0, got {value!r}")
        if not (math.isfinite(value) and value >= 0):
            raise SimInputError(f"{owner}{name} must be a finite number >= 0, got {value}")


@dataclass(frozen=True)
class Regime:
    """One size regime of a piecewise cost: messages of ``from_bytes`` bytes
    or more (up to the next regime's start) take ``alpha_s + beta_s_per_byte * M``.

    Regimes follow a protocol or algorithm switch: MPI's eager and rendezvous
    protocols, NCCL's LL / LL128 / Simple protocols, ring versus tree.
    """

    from_bytes: float
    alpha_s: float
    beta_s_per_byte: float
    label: str = ""

    def __post_init__(self) -> None:
        _check_nonnegative("regime ", from_bytes=self.from_bytes, alpha_s=self.alpha_s,
                           beta_s_per_byte=self.beta_s_per_byte)

    def plus(self, alpha_s: float, beta_s_per_byte: float) -> Regime:
        return dataclasses.replace(self, alpha_s=self.alpha_s + alpha_s,
                                   beta_s_per_byte=self.beta_s_per_byte + beta_s_per_byte)


def check_regimes(regimes) -> tuple[Regime, ...]:
    """``regimes`` as a tuple, checked: the first starts at 0 bytes, the starts increase."""
    regimes = tuple(regimes)
    if not regimes:
        raise SimInputError("a piecewise cost needs at least one regime")
    if regimes[0].from_bytes != 0:
        raise SimInputError(f"the first regime must start at 0 bytes, got {regimes[0].from_bytes}")
    starts = [r.from_bytes for r in regimes]
    if any(b <= a for a, b in zip(starts[:-1], starts[1:], strict=True)):
        raise SimInputError(f"regime starts must increase strictly, got {starts}")
    return regimes


@dataclass(frozen=True)
class CommCost:
    """All-reduce time of one message: ``T(M) = alpha_s + beta_s_per_byte * M``,
    or, with ``regimes``, that of the regime the message falls in.

    Affine (no ``regimes``): ``alpha_s`` is the start-up cost that merging two
    messages saves, the quantity the MG-WFBP merge rule compares waiting time
    against.

    Piecewise (``regimes``, built with `CommCost.piecewise`): message sizes
    are cut at the regimes' ``from_bytes``; a message of M bytes takes the
    line of the last regime starting at or below M (`time_s`, vectorised).
    ``alpha_s`` is then the *small-message* start-up cost, the first regime's
    alpha (T(0), the latency of the smallest message), and
    ``beta_s_per_byte`` the *large-message* per-byte cost, the last regime's
    beta (the asymptotic bandwidth). These are what a scheduler that plans
    with one alpha (MG-WFBP's merge rule, which merges mostly small
    gradients) and the metrics report; `alpha_at` gives the alpha of the
    regime a given (e.g. merged) message lands in, and `merge_saving_s` what
    merging two messages actually saves (``alpha_s`` exactly when affine).
    """

    alpha_s: float
    beta_s_per_byte: float
    label: str = ""
    regimes: tuple[Regime, ...] = ()
    #: Interference (`sim.core.interference`): compute overlapped by communication runs
    #: ``1 + compute_slowdown x (overlapped fraction)`` times as long; 0 turns it off.
    compute_slowdown: float = 0.0
    #: Interference the other way (`sim.core.channel`): a message makes ``1 / (1 + comm_slowdown)``
    #: of its progress while its worker computes, all of it otherwise; 0 turns it off.
    comm_slowdown: float = 0.0
    #: The part of every message's start-up cost that is the framework's launch on the host (a
    #: Python call per partition, say: `sim.frameworks`), added by `with_launch`; the rest of
    #: ``alpha_s`` is the network's. It is in ``time_s`` either way; a plan whose launches run
    #: ahead of the transfers times it on a lane of its own (steps ``"launch"`` and ``"transfer"``).
    launch_s: float = 0.0

    def __post_init__(self) -> None:
        alpha, beta, launch = self.alpha_s, self.beta_s_per_byte, self.launch_s
        kappa, kappa_c = self.compute_slowdown, self.comm_slowdown
        if (not self.regimes and type(alpha) is type(beta) is type(launch) is type(kappa) is type(kappa_c) is float
                and 0.0 <= alpha < math.inf and 0.0 <= beta < math.inf and 0.0 <= launch <= alpha
                and 0.0 <= kappa <= MAX_COMPUTE_SLOWDOWN and 0.0 <= kappa_c <= MAX_COMM_SLOWDOWN):
            return  # plain floats, in range: every check below passes (the usual cost, checked at once)
        _check_nonnegative("", alpha_s=self.alpha_s, beta_s_per_byte=self.beta_s_per_byte,
                           compute_slowdown=self.compute_slowdown, comm_slowdown=self.comm_slowdown,
                           launch_s=self.launch_s)
        check_slowdown(self.compute_slowdown)
        check_slowdown(self.comm_slowdown, "comm_slowdown")
        smallest = min([self.alpha_s] + [r.alpha_s for r in self.regimes])
        if self.launch_s > smallest:
            raise SimInputError(f"launch_s ({self.launch_s}) is part of every message's start-up cost and cannot "
                                f"exceed the smallest alpha_s of the cost ({smallest})")
        if self.regimes:
            regimes = check_regimes(self.regimes)
            object.__setattr__(self, "regimes", regimes)
            if (self.alpha_s, self.beta_s_per_byte) != (regimes[0].alpha_s, regimes[-1].beta_s_per_byte):
                raise SimInputError("a piecewise cost's alpha_s is its first regime's alpha and beta_s_per_byte "
                                    "its last regime's beta; build it with CommCost.piecewise")

    @classmethod
    def piecewise(cls, regimes, label: str = "") -> CommCost:
        """A cost of size regimes (see the class doc); one regime is the plain affine cost."""
        regimes = check_regimes(regimes)
        if len(regimes) == 1:
            return cls(regimes[0].alpha_s, regimes[0].beta_s_per_byte, label)
        return cls(regimes[0].alpha_s, regimes[-1].beta_s_per_byte, label, regimes)

    @cached_property
    def _table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (np.array([r.from_bytes for r in self.regimes], dtype=float),
                np.array([r.alpha_s for r in self.regimes], dtype=float),
                np.array([r.beta_s_per_byte for r in self.regimes], dtype=float))

    def regime_index(self, nbytes):
        """Index of the regime each message of ``nbytes`` falls in (0 when affine)."""
        m = np.asarray(nbytes, dtype=float)
        if not self.regimes:
            return np.zeros(m.shape, dtype=np.int64)
        return np.searchsorted(self._table[0], m, side="right") - 1

    def time_s(self, nbytes):
        """Time to all-reduce ``nbytes`` (scalar or array)."""
        if not self.regimes:
            return self.alpha_s + self.beta_s_per_byte * np.asarray(nbytes, dtype=float)
        m = np.asarray(nbytes, dtype=float)
        i = self.regime_index(m)
        _, alphas, betas = self._table
        return alphas[i] + betas[i] * m

    def scalar_time(self):
        """`time_s` of one message as a function of Python floats: for this class's own `time_s`
        the same regime lookup, product and sum on floats (the same bits) without numpy's per-call
        cost; a subclass's `time_s` is called as it is."""
        if type(self).time_s is not CommCost.time_s:
            return lambda nbytes: float(self.time_s(nbytes))
        if not self.regimes:
            alpha, beta = float(self.alpha_s), float(self.beta_s_per_byte)
            return lambda nbytes: alpha + beta * nbytes
        starts, alphas, betas = (self._table[i].tolist() for i in range(3))

        def regime_time(nbytes):
            k = bisect.bisect_right(starts, nbytes) - 1  # (numpy's searchsorted, side "right")
            return alphas[k] + betas[k] * nbytes
        return regime_time

    def alpha_at(self, nbytes) -> float:
        """The start-up cost of the regime a message of ``nbytes`` lands in (``alpha_s`` when affine)."""
        if not self.regimes:
            return self.alpha_s
        return float(self._table[1][int(self.regime_index(float(nbytes)))])

    def merge_saving_s(self, nbytes_a, nbytes_b) -> float:
        """Time saved by sending two messages as one: ``T(a) + T(b) - T(a + b)``.

        Exactly ``alpha_s`` for an affine cost (the start-up cost MG-WFBP's merge
        rule compares); with regimes it follows the regimes the three messages
        fall in, and may be negative (merging into a slower regime costs time).
        """
        if not self.regimes:
            return self.alpha_s
        a, b = float(nbytes_a), float(nbytes_b)
        return float(self.time_s(a) + self.time_s(b) - self.time_s(a + b))

    def plus(self, alpha_s: float = 0.0, beta_s_per_byte: float = 0.0, label: str | None = None) -> CommCost:
        """This cost with ``alpha_s`` more per message and ``beta_s_per_byte`` more per byte, in every
        regime (e.g. a framework's per-collective launch and a copy through a fusion buffer).

        ``label`` replaces the label when given. Adding zeros returns an equal cost.
        """
        _check_nonnegative("plus: ", alpha_s=alpha_s, beta_s_per_byte=beta_s_per_byte)
        return dataclasses.replace(
            self,
            alpha_s=self.alpha_s + alpha_s,
            beta_s_per_byte=self.beta_s_per_byte + beta_s_per_byte,
            label=self.label if label is None else label,
            regimes=tuple(r.plus(alpha_s, beta_s_per_byte) for r in self.regimes),
        )

    def with_launch(self, launch_s: float, beta_s_per_byte: float = 0.0, label: str | None = None) -> CommCost:
        """`plus` ``launch_s`` per message and ``beta_s_per_byte`` per byte, the ``launch_s`` kept as a
        host-side launch (`launch_s`) that a plan may time ahead of the transfers."""
        _check_nonnegative("with_launch: ", launch_s=launch_s, beta_s_per_byte=beta_s_per_byte)
        out = self.plus(launch_s, beta_s_per_byte, label)
        return dataclasses.replace(out, launch_s=self.launch_s + launch_s) if launch_s else out

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
        if step == "launch":  # (a subclass times its own all-reduce; the split is the same)
            return self.launch_s
        if step == "transfer":
            return self.step_time_s("allreduce", members, nbytes, whole=whole) - self.launch_s
        if step == "allreduce":
            return self.message_time_s(members, nbytes) if whole else float(self.time_s(nbytes))
        if step in ("reduce-scatter", "all-gather"):
            return 0.5 * float(self.time_s(nbytes))
        raise SimInputError(f"an all-reduce cost has no step {step!r}; valid: allreduce, reduce-scatter, all-gather, "
                            "launch, transfer")


def lines(cost: CommCost) -> list[Regime]:
    """A cost's lines, one `Regime` per size regime (one starting at 0 bytes when affine)."""
    return list(cost.regimes) or [Regime(0.0, cost.alpha_s, cost.beta_s_per_byte, cost.label)]


def lower_envelope(costs: list[CommCost], label: str, names=None) -> CommCost:
    """The pointwise minimum of piecewise-affine costs, as one piecewise cost (affine when one line wins
    at every size): what a library that times each algorithm and runs the fastest at each message size
    costs. Each regime is labelled with the name of the cost it comes from (``names``, default their
    labels), and the result ``label (a, then b)`` with the winners in size order."""
    names = [c.label for c in costs] if names is None else list(names)
    tables = [[dataclasses.replace(r, label=n) for r in lines(c)] for c, n in zip(costs, names, strict=True)]
    starts = sorted({r.from_bytes for t in tables for r in t})
    out: list[Regime] = []
    for i, lo in enumerate(starts):
        hi = starts[i + 1] if i + 1 < len(starts) else math.inf
        here = [[r for r in t if r.from_bytes <= lo][-1] for t in tables]  # each cost's line on [lo, hi)
        best = min(here, key=lambda r: (r.alpha_s + r.beta_s_per_byte * lo, r.beta_s_per_byte))
        x = lo
        while True:
            if out and out[-1].from_bytes >= x:  # a crossing at the start of the last regime (rounding)
                out.pop()
            out.append(Regime(x, best.alpha_s, best.beta_s_per_byte, best.label))
            # the next line to win: the first to overtake this one, the flattest of those crossing there
            ahead = [((r.alpha_s - best.alpha_s) / (best.beta_s_per_byte - r.beta_s_per_byte), r.beta_s_per_byte, r)
                     for r in here if r.beta_s_per_byte < best.beta_s_per_byte]
            ahead = [a for a in ahead if a[0] < hi]
            if not ahead:
                break
            cross, _, best = min(ahead, key=lambda a: a[:2])
            x = max(cross, x)
    kept = [out[0]]
    for r in out[1:]:
        if (r.alpha_s, r.beta_s_per_byte) != (kept[-1].alpha_s, kept[-1].beta_s_per_byte):
            kept.append(r)
    return CommCost.piecewise(kept, f"{label} ({', then '.join(dict.fromkeys(r.label for r in kept))})")


@dataclass(frozen=True)
class MeasuredCommCost(CommCost):
    """Trace-driven communication: measured times for single-layer messages.

    ``layer_s[i]`` is the measured all-reduce time of model layer i's gradient
    alone. A message of one layer takes that time; a merged message, which was
    never measured, takes ``alpha_s + beta_s_per_byte * M`` from a least-squares
    fit of the measured points (`measured_cost`).

    `plus` adds its terms to both: to the fitted line, and, kept in
    ``added_alpha_s`` and ``added_beta_s_per_byte``, to every measured
    single-layer time.
    """

    layer_s: tuple = ()
    added_alpha_s: float = 0.0
    added_beta_s_per_byte: float = 0.0

    @property
    def is_measured(self) -> bool:
        return True

    def message_time_s(self, members, nbytes) -> float:
        if len(members) == 1:
            measured = self.layer_s[members[0]]
            if self.added_alpha_s or self.added_beta_s_per_byte:
                return float(measured + self.added_alpha_s + self.added_beta_s_per_byte * float(nbytes))
            return float(measured)
        return float(self.time_s(nbytes))

    def plus(self, alpha_s: float = 0.0, beta_s_per_byte: float = 0.0, label: str | None = None) -> MeasuredCommCost:
        line = super().plus(alpha_s, beta_s_per_byte, label)
        return dataclasses.replace(line, added_alpha_s=self.added_alpha_s + alpha_s,
                                   added_beta_s_per_byte=self.added_beta_s_per_byte + beta_s_per_byte)


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
    comm_slowdown: float = 0.0  # as `CommCost.comm_slowdown`

    def __post_init__(self) -> None:
        _check_nonnegative("", **{name: getattr(self, name) for name in (
            "push_alpha_s", "push_beta_s_per_byte", "pull_alpha_s", "pull_beta_s_per_byte", "compute_slowdown",
            "comm_slowdown")})
        check_slowdown(self.compute_slowdown)
        check_slowdown(self.comm_slowdown, "comm_slowdown")

    def plus(self, alpha_s: float = 0.0, beta_s_per_byte: float = 0.0, label: str | None = None) -> PSCost:
        """This cost with ``alpha_s`` more per message and ``beta_s_per_byte`` more per byte on
        each of push and pull (each is a message of its own), as `CommCost.plus`."""
        _check_nonnegative("plus: ", alpha_s=alpha_s, beta_s_per_byte=beta_s_per_byte)
        return dataclasses.replace(
            self, push_alpha_s=self.push_alpha_s + alpha_s, pull_alpha_s=self.pull_alpha_s + alpha_s,
            push_beta_s_per_byte=self.push_beta_s_per_byte + beta_s_per_byte,
            pull_beta_s_per_byte=self.pull_beta_s_per_byte + beta_s_per_byte,
            label=self.label if label is None else label)

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
