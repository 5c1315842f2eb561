"""The validation suite against published measurements (data/validation/cases.csv).

Tolerances and where they come from:
* The measured run-to-run spread is small: the ddl-benchmarks A2A rows report a
  standard deviation of at most 1.5 % of the mean (BERT-Large BSP 4 GPUs: 0.12/53.04,
  ResNet-50 WFBP 32 GPUs: 14.01/5113 ...). Two methods whose measured throughputs
  differ by more than 10 % are therefore really ordered, and the simulator must
  order them the same way.
* The error target is a median absolute error of at most 10 % per source, the
  upper end of the published simulators' claims (dPRO < 5 %, Echo 8 %,
  vTrain 8-15 %, ASTRA-sim analytical 10-20 %). It was set before looking at
  per-case errors and is not tuned to them.
"""

import itertools
from pathlib import Path

import pytest

from sim.errors import SimInputError
from sim.schedulers.names import DDP, HOROVOD
from sim.validation import load_cases, run_validation, summarize

REF = Path(__file__).resolve().parent.parent / "data" / "reference"  # copied into the repo, see its README
MEDIAN_TOLERANCE_PCT = 10.0
ORDER_MARGIN = 0.10
#: NVIDIA DeepLearningExamples' DGX-1 tables (one node, NVLink), all held out but three.
DGX1_SOURCE = "nvidia-dle-dgx1"
#: The DGX A100 tables of NVIDIA's PyTorch and TensorFlow ResNet-50 READMEs (one node, NVLink3), held out.
DGXA100_SOURCE = "nvidia-dle-dgxa100"
VENDOR_SOURCES = {DGX1_SOURCE, DGXA100_SOURCE}


@pytest.fixture(scope="module")
def results():
    return run_validation(reference_dir=REF)


def test_every_case_is_cited_and_configured():
    cases = load_cases()
    assert len(cases) >= 150
    assert cases.citation.str.len().min() > 40
    vendor = cases.source.isin(VENDOR_SOURCES)
    assert set(cases.scheduler[~vendor]) <= {"wfbp", "mgwfbp", "synceasgd"}
    # NVIDIA's DGX rows ran PyTorch DistributedDataParallel (apex's, then PyTorch's) or TensorFlow with Horovod.
    assert set(cases.scheduler[vendor]) == {DDP, HOROVOD}
    assert (cases.measured_samples_per_s > 0).all() and (cases.calib_samples_per_s > 0).all()


def test_every_case_runs(results):
    assert (results.status == "ok").all(), results.loc[results.status != "ok", ["case", "status"]]


MISSES_TARGET = pytest.mark.xfail(
    strict=True,
    reason="known miss (median 11.4 %): SyncEASGD sends the whole 53.5 MB model in one message, and the "
    "trace's alpha-beta fit is extrapolated 6x past its largest measured message (8.4 MB); the trace's own merged "
    "all-reduces give the same rate, and the measured rows need more than any all-reduce cost that agrees with "
    "the trace (test_the_traces_own_merged_all_reduces_cannot_reach_the_synceasgd_rows); see README, Validation",
)


@pytest.mark.parametrize(
    "source",
    ["all", "ddl-benchmarks", "b-caffe",
     pytest.param("b-caffe-trace", marks=MISSES_TARGET),
     "ddl-benchmarks-100gib", "ddl-benchmarks-100gbe", DGX1_SOURCE, DGXA100_SOURCE],
)
def test_median_error_per_source_within_target(results, source):
    """On the held-out cases (summarize reports those): nothing fitted has seen them."""
    summary = summarize(results).set_index("source")
    assert summary.loc[source, "median_abs_error_pct"] <= MEDIAN_TOLERANCE_PCT


#: Issue 13's targets for the open set, held out from fitting: median <= 8 %, worst <= 40 %.
HELD_OUT_MEDIAN_TARGET_PCT, HELD_OUT_WORST_TARGET_PCT = 8.0, 40.0


def test_held_out_median_meets_the_target(results):
    held = results.loc[results.split == "held-out"]
    assert len(held) >= 90
    assert held.error_pct.abs().median() <= HELD_OUT_MEDIAN_TARGET_PCT


def test_held_out_worst_meets_the_target(results):
    held = results.loc[results.split == "held-out"]
    assert held.error_pct.abs().max() <= HELD_OUT_WORST_TARGET_PCT


