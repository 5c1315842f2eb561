"""Seven distributed SGD algorithms, each simulated over time with many workers.

Ko, Lee, Lee and Kim ("An In-Depth Analysis of Distributed Training of Deep
Neural Networks", IPDPS 2021) compare seven ways for P workers to share what
they learn. Here each is a discrete-event simulation on `sim.workers.Engine`:

===========  =============  ==========================================================
algorithm    topology       one step of worker w
===========  =============  ==========================================================
BSP          server         compute; push gradient; barrier: wait for all P; pull model
ASP          server         compute; push gradient; pull model at once
SSP          server         as ASP, but worker w may start step c only when every
                            worker has finished step c - s (Ho et al., NIPS 2013)
EASGD        server         local SGD; every tau steps pull the center x~, move
                            x_w <- x_w - a(x_w - x~), push the same a(x_w - x~) to the
                            center (asynchronous EASGD, Zhang, Choromanska and LeCun,
                            NIPS 2015, Alg. 1; a = 0.9 / P)
AR-SGD       all-reduce     compute; all-reduce the gradient (the cluster's collective,
                            one message after backward); update (`sim.workers`)
GoSGD        gossip         local SGD; with probability p send (x_w, half its weight)
                            to a random peer, who merges it at its next step boundary
                            (Blot, Picard, Cord and Thome, arXiv 1611.09726, 2016)
AD-PSGD      ring           compute a gradient on x_w while averaging x_w with a random
                            ring neighbour, then apply the gradient (Lian, Zhang, Zhang
                            and Liu, ICML 2018, Alg. 1)
===========  =============  ==========================================================

Costs. A worker's step computes ``io + h2d + f (F + B)`` (``f`` its straggler
factor, `sim.workers.StragglerSpec`), plus its update ``U`` where the worker
updates a local model. Every message carries the full model, M = params x
bytes per parameter, over the cluster's inter-node ``network`` preset:
``alpha + beta M`` (times a jitter factor). One parameter server holds the
model; its inbound and outbound links each carry one message at a time,
shared by every worker — the bottleneck that grows with P. The server
applies each push in ``U``. In the gossip and ring algorithms each worker's
link carries one exchange at a time. Each GPU is an endpoint of the network
(``gpus_per_node`` only matters to AR-SGD's collective).

Every run processes a budget of ``P x steps`` gradients and records each
change to a model in an **update log** (`UPDATE_COLUMNS`) that
`sim.training` replays on a real problem. Models are numbered: -1 is the
server (BSP, ASP, SSP), the center variable (EASGD) or the replicated model
(AR-SGD); 0..P-1 are the workers' replicas. Two kinds of row:

* ``gradient``: ``x[target] -= lr * weight * grad(snapshot(src, src_version),
  minibatch(worker, step))``. The weight is 1/P where one model takes every
  worker's gradient (the mean of P gradients per P updates), 1 on a replica.
* ``elastic``, ``gossip``, ``average``: ``x[target] += weight *
  (snapshot(src, src_version) - snapshot(ref, ref_version))``.

``version`` is the target's version after the change (its count of changes).
The **staleness** of a change is the number of changes the target received
after the inputs were read and before this one lands, not counting gradients
computed from the very same snapshot (those add up to one synchronous
mini-batch, as in BSP). BSP and AR-SGD therefore have staleness 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.catalog import get_network
from sim.cluster import Cluster
from sim.errors import SimInputError
from sim.model import Model, bytes_per_param, check_batch_size
from sim.schedulers.names import SYNCEASGD
from sim.workers import (
    WORKER_TIMELINE_COLUMNS,
    Engine,
    StragglerSpec,
    _check_seed,
    _profile,
    _run_sync,
    _worker_models,
    draw_compute_factors,
    jitter_factors,
    straggler_factors,
)

__all__ = [
    "ALGORITHMS",
    "CENTRAL",
    "MAX_STEPS",
    "SERVER",
    "UPDATE_COLUMNS",
    "AlgorithmConfig",
    "AlgorithmResult",
    "simulate_algorithm",
    "simulate_algorithms",
    "sweep_algorithms",
]

ALGORITHMS = ("BSP", "ASP", "SSP", "EASGD", "AR-SGD", "GoSGD", "AD-PSGD")
#: Algorithms that go through the parameter server.
CENTRAL = ("BSP", "ASP", "SSP", "EASGD")
SERVER = -1
NO_MODEL = -2
UPDATE_COLUMNS = (
    "time_s", "kind", "worker", "step", "target", "version", "src", "src_version", "ref", "ref_version",
    "weight", "staleness",
)
MAX_STEPS = 2000
MAX_ALGORITHM_WORKERS = 1024


@dataclass(frozen=True)
class AlgorithmConfig:
    """The knobs of the algorithms (defaults are ours unless cited).

    Parameters
    ----------
    staleness : int
        SSP's bound s: a worker may run at most s steps ahead of the slowest.
    tau : int
        EASGD's communication period, in local steps (Zhang et al. try 1 to 64).
    moving_rate : float, optional
        EASGD's elastic rate a; ``0.9 / P`` when not given (Zhang et al.,
        Sec. 6: beta = a P = 0.9).
    gossip_p : float
        GoSGD's probability of sending after a local step.
    """

    staleness: int = 3
    tau: int = 4
    moving_rate: float | None = None
    gossip_p: float = 0.5

    def __post_init__(self) -> None:
        for name in ("staleness", "tau"):
            value = getattr(self, name)
            low = 0 if name == "staleness" else 1
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise SimInputError(f"{name} must be a whole number >= {low}, got {value!r}")
        if self.moving_rate is not None and not (math.isfinite(self.moving_rate) and 0 < self.moving_rate <= 1):
            raise SimInputError(f"moving_rate must be in (0, 1], got {self.moving_rate!r}")
        if not (isinstance(self.gossip_p, (int, float)) and 0 <= self.gossip_p <= 1):
            raise SimInputError(f"gossip_p must be from 0 to 1, got {self.gossip_p!r}")


@dataclass(frozen=True, eq=False)
class AlgorithmResult:
    """What `simulate_algorithm` returns.

    ``log`` follows `UPDATE_COLUMNS`; ``timeline`` follows
    `sim.workers.WORKER_TIMELINE_COLUMNS` (``iteration`` is the worker's
    local step; ``worker`` -1 is the server or the collective). ``consensus``
    names the model to evaluate: ``"server"`` (model -1) or ``"mean"`` (the
    mean of the replicas 0..P-1).
    """

    algorithm: str
    metrics: dict
    log: pd.DataFrame
    timeline: pd.DataFrame
    workers: int
    consensus: str


# --- shared machinery --------------------------------------------------------------


class _Link:
    """One direction of one network interface: one message at a time, first come first served."""

    __slots__ = ("busy_s", "bytes", "free_s", "spans")

    def __init__(self) -> None:
        self.free_s = 0.0
        self.busy_s = 0.0
        self.bytes = 0
        self.spans: list[tuple[float, float]] = []

    def busy_until_s(self, end_s: float) -> float:
        """Busy time within [0, end_s]."""
        return sum(max(0.0, min(b, end_s) - a) for a, b in self.spans)

    def reserve(self, now_s: float, duration_s: float, nbytes: int, *others: _Link) -> float:
        """Book this link (and ``others``) for ``duration_s`` from the earliest time all are free."""
        links = (self, *others)
        start = max(now_s, *(link.free_s for link in links))
        for link in links:
            link.free_s = start + duration_s
            link.busy_s += duration_s
            link.bytes += nbytes
            link.spans.append((start, start + duration_s))
        return start


@dataclass
class _Setup:
    """Everything a run needs, resolved once."""

    workers: int
    steps: int
    batch_size: int
    io_s: float
    h2d_s: float
    fb_s: np.ndarray  # forward + backward of each worker, with its persistent factor
    update_s: np.ndarray  # each worker's local update, with its persistent factor
    server_update_s: float
    message_s: float
    model_bytes: int
    spec: StragglerSpec
    seed: int
    slow: np.ndarray

    @property
    def budget(self) -> int:
        return self.workers * self.steps


class _Run:
    """State shared by every algorithm: clock, models' versions, the log, the timeline."""

    consensus = "server"

    def __init__(self, setup: _Setup, config: AlgorithmConfig) -> None:
        self.s = setup
        self.cfg = config
        self.p = setup.workers
        self.env = Engine()
        self.started = 0
        self.local_step = np.zeros(self.p, dtype=int)
        self.versions = dict.fromkeys(range(SERVER, self.p), 0)
        # per model: how many gradients computed from each version it has received
        self.from_version: dict[int, dict[int, int]] = {m: {} for m in range(SERVER, self.p)}
        self.log: list[tuple] = []
        self.rows: list[tuple] = []
        self.sent = np.zeros(self.p)
        self.received = np.zeros(self.p)
        self.compute_busy_s = np.zeros(self.p)
        self._factor_rngs = [np.random.default_rng([setup.seed, 1, w]) for w in range(self.p)]
        self._factors: list[np.ndarray] = [np.empty(0) for _ in range(self.p)]
        self._jitter_rng = np.random.default_rng([setup.seed, 2])
        self.rng = np.random.default_rng([setup.seed, 3])

    # -- costs
    def factor(self, w: int, step: int) -> float:
        """Worker w's compute factor at its local step, drawn from its own stream."""
        have = self._factors[w]
        while step >= len(have):
            more = draw_compute_factors(self.s.spec, self._factor_rngs[w], max(self.s.steps, 1), 1)[:, 0]
            have = self._factors[w] = np.concatenate([have, more])
        return float(have[step])

    def compute_s(self, w: int, step: int) -> float:
        return self.s.io_s + self.s.h2d_s + self.factor(w, step) * float(self.s.fb_s[w])

    def message_s(self) -> float:
        return self.s.message_s * float(jitter_factors(self.s.spec, self._jitter_rng, 1)[0])

    # -- records
    def row(self, worker: int, step: int, kind: str, start: float, end: float) -> None:
        if end > start:
            self.rows.append((worker, step, kind, start, end, end - start))

    def take_step(self, w: int) -> int | None:
        """Claim one gradient of the budget for worker w: its local step, or None when spent."""
        if self.started >= self.s.budget:
            return None
        self.started += 1
        step = int(self.local_step[w])
        self.local_step[w] += 1
        return step

    def apply(self, kind: str, worker: int, step: int, target: int, src: int, src_version: int,
              weight: float, ref: int = NO_MODEL, ref_version: int = -1, read_version: int | None = None) -> None:
        """Record one change to model ``target`` now, with its staleness.

        Changes since the read: ``version - read``; a gradient does not count
        the gradients computed from its own snapshot, all of which land after
        that snapshot was taken, so they are the count kept per read version.
        """
        counts = self.from_version[target]
        if kind == "gradient":
            read = src_version
            staleness = self.versions[target] - read - counts.get(read, 0)
            counts[read] = counts.get(read, 0) + 1
        else:
            read = read_version if read_version is not None else self.versions[target]
            staleness = self.versions[target] - read
        self.versions[target] += 1
        self.log.append((self.env.now_s, kind, worker, step, target, self.versions[target], src, src_version,
                         ref, ref_version, weight, staleness))

    def local_compute(self, w: int, step: int, then) -> None:
        """Compute a gradient and update the local replica; call ``then(w)`` after."""
        now = self.env.now_s
        read = self.versions[w]
        d = self.compute_s(w, step)
        u = float(self.s.update_s[w])
        self.row(w, step, "compute", now, now + d)
        self.row(w, step, "update", now + d, now + d + u)
        self.compute_busy_s[w] += d + u
        self.env.at(now + d + u, self._local_applied, w, step, read, then)

    def _local_applied(self, w, step, read, then):
        self.apply("gradient", w, step, target=w, src=w, src_version=read, weight=1.0)
        then(w)

    def run(self) -> _Run:
        for w in range(self.p):
            self.env.at(0.0, self.begin_step, w)
        self.env.run()
        return self

    def begin_step(self, w: int) -> None:  # pragma: no cover - every algorithm defines it
        raise NotImplementedError

    def server_links(self) -> tuple[_Link, ...]:
        return ()


