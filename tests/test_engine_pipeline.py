"""The lane-by-lane schedule of one worker's pipeline (`sim.core.pipeline`) against the event loop
(`sim.core.engine`), to the bit; the task count the budget uses; the arrays of the task graph."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.core import engine, pipeline
from sim.core.cost import CommCost, PSCost, measured_cost
from sim.core.interference import timeline_overlap
from sim.core.lower import WorkerTimes, lower, task_count
from sim.core.plan import SHARD_LEVELS, SHARD_NONE, Plan
from sim.core.run import MAX_TASKS, check_task_budget
from sim.core.timeline import graph_overlap, graph_timeline
from sim.errors import SimInputError

SETTINGS = settings(max_examples=150, deadline=None)


def _model(rng, n: int, grid: bool):
    fwd = rng.uniform(1e-5, 5e-4, n)
    params = rng.integers(0, 3_000_000, n) * (rng.random(n) < 0.85)
    m = sim.Model("m", tuple(f"l{i}" for i in range(n)), params, fwd, 2 * fwd * rng.uniform(0.5, 1.5, n))
    m = dataclasses.replace(m, update_s=float(rng.uniform(0, 3e-3)), io_s=float(rng.uniform(0, 1e-3)),
                            h2d_s=float(rng.uniform(0, 1e-3)))
    if grid:  # times on a grid of 0.1 ms: many tasks end at the same instant
        def q(x):
            return np.maximum(np.round(np.asarray(x, dtype=float) / 1e-4), 1) * 1e-4
        m = dataclasses.replace(m, fwd_s=q(m.fwd_s), bwd_s=q(m.bwd_s), update_s=float(q(m.update_s)),
                                io_s=float(q(m.io_s)), h2d_s=float(q(m.h2d_s)))
    return m


def _groups(rng, layers) -> tuple:
    layers, groups, i = list(layers[::-1]), [], 0
    while i < len(layers):
        k = int(rng.integers(1, 4))
        groups.append(tuple(sorted(layers[i:i + k])))
        i += k
    return tuple(groups)


def _cost(rng, model, grid: bool):
    kind = rng.integers(4)
    if kind <= 1:
        return PSCost(*(float(x) for x in rng.uniform(0, [1e-4, 1e-9, 1e-4, 1e-9])), shared_lane=bool(kind))
    if kind == 2 and not grid:
        return measured_cost(rng.uniform(1e-5, 1e-3, model.num_layers), model.gradient_bytes("fp32"))
    if grid:
        return CommCost(float(rng.choice([1e-4, 2e-4])), float(rng.choice([1e-10, 5e-11])))
    return CommCost(float(rng.uniform(1e-6, 1e-4)), float(rng.uniform(1e-11, 2e-9)))


def _case(seed: int, grid: bool = False):
    """A random model, plan, cost and run of one worker."""
    rng = np.random.default_rng(seed)
    model = _model(rng, int(rng.integers(1, 12)), grid)
    has = [i for i in range(model.num_layers) if model.params[i] > 0]
    groups = (tuple(has),) if (rng.random() < 0.2 and has) else _groups(rng, has)
    cost = _cost(rng, model, grid)
    ps = isinstance(cost, PSCost)
    decoupled = not ps and rng.random() < 0.2
    shard = str(rng.choice(SHARD_LEVELS[1:])) if (not ps and not decoupled and rng.random() < 0.2) else SHARD_NONE
    lag = tuple(rng.uniform(0, 1e-4, len(groups)) * (rng.random(len(groups)) < 0.5)) if rng.random() < 0.3 else ()
    plan = Plan("x", groups, after_backward=bool(rng.random() < 0.2), lag_s=lag,
                partition_bytes=int(rng.choice([0, 500_000, 2_000_000, 4_000_000])),
                priority=str(rng.choice(["fifo", "input_first"])),
                per_layer_update=(bool(rng.random() < 0.5) or decoupled) and shard == SHARD_NONE,
                decoupled=decoupled, shard=shard)
    iterations, prefetch = int(rng.integers(1, 5)), bool(rng.random() < 0.5)
    times = None
    if rng.random() < 0.3:  # one worker with its own scale factors
        times = WorkerTimes((model,), np.zeros(1, dtype=int), rng.uniform(0.5, 2, (iterations, 1)),
                            rng.uniform(0.5, 2, 1), rng.uniform(0.5, 2, (iterations, len(groups))))
    if type(cost) is CommCost and not decoupled and shard == SHARD_NONE and rng.random() < 0.4:
        # a host-side launch per part, run ahead of the transfers from a credit of 2 on (`launches_ahead`)
        cost = cost.with_launch(1e-4 if grid else float(rng.uniform(1e-6, 3e-4)))
        plan = dataclasses.replace(plan, credit=int(rng.integers(1, 5)))
    return model, plan, cost, iterations, prefetch, times


def _both(seed: int, grid: bool):
    model, plan, cost, iterations, prefetch, times = _case(seed, grid)
    graph = lower(model, plan, cost, iterations=iterations, prefetch=prefetch, times=times)
    return graph, engine.run(graph), engine.run(graph, general=True)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_the_pipeline_gives_the_event_loops_times_to_the_bit(seed, grid):
    graph, (start, end), (start_g, end_g) = _both(seed, grid)
    assert np.array_equal(start, start_g) and np.array_equal(end, end_g)


def test_the_pipeline_is_used_on_most_one_worker_graphs_and_agrees():
    used = 0
    for seed in range(300):
        graph, (start, end), (start_g, end_g) = _both(seed, grid=seed % 2 == 1)
        used += graph.pipeline is not None and pipeline.applies(graph, graph.pipeline)
        assert np.array_equal(start, start_g) and np.array_equal(end, end_g), seed
    assert used >= 150


def test_a_task_of_no_duration_that_releases_a_channel_leaves_it_to_the_event_loop():
    """Layer 1's backward takes no time: it ends at the instant it starts, and what it releases is
    served only in a later round of that instant (the engine's order, kept by the event loop)."""
    model = sim.Model("m", ("l0", "l1", "l2"), np.array([10, 10, 10]), np.array([1.0, 1.0, 1.0]),
                      np.array([1.0, 0.0, 1.0]))
    plan = Plan("x", ((2,), (1,), (0,)), priority="input_first", per_layer_update=True)
    graph = lower(model, plan, CommCost(1.0, 0.0), iterations=2)
    assert graph.pipeline is not None and not pipeline.applies(graph, graph.pipeline)
    assert [a.tolist() for a in engine.run(graph)] == [a.tolist() for a in engine.run(graph, general=True)]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3))
