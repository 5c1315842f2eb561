"""The seven methods of the survey: presets, new schedulers and architectures, hand-worked."""

import io
import json

import pytest
from helpers import make_model, user_cluster

import sim
from sim.api import simulate_dag
from sim.cli import main
from sim.dag import gradient_layers
from sim.methods import METHODS, method_config
from sim.schedulers import SchedulerOptions, ddp, horovod, make_plan, synceasgd, wfbp

MS = 1e-3
MIB = 1 << 20


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


def model4():
    # 4 layers of 1 MiB gradients each (262144 fp32 params), fwd 1 ms, bwd 2 ms
    return make_model([262144] * 4, [1, 1, 1, 1], [2, 2, 2, 2])


class TestHorovod:
    def test_threshold_zero_and_no_cycle_is_wfbp(self):
        m, c = model4(), user_cluster(gpus=4)
        a = sim.simulate(m, c, "horovod", batch_size=1, options={"fusion_threshold_mb": 0, "cycle_time_ms": 0})
        b = sim.simulate(m, c, "wfbp", batch_size=1)
        assert a.groups == b.groups and a.iteration_time_s == pytest.approx(b.iteration_time_s, rel=1e-12)

    def test_unbounded_threshold_cycle_of_backward_is_synceasgd(self):
        m, c = model4(), user_cluster(gpus=4)
        opts = {"fusion_threshold_mb": float("inf"), "cycle_time_ms": 8.0}  # backward takes 8 ms
        a = sim.simulate(m, c, "horovod", batch_size=1, options=opts)
        b = sim.simulate(m, c, "synceasgd", batch_size=1)
        assert a.groups == b.groups and a.iteration_time_s == pytest.approx(b.iteration_time_s, rel=1e-12)

    def test_cycle_ticks_and_threshold_by_hand(self):
        # ready at 2, 4, 6, 8 ms from backward start; cycle 5 ms: ticks at 5 and 10 ms
        grads = gradient_layers(model4(), "fp32")
        plan = horovod(grads, None, SchedulerOptions(fusion_threshold_mb=64, cycle_time_ms=5))
        assert plan.groups == ((3, 2), (1, 0))
        assert plan.lag_s == pytest.approx((1 * MS, 2 * MS))
        # threshold 1.5 MiB: at most one 1 MiB gradient per buffer
        plan = horovod(grads, None, SchedulerOptions(fusion_threshold_mb=1.5, cycle_time_ms=5))
        assert plan.groups == ((3,), (2,), (1,), (0,))

    def test_dag_and_fast_path_agree(self):
        m, c = model4(), user_cluster(gpus=4)
        opts = {"cycle_time_ms": 3.0}
        a = sim.simulate(m, c, "horovod", batch_size=1, options=opts, iterations=2)
        b = simulate_dag(m, c, "horovod", batch_size=1, options=opts, iterations=2)
        assert a.iteration_time_s == pytest.approx(b.iteration_time_s, rel=1e-12)


class TestDDP:
    def test_first_bucket_is_one_mib(self):
        grads = gradient_layers(model4(), "fp32")
        assert ddp(grads, None, bucket_mb=2.0).groups == ((3,), (2, 1), (0,))

    def test_huge_caps_equal_synceasgd(self):
        grads = gradient_layers(model4(), "fp32")
        plan = ddp(grads, None, bucket_mb=1e6, options=SchedulerOptions(first_bucket_mb=1e6))
        assert plan.groups == synceasgd(grads, None).groups


