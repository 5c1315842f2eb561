"""Small page helpers: check the configuration, state the assumptions, offer downloads."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import TypeVar

import pandas as pd
import streamlit as st

import sim
from dashboard import cached, tables
from dashboard.state import UPLOAD, Config, config_from_state, init_state
from sim.trace import chrome_trace

__all__ = [
    "PLOTLY_CONFIG",
    "assumptions",
    "config_or_stop",
    "delta",
    "download_metrics",
    "download_trace",
    "ensure_frame",
    "fmt_alpha",
    "fmt_ms",
    "guarded",
    "metric_columns",
    "plural",
    "progress_after",
]

T = TypeVar("T")

PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.3g} ms" if ms < 100 else f"{ms:,.0f} ms"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def fmt_alpha(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} µs" if seconds < 1e-3 else f"{seconds * 1e3:.3g} ms"


def ensure_frame() -> None:
    """Make sure ``app.py`` (the frame with the sidebar) runs around every page.

    Streamlit 1.67 decides at the first session of a process whether an app
    with a ``pages/`` folder is a legacy (v1) multipage app. Until some run
    calls ``st.navigation`` it runs ``pages/*.py`` on their own, so a deep link
    opened on a freshly started server (or any AppTest run) would show a page
    without the sidebar. ``st.navigation`` in ``app.py`` clears that flag; this
    clears it too and reruns, so the next run goes through ``app.py``.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a later Streamlit without the flag
        return
    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        st.rerun()


def config_or_stop() -> Config:
    """The sidebar's configuration, checked: on bad input, an error box and stop."""
    ensure_frame()
    init_state(st.session_state)
    try:
        cfg = config_from_state(st.session_state)
    except sim.SimInputError as exc:
        st.error(f"Bad setting in the sidebar or the link: {exc}")
        st.stop()
        raise  # unreachable: st.stop() raises
    try:
        cfg.cluster()
        cached.model_of(cfg)
    except sim.SimInputError as exc:
        if cfg.model == UPLOAD and not cfg.csv_text:
            st.info("Upload a layer CSV in the sidebar (columns name, params, fwd_ms, bwd_ms), "
                    "or pick a zoo model.")
        else:
            st.error(str(exc))
            if cfg.model != UPLOAD:
                st.caption("Fix the setting in the sidebar; the other pages keep working.")
        st.stop()
    return cfg


def guarded(fn: Callable[..., T], *args, **kwargs) -> T:
    """Call a simulator function; on `sim.SimInputError` show it and stop the page."""
    try:
        return fn(*args, **kwargs)
    except sim.SimInputError as exc:
        st.error(str(exc))
        st.stop()
        raise  # unreachable: st.stop() raises


def assumptions(cfg: Config, what: str = "") -> None:
    """One line stating the model behind the page's numbers."""
    cost = cfg.cluster().comm_cost(cached.model_of(cfg), cfg.precision)
    if getattr(cost, "is_measured", False):
        comm = (f"measured per-layer all-reduce times from the CSV (trace-driven); merged messages cost "
                f"α + β·M fitted to them, α = {fmt_alpha(cost.alpha_s)}, β = {cost.beta_s_per_byte * 1e9:.3g} ns/byte")
    elif cfg.alpha_s is not None:
        comm = f"every all-reduce of M bytes takes α + β·M with your α = {fmt_alpha(cost.alpha_s)}"
    else:
        nodes = max(1, cfg.gpus // cfg.gpus_per_node)
        comm = (f"{cfg.collective} all-reduce on {nodes} node(s) × {min(cfg.gpus, cfg.gpus_per_node)} GPUs "
                f"costs α + β·M with α = {fmt_alpha(cost.alpha_s)}, β = {cost.beta_s_per_byte * 1e9:.3g} ns/byte")
    st.caption(
        f"Assumptions: α-β cost model ({comm}); {cfg.gpus} identical workers"
        f"{' (stragglers from the sidebar: per-worker panel below)' if st.session_state.get('strag') else ', no stragglers'}; "
        f"{cfg.compute_source}; batch {cfg.batch_size} per GPU, {cfg.precision}.{(' ' + what) if what else ''}"
    )


def metric_columns() -> dict:
    """Number formats for `dashboard.tables.metrics_table` shown with ``st.dataframe``."""
    fmt = {"throughput (samples/s)": "%.0f", "messages": "%d", "speedup": "%.2f", "scaling efficiency (%)": "%.1f"}
    return {
        label: st.column_config.NumberColumn(format=fmt.get(label, "%.2f"))
        for label in tables.METRIC_LABELS.values() if label != "scheduler"
    }


def delta(value: float, reference: float, against: str, unit: str = "%", inverse: bool = False) -> dict:
    """Keyword arguments for ``st.metric``: the change from ``reference`` (relative
    in %, or absolute in ``unit``), neutral when it is negligible."""
    change = (value / reference - 1) * 100 if unit == "%" and reference else value - reference
    if abs(change) < 0.05:
        return {"delta": f"same as {against}", "delta_color": "off", "delta_arrow": "off"}
    sep = "" if unit == "%" else " "
    return {"delta": f"{change:+.1f}{sep}{unit} vs {against}", "delta_color": "inverse" if inverse else "normal"}


@contextlib.contextmanager
def progress_after(seconds: float, text: str):
    """Yield a ``progress(fraction)`` callback that shows a bar only once the work
    has taken ``seconds`` (fast, cached runs show nothing); the bar goes at the end."""
    slot = st.empty()
    started = time.perf_counter()

    def progress(done: float) -> None:
        if time.perf_counter() - started > seconds:
            slot.progress(done, text=text)

    try:
        yield progress
    finally:
        slot.empty()


def download_metrics(frame: pd.DataFrame, name: str, key: str, label: str = "Metrics (CSV)") -> None:
    st.download_button(label, frame.to_csv(index=False).encode(), file_name=f"{name}.csv",
                       mime="text/csv", key=key, icon=":material/download:", on_click="ignore")


def download_trace(timeline: pd.DataFrame, name: str, key: str, title: str) -> None:
    trace = json.dumps(chrome_trace(timeline, title=title))
    st.download_button("Timeline (Chrome trace JSON)", trace.encode(), file_name=f"{name}.trace.json",
                       mime="application/json", key=key, icon=":material/download:", on_click="ignore",
                       help="Open in https://ui.perfetto.dev or chrome://tracing")
