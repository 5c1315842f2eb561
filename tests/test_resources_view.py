"""The dashboard's memory, cost and trace-upload views, without a browser."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

import sim
from dashboard import figures, resources_view, trace_view
from sim.calib import kineto
from sim.calib.kineto import measured_report, read_trace

REPO = Path(__file__).resolve().parent.parent
TRACE = REPO / "tests" / "data" / "kineto" / "nccl_data.json.gz"


@pytest.fixture(scope="module")
def uploaded():
    return trace_view.read_uploaded_trace.__wrapped__(TRACE.name, TRACE.read_bytes())


def scaling_sweep(gpu: str, model: str = "resnet50") -> pd.DataFrame:
    rows = [sim.simulate(sim.load_model(model), sim.Cluster(gpus=p, gpus_per_node=4, gpu=gpu), s, batch_size=8).metrics
            for s in (sim.schedulers.names.WFBP,) for p in (1, 2, 4, 8)]
    return pd.DataFrame(rows)


class TestTraceView:
    def test_the_report_is_the_command_lines(self, uploaded):
        report, layers, why = uploaded
        direct = measured_report(read_trace(TRACE))
        assert why is None and len(layers) == 5 and int(layers["params"].sum()) == 25_557_032
        for key, _, _ in trace_view.COMPARED:
            assert report[key] == direct[key]

    def test_a_small_gzip_that_decompresses_past_the_pages_limit_is_refused(self):
        """A 4 MiB gzip of 190 MB JSON took 11 s and about 1.3 GB before the page's own limit."""
        event = ('{"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float","pid":0,"tid":7,'
                 '"ts":%d,"dur":5,"args":{"stream":7,"device":0}},')
        text = '{"traceEvents":[' + "".join(event % i for i in range(600_000)) + "{}]}"
        assert trace_view.MAX_TRACE_JSON_BYTES < len(text) < kineto.MAX_TRACE_BYTES
        data = gzip.compress(text.encode(), 1)
        assert len(data) < trace_view.MAX_TRACE_UPLOAD_BYTES
        with pytest.raises(sim.SimInputError, match="bomb.json.gz: decompresses to over 64 MB"):
            trace_view.read_uploaded_trace.__wrapped__("bomb.json.gz", data)
        assert len(TRACE.read_bytes()) < trace_view.MAX_TRACE_UPLOAD_BYTES  # the bundled trace (9.8 MB of JSON) is read

    def test_gpu_of_the_trace(self, uploaded):
        assert trace_view.gpu_of(uploaded[0]["trace"]["gpu"]) == "a100"
        assert trace_view.gpu_of("Some GPU", default="t4") == "t4"
        assert trace_view.gpu_of("NVIDIA A100-SXM4-40GB") == "a100-40gb"
        assert trace_view.gpu_of("Tesla V100-SXM2-32GB") == "v100-sxm2"
        assert trace_view.gpu_of("Tesla V100-PCIE-32GB") == "v100-pcie"
        assert trace_view.gpu_of("NVIDIA GeForce RTX 4090") == "rtx4090"

    @pytest.mark.parametrize("mode", [trace_view.ZOO_MODE, trace_view.TRACE_MODE])
    def test_simulated_on_the_traces_gpu_count(self, uploaded, mode):
        report, layers, _ = uploaded
        res = trace_view.simulate_like(report, layers, mode=mode, model="resnet50", gpu="a100", batch_size=32)
        assert res.cluster.gpus == 2 and res.cluster.nodes == 1
        table = trace_view.comparison_table(report, res.metrics)
        assert list(table["figure"]) == [label for _, label, _ in trace_view.COMPARED]
        assert table.loc[0, "measured"] == pytest.approx(report["iteration_time_s"] * 1e3)
        assert table.loc[0, "simulated"] == pytest.approx(res.iteration_time_s * 1e3)
        if mode == trace_view.ZOO_MODE:  # one GPU calibrated to measured iteration - exposed communication
            t1 = report["iteration_time_s"] - report["comm_exposed_s"]
            assert res.metrics["single_gpu_iteration_time_s"] == pytest.approx(t1, rel=1e-9)
        else:  # measured all-reduce per bucket: five messages
            assert res.metrics["num_messages"] == 5

    def test_measured_figure_stacks_to_the_iteration(self, uploaded):
        report = uploaded[0]
        fig = trace_view.measured_figure(report)
        rest, exposed = fig.data[0], fig.data[1]
        for r, e, step in zip(rest.y, exposed.y, report["steps"], strict=True):
            assert r + e == pytest.approx(step["iteration_time_s"] * 1e3, rel=1e-9)
        assert "Measured · nccl_data.json.gz" in fig.layout.title.text

    @pytest.mark.parametrize(("name", "data", "expected"), [
        ("bad.json", b"{not json", "bad.json: not valid JSON at character 1"),
        ("empty.json", b"{}", "empty.json"),
        ("big.json.gz", b"0" * (trace_view.MAX_TRACE_UPLOAD_BYTES + 1), f"the limit is {trace_view.MAX_TRACE_UPLOAD_MB} MiB"),
    ])
    def test_bad_uploads_are_one_line_errors(self, name, data, expected):
        with pytest.raises(sim.SimInputError) as info:
            trace_view.read_uploaded_trace.__wrapped__(name, data)
        assert expected in str(info.value) and "\n" not in str(info.value)


class TestResourcesView:
    def test_memory_figure_stacks_the_parts(self):
        m = sim.simulate(sim.load_model("resnet50"), sim.Cluster(gpus=2, gpu="t4"), batch_size=32).metrics
        fig = resources_view.memory_figure(m)
        assert sum(bar.x[0] for bar in fig.data) == pytest.approx(m["memory_per_gpu_bytes"] / 1e9, rel=1e-12)
        assert "(fits)" in fig.layout.title.text

    def test_grey_unfit_covers_exactly_the_unfit_points(self):
        sweep = scaling_sweep("t4", "gpt2")
        assert not sweep["fits_in_memory"].any()
        fig = resources_view.grey_unfit(figures.scaling_figure(sweep), sweep)
        grey = [t for t in fig.data if t.name == "does not fit in GPU memory"]
        assert len(grey) == 3 and all(list(t.x) == [1, 2, 4, 8] for t in grey)
        fitting = scaling_sweep("a100")
        assert fitting["fits_in_memory"].all()
        plain = figures.scaling_figure(fitting)
        assert len(resources_view.grey_unfit(plain, fitting).data) == len(figures.scaling_figure(fitting).data)

    def test_samples_per_dollar(self):
        sweep = scaling_sweep("a100")
        fig = resources_view.samples_per_dollar_figure(sweep)
        want = 1000.0 / sweep["cost_usd_per_1000_samples"]
        assert list(fig.data[0].y) == pytest.approx(list(want), rel=1e-12)


def test_timeline_and_scaling_pages_render_the_new_panels():
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=180)
    for key, value in {"model": "gpt2", "gpus": 8, "per_node": 4, "gpu": "t4", "batch": 8}.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(e.label.startswith("Memory per GPU") for e in at.expander)
    assert "mem_optimizer" in [s.key for s in at.selectbox]
