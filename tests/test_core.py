"""The one timing core, by hand: the engine's rules, and three-layer timelines of
ByteScheduler, DeAR and the parameter server worked out on paper.

The three-layer model: L0, L1, L2 with 1000, 2000, 3000 parameters (4000,
8000, 12000 bytes in fp32), forward 1 ms and backward 2 ms each, an update
of 3 ms in all (per layer in proportion to its parameters: 0.5, 1.0 and
1.5 ms), no io or h2d. Every message costs T(M) = 1 ms + 1e-7 s/B * M:
T(4000) = 1.4 ms, T(6000) = 1.6 ms, T(8000) = 1.8 ms, T(12000) = 2.2 ms.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from helpers import make_model
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.core import engine
from sim.core.cost import CommCost, PSCost
from sim.core.lower import TaskGraph, WorkerTimes, lower
from sim.core.plan import Plan
from sim.core.run import time_workers
from sim.trace import chrome_trace

MS = 1e-3
WFBP_GROUPS = ((2,), (1,), (0,))


def three_layers():
    return make_model([1000, 2000, 3000], [1, 1, 1], [2, 2, 2], update_ms=3.0)


COST = CommCost(1 * MS, 1e-7)


def times_of(model, plan, cost, iterations=1):
    """``{task name: (start_ms, end_ms)}`` of iteration 0 by the engine."""
    graph = lower(model, plan, cost, iterations=max(iterations, 2))
    start, end = engine.run(graph)
    from sim.core.timeline import graph_timeline

    tl = graph_timeline(graph, start, end, iterations)
    return {row.name: (round(row.start_s / MS, 9), round(row.end_s / MS, 9)) for row in tl.itertuples()}


class TestEngine:
    def _graph(self, tasks, edges=(), lags=None):
        g = TaskGraph()
        for lane, duration, key in tasks:
            g.add(0, 0, lane, "x", duration, key=key)
        for u, v in edges:
            g.edge(u, v, (lags or {}).get((u, v), 0.0))
        g.rank_priorities()
        return g

    def test_ties_go_to_the_smaller_priority(self):
        # a (1 s) runs first; b and c are both released at 1 s on one lane: c has the smaller key
        g = self._graph([("L", 1.0, (0,)), ("L", 1.0, (5,)), ("L", 1.0, (2,))], edges=[(0, 1), (0, 2)])
        start, end = engine.run(g)
        assert start.tolist() == [0.0, 2.0, 1.0]

    def test_a_lag_holds_a_task_back_without_occupying_its_lane(self):
        # b waits 0.5 s after a ends; c (no lag) takes the lane meanwhile
        g = self._graph([("L", 1.0, (0,)), ("M", 1.0, (0,)), ("M", 0.25, (1,))], edges=[(0, 1), (0, 2)],
                        lags={(0, 1): 0.5})
        start, end = engine.run(g)
        assert start.tolist() == [0.0, 1.5, 1.0]
        assert end.tolist() == [1.0, 2.5, 1.25]

    def test_a_lagged_task_waits_for_a_busy_lane(self):
        g = self._graph([("L", 1.0, (0,)), ("M", 1.0, (1,)), ("M", 2.0, (0,))], edges=[(0, 1), (0, 2)],
                        lags={(0, 1): 0.5})
        start, _ = engine.run(g)
        assert start.tolist() == [0.0, 3.0, 1.0]  # c started at 1 s and holds M until 3 s

    def test_ends_are_processed_before_dispatch_at_one_instant(self):
        # b ends at 1 s, releasing d; c is released by a at 1 s too; d's key is smaller, so it goes first
        g = self._graph([("A", 1.0, (0,)), ("B", 1.0, (0,)), ("C", 1.0, (9,)), ("C", 1.0, (1,))],
                        edges=[(0, 2), (1, 3)])
        start, _ = engine.run(g)
        assert start.tolist() == [0.0, 0.0, 2.0, 1.0]

    def test_a_cycle_is_refused(self):
        g = self._graph([("L", 1.0, (0,)), ("L", 1.0, (1,))], edges=[(0, 1), (1, 0)])
        with pytest.raises(engine.CycleError, match="cycle"):
            engine.run(g)


class TestHandWorked:
    def test_dear(self):
        """Reduce-scatters in WFBP order after backward; per-layer updates wait for
        backward to leave the GPU; all-gathers from the input side."""
        t = times_of(three_layers(), Plan("dear", WFBP_GROUPS, per_layer_update=True, decoupled=True), COST)
        assert t["it0/backward/L0"] == (7.0, 9.0)
        assert t["it0/comm/reduce-scatter:L2"] == (5.0, 6.1)
        assert t["it0/comm/reduce-scatter:L1"] == (7.0, 7.9)
        assert t["it0/comm/reduce-scatter:L0"] == (9.0, 9.7)
        assert t["it0/update/L2"] == (9.0, 10.5)  # released at 6.1; the GPU runs backward until 9
        assert t["it0/update/L1"] == (10.5, 11.5)
        assert t["it0/update/L0"] == (11.5, 12.0)
        assert t["it0/comm/all-gather:L2"] == (10.5, 11.6)
        assert t["it0/comm/all-gather:L1"] == (11.6, 12.5)
        assert t["it0/comm/all-gather:L0"] == (12.5, 13.2)

    def test_bytescheduler(self):
        """Partitions of 6000 bytes, the layer nearest the input first, no preemption."""
        plan = Plan("bytescheduler", WFBP_GROUPS, partition_bytes=6000, priority="input_first", credit=4,
                    per_layer_update=True)
        t = times_of(three_layers(), plan, COST, iterations=2)
        assert t["it0/comm/L2#0"] == (5.0, 6.6)
        assert t["it0/comm/L2#1"] == (6.6, 8.2)
        assert t["it0/comm/L1#0"] == (8.2, 9.8)  # L0 is not ready until 9
        assert t["it0/comm/L0"] == (9.8, 11.2)  # ahead of L1#1, released at 7
        assert t["it0/comm/L1#1"] == (11.2, 12.4)  # 2000 bytes: 1.2 ms
        assert t["it0/update/L2"] == (9.0, 10.5)
        assert t["it0/update/L0"] == (11.2, 11.7)
        assert t["it1/forward/L0"] == (11.7, 12.7)  # the next forward of L0 waits only for L0's update
        assert t["it0/update/L1"] == (12.7, 13.7)
        assert t["it1/forward/L1"] == (13.7, 14.7)

    def test_bytescheduler_launches_ahead_of_the_transfers(self):
        """The same partitions with a cost whose 1 ms start-up is 0.5 ms of launch on the host: with
        credit 2 each launch runs on the launch lane and only the transfer (T(M) - 0.5 ms) on the channel,
        so a partition's launch hides behind the transfer before it; with credit 1 the launch stays inside
        the all-reduce on the channel, and the run is the one above to the bit."""
        launch = CommCost(0.5 * MS, 1e-7).with_launch(0.5 * MS)
        assert launch.time_s(6000) == COST.time_s(6000) and launch.launch_s == 0.5 * MS
        plan = Plan("bytescheduler", WFBP_GROUPS, partition_bytes=6000, priority="input_first", credit=2,
                    per_layer_update=True)
        t = times_of(three_layers(), plan, launch, iterations=2)
        assert t["it0/comm/launch:L2#0"] == (5.0, 5.5)
        assert t["it0/comm/launch:L2#1"] == (5.5, 6.0)
        assert t["it0/comm/L2#0"] == (5.5, 6.6)  # 1.6 ms less the 0.5 ms launch
        assert t["it0/comm/L2#1"] == (6.6, 7.7)  # launched at 6.0, behind L2#0's transfer
        assert t["it0/comm/launch:L1#0"] == (7.0, 7.5)
        assert t["it0/comm/launch:L1#1"] == (7.5, 8.0)
        assert t["it0/comm/L1#0"] == (7.7, 8.8)
        assert t["it0/comm/L1#1"] == (8.8, 9.5)  # L0 is not launched until 9.5: L1#1 goes first
        assert t["it0/comm/launch:L0"] == (9.0, 9.5)
        assert t["it0/comm/L0"] == (9.5, 10.4)
        assert t["it0/update/L2"] == (9.0, 10.5)
        assert t["it0/update/L1"] == (10.5, 11.5)
        assert t["it0/update/L0"] == (11.5, 12.0)
        one = times_of(three_layers(), dataclasses.replace(plan, credit=1), launch, iterations=2)
        assert one == times_of(three_layers(), dataclasses.replace(plan, credit=1), COST, iterations=2)
        assert one["it0/comm/L0"] == (9.8, 11.2)  # (test_bytescheduler's run)

    def test_parameter_server_push_and_pull_lanes(self):
        """Push on the uplink, pull on the downlink: a push overlaps an earlier pull."""
        cost = PSCost(1 * MS, 1e-7, 1 * MS, 1e-7, shared_lane=False)
        model = three_layers()
        t = times_of(model, Plan("wfbp", WFBP_GROUPS), cost)
        assert t["it0/comm/push:L2"] == (5.0, 7.2)
        assert t["it0/comm/pull:L2"] == (7.2, 9.4)
        assert t["it0/comm/push:L1"] == (7.2, 9.0)
        assert t["it0/comm/pull:L1"] == (9.4, 11.2)
        assert t["it0/comm/push:L0"] == (9.0, 10.4)
        assert t["it0/comm/pull:L0"] == (11.2, 12.6)
        assert t["it0/update/0"] == (12.6, 15.6)
        res = sim.simulate(model, sim.Cluster(gpus=2, gpus_per_node=1), "wfbp", batch_size=1)  # a real run still works
        assert res.iteration_time_s > 0


class TestPerWorker:
    @pytest.mark.parametrize("plan", [
        Plan("wfbp", WFBP_GROUPS),
        Plan("seq", WFBP_GROUPS, after_backward=True),
        Plan("lagged", WFBP_GROUPS, lag_s=(0.5 * MS, 0.0, 2 * MS)),
    ])
    def test_fast_path_equals_the_engine_to_the_bit(self, plan):
        """Per-worker compute factors and jitter: the fast path's task times are the engine's."""
        model = three_layers()
        rng = np.random.default_rng(0)
        times = WorkerTimes((model,), np.zeros(3, dtype=int), rng.uniform(0.5, 2.0, (4, 3)),
                            np.array([1.0, 1.5, 1.0]), rng.uniform(0.8, 1.2, (4, 3)))
        fast = time_workers(model, plan, COST, times, iterations=4)
        general = time_workers(model, plan, COST, times, iterations=4, engine="general")
        for a, b in zip(fast[:3], general[:3], strict=True):
            assert np.array_equal(a, b)
        ft, gt = fast[3](), general[3]()
        key = ["iteration", "worker", "kind", "name"]
        ft, gt = ft.sort_values(key).reset_index(drop=True), gt.sort_values(key).reset_index(drop=True)
        assert np.array_equal(ft.start_s.to_numpy(), gt.start_s.to_numpy())
        assert np.array_equal(ft.end_s.to_numpy(), gt.end_s.to_numpy())


def test_chrome_trace_of_a_parameter_server_run_has_push_and_pull_tracks():
    res = sim.simulate(three_layers(), sim.Cluster(gpus=8, gpus_per_node=4), method="BSP-PS", batch_size=1)
    trace = json.loads(json.dumps(chrome_trace(res.timeline, metrics=res.metrics), allow_nan=False))
    threads = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {"push", "pull", "compute"} <= threads
    assert set(trace["otherData"]) >= set(sim.METRIC_KEYS)
    assert trace["otherData"]["iteration_time_s"] == res.metrics["iteration_time_s"]


def test_the_old_networkx_path_gives_the_same_timeline():
    """`sim.dag.build_dag` + `sim.engine.run_dag` + `sim.timeline.timeline_frame` (the
    names kept for existing scripts) reproduce `simulate`'s timeline exactly (with each
    tensor's ``layer`` named by its layer, as `simulate` adds for the layer view)."""
    import pandas as pd

    from sim.dag import build_dag
    from sim.engine import run_dag
    from sim.tensors import with_parent_layers
    from sim.timeline import timeline_frame

    cluster = sim.Cluster(gpus=8, interference=False)  # the old path has no interference fixed point
    for scheduler in ("mgwfbp", "bytescheduler"):
        res = sim.simulate(sim.load_model("resnet50"), cluster, scheduler, batch_size=8, iterations=8)
        g = build_dag(res.model, res.plan, cluster.framework_cost(cluster.comm_cost(), scheduler), iterations=8)
        old = with_parent_layers(timeline_frame(g, run_dag(g)), res.model.layer_names, res.model.tensor_layers)
        pd.testing.assert_frame_equal(old, res.timeline, check_exact=True)


