"""The dashboard's pure figure and table builders, on small hand-built models."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sim
from dashboard import aggregate, figures, tables
from sim.dag import build_dag
from sim.methods import METHODS
from sim.schedulers.registry import scheduler_names

LAYERS = pd.DataFrame(
    {
        "name": ["conv1", "relu1", "conv2", "fc1", "fc2"],
        "params": [1_000, 0, 250_000, 4_000_000, 10_000],
        "fwd_ms": [1.0, 0.5, 1.0, 0.5, 0.2],
        "bwd_ms": [2.0, 0.5, 2.0, 1.0, 0.4],
    }
)


def make_model(**kw) -> sim.Model:
    return sim.model_from_frame(LAYERS, "five", **kw)


def cluster(gpus: int = 4) -> sim.Cluster:
    return sim.Cluster(gpus=gpus, alpha_s=1e-3, beta_s_per_byte=1e-9)


def run(scheduler: str = "mgwfbp", gpus: int = 4, iterations: int = 1, **model_kw) -> sim.SimResult:
    return sim.simulate(make_model(**model_kw), cluster(gpus), scheduler, batch_size=8, iterations=iterations)


def bar_traces(fig: go.Figure) -> list[go.Bar]:
    """The task bars (one per task), without the hidden/exposed fill of communication."""
    return [t for t in fig.data if isinstance(t, go.Bar) and not str(t.legendgroup).startswith("overlap")]


def overlap_traces(fig: go.Figure) -> dict[str, go.Bar]:
    return {t.legendgroup: t for t in fig.data if str(t.legendgroup).startswith("overlap")}


class TestGantt:
    def test_one_bar_per_task_with_non_zero_duration(self):
        res = run(iterations=2)
        fig = figures.gantt_figure(res.timeline)
        n_bars = sum(len(t.x) for t in bar_traces(fig))
        assert n_bars == int((res.timeline["duration_s"] > 0).sum())

    def test_bars_span_start_to_end_in_ms(self):
        res = run()
        tasks = res.timeline.loc[res.timeline["duration_s"] > 0]
        fig = figures.gantt_figure(res.timeline)
        ends = sorted(float(b + x) for t in bar_traces(fig) for b, x in zip(t.base, t.x, strict=True))
        assert ends == pytest.approx(sorted(tasks["end_s"] * 1e3))

    def test_lanes_are_named_compute_and_comm(self):
        fig = figures.gantt_figure(run().timeline)
        lanes = {y for t in bar_traces(fig) for y in t.y}
        assert lanes == {"GPU compute", "all-reduce"}
        assert list(fig.layout.yaxis.categoryarray) == ["all-reduce", "GPU compute"]

    def test_io_and_h2d_lanes_only_when_non_zero(self):
        fig = figures.gantt_figure(run(io_ms=3.0, h2d_ms=1.0).timeline)
        lanes = {y for t in bar_traces(fig) for y in t.y}
        assert lanes == {"I/O", "H2D copy", "GPU compute", "all-reduce"}

    def test_one_gpu_has_no_comm_lane(self):
        fig = figures.gantt_figure(run(gpus=1).timeline)
        assert {y for t in bar_traces(fig) for y in t.y} == {"GPU compute"}

    def test_kinds_have_distinct_colours_and_legend_entries(self):
        fig = figures.gantt_figure(run().timeline)
        names = [t.name for t in bar_traces(fig)]
        assert names == ["forward", "backward", "all-reduce"]  # no update time in a CSV model
        colours = [t.marker.color for t in bar_traces(fig)]
        assert len(set(colours)) == len(colours)
        legend = [t.name for t in fig.data if t.showlegend is not False]
        assert legend[-2:] == ["forward", "backward"] and "all-reduce" not in legend  # comm: by its fill
        assert set(legend[:-2]) <= {"all-reduce hidden behind compute", "all-reduce exposed (GPU waits)"}
        assert legend[:-2]

    def test_hover_shows_layer_bytes_start_and_duration(self):
        res = run("wfbp")
        fig = figures.gantt_figure(res.timeline)
        comm = next(t for t in bar_traces(fig) if t.name == "all-reduce")
        for word in ("bytes", "start", "duration"):
            assert word in comm.hovertemplate
        first = res.timeline.loc[res.timeline["kind"] == "comm"].iloc[0]
        row = comm.customdata[0]
        assert first["layer"] in row[1]
        assert row[2] == tables.fmt_bytes(first["bytes"])

    def test_merged_message_is_labelled_with_its_layer_count(self):
        res = run("synceasgd")  # one message with the 4 layers that have parameters
        fig = figures.gantt_figure(res.timeline)
        comm = next(t for t in bar_traces(fig) if t.name == "all-reduce")
        assert list(comm.text) == ["g0 (4 layers)"]

    def test_single_layer_messages_are_labelled_with_the_layer(self):
        res = run("wfbp")
        comm = next(t for t in bar_traces(figures.gantt_figure(res.timeline)) if t.name == "all-reduce")
        assert list(comm.text) == ["fc2", "fc1", "conv2", "conv1"]  # sent output layer first
        assert comm.customdata[0][1] == "g0: fc2"

    def test_zero_duration_tasks_are_left_out(self):
        frame = figures.gantt_frame(run().timeline)
        assert (frame["duration_ms"] > 0).all()
        assert not frame["kind"].isin(["io", "h2d", "update"]).any()


class TestOverlapShading:
    # compute 0-2 and 3-5 ms (backward, then update), messages 1-4 and 5-6 ms
    TIMELINE = pd.DataFrame({
        "kind": ["backward", "update", "comm", "comm"],
        "layer": ["a", "", "a", "b"],
        "group": [-1, -1, 0, 1],
        "resource": ["compute", "compute", "comm", "comm"],
        "start_s": [0.0, 0.003, 0.001, 0.005],
        "end_s": [0.002, 0.005, 0.004, 0.006],
        "duration_s": [0.002, 0.002, 0.003, 0.001],
        "bytes": [0, 0, 100, 100],
        "iteration": [0, 0, 0, 0],
    })

    def test_hand_worked_split(self):
        pieces = figures.comm_overlap_segments(self.TIMELINE)
        got = [(r.task, round(r.start_s * 1e3, 9), round(r.end_s * 1e3, 9), r.hidden) for r in pieces.itertuples()]
        # message 1-4 ms: hidden 1-2, exposed 2-3 (no compute), hidden 3-4; message 5-6 ms: exposed
        assert got == [(2, 1.0, 2.0, True), (2, 2.0, 3.0, False), (2, 3.0, 4.0, True), (3, 5.0, 6.0, False)]
        hidden = pieces.loc[pieces["hidden"], "duration_s"].sum()
        assert hidden == pytest.approx(0.002)
        assert float(tables.overlap_pct(hidden, 0.004)) == pytest.approx(50.0)

    def test_workers_are_kept_apart(self):
        tl = self.TIMELINE.assign(worker=[0, 0, 1, 1])  # the messages belong to a worker that does not compute
        pieces = figures.comm_overlap_segments(tl)
        assert not pieces["hidden"].any() and pieces["duration_s"].sum() == pytest.approx(0.004)

    @pytest.mark.parametrize("scheduler", ["wfbp", "mgwfbp", "synceasgd", "optimal"])
    def test_pieces_add_up_to_the_metrics(self, scheduler):
        res = run(scheduler)
        pieces = figures.comm_overlap_segments(res.timeline)
        assert pieces.loc[pieces["hidden"], "duration_s"].sum() == pytest.approx(res.metrics["comm_hidden_s"], abs=1e-12)
        assert pieces.loc[~pieces["hidden"], "duration_s"].sum() == pytest.approx(res.metrics["comm_exposed_s"], abs=1e-12)

    @pytest.mark.parametrize("run_kw", [{"scheduler": n} for n in scheduler_names()] + [{"method": n} for n in METHODS],
                             ids=lambda kw: next(iter(kw.values())))
    @pytest.mark.parametrize("iterations", [1, 3])
    def test_the_drawn_shading_is_the_metrics_for_every_scheduler_and_method(self, run_kw, iterations):
        """Each drawn iteration's hidden and exposed communication (the waits with it) is the metrics', for
        every scheduler and method with one communication lane (parallel lanes, a parameter server's push
        and pull or ByteScheduler's launches, each shade their own bars). DeAR's last drawn messages looked
        exposed (144 ms against 14 on vgg16, 64 GPUs: the next forward pass they run beside was not
        drawn): `tables.drawn_timeline` draws it."""
        try:
            res = sim.simulate(sim.load_model("vgg16"), sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe"),
                               batch_size=32, iterations=iterations, **run_kw)
        except sim.SimInputError:
            return  # a combination the method refuses
        drawn = tables.drawn_timeline(res)
        lanes = set(drawn["resource"]) - {"compute", "io", "h2d"}
        if len(lanes) > 1:
            return
        pieces = figures.comm_overlap_segments(drawn)
        # a piece belongs to its message's iteration (a wait, task -1, to the iteration it starts in)
        of_task = drawn["iteration"].reindex(pieces["task"]).to_numpy()
        starts = drawn.groupby("iteration")["start_s"].min().to_numpy()
        of_start = np.searchsorted(starts, pieces["start_s"].to_numpy(), side="right") - 1
        pieces = pieces.assign(iteration=np.where(pieces["task"].to_numpy() >= 0, of_task, of_start))
        for k in range(iterations):
            mine = pieces[pieces["iteration"] == k]
            assert mine.loc[mine["hidden"], "duration_s"].sum() == pytest.approx(res.metrics["comm_hidden_s"],
                                                                                  rel=1e-9, abs=1e-12), k
            assert mine.loc[~mine["hidden"], "duration_s"].sum() == pytest.approx(res.metrics["comm_exposed_s"],
                                                                                   rel=1e-9, abs=1e-12), k

    def test_only_a_small_per_layer_update_run_keeps_its_arrays(self):
        """`SimResult.timeline_of` holds the run's arrays: kept for a per-layer-update plan up to
        `KEPT_RUN_LAYER_ITERATIONS` only (a 100k-layer DeAR result held 190 MiB more; the review)."""
        from sim.core.timeline import KEPT_RUN_LAYER_ITERATIONS

        cluster = sim.Cluster(gpus=8, gpus_per_node=4)
        assert run("dear").timeline_of is not None and run("wfbp").timeline_of is None
        n = KEPT_RUN_LAYER_ITERATIONS // 5 + 1  # five iterations timed: just over
        wide = sim.Model("wide", tuple(f"l{i}" for i in range(n)), np.full(n, 1000), np.full(n, 1e-5), np.full(n, 2e-5))
        big = sim.simulate(wide, cluster, "dear", batch_size=8)
        assert big.timeline_of is None and tables.drawn_timeline(big) is big.timeline  # drawn as it is

    def test_touching_pieces_of_one_shading_are_drawn_as_one_bar(self):
        # messages 2-3 and 3-4 ms back to back with no compute under them: one exposed bar 2-4 ms,
        # the hidden 1-2 ms piece apart; the browser draws one bar per point of a trace
        tl = pd.DataFrame({"kind": ["backward", "comm", "comm", "comm"], "layer": ["a", "a", "b", "c"],
                           "group": [-1, 0, 1, 2], "resource": ["compute", "comm", "comm", "comm"],
                           "start_s": [0.0, 0.001, 0.002, 0.003], "end_s": [0.002, 0.002, 0.003, 0.004],
                           "duration_s": [0.002, 0.001, 0.001, 0.001], "bytes": [0, 1, 1, 1], "iteration": [0] * 4})
        bars, pieces, _ = figures.display_frames(tl)
        exposed = figures.shading_runs(pieces.loc[~pieces["hidden"]])
        assert [(lane, round(a * 1e3, 9), round(b * 1e3, 9)) for lane, a, b in exposed.itertuples(index=False)] == [
            ("all-reduce", 2.0, 4.0)]
        fills = overlap_traces(figures.gantt_figure(tl))
        assert fills["overlap-exposed"].x == pytest.approx((2.0,)) and fills["overlap-exposed"].base == pytest.approx((2.0,))
        assert fills["overlap-hidden"].x == pytest.approx((1.0,)) and fills["overlap-hidden"].base == pytest.approx((1.0,))

    def test_a_wait_for_horovods_tick_is_shaded_as_exposed(self):
        # ResNet-50 fp16 on 2 GPUs of a node: the last fused message waits 0.84 ms for the tick after
        # backward with nothing on the wire; the metrics count it as exposed, and the chart shades it so
        m = sim.load_model("resnet50")
        res = sim.simulate(m, sim.Cluster(gpus=2, gpus_per_node=2, network="10gbe"), "horovod", batch_size=32,
                           precision="fp16")
        wait = res.metrics["comm_wait_s"]
        assert wait > 1e-4
        _, pieces, _ = figures.display_frames(res.timeline)
        waits = pieces.loc[pieces["task"] == -1]
        assert not waits["hidden"].any() and set(waits["lane"]) == {"all-reduce"}
        last = waits.loc[waits["start_s"].idxmax()]
        assert last["duration_s"] == pytest.approx(wait, rel=1e-9)
        m = res.metrics
        assert m["compute_s"] + m["comm_exposed_s"] == pytest.approx(m["iteration_time_s"], rel=1e-9)

    @pytest.mark.parametrize("run_kw", [{"scheduler": n} for n in scheduler_names()] + [{"method": n} for n in METHODS],
                             ids=lambda kw: next(iter(kw.values())))
    def test_the_shaded_waits_are_the_metrics_wait_for_every_scheduler_and_method(self, run_kw):
        # ResNet-50 fp16 on 2 GPUs of a node, 2 iterations: only Horovod's tick leaves the wire idle
        # after backward; on every other scheduler and method (parameter servers' two lanes included)
        # no wait is drawn, and the drawn waits of the last iteration are the metrics' comm_wait_s
        try:
            res = sim.simulate(sim.load_model("resnet50"), sim.Cluster(gpus=2, gpus_per_node=2, network="10gbe"),
                               batch_size=32, precision="fp16", iterations=2, **run_kw)
        except sim.SimInputError:
            return  # a combination the method refuses
        _, pieces, _ = figures.display_frames(res.timeline)
        waits = pieces.loc[pieces["task"] == -1] if len(pieces) else pieces
        last_start = res.timeline.loc[res.timeline["iteration"] == res.timeline["iteration"].max(), "start_s"].min()
        drawn = float(waits.loc[waits["start_s"] >= last_start, "duration_s"].sum()) if len(waits) else 0.0
        assert drawn == pytest.approx(res.metrics["comm_wait_s"], rel=1e-9, abs=1e-12)
        assert (drawn > 0) == (run_kw.get("scheduler") == "horovod")

    def test_gantt_fills_messages_by_overlap(self):
        res = run("wfbp")
        fig = figures.gantt_figure(res.timeline)
        fills = overlap_traces(fig)
        assert set(fills) <= {"overlap-hidden", "overlap-exposed"} and fills
        shaded = sum(float(np.sum(t.x)) for t in fills.values())
        assert shaded == pytest.approx(res.timeline.loc[res.timeline["kind"] == "comm", "duration_s"].sum() * 1e3)
        comm = next(t for t in bar_traces(fig) if t.name == "all-reduce")
        assert comm.marker.color == "rgba(0,0,0,0)"  # outline over the fill, with the hover and label
        assert fig.layout.legend.y < 0 and fig.layout.uirevision


class TestOwnStyle:
    """The Gantt carries the look of Streamlit's chart theme itself (`figures.OWN_STYLE`), without a
    template and with plain arrays, so that Plotly.react can tell a redraw of it changes nothing."""

    def test_styled_keeps_the_figure_values_over_the_style(self):
        style = {"font": {"size": 12, "color": "grey"}, "hovermode": "closest", "xaxis": {"showgrid": False}}
        layout = {"font": {"color": "red"}, "xaxis": {"title": {"text": "t"}}, "height": 300}
        assert figures.styled(layout, style) == {
            "font": {"size": 12, "color": "red"}, "hovermode": "closest",
            "xaxis": {"showgrid": False, "title": {"text": "t"}}, "height": 300}
        assert style == {"font": {"size": 12, "color": "grey"}, "hovermode": "closest", "xaxis": {"showgrid": False}}

    def test_gantt_has_no_template_and_no_typed_arrays(self):
        fig = figures.gantt_figure(run(iterations=2).timeline, "five · mgwfbp")
        spec = json.loads(fig.to_json())
        assert spec["layout"]["template"] is None
        assert "bdata" not in json.dumps(spec)
        assert spec["layout"]["font"] == figures.OWN_STYLE["font"]
        assert spec["layout"]["xaxis"]["title"]["text"] == "time (ms)"  # the figure's own values win
        assert spec["layout"]["xaxis"]["showgrid"] is False  # the style fills in the rest
        assert spec["layout"]["title"]["font"]["weight"] == 700
        for trace in spec["data"]:
            assert all(isinstance(trace[k], list) for k in ("x", "y", "base"))


class TestGanttSvg:
    def test_one_rect_per_task_and_per_overlap_piece(self):
        import xml.etree.ElementTree as ET

        res = run("wfbp", iterations=2)
        svg = figures.gantt_svg(res.timeline, "<b>five</b> · wfbp")
        root = ET.fromstring(svg)
        rects = root.findall("{http://www.w3.org/2000/svg}rect")
        tasks = int((res.timeline["duration_s"] > 0).sum())
        pieces = len(figures.comm_overlap_segments(res.timeline))
        assert len(rects) == 1 + tasks + pieces  # the white background first
        texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
        assert "five · wfbp" in texts and "time (ms)" in texts and {"GPU compute", "all-reduce"} <= set(texts)


class TestGanttStack:
    def test_rows_share_one_time_axis_and_one_legend(self):
        results = {s: run(s) for s in ("wfbp", "mgwfbp", "optimal")}
        fig = figures.gantt_stack_figure({s: r.timeline for s, r in results.items()})
        assert fig.layout.xaxis.matches == fig.layout.xaxis2.matches == "x3"  # all follow the bottom axis
        legend = [t.name for t in fig.data if t.showlegend]
        assert sorted(legend) == sorted(set(legend))
        assert "all-reduce" not in legend  # messages appear by their hidden and exposed fill
        n_bars = sum(len(t.x) for t in bar_traces(fig))
        assert n_bars == sum(int((r.timeline["duration_s"] > 0).sum()) for r in results.values())


class TestBreakdown:
    def test_compute_exposed_and_idle_add_up_to_the_iteration(self):
        metrics = pd.DataFrame([run(s).metrics for s in ("wfbp", "synceasgd", "optimal")])
        fig = figures.breakdown_figure(metrics)
        along = [t for t in bar_traces(fig) if not t.name.startswith("all-reduce hidden")]
        stacked = np.sum([np.asarray(t.x, float) for t in along], axis=0)
        assert stacked == pytest.approx(metrics["iteration_time_s"].to_numpy() * 1e3)
        hidden = next(t for t in bar_traces(fig) if t.name.startswith("all-reduce hidden"))
        assert list(hidden.x) == pytest.approx(list(metrics["comm_hidden_s"] * 1e3))

    def test_idle_is_clipped_and_the_overshoot_reported(self):
        metrics = pd.DataFrame([{"scheduler": "x", "iteration_time_s": 1.0, "compute_s": 0.6, "comm_s": 0.8,
                                 "comm_hidden_s": 0.2, "comm_exposed_s": 0.6}])
        row = figures.breakdown_frame(metrics).iloc[0]
        assert row["idle_ms"] == 0 and row["over_ms"] == pytest.approx(200)
        assert row["overlap_pct"] == pytest.approx(25)

    def test_marks_the_iteration_time(self):
        metrics = pd.DataFrame([run(s).metrics for s in ("wfbp", "mgwfbp")])
        fig = figures.breakdown_figure(metrics)
        marker = next(t for t in fig.data if t.name == "iteration time")
        assert list(marker.x) == pytest.approx(list(metrics["iteration_time_s"] * 1e3))


def sweep_frame(networks=("10gbe",)) -> pd.DataFrame:
    model = make_model()
    frames = [
        sim.sweep(model, sim.Cluster(gpus=1, gpus_per_node=4, network=net), gpus=[1, 2, 4, 8, 16],
                  schedulers=["wfbp", "mgwfbp"], batch_size=8)
        for net in networks
    ]
    return pd.concat(frames, ignore_index=True)


class TestScaling:
    def test_marks_the_picked_gpu_count_on_the_log_axis(self):
        fig = figures.scaling_figure(sweep_frame(), picked_gpus=8)
        assert [shape.x0 for shape in fig.layout.shapes] == [8, 8, 8]
        (note,) = fig.layout.annotations[3:]  # after the three panel titles
        assert note.text == "8 GPUs" and note.x == pytest.approx(np.log10(8))

    def test_has_an_ideal_line_in_each_panel(self):
        df = sweep_frame()
        fig = figures.scaling_figure(df)
        ideal = [t for t in fig.data if t.legendgroup == "ideal"]
        assert len(ideal) == 3
        throughput, speedup, efficiency = ideal
        assert list(speedup.y) == pytest.approx(list(speedup.x))
        assert list(efficiency.y) == pytest.approx([1.0] * len(efficiency.x))
        t1 = df["single_gpu_iteration_time_s"].iloc[0]
        assert throughput.y[0] == pytest.approx(8 / t1)  # one GPU, batch 8

    def test_no_curve_rises_above_the_ideal_throughput(self):
        """A scheduler that updates per layer reads the next batch during its update, on one GPU too: with io
        its one-GPU reference is the shortest, and the ideal line drawn from the first row's (wfbp's) put
        DeAR's throughput above it at every GPU count."""
        model = dataclasses.replace(make_model(), io_s=30e-3, h2d_s=5e-3, update_s=3e-3)
        df = sim.sweep(model, sim.Cluster(gpus=1, network="nvlink3"), gpus=[1, 2, 4, 8], schedulers=["wfbp", "dear"],
                       batch_size=8)
        fig = figures.scaling_figure(df)
        ideal = next(t for t in fig.data if t.legendgroup == "ideal")
        for curve in (t for t in fig.data if t.legendgroup != "ideal" and t.xaxis in (None, "x")):
            line = dict(zip(ideal.x, ideal.y, strict=True))
            assert all(y <= line[x] * (1 + 1e-9) for x, y in zip(curve.x, curve.y, strict=True)), curve.name

    def test_one_curve_per_scheduler_and_network_on_a_log2_axis(self):
        fig = figures.scaling_figure(sweep_frame(("10gbe", "100gbe")), picked_gpus=8)
        curves = {t.name for t in fig.data if t.legendgroup != "ideal"}
        assert curves == {"wfbp · 10gbe", "mgwfbp · 10gbe", "wfbp · 100gbe", "mgwfbp · 100gbe"}
        assert fig.layout.xaxis.type == "log"
        assert list(fig.layout.xaxis.tickvals) == [1, 2, 4, 8, 16]

    def test_faster_network_scales_better(self):
        df = sweep_frame(("10gbe", "100gbe"))
        at16 = df.loc[(df["gpus"] == 16) & (df["scheduler"] == "mgwfbp")].set_index("network")
        assert at16.loc["100gbe", "throughput_samples_per_s"] > at16.loc["10gbe", "throughput_samples_per_s"]


