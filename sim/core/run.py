"""The one path: a plan and its costs, timed, as figures and a timeline.

`time_plan` lowers a plan to a task graph (`sim.core.lower`), times it with
the engine (`sim.core.engine`) and reads the figures (`sim.core.metrics`)
and the timeline (`sim.core.timeline`) off it. Where the fast path
(`sim.core.fast`) declares that it supports the plan and the cost, it gives
the same task times from arrays, to the bit, in O(layers) per cost and for
many costs at once; ``engine="general"`` forces the task graph.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.core import engine as core_engine
from sim.core import fast, interference
from sim.core.backward_stretch import backward_times
from sim.core.budget import CELLS_PER_TASK, MAX_TASKS_ENV, cell_budget_error, max_tasks_from_env
from sim.core.interference import (
    CommFactors,
    CommOverlap,
    GraphOverlap,
    comm_stretch,
    fast_overlap,
    fixed_point,
    stretch,
    stretched_like,
    with_times,
)
from sim.core.lower import WorkerTimes, lower, retimed, task_count
from sim.core.metrics import PHASE_KEYS, busy_after_backward, graph_figures, iterations_to_run
from sim.core.plan import Plan
from sim.core.scalar import single_gpu_period_s
from sim.core.timeline import graph_timeline, renamed_layers
from sim.errors import SimInputError
from sim.tensors import layer_renamer, rows_named

__all__ = ["CELLS_PER_TASK", "ENGINES", "MAX_TASKS", "MAX_TASKS_ENV", "MAX_TASKS_ENV_ERROR", "Timing", "check_cell_budget",
           "check_task_budget", "estimated_tasks", "forget_kept", "interference_model", "single_gpu_iteration_s",
           "time_plan"]

#: The task limit (`sim.core.budget`): ``$SSGD_MAX_TASKS`` or the default; a script may set it here.
MAX_TASKS, MAX_TASKS_ENV_ERROR = max_tasks_from_env()

#: ``auto``: the fast path where it applies, else the task graph; ``general``: always the task graph.
ENGINES = ("auto", "general")


@dataclass(frozen=True, eq=False)
class Timing:
    """Per cost (row): the steady-state iteration time and the phase figures;
    ``timeline(row, iterations)`` builds that row's timeline on demand."""

    iteration_time_s: np.ndarray
    phases: dict
    timeline: Callable
    fast: bool


def time_plan(model, plan: Plan, costs, *, precision: str = "fp32", iterations: int = 1, prefetch: bool = False,
              engine: str = "auto", keep_timeline: bool = True) -> Timing:
    """Time ``plan`` on ``model`` under each cost of ``costs``.

    At least enough iterations for the steady state are timed
    (`sim.core.metrics.iterations_to_run`); ``iterations`` is how many the
    timeline shows by default.
    """
    if engine not in ENGINES:
        raise SimInputError(f"unknown engine {engine!r}; valid: {', '.join(ENGINES)}")
    costs = list(costs)
    _check_budget(model, plan, costs, precision, iterations_to_run(plan, iterations))
    if plan.groups and any(_slowdown(c) > 0 or _comm_slowdown(c) > 0 for c in costs):
        return _time_with_interference(model, plan, costs, precision=precision, iterations=iterations,
                                       prefetch=prefetch, engine=engine, keep_timeline=keep_timeline)
    timing = _time_plan(model, plan, costs, precision=precision, iterations=iterations, prefetch=prefetch,
                        engine=engine, keep_timeline=keep_timeline)
    timing.phases["interference_s"] = np.zeros(len(costs))
    return timing


def _check_budget(model, plan: Plan, costs, precision: str, n_run: int) -> None:
    """`check_task_budget` on either engine before any work (the fast path's timeline has a row per task), skipped
    when 3 + 3 n + 4 m tasks per iteration, a bound without partitions (`sim.core.lower.task_count`), fit."""
    if (not plan.partition_bytes and not MAX_TASKS_ENV_ERROR
            and n_run * (3 + 3 * model.num_layers + 4 * len(plan.groups)) <= MAX_TASKS):
        return
    for cost in costs:
        check_task_budget(model, plan, _without_slowdown(cost), precision, n_run)