def _merged_overlap_s(a_start, a_end, b_start, b_end) -> float:
    """The reference: the unions of intervals of positive length, walked as a merge, each piece
    added in the order the merge meets it."""
    def joined(start, end):
        pairs = sorted((s, e) for s, e in zip(start, end, strict=True) if e > s)
        out: list = []
        for s, e in pairs:
            if out and s <= out[-1][1]:
                out[-1][1] = max(out[-1][1], e)
            else:
                out.append([s, e])
        return out

    a, b = joined(a_start, a_end), joined(b_start, b_end)
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def test_interval_overlap_hand_worked():
    from sim.core.intervals import overlap_s

    # a: [0, 4) and [6, 9); b: [1, 2), [3, 7) (joined with [5, 6)), and [8, 8) of no length
    assert overlap_s([0, 6], [4, 9], [1, 3, 5, 8], [2, 7, 6, 8]) == 1 + 1 + 1
    assert overlap_s([], [], [0], [1]) == 0.0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 50), st.floats(0, 5)), max_size=12),
       st.lists(st.tuples(st.floats(0, 50), st.floats(0, 5)), max_size=12))
def test_interval_overlap_is_the_merges_to_the_bit(a, b):
    """`sim.core.intervals.overlap_s` (array operations) adds the same pieces in the same order as a
    merge of the two unions."""
    from sim.core.intervals import overlap_s

    a_start, a_end = [s for s, _ in a], [s + d for s, d in a]
    b_start, b_end = [s for s, _ in b], [s + d for s, d in b]
    assert overlap_s(a_start, a_end, b_start, b_end) == _merged_overlap_s(a_start, a_end, b_start, b_end)


