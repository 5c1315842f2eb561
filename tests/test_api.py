"""The API: iterations, prefetch, calibration, sweep, timeline schema and trace export."""

import json

import numpy as np
import pytest
from helpers import make_model, user_cluster

import sim
from sim.timeline import TIMELINE_COLUMNS
from sim.trace import chrome_trace

MS = 1e-3


def test_timeline_schema_and_metric_keys():
    res = sim.simulate(make_model([1000, 2000], [1, 1], [2, 2]), user_cluster(), "wfbp", batch_size=8)
    assert tuple(res.timeline.columns) == TIMELINE_COLUMNS
    assert set(res.metrics) == set(sim.METRIC_KEYS) | set(sim.api.RESOURCE_KEYS)
    assert set(res.timeline.kind) == {"io", "h2d", "forward", "backward", "comm", "update"}
    assert (res.timeline.end_s >= res.timeline.start_s).all()


def test_io_h2d_update_on_the_critical_path_without_prefetch():
    # io 2 + h2d 1 + fwd 2 + bwd 4 + update 1 = 10 ms on one GPU, each iteration
    model = make_model([1000, 1000], [1, 1], [2, 2], io_ms=2, h2d_ms=1, update_ms=1)
    res = sim.simulate(model, sim.Cluster(gpus=1), batch_size=8, iterations=3)
    assert res.iteration_time_s == pytest.approx(10 * MS)
    assert res.timeline.iteration.max() == 2
    assert res.metrics["throughput_samples_per_s"] == pytest.approx(8 / (10 * MS))


def test_prefetch_hides_io_behind_the_previous_iteration():
    # with prefetch, io+h2d (3 ms) of k+1 run during k's 7 ms of compute: period 7 ms
    model = make_model([1000, 1000], [1, 1], [2, 2], io_ms=2, h2d_ms=1, update_ms=1)
    res = sim.simulate(model, sim.Cluster(gpus=1), batch_size=8, iterations=3, prefetch=True)
    assert res.iteration_time_s == pytest.approx(7 * MS)
    io1 = res.timeline[(res.timeline.kind == "io") & (res.timeline.iteration == 1)]
    assert float(io1.start_s.iloc[0]) == pytest.approx(2 * MS)  # right after io of iteration 0


def test_prefetch_is_bound_by_a_slow_loader():
    model = make_model([1000], [1], [1], io_ms=5)
    res = sim.simulate(model, sim.Cluster(gpus=1), batch_size=8, iterations=4, prefetch=True)
    assert res.iteration_time_s == pytest.approx(5 * MS)


def test_calibration_is_exact_and_keeps_proportions():
    model = make_model([1000, 1000, 0], [1, 2, 0.5], [2, 4, 1], io_ms=1, h2d_ms=0.5, update_ms=0.5)
    res = sim.simulate(model, sim.Cluster(gpus=1), batch_size=8, calibrate_iteration_s=0.250)
    assert res.iteration_time_s == pytest.approx(0.250, rel=1e-12)
    back = res.timeline[res.timeline.kind == "backward"].set_index("layer").duration_s
    assert back["L1"] / back["L0"] == pytest.approx(2.0)
    with pytest.raises(sim.SimInputError, match="shorter than"):
        sim.simulate(model, sim.Cluster(gpus=1), batch_size=8, calibrate_iteration_s=0.001)


def test_speedup_uses_the_one_gpu_run():
    model = make_model([1000, 1000], [1, 1], [2, 2])  # 6 ms on one GPU
    res = sim.simulate(model, user_cluster(gpus=4, alpha_s=1 * MS, beta_s_per_byte=0), "synceasgd", batch_size=8)
    # one message after backward: 6 + 1 = 7 ms; speedup 4 * 6/7
    assert res.iteration_time_s == pytest.approx(7 * MS)
    assert res.metrics["speedup"] == pytest.approx(4 * 6 / 7)


def test_sweep_rows_match_single_runs():
    model = make_model([100_000, 200_000, 300_000], [1, 1, 1], [1, 2, 3])
    cluster = sim.Cluster(gpus=1, gpus_per_node=2)
    frame = sim.sweep(model, cluster, gpus=[1, 2, 8], schedulers=["wfbp", "optimal"], batch_size=16)
    assert list(zip(frame.gpus, frame.scheduler, strict=True)) == [
        (1, "wfbp"), (1, "optimal"), (2, "wfbp"), (2, "optimal"), (8, "wfbp"), (8, "optimal")
    ]
    one = sim.simulate(model, cluster.with_gpus(8), "optimal", batch_size=16)
    assert frame.iloc[-1].iteration_time_s == pytest.approx(one.iteration_time_s, rel=1e-12)
    assert frame.iloc[-1].speedup == pytest.approx(one.metrics["speedup"], rel=1e-12)


def test_fp16_halves_the_message_bytes():
    model = make_model([1000, 3000], [1, 1], [1, 1])
    b32 = sim.simulate(model, user_cluster(), "synceasgd", batch_size=1).timeline
    b16 = sim.simulate(model, user_cluster(), "synceasgd", batch_size=1, precision="fp16").timeline
    assert int(b32[b32.kind == "comm"].bytes.iloc[0]) == 16_000
    assert int(b16[b16.kind == "comm"].bytes.iloc[0]) == 8_000


