"""The sidebar's Stragglers control, used by the Timeline and Compare pages."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import sim
from dashboard import state

REPO = Path(__file__).resolve().parent.parent


def app(**session) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    for key, value in {"model": "resnet50", "gpus": 8, "per_node": 4, **session}.items():
        at.session_state[key] = value
    return at


def metric_ms(at: AppTest, label: str) -> float:
    value = next(m.value for m in at.metric if m.label == label)
    return float(value.split()[0].replace(",", ""))


def test_stragglers_off_by_default():
    assert state.stragglers_from_state({}) is None


def test_setting_is_validated():
    with pytest.raises(sim.SimInputError, match="more than the 4 GPUs"):
        state.stragglers_from_state({"strag": True, "gpus": 4, "strag_slow_sb": 5})
    spec, seed = state.stragglers_from_state({"strag": True, "strag_dist_sb": "constant", "strag_cv_sb": 0.5})
    assert spec.cv == 0.0 and seed == 0


def test_timeline_shows_who_waits_and_slow_workers_lengthen_the_iteration():
    at = app(strag=True, strag_dist_sb="constant", strag_slow_sb=1, strag_factor_sb=2.0, scheduler="wfbp")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    ideal = metric_ms(at, "Iteration time")
    p50 = metric_ms(at, "Median iteration")
    assert p50 > ideal  # one worker twice as slow holds every all-reduce back
    assert any(c.key == "timeline_stragglers" for c in at.get("plotly_chart"))


def test_without_variability_the_per_worker_engine_agrees_with_the_timeline():
    at = app(strag=True, strag_dist_sb="constant", strag_slow_sb=0, scheduler="wfbp")
    at.run()
    assert not at.exception
    assert metric_ms(at, "Median iteration") == pytest.approx(metric_ms(at, "Iteration time"), rel=0.01)


def test_compare_page_adds_a_straggler_table():
    at = app(strag=True, strag_dist_sb="normal", strag_cv_sb=0.2, compare=["wfbp", "mgwfbp"])
    at.run()
    at.switch_page(str(REPO / "pages" / "compare.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    table = next(df.value for df in at.dataframe if "p50 (ms)" in df.value.columns)
    assert table["scheduler"].tolist() == ["wfbp", "mgwfbp"]
    assert (table["p99 (ms)"] >= table["p50 (ms)"]).all()


def test_a_general_engine_view_too_big_for_three_iterations_is_refused():
    """bytescheduler on 3,500 GPUs ran 3 iterations of 1.7 M tasks: 50 s and 1.5 GB."""
    at = app(strag=True, gpus=1024, per_node=1, scheduler="bytescheduler")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("runs the general per-worker engine, limited to 300,000 tasks" in e.value for e in at.error)


def test_compare_leaves_out_a_scheduler_too_big_for_the_straggler_table_and_shows_the_rest():
    at = app(strag=True, gpus=256, per_node=8, compare=["wfbp", "bytescheduler"])
    at.switch_page(str(REPO / "pages" / "compare.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(w.value.startswith("Stragglers: left out bytescheduler: ") for w in at.warning)
    table = next(df.value for df in at.dataframe if "p50 (ms)" in df.value.columns)
    assert list(table["scheduler"]) == ["wfbp"]
    assert at.selectbox(key="tune_knob")  # the rest of the page is there


def test_compare_refuses_a_straggler_table_over_the_work_cap_but_keeps_the_page():
    at = app(strag=True, gpus=2048, per_node=1)  # 4 schedulers x 2,048 GPUs x (163 + 16) x 40 iterations > 32 M
    at.switch_page(str(REPO / "pages" / "compare.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("x 4 schedulers = 58,654,720: use fewer GPUs, or fewer schedulers" in e.value for e in at.error)
    assert at.selectbox(key="tune_knob")


def test_the_compare_table_runs_at_most_two_schedulers_on_the_general_engine():
    """All five general-engine schedulers (bytescheduler, dear, zero1-3) took 14 s together."""
    from dashboard import cached

    at = app(strag=True, compare=list(sim.SCHEDULERS))
    at.switch_page(str(REPO / "pages" / "compare.py")).run()
    assert not at.exception, [e.value for e in at.exception]
    general = [s for s in sim.SCHEDULERS if cached.needs_general_engine(state.config_from_state(at.session_state), s)]
    assert len(general) > cached.MAX_GENERAL_STRAGGLER_RUNS
    left = [w.value.split(":")[1].split()[-1] for w in at.warning if w.value.startswith("Stragglers: left out")]
    assert left == general[cached.MAX_GENERAL_STRAGGLER_RUNS:]
    table = next(df.value for df in at.dataframe if "p50 (ms)" in df.value.columns)
    assert len(table) == len(sim.SCHEDULERS) - len(left)
