"""The engine's schedule of one worker's plain pipeline, lane by lane, without an event queue.

For the task graphs `sim.core.lower` builds for one worker (the aggregate
run) without decoupled or sharded steps, the list schedule of
`sim.core.engine` follows from a few facts of their structure, so each
lane can be timed on its own, iteration by iteration, with the engine's
own floating-point operations (a start is the later of a release and the
lane's previous end, an end is start plus duration, a release the latest
predecessor's end plus its lag), hence to the bit:

* the io and h2d lanes hold one task per iteration each, in order;
* every message of iteration k is sent before the backward pass of
  iteration k + 1 starts (the updates that the next forward waits for wait
  for it), so the channels of an iteration are timed once its backward
  pass is known: each a list schedule of known releases by rank (`_lane`);
  a pull that shares its push's lane is released as its push ends;
* the backward pass runs as one chain after the last forward (no task of a
  smaller rank is left on the compute lane then);
* after it, the compute lane runs the single update, or the per-layer
  updates of iteration k (released as their messages' last parts end,
  ranked before any later task) with the forward pass of iteration k + 1,
  whose layer i waits for layer i's update (`_updates_and_forward`).

`sim.core.engine.run` uses this where the lowering recorded the steps
(`PipelineSteps`) and every task that releases another lane's task takes
time (`applies`), and the general event loop elsewhere; the tests check
that both give the same times to the bit.
"""

from __future__ import annotations

import heapq
import itertools
from typing import NamedTuple

import numpy as np

from sim.core import replay, stacked_runs
from sim.core.decoupled import decoupled_step, timed_step
from sim.core.replay import by_value

__all__ = ["PipelineSteps", "applies", "decoupled_step", "distinct", "run"]

_INF = float("inf")


class PipelineSteps:
    """What the lowering created, per iteration: task indices ``io``, ``h2d``, ``fwd`` and ``bwd``
    (by layer), the parts' ``first`` and ``last`` steps (the same for a one-step part), and the
    ``single`` update or the per-layer updates ``ups`` with their layers ``ups_layer`` and
    messages ``ups_msg`` (and DeAR's all-gathers ``ags``, with ``layer_msg`` set). Per part: the layer whose backward releases it (``part_low``), its
    lag and message; whether the first and second steps share a lane (``shared``)."""

    def __init__(self, msgs, *, two_lanes: bool, after_backward: bool, prefetch: bool, per_layer: bool,
                 layer_msg: np.ndarray | None = None) -> None:
        self.part_low, self.part_lag = msgs.low[msgs.part_msg], msgs.lag_s[msgs.part_msg]
        self.part_msg, self.first_part = msgs.part_msg, msgs.first_part
        # DeAR: each layer's message (-1: none), each message's updates and all-gathers (``ags``, by part)
        self.layer_msg, self.msg_sizes, self.msg_parts = layer_msg, msgs.sizes, msgs.count
        self.decoupled = layer_msg is not None
        self.two_lanes, self.after_backward = two_lanes, after_backward
        self.prefetch, self.per_layer = prefetch, per_layer
        self.iterations: list[dict] = []
        self.layouts = ({}, {})  # per channel lane, its `_RunLayout` (the same in every iteration)
        self.orders: dict = {}  # per (iteration, lane): the order its tasks last ran in (`sim.core.replay`)

    def guesses(self, k: int, lane: str) -> list:
        """Orders to try first for ``lane`` in iteration k: iteration k - 1's (this round's: after the
        first iterations a lane serves every iteration alike), then its own last time (an earlier
        interference round). Any order that passes is the list schedule's, so which goes first only
        saves work."""
        return [self.orders.get((k - 1, lane)), self.orders.get((k, lane))] if replay.ENABLED else []

    def forget(self) -> None:
        """Drop what the rounds kept: the lanes' last orders, the tasks by rank, each part's releasing task."""
        self.orders.clear()
        for cache in self.layouts:
            for key in [key for key in cache if key != "layout"]:
                del cache[key]
        for it in self.iterations:
            it.pop("part_bwd", None)

    def add(self, **tasks) -> None:
        self.iterations.append(_narrow(tasks))

    def more(self, **tasks) -> None:
        """More task indices of the iteration added last."""
        self.iterations[-1].update(_narrow(tasks))