def test_the_task_count_is_the_lowerings(seed, workers):
    model, plan, cost, iterations, prefetch, _ = _case(seed)
    graph = lower(model, plan, cost, iterations=iterations, prefetch=prefetch,
                  times=WorkerTimes.identical(model, iterations, workers))
    assert task_count(model, plan, cost, iterations=iterations, workers=workers) == len(graph)
    assert task_count(model, plan, None, iterations=iterations, workers=workers) >= len(graph)


def test_the_budget_lets_100k_layers_of_bytescheduler_run_and_refuses_one_byte_partitions():
    n = 100_000
    rng = np.random.default_rng(0)
    fwd = rng.uniform(2e-5, 5e-4, n)
    model = sim.Model("big", tuple(f"l{i}" for i in range(n)), rng.integers(100_000, 10_000_000, n), fwd, 2 * fwd)
    groups = tuple((i,) for i in range(n - 1, -1, -1))
    cost = CommCost(1e-5, 1e-10)
    plan = Plan("x", groups, partition_bytes=4_096_000, priority="input_first", per_layer_update=True)
    check_task_budget(model, plan, cost, "fp32", 8)  # about 6.7 million tasks: runs
    assert 6_000_000 < task_count(model, plan, cost, iterations=8) <= MAX_TASKS
    with pytest.raises(SimInputError, match="tasks"):
        check_task_budget(model, dataclasses.replace(plan, partition_bytes=1), cost, "fp32", 8)


