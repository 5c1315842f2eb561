"""The event-driven runs of six of the seven algorithms (`sim.workers.algorithms`).

BSP, ASP and SSP (`ParameterServerRun`), EASGD (`EASGDRun`), GoSGD
(`GoSGDRun`) and AD-PSGD (`ADPSGDRun`) each run on an `Engine` of their own:
workers compute, messages queue for the `Channel` they cross, and every
change to a model goes to the update log. AR-SGD goes through the
per-worker engine's synchronous run instead (`sim.workers.algorithm_engine`).
`RunSetup` is what a run is given, resolved once by `sim.workers.algorithms`;
its ``message_s`` comes from that module's `message_cost`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.workers.events import Engine
from sim.workers.stragglers import StragglerSpec, draw_compute_factors, jitter_factors

__all__ = [
    "NO_MODEL",
    "SERVER",
    "ADPSGDRun",
    "Channel",
    "EASGDRun",
    "FactorStreams",
    "GoSGDRun",
    "ParameterServerRun",
    "Run",
    "RunSetup",
    "run_algorithm",
]

#: The model numbers of the update log: the server, center or replicated
#: model, and "no model" in the ``ref`` column of a gradient row.
SERVER = -1
NO_MODEL = -2


# --- shared machinery --------------------------------------------------------------


class Channel:
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

    def reserve(self, now_s: float, duration_s: float, nbytes: int, *others: Channel) -> float:
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
class RunSetup:
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

    @property
    def budget(self) -> int:
        return self.workers * self.steps


class FactorStreams:
    """Each worker's compute factors, drawn from a stream of its own.

    Worker w's k-th step gets the same factor in every algorithm run with the
    same seed, however the algorithms order their steps in time.
    """

    def __init__(self, setup: RunSetup) -> None:
        self.spec = setup.spec
        self.chunk = max(setup.steps, 1)
        self.rngs = [np.random.default_rng([setup.seed, 1, w]) for w in range(setup.workers)]
        self.drawn: list[np.ndarray] = [np.empty(0) for _ in range(setup.workers)]

    def factor(self, w: int, step: int) -> float:
        """Worker w's compute factor at its local step."""
        have = self.drawn[w]
        while step >= len(have):
            more = draw_compute_factors(self.spec, self.rngs[w], self.chunk, 1)[:, 0]
            have = self.drawn[w] = np.concatenate([have, more])
        return float(have[step])

    def table(self, steps: int) -> np.ndarray:
        """The factors of steps 0..steps-1 of every worker, shape (steps, workers)."""
        return np.array([[self.factor(w, k) for w in range(len(self.rngs))] for k in range(steps)])


class Run:
    """State shared by every algorithm: clock, models' versions, the log, the timeline.

    ``config`` is the `sim.workers.algorithms.AlgorithmConfig` of the run.
    """

    consensus = "server"

    def __init__(self, setup: RunSetup, config) -> None:
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
        self.factors = FactorStreams(setup)
        self._jitter_rng = np.random.default_rng([setup.seed, 2])
        self.rng = np.random.default_rng([setup.seed, 3])

    # -- costs
    def compute_s(self, w: int, step: int) -> float:
        return self.s.io_s + self.s.h2d_s + self.factors.factor(w, step) * float(self.s.fb_s[w])

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

    def run(self) -> Run:
        for w in range(self.p):
            self.env.at(0.0, self.begin_step, w)
        self.env.run()
        return self

    def begin_step(self, w: int) -> None:  # pragma: no cover - every algorithm defines it
        raise NotImplementedError

    def server_links(self) -> tuple[Channel, ...]:
        return ()


# --- the parameter-server family -----------------------------------------------------


class ParameterServerRun(Run):
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
        self.inbound, self.outbound, self.cpu = Channel(), Channel(), Channel()
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


class EASGDRun(Run):
    """Asynchronous EASGD: local SGD, and every tau steps an elastic exchange with the center."""

    def __init__(self, setup, config) -> None:
        super().__init__(setup, config)
        self.inbound, self.outbound, self.cpu = Channel(), Channel(), Channel()
        self.rate = config.moving_rate if config.moving_rate is not None else 0.9 / self.p
        self.exchanged_at = np.full(self.p, -1)

    def server_links(self):
        return (self.inbound, self.outbound)

    def begin_step(self, w):
        step = int(self.local_step[w])
        if self.started >= self.s.budget:
            return
        if step > 0 and step % self.cfg.tau == 0 and self.exchanged_at[w] != step:
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


class GoSGDRun(Run):
    """GoSGD: local SGD and random asynchronous gossip of (x_w, weight) to one peer."""

    consensus = "mean"

    def __init__(self, setup, config) -> None:
        super().__init__(setup, config)
        self.out = [Channel() for _ in range(self.p)]
        self.inn = [Channel() for _ in range(self.p)]
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


class ADPSGDRun(Run):
    """AD-PSGD: a gradient on x_w computed while x_w is averaged with a ring neighbour."""

    consensus = "mean"

    def __init__(self, setup, config) -> None:
        super().__init__(setup, config)
        self.nic = [Channel() for _ in range(self.p)]
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


# --- running an algorithm -------------------------------------------------------------


def run_algorithm(algorithm: str, setup: RunSetup, config) -> Run:
    """Run BSP, ASP, SSP, EASGD, GoSGD or AD-PSGD until the budget is spent."""
    if algorithm in ("BSP", "ASP", "SSP"):
        return ParameterServerRun(setup, config, algorithm).run()
    return {"EASGD": EASGDRun, "GoSGD": GoSGDRun, "AD-PSGD": ADPSGDRun}[algorithm](setup, config).run()

