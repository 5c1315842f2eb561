"""ZeRO-3 / FSDP working memory and gradient compression state (`sim.memory`, `sim.resources`).

* ZeRO-3: a unit (layer) gathered whole with the next one prefetched, its whole gradient in the backward
  (PyTorch FSDP docs, BackwardPrefetch.BACKWARD_PRE: "the current set of parameters, next set of parameters,
  and current set of gradients"), against DeepSpeed's ``estimate_zero3_model_states_mem_needs`` without the
  prefetch (DeepSpeed docs, "Memory Requirements": per GPU, mixed-precision Adam, no offload,
  ``4 x largest_layer_params + int(18 x total_params / num_gpus)``);
* compression: top-k's residual and all-gather receive buffer (Lin et al., DGC, ICLR 2018, Sec. 3.1),
  PowerSGD's error buffer, P, Q factors (Vogels et al., NeurIPS 2019, Alg. 2) and the hook's copy of the
  message it compresses, the 16-bit casts.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from helpers import make_model
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.memory import (
    OPTIMIZERS,
    SHARDS,
    WIDTH_BYTES,
    compression_state_bytes,
    gathered_unit_bytes,
    largest_layer_params,
    memory_per_gpu,
)
from sim.resources import resource_metrics, run_memory
from sim.schedulers.names import DDP, ZERO3

PRECISIONS = tuple(WIDTH_BYTES)


def three_layers():
    """Layers of 1000, 2000 and 3000 parameters: Psi = 6000, the largest layer 3000. Peak of ZeRO-3's units:
    forward max(1000 + 2000, 2000 + 3000) = 5000; backward (weights + gradient + the next unit, the one
    before it) max(2 x 2000 + 1000, 2 x 3000 + 2000) = 8000 parameters."""
    return make_model([1000, 2000, 3000], [1, 1, 1], [2, 2, 2])


def model_states(est) -> int:
    return est.weights_bytes + est.gradients_bytes + est.optimizer_bytes


def zero3_memory(model, *, shard="parameters", **kw):
    """A ZeRO-3 run's memory as `sim.resources.run_memory` counts it: `memory_per_gpu` (the model states of the
    ZeRO paper's formulas) with the schedule's gathered units added to the buffers."""
    gathered = gathered_unit_bytes(model, kw.get("precision", "fp32"), gpus=kw.get("gpus", 1), shard=shard)
    return memory_per_gpu(model, shard=shard, gathered_bytes=gathered, **kw)


def deepspeed_zero3_gpu_bytes(total_params: int, largest_layer_params: int, num_gpus: int) -> int:
    """``estimate_zero3_model_states_mem_needs`` (deepspeed/runtime/zero/stage3.py), cpu_offload=False:
    ``largest_layer_memory + int(18 * total_params / total_gpus)``, ``largest_layer_memory = 4 * largest``."""
    return 4 * largest_layer_params + int(18 * total_params / num_gpus)


# --- ZeRO-3 / FSDP working memory -----------------------------------------------------------------------------

class TestZero3ByHand:
    def test_mixed_precision_adam_on_four_gpus(self):
        # shards: fp16 weights 2 x 6000 / 4 = 3000, fp16 gradients 3000, K = 12: 12 x 6000 / 4 = 18000;
        # gathered: in L2's backward its fp16 weights and gradient and L1's prefetched weights, 8000 x 2 = 16000
        est = zero3_memory(three_layers(), batch_size=1, precision="fp16", optimizer="adam", gpus=4,
                             shard="parameters")
        assert (est.weights_bytes, est.gradients_bytes, est.optimizer_bytes) == (3000, 3000, 18000)
        assert est.buffers_bytes == 16000
        assert est.total_bytes == 40000

    def test_fp32_momentum_on_four_gpus(self):
        # shards 4 x 6000 / 4 = 6000 each of weights, gradients and the momentum buffer;
        # gathered 8000 x 4 = 32000
        est = zero3_memory(three_layers(), batch_size=1, precision="fp32", optimizer="momentum", gpus=4,
                             shard="parameters")
        assert (model_states(est), est.buffers_bytes) == (18000, 32000)

    def test_amp_gathers_fp32_weights_and_gradients(self):
        # autocast: fp32 weights (6000 x 4 / 4 = 6000) + their fp16 copies whole (12000), fp32 gradients 6000,
        # Adam 8 x 6000 / 4 = 12000; gathered 8000 x 4 = 32000
        est = zero3_memory(three_layers(), batch_size=1, precision="amp", optimizer="adam", gpus=4,
                             shard="parameters")
        assert (est.weights_bytes, est.gradients_bytes, est.optimizer_bytes, est.buffers_bytes) == (
            18000, 6000, 12000, 32000)

    def test_one_layer_on_two_gpus_needs_more_than_stage_0(self):
        # one layer of 1000, fp32 SGD, 2 GPUs: shards 2000 + 2000 + 0 and the layer gathered whole, its weights
        # and gradient 1000 x (4 + 4) = 8000: 12000, over stage 0's 8000, as FSDP holds it (no cap)
        model = make_model([1000], [1], [2])
        est = zero3_memory(model, batch_size=1, precision="fp32", optimizer="sgd", gpus=2, shard="parameters")
        full = memory_per_gpu(model, batch_size=1, precision="fp32", optimizer="sgd", gpus=2)
        assert gathered_unit_bytes(model, "fp32", gpus=2, shard="parameters") == 8000
        assert (model_states(est), est.buffers_bytes) == (4000, 8000)
        assert est.total_bytes > full.total_bytes == 8000

    @pytest.mark.parametrize("shard", ["none", "optimizer", "gradients"])
    def test_only_stage_3_gathers(self, shard):
        est = memory_per_gpu(three_layers(), batch_size=1, precision="fp16", optimizer="adam", gpus=4, shard=shard)
        assert est.buffers_bytes == 0
        assert gathered_unit_bytes(three_layers(), "fp16", gpus=4, shard=shard) == 0

    def test_one_gpu_gathers_nothing(self):
        est = zero3_memory(three_layers(), batch_size=1, precision="fp16", optimizer="adam", gpus=1,
                             shard="parameters")
        assert (model_states(est), est.buffers_bytes) == (16 * 6000, 0)

    def test_a_unit_is_a_layer_not_a_tensor(self):
        """vgg16's fc6 is 25088 x 4096 weights + 4096 biases: one unit of 102,764,544 parameters, in the
        layer table and in its tensor view alike (DeepSpeed's estimator counts a module's own parameters)."""
        model = sim.load_model("vgg16")
        view = model.timed(gpu="v100-sxm2", batch_size=8).tensor_view()
        assert view.tensor_layers is not None and max(view.params) == 25088 * 4096
        assert largest_layer_params(model) == largest_layer_params(view) == 25088 * 4096 + 4096


class TestDeepSpeedEstimator:
    def test_three_layers_on_four_gpus(self):
        # DeepSpeed: 4 x 3000 + 18 x 6000 / 4 = 12000 + 27000 = 39000. Ours: 12000 + the prefetched L1's fp16
        # weights 2 x 2000 = 4000, + 16 x 6000 / 4 = 24000: 40000; the 2 x 6000 / 4 = 3000 less in the shards is
        # DeepSpeed's fp32 gradient shard (4 bytes) for ZeRO's fp16 one (2)
        est = zero3_memory(three_layers(), batch_size=1, precision="fp16", optimizer="adam", gpus=4,
                             shard="parameters")
        assert est.buffers_bytes == 4 * 3000 + 2 * 2000  # largest_layer_memory and the unit prefetched
        assert model_states(est) + est.buffers_bytes == (deepspeed_zero3_gpu_bytes(6000, 3000, 4) - 2 * 6000 // 4
                                                         + 2 * 2000)

    def test_vgg16_on_eight_gpus(self):
        model = sim.load_model("vgg16")
        psi, largest = model.total_params, largest_layer_params(model)
        est = zero3_memory(model, batch_size=1, precision="fp16", optimizer="adam", gpus=8, shard="parameters")
        # fc6's fp16 weights and gradient (4 x 102,764,544 = 411,058,176) and the last convolution's weights,
        # prefetched in fc6's backward (2 x (512 x 512 x 9 + 512) = 4,719,616)
        last_conv = 512 * 512 * 9 + 512
        assert est.buffers_bytes == 4 * largest + 2 * last_conv == 415_777_792
        # Psi = 138,357,544 is a multiple of 8: every shard is exact
        assert psi % 8 == 0
        assert model_states(est) + est.buffers_bytes == (deepspeed_zero3_gpu_bytes(psi, largest, 8) - 2 * psi // 8
                                                         + 2 * last_conv)

    def test_run_memory_of_zero3_counts_it(self):
        model = three_layers()
        est = run_memory(model, gpus=4, scheduler=ZERO3, groups=[["L2"], ["L1"], ["L0"]], batch_size=1,
                         precision="fp16", optimizer="adam")
        assert est.buffers_bytes == 16000 and est.total_bytes == 40000


# --- compression state --------------------------------------------------------------------------------------

def square_layers():
    """Layers of 100, 400 and 10000 parameters (10 x 10, 20 x 20, 100 x 100): Psi = 10500."""
    return make_model([100, 400, 10000], [1, 1, 1], [2, 2, 2])


TWO_MESSAGES = [[0, 1], [2]]  # 500 and 10000 elements


class TestCompressionByHand:
    def test_fp16_cast_of_the_largest_message(self):
        # one 16-bit copy of the 10000-element message: 20000 bytes; of one message of everything: 21000
        assert compression_state_bytes("fp16", [100, 400, 10000], TWO_MESSAGES, gpus=4, width_bytes=4) == 20000
        assert compression_state_bytes("bf16", [100, 400, 10000], [[0, 1, 2]], gpus=4, width_bytes=4) == 21000

    def test_topk_residual_and_receive_buffer(self):
        # residual 10500 x 4 = 42000; k = 1, 4, 100 by layer: messages of 5 and 100 pairs; the largest,
        # from 4 GPUs, 4 x 100 x (4 + 4) = 3200: 45200. One message of all: 4 x 105 x 8 = 3360: 45360
        assert compression_state_bytes("topk:0.01", [100, 400, 10000], TWO_MESSAGES, gpus=4, width_bytes=4) == 45200
        assert compression_state_bytes("topk:0.01", [100, 400, 10000], [[0, 1, 2]], gpus=4, width_bytes=4) == 45360
        # fp16 gradients: residual 10500 x 2 = 21000, pairs of 2 + 4 bytes: 4 x 100 x 6 = 2400
        assert compression_state_bytes("topk:0.01", [100, 400, 10000], TWO_MESSAGES, gpus=4, width_bytes=2) == 23400

    def test_powersgd_error_buffer_factors_and_copy(self):
        # rank 4: P + Q of 2 x 10 x 4 = 80, 2 x 20 x 4 = 160, 2 x 100 x 4 = 800 elements (each fewer than its
        # layer's): 1040 x 4 = 4160 + the error buffer 42000 + the hook's copy of the largest message (error
        # feedback: torch.clone of the 10000-element message) 40000 = 86160. Rank 5: the 10 x 10 layer's
        # 100 >= 100 is sent as it is: (200 + 1000) x 4 = 4800 + 42000 + 40000 = 86800
        assert compression_state_bytes("powersgd:4", [100, 400, 10000], TWO_MESSAGES, gpus=4, width_bytes=4) == 86160
        assert compression_state_bytes("powersgd:5", [100, 400, 10000], TWO_MESSAGES, gpus=4, width_bytes=4) == 86800

    @pytest.mark.parametrize("kind", ["fp16", "topk:0.01", "powersgd:4", None, "none"])
    def test_nothing_on_one_gpu_or_without(self, kind):
        gpus = 1 if kind not in (None, "none") else 4
        assert compression_state_bytes(kind, [100, 400, 10000], TWO_MESSAGES, gpus=gpus, width_bytes=4) == 0

    def test_memory_per_gpu_adds_it_to_the_buffers(self):
        plain = memory_per_gpu(square_layers(), batch_size=1, gpus=4, bucket_bytes=1000)
        topk = memory_per_gpu(square_layers(), batch_size=1, gpus=4, bucket_bytes=1000, compression="topk:0.01",
                              messages=TWO_MESSAGES)
        assert plain.buffers_bytes == 1000 and topk.buffers_bytes == 1000 + 45200
        assert topk.total_bytes - plain.total_bytes == 45200
        # one message per layer when none are given: the largest is the 10000 layer's 100 pairs again
        alone = memory_per_gpu(square_layers(), batch_size=1, gpus=4, compression="topk:0.01")
        assert alone.buffers_bytes == 45200

    def test_run_memory_maps_the_groups(self):
        # DDP: two 25 MiB buckets, at most the 42000-byte gradient; plus powersgd:4's 86160
        est = run_memory(square_layers(), gpus=4, scheduler=DDP, groups=[["L0", "L1"], ["L2"]], batch_size=1,
                         precision="fp32", compression="powersgd:4")
        assert est.buffers_bytes == 42000 + 86160
        fp16 = run_memory(square_layers(), gpus=4, scheduler=DDP, groups=[["L2", "L1", "L0"]], batch_size=1,
                          precision="fp32", compression=sim.compression.parse_compression("fp16"))
        assert fp16.buffers_bytes == 42000 + 2 * 10500

    def test_a_simulated_run_with_its_compression(self):
        """`sim.simulate` reports its compression's state over its own messages and model."""
        model, cluster = square_layers(), sim.Cluster(gpus=4, alpha_s=1e-4, beta_s_per_byte=1e-9)
        res = sim.simulate(model, cluster, scheduler=DDP, batch_size=1, compression="topk:0.01")
        plain = resource_metrics(res.model, gpu=cluster.gpu, gpus=4, scheduler=DDP, groups=res.groups, batch_size=1,
                                 precision="fp32", iteration_time_s=res.iteration_time_s)
        comp = resource_metrics(res.model, gpu=cluster.gpu, gpus=4, scheduler=DDP, groups=res.groups, batch_size=1,
                                precision="fp32", iteration_time_s=res.iteration_time_s,
                                compression=res.metrics["compression"])
        assert comp["memory_buffers_bytes"] == res.metrics["memory_buffers_bytes"]
        largest_k = max(sum(math.ceil(0.01 * {"L0": 100, "L1": 400, "L2": 10000}[n]) for n in g) for g in res.groups)
        assert comp["memory_buffers_bytes"] - plain["memory_buffers_bytes"] == 42000 + 4 * largest_k * 8