# --- the parameter-server family -----------------------------------------------------


class _ParameterServer(_Run):
    """BSP, ASP and SSP: push gradients to one server, pull the model back.

    The server adds each gradient to the model as it arrives. A worker may go
    on — pull and compute its next step — when the algorithm allows: at once
    (ASP), when all P gradients of its round are in (BSP's barrier), or when
    the slowest worker is at most s steps behind (SSP). The pull carries the
    model as it was at that moment: updates that land while the pull waits for
    the link are not in it. So every BSP worker of a round reads the same
    model, and SSP with s = 0 is BSP.
    """

    def __init__(self, setup, config, mode: str) -> None:
        super().__init__(setup, config)
        self.mode = mode
        self.inbound, self.outbound, self.cpu = _Link(), _Link(), _Link()
        self.clock = np.zeros(self.p, dtype=int)  # gradients of each worker applied
        self.read = np.zeros(self.p, dtype=int)  # server version each worker holds
        self.waiting: list[int] = []
        self.waiting_since: dict[int, float] = {}
        self.round_applied: dict[int, int] = {}

    def server_links(self):
        return (self.inbound, self.outbound)

    def begin_step(self, w):
        step = self.take_step(w)
        if step is None:
            return
        now = self.env.now_s
        d = self.compute_s(w, step)
        self.row(w, step, "compute", now, now + d)
        self.compute_busy_s[w] += d
        self.env.at(now + d, self.push, w, step)

    def push(self, w, step):
        now = self.env.now_s
        t = self.message_s()
        start = self.inbound.reserve(now, t, self.s.model_bytes)
        self.sent[w] += self.s.model_bytes
        self.row(w, step, "queue", now, start)
        self.row(w, step, "push", start, start + t)
        self.env.at(start + t, self.arrive, w, step)

    def arrive(self, w, step):
        start = self.cpu.reserve(self.env.now_s, self.s.server_update_s, 0)
        self.row(SERVER, step, "update", start, start + self.s.server_update_s)
        self.env.at(start + self.s.server_update_s, self.applied, w, step)

    def applied(self, w, step):
        self.apply("gradient", w, step, target=SERVER, src=SERVER, src_version=int(self.read[w]), weight=1.0 / self.p)
        self.clock[w] += 1
        self.waiting.append(w)
        self.waiting_since[w] = self.env.now_s
        if self.mode == "ASP":
            self._release([w])
        elif self.mode == "BSP":
            r = int(self.clock[w]) - 1
            self.round_applied[r] = self.round_applied.get(r, 0) + 1
            if self.round_applied[r] == self.p:  # the barrier: every worker's gradient of round r is in
                self._release(sorted(self.waiting))
        else:  # SSP: step c may start once the slowest worker has finished c - s steps
            low = int(self.clock.min())
            self._release([u for u in sorted(self.waiting) if self.clock[u] - self.cfg.staleness <= low])

    def _release(self, workers):
        now = self.env.now_s
        for u in workers:
            self.waiting.remove(u)
            self.row(u, int(self.local_step[u]) - 1, "wait", self.waiting_since.pop(u), now)
            if self.started >= self.s.budget:
                continue  # nothing left to compute: no pull
            self.read[u] = self.versions[SERVER]  # the snapshot this pull will carry
            t = self.message_s()
            start = self.outbound.reserve(now, t, self.s.model_bytes)
            self.received[u] += self.s.model_bytes
            self.row(u, int(self.local_step[u]), "queue", now, start)
            self.row(u, int(self.local_step[u]), "pull", start, start + t)
            self.env.at(start + t, self.begin_step, u)


