"""Compare schedulers: timelines on one time axis, overlap breakdown, metrics."""

import pandas as pd
import streamlit as st

import sim
from dashboard import cached, figures, snapshots_view, state, stragglers_view, tables, ui
from sim.compression import refusal
from sim.schedulers.knobs import KNOBS
from sim.schedulers.names import MGWFBP, OPTIMAL
from sim.tune import KNOBS as TUNABLE

cfg = ui.config_or_stop()
st.title("Compare schedulers")
ui.assumptions(cfg)

left, right = st.columns([3, 2])
chosen = left.multiselect("Schedulers", state.scheduler_options(), default=state.default("compare"), key="compare",
                          bind="query-params")
methods = right.multiselect(
    "Survey methods", state.method_options(), default=state.default("compare_methods"), key="compare_methods",
    bind="query-params",
    help="The seven methods of Shi et al.'s survey (arXiv 2005.13247): architecture (all-reduce or BytePS "
         "parameter server) + scheduler + fusion settings.")
if not chosen and not methods:
    st.info("Pick at least one scheduler or method.")
    st.stop()
chosen = figures.scheduler_order(chosen)
compression = st.selectbox(
    "Compare with gradient compression", state.COMPRESSIONS, index=state.index_of("compare_compression",
                                                                                  state.COMPRESSIONS),
    key="compare_compression", bind="query-params",
    help="Adds a row per chosen all-reduce scheduler with its gradients compressed (sim.compression): fp16/bf16 "
         "halve the bytes; top-k all-gathers k values and indices per layer (SparCML, Shi et al. 2019); PowerSGD "
         "all-reduces two rank-r factors (Vogels et al., NeurIPS 2019); each with its (de)compression kernels.")


@st.cache_data(show_spinner=False, max_entries=256)
def compressed(cfg, scheduler: str, kind: str) -> sim.SimResult:
    """`sim.simulate` of one scheduler with its gradients compressed."""
    return sim.simulate(cached.model_of(cfg), cfg.cluster(), scheduler, batch_size=cfg.batch_size,
                        precision=cfg.precision, calibrate_iteration_s=cfg.calibrate_iteration_s,
                        single_gpu_iteration_s=cached.reference_s(cfg), compression=kind)


compressed_runs = [s for s in chosen if refusal(s) is None] if compression != "none" else []
ui.guarded(cached.check_compare_work, cached.model_of(cfg).num_layers,
           [*chosen, *(s for s in (MGWFBP, OPTIMAL) if s not in chosen), *compressed_runs], methods)


def left_out_on_error(name: str, fn, *args):
    """``fn(*args)``, or None and a warning naming ``name`` when this configuration refuses it
    (e.g. a parameter-server method of a CSV with measured all-reduce times): the other rows stay."""
    try:
        return fn(*args)
    except sim.SimInputError as exc:
        st.warning(f"{name} is left out: {ui.plain(str(exc))}.", icon=":material/warning:")
        return None


results = {s: ui.guarded(cached.simulate, cfg, s) for s in chosen}
with_compression = {}
if compression != "none":
    for s in compressed_runs:
        res = left_out_on_error(f"{s} + {compression}", compressed, cfg, s, compression)
        if res is not None:
            res.metrics["scheduler"] = f"{s} + {compression}"
            with_compression[f"{s} + {compression}"] = res
    if not with_compression:
        st.info("None of the chosen schedulers all-reduces its gradients: nothing to compress.")
for name in methods:
    if (res := left_out_on_error(name, cached.simulate_method, cfg, name)) is not None:
        results[name] = res
results.update(with_compression)
mg = ui.guarded(cached.simulate, cfg, MGWFBP)
opt = ui.guarded(cached.simulate, cfg, OPTIMAL)

best = min(results, key=lambda s: results[s].iteration_time_s)
gap = mg.iteration_time_s / opt.iteration_time_s - 1
c1, c2, c3 = st.columns(3)
c1.metric("Fastest here", best, f"{ui.fmt_ms(results[best].iteration_time_s)} per iteration", delta_color="off",
          delta_arrow="off")
# the same iteration to the 0.01 ms the delta shows: no arrow, no colour, and the caption agrees (a 1 ns gap of two
# groupings read "-7.81e-07 %" and "-0.00 ms" as a gain beside "matches the optimal grouping")
same = abs(mg.iteration_time_s - opt.iteration_time_s) < 5e-6
c2.metric("MG-WFBP vs optimal", "0 %" if same else tables.fmt_change_pct(gap * 100),
          "same iteration" if same else f"{(mg.iteration_time_s - opt.iteration_time_s) * 1e3:+.2f} ms",
          delta_color="off" if same else "inverse", delta_arrow="off" if same else "auto",
          help="How much longer MG-WFBP's greedy merging takes than the best grouping of consecutive layers.")