def _slowdown(cost) -> float:
    return float(getattr(cost, "compute_slowdown", 0.0))


def _comm_slowdown(cost) -> float:
    return float(getattr(cost, "comm_slowdown", 0.0))


def _without_slowdown(cost):
    if _slowdown(cost) <= 0:
        return cost
    try:
        return _stripped(cost)
    except TypeError:  # an unhashable cost: stripped, not kept
        return dataclasses.replace(cost, compute_slowdown=0.0)


@functools.lru_cache(maxsize=64)
def _stripped(cost):
    """``cost`` without its ``compute_slowdown`` (a cost is a frozen value: kept per cost)."""
    return dataclasses.replace(cost, compute_slowdown=0.0)


def interference_model(model, plan: Plan, cost, *, precision: str = "fp32", prefetch: bool = False,
                       engine: str = "auto"):
    """``model`` with its compute stretched by the communication it overlaps under
    ``plan`` and ``cost`` (`sim.core.interference.fixed_point`); ``model`` itself
    when the cost has no ``compute_slowdown``."""
    if _slowdown(cost) <= 0 or not plan.groups:
        return model
    if fast.supports(plan, cost, model.num_layers):  # the fast path's structure, whichever engine times it
        bwd = _solved_backward(model, plan, [cost], fast.layout(model, plan, [_without_slowdown(cost)], precision))
        if bwd is not None:
            return with_times(model, model.fwd_s, bwd[0])
        if engine == "auto":
            fwd, bwd, _ = _fast_fixed_point(model, plan, [cost], precision, prefetch, iterations_to_run(plan, 2))
            return with_times(model, fwd[0], bwd[0])
    fwd, bwd, _ = _graph_fixed_point(model, plan, cost, precision, prefetch)
    return with_times(model, fwd[0], bwd[0])


def _graph_fixed_point(model, plan: Plan, cost, precision: str, prefetch: bool):
    """`sim.core.interference.fixed_point` on the task graph: lowered once, each round re-timing
    its compute tasks (`sim.core.lower.retimed`); the last round's ``(graph, start, end)``.
    With a ``comm_slowdown`` the rounds re-time the messages too (`graph_rounds`)."""
    kappa, cost = _slowdown(cost), _without_slowdown(cost)
    n_run = iterations_to_run(plan, 2)
    check_task_budget(model, plan, cost, precision, n_run)
    graph = lower(model, plan, cost, precision=precision, iterations=n_run, prefetch=prefetch)
    if _comm_slowdown(cost) > 0:
        return graph_rounds(graph, model, kappa, _comm_slowdown(cost), n_run - 2)[:3]

    rounds: list = []

    def time_rows(fwd, bwd):  # the task graph and its times (no timeline table)
        times = None
        if rounds:  # the round before is read no more: emptied, its arrays hold the next round's
            before = rounds.pop()
            times = (before[1], before[2])
            before.clear()
        # every compute task is re-timed each round: the graph's own durations are overwritten
        timed = retimed(graph, fwd[0], bwd[0], graph.duration_s)
        rounds.append([timed, *core_engine.run(timed, out=times)])
        return rounds[-1]

    overlap = GraphOverlap(graph, model.layer_names, n_run - 2)  # (`sim.core.timeline.graph_overlap`, each round)

    def overlap_of(kept):
        return overlap(kept[1], kept[2])

    solved = fixed_point(time_rows, overlap_of, model.fwd_s, model.bwd_s, np.array([kappa]))
    graph.forget()  # (the orders the rounds reused: not kept with the timeline)
    return solved


