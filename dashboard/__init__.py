"""The Streamlit dashboard's helpers; the pages themselves live in ``pages/``.

* `dashboard.state`   -- session-state keys, their defaults and the `Config`
  the sidebar describes (one place for both);
* `dashboard.upload`  -- reading an uploaded layer CSV from memory;
* `dashboard.cached`  -- ``st.cache_data`` wrappers around `sim` calls;
* `dashboard.figures` -- pure figure builders: DataFrame in, plotly Figure out;
* `dashboard.sidebar` -- the shared sidebar;
* `dashboard.ui`      -- small page helpers (config check, captions, downloads).

`sim` stays pure: nothing here is imported by it.
"""