def test_chrome_trace_events():
    res = sim.simulate(make_model([1000, 2000], [1, 1], [2, 2]), user_cluster(), "mgwfbp", batch_size=8)
    trace = json.loads(json.dumps(chrome_trace(res.timeline)))
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(res.timeline)
    threads = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert threads == {"io", "h2d", "compute", "comm"}
    comm = [e for e in complete if e["cat"] == "comm"][0]
    row = res.timeline[res.timeline.kind == "comm"].iloc[0]
    assert comm["ts"] == pytest.approx(row.start_s * 1e6)
    assert comm["dur"] == pytest.approx(row.duration_s * 1e6)
    assert comm["args"]["bytes"] == int(row.bytes)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"gpus": 0}, "gpus must be"),
        ({"gpus": 6, "gpus_per_node": 4}, "whole nodes"),
        ({"gpus": 2, "network": "carrier-pigeon"}, "unknown network"),
        ({"gpus": 2, "alpha_s": 1e-3}, "both alpha and beta"),
        ({"gpus": 2, "alpha_s": -1.0, "beta_s_per_byte": 1e-9}, "alpha_s must be"),
    ],
)
def test_cluster_rejects_bad_input(kwargs, match):
    with pytest.raises(sim.SimInputError, match=match):
        sim.Cluster(**kwargs)


def test_simulate_rejects_bad_batch_and_iterations():
    model = make_model([1], [1], [1])
    with pytest.raises(sim.SimInputError, match="batch_size"):
        sim.simulate(model, sim.Cluster(), batch_size=0)
    with pytest.raises(sim.SimInputError, match="iterations"):
        sim.simulate(model, sim.Cluster(), batch_size=1, iterations=0)
    with pytest.raises(sim.SimInputError, match="precision"):
        sim.simulate(model, sim.Cluster(), batch_size=1, precision="int3")


class TestKeptPlans:
    """`simulate` makes a plan once per distinct plan of a model whose times and sizes cannot change."""

    def test_a_repeated_run_reuses_its_plan_and_gives_the_same_result(self):
        model, cluster = sim.load_model("resnet50"), sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe")
        for scheduler in ("optimal", "mgwfbp", "horovod", "wfbp"):
            first = sim.simulate(model, cluster, scheduler, batch_size=32)
            again = sim.simulate(model, cluster, scheduler, batch_size=32)
            assert again.plan is first.plan and again.metrics == first.metrics
            sim.api.clear_caches()
            fresh = sim.simulate(model, cluster, scheduler, batch_size=32)
            assert fresh.plan is not first.plan and fresh.plan == first.plan and fresh.metrics == first.metrics
        other = sim.simulate(model, sim.Cluster(gpus=16, gpus_per_node=4, network="ib-fdr-56"), "mgwfbp", batch_size=32)
        assert other.plan != sim.simulate(model, cluster, "mgwfbp", batch_size=32).plan  # another cost, another plan

    def test_a_model_changed_in_place_is_planned_again(self):
        """A caller's arrays can change between runs: the plan follows them (MG-WFBP merges by the backward
        times: 100 times slower backward hides every message, so it merges none)."""
        n = 6
        model = sim.Model("m", tuple(f"l{i}" for i in range(n)), np.full(n, 1_000_000), np.full(n, 1e-4),
                          np.full(n, 2e-4))
        cluster = sim.Cluster(gpus=8, alpha_s=1e-3, beta_s_per_byte=1e-9)
        before = sim.simulate(model, cluster, "mgwfbp", batch_size=4)
        model.bwd_s[:] = 2e-2  # in place
        after = sim.simulate(model, cluster, "mgwfbp", batch_size=4)
        sim.api.clear_caches()
        assert after.plan == sim.simulate(model, cluster, "mgwfbp", batch_size=4).plan
        assert len(after.plan.groups) > len(before.plan.groups)


def test_a_method_keeps_its_settings_under_options_given_as_an_object():
    """ByteScheduler-PS with SchedulerOptions(credit=4) ran without the method's 4,096,000-byte partitions
    (0.1996 s against 0.3212 s for the same options as a dict; hostile review, 2026-11-25)."""
    from sim.schedulers import SchedulerOptions

    model, cluster = sim.load_model("resnet50"), sim.Cluster(gpus=8)
    as_dict = sim.simulate(model, cluster, batch_size=32, method="ByteScheduler-PS", options={"credit": 4})
    as_object = sim.simulate(model, cluster, batch_size=32, method="ByteScheduler-PS",
                             options=SchedulerOptions.of({"credit": 4}))
    assert as_object.iteration_time_s == as_dict.iteration_time_s
    assert as_object.metrics["settings"] == as_dict.metrics["settings"]
    # the method's own scheduler and architecture, given again, are no conflict
    again = sim.simulate(model, cluster, "bytescheduler", batch_size=32, method="ByteScheduler-PS", architecture="ps",
                         options={"credit": 4})
    assert again.iteration_time_s == as_dict.iteration_time_s


def test_tune_with_a_method_takes_the_methods_scheduler_not_the_knobs_owner():
    """tune --method BSP-PS --knob partition-bytes was refused once methods refused another scheduler beside
    them: tune passed the knob's owner (bytescheduler) as the scheduler (hostile review of 2026-11-25's change)."""
    from sim.tune import tune_setup

    assert tune_setup("partition-bytes", method="BSP-PS")[:2] == ("synceasgd", "ps")
    assert tune_setup("credit", method="ByteScheduler-A2A")[:2] == ("bytescheduler", "allreduce")
    with pytest.raises(sim.SimInputError, match="bucket-mb does nothing for scheduler synceasgd"):
        tune_setup("bucket-mb", method="BSP-A2A")