def graph_rounds(graph, model, kappa: float, kappa_c: float, iteration: int):
    """Interference both ways on a task graph, in rounds of one timing each: every round stretches
    the compute of ``iteration`` as `sim.core.interference.fixed_point` does (``kappa``) and each
    message of it by the compute it overlaps (`sim.core.interference.comm_stretch`, ``kappa_c``), a
    factor per message that every iteration's copy of the message takes (as every iteration takes
    the reference iteration's layer times); until no time moves by more than `TOLERANCE` of the
    longest, at most `PASSES` + 1 timings. Returns ``(fwd, bwd, [graph, start, end], factors)``: the
    last timing is of those compute times and message factors (`CommFactors`, None without ``kappa_c``)."""
    fwd, bwd = np.asarray(model.fwd_s, float), np.asarray(model.bwd_s, float)
    overlap = GraphOverlap(graph, model.layer_names, iteration) if kappa > 0 else None
    comm = CommOverlap(graph, iteration) if kappa_c > 0 else None
    factors = None if comm is None else CommFactors(comm.keys, np.ones(len(comm.keys)))
    times = None
    for n in range(interference.PASSES + 1):
        # every round overwrites the graph's own durations (the messages' base times are kept apart)
        timed = retimed(graph, fwd, bwd, graph.duration_s) if overlap is not None else graph
        if comm is not None:
            timed.duration_s[comm.comm] = comm.durations(factors)
        # the first stretch moves tasks by their whole slowdown: the last orders seldom hold then (ZeRO-3 at 100k
        # layers: a replay failed in 1.1 s before the event loop); later rounds move little and replay them
        start, end = core_engine.run(timed, out=times, replay=n != 1)
        if n == interference.PASSES:
            break
        moved, scale = 0.0, max(float(np.max(fwd, initial=0.0)), float(np.max(bwd, initial=0.0)))
        new_fwd, new_bwd, new_factors = fwd, bwd, factors
        if overlap is not None:
            ov = overlap(start, end)
            new_fwd = stretch(model.fwd_s, fwd, ov.fwd_covered_s[0], ov.fwd_end_covered[0], kappa)
            new_bwd = stretch(model.bwd_s, bwd, ov.bwd_covered_s[0], ov.bwd_end_covered[0], kappa)
            moved = max(float(np.max(np.abs(new_fwd - fwd), initial=0.0)), float(np.max(np.abs(new_bwd - bwd), initial=0.0)))
        if comm is not None:
            covered, at_end = comm(start, end)
            now = timed.duration_s[comm.comm[comm.ref]]
            new = comm_stretch(comm.base_s[comm.ref], now, covered, at_end, kappa_c)
            new_factors = comm.factors(new)
            moved = max(moved, float(np.max(np.abs(new - now), initial=0.0)))
            scale = max(scale, float(np.max(now, initial=0.0)))
        if moved <= interference.TOLERANCE * scale:
            break
        fwd, bwd, factors = new_fwd, new_bwd, new_factors
        times = (start, end)  # read no more: the next round's times go in them
    graph.forget()
    return fwd[None], bwd[None], [timed, start, end], factors


def _general_interference(model, plan: Plan, cost, precision: str, prefetch: bool):
    """Interference both ways for the general engine: ``(stretched model, message factors, the last round's
    [graph, start, end] of the standard run)``. The compute stretch is `interference_model`'s (one pass where
    the fast path's structure holds); the messages' factors come from rounds over the standard run's graph
    (`graph_rounds`), jointly with the compute stretch elsewhere; any run of the plan applies them."""
    kappa, kappa_c, bare = _slowdown(cost), _comm_slowdown(cost), _without_slowdown(cost)
    n_run = iterations_to_run(plan, 2)
    if fast.supports(plan, cost, model.num_layers):
        model = interference_model(model, plan, cost, precision=precision, prefetch=prefetch, engine="general")
        kappa = 0.0
    check_task_budget(model, plan, bare, precision, n_run)
    graph = lower(model, plan, bare, precision=precision, iterations=n_run, prefetch=prefetch)
    fwd, bwd, kept, factors = graph_rounds(graph, model, kappa, kappa_c, n_run - 2)
    return with_times(model, fwd[0], bwd[0]), factors, kept