@pytest.mark.parametrize("cost", [COST, PSCost(1 * MS, 1e-7, 1 * MS, 1e-7)])
def test_rows_of_a_column_not_joined_are_the_joined_columns_rows(cost):
    """`TaskGraph.rows_of` reads some rows of a column the timeline joins lazily from its chunks: the
    rows of the joined column, in its dtype."""
    plan = Plan("bytescheduler", WFBP_GROUPS, partition_bytes=6000, priority="input_first", credit=4,
                per_layer_update=True)
    lazy, joined = (lower(three_layers(), plan, cost, iterations=3) for _ in range(2))
    rng = np.random.default_rng(0)
    for rows in (np.arange(len(lazy)), np.flatnonzero(rng.random(len(lazy)) < 0.3), np.zeros(0, np.int64),
                 np.array([len(lazy) - 1])):
        for name in ("message", "part", "tag", "nbytes"):
            got, want = lazy.rows_of(name, rows), getattr(joined, name)[rows]
            assert got.dtype == want.dtype and np.array_equal(got, want)
    assert np.array_equal(lazy.rows_of("message", np.array([3, 1])), joined.message[[3, 1]])  # any order


def test_ranks_of_keys_given_as_int64_are_those_of_the_columns_that_hold_them():
    """A key chunk of int64 values that fit its int32 column is ranked uncopied, one that does not fit
    as its column holds it (cast): the ranks of a stable sort of the held columns either way."""
    rng = np.random.default_rng(1)
    for high in (50, 2**33):
        g = TaskGraph()
        keys = [rng.integers(0, 4, 40), rng.integers(-high, high, 40, dtype=np.int64), rng.integers(0, 3, 40)]
        g.add_block(40, 0, 0, "L", "x", 1.0, key=keys)
        g.add_block(5, 0, 0, "L", "x", 1.0, key=(7, 2**40, 1))
        g.finish()
        held = [np.concatenate([keys[0], [7] * 5]), np.concatenate([keys[1], [2**40] * 5]).astype(np.int32),
                np.concatenate([keys[2], [1] * 5])]
        order = np.lexsort((np.arange(45), held[2], held[1], held[0]))
        assert g.rank[order].tolist() == list(range(45))
