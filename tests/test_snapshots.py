"""Snapshots: pinned sidebar configurations, their link form, the table of differences,
and the Compare page's panel under AppTest."""

from __future__ import annotations

import pytest
from test_app import chart, csv_app, no_exception, open_page

from dashboard import snapshots


def test_link_form_round_trips_and_leaves_out_defaults():
    settings = snapshots.capture({"net": "ib-edr-100", "batch": 64, "ab": True, "alpha_us": 250.0})
    text = snapshots.encode("IB, batch 64", settings)
    assert text == "IB, batch 64~batch=64~net=ib-edr-100~ab=true~alpha_us=250.0"
    name, back = snapshots.decode(text)
    assert name == "IB, batch 64" and snapshots.capture(back) == settings


@pytest.mark.parametrize("text", ["~net=10gbe", "x~colour=red", "x~gpus", "x~gpus=many"])
def test_unreadable_link_values_raise(text):
    with pytest.raises(ValueError):
        snapshots.decode(text)


def test_diff_table_lists_what_differs_and_the_change():
    snaps = {"a": {"net": "10gbe"}, "b": {"net": "ib-edr-100"}}
    base = {"iteration_time_s": 0.2, "throughput_samples_per_s": 100.0, "comm_hidden_s": 0.05, "comm_s": 0.1,
            "comm_exposed_s": 0.05, "scaling_efficiency": 0.5}
    faster = {**base, "iteration_time_s": 0.1, "throughput_samples_per_s": 200.0, "comm_hidden_s": 0.1,
              "comm_exposed_s": 0.0, "scaling_efficiency": 1.0}
    table = snapshots.diff_table(snaps, {"a": base, "b": faster}).set_index("what")
    assert list(table.index[:1]) == ["net"]  # gpus, batch, ... are the same and left out
    assert table.loc["iteration (ms)", "Δ b"] == "-100 (-50.0 %)"
    assert table.loc["overlap (%)", "a"] == "50" and table.loc["overlap (%)", "Δ b"] == "+50.0 pts"


def test_compare_shows_snapshots_from_a_link_side_by_side():
    at = csv_app()
    at.query_params["snap"] = ["10GbE", "IB~net=ib-edr-100", "bad~foo=1"]
    open_page(at, "compare")
    no_exception(at)
    assert any("snapshot `bad~foo=1` is not usable" in w.value for w in at.warning)
    titles = [a["text"] for a in chart(at, "snap_chart")["layout"]["annotations"]]
    assert titles[0].startswith("<b>10GbE</b>") and titles[1].startswith("<b>IB</b>")
    table = next(df.value for df in at.dataframe if "what" in df.value.columns).set_index("what")
    assert table.loc["net", "IB"] == "ib-edr-100"
    assert table.loc["iteration (ms)", "Δ IB"].startswith("-")  # the faster network


def test_pinning_keeps_the_sidebar_in_the_session_and_the_link():
    at = open_page(csv_app(), "compare")
    at.text_input(key="snap_name").set_value("batch 32").run()
    at.button(key="snap_pin").click().run()
    assert any("1 snapshot pinned" in i.value for i in at.info)
    at.sidebar.number_input(key="batch").set_value(64).run()
    at.button(key="snap_pin").click().run()  # no name: one is made up from the sidebar
    no_exception(at)
    pinned = at.session_state["snapshots"]
    assert list(pinned)[0] == "batch 32" and [s["batch"] for s in pinned.values()] == [32, 64]
    assert dict(at.query_params)["snap"][0] == "batch 32~model=upload"
    assert len(chart(at, "snap_chart")["layout"]["annotations"]) == 2
