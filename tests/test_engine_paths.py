"""The general path's shortcuts against the per-task code they replace, to the bit: the event loop
without lags, a graph re-timed for new compute times, the sharded all-gathers built as blocks, the
pipeline's channel once every part is released, and DeAR's steps timed by the pipeline."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.core import engine, pipeline
from sim.core.cost import CommCost, PSCost
from sim.core.interference import with_times
from sim.core.lower import lower, retimed
from sim.core.plan import SHARD_NONE, SHARD_PARAMETERS, Plan
from sim.core.taskgraph import TAGS
from tests.test_engine_pipeline import _case


def _with_zero_lags(graph):
    """``graph`` as the lagged event loop sees it: every edge with a lag of 0."""
    out = copy.copy(graph)
    out.has_lags = True
    out.succ_lag_s = np.zeros(len(graph.succ_index))
    return out


def _times(graph, simulate):
    start, end = np.full(len(graph), np.nan), np.full(len(graph), np.nan)
    assert simulate(graph, memoryview(start), memoryview(end)) == len(graph)
    return start, end


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_event_loop_without_lags_gives_the_lagged_loops_times(seed):
    model, plan, cost, iterations, prefetch, times = _case(seed)
    graph = lower(model, plan, cost, iterations=iterations, prefetch=prefetch, times=times)
    if graph.has_lags:
        return
    lean = _times(graph, engine._simulate_without_lags)
    full = _times(_with_zero_lags(graph), engine._simulate)
    assert all(np.array_equal(a, b) for a, b in zip(lean, full, strict=True))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_retimed_graph_is_the_lowering_of_the_retimed_model(seed):
    model, plan, cost, iterations, prefetch, _ = _case(seed)
    rng = np.random.default_rng(seed)
    fwd, bwd = model.fwd_s * rng.uniform(1, 2, model.num_layers), model.bwd_s * rng.uniform(1, 2, model.num_layers)
    want = lower(with_times(model, fwd, bwd), plan, cost, iterations=iterations, prefetch=prefetch)
    got = retimed(lower(model, plan, cost, iterations=iterations, prefetch=prefetch), fwd, bwd)
    assert np.array_equal(got.duration_s, want.duration_s)
    assert all(np.array_equal(a, b) for a, b in zip(engine.run(got), engine.run(want), strict=True))


def _stage3_edges(graph, units, groups, iterations: int) -> set:
    """The edges of stage 3's all-gathers, built gather by gather as `sim.core.shard` did before it
    built them as blocks (one worker): (source, target) by task index, found from the graph's tasks."""
    kind, it, layer, tag = graph.kind, graph.iteration, graph.layer_id, graph.tag
    task = {}
    for t in range(len(graph)):
        task[(int(it[t]), kind[t], int(layer[t]), int(tag[t]), int(graph.message[t]))] = t

    def compute(k, what, lyr):
        return next(t for (kk, kd, ly, _, _), t in task.items() if kk == k and kd == what and ly == lyr)

    def gather(k, tg, gi):
        return next(t for (kk, kd, _, tt, m), t in task.items() if kk == k and kd == "comm" and tt == tg and m == gi)

    fwd_tag, bwd_tag = TAGS.index("all-gather-fwd"), TAGS.index("all-gather-bwd")
    edges, last = set(), len(units) - 1
    for k in range(iterations):  # (the first iteration gathers too: its shards as initialised, after its h2d)
        step_done = [next(t for t in range(len(graph)) if it[t] == k - 1 and kind[t] == "update")] if k else []
        h2d = next(t for t in range(len(graph)) if it[t] == k and kind[t] == "h2d")
        for p, gi in enumerate(units):
            ag = gather(k, fwd_tag, gi)
            sources = [*step_done, h2d] if p < 2 else [compute(k, "forward", max(groups[units[p - 2]]))]
            edges |= {(s, ag) for s in sources} | {(ag, compute(k, "forward", min(groups[gi])))}
        for p in range(last - 1, -1, -1):
            ag = gather(k, bwd_tag, units[p])
            src = (compute(k, "forward", max(groups[units[last]])) if p == last - 1
                   else compute(k, "backward", min(groups[units[p + 2]])))
            edges |= {(src, ag), (ag, compute(k, "backward", max(groups[units[p]])))}
    return edges


