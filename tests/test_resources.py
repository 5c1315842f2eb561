"""Memory per GPU (`sim.memory`), cost and energy (`sim.pricing`) and how runs report them."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import make_model
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.catalog import DATA_DIR, gpus
from sim.cli import main
from sim.memory import (
    MIB,
    SHARDS,
    activation_bytes,
    comm_buffer_bytes,
    memory_per_gpu,
    model_state_bytes_per_param,
    optimizer_bytes_per_param,
)
from sim.model import BYTES_PER_PARAM
from sim.pricing import cost_metrics, prices
from sim.resources import RESOURCE_KEYS
from sim.schedulers.names import BUCKET, DDP, HOROVOD, MGWFBP, WFBP

TINY = str(Path(__file__).parent / "data" / "tiny.csv")
GB = 1e9


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def one_layer(params: int) -> sim.Model:
    return make_model([params], [1.0], [2.0], name="big")


class TestZeroPaper:
    """Rajbhandari et al., ZeRO, SC 2020, Figure 1: Psi = 7.5B, Nd = 64, K = 12 (mixed-precision Adam):
    120 GB baseline, 31.4 GB (P_os), 16.6 GB (P_os+g), 1.9 GB (P_os+g+p), printed to 0.1 GB."""

    PUBLISHED_GB = {"none": 120.0, "optimizer": 31.4, "gradients": 16.6, "parameters": 1.9}

    @pytest.mark.parametrize("shard", SHARDS)
    def test_figure_1(self, shard):
        est = memory_per_gpu(one_layer(7_500_000_000), batch_size=1, precision="fp16", optimizer="adam", gpus=64,
                             shard=shard)
        assert est.activations_bytes == 0 and est.buffers_bytes == 0  # a layer table without shapes: model states only
        assert round(est.total_bytes / GB, 1) == self.PUBLISHED_GB[shard]

    def test_k_is_12_for_mixed_precision_adam(self):
        assert optimizer_bytes_per_param("adam", "fp16") == 12
        assert model_state_bytes_per_param("adam", "fp16") == 16
        assert optimizer_bytes_per_param("adam", "amp") == 8  # no master copy: the weights are fp32
        assert model_state_bytes_per_param("adam", "amp") == 4 + 2 + 4 + 8

    def test_stage_formulas_exactly(self):
        psi, nd = 7_500_000_000, 64
        parts = {s: memory_per_gpu(one_layer(psi), batch_size=1, precision="fp16", optimizer="adam", gpus=nd, shard=s)
                 for s in SHARDS}
        assert parts["none"].total_bytes == 16 * psi
        assert parts["optimizer"].total_bytes == 4 * psi + math.ceil(12 * psi / nd)
        assert parts["gradients"].total_bytes == 2 * psi + math.ceil(2 * psi / nd) + math.ceil(12 * psi / nd)
        assert parts["parameters"].total_bytes == 2 * math.ceil(2 * psi / nd) + math.ceil(12 * psi / nd)


class TestHandWorked:
    @pytest.mark.parametrize(("optimizer", "precision", "expected"), [
        ("sgd", "fp32", (4000, 4000, 0)),
        ("momentum", "fp32", (4000, 4000, 4000)),
        ("adam", "fp32", (4000, 4000, 8000)),
        ("sgd", "fp16", (2000, 2000, 4000)),  # fp32 master weights only
        ("momentum", "fp16", (2000, 2000, 8000)),
        ("adam", "fp16", (2000, 2000, 12000)),
        ("sgd", "amp", (6000, 4000, 0)),  # autocast: fp32 weights + their fp16 copies, fp32 gradients, no master
        ("adam", "amp", (6000, 4000, 8000)),
    ])
    def test_model_states_of_1000_parameters(self, optimizer, precision, expected):
        est = memory_per_gpu(make_model([600, 400], [1, 1], [1, 1]), batch_size=8, precision=precision,
                             optimizer=optimizer)
        assert (est.weights_bytes, est.gradients_bytes, est.optimizer_bytes) == expected

    def test_zero3_shards_autocasts_weights_but_not_their_fp16_copies(self):
        """Autograd saves each layer's fp16 copy for the backward pass: whole on every GPU under ZeRO-3."""
        model = make_model([600, 400], [1, 1], [1, 1])
        est = memory_per_gpu(model, batch_size=8, precision="amp", optimizer="adam", gpus=4, shard="parameters")
        assert (est.weights_bytes, est.gradients_bytes, est.optimizer_bytes) == (4000 // 4 + 2000, 4000 // 4, 8000 // 4)

    def test_activations_of_a_small_cnn(self):
        # conv_bn (factor 2) with 100 output elements, pool (1) 50, linear (1) 10; batch 2, fp32:
        # (2*100 + 50 + 10) * 2 samples * 4 bytes = 2080
        model = sim.Model(name="cnn", layer_names=("c", "p", "fc"), params=np.array([10, 0, 20]), fwd_s=None,
                          bwd_s=None, layer_types=("conv_bn", "pool", "linear"), fwd_flops=np.ones(3),
                          out_elems=np.array([100.0, 50.0, 10.0]))
        assert activation_bytes(model, 2, "fp32") == 2080
        assert activation_bytes(model, 2, "fp16") == 1040
        assert activation_bytes(model, 2, "amp") == 1040  # autocast's products write fp16 outputs
        assert memory_per_gpu(model, batch_size=2).activations_bytes == 2080

    def test_a_layer_csv_has_no_activation_estimate(self):
        assert activation_bytes(sim.load_model(TINY), 32, "fp32") == 0

    def test_gpt2_transformer_layers_follow_korthikanti(self):
        """Korthikanti et al. 2022, Sec. 4.1: a layer keeps 34 s b h + 5 a s^2 b bytes (16-bit)."""
        s, h, a, b, n, vocab = 1024, 768, 12, 2, 12, 50257
        total = activation_bytes(sim.load_model("gpt2"), b, "fp16")
        per_layer = 34 * s * b * h + 5 * a * s * s * b
        # wte, wpe and ln_f outputs (s h each, factor 1) and the logits (s V), at 2 bytes
        others = (3 * s * h + s * vocab) * b * 2
        assert total == n * per_layer + others

    def test_bert_seq_len_changes_the_score_term(self):
        short = activation_bytes(sim.load_model("bert_base", seq_len=64), 1, "fp16")
        long = activation_bytes(sim.load_model("bert_base", seq_len=128), 1, "fp16")
        # doubling s doubles the s-linear terms and quadruples the 5 a s^2 term: more than twice
        assert long > 2 * short


class TestBuffers:
    def test_ddp_two_buckets(self):
        assert comm_buffer_bytes(DDP, gpus=2, gradient_bytes=10**9, bucket_mb=25) == 50 * MIB
        assert comm_buffer_bytes(BUCKET, gpus=2, gradient_bytes=10**9, bucket_mb=4) == 8 * MIB

    def test_ddp_small_model_needs_no_more_than_its_gradient(self):
        assert comm_buffer_bytes(DDP, gpus=2, gradient_bytes=1000, bucket_mb=25) == 1000

    def test_horovod_fusion_buffer(self):
        assert comm_buffer_bytes(HOROVOD, gpus=8, gradient_bytes=10**9) == 64 * MIB
        assert comm_buffer_bytes(HOROVOD, gpus=8, gradient_bytes=10**9, fusion_threshold_mb=0) == 0

    def test_merged_messages_pack_the_largest(self):
        assert comm_buffer_bytes(MGWFBP, gpus=4, gradient_bytes=10**6, largest_message_bytes=4321) == 4321

    def test_one_gpu_has_no_buffers(self):
        assert comm_buffer_bytes(DDP, gpus=1, gradient_bytes=10**9) == 0

    def test_simulated_ddp_run_reports_its_buckets(self):
        res = sim.simulate(sim.load_model("resnet50"), sim.Cluster(gpus=4), DDP, batch_size=32, bucket_mb=10)
        assert res.metrics["memory_buffers_bytes"] == 20 * MIB

    def test_simulated_mgwfbp_run_reports_its_largest_merged_message(self):
        model = make_model([1000, 2000, 3000], [1, 1, 1], [1, 1, 1])
        res = sim.simulate(model, sim.Cluster(gpus=2, alpha_s=1.0, beta_s_per_byte=1e-9), MGWFBP, batch_size=8)
        assert len(res.groups) == 1  # a huge start-up cost merges everything
        assert res.metrics["memory_buffers_bytes"] == 6000 * 4


@settings(max_examples=60, deadline=None)
@given(params=st.lists(st.integers(0, 10**9), min_size=1, max_size=5), gpus=st.integers(1, 4096),
       optimizer=st.sampled_from(["sgd", "momentum", "adam"]), precision=st.sampled_from(sorted(BYTES_PER_PARAM)))
def test_each_stage_needs_no_more_than_the_one_before(params, gpus, optimizer, precision):
    model = make_model(params, [1.0] * len(params), [1.0] * len(params))
    totals = [memory_per_gpu(model, batch_size=1, precision=precision, optimizer=optimizer, gpus=gpus,
                             shard=s).total_bytes for s in SHARDS]
    assert totals == sorted(totals, reverse=True)
    if gpus == 1:
        assert len(set(totals)) == 1


class TestFits:
    def test_fits_against_the_gpus_memory(self):
        big = one_layer(7_500_000_000)
        res = sim.simulate(big, sim.Cluster(gpus=2, gpu="a100"), WFBP, batch_size=1, precision="fp16",
                           optimizer="adam")
        assert res.metrics["gpu_memory_bytes"] == 80 * GB
        assert res.metrics["memory_per_gpu_bytes"] == 120 * GB and res.metrics["fits_in_memory"] is False
        small = sim.simulate(sim.load_model(TINY), sim.Cluster(gpus=2, gpu="a100"), WFBP, batch_size=1)
        assert small.metrics["fits_in_memory"] is True

    def test_cli_says_whether_it_fits(self, tmp_path):
        path = tmp_path / "big.csv"
        path.write_text("name,params,fwd_ms,bwd_ms\nw,7500000000,1,2\n")
        code, out, _ = run_cli("run", "--model", str(path), "--gpus", "2", "--precision", "fp16",
                               "--optimizer", "adam")
        assert code == 0
        assert "memory per GPU: 120 GB of 32 GB (DOES NOT FIT); activations not estimated" in out
        code, out, _ = run_cli("run", "--model", "resnet50", "--gpus", "2", "--gpu", "a100")
        assert code == 0 and "memory per GPU: 3.18 GB of 80 GB (fits)\n" in out

    def test_sweep_fits_only(self):
        argv = ("sweep", "--model", "gpt2", "--gpus", "1,2", "--batch-size", "16", "--format", "json")
        code, out, _ = run_cli(*argv, "--gpu", "t4", "--optimizer", "adam")
        rows = json.loads(out)
        assert code == 0 and len(rows) == 4 and not any(r["fits_in_memory"] for r in rows)
        code, out, _ = run_cli(*argv, "--gpu", "t4", "--optimizer", "adam", "--fits-only")
        assert code == 0 and json.loads(out) == []
        code, out, _ = run_cli(*argv, "--gpu", "a100", "--optimizer", "adam", "--fits-only")
        assert code == 0 and len(json.loads(out)) == 4

    def test_optimizer_changes_memory_and_the_update(self):
        """Adam's step moves 7 fp32 words per parameter against SGD's 3 (sim.compute.update_time_s):
        4 x 4 bytes more per parameter at the V100-SXM2's 900 GB/s x 0.8."""
        model, cluster = sim.load_model("resnet50"), sim.Cluster(gpus=4)
        sgd = sim.simulate(model, cluster, batch_size=32, optimizer="sgd")
        adam = sim.simulate(model, cluster, batch_size=32, optimizer="adam")
        extra_s = 16 * model.total_params / (900e9 * 0.8)
        assert adam.model.update_s - sgd.model.update_s == pytest.approx(extra_s, rel=1e-9)
        assert adam.iteration_time_s > sgd.iteration_time_s
        assert adam.metrics["memory_optimizer_bytes"] == 8 * model.total_params
        assert sgd.metrics["memory_optimizer_bytes"] == 0


class TestCost:
    def test_hand_worked(self):
        got = cost_metrics(gpu="v100-sxm2", gpus=2, batch_size=10, iteration_time_s=1.0, price_usd_per_hour=3.6,
                           power_w=300)
        assert got["cost_usd_per_iteration"] == pytest.approx(0.002, rel=1e-12)  # 3.6 $/h / 3600 s x 2 GPUs x 1 s
        assert got["cost_usd_per_1000_samples"] == pytest.approx(0.1, rel=1e-12)  # 20 samples per iteration
        assert got["energy_j_per_iteration"] == 600.0
        assert got["energy_j_per_1000_samples"] == pytest.approx(30_000.0, rel=1e-12)

    def test_catalog_price_per_gpu_share(self):
        # AWS p4d.24xlarge: $32.7726/h for 8 x A100
        assert prices()["a100"].price_usd_per_hour == pytest.approx(32.7726 / 8, abs=1e-4)
        res = sim.simulate(sim.load_model("resnet50"), sim.Cluster(gpus=2, gpu="a100"), batch_size=32)
        m = res.metrics
        assert m["cost_usd_per_iteration"] == pytest.approx(4.0966 * 2 * res.iteration_time_s / 3600, rel=1e-12)
        assert m["energy_j_per_iteration"] == pytest.approx(400 * 2 * res.iteration_time_s, rel=1e-12)

    def test_no_price_is_nan_until_given(self):
        got = cost_metrics(gpu="rtx4090", gpus=1, batch_size=1, iteration_time_s=1.0)
        assert math.isnan(got["cost_usd_per_iteration"]) and got["energy_j_per_iteration"] == 450.0
        given_price = cost_metrics(gpu="rtx4090", gpus=1, batch_size=1, iteration_time_s=1.0, price_usd_per_hour=0.36)
        assert given_price["cost_usd_per_iteration"] == pytest.approx(1e-4, rel=1e-12)

    def test_cli_overrides(self):
        base = ("run", "--model", TINY, "--gpus", "2", "--format", "json")
        _, out, _ = run_cli(*base)
        _, twice, _ = run_cli(*base, "--price-usd-per-hour", str(2 * 3.06), "--power-w", "600")
        a, b = json.loads(out), json.loads(twice)
        assert b["cost_usd_per_iteration"] == pytest.approx(2 * a["cost_usd_per_iteration"], rel=1e-12)
        assert b["energy_j_per_iteration"] == pytest.approx(2 * a["energy_j_per_iteration"], rel=1e-12)

    def test_every_gpu_has_a_cited_row(self):
        rows = list(csv.DictReader((DATA_DIR / "prices.csv").open(encoding="utf-8")))
        assert sorted(r["name"] for r in rows) == sorted(gpus())
        for r in rows:
            assert r["price_source"].strip() and r["power_source"].strip()


class TestSweepRows:
    def test_sweep_rows_equal_simulate(self):
        model, cluster = sim.load_model(TINY), sim.Cluster(gpus=1, gpu="a100")
        frame = sim.sweep(model, cluster, gpus=[1, 2, 4], schedulers=[WFBP, DDP], batch_size=16, optimizer="adam",
                          price_usd_per_hour=2.0, power_w=250)
        t1 = frame["single_gpu_iteration_time_s"].iloc[0]
        rows = [sim.simulate(model, cluster.with_gpus(p), s, batch_size=16, optimizer="adam", price_usd_per_hour=2.0,
                             power_w=250, single_gpu_iteration_s=t1).metrics for p in (1, 2, 4) for s in (WFBP, DDP)]
        expected = pd.DataFrame(rows)[list(RESOURCE_KEYS)]
        pd.testing.assert_frame_equal(frame[list(RESOURCE_KEYS)], expected, check_exact=True)

    def test_run_json_has_every_resource_key(self):
        code, out, _ = run_cli("run", "--model", TINY, "--gpus", "2", "--format", "json")
        assert code == 0 and set(RESOURCE_KEYS) <= set(json.loads(out))


def test_shard_of_a_registered_scheduler_plugs_in(monkeypatch):
    """A scheduler whose spec says ``shard`` gets ZeRO's memory without further wiring."""
    import sim.resources as resources

    class ShardedSpec:
        name, shard = WFBP, "parameters"

    monkeypatch.setattr(resources, "get_spec", lambda name: ShardedSpec())
    est = resources.run_memory(one_layer(6400), gpus=64, scheduler=WFBP, groups=[["L0"]], batch_size=1,
                               precision="fp16", optimizer="adam")
    assert est.total_bytes == 16 * 6400 // 64 + 4 * 6400  # the shards and the one layer gathered whole
