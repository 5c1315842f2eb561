"""Hand-worked timelines for every scheduler, and the plans' invariants.

Case A (worked by hand in the comments): three layers L0..L2, forward 1 ms
each, backward 1 ms each, 1e6 gradient bytes each (250,000 fp32 params), and
an all-reduce of M bytes taking alpha + beta*M with alpha = 1 ms,
beta = 1e-9 s/B, so one layer's message takes 2 ms.
Backward starts at 3 ms; gradients are ready at L2: 4, L1: 5, L0: 6 ms.
"""

import numpy as np
import pytest
from helpers import make_model, user_cluster

import sim
from sim.dag import gradient_layers
from sim.schedulers import bucket, comm_end_s

MS = 1e-3


@pytest.fixture
def case_a():
    return make_model([250_000] * 3, [1.0] * 3, [1.0] * 3), user_cluster(alpha_s=1 * MS, beta_s_per_byte=1e-9)


def run(model, cluster, scheduler, **kw):
    return sim.simulate(model, cluster, scheduler, batch_size=8, **kw)


class TestCaseA:
    def test_wfbp(self, case_a):
        # L2 4->6, L1 waits for the channel 6->8, L0 8->10
        res = run(*case_a, "wfbp")
        assert res.groups == [["L2"], ["L1"], ["L0"]]
        assert res.iteration_time_s == pytest.approx(10 * MS)
        comm = res.timeline[res.timeline.kind == "comm"]
        assert comm.start_s.tolist() == pytest.approx([4 * MS, 6 * MS, 8 * MS])

    def test_sequential(self, case_a):
        # all three after backward ends at 6: 6->8->10->12
        res = run(*case_a, "sequential")
        assert res.iteration_time_s == pytest.approx(12 * MS)
        assert res.metrics["comm_hidden_s"] == pytest.approx(0.0)

    def test_synceasgd(self, case_a):
        # one 3e6-byte message, 1 + 3 = 4 ms, after backward: 6->10
        res = run(*case_a, "synceasgd")
        assert res.groups == [["L2", "L1", "L0"]]
        assert res.iteration_time_s == pytest.approx(10 * MS)

    def test_mgwfbp(self, case_a):
        # l=2: tau_c=4, r=5 < 6, but 4 > 5 is false and 5-4 = 1 is not < alpha: L2 alone, ends 6.
        # l=1: tau_c = max(6, 5) = 6, r = 6 < 8 and 6-6 = 0 < alpha: merge L1 into L0.
        # [L1,L0]: 2e6 bytes, 3 ms, 6->9.
        res = run(*case_a, "mgwfbp")
        assert res.groups == [["L2"], ["L1", "L0"]]
        assert res.iteration_time_s == pytest.approx(9 * MS)

    def test_optimal(self, case_a):
        # groupings: [2][1][0] 10, [2][1 0] 9, [2 1][0] 10, [2 1 0] 10 -> 9
        res = run(*case_a, "optimal")
        assert res.groups == [["L2"], ["L1", "L0"]]
        assert res.iteration_time_s == pytest.approx(9 * MS)

    def test_bucket(self, case_a):
        # cap 1.5e6 bytes: L2 (1e6) stays open, +L1 = 2e6 >= cap closes [L2, L1]; L0 alone.
        # [L2,L1] ready 5, 3 ms: 5->8; [L0] ready 6, waits: 8->10
        res = run(*case_a, "bucket", bucket_mb=1.5e6 / 2**20)
        assert res.groups == [["L2", "L1"], ["L0"]]
        assert res.iteration_time_s == pytest.approx(10 * MS)

    def test_hidden_and_exposed_communication(self, case_a):
        # wfbp: backward runs 3..6; comm 4..10 overlaps compute on 4..6 -> 2 ms hidden of 6 ms
        m = run(*case_a, "wfbp").metrics
        assert m["comm_s"] == pytest.approx(6 * MS)
        assert m["comm_hidden_s"] == pytest.approx(2 * MS)
        assert m["comm_exposed_s"] == pytest.approx(4 * MS)
        assert m["compute_s"] == pytest.approx(6 * MS)


def test_mgwfbp_falls_short_of_optimal_on_a_hand_worked_case():
    """Case B: bytes [1e6, 1e6, 4e6] (t_c 2, 2, 5 ms); backward L2 1, L1 0.5, L0 1.5 ms.
    Forward 3 ms, so ready L2 4, L1 4.5, L0 6.
    MG-WFBP: 4.5 - 4 = 0.5 < alpha merges L2 into L1: 5e6 bytes (6 ms) 4.5->10.5; then
    6 - 4.5 = 1.5 is not < alpha, so L0 goes alone: 10.5->12.5.
    Optimal: [L2] 4->9, [L1,L0] (3 ms) 9->12.
    """
    model = make_model([250_000, 250_000, 1_000_000], [1.0] * 3, [1.5, 0.5, 1.0])
    cluster = user_cluster(alpha_s=1 * MS, beta_s_per_byte=1e-9)
    mg, opt = run(model, cluster, "mgwfbp"), run(model, cluster, "optimal")
    assert mg.groups == [["L2", "L1"], ["L0"]]
    assert mg.iteration_time_s == pytest.approx(12.5 * MS)
    assert opt.groups == [["L2"], ["L1", "L0"]]
    assert opt.iteration_time_s == pytest.approx(12 * MS)


def test_parameter_free_layers_send_nothing():
    model = make_model([1000, 0, 1000, 0], [1.0] * 4, [1.0] * 4)
    for name in sim.SCHEDULERS:
        res = run(model, user_cluster(), name)
        sent = [layer for g in res.groups for layer in g]
        assert sorted(sent) == ["L0", "L2"], name


def test_one_gpu_has_no_messages():
    res = run(make_model([1000] * 3, [1.0] * 3, [1.0] * 3), sim.Cluster(gpus=1), "mgwfbp")
    assert res.groups == []
    assert (res.timeline.kind != "comm").all()
    assert res.metrics["speedup"] == pytest.approx(1.0)


def test_bucket_rejects_non_positive_size():
    grads = gradient_layers(make_model([10] * 2, [1.0] * 2, [1.0] * 2), "fp32")
    with pytest.raises(sim.SimInputError, match="bucket_mb"):
        bucket(grads, sim.CommCost(0, 0), bucket_mb=0)


def test_unknown_scheduler_lists_valid_ones():
    with pytest.raises(sim.SimInputError, match="valid: sequential, wfbp"):
        run(make_model([10], [1.0], [1.0]), user_cluster(), "fifo")


def test_comm_end_recurrence_by_hand():
    # end = max(prev_end, ready) + t: 1+2=3, max(3,2)+1=4, max(4,10)+1=11
    assert comm_end_s(np.array([1.0, 2.0, 10.0]), np.array([2.0, 1.0, 1.0])).tolist() == [3.0, 4.0, 11.0]
