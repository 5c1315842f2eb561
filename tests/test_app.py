"""The dashboard under Streamlit's AppTest: every page runs, shows its key
figures, and moves them the right way when a control changes; bad input
shows an error box, never an exception."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import needs_zoo
from streamlit.testing.v1 import AppTest

import sim
from dashboard import figures, state, ui
from dashboard.upload import MAX_UPLOAD_BYTES, model_from_csv_text, read_layer_csv

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 120


def layer_csv(n: int = 150, seed: int = 0) -> str:
    """A synthetic layer table of ``n`` layers, as CSV text."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "name": [f"layer{i}" for i in range(n)],
            "params": rng.integers(0, 3_000_000, n),
            "fwd_ms": rng.uniform(0.05, 1.0, n).round(4),
            "bwd_ms": rng.uniform(0.1, 2.0, n).round(4),
        }
    )
    return frame.to_csv(index=False)


def new_app(**session) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT_S)
    for key, value in session.items():
        at.session_state[key] = value
    return at


def csv_app(text: str | None = None, name: str = "synthetic.csv", **session) -> AppTest:
    """The app with an uploaded CSV model injected into the session."""
    return new_app(model=state.UPLOAD, csv_text=layer_csv() if text is None else text, csv_name=name, **session)


def open_page(at: AppTest, page: str) -> AppTest:
    at.switch_page(str(REPO / "pages" / f"{page}.py")).run()
    return at


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


def metric(at: AppTest, label: str) -> float:
    """The first number in the value of the metric called ``label``."""
    for m in at.metric:
        if m.label == label:
            found = re.search(r"[-+]?\d[\d,]*\.?\d*", m.value)
            assert found, m.value
            return float(found.group().replace(",", ""))
    raise AssertionError(f"no metric {label!r}; have {[m.label for m in at.metric]}")


def chart(at: AppTest, key: str) -> dict:
    """The plotly figure (as a dict) of the chart rendered with ``key``."""
    for el in at.get("plotly_chart"):
        if el.proto.id.endswith(f"-{key}"):
            return json.loads(el.proto.spec)
    raise AssertionError(f"no chart {key!r}")


def values(array) -> list:
    """A plotly JSON array: a plain list, or ``{"dtype", "bdata"}`` (base64 typed array)."""
    if isinstance(array, dict) and "bdata" in array:
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


PAGES = {
    "timeline": (["Iteration time", "Samples/s", "Overlap", "Hidden comm", "Exposed comm", "Scaling efficiency"],
                 ["timeline_chart"]),
    "compare": (["Fastest here", "MG-WFBP vs optimal"], ["compare_chart", "breakdown_chart"]),
    "scaling": (["Iteration", "Samples/s", "Speedup", "Scaling efficiency"], ["scaling_chart", "scaling_timeline"]),
    "model": (["Layers", "Parameters", "Gradient per iteration", "Layers where α > β·M"], ["layer_chart"]),
    "learn": (["wfbp", "mgwfbp", "optimal"], ["toy_chart", "alpha_chart"]),
}


# --- every page --------------------------------------------------------------------


class TestEveryPage:
    @pytest.mark.parametrize("page", list(PAGES))
    def test_runs_with_a_150_layer_csv_and_shows_key_figures(self, page):
        at = open_page(csv_app(), page)
        no_exception(at)
        assert not at.error, [e.value for e in at.error]
        labels, charts = PAGES[page]
        assert [m.label for m in at.metric][: len(labels)] == labels
        for key in charts:
            assert chart(at, key)["data"]
        assert at.caption[0].value.startswith("Assumptions:")

    @needs_zoo
    @pytest.mark.parametrize("page", list(PAGES))
    def test_runs_with_the_default_configuration(self, page):
        at = open_page(new_app(), page)
        no_exception(at)
        assert not at.error, [e.value for e in at.error]
        assert at.sidebar.selectbox(key="model").value == "resnet50"
        assert at.sidebar.number_input(key="gpus").value == 16

    @pytest.mark.parametrize(
        "settings",
        [
            {"gpus": 1},
            {"gpus": 2, "per_node": 4},
            {"gpus": 24, "per_node": 3, "coll": "hierarchical", "precision": "fp16", "gpu": "h100"},
            {"coll": "recursive_doubling", "intra": "nvlink2", "net": "ib-fdr-56", "batch": 1, "precision": "amp"},
        ],
    )
    @pytest.mark.parametrize("page", list(PAGES))
    def test_unusual_settings_run(self, page, settings):
        at = open_page(csv_app(layer_csv(30), **settings), page)
        no_exception(at)
        assert not at.error, [e.value for e in at.error]

    def test_the_sidebar_is_on_every_page(self):
        at = csv_app()
        for page in PAGES:
            open_page(at, page)
            assert at.sidebar.number_input(key="gpus").value == 16
            assert at.sidebar.selectbox(key="net").value == "10gbe"

    @needs_zoo
    def test_fp32_on_a_gpu_with_tf32_says_what_tf32_is(self):
        hint = "TF32 tensor cores"
        at = open_page(new_app(), "timeline")
        assert not any(hint in c.value for c in at.sidebar.caption)  # the default V100 has no TF32
        at.sidebar.selectbox(key="gpu").set_value("a100").run()
        assert any(hint in c.value for c in at.sidebar.caption)
        at.sidebar.selectbox(key="precision").set_value("tf32").run()
        assert not any(hint in c.value for c in at.sidebar.caption)
        no_exception(at)


# --- controls move numbers the right way ------------------------------------------------


class TestTimeline:
    def test_more_gpus_give_higher_throughput(self):
        at = open_page(csv_app(), "timeline")
        before = metric(at, "Samples/s")
        at.sidebar.number_input(key="gpus").set_value(64).run()
        no_exception(at)
        assert metric(at, "Samples/s") > before
        assert "64 GPUs" in chart(at, "timeline_chart")["layout"]["title"]["text"]

    def test_faster_network_gives_shorter_iteration(self):
        at = open_page(csv_app(), "timeline")
        before = metric(at, "Iteration time")
        at.sidebar.selectbox(key="net").set_value("ib-edr-100").run()
        no_exception(at)
        assert metric(at, "Iteration time") < before

    def test_merging_is_no_slower_than_wfbp(self):
        at = open_page(csv_app(), "timeline")
        at.selectbox(key="scheduler").set_value("wfbp").run()
        wfbp = metric(at, "Iteration time")
        at.selectbox(key="scheduler").set_value("optimal").run()
        assert metric(at, "Iteration time") <= wfbp

    def test_deltas_against_the_baseline(self):
        at = open_page(csv_app(), "timeline")
        deltas = {m.label: m.delta for m in at.metric}
        assert deltas["Iteration time"].endswith("% vs wfbp")
        at.selectbox(key="scheduler").set_value("wfbp").run()
        assert {m.label: m.delta for m in at.metric}["Iteration time"] == "same as wfbp"

    def test_more_iterations_show_more_bars(self):
        at = open_page(csv_app(), "timeline")
        one = sum(len(values(t["x"])) for t in chart(at, "timeline_chart")["data"])
        at.number_input(key="iters").set_value(2).run()
        assert sum(len(values(t["x"])) for t in chart(at, "timeline_chart")["data"]) == 2 * one

    def test_offers_metrics_and_trace_downloads(self):
        at = open_page(csv_app(), "timeline")
        # each chart's own SVG and PDF beside the modebar's PNG, then the data, in popovers that send
        # their buttons only when opened (as the memory panel its chart: tests/test_dashboard_lazy.py)
        at.session_state["export_timeline_chart"] = True
        at.session_state["downloads"] = True
        at.run()
        labels = [el.proto.label for el in at.get("download_button")]
        assert labels == ["SVG", "PDF", "Metrics (CSV)", "Timeline (Chrome trace JSON)", "Timeline (CSV)"]


