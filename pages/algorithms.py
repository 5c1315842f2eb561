"""Algorithms: seven ways for workers to share what they learn, and what stragglers cost.

The sidebar's workload and cluster; `sim.algorithms`, `sim.training`,
`sim.workers` and `sim.coarse` do the work, cached here; the figures come
from `dashboard.algorithms_figures`.
"""

import streamlit as st

import sim
from dashboard import algorithms_figures as af
from dashboard import cached, links, state, stragglers_view, tables, ui
from dashboard.state import Config
from sim.algorithms import ALGORITHMS, AlgorithmConfig, sweep_algorithms
from sim.api import resolve_model
from sim.coarse import compare_coarse_fine
from sim.schedulers.names import MGWFBP, SYNCEASGD, WFBP
from sim.training import compare_algorithms
from sim.workers import StragglerSpec, monte_carlo

CACHE = {"show_spinner": False, "max_entries": 64}
SWEEP_STEPS = 20
MAX_SWEEP_WORKERS = 64
STRAGGLER_ITERATIONS = cached.STRAGGLER_ITERATIONS
TIMELINE_ITERATIONS = 3
BIND = "query-params"
LIMITS = state.PAGE_BOUNDS


def _model(cfg: Config) -> sim.Model:
    """The sidebar's model with its compute times (calibrated if asked)."""
    return resolve_model(cached.model_of(cfg), cfg.cluster(), cfg.batch_size, cfg.precision,
                         calibrate_iteration_s=cfg.calibrate_iteration_s)


@st.cache_data(**CACHE)
def _compare(cfg: Config, algorithms: tuple, steps: int, seed: int, knobs: AlgorithmConfig, spec: StragglerSpec):
    comp = compare_algorithms(_model(cfg), cfg.cluster(), batch_size=cfg.batch_size, algorithms=algorithms,
                              steps=steps, seed=seed, straggler=spec, config=knobs, precision=cfg.precision)
    staleness = af.staleness_frame({name: r.log for name, r in comp.results.items()})
    return comp.table, comp.curves, staleness, comp.target_accuracy, comp.bayes_accuracy


@st.cache_data(**CACHE)
def _sweep(cfg: Config, algorithms: tuple, counts: tuple, seed: int, knobs: AlgorithmConfig, spec: StragglerSpec):
    return sweep_algorithms(_model(cfg), cfg.cluster(gpus=1), workers=list(counts), algorithms=algorithms,
                            batch_size=cfg.batch_size, steps=SWEEP_STEPS, seed=seed, straggler=spec, config=knobs,
                            precision=cfg.precision)


@st.cache_data(**CACHE)
def _monte_carlo(cfg: Config, spec: StragglerSpec, counts: tuple, seed: int):
    return monte_carlo(_model(cfg), cfg.cluster(gpus=1), SYNCEASGD, batch_size=cfg.batch_size, straggler=spec,
                       workers=list(counts), iterations=STRAGGLER_ITERATIONS, seed=seed, precision=cfg.precision)


@st.cache_data(**CACHE)
def _coarse(cfg: Config, counts: tuple, overlap: float):
    return compare_coarse_fine(_model(cfg), cfg.cluster(gpus=1), gpus=list(counts),
                               schedulers=[WFBP, MGWFBP, SYNCEASGD], batch_size=cfg.batch_size,
                               precision=cfg.precision, overlap=overlap)


cfg = ui.config_or_stop()
st.title("Algorithms")
st.caption(
    "Ko et al. (IPDPS 2021) compare seven ways to share updates. Here each runs as a discrete-event simulation "
    f"of {cfg.gpus} workers: {cfg.model_label}, batch {cfg.batch_size}, {cfg.compute_source}. Every message "
    f"carries the whole model over the {cfg.network} preset; BSP, ASP, SSP and EASGD go through one parameter "
    "server whose link all workers share; AR-SGD uses the sidebar's all-reduce. Accuracy comes from replaying each "
    "schedule on a small real problem (softmax regression on a seeded Gaussian mixture), not from the DNN itself."
)

