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
    held = tensor_core_report().query("split == 'held-out'")
    assert len(held) == 7
    assert held["error_pct"].abs().median() <= 18 and held["error_pct"].abs().max() <= 29
    unscaled = tensor_core_report(scale={}).query("split == 'held-out'")
    assert unscaled["error_pct"].abs().median() > 100  # the mechanism is what lowers it


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
