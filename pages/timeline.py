"""Timeline: one scheduler's iteration as a Gantt chart, with its key figures."""

import functools

import streamlit as st

from dashboard import cached, figures, resources_view, state, stragglers_view, tables, ui

#: Rows of the message table sent to the browser (a 100k-layer model has 100k messages under wfbp).
MAX_MESSAGE_ROWS = 1000

cfg = ui.config_or_stop()
st.title("Timeline of an iteration")
if note := st.session_state.pop("validation_note", None):
    st.info(note)
ui.assumptions(cfg, method=st.session_state.get("method") or None)  # (the method box below, as last set)

options = state.scheduler_options()
methods = ["", *state.method_options()]
c1, c4, c2, c3 = st.columns([2, 2, 2, 1])
method = c4.selectbox("Survey method", methods, index=state.index_of("method", methods), key="method",
                      bind="query-params", format_func=lambda m: m or "none: the scheduler alone",
                      help="One of the seven methods of Shi et al.'s survey (architecture, scheduler and fusion "
                           "settings together); it replaces the scheduler.")
scheduler = c1.selectbox("Scheduler", options, index=state.index_of("scheduler", options), key="scheduler",
                         bind="query-params", disabled=bool(method),
                         help="How gradients are grouped into messages and when they are sent.")
baseline = c2.selectbox("Compared with", options, index=state.index_of("baseline", options), key="baseline",
                        bind="query-params",
                        help="The deltas under the key figures are against this scheduler.")
iterations = c3.number_input("Iterations shown", min_value=1, max_value=5, step=1, value=state.default("iters"),
                             key="iters", bind="query-params")

rows = cached.timed_rows(cfg)
if (shown_iterations := cached.timeline_iterations(rows, iterations)) < iterations:
    st.warning(f"Iterations shown: {int(iterations)} iterations of a model of {rows:,} layers or gradient tensors "
               f"are over the page's {cached.MAX_TIMELINE_LAYER_ITERATIONS:,} layer-iterations; showing "
               f"{shown_iterations} (python -m sim trace writes more, within its task limit).")
    iterations = shown_iterations
if method:
    res = ui.guarded(cached.simulate_method, cfg, method, int(iterations))
else:
    res = ui.guarded(cached.simulate, cfg, scheduler, int(iterations))
base = ui.guarded(cached.simulate, cfg, baseline, 1)
m, b = res.metrics, base.metrics
shown = method or scheduler

# two lines, so that a phone's narrow chart does not cut the title off
title = (f"{cfg.model_label} · {shown} · {ui.plural(cfg.gpus, 'GPU')} ({ui.plural(m['nodes'], 'node')})"
         f"<br>{cfg.network} · iteration {ui.fmt_ms(res.iteration_time_s)}")
chart, figures_col = st.columns([4, 1])
file_stem = f"timeline-{cfg.model_label}-{shown}-{cfg.gpus}gpus"
with chart:
    # a per-layer-update plan's last messages run beside the next forward pass: drawn with it (tables.drawn_timeline)
    longer = functools.partial(cached.simulate_method, cfg, method, int(iterations) + 1) if method else (
        functools.partial(cached.simulate, cfg, scheduler, int(iterations) + 1))
    ui.chart(lambda: figures.gantt_figure(tables.drawn_timeline(res, longer), title, height=400), "timeline_chart",
             file_stem,
             cache_key=("timeline", cfg, scheduler, method, int(iterations), title),
             svg=lambda: figures.gantt_svg(tables.drawn_timeline(res, longer), title), own_style=True)
    st.caption("Hover a bar for its layer, bytes, start and duration. All-reduce messages are outlined and filled "
               "light where they are hidden behind compute, red where they are exposed (the GPU waits); "
               "a merged message is labelled with its group and layer count, e.g. *g3 (5 layers)*. "
               + ("The next iteration's forward tasks that run beside the last messages are drawn too. "
                  if res.plan.per_layer_update else "")
               + tables.interference_note(m, res.cluster))


with figures_col:
    st.metric("Iteration time", ui.fmt_ms(m["iteration_time_s"]),
              **ui.delta(m["iteration_time_s"], b["iteration_time_s"], baseline, inverse=True))
    st.metric("Samples/s", ui.fmt_rate(m["throughput_samples_per_s"]),
              **ui.delta(m["throughput_samples_per_s"], b["throughput_samples_per_s"], baseline),
              help="Throughput of the whole cluster: batch × GPUs / iteration time.")
    st.metric("Overlap", ui.fmt_overlap(m["comm_hidden_s"], m["comm_s"]),
              **(ui.delta(float(tables.overlap_pct(m["comm_hidden_s"], m["comm_s"])),
                          float(tables.overlap_pct(b["comm_hidden_s"], b["comm_s"])), baseline, "pts")
                 if m["comm_s"] > 0 and b["comm_s"] > 0 else {}),
              help="Hidden ÷ all communication × 100, as Holistic Trace Analysis reports it: the share of the "
                   "all-reduce time during which the GPU computes.")
    st.metric("Hidden comm", ui.fmt_ms(m["comm_hidden_s"]),
              help="All-reduce time that overlaps computation.")
    st.metric("Exposed comm", ui.fmt_ms(m["comm_exposed_s"]),
              **ui.delta(m["comm_exposed_s"] * 1e3, b["comm_exposed_s"] * 1e3, baseline, "ms", inverse=True),
              help="All-reduce time the GPUs wait for.")
    st.metric("Scaling efficiency", f"{m['scaling_efficiency']:.0%}",
              **ui.delta(m["scaling_efficiency"] * 100, b["scaling_efficiency"] * 100, baseline, "pts"),
              help="Speedup over one GPU divided by the GPU count.")

messages = cached.figure(("messages", cfg, scheduler, method, int(iterations)),
                         lambda: tables.message_table(res.timeline))  # kept, like the chart: shared, never changed
# A toggle, not an expander: a collapsed expander's table is still sent and drawn on every rerun.
if st.toggle(f"Show the {ui.plural(len(messages), 'message')} of {shown}", value=state.default("show_messages"),
             key="show_messages", bind="query-params"):
    st.dataframe(messages.head(MAX_MESSAGE_ROWS), hide_index=True)
    if len(messages) > MAX_MESSAGE_ROWS:
        st.caption(f"The first {MAX_MESSAGE_ROWS:,} of {len(messages):,} messages; the timeline downloads below "
                   "hold them all.")

stragglers_view.timeline_panel(cfg, scheduler, res.iteration_time_s)
resources_view.memory_panel(res, cfg.batch_size, cfg.precision)

if downloads := ui.lazy_popover("Downloads: metrics and the whole timeline", "downloads", icon=":material/download:"):
    with downloads:
        ui.download_metrics(lambda: tables.metrics_table([m, b]), f"metrics-{cfg.model_label}-{cfg.gpus}gpus", "dl_metrics")
        ui.download_trace(res.timeline, file_stem, "dl_trace", title=title)
