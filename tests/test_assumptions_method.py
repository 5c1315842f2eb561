"""The Timeline's assumptions line names a survey method's parameter server instead of an all-reduce.

A real-browser check found `?method=WFBP-PS` still described "ring all-reduce on 4 nodes × 4 GPUs"."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import state, ui
from sim.methods import METHODS

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("method", sorted(METHODS))
def test_the_line_follows_the_methods_architecture(method):
    cfg = state.config_from_state({**state.DEFAULTS, "gpus": 16, "per_node": 4})
    text = ui.assumptions_text(cfg, stragglers=False, method=method)
    if METHODS[method].architecture == "ps":
        assert "parameter server per node, 4 nodes × 4 GPUs" in text and "all-reduce" not in text
    else:
        assert "all-reduce on 4 nodes × 4 GPUs" in text


def test_the_timeline_page_uses_the_chosen_method():
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    for key, value in {"model": "resnet50", "gpus": 16, "per_node": 4, "method": "WFBP-PS"}.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "parameter server" in at.caption[0].value and at.caption[0].value.startswith("Assumptions:")


def test_a_parameter_servers_shading_is_named_push_and_pull():
    """The Gantt's legend said "all-reduce hidden behind compute" over a parameter server's push and pull lanes."""
    import sim
    from dashboard import figures

    model, cluster = sim.load_model("resnet50"), sim.Cluster(gpus=8, gpus_per_node=4, network="10gbe")
    for kwargs, what in ((dict(method="WFBP-PS"), "push and pull"), (dict(scheduler="wfbp"), "all-reduce")):
        fig = figures.gantt_figure(sim.simulate(model, cluster, batch_size=32, **kwargs).timeline, "t")
        names = {t.name for t in fig.data if t.name}
        assert {f"{what} hidden behind compute", f"{what} exposed (GPU waits)"} <= names, names