class _EASGD(_Run):
    """Asynchronous EASGD: local SGD, and every tau steps an elastic exchange with the center."""

    def __init__(self, setup, config) -> None:
        super().__init__(setup, config)
        self.inbound, self.outbound, self.cpu = _Link(), _Link(), _Link()
        self.rate = config.moving_rate if config.moving_rate is not None else 0.9 / self.p
        self.exchanged_at = np.full(self.p, -1)

    def server_links(self):
        return (self.inbound, self.outbound)

    def begin_step(self, w):
        step = int(self.local_step[w])
        if self.started >= self.s.budget:
            return
        if self.p > 1 and step > 0 and step % self.cfg.tau == 0 and self.exchanged_at[w] != step:
            self.exchanged_at[w] = step  # exchange before local step ``step``, once
            now = self.env.now_s
            t = self.message_s()
            start = self.outbound.reserve(now, t, self.s.model_bytes)
            self.received[w] += self.s.model_bytes
            self.row(w, step, "queue", now, start)
            self.env.at(start, self.pull_start, w, step, start + t, priority=1)
            return
        step = self.take_step(w)
        self.local_compute(w, step, self.begin_step)

    def pull_start(self, w, step, end):
        center, mine = self.versions[SERVER], self.versions[w]
        self.row(w, step, "pull", self.env.now_s, end)
        self.env.at(end, self.pulled, w, step, center, mine)

    def pulled(self, w, step, center, mine):
        # x_w <- x_w - a (x_w - x~): the worker moves toward the center it read
        self.apply("elastic", w, step, target=w, src=SERVER, src_version=center, weight=self.rate,
                   ref=w, ref_version=mine, read_version=mine)
        now = self.env.now_s
        t = self.message_s()
        start = self.inbound.reserve(now, t, self.s.model_bytes)  # the push goes on in the background
        self.sent[w] += self.s.model_bytes
        self.row(w, step, "push", start, start + t)
        self.env.at(start + t, self.arrive, w, step, center, mine)
        self.begin_step(w)

    def arrive(self, w, step, center, mine):
        start = self.cpu.reserve(self.env.now_s, self.s.server_update_s, 0)
        self.row(SERVER, step, "update", start, start + self.s.server_update_s)
        self.env.at(start + self.s.server_update_s, self.center_applied, w, step, center, mine)

    def center_applied(self, w, step, center, mine):
        # x~ <- x~ + a (x_w - x~_read)
        self.apply("elastic", w, step, target=SERVER, src=w, src_version=mine, weight=self.rate,
                   ref=SERVER, ref_version=center, read_version=center)


