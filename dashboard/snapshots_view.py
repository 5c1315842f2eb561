"""The Compare page's snapshots panel: pin the sidebar under a name, compare two or more.

The pure parts (capture, the link form, the table of differences) are in
`dashboard.snapshots`.
"""

from __future__ import annotations

import html

import streamlit as st

import sim
from dashboard import cached, figures, snapshots, state, tables, ui
from dashboard.state import Config

__all__ = ["panel", "pin", "sync_link"]


def _auto_name(cfg: Config) -> str:
    return f"{cfg.model_label} · {ui.plural(cfg.gpus, 'GPU')} · {cfg.network} · batch {cfg.batch_size} · {cfg.precision}"


def sync_link() -> None:
    """Write the session's snapshots into the address bar (one ``snap`` value each)."""
    pinned = st.session_state.get("snapshots") or {}
    if pinned:
        st.query_params["snap"] = [snapshots.encode(n, s) for n, s in pinned.items()]
    elif "snap" in st.query_params:
        del st.query_params["snap"]


def pin() -> None:
    """The Pin button's ``on_click``: keep the sidebar under the typed name (or a made-up one)."""
    session = st.session_state
    name = (session.get("snap_name") or "").strip() or _auto_name(state.config_from_state(session))
    name = name.replace("~", "-")[:snapshots.MAX_NAME_CHARS]  # as its link will carry it
    session["snapshots"] = {**(session.get("snapshots") or {}), name: snapshots.capture(session)}
    # its uploaded table, kept in the session (a link carries no upload); a zoo model's snapshot has none
    uploads = {n: u for n, u in (session.get("snapshot_uploads") or {}).items() if n != name}
    if session.get("model") == state.UPLOAD and session.get("csv_text"):
        uploads[name] = {"csv_text": session["csv_text"], "csv_name": session.get("csv_name")}
    session["snapshot_uploads"] = uploads
    session["snap_name"] = ""
    # every snapshot picked again, the new one included: set, not dropped (the picker is identified by its key
    # alone, so without a value here it keeps the one the browser holds, and the new snapshot is left out)
    session["snap_pick"] = list(session["snapshots"])


def _forget() -> None:
    session = st.session_state
    session["snapshots"] = {n: s for n, s in session["snapshots"].items() if n in (session.get("snap_pick") or [])}
    session["snapshot_uploads"] = {n: u for n, u in (session.get("snapshot_uploads") or {}).items()
                                   if n in session["snapshots"]}


def panel(cfg: Config) -> None:
    """Pin, pick and compare snapshots: timelines on one axis, a table of differences."""
    st.subheader("Snapshots")
    st.caption("Pin the sidebar's configuration under a name, change the sidebar, pin again: "
               "e.g. 10GbE against 100 Gb InfiniBand, or batch 32 against 64. Snapshots live in this "
               "session and in the link.")
    pinned = st.session_state.get("snapshots") or {}
    full = len(pinned) >= snapshots.MAX_SNAPSHOTS  # a link brings no more: what is pinned stays a link
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    c1.text_input("Name", key="snap_name", placeholder=_auto_name(cfg)[:snapshots.MAX_NAME_CHARS],
                  max_chars=snapshots.MAX_NAME_CHARS)
    c2.button("Pin this configuration", key="snap_pin", icon=":material/push_pin:", on_click=pin, disabled=full,
              help=f"At most {snapshots.MAX_SNAPSHOTS} snapshots: unpick one below to forget it." if full else None)
    sync_link()
    if len(pinned) < 2:
        st.info(f"{ui.plural(len(pinned), 'snapshot')} pinned: pin two or more to compare them.")
        return
    c1, c2 = st.columns([3, 1])
    picks = st.session_state.get("snap_pick")
    if picks is None or [n for n in picks if n not in pinned]:  # none yet (a link's), or a name no longer pinned
        st.session_state["snap_pick"] = list(pinned)
    picked = c1.multiselect("Snapshots to compare (unpick one to forget it)", list(pinned), key="snap_pick",
                            on_change=_forget)
    options = state.scheduler_options()
    scheduler = c2.selectbox("Scheduler", options, index=state.index_of("snap_scheduler", options),
                             key="snap_scheduler", bind="query-params")
    if len(picked) < 2:
        return
    configs, results = _runs({n: pinned[n] for n in picked}, scheduler)
    picked = list(results)
    if len(picked) < 2:
        return
    titles = {n: f"<b>{html.escape(n)}</b>: {ui.fmt_ms(r.iteration_time_s)}, overlap "
                 f"{ui.fmt_overlap(r.metrics['comm_hidden_s'], r.metrics['comm_s'])}" for n, r in results.items()}
    ui.chart(lambda: figures.gantt_stack_figure({n: tables.drawn_timeline(r) for n, r in results.items()}, titles),
             "snap_chart",
             "snapshots", cache_key=("snapshots", scheduler, tuple(configs.items()), tuple(titles.items())))
    table = snapshots.diff_table({n: {**pinned[n], "csv_name": configs[n].csv_name} for n in picked},
                                 {n: r.metrics for n, r in results.items()})
    st.dataframe(table, hide_index=True, key="snap_table")
    st.caption(f"Settings that differ, then key figures under {scheduler}; each Δ column is against "
               f"**{ui.plain(picked[0])}**.")


def _runs(pinned: dict, scheduler: str) -> tuple[dict, dict]:
    """The configuration and the result of every snapshot that can run; a warning for each that cannot
    (e.g. an uploaded CSV no longer there, a GPU count that does not fill whole nodes), which is left out."""
    current = {"csv_text": st.session_state.get("csv_text"), "csv_name": st.session_state.get("csv_name")}
    kept = st.session_state.get("snapshot_uploads") or {}
    configs, results = {}, {}
    for name, settings in pinned.items():
        try:  # an upload's snapshot runs the table it was pinned with (one from a link, the current upload)
            configs[name] = state.config_from_state({**settings, **kept.get(name, current)})
            results[name] = cached.simulate(configs[name], scheduler)
        except sim.SimInputError as exc:
            configs.pop(name, None)
            st.warning(f"Snapshot {ui.literal(name)} cannot run: {ui.plain(str(exc))}. It is left out.",
                       icon=":material/warning:")
    return configs, results