with st.expander("Algorithm settings", expanded=False):
    c1, c2, c3, c4, c5 = st.columns(5)
    picked = c1.multiselect("Algorithms", list(ALGORITHMS), default=state.default("alg_picked"), key="alg_picked",
                            bind=BIND)
    steps = c2.number_input("Steps per worker", *LIMITS["alg_steps"], value=state.default("alg_steps"), step=10,
                            key="alg_steps", bind=BIND)
    staleness = c3.number_input("SSP bound s", *LIMITS["alg_ssp"], value=state.default("alg_ssp"), key="alg_ssp",
                                bind=BIND)
    tau = c4.number_input("EASGD period τ", *LIMITS["alg_tau"], value=state.default("alg_tau"), key="alg_tau",
                          bind=BIND)
    gossip = c5.slider("GoSGD gossip probability", *LIMITS["alg_gossip"], state.default("alg_gossip"), 0.05,
                       key="alg_gossip", bind=BIND)
    seed = st.number_input("Seed", *LIMITS["alg_seed"], value=state.default("alg_seed"), key="alg_seed", bind=BIND,
                           help="Every random draw (compute noise, jitter, gossip peers, mini-batches) follows from it.")
if not picked:
    st.info("Pick at least one algorithm.")
    st.stop()
algorithms = tuple(a for a in ALGORITHMS if a in picked)
counts = tuple(p for p in tables.scaling_gpu_counts(cfg.gpus_per_node, cfg.gpus, MAX_SWEEP_WORKERS)
               if p <= max(cfg.gpus, 8))
ui.guarded(cached.check_algorithm_work, cached.model_of(cfg).num_layers, cfg.gpus, int(steps),
           sum(counts) * SWEEP_STEPS, len(algorithms))
knobs = ui.guarded(AlgorithmConfig, staleness=int(staleness), tau=int(tau), gossip_p=float(gossip))
no_noise = StragglerSpec()

table, curves, stale, target, bayes = ui.guarded(_compare, cfg, algorithms, int(steps), int(seed), knobs, no_noise)
fastest = table.loc[table["throughput_samples_per_s"].idxmax()]
reached = table.dropna(subset=["time_to_accuracy_s"])
c = st.columns(3)
c[0].metric("Fastest (samples/s)", fastest["algorithm"], f"{ui.fmt_rate(fastest['throughput_samples_per_s'])} samples/s",
            delta_color="off", delta_arrow="off")
if len(reached):
    first = reached.loc[reached["time_to_accuracy_s"].idxmin()]
    c[1].metric(f"First to {target:.1%} accuracy", first["algorithm"], f"{first['time_to_accuracy_s']:.3g} s",
                delta_color="off", delta_arrow="off")
else:
    c[1].metric(f"First to {target:.1%} accuracy", "none", "raise the steps", delta_color="off", delta_arrow="off")
c[2].metric("Bayes accuracy of the task", f"{bayes:.1%}", help="The ceiling: the target is 2 points below it.")

st.subheader("Throughput as workers are added")
sweep = ui.guarded(_sweep, cfg, algorithms, counts, int(seed), knobs, no_noise)
ui.chart(af.throughput_figure(sweep, picked_workers=cfg.gpus), "alg_throughput", f"algorithms-throughput-{cfg.model_label}")
st.caption(f"{SWEEP_STEPS} steps per worker at each count. The parameter server's link carries one message at a "
           "time: once it is busy all the time, more workers add nothing to BSP, ASP and SSP.")

st.subheader(f"Speed and accuracy at {cfg.gpus} workers")
shown = ["algorithm", "throughput_samples_per_s", "time_to_accuracy_s", "final_accuracy", "bytes_per_worker",
         "server_bytes", "server_link_utilisation", "staleness_mean", "staleness_max", "worker_idle_fraction"]
st.dataframe(table[shown], hide_index=True, key="alg_table")
left, right = st.columns(2)
with left:
    ui.chart(af.training_figure(curves, target), "alg_training", "algorithms-training")
with right:
    ui.chart(af.staleness_figure(stale), "alg_staleness", "algorithms-staleness")
ui.download_metrics(table, f"algorithms-{cfg.model_label}", "dl_algorithms", label="Algorithm metrics (CSV)")

st.subheader("Stragglers")
st.caption("Synchronous data-parallel SGD with the per-worker engine: every all-reduce waits for the slowest worker.")
s1, s2, s3, s4, s5, s6 = st.columns(6)
dist = s1.selectbox("Compute variability", state.STRAGGLER_DISTS, index=state.index_of("strag_dist",
                                                                                        state.STRAGGLER_DISTS),
                    key="strag_dist", bind=BIND)
cv = s2.slider("Coefficient of variation", *LIMITS["strag_cv"], state.default("strag_cv"), 0.01, key="strag_cv",
               disabled=dist == "constant", bind=BIND)
