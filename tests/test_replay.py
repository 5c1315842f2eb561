"""`sim.core.replay`: a lane's list schedule from a guessed order, checked, against the loops it stands for."""

from __future__ import annotations

import copy
import dataclasses
from unittest import mock

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sim.core import engine, replay, rerun
from sim.core.interference import GraphOverlap, timeline_overlap, with_times
from sim.core.lower import lower, retimed
from sim.core.timeline import graph_timeline
from tests.test_engine_pipeline import _case

SETTINGS = settings(max_examples=200, deadline=None)


def _list_schedule(release, rank, duration, free):
    """The plain loop: whenever the lane is free, the released task of smallest rank starts."""
    n = len(release)
    start, end, done, t = np.zeros(n), np.zeros(n), np.zeros(n, bool), free
    for _ in range(n):
        waiting = [i for i in range(n) if not done[i] and release[i] <= t]
        if not waiting:
            t = min(release[i] for i in range(n) if not done[i])
            waiting = [i for i in range(n) if not done[i] and release[i] <= t]
        i = min(waiting, key=lambda j: rank[j])
        start[i], t = t, t + duration[i]
        end[i], done[i] = t, True
    return start, end


def _lane(seed: int, grid: bool):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    if grid:  # many ties
        release = rng.integers(0, 8, n) * 0.25
        duration = rng.integers(1, 4, n) * 0.125
    else:
        release, duration = rng.uniform(0, 3, n), rng.uniform(0.01, 0.3, n)
    free = float(rng.choice([-np.inf, 0.5, 1.0]))
    return release, rng.permutation(n), duration, free


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_the_true_order_is_accepted_with_the_loops_times(seed, grid):
    release, rank, duration, free = _lane(seed, grid)
    start, end = _list_schedule(release, rank, duration, free)
    order = replay.order_of(start, end)
    got = replay.scan(release[order], duration[order], free)
    assert got is not None
    assert np.array_equal(got[0], start[order]) and np.array_equal(got[1], end[order])  # to the bit
    assert replay.is_list_schedule(*got, release[order], rank[order], free)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_an_order_that_passes_the_check_is_the_list_schedule(seed, grid):
    release, rank, duration, free = _lane(seed, grid)
    start, end = _list_schedule(release, rank, duration, free)
    rng = np.random.default_rng(seed + 1)
    true = replay.order_of(start, end)
    for guess in (rng.permutation(len(release)), np.roll(true, 1), np.sort(true), true[::-1]):
        got = replay.scan(release[guess], duration[guess], free)
        if got is not None and replay.is_list_schedule(*got, release[guess], rank[guess], free):
            assert np.array_equal(guess, true)
            assert np.array_equal(got[1], end[guess])


def test_an_order_that_breaks_the_rule_is_refused():
    release, rank, duration = np.array([0.0, 0.0]), np.array([1, 0]), np.array([1.0, 1.0])
    got = replay.scan(release, duration, -np.inf)  # rank 1 first though rank 0 waits
    assert not replay.is_list_schedule(*got, release, rank, -np.inf)
    release = np.array([0.0, 2.0, 1.0])  # idle until 2 though a task is released at 1
    got = replay.scan(release, np.ones(3) * 0.5, -np.inf)
    assert not replay.is_list_schedule(*got, release, np.arange(3), -np.inf)


@SETTINGS
@given(st.integers(0, 2**32 - 1))
def test_running_sums_add_one_at_a_time(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200))
    duration = rng.uniform(0, 1, n)
    first = np.flatnonzero(np.concatenate([[True], rng.random(n - 1) < rng.uniform(0.01, 0.9)]))
    value = rng.uniform(0, 100, len(first))
    want = np.empty(n)
    for r, s in enumerate(first.tolist()):
        t = value[r]
        for p in range(s, first[r + 1] if r + 1 < len(first) else n):
            t = t + duration[p]
            want[p] = t
    assert np.array_equal(replay.running_sums(first, value, duration), want)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_sparse_max_and_range_max_are_the_range_maximum(seed, runs):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    values = rng.integers(0, 1000, n).astype(np.int32)
    if runs:  # long increasing runs, as a lane's ranks come
        values = np.cumsum(rng.integers(-3, 50, n)).astype(np.int32)
    lo = rng.integers(0, n, 50)
    hi = np.array([int(rng.integers(a + 1, n + 1)) for a in lo])
    want = [values[a:b].max() for a, b in zip(lo, hi, strict=True)]
    assert np.array_equal(replay.sparse_max(values, lo, hi), want)
    assert np.array_equal(replay.range_max(values, lo, hi), want)