def _narrow(tasks: dict) -> dict:
    """Task indices as int32 where they fit (half the memory), an array given twice kept as one."""
    out, seen = {}, {}
    for name, value in tasks.items():
        if isinstance(value, np.ndarray) and value.dtype == np.int64 and (not len(value) or value.max() < 2**31):
            value = seen.setdefault(id(value), value.astype(np.int32))
        out[name] = value
    return out


def applies(graph, steps: PipelineSteps) -> bool:
    """True when every task that releases another lane's task takes time: each step of each part,
    and the backward tasks that release parts. (A task of no duration ends at the instant it
    starts, and the engine serves what it releases only in a later round of that instant.)"""
    dur = graph.duration_s
    for it in steps.iterations:
        releasing = [it["first"], _part_bwd(it, steps)] + ([it["last"]] if it["last"] is not it["first"] else [])
        if steps.after_backward:
            releasing.append(it["bwd"][:1])
        if any(np.any(dur.take(tasks) <= 0) for tasks in releasing):
            return False
    return True


def run(graph, steps: PipelineSteps, out=None) -> tuple[np.ndarray, np.ndarray] | None:
    """Start and end of every task, as `sim.core.engine.run` gives them (written into ``out`` if
    given); None where `applies` does not."""
    if not applies(graph, steps):
        return None
    n = len(graph)
    start, end = (np.full(n, np.nan), np.full(n, np.nan)) if out is None else out
    ctx = _Times(start, end, graph.duration_s, graph.rank)
    lanes = {"io": None, "h2d": None, "first": None, "second": None}
    its = steps.iterations
    _io_h2d(its[0], 0.0, ctx, lanes)
    _chain(its[0]["fwd"], end[its[0]["h2d"]], ctx)
    for k, it in enumerate(its):
        nxt = its[k + 1] if k + 1 < len(its) else None
        bwd0 = int(it["bwd"][0])
        _chain(it["bwd"][::-1], end[it["fwd"][-1]], ctx)
        last_end = _channels(it, steps, ctx, lanes, k)
        if steps.per_layer:
            if nxt is not None:
                _io_h2d(nxt, 0.0 if steps.prefetch else ctx.E[bwd0], ctx, lanes)
            release = np.maximum.reduceat(last_end, steps.first_part[:-1])[it["ups_msg"]]
            if not steps.decoupled:
                _compute_after_backward(it, nxt, release, ctx, steps, k)
                continue
            if np.any(_release(it, steps, ctx) > ctx.E[bwd0]):  # a reduce-scatter after backward: the event loop
                return None
            lanes["first"] = timed_step(it, nxt, release, steps, ctx, lanes["first"], k)
            if lanes["first"] is None:
                return None
            continue
        u = int(it["single"])
        ctx.S[u] = t = max(ctx.E[bwd0], float(np.max(last_end)))
        ctx.E[u] = t + ctx.D[u]
        if nxt is not None:
            _io_h2d(nxt, 0.0 if steps.prefetch else ctx.E[u], ctx, lanes)
            _chain(nxt["fwd"], max(ctx.E[int(nxt["h2d"])], ctx.E[bwd0], ctx.E[u]), ctx)
    return start, end


class _Times:
    """The start and end arrays being filled, with memoryviews for item access (S, E) and the
    durations (D) and ranks (R) likewise."""

    def __init__(self, start, end, duration, rank) -> None:
        self.start, self.end, self.duration, self.rank = start, end, duration, rank
        self.S, self.E, self.D, self.R = memoryview(start), memoryview(end), memoryview(duration), memoryview(rank)


def _intp(index: np.ndarray) -> np.ndarray:
    """Task indices as numpy's own index type: an int32 array (what the steps keep, half the memory) indexes
    an array at about half the speed, converting itself each time; converted once, it indexes several."""
    return index.astype(np.intp, copy=False)


