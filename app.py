"""S-SGD Scaling Explorer: the frame of the dashboard.

Run with ``streamlit run app.py``. This file sets up the page, initialises the
session state, draws the shared sidebar (workload and cluster) and hands over
to the page the user picked; the pages live in ``pages/``. Every page has its
own path (``/timeline``, ``/compare``, ...; `dashboard.links.PAGE_PATHS`); the
root address opens the Timeline at ``/timeline``, keeping the query.
"""

import json
import os
import time
from pathlib import Path

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from dashboard import links, sidebar, state, ui, warmup, zoom

HERE = Path(__file__).resolve().parent

PAGES = {
    "timeline": ("Timeline", ":material/view_timeline:"),
    "compare": ("Compare schedulers", ":material/compare_arrows:"),
    "scaling": ("Scaling", ":material/trending_up:"),
    "model": ("Model", ":material/stacks:"),
    "algorithms": ("Algorithms", ":material/lan:"),
    "validation": ("Validation", ":material/fact_check:"),
    "learn": ("Learn", ":material/school:"),
}


#: Set to a file path to append one JSON line per script run (page, server time in ms): how
#: bench/latency.py tells the server's work per rerun from the browser's and the machine's.
TIMING_LOG = os.environ.get("DASHBOARD_TIMING_LOG")


def main() -> None:
    warmup.freeze_imports()  # once per process: Streamlit's collection after each run skips the imports
    if not TIMING_LOG:
        return frame()
    started, cpu_started = time.perf_counter(), time.thread_time()
    try:
        frame()
    finally:  # also when the page stops early (st.stop) or a rerun interrupts it
        with open(TIMING_LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps({"path": st.context.url if hasattr(st.context, "url") else "",
                                  "ms": round((time.perf_counter() - started) * 1e3, 1),
                                  "cpu_ms": round((time.thread_time() - cpu_started) * 1e3, 1),
                                  "t0": started, "t1": time.perf_counter()}) + "\n")


@ui.framed()  # the page below runs inside the frame (`ui.ensure_frame`)
def frame() -> None:
    ui.ensure_frame(rerun=False)
    st.set_page_config(page_title="S-SGD Scaling Explorer", page_icon=":material/hub:", layout="wide")
    state.init_state(st.session_state)
    # Settings handed over by another page (the Validation page opens a case), applied before any widget exists.
    st.session_state.update(st.session_state.pop("pending_settings", None) or {})

    pages = {name: st.Page(HERE / f"pages/{name}.py", title=title, icon=icon, url_path=links.PAGE_PATHS[name])
             for name, (title, icon) in PAGES.items()}
    home = st.Page(ui.home_page, title="Start", url_path="start", default=True, visibility="hidden")
    page = st.navigation([home, *pages.values()])
    if page is home:  # the root address: show the Timeline at its own path, with the same query
        st.switch_page(pages["timeline"], query_params=links.query_items(st.query_params))
    ui.follow_timeline_request(pages["timeline"])  # a button asked for the Timeline (Compare, Scaling)
    ui.check_link(st.session_state, st.query_params)
    ui.phone_layout()
    zoom.relay(st.session_state)  # before the page's charts: they draw with the zoom it reports
    sidebar.render()
    ui.show_link_notes(st.session_state)
    ui.start_here(st.session_state)
    page.run()


# Run only inside a Streamlit script run: a process pool's worker that re-imports the
# main module (spawn, forkserver) must not draw a page or switch to one.
if get_script_run_ctx() is not None:
    main()
