"""Snapshots: pinned sidebar configurations, their link form, the table of differences,
and the Compare page's panel under AppTest."""

from __future__ import annotations

import re

import pytest
from test_app import chart, csv_app, new_app, no_exception, open_page

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


def test_diff_table_says_same_for_no_change_and_never_rounds_a_change_to_zero():
    """Two snapshots differing in a setting that changes nothing read "+0 (+0.0 %)" and "+0.0 pts", and a
    change of 1e-7 s read "+0.0001 (+0.0 %)": a change shown where there is none, and a zero where there is one."""
    base = {"iteration_time_s": 0.5, "throughput_samples_per_s": 1000.0, "comm_hidden_s": 0.1, "comm_s": 0.2,
            "comm_exposed_s": 0.1, "scaling_efficiency": 0.5}
    table = snapshots.diff_table({"a": {}, "b": {"strag_seed_sb": 3}},
                                 {"a": base, "b": {**base, "iteration_time_s": 0.5000001}}).set_index("what")
    assert table.loc["throughput (samples/s)", "Δ b"] == "same"
    assert table.loc["overlap (%)", "Δ b"] == "same"
    assert table.loc["iteration (ms)", "Δ b"] == "+0.0001 (+2e-05 %)"


@pytest.mark.parametrize("names", [("what", "b"), ("a", "Δ b", "b"), ("a", "b", "Δ b")])
def test_diff_table_keeps_every_column_whatever_the_snapshots_are_named(names):
    """A snapshot named "what" overwrote the label column, and one named "Δ b" the change column of "b"
    (hostile review, 2026-11-25): every snapshot and change column is kept, under a unique label."""
    base = {"iteration_time_s": 0.2, "throughput_samples_per_s": 100.0, "comm_hidden_s": 0.05, "comm_s": 0.1,
            "comm_exposed_s": 0.05, "scaling_efficiency": 0.5}
    metrics = {n: {**base, "iteration_time_s": 0.1 * (i + 1)} for i, n in enumerate(names)}
    table = snapshots.diff_table({n: {"gpus": 8 * (i + 1)} for i, n in enumerate(names)}, metrics)
    assert table.columns.is_unique and len(table.columns) == 2 * len(names)
    assert list(table.iloc[:, 0][:2]) == ["gpus", "iteration (ms)"]
    row = table.iloc[1]
    assert list(row.iloc[1:1 + len(names)]) == [f"{100 * (i + 1):,.4g}" for i in range(len(names))]
    assert row.iloc[-1] == f"+{100 * (len(names) - 1):,.4g} (+{(len(names) - 1) * 100:.1f} %)"


def test_diff_table_says_so_where_a_figure_is_not_defined():
    """A one-GPU snapshot has no communication, so no overlap: it read "nan" and "+nan pts"."""
    base = {"iteration_time_s": 0.2, "throughput_samples_per_s": 100.0, "comm_hidden_s": 0.05, "comm_s": 0.1,
            "comm_exposed_s": 0.05, "scaling_efficiency": 0.5}
    alone = {**base, "comm_hidden_s": 0.0, "comm_s": 0.0, "comm_exposed_s": 0.0, "scaling_efficiency": 1.0}
    for order in (("one", "sixteen"), ("sixteen", "one")):
        metrics = {"one": alone, "sixteen": base}
        table = snapshots.diff_table({n: {"gpus": 1 if n == "one" else 16} for n in order},
                                     {n: metrics[n] for n in order}).set_index("what")
        assert table.loc["overlap (%)", "one"] == "—" and table.loc["overlap (%)", f"Δ {order[1]}"] == "—"
        assert "nan" not in table.to_string()


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


def test_snapshots_of_two_uploads_each_run_their_own_table():
    """Two snapshots pinned over two uploaded tables compared as identical (both ran the current
    upload; hostile review): each keeps its table in the session, and the differences name the files."""
    head = "name,params,fwd_ms,bwd_ms\n"
    small = head + "".join(f"l{i},1000,1,2\n" for i in range(10))
    large = head + "".join(f"l{i},50000000,1,2\n" for i in range(10))
    at = open_page(csv_app(small, name="small.csv"), "compare")
    at.text_input(key="snap_name").set_value("SMALL").run()
    at.button(key="snap_pin").click().run()
    at.session_state["csv_text"], at.session_state["csv_name"] = large, "large.csv"  # another upload
    at.run()
    at.text_input(key="snap_name").set_value("LARGE").run()
    at.button(key="snap_pin").click().run()
    no_exception(at)
    table = next(df.value for df in at.dataframe if "what" in df.value.columns).set_index("what")
    assert table.loc["uploaded file", "SMALL"] == "small.csv" and table.loc["uploaded file", "LARGE"] == "large.csv"
    small_ms, large_ms = (float(table.loc["iteration (ms)", n].replace(",", "")) for n in ("SMALL", "LARGE"))
    assert large_ms > 2 * small_ms  # 50,000 times the gradients
    at.multiselect(key="snap_pick").unselect("SMALL").run()  # forgotten: its table goes too
    assert list(at.session_state["snapshot_uploads"]) == ["LARGE"]