def _later(a: float, b) -> float:
    return a if b is None else max(a, b)


def _io_h2d(it, ready: float, ctx: _Times, lanes) -> None:
    """An iteration's io (released at ``ready``) and h2d, each after the one before on its lane."""
    S, E, D = ctx.S, ctx.E, ctx.D
    io, h2d = int(it["io"]), int(it["h2d"])
    S[io] = s = _later(float(ready), lanes["io"])
    E[io] = lanes["io"] = s + D[io]
    S[h2d] = s = _later(E[io], lanes["h2d"])
    E[h2d] = lanes["h2d"] = s + D[h2d]


def _chain(tasks, ready, ctx: _Times) -> None:
    """Tasks one after the other on a lane, the first at ``ready``."""
    _in_turn(tasks, float(ready), ctx)


def _in_turn(tasks: np.ndarray, t: float, ctx: _Times) -> float:
    """``tasks`` one after the other from ``t``, as a running sum (the additions a loop makes, in
    its order, so the same bits); returns the end of the last."""
    tasks = _intp(tasks)
    times = np.empty(len(tasks) + 1)
    times[0] = t
    times[1:] = ctx.duration[tasks]
    np.cumsum(times, out=times)
    ctx.start[tasks], ctx.end[tasks] = times[:-1], times[1:]
    return float(times[-1])


def _channels(it, steps: PipelineSteps, ctx: _Times, lanes, k: int) -> np.ndarray:
    """The parts of one iteration (k) on their lanes; the end of each part's last step."""
    first, last, end = it["first"], it["last"], ctx.end
    release = _release(it, steps, ctx)
    if first is last or steps.two_lanes:  # one step per part, or push then pull on a lane of its own
        lanes["first"] = _lane_by_runs(first, release, steps.part_msg, ctx, lanes["first"], steps.layouts[0],
                                       (steps, k, "first"))
        if first is not last:
            lanes["second"] = _lane_by_runs(last, end.take(first), steps.part_msg, ctx, lanes["second"],
                                            steps.layouts[1], (steps, k, "second"))
    else:  # push and pull take turns on one lane
        lanes["first"] = _lane(first.tolist(), release.tolist(), last.tolist(), ctx, lanes["first"])
    return end.take(last)


def _part_bwd(it: dict, steps: PipelineSteps) -> np.ndarray:
    """Per part, the backward task that releases it (the same in every round: kept with the iteration)."""
    got = it.get("part_bwd")
    if got is None:
        got = it["part_bwd"] = it["bwd"][steps.part_low]
    return got


def _release(it, steps: PipelineSteps, ctx: _Times) -> np.ndarray:
    """When each part's first step is released: its lowest layer's backward ends, plus its lag."""
    end = ctx.end
    release = end.take(_part_bwd(it, steps))
    lagged = steps.part_lag > 0
    release[lagged] = release[lagged] + steps.part_lag[lagged]
    if steps.after_backward:
        release = np.maximum(release, end[it["bwd"][0]])
    return release


def _lane_by_runs(tasks: np.ndarray, release: np.ndarray, msg: np.ndarray, ctx: _Times, free, cache: dict,
                  memo=None):
    """`_lane` for a lane whose tasks come in runs, one per message: consecutive ranks, releases
    that do not decrease along the run. A run goes on without the heap while nothing of a
    smaller rank is released. ``cache`` keeps the lane's `_RunLayout` from one iteration to the next;
    ``memo`` ``(steps, k, lane)`` the order the lane ran in (`sim.core.replay`)."""
    lay, tasks = _ranked(tasks, msg, ctx, cache)
    tasks = _intp(tasks)
    release = release[lay.by_rank]
    if np.all(release[1:] >= release[:-1]):  # released in rank order: first come, first served
        return _fifo(tasks, release, ctx, free)
    t = -_INF if free is None else free
    got = replay.replayed(memo[0].guesses(memo[1], memo[2]), release, None,
                          ctx.duration[tasks], t) if memo is not None else None
    if got is not None:
        ran = tasks[got[0]]
        ctx.start[ran], ctx.end[ran] = got[1], got[2]
        t = float(got[2][-1])
    elif not lay.contiguous or np.any(np.diff(release)[lay.inner] < 0):
        t = _lane(tasks.tolist(), release.tolist(), None, ctx, free)
    else:
        t = _runs(tasks, release, lay, ctx, free)
    if memo is not None:
        memo[0].orders[memo[1], memo[2]] = got[0] if got is not None else replay.order_of(ctx.start[tasks], ctx.end[tasks])
    return t