class TestOverrides:
    def test_free_communication_scales_perfectly(self):
        at = open_page(csv_app(ab=True, alpha_us=0.0, beta_ns=0.0), "timeline")
        no_exception(at)
        assert metric(at, "Scaling efficiency") == 100
        assert metric(at, "Exposed comm") == 0

    def test_larger_alpha_gives_longer_iteration(self):
        at = open_page(csv_app(ab=True, alpha_us=10.0, beta_ns=1.0), "timeline")
        before = metric(at, "Iteration time")
        at.sidebar.number_input(key="alpha_us").set_value(5000.0).run()
        assert metric(at, "Iteration time") > before

    def test_calibration_sets_the_one_gpu_iteration(self):
        at = open_page(csv_app(calib=True, calib_s=2.0, gpus=1), "timeline")
        no_exception(at)
        assert metric(at, "Iteration time") == pytest.approx(2000, rel=1e-3)  # "2,000 ms"
        assert "calibrated" in at.caption[0].value

    def test_a_slow_rate_is_not_rounded_to_zero(self):
        """A 10,000 s iteration showed "Samples/s 0" (hostile review): three significant digits below 100."""
        at = open_page(csv_app(calib=True, calib_s=10_000.0, gpus=1, batch=32), "timeline")
        no_exception(at)
        shown = next(m.value for m in at.metric if m.label == "Samples/s")
        assert shown == "0.0032", shown
        assert ui.fmt_rate(1234.4) == "1,234" and ui.fmt_rate(99.94) == "99.9"


class TestCompare:
    def test_shows_the_gap_of_mgwfbp_to_optimal(self):
        at = open_page(csv_app(), "compare")
        assert metric(at, "MG-WFBP vs optimal") >= 0
        assert any("optimal grouping" in c.value for c in at.caption)

    def test_one_timeline_row_per_scheduler(self):
        at = open_page(csv_app(), "compare")
        assert len(at.dataframe[0].value) == 4
        at.multiselect(key="compare").set_value(["wfbp", "optimal"]).run()
        no_exception(at)
        assert list(at.dataframe[0].value["scheduler"]) == ["wfbp", "optimal"]
        assert values(chart(at, "breakdown_chart")["data"][0]["y"]) == ["wfbp", "optimal"]

    def test_a_zero_gap_has_no_red_arrow(self):
        at = open_page(csv_app(gpus=1), "compare")  # one GPU: nothing to merge, MG-WFBP is optimal
        no_exception(at)
        gap = next(m for m in at.metric if m.label == "MG-WFBP vs optimal")
        assert (gap.value, gap.delta) == ("0 %", "same iteration")
        assert "color: GRAY" in str(gap.proto) and "direction: NONE" in str(gap.proto)

    def test_a_gap_below_what_the_page_shows_is_the_same_iteration(self):
        """vgg16 on 8 GPUs over EDR: the two groupings differ by about a nanosecond; the metric read "-7.81e-07 %"
        and "-0.00 ms" as a gain, beside a caption saying that MG-WFBP matches the optimal grouping."""
        at = new_app()
        at.query_params.update({"model": "vgg16", "gpus": "8", "net": "ib-edr-100"})
        open_page(at, "compare")
        no_exception(at)
        gap = next(m for m in at.metric if m.label == "MG-WFBP vs optimal")
        assert (gap.value, gap.delta) == ("0 %", "same iteration")
        assert any("matches the optimal grouping" in c.value for c in at.caption)

    def test_no_scheduler_asks_for_one(self):
        at = open_page(csv_app(), "compare")
        at.multiselect(key="compare").set_value([]).run()
        no_exception(at)
        assert at.info and "at least one" in at.info[0].value


class TestOverlap:
    def test_timeline_shows_overlap_as_hidden_over_all_communication(self):
        at = open_page(csv_app(), "timeline")
        no_exception(at)
        hidden, exposed = metric(at, "Hidden comm"), metric(at, "Exposed comm")
        assert metric(at, "Overlap") == pytest.approx(hidden / (hidden + exposed) * 100, abs=0.1 + 1e-9, rel=0.01)
        names = {t["name"] for t in chart(at, "timeline_chart")["data"]}
        assert {"all-reduce hidden behind compute", "all-reduce exposed (GPU waits)"} <= names

    def test_one_gpu_has_no_overlap_to_show(self):
        at = open_page(csv_app(gpus=1), "timeline")
        no_exception(at)
        assert next(m for m in at.metric if m.label == "Overlap").value == "—"

    @needs_zoo
    def test_breakdown_is_consistent_for_every_scheduler_and_method(self):
        """On Compare's own table: exposed <= iteration, and compute + exposed is the
        iteration within 1 % (zoo models have no I/O or host-to-device time)."""
        from sim.methods import METHODS
        from sim.schedulers.registry import scheduler_names

        at = new_app(model="vgg16", gpus=64)
        at.session_state["compare"] = list(scheduler_names())
        at.session_state["compare_methods"] = list(METHODS)
        open_page(at, "compare")
        no_exception(at)
        table = at.dataframe[0].value.set_index("scheduler")
        assert len(table) == len(scheduler_names()) + len(METHODS)
        it, exposed = table["iteration (ms)"], table["exposed comm (ms)"]
        bad = table.loc[(exposed > it) | ((table["compute (ms)"] + exposed - it).abs() > 0.01 * it)]
        assert bad.empty, bad[["iteration (ms)", "compute (ms)", "exposed comm (ms)"]].to_string()
        overlap = table["hidden comm (ms)"] / table["all-reduce (ms)"] * 100
        assert table["overlap (%)"].to_numpy() == pytest.approx(overlap.to_numpy())
        assert not [w for w in at.warning if "exceeds the iteration" in w.value]