asked = st.query_params.get("strag_k", "")  # a link's, checked against the GPUs below
if st.session_state.get("strag_k", 0) > cfg.gpus:  # the sidebar now has fewer GPUs than slow workers
    st.session_state["strag_k"] = cfg.gpus
slow = s3.number_input("Slow workers", min_value=0, max_value=cfg.gpus, key="strag_k", bind=BIND,
                       help="Persistently slow workers, chosen by the seed.",
                       **({} if "strag_k" in st.session_state else {"value": state.default("strag_k")}))
if (asked_n := links.number_or_none(asked)) is not None and asked_n > cfg.gpus:  # 17, 17.0 and 1e2 alike
    st.warning(f"Slow workers: `strag_k={asked}` is more than the {cfg.gpus} GPUs; using {slow}.")
factor = s4.slider("Slower by", *LIMITS["strag_factor"], state.default("strag_factor"), 0.1, key="strag_factor",
                   bind=BIND)
jitter = s5.slider("Link jitter (cv)", *LIMITS["strag_jitter"], state.default("strag_jitter"), 0.05,
                   key="strag_jitter", bind=BIND)
schedulers = state.scheduler_options()
scheduler = s6.selectbox("Scheduler", schedulers, index=state.index_of("strag_scheduler", schedulers),
                         key="strag_scheduler", bind=BIND)
spec = ui.guarded(StragglerSpec, dist=dist, cv=0.0 if dist == "constant" else float(cv), stragglers=int(slow),
                  factor=float(factor), jitter_cv=float(jitter))
metrics, early, times, slow_workers = ui.guarded(cached.stragglers, cfg, scheduler, spec, int(seed),
                                                 TIMELINE_ITERATIONS)
m = st.columns(4)
m[0].metric("Median iteration", ui.fmt_ms(metrics["iteration_p50_s"]))
m[1].metric("p99 iteration", ui.fmt_ms(metrics["iteration_p99_s"]))
m[2].metric("Slowdown vs identical workers", f"{metrics['straggler_slowdown']:.3f}×")
m[3].metric("Mean wait per worker", ui.fmt_ms(metrics["wait_mean_s"]))
lanes = list(dict.fromkeys([*slow_workers, *range(cfg.gpus)]))[:4]
if early is not None:
    ui.chart(af.worker_timeline_figure(early, sorted(lanes), slow_workers,
                                       f"iterations 1-{TIMELINE_ITERATIONS}: who waits for whom"),
             "strag_timeline", f"stragglers-{cfg.model_label}-{scheduler}-{cfg.gpus}gpus")
if note := stragglers_view.limits_note(cfg, metrics, early):
    st.caption(note)
left, right = st.columns(2)
with left:
    ui.chart(af.iteration_time_figure(times, metrics["ideal_iteration_time_s"]), "strag_hist", "stragglers-histogram")
mc_counts = tuple(p for p in tables.scaling_gpu_counts(cfg.gpus_per_node, None, MAX_SWEEP_WORKERS) if p >= 1)
mc = ui.guarded(_monte_carlo, cfg, spec, mc_counts, int(seed))
with right:
    ui.chart(af.straggler_scaling_figure(mc), "strag_mc", "stragglers-scaling")
agree = mc.dropna(subset=["closed_form_s"])
if len(agree):
    worst = agree.loc[agree["rel_error"].abs().idxmax()]
    right.caption(f"One message after backward (synceasgd). Closed form {'(Blom) ' if dist == 'normal' else ''}"
                  f"against {STRAGGLER_ITERATIONS} simulated iterations: worst relative error "
                  f"{worst['rel_error']:+.2%} at {int(worst['workers'])} workers (|z| ≤ {agree['z_score'].abs().max():.1f}).")
else:
    right.caption("No closed form for this mix (lognormal noise, or noise together with slow workers).")

with st.expander("Fine-grained against coarse-grained prediction (Li et al., TPDS 2022)"):
    overlap = st.slider("Overlap heuristic ρ (share of the backward pass that hides communication)",
                        *LIMITS["alg_overlap"], state.default("alg_overlap"), 0.05, key="alg_overlap", bind=BIND)
    frame = ui.guarded(_coarse, cfg, tuple(p for p in counts if p > 1) or (2,), float(overlap))
    ui.chart(af.coarse_fine_figure(frame), "alg_coarse", "coarse-fine")
    st.caption("Coarse: io + h2d + forward + backward + one all-reduce of every gradient + update, in sequence. "
               "It equals the fine simulation of synceasgd and overestimates schedulers that overlap.")