def test_a_third_and_fourth_pin_are_compared_and_kept():
    """The picker of snapshots to compare kept its old value when a third was pinned (Streamlit's multiselect is
    identified by its key alone, so dropping the key did not reset it): the third was not compared, and the
    fourth pin forgot it."""
    at = open_page(csv_app(), "compare")
    for batch in (32, 48, 64, 96):
        at.sidebar.number_input(key="batch").set_value(batch).run()
        at.text_input(key="snap_name").set_value(f"b{batch}").run()
        at.button(key="snap_pin").click().run()
    no_exception(at)
    assert list(at.session_state["snapshots"]) == ["b32", "b48", "b64", "b96"]
    assert at.multiselect(key="snap_pick").value == ["b32", "b48", "b64", "b96"]
    assert len(chart(at, "snap_chart")["layout"]["annotations"]) == 4


# --- hostile links (each failed before its fix: an exception, a stopped page, or no word) ---------------


@pytest.mark.parametrize("text, why", [
    ("a~gpus=-5", "gpus=-5: outside 1..65536"),  # was kept, then an exception on Compare
    ("a~alpha_us=nan~ab=true", "alpha_us=nan: not a finite number"),  # likewise
    ("a~gpus=1e400", "gpus=1e400: not a finite number"),
    ("a~net=bogus", "net=bogus: not one of the options"),  # was kept, then an error box that stopped Compare
    ("a~model=upload", "cannot travel in a link"),
    ("a~gpus=8~gpus=16", "gpus given twice"),
    ("x" * 81, "its name has 81 characters; at most 80"),
    ("  ~gpus=8", "a snapshot needs a name"),
])
def test_a_link_value_a_snapshot_cannot_use_is_refused_with_the_reason(text, why):
    with pytest.raises(ValueError, match=re.escape(why)):
        snapshots.decode(text)


def test_decoded_numbers_are_the_types_of_the_sidebar():
    assert snapshots.decode("a~gpus=64.0~beta_ns=2~ab=TRUE") == ("a", {"gpus": 64, "beta_ns": 2.0, "ab": True})


def test_compare_leaves_out_bad_snapshots_of_a_link_and_keeps_working():
    at = csv_app()
    at.query_params["snap"] = ["a~gpus=-5", "b~alpha_us=nan~ab=true", "ok", "ok~gpus=32", "IB~net=ib-edr-100"]
    open_page(at, "compare")
    no_exception(at)
    warnings = [w.value for w in at.warning]
    assert "Link: snapshot `a~gpus=-5` is not usable (gpus=-5: outside 1..65536); it is left out." in warnings
    assert any(w.startswith("Link: snapshot `b~alpha_us=nan~ab=true` is not usable") for w in warnings)
    assert any("a second snapshot named 'ok'); it replaces the one before" in w for w in warnings)
    assert list(at.session_state["snapshots"]) == ["ok", "IB"]
    assert at.session_state["snapshots"]["ok"]["gpus"] == 32
    assert at.selectbox(key="tune_knob")  # the page ran to its end


def test_a_link_brings_at_most_max_snapshots_and_says_so_once():
    at = csv_app()
    at.query_params["snap"] = [f"s{i}~batch={i + 1}" for i in range(snapshots.MAX_SNAPSHOTS + 40)]
    open_page(at, "compare")
    no_exception(at)
    notes = [w.value for w in at.warning if "at most" in w.value]
    assert len(notes) == 1 and f"the {40 - 1} after it" in notes[0]
    assert len(at.session_state["snapshots"]) == snapshots.MAX_SNAPSHOTS


def test_a_snapshot_that_cannot_run_is_left_out_with_a_warning_and_the_page_goes_on():
    at = csv_app()
    at.query_params["snap"] = ["ten GPUs~gpus=10", "a", "b~gpus=32"]  # 10 GPUs do not fill nodes of 4
    open_page(at, "compare")
    no_exception(at)
    assert not at.error
    assert any(w.value.startswith("Snapshot `ten GPUs` cannot run") for w in at.warning)
    titles = [a["text"] for a in chart(at, "snap_chart")["layout"]["annotations"]]
    assert [t.split(":")[0] for t in titles] == ["<b>a</b>", "<b>b</b>"]
    assert at.selectbox(key="tune_knob")


def test_a_snapshot_name_is_shown_as_text_not_markup():
    at = csv_app()
    at.query_params["snap"] = ["<i>x</i> **y**", "b~gpus=32"]
    open_page(at, "compare")
    no_exception(at)
    titles = [a["text"] for a in chart(at, "snap_chart")["layout"]["annotations"]]
    assert titles[0].startswith("<b>&lt;i&gt;x&lt;/i&gt; **y**</b>")
    assert any(r"against **\<i\>x\</i\> \*\*y\*\***" in c.value for c in at.caption)


def test_what_is_pinned_stays_a_link_that_brings_it_back():
    """A pinned name with '~' or over 80 characters, or a 13th snapshot, made a link that did not
    bring the same snapshots back."""
    at = open_page(new_app(model="resnet50"), "compare")
    at.session_state["snap_name"] = "a~b " + "x" * 100  # what the text box (80 characters at most) may not hold
    at.button(key="snap_pin").click().run()
    no_exception(at)
    (name,) = at.session_state["snapshots"]
    assert name == ("a-b " + "x" * 100)[:snapshots.MAX_NAME_CHARS]
    assert snapshots.decode(snapshots.encode(name, at.session_state["snapshots"][name]))[0] == name
    at.session_state["snapshots"] = {f"s{i}": snapshots.capture({}) for i in range(snapshots.MAX_SNAPSHOTS)}
    at.run()
    assert at.button(key="snap_pin").disabled