class TestModelFigures:
    def test_layer_table_splits_allreduce_into_alpha_and_beta_m(self):
        res = run()
        cost = res.cluster.comm_cost()
        layers = tables.layer_table(res.model, cost, "fp32", res.groups)
        has = layers["params"] > 0
        expected = cost.time_s(layers.loc[has, "grad_bytes"].to_numpy()) * 1e3
        assert layers.loc[has, "allreduce_ms"].to_numpy() == pytest.approx(expected)
        assert (layers.loc[~has, ["alpha_ms", "beta_ms"]] == 0).all().all()
        assert set(layers.loc[has, "message"]) == set(range(len(res.groups)))

    def test_layer_table_uses_measured_times_in_trace_mode(self):
        frame = LAYERS.assign(comm_ms=[0.5, 0.0, 1.5, 6.0, 0.4])
        model = sim.model_from_frame(frame, "traced")
        cost = cluster().comm_cost(model, "fp32")
        layers = tables.layer_table(model, cost, "fp32")
        has = layers["params"] > 0
        assert list(layers.loc[has, "allreduce_ms"]) == pytest.approx([0.5, 1.5, 6.0, 0.4])
        assert (layers["alpha_ms"] <= layers["allreduce_ms"] + 1e-12).all()
        assert (layers.loc[~has, "allreduce_ms"] == 0).all()

    def test_layer_figure_has_three_panels(self):
        res = run()
        layers = tables.layer_table(res.model, res.cluster.comm_cost(), "fp32", res.groups)
        fig = figures.layer_figure(layers)
        assert [t.name for t in fig.data] == ["parameters", "forward", "backward", "α (start-up)",
                                              "β·M (transfer)"]
        assert all(len(t.x) == len(LAYERS) for t in fig.data)

    def test_a_100k_layer_model_is_drawn_in_bins_that_keep_the_sums(self):
        """The per-layer bars of a 100k-layer model were 5 x 100k bars (13 MiB of chart data): the browser's tab
        hung for minutes. Above `tables.MAX_LAYER_BARS` layers, consecutive layers share a bar, sums kept."""
        n = 100_000
        rng = np.random.default_rng(0)
        frame = pd.DataFrame({"name": [f"l{i}" for i in range(n)], "params": rng.integers(0, 50_000, n),
                              "fwd_ms": rng.uniform(0.001, 0.02, n), "bwd_ms": rng.uniform(0.002, 0.04, n)})
        model = sim.model_from_frame(frame, "big")
        res = sim.simulate(model, cluster(16), "mgwfbp", batch_size=32)
        layers = tables.layer_table(res.model, res.cluster.comm_cost(), "fp32", res.groups)
        fig = figures.layer_figure(layers)
        assert all(len(t.x) <= tables.MAX_LAYER_BARS for t in fig.data)
        assert len(fig.to_json()) < 1 * 2**20
        for trace, column in zip(fig.data, ["params", "fwd_ms", "bwd_ms", "alpha_ms", "beta_ms"], strict=True):
            assert float(np.sum(trace.y)) == pytest.approx(float(layers[column].sum()), rel=1e-9)
        assert "layers" in fig.data[0].customdata[0]  # the hover names the layers a bar holds
        assert "per bar" in fig.layout.annotations[0].text  # the panel says the bars are summed

    def test_dag_layout_places_every_task(self):
        res = run("mgwfbp")
        g = build_dag(res.model, res.plan, res.cluster.comm_cost(), iterations=1)
        pos = figures.dag_positions(g)
        assert set(pos) == set(g.nodes)
        assert pos[(0, "forward", 3)] == (3.0, 2.0)
        assert pos[(0, "backward", 3)] == (3.0, 1.0)
        for node in g.nodes:
            if node[1] == "comm":
                members = [p[2] for p in g.predecessors(node) if p[1] == "backward"]
                assert min(members) <= pos[node][0] <= max(members)
        fig = figures.dag_figure(g)
        drawn = sum(len(t.x) for t in fig.data if t.mode == "markers+text")
        assert drawn == g.number_of_nodes()