class TestByteScheduler:
    def test_partitions_and_priority_on_the_timeline(self):
        m, c = model4(), user_cluster(gpus=4, alpha_s=0.0, beta_s_per_byte=4e-9)
        res = sim.simulate(m, c, "bytescheduler", batch_size=1, iterations=2,
                           options={"partition_bytes": MIB // 2})
        comm = res.timeline.loc[(res.timeline.kind == "comm") & (res.timeline.iteration == 0)]
        assert len(comm) == 8  # 4 layers x 2 partitions
        assert (res.timeline.kind == "update").sum() == 8  # one update per layer and iteration
        # the next iteration's forward of L0 starts as soon as L0 is updated, before L3 is
        t = res.timeline.set_index("name")
        assert t.loc["it1/forward/L0", "start_s"] == pytest.approx(t.loc["it0/update/L0", "end_s"])
        assert t.loc["it1/forward/L0", "start_s"] < t.loc["it0/update/L3", "end_s"]

    @pytest.mark.parametrize("beta", [1e-9, 4e-9, 2e-8])
    def test_first_layer_updated_no_later_than_fifo(self, beta):
        m, c = model4(), user_cluster(gpus=4, alpha_s=1e-4, beta_s_per_byte=beta)
        # one partition per layer, so that only the order differs (each part pays alpha)
        prio = sim.simulate(m, c, "bytescheduler", batch_size=1, iterations=2, options={"partition_bytes": MIB})
        fifo = sim.simulate(m, c, "wfbp", batch_size=1, iterations=2)
        first_prio = prio.timeline.set_index("name").loc["it0/update/L0", "end_s"]
        first_fifo = fifo.timeline.loc[fifo.timeline.kind == "update"].end_s.min()
        assert first_prio <= first_fifo + 1e-12


class TestDeAR:
    def test_reduce_scatter_and_all_gather_halves(self):
        m, c = model4(), user_cluster(gpus=4, alpha_s=1e-3, beta_s_per_byte=1e-9)
        res = sim.simulate(m, c, "dear", batch_size=1, iterations=2)
        comm = res.timeline.loc[(res.timeline.kind == "comm") & (res.timeline.iteration == 0)]
        assert comm.name.str.contains("reduce-scatter").sum() == 4 and comm.name.str.contains("all-gather").sum() == 4
        assert comm.duration_s.to_numpy() == pytest.approx([0.5 * (1e-3 + 1e-9 * MIB)] * 8)


class TestParameterServer:
    def test_push_and_pull_lanes(self):
        m = model4()
        c = sim.Cluster(gpus=8, gpus_per_node=4)
        res = sim.simulate(m, c, "wfbp", batch_size=1, architecture="ps")
        assert {"push", "pull"} <= set(res.timeline.resource)
        assert res.metrics["architecture"] == "ps"

    def test_more_servers_never_slower(self):
        m = model4()
        c = sim.Cluster(gpus=8, gpus_per_node=1)
        few = sim.simulate(m, c, "wfbp", batch_size=1, architecture="ps", options={"servers": 2})
        more = sim.simulate(m, c, "wfbp", batch_size=1, architecture="ps", options={"servers": 4})
        assert more.iteration_time_s <= few.iteration_time_s

    def test_alpha_beta_cluster_is_refused(self):
        with pytest.raises(sim.SimInputError, match="network presets"):
            sim.simulate(model4(), user_cluster(gpus=4), "wfbp", batch_size=1, architecture="ps")


class TestMethods:
    def test_seven_presets(self):
        assert list(METHODS) == ["BSP-A2A", "WFBP-A2A", "MG-WFBP", "ByteScheduler-A2A", "BSP-PS", "WFBP-PS",
                                 "ByteScheduler-PS"]
        assert method_config("BSP-PS").architecture == "ps"

    def test_api_method_equals_its_scheduler(self):
        m, c = model4(), sim.Cluster(gpus=8, gpus_per_node=4)
        a = sim.simulate(m, c, method="MG-WFBP", batch_size=1)
        b = sim.simulate(m, c, "mgwfbp", batch_size=1)
        assert a.iteration_time_s == b.iteration_time_s and a.metrics["method"] == "MG-WFBP"

    def test_cli_list_methods(self):
        code, out, _ = run_cli("list", "methods", "--format", "json")
        rows = json.loads(out)
        assert code == 0 and {r["name"] for r in rows} == set(METHODS)
        assert set(rows[0]) == {"name", "architecture", "scheduler", "settings", "description"}

    @pytest.mark.parametrize("argv, match", [
        (["run", "--model", "tests/data/tiny.csv", "--method", "nope"], "unknown method"),
        (["run", "--model", "tests/data/tiny.csv", "--method", "BSP-PS", "--scheduler", "wfbp"], "not both"),
        (["run", "--model", "tests/data/tiny.csv", "--credit", "2"], "--credit does nothing for scheduler wfbp; it applies to: bytescheduler"),
        (["run", "--model", "tests/data/tiny.csv", "--servers", "2"], "--servers does nothing for scheduler wfbp; it applies to: architecture ps"),
        (["tune", "--model", "tests/data/tiny.csv", "--knob", "credit", "--values", "1.5"], "whole numbers"),
        (["tune", "--model", "tests/data/tiny.csv", "--knob", "nope", "--values", "1"], "--knob"),
    ])
    def test_cli_errors(self, argv, match):
        code, _, err = run_cli(*argv)
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and match in err


def test_tune_reports_best_and_gain():
    from sim.tune import tune

    m, c = model4(), user_cluster(gpus=4)
    res = tune(m, c, "bucket-mb", [1, 2, 4, 25], batch_size=1)
    assert len(res.frame) == 4
    assert res.best["iteration_time_s"] == res.frame.iteration_time_s.min()
    assert res.best["default_value"] == 25
    code, out, _ = run_cli("tune", "--model", "tests/data/tiny.csv", "--gpus", "4", "--knob", "fusion-threshold-mb",
                           "--values", "0,1,64", "--format", "json")
    assert code == 0 and json.loads(out)["best"]["knob"] == "fusion-threshold-mb"


def test_tune_says_when_no_value_changes_the_timing():
    """On all-reduce, bytescheduler's credit only says whether launches run ahead of the transfers
    (1: no; 2 or more: yes, unbounded beyond that), so credits of 2 and more time alike and tune says so;
    1 against 4 differs; on the parameter server, where it bounds the busy servers, and for a knob that
    matters, it does not say so."""
    from sim.tune import tune

    m = sim.load_model("resnet50")
    ahead = tune(m, sim.Cluster(gpus=16, gpus_per_node=4), "credit", [2, 4, 16], batch_size=32)
    assert ahead.best["same_for_every_value"]
    assert ahead.frame.iteration_time_s.nunique() == 1
    one = tune(m, sim.Cluster(gpus=16, gpus_per_node=4), "credit", [1, 4], batch_size=32)
    assert not one.best["same_for_every_value"] and one.frame.iteration_time_s.nunique() == 2
    assert one.best["value"] == 4  # the launches hidden behind the transfers save time
    ps = tune(m, sim.Cluster(gpus=16, gpus_per_node=4), "credit", [1, 16], batch_size=32, architecture="ps")
    assert not ps.best["same_for_every_value"] and ps.frame.iteration_time_s.nunique() == 2
    parts = tune(m, sim.Cluster(gpus=16, gpus_per_node=4), "partition-bytes", [1_000_000, 16_000_000], batch_size=32)
    assert not parts.best["same_for_every_value"]
    code, out, _ = run_cli("tune", "--model", "resnet50", "--gpus", "16", "--gpus-per-node", "4", "--knob", "credit",
                           "--values", "2,8")
    assert code == 0 and "credit does not change the timing of this configuration" in out
    code, out, _ = run_cli("tune", "--model", "resnet50", "--gpus", "16", "--gpus-per-node", "4", "--knob", "credit",
                           "--values", "1,4")
    assert code == 0 and "does not change the timing" not in out
    alone = tune(m, sim.Cluster(gpus=16, gpus_per_node=4), "credit", [4], batch_size=32, architecture="ps")
    assert not alone.best["same_for_every_value"]  # (the default alone, or again, says nothing)


def test_make_plan_rejects_bad_options():
    grads = gradient_layers(model4(), "fp32")
    with pytest.raises(sim.SimInputError, match="credit"):
        make_plan("bytescheduler", grads, None, options={"credit": 0})
    with pytest.raises(sim.SimInputError, match="unknown option"):
        make_plan("wfbp", grads, None, options={"nope": 1})
    assert make_plan("wfbp", grads, None).groups == wfbp(grads, None).groups