def _fast_fixed_point(model, plan: Plan, costs, precision: str, prefetch: bool, iterations: int):
    """`sim.core.interference.fixed_point` on the fast path, every cost a row at once."""
    kappa = np.array([_slowdown(c) for c in costs])
    costs = [_without_slowdown(c) for c in costs]
    prepared = fast.layout(model, plan, costs, precision)
    n_run = max(iterations, iterations_to_run(plan, 2))
    ref = iterations_to_run(plan, 2) - 2

    def time_rows(fwd, bwd):
        return fast.evaluate(model, plan, costs, precision=precision, iterations=n_run, prefetch=prefetch,
                             compute_s=(fwd, bwd), prepared=prepared)

    if len(costs) == 1:  # one row: on Python floats throughout (None: the channel serves by priority)
        solved = fast.solved_row(model, plan, prepared, float(kappa[0]), float(fast.comm_k1(costs)[0]), precision,
                                 n_run, prefetch)
        if solved is not None:
            return solved
    bwd = None if len(costs) == 1 else _solved_backward(model, plan, costs, prepared, kappa)
    if bwd is not None:
        fwd = np.tile(model.fwd_s, (len(kappa), 1))
        return fwd, bwd, time_rows(fwd, bwd)
    return fixed_point(time_rows, lambda run: fast_overlap(run, ref), model.fwd_s, model.bwd_s, kappa)


def _solved_backward(model, plan: Plan, costs, prepared: fast.Layout, kappa=None):
    """Per cost, the backward times interference stretches the model's to, solved task by task in
    one pass (`sim.core.backward_stretch`); None where a channel serves by priority (iterate instead)."""
    kappa = np.array([_slowdown(c) for c in costs]) if kappa is None else kappa
    # while the backward pass runs, each message takes 1 + comm_slowdown times its time (`sim.core.channel`)
    k1 = fast.comm_k1(costs)
    t_c = prepared.t_c_s if np.all(k1 == 1.0) else prepared.t_c_s * k1[:, None]
    return backward_times(model.bwd_s, t_c, model.num_layers - 1 - prepared.lowest, plan.lag_s,
                          plan.after_backward, kappa)


def _time_with_interference(model, plan: Plan, costs, **kw) -> Timing:
    """`time_plan` with each cost's compute stretched by its interference: on the
    fast path every cost at once, else cost by cost."""
    if kw["engine"] == "auto" and fast.supports(plan, costs[0], model.num_layers) and all(
            fast.supports_cost(c) for c in costs[1:]):
        fwd, bwd, run = _fast_fixed_point(model, plan, costs, kw["precision"], kw["prefetch"],
                                          iterations_to_run(plan, kw["iterations"]))
        phases = run.phase_metrics()
        phases["interference_s"] = (fwd.sum(axis=1) + bwd.sum(axis=1)) - (np.sum(model.fwd_s) + np.sum(model.bwd_s))
        return Timing(run.iteration_time_s, phases, _Timelines(run, None, kw["iterations"]), True)
    rows = []
    for cost in costs:
        if _comm_slowdown(cost) > 0:  # the general engine, messages slowed by a factor each
            stretched, factors, kept = _general_interference(model, plan, cost, kw["precision"], kw["prefetch"])
            if iterations_to_run(plan, kw["iterations"]) != iterations_to_run(plan, 2):
                n_run = iterations_to_run(plan, kw["iterations"])
                graph = lower(stretched, plan, _without_slowdown(cost), precision=kw["precision"], iterations=n_run,
                              prefetch=kw["prefetch"])
                graph = factors.apply(graph)
                kept = [graph, *core_engine.run(graph)]
            timing = _graph_timing([kept], 1, plan, kw["iterations"], kw["keep_timeline"])
        elif _slowdown(cost) > 0 and _reuses_fixed_point(plan, cost, model.num_layers, **kw):
            fwd, bwd, kept = _graph_fixed_point(model, plan, cost, kw["precision"], kw["prefetch"])
            stretched = with_times(model, fwd[0], bwd[0])  # its last round is the run of these times
            timing = _graph_timing([kept], 1, plan, kw["iterations"], kw["keep_timeline"])
        else:
            stretched = interference_model(model, plan, cost, precision=kw["precision"], prefetch=kw["prefetch"],
                                           engine=kw["engine"])
            timing = _time_plan(stretched, plan, [_without_slowdown(cost)], **kw)
        added = float((np.sum(stretched.fwd_s) + np.sum(stretched.bwd_s)) - (np.sum(model.fwd_s) + np.sum(model.bwd_s)))
        rows.append((timing, added))
    phases = {key: np.array([float(t.phases[key][0]) for t, _ in rows]) for key in rows[0][0].phases}
    phases["interference_s"] = np.array([added for _, added in rows])
    return Timing(np.array([float(t.iteration_time_s[0]) for t, _ in rows]), phases,
                  _RowTimelines([t.timeline for t, _ in rows]), all(t.fast for t, _ in rows))