class _GoSGD(_Run):
    """GoSGD: local SGD and random asynchronous gossip of (x_w, weight) to one peer."""

    consensus = "mean"

    def __init__(self, setup, config) -> None:
        super().__init__(setup, config)
        self.out = [_Link() for _ in range(self.p)]
        self.inn = [_Link() for _ in range(self.p)]
        self.weight = np.full(self.p, 1.0 / self.p)
        self.inbox: list[list[tuple]] = [[] for _ in range(self.p)]

    def begin_step(self, w):
        for sender, version, alpha, seen in self.inbox[w]:
            mix = alpha / (alpha + self.weight[w])
            self.weight[w] += alpha
            self.apply("gossip", sender, int(self.local_step[w]), target=w, src=sender, src_version=version,
                       weight=mix, ref=w, ref_version=self.versions[w], read_version=seen)
        self.inbox[w] = []
        step = self.take_step(w)
        if step is not None:
            self.local_compute(w, step, self.after_step)

    def deliver(self, j, message):
        self.inbox[j].append(message)

    def after_step(self, w):
        if self.p > 1 and self.rng.random() < self.cfg.gossip_p:
            j = int(self.rng.integers(self.p - 1))
            j += j >= w
            self.weight[w] /= 2
            now = self.env.now_s
            t = self.message_s()
            start = self.out[w].reserve(now, t, self.s.model_bytes, self.inn[j])
            self.sent[w] += self.s.model_bytes
            self.received[j] += self.s.model_bytes
            self.row(w, int(self.local_step[w]) - 1, "gossip", start, start + t)
            message = (w, self.versions[w], float(self.weight[w]), self.versions[j])
            self.env.at(start + t, self.deliver, j, message)
        self.begin_step(w)