class TestScaling:
    def test_extra_network_adds_curves(self):
        at = open_page(csv_app(), "scaling")
        curves = {t["name"] for t in chart(at, "scaling_chart")["data"]}
        at.multiselect(key="scale_nets").set_value(["ib-edr-100"]).run()
        no_exception(at)
        more = {t["name"] for t in chart(at, "scaling_chart")["data"]}
        assert len(more) > len(curves) and "mgwfbp · ib-edr-100" in more

    def test_gpu_counts_fill_whole_nodes_up_to_1024(self):
        at = open_page(csv_app(per_node=8), "scaling")
        no_exception(at)
        assert at.select_slider(key="pick_gpus").options == [str(p) for p in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)]

    def test_picking_a_gpu_count_shows_its_timeline_and_sets_the_sidebar(self):
        at = open_page(csv_app(), "scaling")
        before = metric(at, "Samples/s")
        at.select_slider(key="pick_gpus").set_value(256).run()
        no_exception(at)
        assert at.sidebar.number_input(key="gpus").value == 256
        assert metric(at, "Samples/s") > before
        assert "256 GPUs" in chart(at, "scaling_timeline")["layout"]["title"]["text"]


class TestModel:
    def test_small_model_draws_its_dag(self):
        at = open_page(csv_app(layer_csv(12)), "model")
        no_exception(at)
        dag = chart(at, "dag_chart")
        assert {t["name"] for t in dag["data"] if t.get("name")} >= {"forward", "backward", "all-reduce"}

    def test_trace_driven_csv_uses_measured_times(self):
        text = "name,params,fwd_ms,bwd_ms,comm_ms\nconv1,1000,1.0,2.0,0.3\nfc,4000000,0.5,1.0,9.0\n"
        at = open_page(csv_app(text, name="traced.csv"), "model")
        no_exception(at)
        assert "measured per-layer all-reduce times" in at.caption[0].value
        table = at.dataframe[0].value.set_index("name")
        assert table.loc["fc", "all-reduce alone (ms)"] == pytest.approx(9.0)

    def test_large_model_skips_the_dag(self):
        at = open_page(csv_app(layer_csv(60)), "model")
        with pytest.raises(AssertionError):
            chart(at, "dag_chart")
        assert metric(at, "Layers") == 60

    def test_a_zoo_model_counts_gradient_tensors_and_suggests_a_model_whose_dag_is_drawn(self):
        """resnet50's 161 gradient tensors were shown as "Layers 163", and gpt2's page suggested gpt2 (and
        bert_base, 199 rows) for a DAG it does not draw (hostile review, 2026-11-25)."""
        at = new_app()
        at.query_params.update({"model": "gpt2"})
        open_page(at, "model")
        no_exception(at)
        table = next(df.value for df in at.dataframe if "params" in df.value.columns)
        assert metric(at, "Gradient tensors") == int((table["params"] > 0).sum()) > sim.load_model("gpt2").num_layers
        assert next(m.delta for m in at.metric if m.label == "Gradient tensors") == \
            f"of {sim.load_model('gpt2').num_layers} layers"
        suggested = re.findall(r"\b[a-z0-9_]+\b", next(c.value for c in at.caption if "DAG is drawn" in c.value)
                               .split("try ")[1])
        suggested = [name for name in suggested if name != "or"]
        assert suggested and "gpt2" not in suggested
        for name in suggested:  # each suggestion does draw its DAG
            at = new_app()
            at.query_params.update({"model": name})
            open_page(at, "model")
            assert chart(at, "dag_chart")

    def test_no_start_up_cost_says_no_gradient_is_start_up_bound(self):
        at = new_app()
        at.query_params.update({"ab": "true", "alpha_us": "0", "beta_ns": "0"})
        open_page(at, "model")
        no_exception(at)
        assert any("no gradient spends more time starting up" in c.value for c in at.caption)
        assert not any("α/β = ∞" in c.value for c in at.caption)


class TestLearn:
    def test_small_alpha_makes_mgwfbp_optimal(self):
        at = open_page(new_app(), "learn")
        assert metric(at, "mgwfbp") > metric(at, "optimal")  # the default shows the greedy gap
        at.select_slider(key="toy_alpha_us").set_value(50).run()
        no_exception(at)
        assert metric(at, "mgwfbp") == pytest.approx(metric(at, "optimal"))
        # the counter-example stays on the page whatever the slider says, at its own alpha
        assert any("counter-example" in m.value and "2000 µs" in m.value for m in at.markdown)

    def test_shows_mgwfbps_decisions_step_by_step(self):
        at = open_page(new_app(), "learn")
        steps = next(d.value for d in at.dataframe if "decision" in d.value.columns)
        assert len(steps) == 3  # four layers: three decisions
        assert set(steps["decision"].str.split().str[0]) <= {"merge", "send"}
        merges = int((steps["α saved (µs)"] > 0).sum())
        assert merges == 2  # at the default 2000 µs MG-WFBP sends fc2+fc1+conv2 | conv1
        assert any("fc2+fc1+conv2 | conv1" in c.value for c in at.caption)
        assert steps["α saved so far (µs)"].iloc[-1] == pytest.approx(2000 * merges)

    def test_claims_beside_the_alpha_chart_come_from_it(self):
        at = open_page(new_app(), "learn")
        text = " ".join(m.value for m in at.markdown)
        assert "within 0.5 %" in text and "slower than optimal" in text
        assert "wfbp**) is best" not in text


# --- bad input: an error box, never an exception ---------------------------------------


class TestBadInput:
    def test_gpus_not_filling_whole_nodes(self):
        at = open_page(csv_app(), "timeline")
        at.sidebar.number_input(key="gpus").set_value(10).run()
        no_exception(at)
        assert "does not fill whole nodes" in at.error[0].value
        at.sidebar.number_input(key="gpus").set_value(12).run()  # the app keeps working
        no_exception(at)
        assert not at.error and metric(at, "Iteration time") > 0

    @pytest.mark.parametrize("page", list(PAGES)[:4])
    def test_malformed_csv_names_row_and_column(self, page):
        bad = "name,params,fwd_ms,bwd_ms\nconv1,1000,1.0,2.0\nfc,lots,0.5,1.0\n"
        at = open_page(csv_app(bad, name="bad.csv"), page)
        no_exception(at)
        assert at.error[0].value == "bad.csv row 3, column 'params': 'lots' is not a finite number"

    @pytest.mark.parametrize("page", ["timeline", "compare", "scaling"])
    def test_a_model_without_compute_time_is_refused_in_the_apis_words(self, page):
        """The page passed its one-GPU reference of 0 s, so the box read 'single_gpu_iteration_s must be > 0',
        an argument the user never set."""
        at = open_page(csv_app("name,params,fwd_ms,bwd_ms\nconv1,1000,0,0\nfc,100,0,0\n", name="zero.csv"), page)
        no_exception(at)
        assert any("takes no time: give the model non-zero compute times" in e.value for e in at.error), \
            [e.value for e in at.error]
        assert not any("single_gpu_iteration_s" in e.value for e in at.error)

    def test_missing_column(self):
        at = open_page(csv_app("name,params\nfc,10\n", name="short.csv"), "timeline")
        no_exception(at)
        assert "missing column(s) fwd_ms, bwd_ms" in at.error[0].value

    def test_no_upload_yet_asks_for_one(self):
        at = open_page(new_app(model=state.UPLOAD), "timeline")
        no_exception(at)
        assert "Upload a layer CSV" in at.info[0].value

    def test_a_refused_files_error_is_not_shown_again_after_another_model(self):
        """A refused file's error came back after switching to a zoo model and back to the uploader
        (hostile review): leaving the uploader forgets it; the page asks for a file instead."""
        at = open_page(new_app(model=state.UPLOAD, upload_error="neg.csv row 2, column 'params': -1 is negative"),
                       "timeline")
        assert "neg.csv row 2" in at.error[0].value
        at.selectbox(key="model").set_value("resnet50").run()
        no_exception(at)
        at.selectbox(key="model").set_value(state.UPLOAD).run()
        no_exception(at)
        assert not [e for e in at.error if "neg.csv" in e.value]
        assert "Upload a layer CSV" in at.info[0].value


