"""The tensor cores' share of the fp32 efficiency: fitted on declared one-GPU rows, reported on the rest."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from sim import compute
from sim.calib.tensor_cores import families, fit_tensor_cores, load_speedups, tensor_core_report
from sim.catalog import get_gpu, gpus


def test_the_stored_scales_are_what_the_fit_gives():
    """python -m sim fit-validation reproduces data/tensor_cores.csv (to the fit's 0.001), on calibration rows only."""
    fit, stored = fit_tensor_cores(), compute.tensor_core_scales()
    for family, types in families().items():
        assert fit[family] == pytest.approx(stored[types[0]], abs=2e-3), family
        assert len({stored[t] for t in types}) == 1


def test_held_out_speedups_are_within_the_stated_tolerance():
    """NVIDIA's one-GPU fp32 -> mixed precision speedups (data/validation/mixed_precision.csv, each row cited):
    held-out median |error| 17.2 %, worst 28.1 % when fitted (README, Validation), against 33-220 % (median
    122 %) with tensor cores at the fp32 efficiency. Bounds: the measured figures, rounded up (a regression
    guard, not a target)."""
    held = tensor_core_report().query("split == 'held-out' and base_precision == 'fp32'")  # tf32 rows: below
    assert len(held) == 7
    assert held["error_pct"].abs().median() <= 18 and held["error_pct"].abs().max() <= 29
    unscaled = tensor_core_report(scale={}).query("split == 'held-out' and base_precision == 'fp32'")
    assert unscaled["error_pct"].abs().median() > 100  # the mechanism is what lowers it


def test_the_tf32_rows_are_held_out_and_check_the_peaks_not_the_scales():
    """NVIDIA's DGX A100 ResNet-50 rows, TF32 -> AMP at one GPU (PyTorch 21.03: measured 2.63x; TensorFlow 20.06
    with XLA: 2.19x): simulated 1.99x, 24.3 % and 9.1 % short (README). TF32 and AMP take the same tensor-core
    scales, so they cancel: the rows check the ratio of the A100's TF32 and FP16 peaks (156 and 312 TFLOPS),
    whatever the scales. Bound: the largest measured error, rounded up (a regression guard, not a target)."""
    tf32 = tensor_core_report().query("base_precision == 'tf32'")
    assert len(tf32) >= 1 and (tf32["split"] == "held-out").all()
    assert tf32["error_pct"].abs().max() <= 25
    for conv in (0.2, 0.5):  # the scales cancel while TF32 x scale beats the fp32 rate (0.125 of the TF32 peak)
        other = tensor_core_report(scale={**compute.tensor_core_scales(), "conv": conv, "conv_bn": conv})
        assert np.allclose(other.query("base_precision == 'tf32'")["simulated_speedup"], tf32["simulated_speedup"],
                           rtol=0.01)


def test_one_a100_in_tf32_against_nvidias_row():
    """Uncalibrated, one A100 at batch 256 runs ResNet-50 at 927 img/s in tf32 against NVIDIA's 938 (PyTorch 21.03,
    DGX A100 table, mixed_precision.csv; held out: nothing is fitted on an A100) and at 393 in fp32 (TF32 off).
    This one does depend on the conv scale. Bound: the measured error, rounded up (a regression guard)."""
    m = sim.load_model("resnet50")
    one = sim.Cluster(gpu="a100")
    tf32 = 256 / sim.simulate(m, one, batch_size=256, precision="tf32").iteration_time_s
    fp32 = 256 / sim.simulate(m, one, batch_size=256, precision="fp32").iteration_time_s
    assert abs(tf32 / 938 - 1) <= 0.02
    assert 2 < tf32 / fp32 < 8  # TF32 tensor cores: 156 against 19.5 TFLOPS peak


def test_tf32_by_hand():
    """On an A100 a compute-bound conv runs at the TF32 peak x 0.5 x the conv scale, a bn layer at the fp32
    peak; on a V100 (no TF32: tf32_tflops = fp32_tflops) tf32 is fp32 to the bit."""
    a100 = get_gpu("a100")
    flops, batch = 1e10, 8
    scale = compute.tensor_core_scales()["conv"]
    args = (np.array([flops, flops]), np.array([1000, 0]), np.array([10.0, 10.0]))
    fwd, _ = compute.layer_times_s(["conv", "bn"], *args, gpu="a100", batch_size=batch, precision="tf32")
    assert fwd[0] == pytest.approx(flops * batch / (a100.peak_flops("tf32") * 0.5 * scale), rel=1e-12)
    assert fwd[1] == pytest.approx(flops * batch / (a100.peak_flops("fp32") * 0.1), rel=1e-12)
    for gpu in ("v100-sxm2", "t4"):
        tf32 = compute.layer_times_s(["conv", "bn"], *args, gpu=gpu, batch_size=batch, precision="tf32")
        fp32 = compute.layer_times_s(["conv", "bn"], *args, gpu=gpu, batch_size=batch, precision="fp32")
        assert all(np.array_equal(a, b) for a, b in zip(tf32, fp32, strict=True)), gpu


def test_tf32_keeps_fp32_tensors_gradients_and_memory():
    m = sim.load_model("resnet50")
    a100 = sim.Cluster(gpus=8, gpus_per_node=8, gpu="a100", intra="nvlink3")
    fp32, tf32 = (sim.simulate(m, a100, batch_size=64, precision=p) for p in ("fp32", "tf32"))
    for key in ("memory_per_gpu_bytes", "memory_activations_bytes", "memory_weights_bytes", "params"):
        assert tf32.metrics[key] == fp32.metrics[key], key
    timed = m.timed(gpu="a100", batch_size=64, precision="tf32"), m.timed(gpu="a100", batch_size=64, precision="fp32")
    assert np.array_equal(timed[0].gradient_bytes("tf32"), timed[1].gradient_bytes("fp32"))  # same bytes on the wire
    assert 1.5 < fp32.metrics["compute_s"] / tf32.metrics["compute_s"] < 8  # 156 against 19.5 TFLOPS peak


def test_every_family_is_fitted_on_a_calibration_row_and_held_out_on_others():
    table = load_speedups()
    for family in families():
        rows = table[table["fits"] == family]
        assert (rows["split"] == "calibration").all() and len(rows) >= 1, family
    assert (table.loc[table["fits"] == "", "split"] == "held-out").all()


def test_a_convolution_on_tensor_cores_by_hand():
    """A compute-bound conv row: flops x batch / (fp16 tensor peak x 0.5 x the conv scale)."""
    gpu = get_gpu("v100-sxm2")
    flops, batch = 1e10, 8
    scale = compute.tensor_core_scales()["conv"]
    fwd, bwd = compute.layer_times_s(["conv"], np.array([flops]), np.array([1000]), np.array([10.0]), gpu="v100-sxm2",
                                     batch_size=batch, precision="amp")
    assert fwd[0] == pytest.approx(flops * batch / (gpu.peak_flops("fp16") * 0.5 * scale), rel=1e-12)
    fp32, _ = compute.layer_times_s(["conv"], np.array([flops]), np.array([1000]), np.array([10.0]), gpu="v100-sxm2",
                                    batch_size=batch, precision="fp32")
    assert fp32[0] == pytest.approx(flops * batch / (gpu.peak_flops("fp32") * 0.5), rel=1e-12)  # fp32 unscaled


def test_resnet50_in_mixed_precision_is_two_to_four_times_faster_not_seven():
    m = sim.load_model("resnet50")
    one = sim.Cluster(gpu="v100-sxm2")
    fp32 = 128 / sim.simulate(m, one, batch_size=128).iteration_time_s
    amp = 256 / sim.simulate(m, one, batch_size=256, precision="amp").iteration_time_s
    assert 2.0 < amp / fp32 < 4.0  # NVIDIA measures 2.3-3.1x (mixed_precision.csv)


@pytest.mark.parametrize(("text", "match"), [
    ("family,layer_types,efficiency_scale,source,note\nconv,conv,abc,s,\n",
     "tensor_cores.csv line 2: efficiency_scale must be a number"),
    ("family,layer_types,efficiency_scale,source,note\nconv,conv,1.5,s,\n",
     r"tensor_cores.csv line 2: efficiency_scale must be in \(0, 1\], got 1.5"),
])
def test_a_malformed_tensor_cores_file_is_refused_in_one_line(tmp_path, monkeypatch, text, match):
    path = tmp_path / "tensor_cores.csv"
    path.write_text(text)
    monkeypatch.setattr(compute, "TENSOR_CORES_PATH", path)
    compute.tensor_core_families.cache_clear()
    try:
        with pytest.raises(sim.SimInputError, match=match):
            compute.tensor_core_scales()
    finally:
        compute.tensor_core_families.cache_clear()


def test_a_speedup_row_without_citation_is_refused(tmp_path):
    table = load_speedups()
    table.loc[0, "citation"] = " "
    path = tmp_path / "mixed_precision.csv"
    table.to_csv(path, index=False)
    with pytest.raises(sim.SimInputError, match="mixed_precision.csv row 2: every row needs a citation"):
        load_speedups(path)


@pytest.mark.parametrize("gpu", sorted(gpus()))
def test_tf32_is_never_slower_than_fp32_and_is_fp32_without_tf32(gpu):
    """Every catalog GPU: a layer under tf32 runs at least as fast as under fp32 (cuDNN picks the faster kernel),
    and a GPU whose TF32 rate is its fp32 rate runs tf32 as fp32 to the bit."""
    m = sim.load_model("densenet121")  # conv, bn, pool, linear layers
    args = (m.layer_types, m.fwd_flops, m.params, m.out_elems)
    tf32 = compute.layer_times_s(*args, gpu=gpu, batch_size=32, precision="tf32")
    fp32 = compute.layer_times_s(*args, gpu=gpu, batch_size=32, precision="fp32")
    assert all((a <= b).all() for a, b in zip(tf32, fp32, strict=True))
    spec = get_gpu(gpu)
    if spec.peak_flops("tf32") <= spec.peak_flops("fp32"):
        assert all(np.array_equal(a, b) for a, b in zip(tf32, fp32, strict=True))


@pytest.mark.parametrize("gpu", sorted(gpus()))
@pytest.mark.parametrize("precision", ["fp16", "amp"])
def test_mixed_precision_arithmetic_is_never_slower_than_fp32(gpu, precision):
    """Every catalog GPU: a layer's arithmetic in fp16 or amp runs at least as fast as in fp32, and its memory
    traffic is halved. The tensor-core scale fitted on the V100 (8x its fp32 peak) made the K80 (no faster
    fp16) 3.4x and the P100 (2x) 1.7x slower than fp32 (the hostile review of 2026-11-25); now a layer keeps
    the fp32 rate where the scaled tensor-core rate does not beat it."""
    m = sim.load_model("densenet121")
    args = (m.layer_types, m.fwd_flops, m.params, m.out_elems)
    mixed = compute.layer_times_s(*args, gpu=gpu, batch_size=32, precision=precision)
    fp32 = compute.layer_times_s(*args, gpu=gpu, batch_size=32, precision="fp32")
    assert all((a <= b).all() for a, b in zip(mixed, fp32, strict=True))
    spec, scale = get_gpu(gpu), compute.tensor_core_scales()
    if spec.peak_flops("fp16") * min(scale.values()) > spec.peak_flops("fp32"):  # V100 on: tensor cores win
        assert (mixed[0] < fp32[0]).sum() > len(fp32[0]) // 2


@pytest.mark.parametrize("scheduler", sorted(sim.schedulers.SCHEDULERS))
def test_tf32_is_fp32_for_every_scheduler_on_a_gpu_without_tf32(scheduler):
    m = sim.load_model("resnet50")
    v100 = sim.Cluster(gpus=8, gpus_per_node=4, gpu="v100-sxm2")
    tf32, fp32 = (sim.simulate(m, v100, scheduler, batch_size=32, precision=p) for p in ("tf32", "fp32"))
    assert tf32.iteration_time_s == fp32.iteration_time_s
    assert {k: v for k, v in tf32.metrics.items() if k != "precision"} == \
        {k: v for k, v in fp32.metrics.items() if k != "precision"}