class TestTables:
    @pytest.mark.parametrize(("pct", "expected"), [
        (0.0, "0 %"), (0.00039, "+0.00039 %"), (-0.0004, "-0.0004 %"), (1.234, "+1.23 %"), (-12.5, "-12.5 %"),
        (0.049, "+0.049 %"), (250.0, "+250 %"), (float("nan"), "n/a"),
    ])
    def test_a_change_in_percent_is_never_shown_as_zero_when_it_is_not(self, pct, expected):
        """Compare showed "MG-WFBP vs optimal: +0.00%" above "+0.01 ms" (a gap of 4e-6), and the tuner
        "+0.0 % against the default" for a best value that differs from it: a change that rounds to zero."""
        assert tables.fmt_change_pct(pct) == expected

    def test_metrics_table_in_display_units(self):
        res = run()
        row = tables.metrics_table([res.metrics]).iloc[0]
        assert row["iteration (ms)"] == pytest.approx(res.iteration_time_s * 1e3)
        assert row["scaling efficiency (%)"] == pytest.approx(res.metrics["scaling_efficiency"] * 100)

    def test_message_table_lists_one_iteration_in_sending_order(self):
        res = run("mgwfbp", iterations=2)
        table = tables.message_table(res.timeline)
        assert list(table["message"]) == [f"g{i}" for i in range(len(res.groups))]
        assert list(table["layers"]) == [len(g) for g in res.groups]
        assert (table["start (ms)"].diff().dropna() > 0).all()

    def test_fmt_bytes(self):
        assert tables.fmt_bytes(512) == "512 B"
        assert tables.fmt_bytes(1536) == "1.5 KiB"
        assert tables.fmt_bytes(3 * 2**20) == "3.0 MiB"

    def test_short_layers(self):
        assert tables.short_layers("a+b") == "a, b"
        assert tables.short_layers("a+b+c+d+e") == "a, b, c … (+2 more)"

    def test_scaling_counts_fill_whole_nodes(self):
        assert tables.scaling_gpu_counts(4) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
        assert tables.scaling_gpu_counts(3, 12) == [1, 2, 3, 6, 12, 24, 48, 96, 192, 384, 768]

    @given(per_node=st.integers(1, 64), current=st.integers(1, 2048))
    def test_scaling_counts_are_all_valid_clusters(self, per_node, current):
        counts = tables.scaling_gpu_counts(per_node, current)
        assert counts == sorted(set(counts))
        assert 1 in counts
        for p in counts:
            sim.Cluster(gpus=p, gpus_per_node=per_node)  # does not raise
            assert p <= 1024 or p == current