# --- invariants ------------------------------------------------------------------------------------------------

layer_lists = st.lists(st.integers(min_value=0, max_value=5_000_000), min_size=1, max_size=8).filter(any)
compressions = st.one_of(
    st.sampled_from(["fp16", "bf16"]),
    st.floats(min_value=1e-6, max_value=1.0).map(lambda r: f"topk:{r!r}"),
    st.integers(min_value=1, max_value=64).map(lambda r: f"powersgd:{r}"),
)


def messages_of(n: int, cuts: list[bool]) -> list[list[int]]:
    out, current = [], [0]
    for i in range(1, n):
        if cuts[i % len(cuts)]:
            out.append(current)
            current = []
        current.append(i)
    return [*out, current]


@settings(max_examples=200, deadline=None)
@given(params=layer_lists, precision=st.sampled_from(PRECISIONS), optimizer=st.sampled_from(OPTIMIZERS),
       gpus=st.integers(min_value=1, max_value=512))
def test_zero3_is_its_shards_and_its_units_gathered(params, precision, optimizer, gpus):
    """ZeRO-3's model states never exceed stage 0's, and its buffers are the peak of its units gathered (a unit
    with the next prefetched; in the backward also its gradient) at the run's width (none on one GPU)."""
    model = make_model(params, [1] * len(params), [1] * len(params))
    full = memory_per_gpu(model, batch_size=1, precision=precision, optimizer=optimizer, gpus=gpus)
    zero3 = zero3_memory(model, batch_size=1, precision=precision, optimizer=optimizer, gpus=gpus,
                           shard="parameters")
    gathered = gathered_unit_bytes(model, precision, gpus=gpus, shard="parameters")
    assert model_states(zero3) <= model_states(full)
    units = [p for p in params if p > 0]
    pairs = [a + b for a, b in zip(units, units[1:], strict=False)]
    backward = [2 * b + a for a, b in zip(units, units[1:], strict=False)]
    peak = max(pairs + backward + [2 * units[0]])
    assert zero3.buffers_bytes == gathered == (0 if gpus == 1 else peak * WIDTH_BYTES[precision])
    # DeepSpeed's largest layer gathered with its gradient at least, and at most the whole model's weights and
    # gradients, which stage 0 holds
    if gpus > 1:
        assert 2 * max(params) * WIDTH_BYTES[precision] <= gathered <= 2 * WIDTH_BYTES[precision] * sum(params)