# --- shareable state ------------------------------------------------------------------------


class TestQueryParams:
    def test_a_link_reproduces_the_view(self):
        at = csv_app()
        at.query_params.update({"gpus": "64", "net": "ib-edr-100", "scheduler": "optimal"})
        open_page(at, "timeline")
        no_exception(at)
        assert at.sidebar.number_input(key="gpus").value == 64
        assert at.sidebar.selectbox(key="net").value == "ib-edr-100"
        assert at.selectbox(key="scheduler").value == "optimal"
        title = chart(at, "timeline_chart")["layout"]["title"]["text"]
        assert "optimal" in title and "64 GPUs" in title and "ib-edr-100" in title

    def test_choices_carry_across_pages(self):
        at = open_page(csv_app(), "timeline")
        at.sidebar.number_input(key="gpus").set_value(32).run()
        open_page(at, "compare")
        assert at.sidebar.number_input(key="gpus").value == 32
        open_page(at, "timeline")
        assert "32 GPUs" in chart(at, "timeline_chart")["layout"]["title"]["text"]


class TestLinks:
    def test_the_root_address_opens_the_timeline_with_the_query(self):
        at = new_app()
        at.query_params.update({"model": "resnet50", "gpus": "8", "scheduler": "optimal"})
        at.run()
        no_exception(at)
        assert at.title[0].value == "Timeline of an iteration"
        title = chart(at, "timeline_chart")["layout"]["title"]["text"]
        assert "· 8 GPUs" in title and "optimal" in title
        assert not at.warning

    def test_every_page_has_its_own_path(self):
        from dashboard import links

        assert set(links.PAGE_PATHS) == {p.stem for p in (REPO / "pages").glob("*.py")}
        source = (REPO / "app.py").read_text()
        assert "url_path=links.PAGE_PATHS[name]" in source

    def test_bad_values_are_named_with_the_value_used_instead(self):
        at = new_app()
        at.query_params.update({"gpus": "lots", "net": "bogus", "batch": "100000", "ab": "maybe",
                                "compare": ["wfbp", "nope"]})
        at.run()
        no_exception(at)
        warnings = [w.value for w in at.warning]
        assert "Link: `gpus=lots` is not usable (not a number); using gpus = 16 instead." in warnings
        assert "Link: `net=bogus` is not usable (not one of the options); using net = 10gbe instead." in warnings
        assert "Link: `batch=100000` is not usable (outside 1..65536); using batch = 32 instead." in warnings
        assert any(w.startswith("Link: `ab=maybe`") for w in warnings)
        assert any(w.startswith("Link: `compare=wfbp,nope` is not usable (unknown nope)") for w in warnings)
        assert at.sidebar.number_input(key="gpus").value == 16
        at.sidebar.number_input(key="gpus").set_value(32).run()  # said once, not on every rerun
        assert not at.warning

    def test_the_framework_travels_in_the_link_and_is_stated(self):
        at = new_app()
        at.query_params.update({"fw": "mpi"})
        open_page(at, "timeline")
        no_exception(at)
        assert at.sidebar.selectbox(key="fw").value == "mpi"
        assert state.config_from_state(at.session_state).cluster().framework == "mpi"
        assert "framework mpi" in at.caption[0].value
        at = new_app()  # with the α-β override the framework's costs are not added: not named either
        at.query_params.update({"fw": "horovod", "ab": "true", "alpha_us": "500", "beta_ns": "1"})
        open_page(at, "timeline")
        assert "framework" not in at.caption[0].value

    def test_a_link_to_an_upload_says_that_a_file_is_needed(self):
        at = new_app()
        at.query_params.update({"model": "upload"})
        at.run()
        no_exception(at)
        assert at.sidebar.selectbox(key="model").value == state.UPLOAD
        assert "cannot travel in a link" in at.warning[0].value
        assert "Upload a layer CSV" in at.info[0].value
        # the address says so again from the next run on (it lost model=: a shared link showed resnet50; 2026-11-25)
        at.sidebar.number_input(key="gpus").set_value(8).run()
        no_exception(at)
        assert dict(at.query_params)["model"] == state.UPLOAD_LABEL
        assert at.sidebar.selectbox(key="model").value == state.UPLOAD

    @pytest.mark.parametrize("page, key", [("compare", "compare"), ("compare", "compare_methods"),
                                           ("scaling", "scale_schedulers"), ("scaling", "scale_nets"),
                                           ("algorithms", "alg_picked")])
    def test_an_emptied_list_in_a_link_is_none_chosen(self, page, key):
        """Clearing a multiselect writes ``key=`` into the address; that link was refused ("unknown (an empty
        value)") and showed the default choice instead of the view it was copied from (hostile review, 2026-11-25)."""
        at = new_app()
        at.query_params.update({key: ""})
        open_page(at, page)
        no_exception(at)
        assert not [w.value for w in at.warning if key in w.value]
        assert next(m for m in at.multiselect if m.key == key).value == []

    @pytest.mark.parametrize("key, raw", [("gpus", "1e400"), ("batch", "-1e999"), ("iters", "1e309"),
                                          ("strag_seed_sb", "inf")])
    def test_an_overflowing_number_is_a_notice_not_an_exception(self, key, raw):
        """Streamlit's own number parser failed on these (OverflowError) before the page could say a word."""
        at = new_app()
        at.query_params.update({key: raw, "strag": "true"})
        at.run()
        no_exception(at)
        assert f"Link: `{key}={raw}` is not usable (not a finite number); using {key} = {state.default(key)} instead." \
            in [w.value for w in at.warning]
        assert key not in dict(at.query_params)  # the address is the link of what is shown

    def test_a_repeated_key_says_which_value_counts(self):
        at = new_app()
        at.query_params["gpus"] = ["64", "8"]
        at.query_params["batch"] = ["64", "lots"]
        at.run()
        no_exception(at)
        warnings = [w.value for w in at.warning]
        assert "Link: `gpus=64,8` is not usable (given 2 times; the last counts); using gpus = 8 instead." in warnings
        assert ("Link: `batch=64,lots` is not usable (given 2 times, and the last is not a number); "
                "using batch = 32 instead.") in warnings
        assert at.sidebar.number_input(key="gpus").value == 8 and at.sidebar.number_input(key="batch").value == 32
        assert dict(at.query_params)["gpus"] == "8"

    def test_a_crafted_value_is_quoted_short_and_inert(self):
        at = new_app()
        at.query_params.update({"net": "x" * 5000, "model": "**b** `x` [a](javascript:alert(1)) <script>",
                                "compare": ["wfbp", ""]})
        at.run()
        no_exception(at)
        warnings = [w.value for w in at.warning]
        net = next(w for w in warnings if "net=" in w)
        assert len(net) < 300 and "… (5,004 characters)`" in net
        # a fence longer than any run of backticks inside: the value is code, not Markdown
        assert "Link: `` model=**b** `x` [a](javascript:alert(1)) <script> `` is not usable" in \
            next(w for w in warnings if "model=" in w)
        assert any("(unknown (an empty value))" in w for w in warnings)

    def test_a_value_repeated_in_a_list_is_said_once_and_kept_once(self):
        at = csv_app()
        at.query_params["compare"] = ["wfbp", "optimal", "wfbp", "wfbp"]
        open_page(at, "compare")
        no_exception(at)
        assert ("Link: `compare=wfbp,optimal,wfbp,wfbp` is not usable (wfbp given 3 times); "
                "using compare = wfbp, optimal instead.") in [w.value for w in at.warning]
        assert at.multiselect(key="compare").value == ["wfbp", "optimal"]

    def test_the_learn_slider_from_a_link(self):
        at = new_app()
        at.query_params.update({"toy_alpha_us": "-1"})
        open_page(at, "learn")
        no_exception(at)
        assert "Link: `toy_alpha_us=-1` is not usable (not one of the options); using toy_alpha_us = 2000 instead." \
            in [w.value for w in at.warning]  # was dropped without a word
        at = new_app()
        at.query_params.update({"toy_alpha_us": "50"})
        open_page(at, "learn")
        assert at.select_slider(key="toy_alpha_us").value == 50 and not at.warning

    def test_the_scaling_timeline_scheduler_travels_in_the_link(self):
        at = csv_app()
        at.query_params.update({"scale_timeline_scheduler": "wfbp"})  # was ignored: the widget was not bound
        open_page(at, "scaling")
        no_exception(at)
        assert at.selectbox(key="scale_timeline_scheduler").value == "wfbp" and not at.warning
        at = csv_app()
        at.query_params.update({"scale_timeline_scheduler": "dear"})  # a scheduler, but not one of the curves
        open_page(at, "scaling")
        assert at.selectbox(key="scale_timeline_scheduler").value == "mgwfbp"
        assert at.warning[0].value == "The timeline's scheduler `dear` is not among the schedulers picked; showing mgwfbp."

    @pytest.mark.parametrize("page, key, value", [
        ("compare", "compare_compression", "topk:0.01"), ("compare", "tune_knob", "credit"),
        ("validation", "parity_by", "method"), ("validation", "summary_by", "network"),
        ("learn", "learn_mech_net", "ib-edr-100"),
    ])
    def test_page_controls_travel_in_the_link(self, page, key, value):
        """These controls were not bound to the query: a link could not carry them."""
        at = csv_app() if page == "compare" else new_app()
        at.query_params.update({key: value})
        open_page(at, page)
        no_exception(at)
        widget = at.selectbox(key=key) if page == "compare" else at.radio(key=key)
        assert widget.value == value and not at.warning
        at = csv_app() if page == "compare" else new_app()
        at.query_params.update({key: "<b>bogus</b>"})
        open_page(at, page)
        no_exception(at)
        assert at.warning[0].value == (f"Link: `{key}=<b>bogus</b>` is not usable (not one of the options); "
                                       f"using {key} = {state.default(key)} instead.")

    def test_the_algorithms_controls_travel_in_the_link(self):
        """None of the Algorithms page's controls was bound to the query."""
        from sim.algorithms import ALGORITHMS

        assert state.default("alg_picked") == list(ALGORITHMS)
        link = {"alg_picked": ["BSP", "AR-SGD"], "alg_steps": 50, "alg_ssp": 5, "alg_tau": 8, "alg_gossip": 0.25,
                "alg_seed": 7, "strag_dist": "lognormal", "strag_cv": 0.3, "strag_k": 2, "strag_factor": 2.5,
                "strag_jitter": 0.1, "strag_scheduler": "mgwfbp", "alg_overlap": 0.8}
        at = new_app(model="resnet50")
        at.query_params.update({k: [str(x) for x in v] if isinstance(v, list) else str(v) for k, v in link.items()})
        open_page(at, "algorithms")
        no_exception(at)
        assert not at.warning and not at.error
        assert {k: at.session_state[k] for k in link} == link
        at = new_app(model="resnet50")
        at.query_params.update({"alg_picked": ["BSP", "nope"], "alg_steps": "5000", "alg_gossip": "nan",
                                "strag_k": "20", "strag_scheduler": "<x>"})
        open_page(at, "algorithms")
        no_exception(at)
        warnings = [w.value for w in at.warning]
        assert "Link: `alg_picked=BSP,nope` is not usable (unknown nope); using alg_picked = BSP instead." in warnings
        assert "Link: `alg_steps=5000` is not usable (outside 10..400); using alg_steps = 100 instead." in warnings
        assert any(w.startswith("Link: `alg_gossip=nan` is not usable") for w in warnings)
        assert any(w.startswith("Link: `strag_scheduler=<x>` is not usable") for w in warnings)
        assert "Slow workers: `strag_k=20` is more than the 16 GPUs; using 0." in warnings
        assert at.session_state["alg_picked"] == ["BSP"] and at.session_state["strag_k"] == 0

    @pytest.mark.parametrize("raw", ["17", "17.0", "1e2", "100.0"])
    def test_too_many_slow_workers_is_said_however_the_number_is_written(self, raw):
        """Only a plain integer was checked against the GPUs: 1e2 or 17.0 became 0 slow workers without a word
        (hostile review, 2026-11-25)."""
        at = new_app(model="resnet50")
        at.query_params.update({"strag_k": raw})
        open_page(at, "algorithms")
        no_exception(at)
        assert f"Slow workers: `strag_k={raw}` is more than the 16 GPUs; using 0." in [w.value for w in at.warning]

    def test_the_message_table_travels_in_the_link(self):
        at = csv_app()
        at.query_params.update({"show_messages": "true"})
        open_page(at, "timeline")
        no_exception(at)
        assert at.toggle(key="show_messages").value and at.dataframe

    def test_query_for_leaves_out_defaults(self):
        from dashboard import links

        assert links.query_for({"gpus": 16, "net": "ib-edr-100", "calib_s": 0.25, "calib": True,
                                "alpha_us": 250.0, "method": "", "scheduler": "optimal"}) == {
            "net": "ib-edr-100", "calib": "true", "alpha_us": "250.0", "scheduler": "optimal"}
        assert links.check_query(links.query_items(links.query_for({"gpus": 64, "compare": ["wfbp"]}))) == []
        assert [b.key for b in links.check_query({"iters": ["1.5"], "calib_s": ["inf"], "foo": ["x"]})] == [
            "iters", "calib_s"]

    def test_a_compare_row_opens_in_the_timeline(self):
        at = open_page(csv_app(gpus=32), "compare")
        iteration = at.dataframe[0].value.set_index("scheduler").loc["optimal", "iteration (ms)"]
        at.selectbox(key="compare_open").set_value("optimal").run()
        at.button(key="compare_open_button").click().run()
        no_exception(at)
        assert at.title[0].value == "Timeline of an iteration"
        assert at.selectbox(key="scheduler").value == "optimal"
        assert dict(at.query_params)["scheduler"] == "optimal" and dict(at.query_params)["gpus"] == "32"
        assert metric(at, "Iteration time") == pytest.approx(iteration, rel=1e-3)

    def test_a_compare_method_row_opens_as_a_method(self):
        at = csv_app()
        at.session_state["compare_methods"] = ["BSP-PS"]
        open_page(at, "compare")
        iteration = at.dataframe[0].value.set_index("scheduler").loc["BSP-PS", "iteration (ms)"]
        at.selectbox(key="compare_open").set_value("BSP-PS").run()
        at.button(key="compare_open_button").click().run()
        no_exception(at)
        assert at.selectbox(key="method").value == "BSP-PS"
        assert "BSP-PS" in chart(at, "timeline_chart")["layout"]["title"]["text"]
        assert metric(at, "Iteration time") == pytest.approx(iteration, rel=1e-3)

    def test_a_scaling_point_opens_in_the_timeline(self):
        at = open_page(csv_app(), "scaling")
        at.select_slider(key="pick_gpus").set_value(64).run()
        at.selectbox(key="scale_timeline_scheduler").set_value("wfbp").run()
        iteration = metric(at, "Iteration")
        at.button(key="scaling_open").click().run()
        no_exception(at)
        assert at.title[0].value == "Timeline of an iteration"
        assert at.selectbox(key="scheduler").value == "wfbp"
        assert "64 GPUs" in chart(at, "timeline_chart")["layout"]["title"]["text"]
        assert metric(at, "Iteration time") == pytest.approx(iteration, rel=1e-3)

    @needs_zoo
    @pytest.mark.parametrize("case", ["ddl-resnet50-BSP-PS-16gpu", "ddl-bert_base-WFBP-A2A-8gpu",
                                      "bcaffe-trace-googlenet-MG-WFBP-8node",
                                      "bcaffe-resnet-WFBP-8node"])  # framework mpi (564.4, not 563 samples/s)
    def test_a_validation_case_keeps_its_number_in_the_timeline(self, case):
        """Scheduler or method, calibration and update time, network, batch and precision all
        carried: the Timeline simulates the case's own throughput."""
        from dashboard import cached, links, validation_view
        from sim.validation import case_model, run_validation

        row, model = case_model(case)
        settings, _ = validation_view.case_settings(row, model)
        at = new_app(timeline_request=(settings, "opened"))  # as the Validation page hands it over
        at.run()
        no_exception(at)
        assert not at.error and at.title[0].value == "Timeline of an iteration"
        link = dict(at.query_params)
        for key in ("gpus", "net", "batch", "calib", "calib_s"):  # what the case sets, also in its link
            if settings.get(key, state.default(key)) != state.default(key):
                assert link[key] == links.query_for({key: settings[key]})[key], key
        cfg = state.config_from_state(at.session_state)
        method = at.selectbox(key="method").value
        res = cached.simulate_method(cfg, method) if method else cached.simulate(cfg, at.selectbox(key="scheduler").value)
        simulated = run_validation().set_index("case").loc[case, "simulated"]
        assert res.metrics["throughput_samples_per_s"] == pytest.approx(simulated, rel=1e-9)
        assert metric(at, "Samples/s") == pytest.approx(simulated, abs=0.5)


