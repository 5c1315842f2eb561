"""The roofline compute-time model on hand-worked layers, zoo models end to end, calibration."""

import io
import json

import numpy as np
import pytest

import sim
from sim.cli import main
from sim.compute import layer_times_s, update_time_s

# v100-sxm2 in data/gpus.csv: 15.7 TFLOP/s fp32, 900 GB/s.
PEAK, BW = 15.7e12, 900e9


def test_roofline_on_hand_worked_layers():
    """A conv (1 GFLOP/sample) and a pool behind it, batch 10, fp32 on v100-sxm2.

    conv: compute 1e10 / (15.7e12 * 0.5) = 1.27389 ms;
          memory (1e5 + 1e5) * 10 * 4 + 1e6 * 4 = 1.2e7 B / (900e9 * 0.8) = 16.7 us -> compute-bound.
          backward = 2 x forward.
    pool: compute 1e7 / (15.7e12 * 0.1) = 6.4 us;
          memory (1e5 + 1e6) * 10 * 4 = 4.4e7 B / 7.2e11 = 61.1 us -> memory-bound; backward = forward.
    """
    fwd, bwd = layer_times_s(
        ["conv", "pool"], np.array([1e9, 1e6]), np.array([1_000_000, 0]), np.array([1e5, 1e6]),
        gpu="v100-sxm2", batch_size=10,
    )
    assert fwd[0] == pytest.approx(1e10 / (PEAK * 0.5), rel=1e-12)
    assert bwd[0] == pytest.approx(2 * fwd[0], rel=1e-12)
    assert fwd[1] == pytest.approx(4.4e7 / (BW * 0.8), rel=1e-12)
    assert bwd[1] == pytest.approx(fwd[1], rel=1e-12)


def test_update_time_by_hand():
    # 1e6 params * 5 words * 4 B = 2e7 B at 0.8 * 900 GB/s = 27.8 us
    assert update_time_s(1_000_000, gpu="v100-sxm2") == pytest.approx(2e7 / (BW * 0.8), rel=1e-12)


def test_amp_update_adds_the_unscaling_pass_by_hand():
    # momentum's 5 fp32 words (20 B) + GradScaler's unscale, each fp32 gradient read and written (8 B),
    # + autocast's weight cast down (4 + 2) and weight-gradient cast up (2 + 4); fp16's master copies add 12 B
    assert update_time_s(1_000_000, gpu="v100-sxm2", precision="amp") == pytest.approx(4.0e7 / (BW * 0.8), rel=1e-12)
    assert update_time_s(1_000_000, gpu="v100-sxm2", precision="fp16") == pytest.approx(3.2e7 / (BW * 0.8), rel=1e-12)
    with pytest.raises(sim.SimInputError, match="unknown precision 'bf16'"):
        update_time_s(1_000_000, gpu="v100-sxm2", precision="bf16")


def test_amp_computes_as_fp16_and_sends_fp32_gradients():
    m = sim.load_model("resnet50")
    fp16, amp, fp32 = (m.timed(gpu="v100-sxm2", batch_size=64, precision=p) for p in ("fp16", "amp", "fp32"))
    assert np.array_equal(amp.fwd_s, fp16.fwd_s) and np.array_equal(amp.bwd_s, fp16.bwd_s)
    assert np.array_equal(amp.gradient_bytes("amp"), fp32.gradient_bytes("fp32"))
    assert np.array_equal(2 * fp16.gradient_bytes("fp16"), fp32.gradient_bytes("fp32"))
    cluster = sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe", gpu="v100-sxm2")
    runs = {p: sim.simulate(m, cluster, "synceasgd", batch_size=64, precision=p).metrics for p in ("fp16", "amp")}
    # one message after backward: its time is the whole gradient's, twice the bytes under autocast
    assert runs["amp"]["comm_s"] > 1.8 * runs["fp16"]["comm_s"]


def test_a_layer_csv_times_amp_as_fp32():
    """A CSV's times are given: the precision only sets the gradient width, 4 bytes under autocast."""
    model = sim.load_model("tests/data/tiny.csv")
    cluster = sim.Cluster(gpus=8, gpus_per_node=4, network="10gbe")
    fp32, amp = (sim.simulate(model, cluster, "mgwfbp", batch_size=8, precision=p) for p in ("fp32", "amp"))
    assert amp.iteration_time_s == fp32.iteration_time_s and amp.groups == fp32.groups


def test_fp16_uses_tensor_cores_and_is_faster():
    m = sim.load_model("resnet50")
    t32 = sim.simulate(m, sim.Cluster(gpu="v100-sxm2"), batch_size=64).iteration_time_s
    t16 = sim.simulate(m, sim.Cluster(gpu="v100-sxm2"), batch_size=64, precision="fp16").iteration_time_s
    assert t16 < t32


