"""Validation: every published measurement against the simulator, with its source."""

import pandas as pd
import streamlit as st

from dashboard import state, trace_view, ui, validation_view
from sim.validation import case_model, coarse_versus_fine, run_validation, summarize


@st.cache_data(show_spinner="Simulating every published case ...")
def _results() -> pd.DataFrame:
    return run_validation()


@st.cache_data(show_spinner=False)
def _case(case: str):
    return case_model(case)


ui.ensure_frame()
st.title("Validation against published measurements")
st.caption(
    "Assumptions: each case as its source ran it (model, batch, GPUs, nodes, networks, method → scheduler), "
    "the simulator's defaults otherwise; compute calibrated to the source's own one-node measurement. The fitted "
    "values (link rates, framework launch, interference, BytePS efficiency) are fitted on the calibration cases "
    "only (`python -m sim fit-validation`); the figures below are the held-out cases'. "
    "Error = (simulated − measured) / measured: positive = predicted too fast; bias = median signed error."
)
results = ui.guarded(_results)
summary = summarize(results)
overall = summary.set_index("source").loc["all"]
c1, c2, c3, c4 = st.columns(4)
c1.metric("Held-out cases", f"{int(overall.cases)}", help="Cases no fit has seen; calibration cases are drawn hollow.")
c2.metric("Median |error|", f"{overall.median_abs_error_pct:.1f} %")
c3.metric("Worst |error|", f"{overall.worst_abs_error_pct:.1f} %", help=str(overall.worst_case))
c4.metric("Bias", f"{overall.bias_pct:+.1f} %", help=f"{int(overall.too_fast)} cases too fast, "
                                                       f"{int(overall.too_slow)} too slow")
ERROR_COLUMNS = {
    "median_abs_error_pct": st.column_config.NumberColumn("median |error| %", format="%.1f"),
    "worst_abs_error_pct": st.column_config.NumberColumn("worst |error| %", format="%.1f"),
    "bias_pct": st.column_config.NumberColumn("bias %", format="%+.1f")}

left, right = st.columns(2)
with left:
    st.subheader("Measured against simulated")
    by = st.radio("Colour by", state.PARITY_BY, index=state.index_of("parity_by", state.PARITY_BY), horizontal=True,
                  key="parity_by", bind="query-params",
                  help="method: the scheduler or survey method each case ran")
    ui.chart(validation_view.parity_figure(results, by=by), "parity_chart", f"validation-parity-{by}")
with right:
    st.subheader("Error and bias")
    group = st.radio("By", state.SUMMARY_BY, index=state.index_of("summary_by", state.SUMMARY_BY), horizontal=True,
                     key="summary_by", bind="query-params",
                     help="split: the calibration cases (fitted on) beside the held-out ones; the others: held out")
    shown = summary if group == "source" else summarize(results, group).rename(columns={"source": group})
    st.dataframe(shown, hide_index=True, column_config=ERROR_COLUMNS)
    cmp = coarse_versus_fine(results)
    st.caption(
        f"Coarse-grained predictor (phases in sequence, one message; Li et al., TPDS 2022): median |error| "
        f"{cmp['coarse_median_abs_error_pct']:.1f} % against {cmp['fine_median_abs_error_pct']:.1f} % for this DAG "
        f"model; with its overlap ρ = {cmp['coarse_rho_fitted_on_train']:.2f} fitted on the calibration cases, "
        f"{cmp['coarse_rho_test_median_abs_error_pct']:.1f} % on the held-out ones "
        f"(DAG model: {cmp['fine_test_median_abs_error_pct']:.1f} %)."
    )

st.subheader("Every case — select a row to open it in the Timeline page")
table = results[["case", "source", "method", "split", "measured", "simulated", "error_pct", "status"]]
picked = st.dataframe(table, hide_index=True, on_select="rerun", selection_mode="single-row", key="val_table",
                      column_config={"measured": st.column_config.NumberColumn(format="%.1f"),
                                     "simulated": st.column_config.NumberColumn(format="%.1f"),
                                     "error_pct": st.column_config.NumberColumn("error %", format="%+.1f")})
rows = picked.selection.rows if picked is not None else []
if rows:
    chosen = table.iloc[rows[0]]
    if chosen.status != "ok":
        st.warning(f"{chosen.case} was not simulated: {chosen.status}")
    else:
        row, model = ui.guarded(_case, chosen.case)
        settings, note = validation_view.case_settings(row, model)
        ui.open_timeline(settings, f"Opened validation case {chosen.case} ({note}); it simulates "
                                   f"{chosen.simulated:,.1f} samples/s against {chosen.measured:,.1f} measured.")

st.subheader("Error by case")
ui.chart(validation_view.error_figure(results), "error_chart", "validation-errors")

st.subheader("Sources")
for citation, grp in results.groupby("citation", sort=False):
    st.markdown(f"- **{len(grp)} cases** ({', '.join(sorted(set(grp.source)))}): {citation}")
st.caption("Reproduce with `python -m sim validate`. The cases and their citations are in "
           "`data/validation/cases.csv`.")

trace_view.panel()