class _RunLayout(NamedTuple):
    """A lane's tasks by rank (``by_rank``, positions into the iteration's tasks), each position's run
    (``run_of``), where each run ends (``run_end``), whether each message is one run
    (``contiguous``) and which neighbouring positions share a run (``inner``)."""

    by_rank: np.ndarray
    run_of: np.ndarray
    run_end: np.ndarray
    contiguous: bool
    inner: np.ndarray


def _ranked(tasks: np.ndarray, msg: np.ndarray, ctx: _Times, cache: dict) -> tuple[_RunLayout, np.ndarray]:
    """`_run_layout` of ``tasks`` and the tasks by rank, kept per iteration's array of tasks (the same
    in every interference round: the ranks do not change) until `PipelineSteps.forget`."""
    got = cache.get(id(tasks))
    if got is None or got[0] is not tasks:
        lay = _run_layout(tasks, msg, ctx, cache)
        got = cache[id(tasks)] = (tasks, lay, tasks[lay.by_rank])
    return got[1], got[2]


def _run_layout(tasks: np.ndarray, msg: np.ndarray, ctx: _Times, cache: dict) -> _RunLayout:
    """The `_RunLayout` of ``tasks``: every iteration's parts are ranked alike, so the last
    iteration's is reused once checked (its order ranks these tasks in strictly increasing order)."""
    lay = cache.get("layout")
    if lay is not None and len(lay.by_rank) == len(tasks):
        ranks = ctx.rank[tasks[lay.by_rank]]
        if np.all(ranks[1:] > ranks[:-1]):
            return lay
    by_rank = np.argsort(ctx.rank[tasks], kind="stable")
    msg = msg[by_rank]
    cut = np.flatnonzero(msg[1:] != msg[:-1]) + 1
    runs = np.concatenate([[0], cut, [len(tasks)]]).astype(np.int64)
    lay = cache["layout"] = _RunLayout(
        by_rank, np.repeat(np.arange(len(runs) - 1), np.diff(runs)), runs[1:],
        distinct(msg) == len(runs) - 1, np.isin(np.arange(1, len(tasks)), cut, invert=True))
    return lay


def distinct(values: np.ndarray) -> int:
    """How many distinct values an array of integers holds: counted in a table where they are indices
    (message or layer numbers, no sort), else `np.unique`."""
    if len(values) and values.min() >= 0 and values.max() < 4 * len(values) + 1024:
        return int(np.count_nonzero(np.bincount(values)))
    return len(np.unique(values))


def _fifo(tasks: np.ndarray, release: np.ndarray, ctx: _Times, free) -> float:
    """`_lane` for tasks released in rank order: each starts at the later of its release and the
    end of the one before (`sim.core.replay.scan`, else a loop)."""
    S, E, D = ctx.S, ctx.E, ctx.D
    t = -_INF if free is None else free
    tasks = _intp(tasks)
    got = replay.scan(release, ctx.duration[tasks], t) if replay.ENABLED and len(tasks) else None
    if got is not None:
        ctx.start[tasks], ctx.end[tasks] = got
        return float(got[1][-1])
    for task, r in zip(tasks.tolist(), release.tolist(), strict=True):
        if r > t:
            t = r
        S[task] = t
        t = t + D[task]
        E[task] = t
    return t


