"""Gradient compression (`sim.compression`), worked out on paper.

A cost of T(M) = 1 ms + 1e-9 s/B * M, P = 4 GPUs, a GPU of 100 GB/s memory
bandwidth and 10 TFLOP/s fp32, fp32 gradients (4 bytes per element).
"""

from __future__ import annotations

import io

import pytest
from helpers import make_model

import sim
from sim.api import simulate_dag
from sim.catalog import get_gpu
from sim.cli import main
from sim.compression import Compression, compressed_cost, parse_compression, refusal
from sim.core.cost import CommCost
from sim.schedulers.names import BUCKET, BYTESCHEDULER, DDP, DEAR, MGWFBP, WFBP, ZERO1, ZERO3

MS = 1e-3
BASE = CommCost(1 * MS, 1e-9)
MILLION = 1_000_000


def cost(kind, elems=(MILLION,), **kw):
    return compressed_cost(BASE, parse_compression(kind), elems, elem_bytes=4, gpus=4, mem_bw_bytes_per_s=1e11,
                           peak_flops=1e13, **kw)


class TestHandWorked:
    def test_fp16_halves_the_bytes(self):
        # 4 MB -> 2 MB: 1 ms + 2 ms; cast down and up, 12 bytes per element: 1.2e7 B / 1e11 B/s = 0.12 ms
        assert cost("fp16").step_time_s("allreduce", (0,), 4 * MILLION) == pytest.approx(3.12 * MS, rel=1e-12)
        assert cost("bf16").step_time_s("allreduce", (0,), 4 * MILLION) == pytest.approx(3.12 * MS, rel=1e-12)

    def test_topk_all_gathers_values_and_indices(self):
        # k = 10,000 pairs of 8 bytes = 80,000 B per GPU; each receives 4 x 80,000 = 320,000 B:
        # half an all-reduce of 320,000 B = 0.5 * (1 ms + 0.32 ms) = 0.66 ms; kernels: 40 bytes per element
        # (0.4 ms) and 16 bytes per received pair (4 x 10,000 x 16 B = 6.4 us)
        assert cost("topk:0.01").step_time_s("allreduce", (0,), 4 * MILLION) == pytest.approx(
            (0.66 + 0.4 + 0.0064) * MS, rel=1e-12)

    def test_powersgd_all_reduces_two_factors(self):
        # a 1000 x 1000 matrix at rank 4: P and Q of 4,000 elements = 16,000 B each, two all-reduces:
        # 2 * (1 ms + 0.016 ms); kernels: 32 bytes per element = 0.32 ms, more than 6 * 1e6 * 4 flops (2.4 us)
        assert cost("powersgd:4").step_time_s("allreduce", (0,), 4 * MILLION) == pytest.approx(
            (2.032 + 0.32) * MS, rel=1e-12)

    def test_powersgd_leaves_a_layer_it_cannot_shrink(self):
        # 64 elements as 8 x 8 at rank 4: (8 + 8) * 4 = 64 is no smaller; sent as it is (256 B), twice the start-up
        assert cost("powersgd:4", elems=(64,)).step_time_s("allreduce", (0,), 256) == pytest.approx(
            2 * (1 * MS + 128e-9), rel=1e-12)

    def test_a_message_sums_its_layers(self):
        two = cost("fp16", elems=(MILLION, MILLION))
        # 8 MB -> 4 MB in one all-reduce (one start-up): 1 ms + 4 ms + 2 x 0.12 ms
        assert two.step_time_s("allreduce", (0, 1), 8 * MILLION) == pytest.approx(5.24 * MS, rel=1e-12)

    def test_a_partition_takes_its_share_with_a_start_up_of_its_own(self):
        # half of the 4 MB message: 1 MB after fp16, 1 ms + 1 ms, and half the kernels (0.06 ms)
        assert cost("fp16").step_time_s("allreduce", (0,), 2 * MILLION, whole=False) == pytest.approx(
            2.06 * MS, rel=1e-12)

    def test_the_planning_fit_passes_through_the_whole_model(self):
        c = cost("fp16", elems=(MILLION, 3 * MILLION))
        assert float(c.time_s(16 * MILLION)) == pytest.approx(c.step_time_s("allreduce", (0, 1), 16 * MILLION),
                                                              rel=1e-12)
        assert c.alpha_s == BASE.alpha_s


    def test_the_framework_launch_stays_a_launch_after_compression(self):
        # BASE with 0.4 ms of its 1 ms start-up a host launch: fp16 keeps one launch per message (3.12 ms in
        # all, 0.4 ms of it launch); PowerSGD's two all-reduces launch twice (0.8 ms of its 2.352 ms)
        launch = compressed_cost(CommCost(0.6 * MS, 1e-9).with_launch(0.4 * MS), parse_compression("fp16"),
                                 (MILLION,), elem_bytes=4, gpus=4, mem_bw_bytes_per_s=1e11, peak_flops=1e13)
        assert launch.launch_s == pytest.approx(0.4 * MS, rel=1e-12)
        assert launch.step_time_s("launch", (0,), 4 * MILLION) == pytest.approx(0.4 * MS, rel=1e-12)
        assert launch.step_time_s("transfer", (0,), 4 * MILLION) == pytest.approx(2.72 * MS, rel=1e-12)
        assert launch.step_time_s("allreduce", (0,), 4 * MILLION) == pytest.approx(3.12 * MS, rel=1e-12)
        two = compressed_cost(CommCost(0.6 * MS, 1e-9).with_launch(0.4 * MS), parse_compression("powersgd:4"),
                              (MILLION,), elem_bytes=4, gpus=4, mem_bw_bytes_per_s=1e11, peak_flops=1e13)
        assert two.launch_s == pytest.approx(0.8 * MS, rel=1e-12)
        assert two.step_time_s("transfer", (0,), 4 * MILLION) == pytest.approx((2.352 - 0.8) * MS, rel=1e-12)


