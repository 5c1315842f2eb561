"""The figures beyond the iteration time, against hand-worked cases and their published formulas.

* memory: ZeRO's model states (Rajbhandari et al., SC 2020, Sec. 3.1 and 5.1) and Korthikanti
  et al. (MLSys 2023, Sec. 4.1) activations, 34 s b h + 5 a s^2 b bytes a layer;
* compression: the bytes and kernels of `sim.compression` worked out by hand;
* pricing: price x GPUs x iteration / 3600 per iteration, x 1000 / (batch x GPUs) per 1,000 samples;
* the expected maximum of P clipped normal compute factors (`sim.workers.stragglers`).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
from helpers import make_model

import sim
from sim.compression import compressed_cost, parse_compression
from sim.core.cost import CommCost
from sim.memory import activation_bytes, memory_per_gpu
from sim.pricing import cost_metrics
from sim.workers.stragglers import StragglerSpec, draw_compute_factors, expected_max_factor

PSI = 6000  # three layers of 1000, 2000 and 3000 parameters


def three_layers():
    return make_model([1000, 2000, 3000], [1, 1, 1], [2, 2, 2])


@pytest.mark.parametrize(("precision", "optimizer", "per_param", "expected"), [
    # mixed-precision Adam: 2 + 2 + K with K = 12, the paper's 16 bytes a parameter
    ("fp16", "adam", (2, 2, 12), {"none": 16 * PSI, "optimizer": 4 * PSI + 12 * PSI // 4,
                                  "gradients": 2 * PSI + 14 * PSI // 4, "parameters": 16 * PSI // 4}),
    # fp32 SGD with momentum: 4 + 4 + 4
    ("fp32", "momentum", (4, 4, 4), {"none": 12 * PSI, "optimizer": 8 * PSI + 4 * PSI // 4,
                                     "gradients": 4 * PSI + 8 * PSI // 4, "parameters": 12 * PSI // 4}),
])
def test_zero_model_states_on_four_gpus(precision, optimizer, per_param, expected):
    for shard, total in expected.items():
        est = memory_per_gpu(three_layers(), batch_size=1, precision=precision, optimizer=optimizer, gpus=4,
                             shard=shard)
        assert est.weights_bytes + est.gradients_bytes + est.optimizer_bytes == total, shard
    none = memory_per_gpu(three_layers(), batch_size=1, precision=precision, optimizer=optimizer)
    assert (none.weights_bytes, none.gradients_bytes, none.optimizer_bytes) == tuple(b * PSI for b in per_param)


def test_transformer_layers_keep_korthikanti_activations():
    """bert_large at s = 128, b = 8, fp16: 24 layers of 34 s b h + 5 a s^2 b bytes (h = 1024, a = 16), plus
    the embeddings' and the pooler's outputs, which the formula leaves out (0.76 % more)."""
    s, b, h, a, layers = 128, 8, 1024, 16, 24
    got = activation_bytes(sim.load_model("bert_large"), b, "fp16")
    per_layers = layers * (34 * s * b * h + 5 * a * s * s * b)
    extra = (3 + 1) * s * h * b * 2 + h * b * 2  # three embedding rows, the embedding layer-norm, the pooler
    assert got == per_layers + extra


def test_compressed_message_times_by_hand():
    """One layer of 1e6 fp32 elements on 8 GPUs, T(M) = 1 ms + 1e-9 s/B x M, 1 TB/s, 10 TFLOP/s."""
    base = CommCost(1e-3, 1e-9)

    def time_of(spec):
        c = compressed_cost(base, parse_compression(spec), [1_000_000], elem_bytes=4, gpus=8,
                            mem_bw_bytes_per_s=1e12, peak_flops=1e13)
        return c.message_time_s((0,), 4e6)

    # fp16: 2e6 bytes all-reduced (3 ms) + 12 B/element of casts (12 us)
    assert time_of("fp16") == pytest.approx(3e-3 + 12e-6, rel=1e-12)
    # top-k 1 %: k = 10,000 (value, index) pairs of 8 B, all-gathered from 8 GPUs: T(640,000 B)/2 = 0.82 ms,
    # + 40 B/element (40 us) + 16 B per received pair (1.28 us)
    assert time_of("topk:0.01") == pytest.approx(0.5 * (1e-3 + 640_000e-9) + 40e-6 + 1.28e-6, rel=1e-12)
    # PowerSGD rank 4 on a 1000 x 1000 matrix: P and Q of 4,000 fp32 each, two all-reduces of 16,000 B,
    # + max(32 B/element = 32 us, 6 r flops/element = 2.4 us)
    assert time_of("powersgd:4") == pytest.approx(2 * (1e-3 + 16_000e-9) + 32e-6, rel=1e-12)


def test_cost_per_samples_by_hand():
    """$3.06 a GPU-hour, 300 W, 8 GPUs, 0.36 s an iteration, 32 samples a GPU."""
    got = cost_metrics(gpu="v100-sxm2", gpus=8, batch_size=32, iteration_time_s=0.36, price_usd_per_hour=3.06,
                       power_w=300.0)
    assert got["cost_usd_per_iteration"] == pytest.approx(3.06 * 8 * 0.36 / 3600, rel=1e-15)
    assert got["cost_usd_per_1000_samples"] == pytest.approx(3.06 * 8 * 0.36 / 3600 * 1000 / 256, rel=1e-15)
    assert got["energy_j_per_1000_samples"] == pytest.approx(300 * 8 * 0.36 * 1000 / 256, rel=1e-15)


def test_one_clipped_normal_factor_has_its_clipped_mean():
    """A normal factor is clipped at 0: with cv = 2 one worker's mean factor is
    E[max(1 + 2Z, 0)] = Phi(1/2) + 2 phi(1/2) = 1.3956, not 1 (the closed form said 1.0)."""
    n = NormalDist()
    exact = n.cdf(0.5) + 2 * n.pdf(0.5)
    assert expected_max_factor(StragglerSpec("normal", cv=2.0), 1) == pytest.approx(exact, rel=1e-9)
    assert expected_max_factor(StragglerSpec("normal", cv=1.0), 1) == pytest.approx(n.cdf(1) + n.pdf(1), rel=1e-9)


@pytest.mark.parametrize("cv", [0.1, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("workers", [1, 2, 8, 64])
def test_expected_max_of_clipped_normals_against_monte_carlo(cv, workers):
    """1e5 seeded draws of the factors the engine uses: within 5 standard errors plus Blom's own
    bias (at most 0.025 sigma, Harter's tables)."""
    spec = StragglerSpec("normal", cv=cv)
    top = draw_compute_factors(spec, np.random.default_rng(workers), 100_000, workers).max(axis=1)
    sem = top.std() / math.sqrt(len(top))
    assert abs(expected_max_factor(spec, workers) - top.mean()) <= 5 * sem + 0.026 * cv