def _reuses_fixed_point(plan: Plan, cost, num_layers: int, *, iterations: int, **_) -> bool:
    """True when the general fixed point's last round is the run `_time_plan` would time again:
    the task graph, for as many iterations (a plan of the fast path's structure is solved in one
    pass by `interference_model` instead, on either engine)."""
    return not fast.supports(plan, cost, num_layers) and iterations_to_run(plan, iterations) == iterations_to_run(
        plan, 2)


class _RowTimelines:
    """Row r's timeline from the r-th one-row timing (picklable)."""

    def __init__(self, timelines):
        self.timelines = timelines

    def __call__(self, row: int = 0, shown: int | None = None, layers: tuple | None = None):
        return self.timelines[row](0, shown, layers)


def _time_plan(model, plan: Plan, costs, *, precision: str, iterations: int, prefetch: bool, engine: str,
               keep_timeline: bool) -> Timing:
    n_run = iterations_to_run(plan, iterations)
    # the plan's structure is checked once, each cost's kind on its own
    if engine == "auto" and costs and fast.supports(plan, costs[0], model.num_layers) and all(
            fast.supports_cost(c) for c in costs[1:]):
        run = fast.evaluate(model, plan, costs, precision=precision, iterations=n_run, prefetch=prefetch)
        return Timing(run.iteration_time_s, run.phase_metrics(), _Timelines(run, None, iterations), True)
    def runs():  # one graph at a time (a graph not kept is freed before the next is built)
        for cost in costs:
            check_task_budget(model, plan, cost, precision, n_run)
            graph = lower(model, plan, cost, precision=precision, iterations=n_run, prefetch=prefetch)
            yield (graph, *core_engine.run(graph))

    return _graph_timing(runs(), len(costs), plan, iterations, keep_timeline)


def _graph_timing(runs, rows: int, plan: Plan, iterations: int, keep_timeline: bool) -> Timing:
    """The `Timing` of ``rows`` engine runs, each ``(graph, start, end)``."""
    t_iter = np.empty(rows)
    phases = {key: np.empty(rows) for key in PHASE_KEYS}
    kept = []
    for row, (graph, start, end) in enumerate(runs):
        t_iter[row], figures = graph_figures(graph, start, end, plan.per_layer_update)
        for key in PHASE_KEYS:
            phases[key][row] = figures[key]
        if keep_timeline:
            kept.append((graph, start, end))
    return Timing(t_iter, phases, _Timelines(None, kept, iterations), False)


def estimated_tasks(model, plan: Plan, precision: str, iterations: int, workers: int = 1, cost=None) -> int:
    """How many tasks `sim.core.lower.lower` would create, from sizes alone (`sim.core.lower.task_count`:
    exact with ``cost``; without it, each message part counted twice, an upper bound)."""
    return task_count(model, plan, cost, precision=precision, iterations=iterations, workers=workers)