def test_compression_keeps_bytescheduler_launches_ahead():
    """With the framework's launch cost, fp16 compression halves the bytes and keeps the launch lane:
    never slower than no compression, and its launches are on their own lane."""
    model = make_model([4_000_000, 2_000_000, 6_000_000], [1, 2, 3], [2, 4, 6])
    cluster = sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe")
    plain = sim.simulate(model, cluster, BYTESCHEDULER, batch_size=8)
    half = sim.simulate(model, cluster, BYTESCHEDULER, batch_size=8, compression="fp16")
    assert half.iteration_time_s < plain.iteration_time_s
    lanes = set(half.timeline["lane"])
    assert "launch" in lanes and "launch" in set(plain.timeline["lane"])


def one_layer(params=MILLION):
    return make_model([params], [1.0], [2.0])


def test_simulate_times_the_compressed_message():
    """One layer: the iteration is forward + backward + the compressed all-reduce."""
    cluster = sim.Cluster(gpus=4, alpha_s=1 * MS, beta_s_per_byte=1e-9)
    bw = get_gpu(cluster.gpu).mem_bw_bytes_per_s
    res = sim.simulate(one_layer(), cluster, WFBP, batch_size=1, compression="fp16")
    assert res.iteration_time_s == pytest.approx(3 * MS + 1 * MS + 2e6 * 1e-9 + 12 * MILLION / bw, rel=1e-12)
    assert res.metrics["compression"] == "fp16"
    plain = sim.simulate(one_layer(), cluster, WFBP, batch_size=1)
    assert "compression" not in plain.metrics
    assert plain.iteration_time_s == pytest.approx(3 * MS + 1 * MS + 4e6 * 1e-9, rel=1e-12)


@pytest.mark.parametrize("kind", ["fp16", "topk:0.01", "powersgd:2"])
@pytest.mark.parametrize("scheduler", [WFBP, MGWFBP, DDP, BUCKET, BYTESCHEDULER])
def test_the_fast_path_equals_the_general_engine(scheduler, kind):
    model = make_model([300_000, 0, 2_000_000, 5_000_000], [1, 0.5, 2, 3], [2, 1, 3, 4])
    cluster = sim.Cluster(gpus=8, gpus_per_node=2, network="10gbe")
    a = sim.simulate(model, cluster, scheduler, batch_size=8, compression=kind)
    b = simulate_dag(model, cluster, scheduler, batch_size=8, compression=kind)
    assert a.iteration_time_s == pytest.approx(b.iteration_time_s, rel=1e-12)
    assert a.metrics["comm_s"] == pytest.approx(b.metrics["comm_s"], rel=1e-12)


def test_top_k_sends_less_than_plain_on_a_slow_network():
    model, cluster = sim.load_model("resnet50"), sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe")
    plain = sim.simulate(model, cluster, DDP, batch_size=32)
    sparse = sim.simulate(model, cluster, DDP, batch_size=32, compression="topk:0.001")
    assert sparse.metrics["comm_s"] < plain.metrics["comm_s"]
    assert sparse.iteration_time_s < plain.iteration_time_s