class TestStartHere:
    def test_shown_on_the_first_visit_until_dismissed(self):
        at = open_page(csv_app(), "timeline")
        assert at.expander[0].label.startswith("Start here")
        assert not any("New here?" in m.value for m in at.markdown)  # closed, it sends no text
        at.session_state["start_here"] = True  # what a click on the closed panel leaves
        at.run()
        assert any("New here?" in m.value for m in at.markdown)
        at.button(key="intro_done").click().run()
        no_exception(at)
        assert not [e for e in at.expander if e.label.startswith("Start here")]
        open_page(at, "compare")
        assert not [e for e in at.expander if e.label.startswith("Start here")]


class TestState:
    def test_init_state_sets_only_keys_no_widget_owns(self):
        session = {"csv_name": "mine.csv"}
        state.init_state(session)
        assert session == {"csv_name": "mine.csv", "csv_text": None, "csv_upload_id": None, "upload_gen": 0,
                           "upload_error": None, "link_checked": False, "link_notes": [], "timeline_request": None,
                           "intro_seen": False, "snapshots": {}, "snapshot_uploads": {}}

    def test_defaults_are_copies(self):
        state.default("compare").append("bucket")
        assert state.default("compare") == ["wfbp", "mgwfbp", "synceasgd", "optimal"]
        assert state.index_of("net", ["100gbe", "10gbe"]) == 1
        assert state.index_of("net", ["100gbe"]) == 0

    def test_config_converts_units_once(self):
        session = dict(state.DEFAULTS)
        session.update(ab=True, alpha_us=250.0, beta_ns=2.0, calib=True, calib_s=0.5)
        cfg = state.config_from_state(session)
        assert cfg.alpha_s == pytest.approx(250e-6)
        assert cfg.beta_s_per_byte == pytest.approx(2e-9)
        assert cfg.calibrate_iteration_s == 0.5
        assert cfg.cluster().comm_cost().time_s(1000) == pytest.approx(250e-6 + 2e-6)

    def test_default_configuration(self):
        cfg = state.config_from_state({})
        assert (cfg.model, cfg.gpus, cfg.gpus_per_node, cfg.network, cfg.intra) == (
            "resnet50", 16, 4, "10gbe", "pcie3")
        assert (state.default("scheduler"), state.default("baseline")) == ("mgwfbp", "wfbp")
        assert cfg.alpha_s is None and cfg.csv_text is None


