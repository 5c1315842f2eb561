"""Trace-driven simulation: measured per-layer all-reduce times (the comm_ms column)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.comm import measured_cost
from sim.importers import bcaffe_layers

REF = Path(__file__).resolve().parent.parent / "data" / "reference" / "bcaffe_k80_10gbe"  # see its README


def authors_wfbp_recurrence(computes, comms):
    """The WFBP recurrence of the MG-WFBP authors' simulation script (shyhuai/B-Caffe,
    scripts/gmwfbp.py, Simulator.wfbp), written out: items in the order backward
    produces them; a message starts at max(end of the previous message, end of its
    layer's backward); the result is the end of the last message, from backward start."""
    start_time, comm_start, comm = 0.0, 0.0, 0.0
    for comp, c in zip(computes, comms, strict=True):
        comm_start = comm_start + comm if comm_start + comm > start_time + comp else start_time + comp
        comm = c
        start_time += comp
    return comm_start + comm


@pytest.mark.parametrize("log", ["tmp8comm.log", "tmp8ocomm.log", "tmp4ocomm.log"])
def test_trace_driven_wfbp_reproduces_the_authors_recurrence(log):
    layers = bcaffe_layers((REF / log).read_text(), log)
    model = sim.model_from_frame(layers, "googlenet-trace")
    res = sim.simulate(model, sim.Cluster(gpus=8), "wfbp", batch_size=64)
    backward_order = layers.iloc[::-1]  # backward runs from the output layer (last row) to conv1 (blob 0)
    expect_s = 1e-3 * authors_wfbp_recurrence(backward_order.bwd_ms.tolist(), backward_order.comm_ms.tolist())
    assert res.iteration_time_s - model.fwd_s.sum() == pytest.approx(expect_s, rel=1e-12)
    # every message is one layer and takes its measured time
    comm = res.timeline[res.timeline.kind == "comm"]
    assert comm.duration_s.tolist() == pytest.approx((backward_order.comm_ms * 1e-3).tolist(), rel=1e-12)


def test_measured_cost_fits_merged_messages_and_keeps_single_ones():
    # measured: exactly 1 ms + 1e-9 s/B except layer 1, which took 5 ms
    nbytes = np.array([1e6, 2e6, 3e6, 4e6])
    comm = 1e-3 + 1e-9 * nbytes
    comm[1] = 5e-3
    cost = measured_cost(comm, nbytes)
    assert cost.message_time_s((1,), 2e6) == 5e-3
    assert cost.message_time_s((0, 1), 3e6) == pytest.approx(cost.alpha_s + cost.beta_s_per_byte * 3e6)
    exact = measured_cost(1e-3 + 1e-9 * nbytes, nbytes)
    assert exact.alpha_s == pytest.approx(1e-3) and exact.beta_s_per_byte == pytest.approx(1e-9)


def test_trace_mode_ignores_the_cluster_links_but_not_p_equals_one():
    frame = pd.DataFrame({"name": ["a", "b"], "params": [1000, 2000], "fwd_ms": [1, 1], "bwd_ms": [2, 2],
                          "comm_ms": [3.0, 4.0]})
    model = sim.model_from_frame(frame, "t")
    slow = sim.simulate(model, sim.Cluster(gpus=4, network="10gbe"), "wfbp", batch_size=1)
    fast = sim.simulate(model, sim.Cluster(gpus=4, network="ib-ndr-400"), "wfbp", batch_size=1)
    assert slow.iteration_time_s == fast.iteration_time_s
    # b ready at 4 ms, 4 ms message -> 8; a ready at 6, waits -> 8 + 3 = 11 ms
    assert slow.iteration_time_s == pytest.approx(11e-3)
    assert sim.simulate(model, sim.Cluster(gpus=1), "wfbp", batch_size=1).iteration_time_s == pytest.approx(6e-3)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 2_000_000), st.floats(0.05, 5), st.floats(0.01, 10)), min_size=1, max_size=8))
def test_optimal_is_no_slower_than_other_schedulers_in_trace_mode(rows):
    frame = pd.DataFrame({"name": [f"L{i}" for i in range(len(rows))], "params": [r[0] for r in rows],
                          "fwd_ms": [r[1] for r in rows], "bwd_ms": [r[1] for r in rows],
                          "comm_ms": [r[2] for r in rows]})
    model = sim.model_from_frame(frame, "t")
    # optimal is the best grouping of the schedule as planned; with interference (compute slowed
    # where communication overlaps it) a grouping that overlaps less can come out ahead
    cluster = sim.Cluster(gpus=8, interference=False)
    best = sim.simulate(model, cluster, "optimal", batch_size=1).iteration_time_s
    for name in sorted(set(sim.SCHEDULERS) - {"bytescheduler", "dear", "zero3"}):  # these overlap the next forward
        assert best <= sim.simulate(model, cluster, name, batch_size=1).iteration_time_s * (1 + 1e-12)