def test_updates_then_forward_refuses_a_forward_before_its_update():
    order = np.array([1, 0])  # the forward (slot 1) before the update it waits for (slot 0)
    assert replay.updates_then_forward([order], np.array([0.0]), np.array([1.0, 1.0]), np.array([0]), 0.0, 0.0) is None
    got = replay.updates_then_forward([order[::-1]], np.array([0.0]), np.array([1.0, 1.0]), np.array([0]), 0.0, 0.0)
    assert got is not None and got[2].tolist() == [1.0, 2.0]


def _without_replay(fn):
    replay.ENABLED = False
    try:
        return fn()
    finally:
        replay.ENABLED = True


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans(), st.booleans())
def test_replayed_rounds_give_the_loops_times(seed, grid, instant_updates):
    """Several iterations timed again with other compute times (as the interference rounds do), each
    lane from the orders of the rounds before: the same times as the loops alone, and the event loop
    (also with updates that take no time: the rounds of an instant decide)."""
    model, plan, cost, iterations, prefetch, times = _case(seed, grid)
    if instant_updates:
        model = dataclasses.replace(model, update_s=0.0)
        times = None
    iterations = iterations if times is not None else iterations + 3  # (a worker's scale factors are per iteration)
    graph = lower(model, plan, cost, iterations=iterations, prefetch=prefetch, times=times)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        stretched = with_times(model, model.fwd_s * rng.uniform(1, 1.02, model.num_layers),
                               model.bwd_s * rng.uniform(1, 1.02, model.num_layers))
        timed = retimed(graph, stretched.fwd_s, stretched.bwd_s)
        got = engine.run(timed)
        want = _without_replay(lambda timed=timed: engine.run(timed))
        assert np.array_equal(got[0], want[0], equal_nan=True) and np.array_equal(got[1], want[1], equal_nan=True)
        general = engine.run(timed, general=True)
        assert np.array_equal(got[1], general[1])


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_graph_overlap_found_once_reads_as_the_timelines(seed):
    """The interference rounds' overlap (rows found once; `graph_overlap` is it) equals
    `timeline_overlap` of the timeline built from the same times, to the bit."""
    model, plan, cost, iterations, prefetch, times = _case(seed, False)
    graph = lower(model, plan, cost, iterations=iterations, prefetch=prefetch, times=times)
    start, end = engine.run(graph)
    timeline = graph_timeline(graph, start, end)
    for k in range(iterations):
        want = timeline_overlap(timeline, model.layer_names, k)
        overlap = GraphOverlap(graph, model.layer_names, k)
        for _ in range(2):  # (the second time, its rows in the order they started)
            assert all(np.array_equal(a, b) for a, b in zip(overlap(start, end), want, strict=True))


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans(), st.booleans())
def test_event_loop_rerun_from_the_last_orders_gives_its_times(seed, grid, instant_updates):
    """A graph the event loop times (no plain pipeline), timed again with other compute times from the
    orders of the run before (`sim.core.rerun`): the event loop's times, to the bit."""
    model, plan, cost, iterations, prefetch, times = _case(seed, grid)
    if instant_updates:
        model, times = dataclasses.replace(model, update_s=0.0), None
    graph = lower(model, plan, cost, iterations=iterations, prefetch=prefetch, times=times)
    graph.pipeline = None  # every graph through the event loop
    rng = np.random.default_rng(seed)
    for spread in (2e-2, 1e-6, 1e-12):  # (the smaller, the likelier the orders hold)
        timed = retimed(graph, model.fwd_s * rng.uniform(1, 1 + spread, model.num_layers),
                        model.bwd_s * rng.uniform(1, 1 + spread, model.num_layers))
        got = engine.run(timed)
        want = engine.run(copy.copy(timed), general=True)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_a_run_without_replay_is_the_event_loops_and_keeps_its_orders(seed, grid):
    """``replay=False`` (the interference rounds' first stretch) skips the last orders and times the graph
    with the event loop, to the bit, and keeps the new orders for the rounds after it."""
    model, plan, cost, iterations, prefetch, times = _case(seed, grid)
    graph = lower(model, plan, cost, iterations=iterations, prefetch=prefetch, times=times)
    graph.pipeline = None
    engine.run(graph)
    timed = retimed(graph, model.fwd_s * 1.5, model.bwd_s * 1.25)
    with mock.patch.object(engine, "rerun", side_effect=AssertionError("replayed")):
        got = engine.run(timed, replay=False)
    want = engine.run(copy.copy(timed), general=True)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    if not timed.has_lags and len(timed.resources) <= rerun.MAX_LANES and replay.ENABLED:
        assert np.array_equal(timed.memo["end"], got[1])


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans(), st.sampled_from(["true", "zeros", "noise", "late"]))
def test_settling_the_lanes_orders_from_any_guess_gives_the_event_loops_times(seed, grid, guess):
    """`rerun._settle`, the worklist that finishes a chain from lane to lane the passes do not: from
    any ends at all (the true ones, zeros, noise, or late by a random amount), the event loop's times
    to the bit, for the orders the event loop ran in."""
    model, plan, cost, iterations, prefetch, times = _case(seed, grid)
    graph = lower(model, plan, cost, iterations=iterations, prefetch=prefetch, times=times)
    graph.pipeline = None
    assume(not graph.has_lags)  # (the event loop keeps its orders for graphs without lags)
    want = engine.run(graph, general=True)
    started = graph.memo["started"]
    rng = np.random.default_rng(seed)
    first = {"true": want[1], "zeros": np.zeros(len(graph)),
             "noise": rng.uniform(0, want[1].max(initial=1.0), len(graph)),
             "late": want[1] + rng.uniform(0, 1e-3, len(graph)) * (rng.random(len(graph)) < 0.2)}[guess]
    lanes, preds = rerun._lanes(graph, started), rerun._predecessors(graph)
    got = rerun._settle(graph, started, lanes, preds, first)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    # with a budget of settled tasks: the same times within it, None past it (the event loop then times it)
    moving = rerun._settle(graph, started, lanes, preds, first, budget=0)
    if np.array_equal(first, want[1]):
        assert moving is not None and np.array_equal(moving[1], want[1])
    else:
        assert moving is None


