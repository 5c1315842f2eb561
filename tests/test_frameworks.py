"""Framework costs per message (sim.frameworks, data/frameworks.csv) and the fitted parameters."""

import csv
import dataclasses
import math

import pytest

import sim
from sim.calib.fit_validation import FITTED, fit_validation, stored_values
from sim.core.cost import CommCost, Regime, measured_cost
from sim.errors import SimInputError
from sim.frameworks import (
    FRAMEWORKS_PATH,
    framework_for,
    get_framework,
    resolve_framework,
    with_framework,
)


def test_every_framework_row_has_a_source_and_fitted_rows_say_how():
    with open(FRAMEWORKS_PATH, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert {"none", "nccl", "horovod", "pytorch-ddp", "bytescheduler", "byteps", "mpi"} <= {r["name"] for r in rows}
    for row in rows:
        assert len(row["source"]) > 40, row["name"]
    fitted = {p.name for p in FITTED if p.kind == "launch"}
    for row in rows:
        assert ("fit-validation" in row["source"]) == (row["name"] in fitted), row["name"]


def test_launch_goes_on_alpha_and_copies_on_beta_by_hand():
    """Horovod: launch L on alpha; 2 copy bytes per byte at the V100-PCIe's 900 GB/s x 0.8
    (sim.compute.MEM_EFFICIENCY) on beta: 2 / 720e9 s/B."""
    fw = get_framework("horovod")
    cost = with_framework(CommCost(1e-4, 1e-9), fw, gpu="v100-pcie")
    assert cost.alpha_s == pytest.approx(1e-4 + fw.launch_s, rel=1e-12)
    assert cost.beta_s_per_byte == pytest.approx(1e-9 + 2 / 720e9, rel=1e-12)
    nccl = with_framework(CommCost(1e-4, 1e-9), get_framework("nccl"), gpu="v100-pcie")
    assert (nccl.alpha_s, nccl.beta_s_per_byte) == (pytest.approx(1e-4 + 8.4e-6), 1e-9)


def test_free_measured_and_user_costs_are_left_alone():
    fw = get_framework("horovod")
    free = CommCost(0.0, 0.0)
    assert with_framework(free, fw, gpu="v100-pcie") is free
    measured = measured_cost([1e-3, 2e-3], [1000, 2000])
    assert with_framework(measured, fw, gpu="v100-pcie") is measured
    user = sim.Cluster(gpus=4, alpha_s=1e-4, beta_s_per_byte=1e-9)
    assert user.framework_cost(user.comm_cost(), "wfbp") == user.comm_cost()


def test_auto_is_the_schedulers_reference_framework():
    assert framework_for("wfbp") == framework_for("mgwfbp") == framework_for("synceasgd") == "horovod"
    assert framework_for("ddp") == framework_for("bucket") == "pytorch-ddp"
    assert framework_for("bytescheduler") == "bytescheduler"  # its fitted per-partition launch
    assert framework_for("wfbp", "ps") == "byteps"
    assert framework_for("dear") == "nccl"
    assert resolve_framework("auto", "wfbp", launch_us=5.0).launch_us == pytest.approx(5.0)
    assert resolve_framework("none", "wfbp").launch_s == 0


def test_one_message_after_backward_costs_exactly_the_launch_more():
    """SyncEASGD sends one message after the backward pass, so every microsecond of its
    launch is exposed: nccl's 8.4 us, or an override of 500 us."""
    model = sim.load_model("resnet50")
    runs = {fw: sim.simulate(model, sim.Cluster(gpus=8, framework=fw, **kw), "synceasgd", batch_size=32).iteration_time_s
            for fw, kw in (("none", {}), ("nccl", {}))}
    assert runs["nccl"] - runs["none"] == pytest.approx(8.4e-6, rel=1e-6)
    slow = sim.simulate(model, sim.Cluster(gpus=8, framework="nccl", launch_us=500.0), "synceasgd", batch_size=32)
    assert slow.iteration_time_s - runs["none"] == pytest.approx(500e-6, rel=1e-6)
    assert slow.metrics["framework"] == "nccl"


def test_per_message_costs_slow_every_message_and_merging_still_helps():
    """Horovod's launch and copies make every message dearer, so WFBP and MG-WFBP both slow
    down on 10GbE; MG-WFBP, which plans with the dearer alpha, stays ahead of WFBP."""
    model = sim.load_model("resnet152")
    runs = {}
    for fw in ("none", "horovod"):
        c = sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe", framework=fw)
        runs[fw] = [sim.simulate(model, c, s, batch_size=32).iteration_time_s for s in ("wfbp", "mgwfbp")]
        assert runs[fw][1] <= runs[fw][0] * (1 + 1e-12)
    assert runs["horovod"][0] > runs["none"][0] and runs["horovod"][1] > runs["none"][1]


def test_bad_framework_input_is_refused():
    with pytest.raises(SimInputError, match="unknown framework 'tf'"):
        sim.Cluster(gpus=2, framework="tf")
    with pytest.raises(SimInputError, match="launch_us"):
        sim.Cluster(gpus=2, launch_us=-1.0)
    with pytest.raises(SimInputError, match="network_gbps"):
        sim.Cluster(gpus=2, network_gbps=float("nan"))


def test_an_alias_names_its_preset():
    """``ddp`` is PyTorch DDP's preset: the cluster keeps the preset's name, and runs as with it."""
    alias, preset = sim.Cluster(gpus=8, gpus_per_node=4, framework="ddp"), sim.Cluster(gpus=8, gpus_per_node=4,
                                                                                         framework="pytorch-ddp")
    assert alias.framework == "pytorch-ddp"
    model = sim.load_model("resnet50")
    runs = [sim.simulate(model, c, "wfbp", batch_size=32) for c in (alias, preset)]
    assert runs[0].metrics["framework"] == "pytorch-ddp"
    assert runs[0].iteration_time_s == runs[1].iteration_time_s
    assert runs[0].iteration_time_s != sim.simulate(model, sim.Cluster(gpus=8, gpus_per_node=4), "wfbp",
                                                     batch_size=32).iteration_time_s  # not the default framework


def test_link_rate_overrides_change_only_beta():
    base, slow = sim.Cluster(gpus=8, gpus_per_node=4), sim.Cluster(gpus=8, gpus_per_node=4, network_gbps=1.0)
    assert slow.comm_cost().alpha_s == base.comm_cost().alpha_s
    assert slow.comm_cost().beta_s_per_byte > base.comm_cost().beta_s_per_byte


def test_the_stored_fitted_values_are_what_the_fit_gives():
    """python -m sim fit-validation reproduces every fitted value data/ holds (within the fit's
    resolution), on the calibration cases only."""
    fit = fit_validation()
    stored = stored_values()
    tolerance = {"link": 0.2, "launch": 10.0, "ps": 0.011, "slowdown": 0.011, "comm": 0.011, "jitter": 0.0011}
    for p in FITTED:
        assert fit["values"][(p.kind, p.name)] == pytest.approx(stored[(p.kind, p.name)], abs=tolerance[p.kind]), p


@pytest.mark.parametrize("build, message", [
    (lambda: CommCost(1e-5, 1e-10, regimes=(Regime(0.0, 1e-5, 1e-9), Regime(65536.0, 5e-6, 1e-10)), launch_s=7e-6),
     r"cannot exceed the smallest alpha_s of the cost \(5e-06\)"),
    (lambda: CommCost(1e-5, 1e-9).with_launch(-1e-6), r"^with_launch: launch_s must be a finite number >= 0"),
    (lambda: CommCost(1e-5, 1e-9, launch_s="1"), r"^launch_s must be a finite number >= 0, got '1'$"),
    (lambda: CommCost(1e-5, 1e-9, launch_s=None), r"^launch_s must be a finite number >= 0, got None$"),
])
def test_a_bad_launch_is_refused_in_one_line_naming_it(build, message):
    with pytest.raises(SimInputError, match=message) as err:
        build()
    assert "\n" not in str(err.value)


def test_the_expected_maximum_of_normals_and_the_sync_wait_factor_by_hand():
    """E[max of 2 standard normals] = 1/sqrt(pi); of 3, 3/(2 sqrt(pi)); one GPU waits for no one."""
    from sim.jitter import expected_max_normal, sync_wait_factor

    assert expected_max_normal(1) == 0.0
    assert expected_max_normal(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-9)
    assert expected_max_normal(3) == pytest.approx(1.5 / math.sqrt(math.pi), rel=1e-9)
    assert expected_max_normal(8) == pytest.approx(1.4236003, rel=1e-6)  # (tables of normal order statistics)
    assert sync_wait_factor(1, 0.5) == 1.0 and sync_wait_factor(8, 0.0) == 1.0
    assert sync_wait_factor(2, 0.02) == pytest.approx(1 + 0.02 / math.sqrt(math.pi), rel=1e-12)


def test_sync_jitter_scales_the_compute_of_multi_gpu_runs_only():
    """With jitter cv the run is timed on compute times 1 + cv E[max of P normals] as long (the slowest GPU's):
    the same as the run without jitter of the scaled model; the one-GPU baseline is not scaled; sweep agrees."""
    from sim.jitter import expected_max_normal

    model, cv = sim.load_model("resnet50"), 0.03
    jittered = sim.Cluster(gpus=8, gpus_per_node=4, sync_jitter_cv=cv)
    plain = dataclasses.replace(jittered, sync_jitter_cv=0.0)
    got = sim.simulate(model, jittered, "mgwfbp", batch_size=32)
    factor = 1 + cv * expected_max_normal(8)
    want = sim.simulate(got.model, plain, "mgwfbp", batch_size=32)  # got.model: the scaled (slowest GPU's) model
    assert got.model.bwd_s == pytest.approx(sim.simulate(model, plain, "mgwfbp", batch_size=32).model.bwd_s * factor)
    assert got.iteration_time_s == want.iteration_time_s
    one = sim.simulate(model, dataclasses.replace(jittered, gpus=1, gpus_per_node=1), "mgwfbp", batch_size=32)
    assert got.metrics["single_gpu_iteration_time_s"] == pytest.approx(one.iteration_time_s, rel=1e-12)
    row = sim.sweep(model, jittered, gpus=[8], schedulers=["mgwfbp"], batch_size=32).iloc[0]
    assert row["iteration_time_s"] == got.iteration_time_s
    with pytest.raises(SimInputError, match="sync_jitter_cv"):
        sim.Cluster(gpus=2, sync_jitter_cv=-0.1)
