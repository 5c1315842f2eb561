"""The Compare page picks the survey's seven methods (Shi et al., arXiv 2005.13247)."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

from dashboard import figures

REPO = Path(__file__).resolve().parent.parent
METHODS = ["BSP-A2A", "WFBP-A2A", "MG-WFBP", "ByteScheduler-A2A", "BSP-PS", "WFBP-PS", "ByteScheduler-PS"]


def test_compare_page_runs_every_survey_method():
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.session_state["compare"] = ["wfbp"]
    at.session_state["compare_methods"] = METHODS
    at.run()
    at.switch_page(str(REPO / "pages" / "compare.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    tables = [df.value for df in at.dataframe if "scheduler" in df.value.columns]
    assert tables, "no metrics table"
    rows = tables[-1]["scheduler"].tolist()
    assert rows[:1] == ["wfbp"] and rows[1:] == METHODS


def test_gantt_draws_the_parameter_server_lanes():
    import sim

    res = sim.simulate(sim.load_model("resnet50"), sim.Cluster(gpus=8, gpus_per_node=4), method="WFBP-PS",
                       batch_size=32)
    fig = figures.gantt_figure(res.timeline, "t")
    lanes = {y for trace in fig.data for y in trace.y}
    assert {"PS push", "PS pull", "GPU compute"} <= lanes
    assert list(fig.layout.yaxis.categoryarray)[-1] == "GPU compute"


def test_tune_figure_marks_the_best_value():
    import sim
    from sim.tune import tune

    result = tune(sim.load_model("resnet50"), sim.Cluster(gpus=16, gpus_per_node=4), "bucket-mb", [1, 25, 100],
                  batch_size=64)
    fig = figures.tune_figure(result.frame, result.best)
    line, star = fig.data[0], fig.data[1]
    assert list(line.x) == [1, 25, 100]
    assert star.x[0] == result.best["value"]
    assert star.y[0] == min(line.y)


def test_compare_page_tunes_every_knob():
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.session_state["compare"] = ["wfbp"]
    at.run()
    at.switch_page(str(REPO / "pages" / "compare.py")).run()
    for knob in ["bucket-mb", "fusion-threshold-mb", "partition-bytes", "credit"]:
        at.selectbox(key="tune_knob").select(knob).run()
        assert not at.exception, [e.value for e in at.exception]
        assert any(f"Best {knob}" in c.value for c in at.caption)
        flat = [i.value for i in at.info if "does not change this configuration's timing" in i.value]
        assert not flat, (knob, flat)  # every knob's grid changes the timing here (credit: 1 against 2 and more)
    at.session_state["gpus"] = 1  # nothing to communicate: no knob changes the timing, and the page says so
    at.selectbox(key="tune_knob").select("credit").run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("does not change this configuration's timing" in i.value for i in at.info)


def test_a_method_this_model_refuses_is_left_out_and_the_rest_is_shown():
    """A CSV with measured all-reduce times (comm_ms) and a parameter-server method stopped the whole page."""
    text = "name,params,fwd_ms,bwd_ms,comm_ms\n" + "".join(f"l{i},{(i + 1) * 10000},0.1,0.2,0.05\n" for i in range(40))
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    for key, value in {"model": "upload", "csv_text": text, "csv_name": "comm.csv", "compare": ["wfbp"],
                       "compare_methods": METHODS}.items():
        at.session_state[key] = value
    at.switch_page(str(REPO / "pages" / "compare.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error
    left = [w.value.split(" is left out")[0] for w in at.warning if " is left out: " in w.value]
    assert left == ["BSP-PS", "WFBP-PS", "ByteScheduler-PS"]
    rows = [df.value for df in at.dataframe if "scheduler" in df.value.columns][-1]["scheduler"].tolist()
    assert rows == ["wfbp", *[m for m in METHODS if m not in left]]
    assert at.selectbox(key="tune_knob")  # the page ran to its end
