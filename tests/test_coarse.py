"""The coarse-grained predictor against the fine-grained DAG simulation."""

import dataclasses

import pandas as pd
import pytest
from helpers import make_model, user_cluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim
from sim.coarse import COARSE_PHASES, coarse_iteration, compare_coarse_fine, fit_overlap

MS = 1e-3
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
REL = 1e-12


@st.composite
def models(draw, first_has_params=False):
    n = draw(st.integers(1, 8))
    params = draw(st.lists(st.integers(0, 3_000_000), min_size=n, max_size=n))
    if first_has_params:
        params[0] = max(params[0], 1)
    fwd = draw(st.lists(st.floats(0.01, 5.0), min_size=n, max_size=n))
    bwd = draw(st.lists(st.floats(0.01, 10.0), min_size=n, max_size=n))
    extra = {k: draw(st.sampled_from([0.0, 0.5, 2.0])) for k in ("io_ms", "h2d_ms", "update_ms")}
    return make_model(params, fwd, bwd, **extra)


clusters = st.builds(user_cluster, gpus=st.sampled_from([1, 2, 4, 16]), alpha_s=st.floats(0.0, 5e-3),
                     beta_s_per_byte=st.floats(1e-11, 5e-9))


def fine(model, cluster, scheduler, prefetch=False):
    return sim.simulate(model, cluster, scheduler, batch_size=4, prefetch=prefetch).iteration_time_s


def coarse(model, cluster, overlap=0.0):
    return coarse_iteration(model, cluster, batch_size=4, overlap=overlap)["iteration_time_s"]


class TestHandWorked:
    MODEL = make_model([1000, 1000], [1, 1], [2, 2], io_ms=0.5, h2d_ms=0.25, update_ms=1)

    def test_phases_in_sequence(self):
        # io 0.5 + h2d 0.25 + fwd 2 + bwd 4 + (1 ms + 8000 B * 1e-9 s/B) + update 1 = 8.758 ms
        out = coarse_iteration(self.MODEL, user_cluster(gpus=4), batch_size=8)
        assert out["iteration_time_s"] == pytest.approx(8.758 * MS, rel=REL)
        assert out["comm_s"] == pytest.approx(1.008 * MS, rel=REL)
        assert set(COARSE_PHASES) <= set(out)

    def test_overlap_heuristic(self):
        # rho = 0.5 hides up to 2 ms of the 1.008 ms all-reduce: 7.75 ms; rho = 0.2 hides 0.8 ms
        assert coarse(self.MODEL, user_cluster(), 0.5) == pytest.approx(7.75 * MS, rel=REL)
        assert coarse(self.MODEL, user_cluster(), 0.2) == pytest.approx(7.958 * MS, rel=REL)

    def test_one_gpu_has_no_communication(self):
        assert coarse(self.MODEL, sim.Cluster(gpus=1)) == pytest.approx(7.75 * MS, rel=REL)

    def test_wfbp_can_be_slower_than_coarse_when_alpha_is_large(self):
        """Ten small layers, alpha = 5 ms: ten start-ups cost more than the overlap saves,
        so 'coarse >= fine' needs alpha = 0 for wfbp."""
        model = make_model([100] * 10, [0.1] * 10, [0.2] * 10)
        cluster = user_cluster(gpus=4, alpha_s=5e-3)
        assert fine(model, cluster, "wfbp") > coarse(model, cluster)


