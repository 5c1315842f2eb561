"""The Timeline's straggler panel says where the per-worker run's mean iteration goes."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

import sim
from dashboard.stragglers_view import breakdown_sentence
from sim.workers import StragglerSpec, simulate_workers

REPO = Path(__file__).resolve().parent.parent


def test_the_sentence_names_parts_that_add_up_to_the_iteration():
    m = simulate_workers(sim.load_model("resnet50"), sim.Cluster(gpus=8, gpus_per_node=4, network="10gbe"), "wfbp",
                         batch_size=16, straggler=StragglerSpec(stragglers=1, factor=2.0), iterations=4).metrics
    text = breakdown_sentence(m)
    assert m["straggler_wait_s"] > 0
    for part in ("compute_s", "straggler_wait_s", "comm_exposed_s", "comm_hidden_s", "iteration_time_s"):
        ms = m[part] * 1e3
        shown = f"{ms:.3g} ms" if ms < 100 else f"{ms:,.0f} ms"
        assert shown in text, (part, shown, text)
    assert "slowest worker" in text and "exposed communication" in text


def test_the_timeline_panel_shows_it():
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    for key, value in {"model": "resnet50", "gpus": 8, "per_node": 4, "strag": True, "strag_dist_sb": "constant",
                       "strag_slow_sb": 1, "strag_factor_sb": 2.0, "scheduler": "wfbp"}.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(c.value.startswith("Of the mean iteration") for c in at.caption)