@settings(max_examples=200, deadline=None)
@given(params=layer_lists, gpus=st.integers(min_value=2, max_value=1024))
def test_mixed_precision_adam_is_deepspeeds_estimate(params, gpus):
    """Mixed-precision Adam: DeepSpeed's 4 x largest and at most 2 bytes of a prefetched unit per parameter of it,
    + ZeRO's 16 Psi / Nd (DeepSpeed's 18 less the fp32 gradient shard's extra 2), each shard rounded up."""
    model = make_model(params, [1] * len(params), [1] * len(params))
    est = zero3_memory(model, batch_size=1, precision="fp16", optimizer="adam", gpus=gpus, shard="parameters")
    psi = sum(params)
    assert 4 * max(params) <= est.buffers_bytes <= 4 * max(params) + 2 * max(params)
    assert model_states(est) == 2 * math.ceil(2 * psi / gpus) + math.ceil(12 * psi / gpus)


@settings(max_examples=200, deadline=None)
@given(params=layer_lists, kind=compressions, gpus=st.integers(min_value=2, max_value=256),
       cuts=st.lists(st.booleans(), min_size=1, max_size=8), precision=st.sampled_from(PRECISIONS),
       shard=st.sampled_from(SHARDS))
def test_compression_state_adds_and_is_bounded(params, kind, gpus, cuts, precision, shard):
    model = make_model(params, [1] * len(params), [1] * len(params))
    messages = messages_of(len(params), cuts)
    width = WIDTH_BYTES[precision]
    args = {"batch_size": 1, "precision": precision, "gpus": gpus, "shard": shard}
    plain = memory_per_gpu(model, **args)
    if kind in ("fp16", "bf16") and width <= 2:  # a 16-bit cast of 16-bit gradients: refused, as the run does
        with pytest.raises(sim.SimInputError, match="does nothing to 16-bit gradients"):
            memory_per_gpu(model, **args, compression=kind, messages=messages)
        return
    comp = memory_per_gpu(model, **args, compression=kind, messages=messages)
    state = compression_state_bytes(kind, params, messages, gpus=gpus, width_bytes=width)
    assert state > 0 and comp.total_bytes == plain.total_bytes + state
    assert all(getattr(comp, f) >= 0 for f in ("weights_bytes", "gradients_bytes", "optimizer_bytes",
                                                "activations_bytes", "buffers_bytes"))
    psi, largest_message = sum(params), max(sum(params[i] for i in m) for m in messages)
    if kind in ("fp16", "bf16"):
        assert state == 2 * largest_message
    elif kind.startswith("powersgd"):  # the error buffer, the message's copy, factors fewer than their elements
        assert psi * width + largest_message * width <= state <= 2 * psi * width + largest_message * width
    else:  # the residual, and P pairs per element at most, of the largest message
        assert psi * width < state <= psi * width + gpus * largest_message * (width + 4)