c3.metric("Messages (mgwfbp / optimal)", f"{mg.metrics['num_messages']} / {opt.metrics['num_messages']}")
if same:
    st.caption("MG-WFBP matches the optimal grouping for this configuration.")
elif gap > 0:
    st.caption(f"MG-WFBP is **{tables.fmt_change_pct(gap * 100).lstrip('+')} slower** than the optimal grouping "
               "for this configuration.")
else:
    st.caption(f"MG-WFBP is **{tables.fmt_change_pct(-gap * 100).lstrip('+')} faster** than `optimal` here: "
               "`optimal` is exact for the costs it plans with, which leave out interference.")

titles = {s: f"<b>{s}</b>: {ui.fmt_ms(r.iteration_time_s)}, {ui.plural(r.metrics['num_messages'], 'message')}"
          for s, r in results.items()}
ui.chart(lambda: figures.gantt_stack_figure({s: tables.drawn_timeline(r) for s, r in results.items()}, titles),
         "compare_chart",
         f"compare-{cfg.model_label}-{cfg.gpus}gpus", cache_key=("compare", cfg, tuple(titles.items())))

# each row labelled by its scheduler or method (cached results are shared: never changed in place)
labelled = [{**r.metrics, "scheduler": name} for name, r in results.items()]
metrics = pd.DataFrame(labelled)
st.subheader("Where the time goes")
ui.chart(figures.breakdown_figure(metrics), "breakdown_chart", f"breakdown-{cfg.model_label}-{cfg.gpus}gpus")
st.caption("Along each row: compute, then exposed communication (time the GPUs wait on it, a wait for "
           "Horovod's cycle tick included), then idle time (I/O or host copies the GPU waits for), adding up "
           "to the iteration (the diamond). The thin light bar inside compute is the "
           "communication hidden behind it; overlap = hidden ÷ all communication, as HTA reports it.")
over = figures.breakdown_frame(metrics).query("over_ms > 0.01 * iteration_ms")
if len(over):
    st.warning("Compute + exposed communication exceeds the iteration (idle clipped at 0) for "
               + "; ".join(f"{r.scheduler}: {r.compute_ms + r.exposed_ms:,.1f} ms > {r.iteration_ms:,.1f} ms"
                           for r in over.itertuples()))

st.subheader("Metrics")
table = tables.metrics_table(labelled)
st.dataframe(table, hide_index=True, key="metrics_table", column_config=ui.metric_columns())
ui.download_metrics(table, f"compare-{cfg.model_label}-{cfg.gpus}gpus", "dl_compare")

c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
row = c1.selectbox("Open a row in the Timeline", [r for r in results if r not in with_compression], key="compare_open",
                   help="The Timeline then shows that scheduler (or method) with this sidebar, at its own link.")
c2.button("Open in Timeline", key="compare_open_button", icon=":material/open_in_new:", on_click=ui.request_timeline,
          args=({"method": row} if row in methods else {"scheduler": row, "method": ""},))

stragglers_view.compare_table(cfg, list(chosen), {s: results[s].iteration_time_s for s in chosen})

snapshots_view.panel(cfg)

st.subheader("Tune a knob")
TUNE_VALUES = {label: KNOBS[TUNABLE[label][0]].grid for label in state.tune_knob_options()}
knob = st.selectbox("Knob", list(TUNE_VALUES), index=state.index_of("tune_knob", list(TUNE_VALUES)), key="tune_knob",
                    bind="query-params",
                    help="; ".join(f"{label} ({TUNABLE[label][1]}): {KNOBS[TUNABLE[label][0]].help}"
                                   for label in TUNE_VALUES))
frame, best = ui.guarded(cached.tune, cfg, knob, TUNE_VALUES[knob])
ui.chart(figures.tune_figure(frame, best), "tune_chart", f"tune-{knob}")
if best.get("same_for_every_value"):
    st.info(f"Every value of {knob} gives the same iteration time: the knob does not change this configuration's "
            "timing. On all-reduce, credit only decides whether each partition's host launch (the framework's "
            "launch cost) comes just before its transfer (1) or runs ahead of the transfers (2 or more, alike): "
            "without a launch cost (framework none, or a cost given as alpha and beta) every credit times the "
            "same. On parameter servers credit bounds the servers busy at once.")
st.caption(f"Best {knob} = {best['value']:g} ({best['scheduler']}): {ui.fmt_ms(best['iteration_time_s'])} per "
           f"iteration, {tables.fmt_change_pct(best['gain_pct'])} against the default {best['default_value']:g}. "
           "PyTorch users ask for exactly this (pytorch/pytorch#118421). CLI: `python -m sim tune --knob ...`.")