def above_linear(results):
    """Held-out cases whose published throughput is above linear from their calibration point (no model of
    communication can reach them: the simulator never scales better than linearly)."""
    cases = load_cases().set_index("case")
    held = results.loc[(results.split == "held-out") & (results.status == "ok")].set_index("case")
    linear = cases.loc[held.index, "calib_samples_per_s"] * cases.loc[held.index, "gpus"] / cases.loc[
        held.index, "calib_gpus"]
    return set(held.index[cases.loc[held.index, "measured_samples_per_s"] > linear])


def test_the_rows_above_linear_scaling_are_known_and_come_out_too_slow(results):
    """TensorFlow's DGX A100 mixed-precision row prints 9.26x from one GPU to eight (16400 against 8 x 1770 img/s,
    16 % above linear); five of the survey's ResNet-50 rows at 4 GPUs are 0.2-0.6 % above linear (within their
    run-to-run spread)."""
    rows = above_linear(results)
    assert rows == {"dle-tf-resnet50-amp-a100-8gpu", "ddl-resnet50-WFBP-A2A-4gpu", "ddl-resnet50-WFBP-PS-4gpu",
                    "ddl-resnet50-ByteScheduler-PS-4gpu", "ddl-100gib-resnet50-WFBP-A2A-4gpu",
                    "ddl-100gbe-resnet50-WFBP-A2A-4gpu"}
    assert (results.set_index("case").loc[sorted(rows), "error_pct"] < 0).all()


@pytest.mark.parametrize("by", ["source", "method"])
def test_no_group_errs_all_one_way(results, by):
    """No source or method whose held-out errors all have one sign (a bias the model should explain), with the
    rows above linear scaling left out (they can only come out too slow: above_linear).

    Known, all too fast: B-Caffe's trace-driven rows (see MISSES_TARGET) and B-Caffe's WFBP rows (no other source
    runs WFBP): with the K80 preset's measured size regimes, each table taken on the node count it was measured on
    (the OSU logs of 2, 4 and 8 nodes; the 8-node table carried to 2 and 4 nodes by the ring misses those logs by
    17 and 16 % at the median, their own tables by 2.5 and 1.3 %), B-Caffe's preset rows split 16 too fast / 2 too
    slow (ResNet's SyncEASGD at 2 and 4 nodes); GoogLeNet's rows stay up to 31 % too fast, as the trace-driven rows
    are: what the multi-node runs add lies outside any all-reduce that agrees with the logs; NVIDIA's DGX A100
    rows (PyTorch's TF32 +3.2 %
    and mixed precision +18.1 %, TensorFlow's TF32 +1.7 %: the mixed-precision loss, like the DGX-1 21.03 rows'
    +13 %, grows with the node's throughput, as an input pipeline shared by the node's GPUs would, which is not
    modelled); and, by method, the held-out Horovod rows (NVIDIA's TensorFlow ResNet-50: DGX-1 1.8 and 3.5 %,
    DGX A100 TF32 1.7 %). NVIDIA's DGX-1 rows were all too fast (by 2.3 to 21.0 %) while nvlink2's rate was the
    datasheet's; it is now fitted on three of them (data/networks.csv) and the other 17 (13, and four PyTorch
    21.03 rows added later) err both ways. See data/README.md."""
    kept = results.loc[~results.case.isin(above_linear(results))]
    summary = summarize(kept, by).set_index("source").drop(index="all")
    one_way = summary.loc[(summary.too_fast == 0) | (summary.too_slow == 0)]
    known = {"b-caffe-trace", DGXA100_SOURCE} if by == "source" else {HOROVOD, "WFBP"}
    assert set(one_way.index) == known, one_way[["cases", "too_fast", "too_slow"]]
    # The cases without a survey method (grouped by their scheduler) are NVIDIA's DGX rows and nothing else.
    held = results.loc[(results.split == "held-out") & (results.status == "ok")]
    assert set(held.loc[held.method == "", "source"]) == VENDOR_SOURCES


#: Pairs the simulator orders against the measurements, each with the reason.
#: (None since the tree's pipeline fill: BSP ahead of WFBP on BERT-Large at 32 GPUs over 100 Gb IB, 375 against
#: 340 samples/s measured, was simulated the other way while one message per tensor over NCCL's trees cost its
#: hops' latencies alone; ResNet-50 at 16 GPUs, BSP against WFBP on 10GbE and 100GbE, is ordered right since the
#: cases run NCCL's ring or tree.)
KNOWN_MISORDERED: set[tuple[str, str]] = set()