# --- the upload helper ---------------------------------------------------------------------


class TestUpload:
    def test_reads_utf8_from_memory(self):
        text = read_layer_csv("m.csv", "\ufeffname,params,fwd_ms,bwd_ms\nfc,10,1,2\n".encode())
        model = model_from_csv_text(text, "m.csv")
        assert model.name == "m" and model.layer_names == ("fc",)

    def test_too_large(self):
        with pytest.raises(sim.SimInputError, match="too large; the limit is 5 MiB"):
            read_layer_csv("big.csv", b"x" * (MAX_UPLOAD_BYTES + 1))

    def test_not_text(self):
        with pytest.raises(sim.SimInputError, match="not UTF-8"):
            read_layer_csv("bin.csv", b"name\xff\xfe")

    def test_empty(self):
        with pytest.raises(sim.SimInputError, match="empty file"):
            read_layer_csv("e.csv", b"  \n")

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("name,params,fwd_ms,bwd_ms\na,1,1,1\na,2,1,1\n", "row 3, column 'name': duplicate layer name 'a'"),
            ("name,params,fwd_ms,bwd_ms\na,1,-1,1\n", "row 2, column 'fwd_ms'"),
            ("name,params,fwd_ms,bwd_ms\na,1.5,1,1\n", "row 2, column 'params'"),
            ('name,params,fwd_ms,bwd_ms\n"a,1,1,1\n', "not a readable CSV"),
        ],
    )
    def test_errors_name_row_and_column(self, text, message):
        with pytest.raises(sim.SimInputError, match=re.escape(message)):
            model_from_csv_text(text, "u.csv")