@pytest.mark.parametrize("text, message", [
    ("topk:0", "compression 'topk:0': the top-k ratio must be a number in [1e-06, 1], e.g. topk:0.01"),
    ("topk:2", "compression 'topk:2': the top-k ratio must be a number in [1e-06, 1], e.g. topk:0.01"),
    ("topk:nan", "compression 'topk:nan': the top-k ratio must be a number in [1e-06, 1], e.g. topk:0.01"),
    ("powersgd:-1", "compression 'powersgd:-1': the PowerSGD rank must be a whole number in 1..65,536, e.g. powersgd:4"),
    ("powersgd:1.5", "compression 'powersgd:1.5': the PowerSGD rank must be a whole number in 1..65,536, e.g. powersgd:4"),
    ("foo", "compression 'foo': unknown kind; valid: fp16, bf16, topk:RATIO, powersgd:RANK"),
    ("fp16:3", "compression 'fp16:3': unknown kind; valid: fp16, bf16, topk:RATIO, powersgd:RANK"),
])
def test_bad_compression_is_refused_in_one_line(text, message):
    with pytest.raises(sim.SimInputError) as exc:
        sim.simulate(one_layer(), sim.Cluster(gpus=4), WFBP, batch_size=1, compression=text)
    assert str(exc.value) == message
    code, out, err = run_cli("run", "--model", "tests/data/tiny.csv", "--gpus", "4", "--compression", text)
    assert (code, out, err) == (2, "", f"error: --{message}\n")


def test_schedulers_without_an_all_reduce_are_refused():
    for name in (DEAR, ZERO1, ZERO3):
        assert refusal(name) == (f"compression applies to all-reduce schedulers; {name} splits the all-reduce "
                                 "into a reduce-scatter and an all-gather")
        with pytest.raises(sim.SimInputError, match="applies to all-reduce schedulers"):
            sim.simulate(one_layer(), sim.Cluster(gpus=4), name, batch_size=1, compression="fp16")
    with pytest.raises(sim.SimInputError, match="not to architecture 'ps'"):
        sim.simulate(one_layer(), sim.Cluster(gpus=4), WFBP, batch_size=1, compression="fp16", architecture="ps")
    with pytest.raises(sim.SimInputError, match="does nothing to 16-bit gradients"):
        sim.simulate(one_layer(), sim.Cluster(gpus=4), WFBP, batch_size=1, compression="bf16", precision="fp16")
    assert refusal(WFBP) is None


def test_parse_keeps_its_values():
    assert parse_compression("TopK:0.5") == Compression("topk", ratio=0.5)
    assert str(parse_compression("powersgd:8")) == "powersgd:8"
    assert parse_compression("none") is None and parse_compression(None) is None


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_run_sweep_and_trace_take_the_flag(tmp_path):
    code, out, err = run_cli("run", "--model", "tests/data/tiny.csv", "--gpus", "4", "--compression", "powersgd:2",
                             "--format", "json")
    assert code == 0, err
    assert '"compression": "powersgd:2"' in out
    code, out, err = run_cli("sweep", "--model", "tests/data/tiny.csv", "--gpus", "2,4", "--scheduler", "wfbp,ddp",
                             "--compression", "fp16", "--format", "csv")
    assert code == 0, err
    assert out.splitlines()[0].endswith(",compression") and out.count(",fp16") == 4
    code, out, err = run_cli("trace", "--model", "tests/data/tiny.csv", "--gpus", "4", "--compression", "topk:0.1",
                             "-o", str(tmp_path / "t.json"))
    assert code == 0, err
    code, out, err = run_cli("run", "--model", "tests/data/tiny.csv", "--gpus", "4", "--scheduler", ZERO1,
                             "--compression", "fp16")
    assert code == 2 and err.startswith("error: compression applies to all-reduce schedulers; zero1 splits")


def test_the_compare_page_adds_a_compressed_row_per_all_reduce_scheduler():
    from test_app import csv_app, no_exception, open_page

    at = open_page(csv_app(), "compare")
    at.multiselect(key="compare").set_value([WFBP, DEAR]).run()
    at.selectbox(key="compare_compression").set_value("fp16").run()
    no_exception(at)
    assert list(at.dataframe[0].value["scheduler"]) == [WFBP, DEAR, f"{WFBP} + fp16"]  # DeAR has no all-reduce
    assert at.selectbox(key="compare_open").options == [WFBP, DEAR]
    at.multiselect(key="compare").set_value([DEAR]).run()
    no_exception(at)
    assert at.info and "nothing to compress" in at.info[0].value