class _ADPSGD(_Run):
    """AD-PSGD: a gradient on x_w computed while x_w is averaged with a ring neighbour."""

    consensus = "mean"

    def __init__(self, setup, config) -> None:
        super().__init__(setup, config)
        self.nic = [_Link() for _ in range(self.p)]
        self.pending = np.zeros(self.p, dtype=int)

    def begin_step(self, w):
        step = self.take_step(w)
        if step is None:
            return
        now = self.env.now_s
        read = self.versions[w]
        d = self.compute_s(w, step)
        self.row(w, step, "compute", now, now + d)
        self.compute_busy_s[w] += d
        self.pending[w] = 1
        self.env.at(now + d, self.part_done, w, step, read)
        if self.p > 1:
            self.pending[w] = 2
            j = (w + (1 if self.rng.random() < 0.5 else -1)) % self.p
            t = self.message_s()
            start = self.nic[w].reserve(now, t, 2 * self.s.model_bytes, self.nic[j])
            for u in (w, j):
                self.sent[u] += self.s.model_bytes
                self.received[u] += self.s.model_bytes
            self.env.at(start, self.exchange_start, w, j, step, read, start + t, priority=1)

    def exchange_start(self, w, j, step, read, end):
        self.row(w, step, "average", self.env.now_s, end)
        self.env.at(end, self.exchange_end, w, j, step, read, self.versions[w], self.versions[j])

    def exchange_end(self, w, j, step, read, vw, vj):
        # atomic pairwise average of the snapshots sent: x_w += (x_j - x_w)/2 and x_j += (x_w - x_j)/2
        self.apply("average", w, step, target=w, src=j, src_version=vj, weight=0.5, ref=w, ref_version=vw,
                   read_version=vw)
        self.apply("average", w, step, target=j, src=w, src_version=vw, weight=0.5, ref=j, ref_version=vj,
                   read_version=vj)
        self.part_done(w, step, read)

    def part_done(self, w, step, read):
        self.pending[w] -= 1
        if self.pending[w]:
            return
        now = self.env.now_s
        u = float(self.s.update_s[w])
        self.row(w, step, "update", now, now + u)
        self.compute_busy_s[w] += u
        self.env.at(now + u, self._applied, w, step, read)

    def _applied(self, w, step, read):
        self.apply("gradient", w, step, target=w, src=w, src_version=read, weight=1.0)
        self.begin_step(w)