class TestCharts:
    @pytest.mark.parametrize("page", list(PAGES))
    def test_every_chart_keeps_its_zoom_exports_and_keeps_legends_off_titles(self, page):
        at = open_page(csv_app(), page)
        no_exception(at)
        charts = at.get("plotly_chart")
        assert charts
        for el in charts:  # open each chart's export popover (closed, it sends no button)
            at.session_state[f"export_{el.proto.id.rsplit('-', 1)[-1]}"] = True
        at.run()
        no_exception(at)
        charts = at.get("plotly_chart")
        downloads = [el.proto.label for el in at.get("download_button")]
        assert downloads.count("SVG") == len(charts) and downloads.count("PDF") == len(charts)
        for el in charts:
            layout = json.loads(el.proto.spec)["layout"]
            assert layout.get("uirevision") not in (None, False, ""), el.proto.id
            legend = layout.get("legend") or {}
            if layout.get("showlegend") is not False and legend:
                # a horizontal legend sits below the plot, where no title is
                assert legend.get("orientation") != "h" or legend.get("y", 1) < 0, (el.proto.id, legend)


class TestStop:
    def test_a_stopped_sweep_says_so_and_continues_on_request(self):
        # what the Stop button's callback leaves, on a sweep no other test has computed (figures are kept)
        at = new_app(scaling_stopped=True, batch=33)
        open_page(at, "scaling")
        no_exception(at)
        assert any(i.value.startswith("Stopped.") for i in at.info)
        assert not at.get("plotly_chart")
        at.button(key="scaling_continue").click().run()  # any rerun computes the rest
        no_exception(at)
        assert not any(i.value.startswith("Stopped.") for i in at.info)
        assert chart(at, "scaling_chart")["data"]

    def test_a_sweep_too_heavy_for_the_page_is_refused_before_any_work(self):
        """/scaling with every scheduler and network at 65,536 GPUs took 19 s (1,248 points)."""
        from dashboard import cached

        at = new_app(model="resnet50")
        at.query_params.update({"scale_schedulers": list(sim.SCHEDULERS), "gpus": "65536", "per_node": "1",
                                "scale_nets": [n for n in state.network_options("inter") if n != "10gbe"]})
        open_page(at, "scaling")
        no_exception(at)
        assert "the page runs sweeps of up to about 3 s: pick fewer schedulers or networks" in at.error[0].value
        assert not at.get("plotly_chart")
        # the default sweep, and that of every scheduler on two networks, stay within the budget
        assert cached.sweep_seconds(56, 12, state.default("scale_schedulers")) < cached.MAX_SWEEP_S
        cached.check_sweep_work(56, 12, 2, list(sim.SCHEDULERS))
        with pytest.raises(sim.SimInputError, match="10,000-layer model"):
            cached.check_sweep_work(10_000, 12, 1, list(sim.SCHEDULERS))

    def test_a_compare_too_heavy_for_the_page_is_refused_before_any_work(self):
        """Every scheduler and method of a 100,000-layer CSV took 34 s and 3.4 GB."""
        from dashboard import cached
        from sim.methods import METHODS

        at = csv_app(layer_csv(10_000))
        at.query_params.update({"compare": list(sim.SCHEDULERS), "compare_methods": list(METHODS)})
        open_page(at, "compare")
        no_exception(at)
        assert "13 scheduler run(s) and 7 method(s) of a 10,000-layer model would take about 5 s" in at.error[0].value
        assert not at.get("plotly_chart")
        cached.check_compare_work(10_000, list(sim.SCHEDULERS))  # every scheduler alone fits (3.8 s, 370 MB)
        cached.check_compare_work(2_000, list(sim.SCHEDULERS), list(METHODS))  # and everything, for the zoo's models

    def test_the_algorithms_page_refuses_work_over_its_budget_and_says_what_fits(self):
        """64 workers x 100 steps took 20 s for the comparison alone; a 1,000-layer CSV 1.6 GB."""
        from dashboard import cached

        at = open_page(new_app(model="resnet50", gpus=32), "algorithms")
        no_exception(at)
        assert "set Steps per worker to 51 or less" in at.error[0].value
        at.number_input(key="alg_steps").set_value(50).run()
        no_exception(at)
        assert not at.error and metric(at, "Bayes accuracy of the task") > 50
        with pytest.raises(sim.SimInputError, match="use fewer GPUs"):
            cached.check_algorithm_work(56, 64, 100, 127 * 20)
        with pytest.raises(sim.SimInputError, match="Steps per worker"):
            cached.check_algorithm_work(1000, 16, 100, 31 * 20)  # the memory bound
        cached.check_algorithm_work(56, 16, 100, 31 * 20)  # the default page

    def test_the_heavy_straggler_view_is_capped_and_says_so(self):
        at = new_app(gpus=3500, per_node=1, strag=True)  # 3,500 x (163 tensors + 16) x 40 iterations: under 32 M
        open_page(at, "timeline")
        no_exception(at)
        assert not at.error
        assert any("**Capped** at 40 of 200 iterations" in c.value and "this view ran 25,060,000." in c.value
                   for c in at.caption)
        assert any("per-worker timeline is not drawn for 3,500 GPUs" in c.value for c in at.caption)


