"""What the dashboard leaves out of a rerun to stay fast under load (issue 15, item 6):
a closed memory panel sends nothing, an open one its chart and exports; the imports are
frozen out of the garbage collector's way once per process."""

from __future__ import annotations

import gc
from pathlib import Path

from streamlit.testing.v1 import AppTest

from dashboard import warmup

REPO = Path(__file__).resolve().parent.parent


def timeline(**session) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    for key, value in {"model": "resnet50", "gpus": 16, "gpu": "v100-sxm2", **session}.items():
        at.session_state[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def chart_keys(at: AppTest) -> list[str]:
    return [el.proto.id.rsplit("-", 1)[-1] for el in at.get("plotly_chart")]


def test_a_closed_memory_panel_sends_no_chart():
    at = timeline()
    panel = [e for e in at.expander if e.label.startswith("Memory per GPU")]
    assert panel and "does NOT fit" not in panel[0].label
    assert "memory_chart" not in chart_keys(at)
    assert "mem_optimizer" not in [s.key for s in at.selectbox]
    assert [el.proto.label for el in at.get("download_button")].count("SVG") == len(chart_keys(at)) == 1


def test_an_open_memory_panel_draws_its_chart_and_keeps_the_optimizer():
    at = timeline(memory_panel_fits=True)  # what a click on the closed panel leaves
    assert "memory_chart" in chart_keys(at)
    assert [el.proto.label for el in at.get("download_button")].count("SVG") == len(chart_keys(at)) == 2
    at.selectbox(key="mem_optimizer").set_value("adam").run()
    at.session_state["memory_panel_fits"] = False  # closed: the selectbox is gone ...
    at.run()
    assert "mem_optimizer" not in [s.key for s in at.selectbox]
    at.session_state["memory_panel_fits"] = True  # ... and opened again, the choice is still there
    at.run()
    assert at.selectbox(key="mem_optimizer").value == "adam"


def test_the_imports_are_frozen_once_per_process():
    warmup.freeze_imports()
    assert gc.get_freeze_count() > 0
    assert warmup.freeze_imports() is False