class TestLargeTimelines:
    """Over `MAX_BARS` bars a timeline is merged for display; the full trace stays downloadable."""

    @staticmethod
    def _model(n: int):
        rng = np.random.default_rng(0)
        frame = pd.DataFrame({"name": [f"l{i}" for i in range(n)], "params": rng.integers(0, 50_000, n),
                              "fwd_ms": np.round(rng.uniform(0.001, 0.02, n), 4),
                              "bwd_ms": np.round(rng.uniform(0.002, 0.04, n), 4)})
        return sim.model_from_frame(frame, "big")

    def test_small_timelines_are_drawn_bar_by_bar(self):
        res = sim.simulate(self._model(50), sim.Cluster(gpus=16, gpus_per_node=4), "wfbp", batch_size=32)
        fig = figures.gantt_figure(res.timeline)
        assert figures.aggregation_note(fig) is None
        drawn = sum(len(t.x) for t in fig.data if t.hoverinfo != "skip")
        assert drawn == len(figures.gantt_frame(res.timeline))

    def test_a_100k_layer_model_is_merged_under_5_mb(self):
        model = self._model(100_000)
        res = sim.simulate(model, sim.Cluster(gpus=16, gpus_per_node=4), "wfbp", batch_size=32)
        fig = figures.gantt_figure(res.timeline, "100k layers")
        spec = fig.to_json()
        assert len(spec.encode()) < 5 * 2**20  # the chart data Streamlit sends (23.4 MB before merging)
        bars = figures.gantt_frame(res.timeline)
        assert len(bars) > figures.MAX_BARS
        note = figures.aggregation_note(fig)
        assert note and f"{len(bars):,} bars" in note
        drawn = [t for t in fig.data if t.hoverinfo != "skip"]
        assert sum(len(t.x) for t in drawn) <= figures.MAX_BARS
        # every task's time is in some merged bar: per kind, the busy time adds up
        merged = aggregate.merge_bars(bars)
        for kind, part in bars.groupby("kind"):
            assert merged.loc[merged["kind"] == kind, "busy_ms"].sum() == pytest.approx(part["duration_ms"].sum())
            assert merged.loc[merged["kind"] == kind, "tasks"].sum() == len(part)
        # the downloads keep every task
        assert len(res.timeline) >= len(bars)

    def test_merged_bars_cover_their_tasks(self):
        res = sim.simulate(self._model(3000), sim.Cluster(gpus=16, gpus_per_node=4), "wfbp", batch_size=32)
        bars = figures.gantt_frame(res.timeline)
        merged = aggregate.merge_bars(bars, bins=50)
        end = merged["start_ms"] + merged["duration_ms"]
        assert (merged["busy_ms"] <= merged["duration_ms"] * (1 + 1e-9) + 1e-9).all()
        assert merged["start_ms"].min() == pytest.approx(bars["start_ms"].min())
        assert end.max() == pytest.approx((bars["start_ms"] + bars["duration_ms"]).max())
        assert len(merged) <= 50 * bars.groupby(["lane", "kind"]).ngroups


def test_the_timeline_names_the_interference_it_was_timed_with():
    """The sentence under the Timeline states both coefficients the run used and the compute they added."""
    from dashboard.tables import interference_note

    model = sim.load_model("resnet50")
    on = sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe", compute_slowdown=0.5, comm_slowdown=0.25)
    res = sim.simulate(model, on, "wfbp", batch_size=32)
    note = interference_note(res.metrics, res.cluster)
    assert "κ = 0.5;" in note and "κc = 0.25" in note and "1/1.25" in note
    assert f"+{1e3 * res.metrics['interference_s']:.1f} ms" in note and res.metrics["interference_s"] > 0
    off = sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe", interference=False)
    assert interference_note(sim.simulate(model, off, "wfbp", batch_size=32).metrics, off).startswith(
        "Interference is off")