def check_task_budget(model, plan: Plan, cost, precision: str, iterations: int, workers: int = 1) -> None:
    """Refuse, before any work, a run whose task graph would exceed `MAX_TASKS`."""
    if MAX_TASKS_ENV_ERROR:
        raise SimInputError(MAX_TASKS_ENV_ERROR)
    tasks = estimated_tasks(model, plan, precision, iterations, workers, cost)
    if tasks > MAX_TASKS:
        raise SimInputError(
            f"this run would build about {tasks:,} tasks ({iterations} iterations of {rows_named(model)}"
            f"{f', {workers} workers' if workers > 1 else ''}{', partitions of ' + format(plan.partition_bytes, ',') + ' bytes' if plan.partition_bytes else ''}); "
            f"the limit is {MAX_TASKS:,} (${MAX_TASKS_ENV} or sim.core.run.MAX_TASKS): use larger partitions, "
            "fewer layers, workers or iterations, or raise the limit")


def check_cell_budget(model, plan: Plan, iterations: int, workers: int, weight: int = 1,
                      kept: int | None = None) -> None:
    """Refuse, before any work, a per-worker run too big for `sim.core.budget.cell_budget_error` (its task times
    held and timed, against `CELLS_PER_TASK` and `WORK_CELLS_PER_TASK` x `MAX_TASKS`)."""
    if MAX_TASKS_ENV_ERROR:
        raise SimInputError(MAX_TASKS_ENV_ERROR)
    message = cell_budget_error(rows_named(model), model.num_layers, len(plan.groups), iterations, workers, weight,
                                kept, MAX_TASKS)
    if message:
        raise SimInputError(message)


class _Timelines:
    """Builds a row's timeline on demand (picklable, unlike a closure)."""

    def __init__(self, run, kept, iterations: int):
        self.run, self.kept, self.iterations = run, kept, iterations

    def __call__(self, row: int = 0, shown: int | None = None, layers: tuple | None = None):
        """Row ``row``'s timeline of ``shown`` iterations; ``layers``, a tensor view's
        ``(layer_names, tensor_layers)``, shows each tensor's layer in the ``layer`` column
        (`sim.tensors.layer_renamer`)."""
        shown = self.iterations if shown is None else shown
        rename = None if layers is None else layer_renamer(*layers)
        if self.run is not None:
            return self.run.timeline(row, shown, rename)
        if not self.kept:
            raise SimInputError("this run kept no timeline")
        timeline = graph_timeline(*self.kept[row], shown)
        return timeline if rename is None else renamed_layers(timeline, rename)


def single_gpu_iteration_s(model, precision: str = "fp32", prefetch: bool = False, engine: str = "auto",
                           update_overlaps_io: bool = False) -> float:
    """Steady-state iteration time of ``model`` on one GPU (no communication). ``update_overlaps_io``
    (a plan that updates per layer): the next batch is read while the GPU updates, as that plan's
    lowering does (`sim.core.scalar.single_gpu_period_s`); it matters only with io or host copies."""
    from sim.core.cost import NO_COMM

    overlap = bool(update_overlaps_io) and not prefetch and bool(model.io_s or model.h2d_s)
    if (engine == "auto" or overlap) and model.num_layers:  # no message: the recurrences, on plain floats
        key = (bool(prefetch), overlap)
        kept = _SINGLE_GPU_S.get(model) if _immutable_times(model) else None
        if kept is not None and key in kept:
            return kept[key]
        value = single_gpu_period_s(float(model.io_s), float(model.h2d_s), float(model.update_s),
                                     model.fwd_s.tolist(), model.bwd_s[::-1].tolist(), prefetch, overlap)
        if _immutable_times(model):
            with _SINGLE_GPU_LOCK:
                _SINGLE_GPU_S.setdefault(model, {})[key] = value
        return value
    if engine == "auto":
        run = fast.evaluate(model, Plan("", ()), NO_COMM, precision=precision, iterations=2, prefetch=prefetch)
        return float(run.iteration_time_s[0])
    timing = time_plan(model, Plan("", ()), [NO_COMM], precision=precision, iterations=2, prefetch=prefetch,
                       engine=engine, keep_timeline=False)
    return float(timing.iteration_time_s[0])