# --- entry points -------------------------------------------------------------------


def _check_int(name: str, value, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise SimInputError(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return int(value)


def _setup(model, cluster, *, batch_size, steps, spec, seed, precision, gpus_by_worker) -> tuple[_Setup, Model]:
    check_batch_size(batch_size)
    steps = _check_int("steps", steps, 2, MAX_STEPS)
    seed = _check_seed(seed)
    _check_int("workers", cluster.gpus, 1, MAX_ALGORITHM_WORKERS)
    if not isinstance(spec, StragglerSpec):
        raise SimInputError(f"straggler must be a StragglerSpec, got {type(spec).__name__}")
    width = bytes_per_param(precision)
    base, timed, profile_of, _ = _worker_models(model, cluster, batch_size, precision, False, None, gpus_by_worker)
    profiles = [_profile(m, (), False) for m in timed]
    p = cluster.gpus
    slow = straggler_factors(spec, np.random.default_rng(seed), p)
    fb = np.array([profiles[i].forward_s + profiles[i].backward_s for i in profile_of]) * slow
    upd = np.array([profiles[i].update_s for i in profile_of]) * slow
    net = get_network(cluster.network)
    nbytes = int(base.total_params) * width
    setup = _Setup(
        workers=p, steps=steps, batch_size=int(batch_size), io_s=base.io_s, h2d_s=base.h2d_s, fb_s=fb,
        update_s=upd, server_update_s=float(base.update_s), message_s=net.alpha_s + net.beta_s_per_byte * nbytes,
        model_bytes=nbytes, spec=spec, seed=seed, slow=slow,
    )
    return setup, base


def _ar_sgd(model, cluster, setup: _Setup, precision, gpus_by_worker):
    """AR-SGD through the per-worker engine: one all-reduce of the gradient per step."""
    probe = _Run(setup, AlgorithmConfig())
    factors = np.array([[probe.factor(w, k) for w in range(setup.workers)] for k in range(setup.steps)])
    run, *_ = _run_sync(
        model, cluster, SYNCEASGD, batch_size=setup.batch_size, spec=setup.spec, iterations=setup.steps,
        seed=setup.seed, gpus_by_worker=gpus_by_worker, precision=precision, prefetch=False, bucket_mb=25.0,
        calibrate_iteration_s=None, record=True, factors=factors,
    )
    p = setup.workers
    log = []
    ends = run.update_end.max(axis=1)
    for k in range(setup.steps):
        for i in range(p):
            log.append((float(ends[k]), "gradient", i, k, SERVER, k * p + i + 1, SERVER, k * p, NO_MODEL, -1,
                        1.0 / p, 0))
    ring = 2 * (p - 1) / p * setup.model_bytes * setup.steps
    rows = pd.DataFrame(run.rows, columns=list(WORKER_TIMELINE_COLUMNS))
    computing = rows.loc[rows.kind.isin(["forward", "backward", "update"])]
    busy = computing.groupby("worker")["duration_s"].sum().reindex(range(p), fill_value=0.0).to_numpy()
    return log, run.rows, np.full(p, ring), np.full(p, ring), busy, ()


_CLASSES = {"EASGD": _EASGD, "GoSGD": _GoSGD, "AD-PSGD": _ADPSGD}


def simulate_algorithm(
    algorithm: str,
    model: Model,
    cluster: Cluster,
    *,
    batch_size: int,
    steps: int = 50,
    seed: int = 0,
    straggler: StragglerSpec | None = None,
    config: AlgorithmConfig | None = None,
    precision: str = "fp32",
    gpus_by_worker: Sequence[str] | None = None,
) -> AlgorithmResult:
    """Simulate one algorithm until ``cluster.gpus x steps`` gradients are applied.

    Parameters
    ----------
    algorithm : str
        One of `ALGORITHMS`.
    model, cluster : Model, Cluster
        The workload and the workers (``cluster.gpus``); the server's link is
        the ``cluster.network`` preset.
    batch_size : int
        Samples per worker per step.
    steps : int
        Gradients per worker on average (the budget is P x steps).
    seed : int
        Seeds every random draw: compute factors, jitter, gossip peers.
    straggler : StragglerSpec, optional
        Compute variability, persistent stragglers and link jitter.
    config : AlgorithmConfig, optional
        SSP's bound, EASGD's period and rate, GoSGD's probability.
    precision : {"fp32", "fp16"}
        Width of the model's parameters on the wire.
    gpus_by_worker : sequence of str, optional
        Each worker's GPU type (zoo models only).

    Returns
    -------
    AlgorithmResult
        ``metrics`` holds ``throughput_samples_per_s`` (samples of the whole
        budget over the time the last gradient lands), ``bytes_per_worker``
        (sent plus received, mean over workers), ``server_bytes``,
        ``server_link_utilisation`` (the busier direction's busy time until
        the last gradient lands, over that time; NaN without a server), the staleness mean, p99 and max, and
        ``worker_idle_fraction``.

    Raises
    ------
    SimInputError
        For an unknown algorithm (the message lists the valid ones) or bad input.

    References
    ----------
    Ko et al., IPDPS 2021; Ho et al., NIPS 2013 (SSP); Zhang, Choromanska and
    LeCun, NIPS 2015 (EASGD); Blot et al., 2016 (GoSGD); Lian et al., ICML
    2018 (AD-PSGD).
    """
    if algorithm not in ALGORITHMS:
        raise SimInputError(f"unknown algorithm {algorithm!r}; valid: {', '.join(ALGORITHMS)}")
    spec = straggler if straggler is not None else StragglerSpec()
    config = config if config is not None else AlgorithmConfig()
    setup, base = _setup(model, cluster, batch_size=batch_size, steps=steps, spec=spec, seed=seed,
                         precision=precision, gpus_by_worker=gpus_by_worker)
    p = setup.workers
    if algorithm == "AR-SGD":
        log, rows, sent, received, busy, links = _ar_sgd(model, cluster, setup, precision, gpus_by_worker)
        consensus = "server"
    else:
        if algorithm in ("BSP", "ASP", "SSP"):
            run = _ParameterServer(setup, config, algorithm).run()
        else:
            run = _CLASSES[algorithm](setup, config).run()
        log, rows, sent, received, busy, links = run.log, run.rows, run.sent, run.received, run.compute_busy_s, run.server_links()
        consensus = run.consensus
    frame = pd.DataFrame(log, columns=list(UPDATE_COLUMNS))
    frame = frame.astype({c: "int64" for c in ("worker", "step", "target", "version", "src", "src_version",
                                               "ref", "ref_version", "staleness")})
    grads = frame.loc[frame.kind == "gradient"]
    end_s = float(grads.time_s.max())
    if not (end_s > 0 and math.isfinite(end_s)):
        raise SimInputError("the run takes no time: give the model non-zero compute times")
    staleness = frame.staleness.to_numpy()
    server_bytes = int(sum(link.bytes for link in links))
    metrics = {
        "algorithm": algorithm,
        "model": base.name,
        "workers": p,
        "batch_size": setup.batch_size,
        "network": cluster.network,
        "precision": precision,
        "seed": setup.seed,
        "steps": setup.steps,
        "gradients": len(grads),
        "time_s": end_s,
        "throughput_samples_per_s": len(grads) * setup.batch_size / end_s,
        "step_time_s": end_s * p / len(grads),
        "model_bytes": setup.model_bytes,
        "message_s": setup.message_s,
        "bytes_per_worker": float(np.mean(np.asarray(sent) + np.asarray(received))),
        "server_bytes": server_bytes,
        "server_link_utilisation": max(link.busy_until_s(end_s) for link in links) / end_s if links else math.nan,
        "staleness_mean": float(staleness.mean()),
        "staleness_p99": float(np.percentile(staleness, 99)),
        "staleness_max": int(staleness.max()),
        "worker_idle_fraction": float(1 - np.mean(np.minimum(np.asarray(busy) / end_s, 1.0))),
        **spec.as_dict(),
    }
    timeline = pd.DataFrame(rows, columns=list(WORKER_TIMELINE_COLUMNS))
    timeline = timeline.sort_values(["start_s", "worker"], kind="stable").reset_index(drop=True)
    return AlgorithmResult(algorithm, metrics, frame, timeline, p, consensus)


def simulate_algorithms(model: Model, cluster: Cluster, algorithms: Sequence[str] = ALGORITHMS,
                        **kwargs) -> dict[str, AlgorithmResult]:
    """`simulate_algorithm` for each name, same arguments and seed; keyed by name."""
    names = list(algorithms)
    if not names:
        raise SimInputError("algorithms must name at least one algorithm")
    return {name: simulate_algorithm(name, model, cluster, **kwargs) for name in names}


def sweep_algorithms(model: Model, cluster: Cluster, *, workers: Sequence[int],
                     algorithms: Sequence[str] = ALGORITHMS, **kwargs) -> pd.DataFrame:
    """One row of metrics per (workers, algorithm): how each scales, e.g. the
    parameter server's link saturating on 10GbE as P grows."""
    if not workers:
        raise SimInputError("workers must list at least one worker count")
    rows = []
    for p in workers:
        c = cluster.with_gpus(_check_int("workers", p, 1, MAX_ALGORITHM_WORKERS))
        for name, res in simulate_algorithms(model, c, algorithms, **kwargs).items():
            rows.append(res.metrics | {"algorithm": name})
    return pd.DataFrame(rows)