def test_simulator_orders_methods_as_the_measurements_do(results):
    config = results.case.str.replace(r"-(BSP-A2A|WFBP-A2A|MG-WFBP|WFBP|SyncEASGD)-", "-", regex=True)
    compared, misordered = 0, set()
    for _, group in results.groupby(config):
        for a, b in itertools.combinations(group.itertuples(), 2):
            if abs(a.measured / b.measured - 1) > ORDER_MARGIN:
                compared += 1
                if (a.measured > b.measured) != (a.simulated > b.simulated):
                    misordered.add((a.case, b.case))
    assert compared >= 50
    assert misordered == KNOWN_MISORDERED


def test_wfbp_falls_behind_mgwfbp_on_eight_k80_nodes_only_when_trace_driven(results):
    """Measured (B-Caffe, 8 nodes): MG-WFBP 1210.9 > WFBP 1006.4 samples/s. The per-layer
    trace carries B-Caffe's real per-message cost; the cost model does not."""
    by_case = results.set_index("case").simulated
    assert by_case["bcaffe-trace-googlenet-MG-WFBP-8node"] > 1.05 * by_case["bcaffe-trace-googlenet-WFBP-8node"]


def test_cases_needing_the_reference_traces_are_skipped_with_a_reason(tmp_path):
    cases = load_cases()
    out = run_validation(cases[cases.model.str.startswith("bcaffe:")].head(2), reference_dir=tmp_path)
    assert out.status.str.startswith("skipped: reference file").all()
    assert summarize(out).cases.tolist() == [0]


def test_fine_grained_model_beats_the_coarse_one(results):
    """Li et al. (TPDS 2022): fine-grained models, with operations and dependencies, predict
    throughput more accurately than coarse phase-sequence models. Checked on held-out cases."""
    from sim.validation import coarse_versus_fine

    cmp = coarse_versus_fine(results)
    assert cmp["fine_test_median_abs_error_pct"] < cmp["coarse_rho_test_median_abs_error_pct"]
    assert 0.0 <= cmp["coarse_rho_fitted_on_train"] <= 1.0


def test_fine_grained_model_beats_the_plain_coarse_one(results):
    from sim.validation import coarse_versus_fine

    cmp = coarse_versus_fine(results)
    assert cmp["fine_median_abs_error_pct"] < cmp["coarse_median_abs_error_pct"]


def test_byteps_link_efficiency_holds_on_the_held_out_rows():
    """The PS presets' ps_link_efficiency (sim.methods.BYTEPS_TCP_LINK_EFFICIENCY, fitted on the
    calibration split by sim.calib.fit_validation, refitted in tests/test_frameworks.py) predicts
    the held-out 16-GPU PS rows within the target, and the full link rate does not."""
    from sim.methods import BYTEPS_TCP_LINK_EFFICIENCY as eff
    from sim.validation import fit_ps_link_efficiency

    fit = fit_ps_link_efficiency(grid=[eff])
    assert fit["test_median_abs_error_pct"] <= MEDIAN_TOLERANCE_PCT < fit["test_median_abs_error_pct_at_1"]


def test_validate_command_prints_cases_and_summary():
    import io
    import json

    from sim.cli import main

    out, err = io.StringIO(), io.StringIO()
    assert main(["validate", "--source", "b-caffe", "--format", "json", "--reference", str(REF)], out=out, err=err) == 0
    payload = json.loads(out.getvalue())
    assert {"case", "source", "measured", "simulated", "error_pct"} <= set(payload["cases"][0])
    assert payload["summary"][0]["source"] == "all"
    assert main(["validate", "--source", "nope"], out=io.StringIO(), err=err) == 2
    assert "unknown source" in err.getvalue()


def test_the_reference_logs_ship_with_the_repository():
    """`python -m sim validate` in a fresh clone reads the logs copied into data/reference:
    every bcaffe case's log is there, and the default folder is that one."""
    from sim.calib.validation import DEFAULT_REFERENCE_DIR

    assert DEFAULT_REFERENCE_DIR.resolve() == REF.resolve()
    logs = {m.split(":", 1)[1] for m in load_cases().model if m.startswith("bcaffe:")}
    assert logs == {"tmp8comm.log", "tmp4ocomm.log"}
    for log in logs:
        assert (REF / "bcaffe_k80_10gbe" / log).is_file()