def _runs(tasks: np.ndarray, release: np.ndarray, lay: _RunLayout, ctx: _Times, free) -> float:
    """The list schedule of `_lane_by_runs` (positions are ranks); returns when the lane is free.

    Only a run's first part, or one released later than the part before it, can be the head of its
    run when released (the rest go on with their run): only those are taken in release order. Once
    every part is released, the rest go back to back in rank order (`_back_to_back`)."""
    S, E, D = ctx.S, ctx.E, ctx.D
    first = np.concatenate([[0], lay.run_end[:-1]]).astype(np.int64)  # each run's next position
    if stacked_runs.applies(release, first):  # each run released outranks the ones before: no heap for those
        t, head = stacked_runs.serve(tasks, release, lay.run_of, lay.run_end, lay.inner, (S, E, D), free)
        return t if head is None else _back_to_back(tasks, head, lay.run_end, t, ctx)
    count = len(tasks)
    check = 1024  # when to check next whether the rest go in rank order (`stacked_runs.rest_released`)
    may_lead = np.ones(count, dtype=bool)
    may_lead[1:] = ~lay.inner | (release[1:] > release[:-1])
    order = np.flatnonzero(may_lead)
    order = order[np.argsort(release[order], kind="stable")]
    order, rel_o, n_rel = memoryview(order), memoryview(release[order]), len(order)  # (a loop may read few)
    task, rel, run_of, run_end = memoryview(tasks), memoryview(release), memoryview(lay.run_of), memoryview(lay.run_end)
    head = memoryview(first)
    heap: list = []
    pop = heapq.heappop
    t = -_INF if free is None else free
    p = done = 0
    cur = -1  # the position that would continue the run just served
    while done < count:
        if p < n_rel and rel_o[p] <= t:
            p = stacked_runs.push_released(order, rel_o, p, t, head, run_of, cur, heap)
        if p == n_rel or (done >= check and stacked_runs.rest_released(tasks, release, first, lay.run_end, t,
                                                                         ctx.duration)):
            return _back_to_back(tasks, first, lay.run_end, t, ctx)  # the rest in rank order, back to back
        if done >= check:
            check = done + 1024
        if cur >= 0:  # the run goes on unless something of a smaller rank is released
            x = heapq.heappushpop(heap, cur) if heap else cur
        elif heap:
            x = pop(heap)
        else:  # idle until the next release
            t = rel_o[p]
            continue
        # serve the run from x on until its next part is not yet released or something else is
        r = run_of[x]
        stop = run_end[r]
        y, t = stacked_runs.serve_run(x, stop, t, rel_o[p], task, rel, S, E, D)
        done += y - x
        head[r] = y
        cur = y if y < stop and rel[y] <= t else -1
    return t


def _back_to_back(by_rank: np.ndarray, head: np.ndarray, run_end: np.ndarray, t: float, ctx: _Times) -> float:
    """The tasks at positions ``head[r] .. run_end[r] - 1`` of every run r, in order, one after the
    other from ``t`` (a running sum: the loop's additions in its order, so the same bits)."""
    pos = stacked_runs.rest_positions(head, run_end)
    return _in_turn(by_rank[pos], t, ctx) if len(pos) else t


def _lane(tasks: list, release: list, then, ctx: _Times, free):
    """List scheduling of ``tasks`` on one lane from ``free`` on: whenever the lane is free, the
    released task of smallest rank starts. ``then[i]``, if given, is released as ``tasks[i]`` ends.
    Returns when the lane is free again."""
    S, E, D, R = ctx.S, ctx.E, ctx.D, ctx.R
    order = np.argsort(np.asarray(release), kind="stable").tolist()
    heap: list = []
    p, count = 0, len(tasks)
    t = -_INF if free is None else free
    pending = count * (2 if then is not None else 1)
    while pending:
        if not heap and release[order[p]] > t:
            t = release[order[p]]
        while p < count and release[order[p]] <= t:
            i = order[p]
            heapq.heappush(heap, (R[tasks[i]], tasks[i], i))
            p += 1
        _, x, i = heapq.heappop(heap)
        S[x] = t
        t = t + D[x]
        E[x] = t
        pending -= 1
        if then is not None and i >= 0:
            heapq.heappush(heap, (R[then[i]], then[i], -1))
    return t


