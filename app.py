"""S-SGD Scaling Explorer: the frame of the dashboard.

Run with ``streamlit run app.py``. This file sets up the page, initialises the
session state, draws the shared sidebar (workload and cluster) and hands over
to the page the user picked; the pages live in ``pages/``.
"""

from pathlib import Path

import streamlit as st

from dashboard import sidebar, state, ui

HERE = Path(__file__).resolve().parent

ui.ensure_frame()
st.set_page_config(page_title="S-SGD Scaling Explorer", page_icon=":material/hub:", layout="wide")
state.init_state(st.session_state)
# Settings handed over by another page (the Validation page opens a case), applied before any widget exists.
st.session_state.update(st.session_state.pop("pending_settings", None) or {})

page = st.navigation(
    [
        st.Page(HERE / "pages/timeline.py", title="Timeline", icon=":material/view_timeline:", default=True),
        st.Page(HERE / "pages/compare.py", title="Compare schedulers", icon=":material/compare_arrows:"),
        st.Page(HERE / "pages/scaling.py", title="Scaling", icon=":material/trending_up:"),
        st.Page(HERE / "pages/model.py", title="Model", icon=":material/stacks:"),
        st.Page(HERE / "pages/algorithms.py", title="Algorithms", icon=":material/lan:"),
        st.Page(HERE / "pages/validation.py", title="Validation", icon=":material/fact_check:"),
        st.Page(HERE / "pages/learn.py", title="Learn", icon=":material/school:"),
    ]
)
sidebar.render()
page.run()