#: One-GPU iteration times worked out, per model whose compute times cannot change (`_immutable_times`:
#: a model is a frozen value, and `sim.core.workload.resolve_model` makes its own arrays read-only).
_SINGLE_GPU_S: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SINGLE_GPU_LOCK = threading.Lock()


def forget_kept() -> None:
    """Drop the values kept between runs: one-GPU iteration times and costs without interference."""
    with _SINGLE_GPU_LOCK:
        _SINGLE_GPU_S.clear()
    _stripped.cache_clear()


def _immutable_times(model) -> bool:
    """True when ``model``'s forward and backward times are read-only arrays that own their data."""
    return all(isinstance(a, np.ndarray) and a.base is None and not a.flags.writeable
               for a in (model.fwd_s, model.bwd_s))


def time_workers(model, plan: Plan, cost, times: WorkerTimes, *, precision: str = "fp32", iterations: int,
                 prefetch: bool = False, engine: str = "auto", keep_iterations: int | None = None):
    """A per-worker run. Returns arrays of shape (iterations, workers): the end
    of each worker's step (its last update), the end of its backward pass and
    the time it computes between the two (its update; with per-layer updates, the
    updates and the next forward pass's tasks among them); and a picklable
    ``timeline()`` builder (on the fast path, of the first ``keep_iterations``: `fast.evaluate`).

    Each worker computes with its own times (``times``); every message waits
    for all workers' gradients. With identical workers every worker's tasks
    take the aggregate run's times, to the bit.
    """
    factors = None
    general = not (engine == "auto" and fast.supports(plan, cost, model.num_layers))
    if general and _comm_slowdown(cost) > 0:  # compute and messages as in the aggregate run (`_general_interference`)
        stretched, factors, _ = _general_interference(model, plan, cost, precision, prefetch)
        times = dataclasses.replace(times, models=tuple(stretched_like(m, model, stretched) for m in times.models))
        model, cost = stretched, _without_slowdown(dataclasses.replace(cost, comm_slowdown=0.0))
    elif _slowdown(cost) > 0:  # every worker's compute stretched as in the aggregate run (`interference_model`)
        stretched = interference_model(model, plan, cost, precision=precision, prefetch=prefetch, engine=engine)
        times = dataclasses.replace(times, models=tuple(stretched_like(m, model, stretched) for m in times.models))
        model, cost = stretched, _without_slowdown(cost)
    if not general:
        run = fast.evaluate(model, plan, [cost], precision=precision, iterations=iterations, prefetch=prefetch,
                            times=times, keep_iterations=keep_iterations)
        update_s = (run.update_end_s - run.update_start_s).T
        return (run.update_end_s.T.copy(), run.backward_end_s.T.copy(), update_s,
                functools.partial(run.timeline, None))
    check_task_budget(model, plan, cost, precision, iterations, times.workers)
    graph = lower(model, plan, cost, precision=precision, iterations=iterations, prefetch=prefetch, times=times)
    if factors is not None:  # each message slowed by the aggregate run's factor
        graph = factors.apply(graph)
    start, end = core_engine.run(graph)
    shape = (iterations, times.workers)
    update_end, backward_end, update_s = np.full(shape, -np.inf), np.full(shape, -np.inf), np.zeros(shape)
    for t, kind in enumerate(graph.kind):
        k, w = graph.iteration[t], graph.worker[t]
        if kind == "update":
            update_end[k, w] = max(update_end[k, w], end[t])
            update_s[k, w] += end[t] - start[t]
        elif kind == "backward":
            backward_end[k, w] = max(backward_end[k, w], end[t])
    if plan.per_layer_update:  # its updates run among the messages, and the next forward pass among them
        update_s = busy_after_backward(graph, start, end, backward_end, update_end)
    return update_end, backward_end, update_s, functools.partial(graph_timeline, graph, start, end)