def _compute_after_backward(it, nxt, release: np.ndarray, ctx: _Times, steps: PipelineSteps, k: int) -> None:
    """`_updates_and_forward`, from a guessed order where one holds (`sim.core.replay`)."""
    if not replay.ENABLED:
        _updates_and_forward(it, nxt, release.tolist(), ctx)
        return
    fwd = nxt["fwd"] if nxt is not None else np.zeros(0, np.int64)
    ids = _intp(np.concatenate([it["ups"], fwd]))
    duration = ctx.duration[ids]
    update_of = np.full(len(fwd), -1, dtype=np.int64)
    update_of[it["ups_layer"][it["ups_layer"] < len(fwd)]] = np.flatnonzero(it["ups_layer"] < len(fwd))
    t0 = ctx.E[int(it["bwd"][0])]
    guesses = steps.guesses(k, "compute")
    if nxt is None and guesses and guesses[0] is not None:  # the last iteration's updates alone: k - 1's, in its order
        guesses.insert(1, guesses[0][guesses[0] < len(it["ups"])])
    guesses = itertools.chain(guesses, (replay.updates_by_release(release, update_of) for _ in (0,)))  # (made if needed)
    got = replay.updates_then_forward(guesses, release, duration, update_of,
                                      max(ctx.E[int(nxt["h2d"])], t0) if nxt is not None else _INF, t0)
    if got is not None:
        order, ran = got[0], ids[got[0]]
        ctx.start[ran], ctx.end[ran] = got[1], got[2]
    else:
        _updates_and_forward(it, nxt, release.tolist(), ctx)
        order = replay.order_of(ctx.start[ids], ctx.end[ids])
    steps.orders[k, "compute"] = order


def _updates_and_forward(it, nxt, release: list, ctx: _Times) -> None:
    """Iteration k's per-layer updates (released at ``release``) and iteration k + 1's forward
    pass on the compute lane, free from the end of backward on: a released update first (by
    rank), else the next forward once released (its previous layer, and its layer's update).
    Once every update has run, the forwards left go back to back (`_in_turn`)."""
    S, E, D = ctx.S, ctx.E, ctx.D
    push, pop = heapq.heappush, heapq.heappop
    ups = it["ups"].tolist()
    order, rel = by_value(np.asarray(release))
    fwd = nxt["fwd"].tolist() if nxt is not None else []
    update_of = [-1] * len(it["fwd"])
    for u, layer in enumerate(it["ups_layer"].tolist()):
        update_of[layer] = u
    done = [False] * len(ups)
    t = E[int(it["bwd"][0])]
    ready = max(E[int(nxt["h2d"])], t) if nxt is not None else _INF  # the first forward's other predecessors
    heap: list = []
    p = i = 0
    count, n_fwd = len(ups), len(fwd)
    upcoming = rel[0] if count else _INF  # the next release
    while True:
        while upcoming <= t:
            push(heap, order[p])
            p += 1
            upcoming = rel[p] if p < count else _INF
        if heap:
            u = pop(heap)
            x = ups[u]
            done[u] = True
            S[x] = t
            t = t + D[x]
            E[x] = t
            if not heap and upcoming > t and i < n_fwd and update_of[i] == u and ready <= t:
                x = fwd[i]  # nothing else released by now: the forward that waited for this update goes on
                i += 1
                S[x] = t
                t = ready = t + D[x]
                E[x] = t
            continue
        if i >= n_fwd:
            if p >= count:
                return
            t = upcoming
            continue
        u = update_of[i]
        fwd_ready = ready if u < 0 else (max(ready, E[ups[u]]) if done[u] else _INF)
        if fwd_ready <= t:
            if p >= count:  # every update has run: the rest of the forward pass, back to back
                _in_turn(nxt["fwd"][i:], t, ctx)
                return
            x = fwd[i]
            i += 1
            S[x] = t
            t = ready = t + D[x]
            E[x] = t
            continue
        t = upcoming if upcoming < fwd_ready else fwd_ready