def _retimed_runs_match_the_event_loop(graph, model, rng) -> None:
    """``graph`` timed again with compute times spread by 30 %, 2 % and 1e-9: the event loop's times each time."""
    for spread in (0.3, 2e-2, 1e-9):
        timed = retimed(graph, model.fwd_s * rng.uniform(1, 1 + spread, model.num_layers),
                        model.bwd_s * rng.uniform(1, 1 + spread, model.num_layers))
        got = engine.run(timed)
        want = engine.run(copy.copy(timed), general=True)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_rerun_through_the_worklist_gives_the_event_loops_times(seed, grid):
    """With every rerun handed to the worklist after its third pass (as a long chain from lane to lane
    is at 100k layers), graphs timed again with other compute times: the event loop's times."""
    model, plan, cost, iterations, prefetch, times = _case(seed, grid)
    graph = lower(model, plan, cost, iterations=iterations, prefetch=prefetch, times=times)
    graph.pipeline = None
    rng = np.random.default_rng(seed)
    front = rerun._FRONT
    rerun._FRONT = 10**9
    try:
        _retimed_runs_match_the_event_loop(graph, model, rng)
    finally:
        rerun._FRONT = front


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_rerun_task_by_task_gives_the_event_loops_times(seed, grid):
    """`rerun._in_order` of the event loop's own orders is its schedule to the bit (the first eighth's
    check holds); with every rerun handed to it (the passes giving up, as at ZeRO-3's 100k layers),
    graphs timed again with other compute times: the event loop's times."""
    model, plan, cost, iterations, prefetch, times = _case(seed, grid)
    graph = lower(model, plan, cost, iterations=iterations, prefetch=prefetch, times=times)
    graph.pipeline = None
    if not graph.has_lags:
        want = engine.run(graph, general=True)
        got = rerun._in_order(graph, graph.memo["started"], rerun._predecessors(graph))
        assert got is not None and np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    rng = np.random.default_rng(seed)
    fixed_point = rerun._fixed_point
    rerun._fixed_point = lambda *args: None
    try:
        _retimed_runs_match_the_event_loop(graph, model, rng)
    finally:
        rerun._fixed_point = fixed_point