class TestAgainstTheFineModel:
    @SETTINGS
    @given(models(first_has_params=True), clusters)
    def test_equals_synceasgd_when_the_first_layer_has_parameters(self, model, cluster):
        assert coarse(model, cluster) == pytest.approx(fine(model, cluster, "synceasgd"), rel=1e-9)

    @SETTINGS
    @given(models(), clusters, st.sampled_from(["synceasgd", "optimal"]), st.booleans())
    def test_never_below_one_message_or_optimal(self, model, cluster, scheduler, prefetch):
        assert coarse(model, cluster) >= fine(model, cluster, scheduler, prefetch) * (1 - 1e-9)

    @SETTINGS
    @given(models(), st.sampled_from([2, 4, 16]), st.floats(1e-11, 5e-9), st.booleans())
    def test_never_below_wfbp_without_startup_cost(self, model, gpus, beta, prefetch):
        """alpha = 0: wfbp's messages add up to one message's time and overlap the backward."""
        cluster = user_cluster(gpus=gpus, alpha_s=0.0, beta_s_per_byte=beta)
        assert coarse(model, cluster) >= fine(model, cluster, "wfbp", prefetch) * (1 - 1e-9)

    @SETTINGS
    @given(models(), clusters, st.floats(0.0, 1.0))
    def test_the_heuristic_only_removes_time(self, model, cluster, rho):
        assert coarse(model, cluster, rho) <= coarse(model, cluster) * (1 + 1e-12)


def test_compare_frame_and_fit():
    # per layer (54 gradients) and framework "none": with a framework's cost per message, WFBP's many
    # messages can take longer than the coarse model's one, so the bound is the pure alpha-beta model's
    model = dataclasses.replace(sim.load_model("resnet50"), gradients="layer")
    df = compare_coarse_fine(model, sim.Cluster(network="10gbe", framework="none"), gpus=[1, 4, 16],
                             schedulers=["wfbp", "synceasgd"], batch_size=32, overlap=0.5)
    assert list(df[["gpus", "scheduler"]].itertuples(index=False, name=None)) == [
        (1, "wfbp"), (1, "synceasgd"), (4, "wfbp"), (4, "synceasgd"), (16, "wfbp"), (16, "synceasgd")
    ]
    assert (df.coarse_s >= df.fine_s * (1 - 1e-9)).all()  # both schedulers satisfy it on this model
    one = df.loc[df.scheduler == "synceasgd"]
    assert one.coarse_rel_error.abs().max() < 1e-9
    # per tensor (161 gradients) WFBP pays 161 start-ups on 10GbE and is slower than the coarse bound at 16
    # GPUs; the single message of synceasgd is the coarse model whatever the granularity
    tensors = compare_coarse_fine(dataclasses.replace(model, gradients="tensor"), sim.Cluster(network="10gbe"),
                                  gpus=[16], schedulers=["wfbp", "synceasgd"], batch_size=32, overlap=0.5)
    assert tensors.fine_s.iloc[0] > tensors.coarse_s.iloc[0]
    assert tensors.coarse_rel_error.abs().iloc[1] < 1e-9


def test_fit_overlap_recovers_a_known_rho():
    # fine = base + max(comm - 0.3 * bwd, 0) exactly; the fit must find 0.3 on its 0.001 grid
    frame = pd.DataFrame({"io_s": 0.0, "h2d_s": 0.0, "forward_s": 1.0, "backward_s": [2.0, 4.0, 6.0],
                          "update_s": 0.1, "comm_s": [3.0, 2.0, 5.0]})
    frame["fine_s"] = 1.0 + frame.backward_s + 0.1 + (frame.comm_s - 0.3 * frame.backward_s).clip(lower=0)
    assert fit_overlap(frame) == pytest.approx(0.3, abs=1e-12)


def test_bad_input():
    with pytest.raises(sim.SimInputError, match="overlap"):
        coarse_iteration(make_model([1], [1], [1]), sim.Cluster(), batch_size=1, overlap=1.5)
    with pytest.raises(sim.SimInputError, match="at least one"):
        compare_coarse_fine(make_model([1], [1], [1]), sim.Cluster(), gpus=[], schedulers=["wfbp"], batch_size=1)
    with pytest.raises(sim.SimInputError, match="batch_size"):
        coarse_iteration(make_model([1], [1], [1]), sim.Cluster(), batch_size=0)