@pytest.mark.skipif(ui.image_export_problem() is not None, reason=str(ui.image_export_problem()))
def test_a_chart_exports_as_pdf_and_svg():
    res = sim.simulate(model_from_csv_text(layer_csv(), "x.csv"), sim.Cluster(gpus=4, gpus_per_node=2), "wfbp",
                       batch_size=8)
    fig = figures.gantt_figure(res.timeline, "export")
    assert ui.figure_image(fig, "pdf").startswith(b"%PDF")
    assert b"<svg" in ui.figure_image(fig, "svg")[:400]


@pytest.mark.parametrize(("gpus", "per_node", "expected", "wrong"), [
    (1, 4, "Assumptions: no all-reduce (one GPU); 1 worker,", ["1 GPUs", "node(s)", "1 identical workers"]),
    (4, 4, "ring all-reduce on 1 node × 4 GPUs", ["node(s)"]),
    (16, 4, "ring all-reduce on 4 nodes × 4 GPUs", ["node(s)"]),
    (16, 1, "ring all-reduce on 16 nodes × 1 GPU costs", ["1 GPUs", "node(s)"]),
])
def test_the_assumptions_line_counts_nodes_gpus_and_workers_in_words(gpus, per_node, expected, wrong):
    """The line read "ring all-reduce on 1 node(s) × 1 GPUs costs α + β·M with α = 0 µs ...; 1 identical workers"
    for one GPU, which runs no all-reduce at all."""
    cfg = state.config_from_state({**state.DEFAULTS, "gpus": gpus, "per_node": per_node})
    text = ui.assumptions_text(cfg, stragglers=False)
    assert expected in text
    assert not [w for w in wrong if w in text], text


def test_results_of_large_models_are_kept_within_a_budget_of_layer_iterations(monkeypatch):
    """Switching schedulers on a 100k-layer upload kept one large timeline per scheduler in the shared cache
    (the server grew 409 -> 1,210 MiB over five): a result over `LARGE_LAYER_ITERATIONS` layer-iterations is
    kept with the other large ones within `LARGE_BUDGET` layer-iterations (least recently used first out; the
    newest always kept), so a page of a few runs finds them again; a small one among the last 256."""
    from dashboard import cached

    n = cached.LARGE_LAYER_ITERATIONS + 1
    monkeypatch.setattr(cached, "LARGE_BUDGET", 3 * n)  # room for three such results
    monkeypatch.setattr(cached, "_LARGE_RESULTS", type(cached._LARGE_RESULTS)())
    frame = pd.DataFrame({"name": [f"l{i}" for i in range(n)], "params": 1000, "fwd_ms": 0.01, "bwd_ms": 0.02})
    large = state.config_from_state({**state.DEFAULTS, "model": state.UPLOAD, "csv_text": frame.to_csv(index=False),
                                     "csv_name": "large.csv"})
    small = state.config_from_state(dict(state.DEFAULTS))
    first = {s: cached.simulate(large, s) for s in ("wfbp", "mgwfbp", "synceasgd")}
    first_small = cached.simulate(small, "wfbp")
    assert all(cached.simulate(large, s) is res for s, res in first.items())  # three fit: found again
    assert cached.simulate(large, "wfbp", 1) is first["wfbp"]  # the default and 1 iteration are one entry
    cached.simulate(large, "optimal")  # a fourth: the least recently used (mgwfbp) goes
    assert cached.simulate(large, "wfbp") is first["wfbp"]
    again = cached.simulate(large, "mgwfbp")
    assert again is not first["mgwfbp"] and again.iteration_time_s == first["mgwfbp"].iteration_time_s
    assert cached.simulate(small, "wfbp") is first_small


def test_the_timeline_shows_at_most_its_budget_of_layer_iterations(monkeypatch):
    """Five iterations of a 100k-layer upload under zero3 kept the server busy 18 s at 2.4 GB (hostile
    review): the Timeline shows as many iterations as `MAX_TIMELINE_LAYER_ITERATIONS` allows, at least one,
    with a notice naming the control, the value asked and the value shown."""
    from dashboard import cached

    assert cached.timeline_iterations(100_000, 5) == 1 and cached.timeline_iterations(20_000, 5) == 5
    assert cached.timeline_iterations(30_000, 5) == 3 and cached.timeline_iterations(10**9, 3) == 1
    monkeypatch.setattr(cached, "MAX_TIMELINE_LAYER_ITERATIONS", 40)  # the 20-layer CSV: two iterations at most
    asked = []
    real = cached.simulate
    monkeypatch.setattr(cached, "simulate", lambda cfg, scheduler, iterations=1: asked.append(iterations) or real(
        cfg, scheduler, iterations))
    at = csv_app(text=layer_csv(20), iters=5).run()
    no_exception(at)
    notes = [w.value for w in at.warning if "Iterations shown" in w.value]
    assert notes and "5 iterations of a model of 20 layers" in notes[0] and "showing 2" in notes[0], notes
    assert at.session_state["iters"] == 5  # the control keeps what was asked
    assert max(asked) == 2  # the runs timed two
    # a run times gradient tensors where a layer has several (the review: 10,000 layers of 10 tensors each
    # were counted as 10,000 rows, and five iterations took 16 s and 2.2 GB)
    text = "name,params,fwd_ms,bwd_ms,tensors\n" + "".join(f"l{i},40,0.1,0.2,{';'.join(['4'] * 10)}\n"
                                                              for i in range(4))
    monkeypatch.setattr(cached, "MAX_TIMELINE_LAYER_ITERATIONS", 80)  # 40 tensors: two iterations at most
    asked.clear()
    at = csv_app(text=text, iters=5).run()
    no_exception(at)
    assert any("of 40 layers or gradient tensors" in w.value and "showing 2" in w.value for w in at.warning)
    assert max(asked) == 2


def test_the_dashboard_gives_a_plan_that_updates_per_layer_its_own_reference():
    """With io and host copies, DeAR's efficiency on the Timeline was 1.12 (the API's 0.96): the dashboard
    passed every run the serial one-GPU reference. It now lets `sim.simulate` choose it where it depends on
    the plan, so the dashboard and the API agree and efficiency stays at most 1."""
    from dashboard import cached

    frame = pd.DataFrame({"name": [f"l{i}" for i in range(6)], "params": 1_000_000, "fwd_ms": 1.0, "bwd_ms": 2.0})
    text = "# io_ms: 60\n# h2d_ms: 20\n# update_ms: 30\n" + frame.to_csv(index=False)
    cfg = state.config_from_state({**state.DEFAULTS, "model": state.UPLOAD, "csv_text": text, "csv_name": "io.csv",
                                   "gpus": 2, "per_node": 4})
    model = cached.model_of(cfg)
    assert model.io_s > 0 and cached.reference_s(cfg) is None
    for scheduler in ("dear", "bytescheduler", "wfbp"):
        res = cached.simulate(cfg, scheduler)
        api = sim.simulate(model, cfg.cluster(), scheduler, batch_size=cfg.batch_size, precision=cfg.precision)
        assert res.metrics["scaling_efficiency"] == api.metrics["scaling_efficiency"] <= 1