@pytest.mark.parametrize("groups", [((5, 4), (3,), (2, 1), (0,)), ((0,), (1,)), ((2,), (1,), (0,)), ((0, 1, 2),)])
def test_the_stage3_gathers_have_the_edges_built_one_by_one(groups):
    n = 1 + max(max(g) for g in groups)
    model = sim.Model("m", tuple(f"l{i}" for i in range(n)), np.full(n, 1000), np.full(n, 1e-3), np.full(n, 2e-3))
    graph = lower(model, Plan("x", groups, shard=SHARD_PARAMETERS), CommCost(1e-4, 1e-9), iterations=3)
    units = sorted(range(len(groups)), key=lambda gi: min(groups[gi]))
    want = _stage3_edges(graph, units, groups, 3)
    u, v, _ = graph.edge_list()
    gathers = set(np.flatnonzero(np.isin(graph.tag, [TAGS.index("all-gather-fwd"), TAGS.index("all-gather-bwd")])).tolist())
    got = {(a, b) for a, b in zip(u.tolist(), v.tolist(), strict=True) if a in gathers or b in gathers}
    assert got == want


def test_a_backlogged_channel_runs_its_last_parts_back_to_back_as_the_event_loop_does():
    """Parts far longer than the backward pass: most of each iteration's parts wait until every part
    is released and then go in rank order (`sim.core.pipeline._back_to_back`)."""
    rng = np.random.default_rng(3)
    n = 40
    fwd = rng.uniform(1e-5, 1e-4, n)
    model = sim.Model("m", tuple(f"l{i}" for i in range(n)), rng.integers(1_000_000, 5_000_000, n), fwd, 2 * fwd)
    plan = Plan("x", tuple((i,) for i in range(n - 1, -1, -1)), partition_bytes=2_000_000, priority="input_first",
                per_layer_update=True)
    graph = lower(model, plan, CommCost(1e-5, 1e-9), iterations=4)
    assert graph.pipeline is not None and pipeline.applies(graph, graph.pipeline)
    assert all(np.array_equal(a, b) for a, b in zip(engine.run(graph), engine.run(graph, general=True), strict=True))


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans(), st.booleans())
def test_deARs_pipeline_gives_the_event_loops_times_with_updates_of_no_duration(seed, no_update, grid):
    """DeAR's updates and all-gathers between two backward passes (`sim.core.pipeline.decoupled_step`):
    with updates, io and h2d that take no time (each ends in a later round of its instant) or not."""
    model, plan, cost, iterations, prefetch, _ = _case(seed, grid)
    if isinstance(cost, PSCost):
        cost = CommCost(1e-5, 1e-9)
    if no_update:
        model = dataclasses.replace(model, update_s=0.0, io_s=0.0, h2d_s=0.0)
    plan = dataclasses.replace(plan, decoupled=True, per_layer_update=True, shard=SHARD_NONE, priority="fifo")
    if not plan.groups:  # nothing to send: no pipeline steps
        return
    graph = lower(model, plan, cost, iterations=max(iterations, 2), prefetch=prefetch)
    assert graph.pipeline is not None and graph.pipeline.decoupled
    assert all(np.array_equal(a, b) for a, b in zip(engine.run(graph), engine.run(graph, general=True), strict=True))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["bytescheduler", "dear", "ByteScheduler-PS"]),
       st.sampled_from(["10gbe", "100gbe", "ib-edr-100"]), st.sampled_from([2, 8, 32]))
def test_the_pipelined_period_of_the_iterations_timed_is_that_of_a_long_run(seed, who, network, gpus):
    """With per-layer updates `sim.core.metrics.PIPELINED_ITERATIONS` iterations are timed: their period
    is the steady state's, the one that sixteen iterations give (random layers, comm- or compute-bound)."""
    from sim.core.metrics import PIPELINED_ITERATIONS

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    fwd = rng.uniform(1e-5, 2e-3, n)
    model = sim.Model("random", tuple(f"l{i}" for i in range(n)), rng.integers(0, 20_000_000, n), fwd,
                      fwd * rng.uniform(1, 3, n))
    cluster = sim.Cluster(gpus=gpus, gpus_per_node=4 if gpus > 4 else gpus, network=network)
    kwargs = {"method": who} if who[0].isupper() else {}
    scheduler = "wfbp" if kwargs else who
    short = sim.simulate(model, cluster, scheduler, batch_size=32, **kwargs)
    long = sim.simulate(model, cluster, scheduler, batch_size=32, iterations=16, **kwargs)
    assert PIPELINED_ITERATIONS < 16 and long.timeline.iteration.nunique() == 16  # the long run timed 16
    assert short.iteration_time_s == pytest.approx(long.iteration_time_s, rel=1e-9)
