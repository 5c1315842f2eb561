"""Scaling: throughput, speedup and efficiency from 1 to 1024 GPUs."""

import streamlit as st

from dashboard import cached, figures, resources_view, state, tables, ui

cfg = ui.config_or_stop()
st.title("Scaling")
ui.assumptions(cfg, "Other GPU counts keep everything else.")

inter = [n for n in state.network_options("inter") if n != cfg.network]
c1, c2 = st.columns(2)
schedulers = c1.multiselect("Schedulers", state.scheduler_options(), default=state.default("scale_schedulers"),
                            key="scale_schedulers", bind="query-params")
extra = c2.multiselect(f"Also try networks besides {cfg.network}", inter, default=state.default("scale_nets"),
                       key="scale_nets", bind="query-params",
                       help="What would a faster network buy? One curve per network.")
if not schedulers:
    st.info("Pick at least one scheduler.")
    st.stop()
schedulers = figures.scheduler_order(schedulers)
networks = [cfg.network, *extra]
counts = tables.scaling_gpu_counts(cfg.gpus_per_node, cfg.gpus)

n_points = len(counts) * len(networks) * len(schedulers)
ui.guarded(cached.check_sweep_work, cached.model_of(cfg).num_layers, len(counts), len(networks), schedulers)
sweep_key = ("scaling", cfg.replace(gpus=1), tuple(counts), tuple(networks), tuple(schedulers))


if cached.cached_figure(sweep_key) is not None:  # nothing to compute: a Stop click from before no longer applies
    st.session_state.pop("scaling_stopped", None)


def _sweep():
    """Every point of the sweep; a bar (with a Stop button) once it takes over 0.3 s."""
    with ui.progress_after(0.3, f"Simulating {n_points} configurations…", key="scaling") as progress:
        return ui.guarded(cached.scaling_frame, cfg, counts, networks, schedulers, progress=progress)


def _clicked() -> None:
    """A clicked point picks its GPU count, and its curve's scheduler and network for the timeline below
    (the sidebar's network becomes the point's; the one it replaces stays among the curves)."""
    points = st.session_state["scaling_chart"].selection.get("points", [])
    if not points:
        return
    st.session_state["gpus"] = int(round(points[0]["x"]))
    picked = points[0].get("customdata")
    if not (isinstance(picked, list) and len(picked) == 2):
        return
    sched, net = picked
    if sched in schedulers:
        st.session_state["scale_timeline_scheduler"] = sched
    if net != cfg.network and net in extra:
        st.session_state["net"] = net
        st.session_state["scale_nets"] = [cfg.network if n == net else n for n in extra]


# A figure already built (this sweep, by any session) is shown without touching the sweep's points.


def _points():
    """The sweep's points, kept like its figure (a rerun does not look up each point's cached metrics)."""
    return cached.figure(("scaling-points", *sweep_key), _sweep)


def _figure():
    points = _points()
    return resources_view.grey_unfit(figures.scaling_figure(points), points)


# The sweep's chart does not mark the picked GPU count (the slider below shows it): a chart whose
# figure changes is drawn anew by the browser, and this one, three panels of every curve, cost
# Chromium more than the rest of a GPU change together. It is redrawn only with the sweep, or
# to clear a clicked point that no longer is the sidebar's count (`figures.selection_cleared`).
if figures.stale_selection(st.session_state.get("scaling_chart"), cfg.gpus):
    st.session_state["scaling_chart_clears"] = st.session_state.get("scaling_chart_clears", 0) + 1
clears = st.session_state.get("scaling_chart_clears", 0)
base = cached.figure(sweep_key, _figure)
ui.chart(lambda: figures.selection_cleared(base, clears), "scaling_chart", f"scaling-{cfg.model_label}",
         cache_key=(*sweep_key, "clears", clears), on_select=_clicked, selection_mode="points")
st.caption(f"GPU counts that do not fill whole nodes of {cfg.gpus_per_node} are skipped. "
           "Click a point (or use the slider) to see that configuration's timeline. Grey points do not fit in "
           "GPU memory (momentum SGD; see the Timeline page's memory panel).")


def _picked() -> None:
    st.session_state["gpus"] = st.session_state["pick_gpus"]


if st.session_state.get("pick_gpus") != cfg.gpus:
    st.session_state["pick_gpus"] = cfg.gpus
st.select_slider("GPU count for the timeline below (sets the sidebar's GPUs)", counts, key="pick_gpus",
                 on_change=_picked)

first = state.default("scale_timeline_scheduler")
first = first if first in schedulers else schedulers[0]
if (asked := st.query_params.get("scale_timeline_scheduler")) and asked not in schedulers:  # e.g. a link's
    st.warning(f"The timeline's scheduler {ui.literal(asked)} is not among the schedulers picked; showing {first}.")
if st.session_state.get("scale_timeline_scheduler", first) not in schedulers:  # no longer picked: the default
    del st.session_state["scale_timeline_scheduler"]
chosen = st.selectbox("Timeline of", schedulers, index=schedulers.index(first), key="scale_timeline_scheduler",
                      bind="query-params")
res = ui.guarded(cached.simulate, cfg, chosen)
m = res.metrics
c = st.columns(4)
c[0].metric("Iteration", ui.fmt_ms(res.iteration_time_s))
c[1].metric("Samples/s", ui.fmt_rate(m["throughput_samples_per_s"]))
c[2].metric("Speedup", f"{m['speedup']:.1f}×")
c[3].metric("Scaling efficiency", f"{m['scaling_efficiency']:.0%}")
title = (f"{cfg.model_label} · {chosen} · {ui.plural(cfg.gpus, 'GPU')} · {cfg.network}"
         f"<br>iteration {ui.fmt_ms(res.iteration_time_s)}")
ui.chart(lambda: figures.gantt_figure(tables.drawn_timeline(res), title), "scaling_timeline",
         f"timeline-{cfg.model_label}-{chosen}-{cfg.gpus}gpus", cache_key=("scaling-timeline", cfg, chosen, title),
         svg=lambda: figures.gantt_svg(tables.drawn_timeline(res), title), own_style=True)
st.button(f"Open {chosen} at {ui.plural(cfg.gpus, 'GPU')} in the Timeline", key="scaling_open",
          icon=":material/open_in_new:", on_click=ui.request_timeline,
          args=({"scheduler": chosen, "method": "", "gpus": cfg.gpus},))

resources_view.cost_section(_points(), cfg.gpu, cache_key=sweep_key)
ui.download_metrics(lambda: cached.scaling_frame(cfg, counts, networks, schedulers), f"scaling-{cfg.model_label}",
                    "dl_scaling", label="Sweep metrics (CSV)")