def test_faster_gpu_is_faster_and_bigger_batch_is_slower_per_iteration():
    m = sim.load_model("resnet50")
    k80 = sim.simulate(m, sim.Cluster(gpu="k80"), batch_size=32).iteration_time_s
    v100 = sim.simulate(m, sim.Cluster(gpu="v100-sxm2"), batch_size=32).iteration_time_s
    v100_64 = sim.simulate(m, sim.Cluster(gpu="v100-sxm2"), batch_size=64).iteration_time_s
    assert v100 < k80
    assert v100 < v100_64


def test_resnet50_v100_estimate_is_within_reach_of_a_published_measurement():
    """ddl-benchmarks (Shi et al., arXiv 2005.13247, results/2020-05-29): ResNet-50, batch 64,
    one V100-PCIe: 253.1 samples/s. The uncalibrated estimate is an estimate: we only ask that it
    be within 25%, the spread one expects from assumed kernel efficiencies."""
    res = sim.simulate(sim.load_model("resnet50"), sim.Cluster(gpu="v100-pcie"), batch_size=64)
    assert res.metrics["throughput_samples_per_s"] == pytest.approx(253.1, rel=0.25)


@pytest.mark.parametrize("name", ["resnet50", "bert_base", "densenet121"])
def test_calibration_is_exact_on_zoo_models(name):
    m = sim.load_model(name)
    res = sim.simulate(m, sim.Cluster(gpus=1), batch_size=16, calibrate_iteration_s=0.3)
    assert res.iteration_time_s == pytest.approx(0.3, rel=1e-12)
    multi = sim.simulate(m, sim.Cluster(gpus=8), "wfbp", batch_size=16, calibrate_iteration_s=0.3)
    assert multi.metrics["single_gpu_iteration_time_s"] == pytest.approx(0.3, rel=1e-12)


def test_seq_len_changes_transformer_compute_not_parameters():
    short, long = sim.load_model("bert_base", seq_len=64), sim.load_model("bert_base", seq_len=512)
    assert short.total_params == long.total_params == 109_482_240
    t_short = sim.simulate(short, sim.Cluster(), batch_size=8).iteration_time_s
    t_long = sim.simulate(long, sim.Cluster(), batch_size=8).iteration_time_s
    assert t_long > 4 * t_short


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


def test_list_models_json_has_name_layers_params_source():
    code, out, _ = cli("list", "models", "--format", "json")
    assert code == 0
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["resnet50"]["params"] == 25_557_032
    assert rows["gpt2"]["layers"] > 10 and rows["gpt2"]["source"]


def test_list_gpus_json():
    code, out, _ = cli("list", "gpus", "--format", "json")
    assert code == 0
    assert {"k80", "v100-sxm2", "a100", "h100"} <= {r["name"] for r in json.loads(out)}


def test_run_zoo_model_from_cli():
    code, out, _ = cli("run", "--model", "resnet50", "--gpus", "16", "--gpus-per-node", "4",
                       "--scheduler", "mgwfbp", "--batch-size", "64", "--format", "json")
    assert code == 0
    assert json.loads(out)["gpus"] == 16


def test_cli_runs_autocast_and_names_the_precisions_it_knows():
    args = ("run", "--model", "resnet50", "--gpus", "16", "--gpus-per-node", "4", "--batch-size", "64",
            "--format", "json")
    code, out, _ = cli(*args, "--precision", "amp")
    amp = json.loads(out)
    assert code == 0 and amp["precision"] == "amp"
    assert amp["comm_s"] > json.loads(cli(*args, "--precision", "fp16")[1])["comm_s"]
    code, _, err = cli(*args, "--precision", "bf16")
    assert code == 2 and "--precision" in err and "'amp'" in err


@pytest.mark.parametrize(
    "argv, match",
    [
        (["run", "--model", "resnet50", "--gpu", "gtx480"], "unknown gpu 'gtx480'; valid:"),
        (["run", "--model", "tests/data/tiny.csv", "--seq-len", "64"], "only to zoo models"),
        (["run", "--model", "resnet50", "--calibrate-iteration-s", "-1"], "--calibrate-iteration-s"),
        (["run", "--model", "resnet5"], "unknown model 'resnet5'; valid: alexnet"),
    ],
)
def test_bad_catalog_input(argv, match):
    code, _, err = cli(*argv)
    assert code == 2 and match in err and err.count("\n") == 1


def test_every_table_by_precision_knows_every_precision():
    """A precision added to `sim.precision` must be given its compute rate, widths, update and memory."""
    from sim import compute, memory
    from sim.precision import BYTES_PER_PARAM, PRECISIONS

    tables = [PRECISIONS, compute.COMPUTE_PRECISION, compute.WIDTH_BYTES, compute.UPDATE_EXTRA_BYTES_PER_PARAM,
              memory.WIDTH_BYTES, memory.ACTIVATION_WIDTH_BYTES, memory.CAST_COPY_BYTES]
    assert all(set(t) == set(BYTES_PER_PARAM) for t in tables)
