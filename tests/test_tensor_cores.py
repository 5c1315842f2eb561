"""The tensor cores' share of the fp32 efficiency: fitted on declared one-GPU rows, reported on the rest."""

from __future__ import annotations

import numpy as np
import pytest

import sim
from sim import compute
from sim.calib.tensor_cores import families, fit_tensor_cores, load_speedups, tensor_core_report
from sim.catalog import get_gpu


def test_the_stored_scales_are_what_the_fit_gives():
    """python -m sim fit-validation reproduces data/tensor_cores.csv (to the fit's 0.001), on calibration rows only."""
    fit, stored = fit_tensor_cores(), compute.tensor_core_scales()
    for family, types in families().items():
        assert fit[family] == pytest.approx(stored[types[0]], abs=2e-3), family
        assert len({stored[t] for t in types}) == 1


def test_held_out_speedups_are_within_the_stated_tolerance():
    """NVIDIA's one-GPU fp32 -> mixed precision speedups (data/validation/mixed_precision.csv, each row cited):
    held-out median |error| 17.2 %, worst 28.1 % when fitted (README, Validation), against 33-221 % (median
    123 %) with tensor cores at the fp32 efficiency. Bounds: the measured figures, rounded up (a regression
    guard, not a target)."""
    held = tensor_core_report().query("split == 'held-out' and base_precision == 'fp32'")
    assert len(held) == 7
    assert held["error_pct"].abs().median() <= 18 and held["error_pct"].abs().max() <= 29
    unscaled = tensor_core_report(scale={}).query("split == 'held-out' and base_precision == 'fp32'")
    assert unscaled["error_pct"].abs().median() > 100  # the mechanism is what lowers it


def test_the_tf32_row_is_held_out_and_within_its_stated_tolerance():
    """NVIDIA's DGX A100 ResNet-50 row, TF32 -> AMP at one GPU (measured 2.63x): simulated 1.99x, 24.3 %
    short (README, Validation), with the fp16-fitted scales taken over for TF32 and nothing fitted on it.
    Bound: the measured figure, rounded up (a regression guard, not a target)."""
    tf32 = tensor_core_report().query("base_precision == 'tf32'")
    assert len(tf32) >= 1 and (tf32["split"] == "held-out").all()
    assert tf32["error_pct"].abs().max() <= 25


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
    assert tf32.metrics["comm_s"] == pytest.approx(fp32.metrics["comm_s"], rel=0.05)  # same bytes on the wire
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