@settings(max_examples=200, deadline=None)
@given(params=layer_lists, low=st.floats(min_value=1e-6, max_value=1.0), high=st.floats(min_value=1e-6, max_value=1.0),
       gpus=st.integers(min_value=2, max_value=256))
def test_topk_state_grows_with_the_ratio_and_the_gpus(params, low, high, gpus):
    low, high = sorted((low, high))

    def state(ratio, p):
        return compression_state_bytes(f"topk:{ratio!r}", params, None, gpus=p, width_bytes=4)

    assert state(low, gpus) <= state(high, gpus)
    assert state(low, gpus) <= state(low, gpus + 1)


def test_compression_on_a_tensor_view_uses_its_rows():
    """Messages are rows of the model the run planned over (here vgg16's tensors): fp16 copies the largest
    message, which in one-tensor messages is fc6's weight, not its whole layer."""
    view = sim.load_model("vgg16").timed(gpu="v100-sxm2", batch_size=8).tensor_view()
    est = memory_per_gpu(view, batch_size=8, gpus=8, compression="fp16")
    plain = memory_per_gpu(view, batch_size=8, gpus=8)
    assert est.buffers_bytes - plain.buffers_bytes == 2 * 25088 * 4096
    assert dataclasses.replace(est, buffers_bytes=plain.buffers_bytes) == plain
