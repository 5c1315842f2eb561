"""Small page helpers: check the configuration, state the assumptions, offer downloads."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pandas as pd
import streamlit as st

import sim
from dashboard import cached, links, snapshots, tables, zoom
from dashboard.state import (
    DEFAULTS,
    UPLOAD,
    UPLOAD_LABEL,
    Config,
    config_from_state,
    default,
    init_state,
)
from dashboard.upload import MAX_UPLOAD_MB
from sim.methods import METHODS
from sim.trace import chrome_trace

__all__ = [
    "PLOTLY_CONFIG",
    "assumptions",
    "chart",
    "check_link",
    "config_or_stop",
    "delta",
    "download_metrics",
    "download_trace",
    "ensure_frame",
    "fmt_alpha",
    "fmt_ms",
    "figure_image",
    "fmt_overlap",
    "follow_timeline_request",
    "guarded",
    "home_page",
    "image_export_problem",
    "lazy_popover",
    "open_timeline",
    "metric_columns",
    "phone_layout",
    "plural",
    "progress_after",
    "request_timeline",
    "show_link_notes",
    "start_here",
]

T = TypeVar("T")

PLOTLY_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}


def fmt_ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.3g} ms" if ms < 100 else f"{ms:,.0f} ms"


def fmt_rate(per_s: float) -> str:
    """A rate (samples/s): whole numbers from 100 up, three significant digits below (0.0064, not 0)."""
    return f"{per_s:,.0f}" if per_s >= 100 else f"{per_s:.3g}"


def fmt_overlap(hidden_s: float, comm_s: float) -> str:
    """Overlap as HTA reports it (hidden ÷ all communication), or a dash without communication."""
    return f"{float(tables.overlap_pct(hidden_s, comm_s)):.1f} %" if comm_s > 0 else "—"


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def fmt_alpha(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} µs" if seconds < 1e-3 else f"{seconds * 1e3:.3g} ms"


#: Whether the script run on this thread is going through ``app.py``'s frame (`framed`): a
#: session's script runs one at a time on its own thread.
_FRAME = threading.local()


@contextlib.contextmanager
def framed():
    """``app.py`` runs its frame (and the page inside it) in this context, so `ensure_frame`
    can tell a page run inside the frame from one Streamlit started on its own."""
    _FRAME.active = True
    try:
        yield
    finally:
        _FRAME.active = False


def ensure_frame(rerun: bool = True) -> None:
    """Make sure ``app.py`` (the frame with the sidebar) runs around every page.

    Streamlit 1.67 decides at the first session of a process whether an app
    with a ``pages/`` folder is a legacy (v1) multipage app. Until some run
    calls ``st.navigation`` it runs ``pages/*.py`` on their own, so a deep link
    opened on a freshly started server (or any AppTest run) would show a page
    without the sidebar. ``st.navigation`` in ``app.py`` clears that flag; this
    clears it too and reruns, so the next run goes through ``app.py``; ``app.py``
    itself, about to call ``st.navigation``, passes ``rerun=False`` (a rerun there
    would drop a button's click).

    Whether this run is a page on its own is told by this run (`framed`), not by the
    flag: sessions that open together on a fresh server all start on their own
    before the first of them clears the flag, and each must rerun through the frame.
    A page that is itself the main script (an AppTest of one page) runs as it is.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
        from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx
    except ImportError:  # a later Streamlit without the flag
        return
    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
    if not rerun or getattr(_FRAME, "active", False):
        return
    ctx = get_script_run_ctx()
    main = getattr(getattr(ctx, "pages_manager", None), "main_script_path", None)
    if main is not None and Path(main).name == "app.py":  # a page Streamlit ran without the frame
        st.rerun()


START_HERE = """\
**New here? Three steps.**
1. **Timeline**: one training iteration on the cluster in the sidebar. Backward (orange) produces gradients;
   each all-reduce message is filled light where it is *hidden* behind compute and red where it is *exposed*
   and the GPUs wait. **Overlap** = hidden ÷ all communication.
2. Change one thing in the sidebar (GPUs, network, batch) and watch the iteration time and the overlap move;
   **Compare schedulers** shows every way of grouping and sending gradients on one time axis.
3. **Learn** explains why merging small messages helps (the start-up cost α) and where MG-WFBP's greedy
   merging falls short; **Validation** shows how close all this comes to published measurements.

Every view is a link: copy the address bar to share exactly what you see.
"""


#: Narrow screens (a 390 px phone): tighter margins, smaller headings, wide formulas and
#: tables scroll inside their own box instead of being cut off. (And the zoom relay takes no room.)
PHONE_CSS = """<style>
.st-key-zoom_relay { display: none; }
@media (max-width: 640px) {
  [data-testid="stMainBlockContainer"] { padding-left: 0.75rem; padding-right: 0.75rem; }
  [data-testid="stMain"] h1 { font-size: 1.75rem; }
  .katex-display { overflow-x: auto; overflow-y: hidden; max-width: 100%; }
  [data-testid="stMarkdownContainer"] { overflow-wrap: anywhere; }
  [data-testid="stMarkdownContainer"] table { display: block; overflow-x: auto; }
}
</style>"""


def phone_layout() -> None:
    """Add `PHONE_CSS` to the page (no visible element)."""
    st.html(PHONE_CSS)


def start_here(session) -> None:
    """The "start here" panel on a session's first visit, until it is dismissed."""
    if session.get("intro_seen"):
        return
    # Collapsed, so that the page's chart stays in view; it stays until "Got it". Lazy, like the
    # memory panel: a closed panel sends no text and no button (the browser drew them on every rerun).
    panel = st.expander("Start here: new to data-parallel training? Three steps", icon=":material/waving_hand:",
                        key="start_here", on_change="rerun")
    if not panel.open:
        return
    with panel:
        st.markdown(START_HERE)
        st.button("Got it", key="intro_done", on_click=lambda: session.update(intro_seen=True))


def home_page() -> None:
    """The root address; ``app.py`` sends it on to ``/timeline`` before it runs."""


def check_link(session, params) -> None:
    """Once per session, before any widget: note the query values the dashboard cannot
    use (Streamlit would drop them silently, or fail on some: ``gpus=1e400``), for
    `show_link_notes`, and take them out of the address, so that the widgets start from
    the value the note names and the address bar is the link of what is shown."""
    if session.get("link_checked"):
        return
    session["link_checked"] = True
    session["link_notes"] = []
    for bad in links.check_query(links.query_items(params)):
        upload = bad.key == "model" and params.get("model") in (UPLOAD, UPLOAD_LABEL)  # the option's name or label
        if upload:
            session["model"] = UPLOAD  # the selectbox knows the option by its label; take the name too
        session["link_notes"].append((bad.key, bad.raw, bad.reason, None if upload else _replace(params, bad)))
    session["snapshots"] = dict(session.get("snapshots") or {})
    raws = params.get_all("snap") if hasattr(params, "get_all") else []
    for i, raw in enumerate(raws):
        if len(session["snapshots"]) >= snapshots.MAX_SNAPSHOTS:
            session["link_notes"].append(("snap", raw, f"a link holds at most {snapshots.MAX_SNAPSHOTS} snapshots; "
                                          f"so are the {len(raws) - i - 1} after it", None))
            break
        try:
            name, settings = snapshots.decode(raw)
        except ValueError as exc:
            session["link_notes"].append(("snap", raw, str(exc), None))
            continue
        if name in session["snapshots"]:
            session["link_notes"].append(("snap", raw, f"a second snapshot named {name!r}", "replaced"))
        session["snapshots"][name] = snapshots.capture(settings)


def _replace(params, bad: links.BadParam):
    """Put the value used instead of ``bad`` into ``params`` (none: the widget's default) and return it."""
    key = bad.key
    given = params.get_all(key) if hasattr(params, "get_all") else [params.get(key)]
    used = None
    if key in links.LISTS:
        allowed = set(links.options(key))
        used = list(dict.fromkeys(v for v in given if v in allowed)) or None
    elif bad.repeated:
        used = given[-1]
    if used is None:
        if key in params:
            del params[key]
    else:
        params[key] = used
    _seed_from(key, used)
    return default(key) if used is None else used


def _seed_from(key: str, value) -> None:
    """Make a bound widget start from ``value`` (None: its default), not from the raw value the
    page was opened with: Streamlit seeds widgets from that, and some raw values make it fail
    (``gpus=1e400``: OverflowError in its number parser)."""
    try:
        from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

        with get_script_run_ctx().session_state.query_params() as params:
            initial = params._initial_query_params  # Streamlit's own copy of the opening URL
            if value is None:
                initial.pop(key, None)
            else:
                initial[key] = list(value) if isinstance(value, list) else [value]
    except (AttributeError, ImportError, TypeError):  # another Streamlit, or no script run (a unit test)
        pass


#: A query value is quoted in a notice up to this many characters.
MAX_QUOTED = 80


def literal(text: str, limit: int = MAX_QUOTED) -> str:
    """``text`` as inline code in Markdown: shortened to ``limit`` characters, on one line, fenced
    with more backticks than it holds, so that no Markdown or HTML in it takes effect."""
    text = " ".join(str(text).split())
    if not text:
        return "(empty)"
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text):,} characters)"
    run = max((len(ticks) for ticks in re.findall("`+", text)), default=0)
    fence = "`" * (run + 1)
    return f"{fence} {text} {fence}" if run else f"`{text}`"


def plain(text: str, limit: int = 2 * MAX_QUOTED) -> str:
    """``text`` shortened to ``limit`` characters, on one line, its Markdown and HTML characters escaped."""
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text):,} characters)"
    return re.sub(r"([\\`*_\[\]<>$~|#])", r"\\\1", text)


def _shown(value) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "none"
    return str(value) if value != "" else "none"


def show_link_notes(session) -> None:
    """A warning for each bad value of the link the session opened with, naming the
    key and the value used instead (the widget's, once the sidebar has run)."""
    for key, raw, reason, *used in session.get("link_notes") or []:
        if key == "model" and raw in (UPLOAD, UPLOAD_LABEL):
            st.warning(f"This link asks for `model={raw}`: {reason}.", icon=":material/upload_file:")
            continue
        if key == "snap":
            outcome = "it replaces the one before" if used and used[0] == "replaced" else "it is left out"
            st.warning(f"Link: snapshot {literal(raw)} is not usable ({plain(reason)}); {outcome}.",
                       icon=":material/link_off:")
            continue
        value = session[key] if key in session else (used[0] if used else default(key))
        st.warning(f"Link: {literal(f'{key}={raw}')} is not usable ({plain(reason)}); "
                   f"using {key} = {plain(_shown(value))} instead.", icon=":material/link_off:")
    session["link_notes"] = []


#: The Timeline page's own controls (the sidebar's are `dashboard.state.DEFAULTS`).
TIMELINE_KEYS = ("scheduler", "method", "baseline", "iters")


def request_timeline(settings: dict, note: str | None = None) -> None:
    """A button's ``on_click``: ask ``app.py`` to open the Timeline with ``settings`` on
    the next run (`open_timeline`). The request is kept in the session, so a rerun
    in between does not lose the click."""
    st.session_state["timeline_request"] = (dict(settings), note)


def follow_timeline_request(timeline_page=None) -> None:
    """Open the Timeline if a button asked for it (`request_timeline`)."""
    request = st.session_state.pop("timeline_request", None)
    if request:
        open_timeline(*request, page=timeline_page)


def open_timeline(settings: dict, note: str | None = None, page=None) -> None:
    """Open the Timeline page with ``settings`` (session keys -> values) on top of the
    current sidebar, with the address bar showing the ``/timeline?...`` link of that view.

    Widget keys cannot change once this run drew the sidebar: ``app.py`` applies the
    settings at the start of the next run, before any widget exists."""
    session = st.session_state
    session["pending_settings"] = dict(settings)
    if note:
        session["validation_note"] = note
    # A control drawn in this run is bound to its parameter and writes its new value into
    # the address bar itself; the others (the Timeline's, a calibration field that was
    # hidden) go in the query, or the link would miss them.
    keys = (*DEFAULTS, *TIMELINE_KEYS)
    view = {key: session.get(key, default(key)) for key in keys}
    view.update({key: value for key, value in settings.items() if key in keys})
    bound = _bound_keys(keys)
    st.switch_page(page or "pages/timeline.py",
                   query_params=links.query_for({k: v for k, v in view.items() if k not in bound}))


def _bound_keys(keys) -> set[str]:
    """The query keys bound to a widget in this session (all of them if Streamlit cannot say)."""
    try:
        from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

        with get_script_run_ctx().session_state.query_params() as params:
            return {key for key in keys if params.is_bound(key)}
    except (AttributeError, ImportError, TypeError):  # another Streamlit: leave every key to its widget
        return set(keys)


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
        if cfg.model == UPLOAD and not cfg.csv_text and st.session_state.get("upload_error"):
            upload_error(st.session_state["upload_error"])  # the refused file is gone from the uploader
        elif cfg.model == UPLOAD and not cfg.csv_text:
            st.info("Upload a layer CSV in the sidebar (columns name, params, fwd_ms, bwd_ms), "
                    "or pick a zoo model.")
        else:
            st.error(str(exc))
            if cfg.model != UPLOAD:
                st.caption("Fix the setting in the sidebar; the other pages keep working.")
        st.stop()
    return cfg


#: A file over the upload limit is refused by the browser itself and never reaches the server, so no
#: rerun can take the last file's error away: this script, in the page, swaps that error for a note
#: as soon as the uploader marks a refused file (its chip has aria-invalid="true").
_REFUSED_UPLOAD_JS = """<style>.st-key-upload_refused { display: none; }</style>
<script>
(() => {
  if (window.__ssgdUploadWatch) return;
  window.__ssgdUploadWatch = new MutationObserver(() => {
    const refused = document.querySelector('.st-key-upload [data-testid="stFileChip"][aria-invalid="true"]');
    const error = document.querySelector('.st-key-upload_error');
    const note = document.querySelector('.st-key-upload_refused');
    if (refused && error && note) { error.style.display = 'none'; note.style.display = 'block'; }
  });
  window.__ssgdUploadWatch.observe(document.body, {subtree: true, childList: true, attributes: true,
                                                    attributeFilter: ['aria-invalid']});
})();
</script>"""


def upload_error(message: str) -> None:
    """Why the last uploaded file was refused; replaced in the browser by a note when the
    uploader itself refuses the next file (too large), see `_REFUSED_UPLOAD_JS`."""
    st.container(key="upload_error").error(message)
    st.container(key="upload_refused").info(
        f"The uploader refused the new file (the limit is {MAX_UPLOAD_MB} MB; the sidebar says why). "
        "Upload a layer CSV (columns name, params, fwd_ms, bwd_ms), or pick a zoo model.")
    st.html(_REFUSED_UPLOAD_JS, unsafe_allow_javascript=True)


def guarded(fn: Callable[..., T], *args, **kwargs) -> T:
    """Call a simulator function; on `sim.SimInputError` show it and stop the page."""
    try:
        return fn(*args, **kwargs)
    except sim.SimInputError as exc:
        st.error(str(exc))
        st.stop()
        raise  # unreachable: st.stop() raises


def cost_line(cost) -> str:
    """``α + β·M with α = ..., β = ...``, or for a piecewise cost (size regimes, a tree's pipeline fill) its
    regimes' count and the small-message α and large-message β."""
    if not cost.regimes:
        return f"α + β·M with α = {fmt_alpha(cost.alpha_s)}, β = {cost.beta_s_per_byte * 1e9:.3g} ns/byte"
    return (f"α + β·M in {len(cost.regimes)} size regimes ({cost.label}): α = {fmt_alpha(cost.alpha_s)} for the "
            f"smallest messages, β = {cost.beta_s_per_byte * 1e9:.3g} ns/byte for the largest")


def assumptions_text(cfg: Config, stragglers: bool, what: str = "", method: str | None = None) -> str:
    """The line stating the model behind a page's numbers (`assumptions`), counts in words
    ("1 node", "1 GPU"; one GPU runs no all-reduce); ``method``, a survey method the page runs
    (`sim.methods`), names its parameter server instead of an all-reduce."""
    cluster = cfg.cluster()
    cost = cluster.comm_cost(cached.model_of(cfg), cfg.precision)
    if cfg.gpus == 1:
        comm = ""
    elif method in METHODS and METHODS[method].architecture == "ps":
        comm = (f"{method}: each message pushed to and pulled from one parameter server per node, "
                f"{plural(cluster.nodes, 'node')} × {plural(cluster.gpus_in_node, 'GPU')} on {cfg.network}")
    elif getattr(cost, "is_measured", False):
        comm = (f"measured per-layer all-reduce times from the CSV (trace-driven); merged messages cost "
                f"α + β·M fitted to them, α = {fmt_alpha(cost.alpha_s)}, β = {cost.beta_s_per_byte * 1e9:.3g} ns/byte")
    elif cfg.alpha_s is not None:
        comm = f"every all-reduce of M bytes takes α + β·M with your α = {fmt_alpha(cost.alpha_s)}"
    else:
        comm = (f"{cfg.collective} all-reduce on {plural(cluster.nodes, 'node')} × "
                f"{plural(cluster.gpus_in_node, 'GPU')} costs {cost_line(cost)}")
    workers = "1 worker" if cfg.gpus == 1 else f"{cfg.gpus} identical workers"
    if comm and cfg.framework != "auto" and cfg.alpha_s is None and not getattr(cost, "is_measured", False):
        comm += f", framework {cfg.framework}"  # its per-message costs join α and β (not your α-β, nor measured times)
    model = f"α-β cost model ({comm})" if comm else "no all-reduce (one GPU)"
    return (f"Assumptions: {model}; {workers}"
            f"{' (stragglers from the sidebar: per-worker panel below)' if stragglers else ', no stragglers'}; "
            f"{cfg.compute_source}; batch {cfg.batch_size} per GPU, {cfg.precision}.{(' ' + what) if what else ''}")


def assumptions(cfg: Config, what: str = "", method: str | None = None) -> None:
    """One line stating the model behind the page's numbers (``method``: the survey method it runs)."""
    st.caption(assumptions_text(cfg, bool(st.session_state.get("strag")), what, method))


def metric_columns() -> dict:
    """Number formats for `dashboard.tables.metrics_table` shown with ``st.dataframe``."""
    fmt = {"throughput (samples/s)": "%.0f", "messages": "%d", "speedup": "%.2f", "scaling efficiency (%)": "%.1f",
           "overlap (%)": "%.1f"}
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
def progress_after(seconds: float, text: str, key: str = "work"):
    """Yield a ``progress(fraction)`` callback that shows a bar and a **Stop** button only
    once the work has taken ``seconds`` (fast, cached runs show nothing); both go at the end.

    How stopping works (Streamlit's rerun semantics): a click on Stop, or on any other
    control, asks for a new run; Streamlit ends the running one at its next Streamlit
    call, which ``progress`` makes after every step. Stop's callback leaves a flag, so
    the new run shows "Stopped" instead of starting over; the steps already done stay
    cached, and "Continue" (or any control) runs the rest.
    """
    session = st.session_state
    if session.pop(f"{key}_stopped", False):
        st.info("Stopped. What was computed so far is kept; **Continue** (or any change of a control) "
                "computes the rest.", icon=":material/stop_circle:")
        st.button("Continue", key=f"{key}_continue", icon=":material/play_arrow:")
        st.stop()
    slot = st.empty()
    started = time.perf_counter()
    shown: list = []

    def progress(done: float) -> None:
        if time.perf_counter() - started <= seconds:
            return
        if not shown:
            box = slot.container()
            shown.append(box.progress(done, text=text))
            box.button("Stop", key=f"{key}_stop", icon=":material/stop:",
                       on_click=lambda: session.update({f"{key}_stopped": True}))
        else:
            shown[0].progress(done, text=text)

    try:
        yield progress
    finally:
        slot.empty()


def download_metrics(frame: pd.DataFrame | Callable[[], pd.DataFrame], name: str, key: str,
                     label: str = "Metrics (CSV)") -> None:
    """A CSV download of ``frame``; a function making the frame is called only on a click."""
    data = (lambda: frame().to_csv(index=False).encode()) if callable(frame) else frame.to_csv(index=False).encode()
    st.download_button(label, data, file_name=f"{name}.csv",
                       mime="text/csv", key=key, icon=":material/download:", on_click="ignore")


def download_trace(timeline: pd.DataFrame, name: str, key: str, title: str) -> None:
    """The full timeline (every task, never merged) as a Chrome trace and as CSV; both are
    written only when the button is clicked (Streamlit's deferred download)."""
    st.download_button("Timeline (Chrome trace JSON)", lambda: json.dumps(chrome_trace(timeline, title=title)).encode(),
                       file_name=f"{name}.trace.json", mime="application/json", key=key,
                       icon=":material/download:", on_click="ignore",
                       help="Every task. Open in https://ui.perfetto.dev or chrome://tracing")
    st.download_button("Timeline (CSV)", lambda: timeline.to_csv(index=False).encode(), file_name=f"{name}.csv",
                       mime="text/csv", key=f"{key}_csv", icon=":material/download:", on_click="ignore",
                       help="Every task, one row each (the columns of sim.timeline).")


@functools.lru_cache(maxsize=1)
def image_export_problem() -> str | None:
    """Why SVG and PDF export of a chart cannot work here (kaleido or a Chrome missing), or None
    (looked up once per process)."""
    if importlib.util.find_spec("kaleido") is None:
        return "SVG and PDF export needs the kaleido package: pip install -r requirements.txt"
    browsers = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
    if not os.environ.get("BROWSER_PATH") and not any(shutil.which(b) for b in browsers):
        return "SVG and PDF export (kaleido) needs Chrome or Chromium: e.g. apt-get install chromium"
    return None


def figure_image(fig, fmt: str, width: int = 1200) -> bytes:
    """``fig`` as an ``svg`` or ``pdf`` file, drawn by kaleido (headless Chromium)."""
    return fig.to_image(format=fmt, width=width, height=fig.layout.height or 450)


def lazy_popover(label: str, key: str, **kwargs):
    """A popover whose contents are drawn only while it is open: the popover, or None when closed.

    A closed popover's contents are still sent and drawn by the browser on every rerun;
    this one reruns the page when it opens or closes and, closed, sends only its button
    (five download buttons cost the Timeline's Chromium about 50 ms per GPU change,
    measured with the browser's CPU time; issue 15, item 6)."""
    popover = st.popover(label, key=key, on_change="rerun", **kwargs)
    return popover if popover.open else None


def _keep_zoom(fig, key: str, own_style: bool = False):
    """``fig``, keeping its zoom across control changes that leave it unchanged (every chart has a
    ``uirevision``; a changed figure is a new chart to Streamlit 1.67, drawn at full extent).

    A figure with its own style (`chart`) also gets a ``datarevision``: Plotly.react then
    leaves its data alone when Streamlit draws the same figure again (its arrays are new
    copies each time, and without a revision Plotly takes new copies for new data)."""
    if fig.layout.uirevision is None:
        fig.update_layout(uirevision=key)
    if own_style and fig.layout.datarevision is None:
        fig.update_layout(datarevision=key)  # a figure with other data is a new chart (Streamlit remounts it)
    return fig


def chart(fig, key: str, name: str, *, cache_key: tuple | None = None, svg: Callable[[], str] | None = None,
          own_style: bool = False, **kwargs):
    """``st.plotly_chart`` with the dashboard's config, then the note of a timeline merged for
    display and a popover of SVG and PDF downloads (`lazy_popover`) beside the modebar's PNG camera.

    With ``cache_key``, ``fig`` is a function that builds the figure; the figure is
    built once per key for every session (`dashboard.cached.figure`). ``svg``, when
    given, writes the SVG without kaleido (the Timeline's own SVG).
    ``own_style``: the figure carries the look of Streamlit's theme itself and no template
    (`dashboard.figures.OWN_STYLE`, as `dashboard.figures.gantt_figure` makes it); it is drawn
    without the theme. Streamlit draws a chart whose figure changed twice (once before
    its width is known, once with the theme applied again); with a template the second
    draw redraws every bar, without one it costs the browser a few ms.
    A chart keeps the zoom its user left (`dashboard.zoom`), also when its figure changes.
    Returns what ``st.plotly_chart`` returns (the selection when ``on_select`` is set).
    """
    if cache_key is not None:
        fig = cached.figure(cache_key, lambda build=fig: _keep_zoom(build(), key, own_style))
    else:
        _keep_zoom(fig, key, own_style)
    if own_style:
        kwargs["theme"] = None
    shown = zoom.view(st.session_state, key, fig, None if cache_key is None else hash(cache_key))
    # drawn zoomed: a double-click goes to the full extent, and Plotly's "reset axes", which would go
    # back to the kept window it was drawn with, gives way to its "autoscale" (the full extent)
    config = PLOTLY_CONFIG if shown is fig else {**PLOTLY_CONFIG, "doubleClick": "autosize",
                                                 "modeBarButtonsToRemove": ["resetScale2d"]}
    event = st.plotly_chart(shown, key=key, config=config, **kwargs)
    if note := fig.layout.meta.get("aggregated") if isinstance(fig.layout.meta, dict) else None:
        st.caption(note)
    exports = lazy_popover("SVG / PDF", f"export_{key}", type="tertiary", icon=":material/download:",
                           help="The chart as SVG or PDF (vector); the camera above the chart saves a PNG.")
    if exports is None:
        return event
    problem = image_export_problem()
    with exports:
        for fmt, mime in (("svg", "image/svg+xml"), ("pdf", "application/pdf")):
            own = fmt == "svg" and svg is not None
            data = (lambda: svg().encode()) if own else (lambda f=fmt: figure_image(fig, f))
            st.download_button(fmt.upper(), data, file_name=f"{name}.{fmt}", mime=mime, key=f"{key}_{fmt}",
                               type="tertiary", icon=":material/download:", on_click="ignore",
                               disabled=problem is not None and not own,
                               help=problem if problem and not own else
                               f"The chart as {fmt.upper()} (vector); the camera above the chart saves a PNG.")
    return event