def test_a_part_of_a_long_message_is_named_by_its_first_and_last_layer():
    model = sim.Model("m", tuple(f"l{i}" for i in range(6)), np.full(6, 1_000_000), np.full(6, 1e-3),
                      np.full(6, 2e-3))
    plan = Plan("x", ((0, 1, 2, 3, 4, 5),), partition_bytes=10_000_000)
    graph = lower(model, plan, PSCost(1e-5, 1e-10, 1e-5, 1e-10), iterations=1)
    labels = [lb for lb in graph.label.tolist() if lb.startswith("push")]
    assert labels == ["push:l0+...+l5#0", "push:l0+...+l5#1", "push:l0+...+l5#2"]
    # the layer column keeps the whole name while its repeats stay under MAX_PART_NAME_CHARS (tests/test_scale.py:
    # a 100k-layer message in 4 MB parts is named as its labels are)
    assert set(graph.layer[graph.kind == "comm"].tolist()) == {"l0+l1+l2+l3+l4+l5"}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_graphs_overlap_is_the_timelines(seed):
    """`graph_overlap` (arrays) equals `timeline_overlap` of the timeline, to the bit."""
    model, plan, cost, iterations, prefetch, times = _case(seed)
    graph = lower(model, plan, cost, iterations=iterations, prefetch=prefetch, times=times)
    start, end = engine.run(graph)
    timeline = graph_timeline(graph, start, end)
    for ref in range(iterations):
        want = timeline_overlap(timeline, model.layer_names, ref)
        got = graph_overlap(graph, start, end, model.layer_names, ref)
        assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))


@pytest.mark.parametrize("replayed", [True, False])
@pytest.mark.parametrize("alpha_s, rest_in_order", [(3e-4, True), (6e-5, False)])
def test_bytescheduler_lanes_served_without_the_heap_agree_with_the_event_loop(monkeypatch, replayed, alpha_s,
                                                                               rest_in_order):
    """ByteScheduler's launches (released as backward reaches each layer, the layer nearest the input
    first: each run released outranks the ones before) take `sim.core.stacked_runs.serve`; a channel
    slower than the launches has its parts left all released by their turn early on and goes back to
    back from there (`stacked_runs.rest_released`), one about as fast as they does not (going back to
    back there would give other times). The times are the event loop's to the bit."""
    from sim.core import replay, stacked_runs

    used = {"serve": 0, "rest": 0, "by_release": 0}

    def counted(name, fn):
        def wrapper(*args, **kwargs):
            got = fn(*args, **kwargs)
            used[name] += 1 if name != "rest" else bool(got)
            return got
        return wrapper

    monkeypatch.setattr(stacked_runs, "serve", counted("serve", stacked_runs.serve))
    monkeypatch.setattr(stacked_runs, "rest_released", counted("rest", stacked_runs.rest_released))
    monkeypatch.setattr(replay, "updates_by_release", counted("by_release", replay.updates_by_release))
    monkeypatch.setattr(replay, "ENABLED", replayed)
    rng = np.random.default_rng(7)
    n = 300
    fwd = rng.uniform(2e-5, 2e-4, n)
    model = sim.Model("m", tuple(f"l{i}" for i in range(n)), rng.integers(100_000, 2_000_000, n), fwd, 2 * fwd)
    plan = Plan("x", tuple((i,) for i in range(n - 1, -1, -1)), partition_bytes=500_000, priority="input_first",
                per_layer_update=True, credit=4)
    graph = lower(model, plan, CommCost(alpha_s, 4e-10).with_launch(2.5e-4), iterations=3)
    start, end = engine.run(graph)
    start_g, end_g = engine.run(graph, general=True)
    assert np.array_equal(start, start_g) and np.array_equal(end, end_g)
    assert used["serve"] >= 1 and (used["rest"] >= 1) == rest_in_order
    assert used["by_release"] >= (1 if replayed else 0)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-3, 40), max_size=30), st.booleans())
def test_distinct_counts_what_unique_finds(values, huge):
    """`sim.core.pipeline.distinct` (a table of message or layer numbers) counts the values `np.unique` finds."""
    values = np.array(values + ([10**12] if huge else []), dtype=np.int64)
    assert pipeline.distinct(values) == len(np.unique(values))
    assert pipeline.distinct(np.abs(values)) == len(np.unique(np.abs(values)))