@pytest.mark.parametrize("log, dump, messages, rate_gb_s, whole_ms, fitted_ms, excess_ms, case", [
    ("tmp4ocomm.log", 0, 50, 0.37, 147, 148, 326, "bcaffe-trace-googlenet-SyncEASGD-4node"),
    ("tmp8comm.log", 1, 65, 0.28, 191, 205, 368, "bcaffe-trace-googlenet-SyncEASGD-8node"),
])
def test_the_traces_own_merged_all_reduces_cannot_reach_the_synceasgd_rows(log, dump, messages, rate_gb_s,
                                                                             whole_ms, fitted_ms, excess_ms, case):
    """The figures the README gives for the trace-driven miss (Validation, "Where the error comes
    from"): an alpha-beta line through the log's measured merged all-reduces (fifth column; a merged
    message holds its blob and the blobs up to the next merged one), extrapolated to the whole
    53.5 MB model, against how much longer the measured SyncEASGD iteration is than the one-node one.
    Rounded as the README states them (rate to 0.01 GB/s, times to 1 ms)."""
    import numpy as np

    from sim.calib.importers import parse_bcaffe_blobs

    blobs = parse_bcaffe_blobs((REF / "bcaffe_k80_10gbe" / log).read_text(), log)[dump]
    params, merged_us = blobs["params"].to_numpy(), blobs["merged_comm_us"].to_numpy()
    at = np.flatnonzero(merged_us > 0)
    sizes = np.array([params[i:j].sum() * 4 for i, j in zip(at, [*at[1:], len(params)], strict=True)])
    beta, alpha = np.polyfit(sizes, merged_us[at] * 1e-6, 1)
    whole_bytes = params.sum() * 4
    assert len(at) == messages and sizes.max() == pytest.approx(8.4e6, rel=0.01)
    assert whole_bytes == pytest.approx(53.5e6, rel=0.001)
    assert round(1 / beta / 1e9, 2) == rate_gb_s
    assert round((alpha + beta * whole_bytes) * 1e3) == whole_ms
    from sim.calib.validation import case_model

    row, model = case_model(case)  # the simulator's cost for merged messages: its fit of the per-layer times
    from sim.core.cost import measured_cost

    cost = measured_cost(model.comm_s, model.gradient_bytes("fp32"))
    assert round(float(cost.time_s(whole_bytes)) * 1e3) == fitted_ms
    one_node_s = row.batch_size * row.calib_gpus / row.calib_samples_per_s
    assert round((row.batch_size * row.gpus / row.measured_samples_per_s - one_node_s) * 1e3) == excess_ms
    assert excess_ms > 1.5 * whole_ms  # the miss is outside any all-reduce cost that agrees with the trace


def test_a_case_without_a_survey_method_goes_by_its_scheduler(results):
    """The summary and the parity plot by method name NVIDIA's rows by their scheduler, never by a blank."""
    from dashboard.validation_view import parity_figure
    from sim.calib.validation import method_or_scheduler

    named = method_or_scheduler(results)
    assert (named != "").all()
    assert set(named[results.method == ""]) == {DDP, HOROVOD}
    assert (named[results.method != ""] == results.method[results.method != ""]).all()
    names = {trace.name for trace in parity_figure(results, by="method").data}
    assert {DDP, HOROVOD} <= names and "" not in names


def test_a_case_runs_on_the_topology_it_names():
    """NVIDIA's DGX-1 rows name `dgx1-4nic`: 4 GPUs of its hybrid cube-mesh build 4 NVLink rings of the
    6 links a V100 has, so their all-reduces are slower than on a flat node; every other case is flat."""
    cases = load_cases()
    row = cases.loc[cases.case == "dle-pt-bert_large-squad-amp-b4-16g-4gpu"]
    assert row.topology.item() == "dgx1-4nic"
    assert (cases.loc[cases.source != DGX1_SOURCE, "topology"] == "flat").all()
    assert run_validation(row).simulated.item() < run_validation(row.assign(topology="flat")).simulated.item()
    with pytest.raises(SimInputError, match="topology"):
        run_validation(row.assign(topology="nope"))
