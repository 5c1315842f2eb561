"""Cached simulator calls: ``st.cache_data`` around `sim`, keyed by plain data.

Every function takes a `Config` (frozen, hashable) or plain values; the model
is rebuilt inside from its zoo name or its CSV text, so no `sim.Model` object
ever has to be hashed. Bad input raises `sim.SimInputError`, which
``st.cache_data`` does not cache: pages catch it and show ``st.error``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence

import networkx as nx
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import sim
from dashboard.state import UPLOAD, Config, model_options
from dashboard.upload import model_from_csv_text
from sim.api import resolve_model, single_gpu_iteration_s_of
from sim.core import fast
from sim.core.timeline import coalesce
from sim.dag import build_dag
from sim.schedulers.names import BYTESCHEDULER, DEAR, HOROVOD, SEQUENTIAL, ZERO1, ZERO2, ZERO3

__all__ = [
    "MAX_SWEEP_S",
    "MAX_TIMELINE_LAYER_ITERATIONS",
    "TOY_LAYERS",
    "cached_figure",
    "check_algorithm_work",
    "check_compare_work",
    "check_sweep_work",
    "figure",
    "iteration_dag",
    "load_model",
    "model_of",
    "needs_general_engine",
    "scaling_frame",
    "scaling_point",
    "simulate",
    "simulate_method",
    "stragglers",
    "straggler_iterations",
    "sweep_seconds",
    "timed_rows",
    "timeline_iterations",
    "worker_timeline_rows",
    "single_gpu_s",
    "reference_s",
    "toy_alpha_sweep",
    "tune",
    "toy_model",
    "toy_results",
]

_CACHE = {"show_spinner": False, "max_entries": 512}


#: Figures kept for every session (`figure`); a merged 100k-layer timeline is a few hundred kB.
MAX_FIGURES = 128
_FIGURES: OrderedDict = OrderedDict()
_FIGURES_LOCK = threading.Lock()


def figure(key: Hashable, build: Callable[[], go.Figure]) -> go.Figure:
    """The figure ``build()`` makes, built once per ``key`` and shared by every session
    (a table derived from a cached result may be kept the same way).

    Building a Plotly figure (validating every trace) was most of a page's work per
    rerun (85 ms of the Timeline's). ``key`` must hold everything the figure
    depends on (the `Config`, the scheduler, the title...). The figure is shared:
    nobody may change it. The `MAX_FIGURES` most recently used are kept.
    """
    found = cached_figure(key)
    if found is not None:
        return found
    fig = build()
    with _FIGURES_LOCK:
        _FIGURES[key] = fig
        while len(_FIGURES) > MAX_FIGURES:
            _FIGURES.popitem(last=False)
    return fig


def cached_figure(key: Hashable) -> go.Figure | None:
    """The figure kept under ``key`` by `figure`, or None (a page may then skip computing its inputs)."""
    with _FIGURES_LOCK:
        fig = _FIGURES.get(key)
        if fig is not None:
            _FIGURES.move_to_end(key)
        return fig


@st.cache_resource(show_spinner=False, max_entries=16)
def load_model(name: str, csv_text: str | None = None, csv_name: str | None = None) -> sim.Model:
    """A zoo model by name, or the uploaded CSV when ``name`` is `UPLOAD`.

    Names outside the zoo are refused (never read as a path from a URL).
    """
    if name == UPLOAD:
        if not csv_text:
            raise sim.SimInputError("no layer CSV uploaded yet: choose a file in the sidebar")
        return model_from_csv_text(csv_text, csv_name or "uploaded.csv")
    if name not in model_options():
        raise sim.SimInputError(f"unknown model {name!r}; choose one from the sidebar")
    return sim.load_model(name)


def model_of(cfg: Config) -> sim.Model:
    return load_model(cfg.model, cfg.csv_text, cfg.csv_name)


def _t1_key(cfg: Config) -> Config:
    """The fields that decide the one-GPU iteration time (the rest reset)."""
    return Config(
        model=cfg.model, csv_text=cfg.csv_text, csv_name=cfg.csv_name, batch_size=cfg.batch_size,
        precision=cfg.precision, gpu=cfg.gpu, gpus=1, gpus_per_node=1,
        calibrate_iteration_s=cfg.calibrate_iteration_s,
    )


@st.cache_data(**_CACHE)
def _single_gpu_s(cfg: Config) -> float:
    model = resolve_model(model_of(cfg), cfg.cluster(), cfg.batch_size, cfg.precision,
                          calibrate_iteration_s=cfg.calibrate_iteration_s)
    return single_gpu_iteration_s_of(model, cfg.precision)


def single_gpu_s(cfg: Config) -> float:
    """Steady-state one-GPU iteration time of the workload, in seconds."""
    return _single_gpu_s(_t1_key(cfg))


def reference_s(cfg: Config) -> float | None:
    """The one-GPU reference a run of ``cfg`` is given (`single_gpu_s`, worked out once), or None where it
    depends on the plan: with io or host copies, a plan that updates per layer reads the next batch while
    the GPU updates, and `sim.simulate` gives it its own reference (efficiency stays at most 1)."""
    model = model_of(cfg)
    if model.io_s or model.h2d_s:
        return None
    single = single_gpu_s(cfg)
    return single if single > 0 else None  # none: simulate refuses the model in its own words


#: Simulation results are kept as they are (``st.cache_resource``), shared by every session:
#: ``st.cache_data`` would unpickle a copy on every hit (0.7 s for a 100k-layer wfbp timeline).
#: Nobody may change a result in place.
_SHARED = {"show_spinner": False, "max_entries": 256}
#: A result over more layer-iterations than this (its timeline and figures grow with them: tens of MB
#: at 100k layers) is kept apart, with the other large ones, within `LARGE_BUDGET` layer-iterations in
#: all (the least recently used go first; the newest is always kept), so that switching schedulers on a
#: 100k-layer upload does not keep one large timeline per scheduler (409 -> 1,210 MiB over five) while a
#: Compare page of a few schedulers on a 10k-layer model still finds its runs again.
LARGE_LAYER_ITERATIONS = 5_000
LARGE_BUDGET = 400_000
_LARGE_RESULTS: OrderedDict = OrderedDict()
_LARGE_LOCK = threading.Lock()


#: The Timeline shows at most this many layer-iterations (layers x iterations shown): its task table
#: grows with them (a 100,000-layer model under zero3: 1 iteration 5.5 s and 410 MiB, 5 iterations 11 s
#: and 1.3 GiB in one process, measured 2026-11-25), and the server must stay under 1 GiB.
MAX_TIMELINE_LAYER_ITERATIONS = 100_000


def timed_rows(cfg: Config) -> int:
    """The rows a run of ``cfg``'s model times per iteration: its layers, or its gradient tensors where
    it has more of them (a run plans over tensors, `sim.tensors`: gpt2's 28 layers are 149 tensors)."""
    model = model_of(cfg)
    return max(model.num_layers, model.num_tensors)


def timeline_iterations(layers: int, asked: int) -> int:
    """The iterations the Timeline shows of a ``layers``-layer model when ``asked`` for: as many as
    `MAX_TIMELINE_LAYER_ITERATIONS` allows, at least one."""
    return max(1, min(int(asked), MAX_TIMELINE_LAYER_ITERATIONS // max(int(layers), 1)))


def _weight(cfg: Config, iterations: int) -> int:
    return model_of(cfg).num_layers * max(1, int(iterations))


def _run(cfg: Config, iterations: int, **how) -> sim.SimResult:
    return sim.simulate(
        model_of(cfg), cfg.cluster(), batch_size=cfg.batch_size, precision=cfg.precision, iterations=iterations,
        calibrate_iteration_s=cfg.calibrate_iteration_s, single_gpu_iteration_s=reference_s(cfg), **how,
    )


def _large(cfg: Config, iterations: int, **how) -> sim.SimResult:
    """`_run` kept among the large results (`LARGE_BUDGET`)."""
    key = (cfg, int(iterations), tuple(sorted(how.items())))
    with _LARGE_LOCK:
        if key in _LARGE_RESULTS:
            _LARGE_RESULTS.move_to_end(key)
            return _LARGE_RESULTS[key][0]
    res = _run(cfg, iterations, **how)
    with _LARGE_LOCK:
        _LARGE_RESULTS[key] = (res, _weight(cfg, iterations))
        while len(_LARGE_RESULTS) > 1 and sum(w for _, w in _LARGE_RESULTS.values()) > LARGE_BUDGET:
            _LARGE_RESULTS.popitem(last=False)
    return res


@st.cache_resource(**_SHARED)
def _simulate(cfg: Config, scheduler: str, iterations: int) -> sim.SimResult:
    return _run(cfg, iterations, scheduler=scheduler)


@st.cache_resource(**_SHARED)
def _simulate_method(cfg: Config, method: str, iterations: int) -> sim.SimResult:
    return _run(cfg, iterations, method=method)


def simulate(cfg: Config, scheduler: str, iterations: int = 1) -> sim.SimResult:
    """`sim.simulate` for the sidebar's configuration and one scheduler (shared: do not change it)."""
    if _weight(cfg, iterations) > LARGE_LAYER_ITERATIONS:
        return _large(cfg, iterations, scheduler=scheduler)
    return _simulate(cfg, scheduler, int(iterations))


def simulate_method(cfg: Config, method: str, iterations: int = 1) -> sim.SimResult:
    """`sim.simulate` of one of the survey's method presets (`sim.methods.METHODS`; shared: do not change it)."""
    if _weight(cfg, iterations) > LARGE_LAYER_ITERATIONS:
        return _large(cfg, iterations, method=method)
    return _simulate_method(cfg, method, int(iterations))


#: Iterations of the per-worker engine behind the straggler panels (the first is start-up).
STRAGGLER_ITERATIONS = 200
#: The fewest iterations a straggler view runs when its work is capped (p50 and p99 then come from 39 periods).
STRAGGLER_MIN_ITERATIONS = 40
#: What one worker's iteration holds besides its gradient tensors' times, in the same units (the
#: per-worker engine keeps some 15 numbers per worker and iteration: its io, h2d, forward start, backward
#: and update ends, the drawn factors and their copies): the straggler views count work in
#: GPUs x (tensors + this) x iterations. Counting tensors alone, a one-layer model on 65,536 GPUs
#: passed the limits and peaked at 1,029 MiB (the session's review, 2026-11-26).
STRAGGLER_CELLS_PER_ITERATION = 16
#: Tasks the per-worker engine may time for one request when the fast path does
#: not apply (partitions, per-layer updates, parameter servers): about a second.
STRAGGLER_TASK_BUDGET = 300_000
#: GPU-tensor-iterations one request runs at most before its iterations are cut (to no fewer than
#: `STRAGGLER_MIN_ITERATIONS`), measured 2026-11-26 on one core: 200 iterations of resnet50's 163 tensors on
#: 245 GPUs took 0.2 s; 4,096 GPUs, cut to 40 iterations, 0.9 s and 249 MiB peak for the whole process.
STRAGGLER_WORK_BUDGET = 8_000_000
#: The most work one straggler request may ask of the per-worker engine at its fewest iterations,
#: in GPUs x gradient tensors x iterations: bigger views are refused; raise it here. The run keeps the
#: per-layer times of the iterations it draws only (`sim.workers.simulate_workers`' timeline_iterations),
#: so its memory no longer grows with its iterations. At this limit, 40 iterations, wfbp, one GPU a node,
#: in a fresh process with the dashboard's modules (164 MiB before the run), measured 2026-11-26:
#: resnet50 on 4,900 GPUs 1.1 s and 265 MiB peak, bert_large on 2,000 GPUs 1.0 s and 255 MiB,
#: densenet201 on 1,300 GPUs 0.8 s and 254 MiB (resnet50 on 4,096 GPUs had taken 604 MiB when the run kept
#: every iteration's times). Past it, or past the engine's own cell budget (`sim.core.run.check_cell_budget`,
#: about 4,900 GPUs of resnet50 at 40 iterations), the view is refused before any work.
MAX_STRAGGLER_WORK = 32_000_000
#: The per-worker timeline (every worker's tasks) is built only up to this many rows; the figures
#: above it come from every worker all the same (4,096 workers x 4 iterations of resnet50 are 1.9 M rows).
MAX_WORKER_TIMELINE_ROWS = 300_000


def straggler_iterations(model, cfg: Config, scheduler: str, budget: int = STRAGGLER_WORK_BUDGET,
                         task_budget: int = STRAGGLER_TASK_BUDGET) -> int:
    """`STRAGGLER_ITERATIONS`, or fewer (at least `STRAGGLER_MIN_ITERATIONS`) when that many
    iterations of every worker would exceed ``budget`` GPU-tensor-iterations; at least 3 when
    the plan needs the general engine and would exceed ``task_budget`` tasks, and a `sim.SimInputError`
    when even 3 iterations would (the general engine takes about 25 µs a task: bytescheduler on 1,024
    GPUs, 3 iterations of 172 k tasks, took 14 s)."""
    res = sim.simulate(model, cfg.cluster(), scheduler, batch_size=cfg.batch_size, precision=cfg.precision)
    per_iteration = straggler_work(cfg.gpus, model.num_layers, 1)
    capped = int(min(STRAGGLER_ITERATIONS, max(STRAGGLER_MIN_ITERATIONS, budget // per_iteration)))
    if fast.supports(res.plan, cfg.cluster().comm_cost(model, cfg.precision), model.num_layers):
        return capped
    tasks = cfg.gpus * 3 * model.num_layers + 4 * sum(len(g) for g in res.plan.groups)
    if 3 * tasks > task_budget:
        raise sim.SimInputError(
            f"the straggler view of {scheduler} runs the general per-worker engine, limited to {task_budget:,} "
            f"tasks per request; 3 iterations of {cfg.gpus:,} GPUs x {model.num_layers:,} layers are {3 * tasks:,}: "
            f"use fewer GPUs, another scheduler, or python -m sim run --stragglers ... from the command line")
    return int(min(capped, max(3, task_budget // max(tasks, 1))))


#: Schedulers run on the general per-worker engine in one Compare straggler table (each up to
#: `STRAGGLER_TASK_BUDGET` tasks, about 3 s: all five of bytescheduler, dear, zero1-3 took 14 s).
MAX_GENERAL_STRAGGLER_RUNS = 2


def _straggler_model(cfg: Config):
    return resolve_model(model_of(cfg), cfg.cluster(), cfg.batch_size, cfg.precision, False, cfg.calibrate_iteration_s)


def needs_general_engine(cfg: Config, scheduler: str) -> bool:
    """Whether the straggler view of ``scheduler`` runs the general (slow) per-worker engine."""
    model = _straggler_model(cfg)
    res = sim.simulate(model, cfg.cluster(), scheduler, batch_size=cfg.batch_size, precision=cfg.precision)
    return not fast.supports(res.plan, cfg.cluster().comm_cost(model, cfg.precision), model.num_layers)


def straggler_tensors(cfg: Config) -> int:
    """The gradient tensors the per-worker engine times for the sidebar's model (its layers' parameter tensors)."""
    return _straggler_model(cfg).num_layers


def straggler_work(gpus: int, layers: int, iterations: int, runs: int = 1) -> int:
    """The work of a straggler view in the units of its limits: GPUs x (gradient tensors +
    `STRAGGLER_CELLS_PER_ITERATION`) x iterations, over ``runs`` schedulers."""
    return gpus * (layers + STRAGGLER_CELLS_PER_ITERATION) * iterations * runs


def check_straggler_work(gpus: int, layers: int, runs: int = 1) -> None:
    """Refuse, before any work, a straggler view bigger than `MAX_STRAGGLER_WORK` even at its
    fewest iterations (``layers``: the gradient tensors it times, `straggler_tensors`; ``runs``: the
    schedulers it runs, each as many iterations)."""
    work = straggler_work(gpus, layers, STRAGGLER_MIN_ITERATIONS, runs)
    if work > MAX_STRAGGLER_WORK:
        each = f" x {runs} schedulers" if runs > 1 else ""
        raise sim.SimInputError(
            f"the straggler view is limited to {MAX_STRAGGLER_WORK:,} GPU-tensor-iterations per request; "
            f"{gpus:,} GPUs x ({layers:,} gradient tensors + {STRAGGLER_CELLS_PER_ITERATION} per iteration) x "
            f"{STRAGGLER_MIN_ITERATIONS} iterations (the fewest it runs){each} = "
            f"{work:,}: use fewer GPUs{', or fewer schedulers' if runs > 1 else ''}, "
            "or run python -m sim run --stragglers ... from the command line")


#: What one point of a scaling sweep costs, in ms per (layer + 300), by scheduler; any other costs
#: `SWEEP_MS_PER_LAYER_DEFAULT`. Measured 2026-11-24 on the shared 2-core machine (resnet50, 1,000- and
#: 10,000-layer CSVs, 1 to 1,024 GPUs) and rounded up.
SWEEP_MS_PER_LAYER = {SEQUENTIAL: 0.012, HOROVOD: 0.012, BYTESCHEDULER: 0.055, DEAR: 0.055,
                      ZERO1: 0.035, ZERO2: 0.035, ZERO3: 0.035}
SWEEP_MS_PER_LAYER_DEFAULT = 0.005
#: The longest a scaling sweep may be estimated to simulate (the page then draws for about as long):
#: a heavier one is refused before any work.
MAX_SWEEP_S = 3.0


def sweep_seconds(layers: int, points_per_scheduler: int, schedulers: Sequence[str]) -> float:
    """The estimated time of a sweep of ``points_per_scheduler`` (GPU count, network) points per scheduler."""
    per_point_ms = sum(SWEEP_MS_PER_LAYER.get(s, SWEEP_MS_PER_LAYER_DEFAULT) for s in schedulers) * (layers + 300)
    return points_per_scheduler * per_point_ms / 1e3


#: The longest the Compare page's runs may be estimated to take (a 100,000-layer CSV under every
#: scheduler and method took 34 s and 3.4 GB; under the four default schedulers 4.3 s and 560 MB).
MAX_COMPARE_S = 3.0


def check_compare_work(layers: int, schedulers: Sequence[str], methods: Sequence[str] = ()) -> None:
    """Refuse, before any work, a Compare page whose runs (``schedulers``, each as often as it runs, and
    the survey ``methods``) are estimated to take over `MAX_COMPARE_S`."""
    from sim.methods import METHODS

    # a method costs what its scheduler costs, a parameter server at least what a sequential run does
    method_ms = sum(max(SWEEP_MS_PER_LAYER.get(METHODS[m].scheduler, SWEEP_MS_PER_LAYER_DEFAULT),
                        SWEEP_MS_PER_LAYER[SEQUENTIAL]) for m in methods) * (layers + 300)
    seconds = sweep_seconds(layers, 1, schedulers) + method_ms / 1e3
    if seconds > MAX_COMPARE_S:
        raise sim.SimInputError(
            f"{len(schedulers)} scheduler run(s) and {len(methods)} method(s) of a {layers:,}-layer model would take "
            f"about {seconds:.0f} s; the page runs up to about {MAX_COMPARE_S:g} s: pick fewer schedulers or methods "
            "(bytescheduler, dear and zero cost the most), or no compression (python -m sim run runs any of them)")


def check_sweep_work(layers: int, counts: int, networks: int, schedulers: Sequence[str]) -> None:
    """Refuse, before any work, a scaling sweep estimated to take over `MAX_SWEEP_S`."""
    seconds = sweep_seconds(layers, counts * networks, schedulers)
    if seconds > MAX_SWEEP_S:
        raise sim.SimInputError(
            f"this sweep ({counts} GPU counts x {networks} network(s) x {len(schedulers)} scheduler(s) of a "
            f"{layers:,}-layer model) would take about {seconds:.0f} s; the page runs sweeps of up to about "
            f"{MAX_SWEEP_S:g} s: pick fewer schedulers or networks (python -m sim sweep runs any size)")


#: The Algorithms page's budget in worker-steps x (layers + 800), over its comparison at the sidebar's
#: GPU count and its sweep of worker counts, for all seven algorithms (fewer count for less): about
#: 2.6 µs each on the shared 2-core machine (resnet50, 16 workers x 100 steps and the sweep, 1.9 M: the
#: page in 5 s; 64 workers x 100 steps: 20 s for the comparison alone; measured 2026-11-24).
MAX_ALGORITHM_WORK = 2_500_000
#: ... and in worker-steps x layers of its comparison, what its memory grows with (about 0.9 KiB each:
#: 1,000 layers x 16 workers x 100 steps peaked at 1.6 GB): at most about 450 MiB.
MAX_ALGORITHM_MEMORY_WORK = 500_000
_ALGORITHM_LAYER_COST = 800


def check_algorithm_work(layers: int, gpus: int, steps: int, sweep_worker_steps: int, algorithms: int = 7) -> None:
    """Refuse, before any work, an Algorithms page over `MAX_ALGORITHM_WORK` or `MAX_ALGORITHM_MEMORY_WORK`;
    ``sweep_worker_steps`` is the sweep's workers x steps summed over its counts."""
    share = algorithms / 7
    per_step = gpus * (layers + _ALGORITHM_LAYER_COST) * share
    sweep = sweep_worker_steps * (layers + _ALGORITHM_LAYER_COST) * share
    memory = gpus * steps * layers
    if per_step * steps + sweep <= MAX_ALGORITHM_WORK and memory <= MAX_ALGORITHM_MEMORY_WORK:
        return
    fits = int(min((MAX_ALGORITHM_WORK - sweep) / per_step, MAX_ALGORITHM_MEMORY_WORK / max(gpus * layers, 1)))
    advice = f"set Steps per worker to {fits} or less" if fits >= 10 else "use fewer GPUs"
    raise sim.SimInputError(
        f"the Algorithms page simulates at most {MAX_ALGORITHM_WORK:,} worker-steps x (layers + "
        f"{_ALGORITHM_LAYER_COST}) and {MAX_ALGORITHM_MEMORY_WORK:,} worker-steps x layers per request; "
        f"{gpus:,} workers x {steps} steps of a {layers:,}-layer model, and the sweep beside it, need "
        f"{per_step * steps + sweep:,.0f} and {memory:,}: {advice} (python -m sim algorithms runs any size)")


def worker_timeline_rows(gpus: int, layers: int, iterations: int) -> int:
    """Rows of the per-worker timeline of ``iterations`` iterations (io, h2d, forward, backward, update, waits)."""
    return gpus * iterations * (2 * layers + 5)


@st.cache_data(**_CACHE)
def stragglers(cfg: Config, scheduler: str, spec, seed: int, shown_iterations: int = 3,
               budget: int = STRAGGLER_WORK_BUDGET):
    """`sim.workers.simulate_workers` for the sidebar's configuration: its metrics, the
    per-worker timeline of iterations 1..``shown_iterations`` (None when it would exceed
    `MAX_WORKER_TIMELINE_ROWS`), every iteration time and the slow workers. The
    iterations are cut to fit ``budget`` (`straggler_iterations`; ``metrics["iterations"]``
    says how many ran)."""
    from sim.workers import simulate_workers

    model = _straggler_model(cfg)
    check_straggler_work(cfg.gpus, model.num_layers)
    res = simulate_workers(model, cfg.cluster(), scheduler, batch_size=cfg.batch_size, straggler=spec,
                           iterations=straggler_iterations(model, cfg, scheduler, budget), seed=seed,
                           precision=cfg.precision, timeline_iterations=shown_iterations + 1)
    early = None
    if worker_timeline_rows(cfg.gpus, model.num_layers, shown_iterations + 1) <= MAX_WORKER_TIMELINE_ROWS:
        early = coalesce(res.timeline.loc[res.timeline["iteration"].between(1, shown_iterations)])
    return res.metrics, early, res.iteration_times_s, res.straggler_workers


@st.cache_data(**_CACHE)
def tune(cfg: Config, knob: str, values: tuple) -> tuple[pd.DataFrame, dict]:
    """`sim.tune.tune` of one knob over ``values`` for the sidebar's configuration."""
    from sim.tune import tune as run_tune

    model = resolve_model(model_of(cfg), cfg.cluster(), cfg.batch_size, cfg.precision, False,
                          cfg.calibrate_iteration_s)
    result = run_tune(model, cfg.cluster(), knob, list(values), batch_size=cfg.batch_size, precision=cfg.precision)
    return result.frame, result.best


@st.cache_data(**_CACHE)
def iteration_dag(cfg: Config, scheduler: str) -> nx.DiGraph:
    """The task DAG of one iteration under ``scheduler`` (for drawing small models)."""
    res = simulate(cfg, scheduler)
    cost = res.cluster.comm_cost(res.model, cfg.precision)
    return build_dag(res.model, res.plan, cost, precision=cfg.precision, iterations=1, include_comm=cfg.gpus > 1)


@st.cache_data(**_CACHE)
def scaling_point(cfg: Config, gpus: int, network: str, scheduler: str) -> dict:
    """Metrics of one (GPU count, network, scheduler) point of a scaling sweep."""
    res = sim.simulate(
        model_of(cfg), cfg.cluster(gpus=gpus, network=network), scheduler,
        batch_size=cfg.batch_size, precision=cfg.precision,
        calibrate_iteration_s=cfg.calibrate_iteration_s, single_gpu_iteration_s=reference_s(cfg),
    )
    return {k: v for k, v in res.metrics.items() if k != "groups"}


def scaling_frame(
    cfg: Config,
    gpu_counts: Sequence[int],
    networks: Sequence[str],
    schedulers: Sequence[str],
    progress: Callable[[float], None] | None = None,
) -> pd.DataFrame:
    """Rows of `sim.METRIC_KEYS` (without groups) for every point; cached per point.

    ``progress`` is called with the fraction done after each point.
    """
    base = cfg.replace(gpus=1)  # the sweep does not depend on the picked count
    points = [(p, net, s) for net in networks for s in schedulers for p in gpu_counts]
    rows = []
    for i, (p, net, s) in enumerate(points, start=1):
        rows.append(scaling_point(base, int(p), net, s))
        if progress is not None:
            progress(i / len(points))
    return pd.DataFrame(rows)


# --- the Learn page's toy model --------------------------------------------

#: Four layers, input to output: two small convolutions, two large dense layers.
TOY_LAYERS = pd.DataFrame(
    {
        "name": ["conv1", "conv2", "fc1", "fc2"],
        "params": [100_000, 100_000, 1_000_000, 1_000_000],
        "fwd_ms": [2.0, 0.5, 0.5, 1.0],
        "bwd_ms": [4.0, 1.0, 1.0, 2.0],
    }
)


def toy_model() -> sim.Model:
    return sim.model_from_frame(TOY_LAYERS, "toy")


@st.cache_data(**_CACHE)
def toy_results(alpha_s: float, beta_s_per_byte: float, schedulers: tuple[str, ...]) -> dict[str, sim.SimResult]:
    """The toy model on 2 GPUs whose all-reduce costs ``alpha + beta * M``."""
    cluster = sim.Cluster(gpus=2, alpha_s=alpha_s, beta_s_per_byte=beta_s_per_byte)
    return {s: sim.simulate(toy_model(), cluster, s, batch_size=1) for s in schedulers}


@st.cache_data(**_CACHE)
def mechanisms(network: str) -> pd.DataFrame:
    """The Learn page's table of mechanisms switched off in turn (`dashboard.learn_view.mechanism_frame`)."""
    from dashboard.learn_view import mechanism_frame

    return mechanism_frame(network)


@st.cache_data(**_CACHE)
def precisions(network: str) -> pd.DataFrame:
    """The Learn page's table of one case at each precision (`dashboard.learn_view.precision_frame`)."""
    from dashboard.learn_view import precision_frame

    return precision_frame(network)


@st.cache_data(**_CACHE)
def toy_alpha_sweep(alphas_s: tuple[float, ...], beta_s_per_byte: float, schedulers: tuple[str, ...]) -> pd.DataFrame:
    """Iteration time and message count of the toy model for each alpha."""
    rows = []
    for a in alphas_s:
        for s, res in toy_results(a, beta_s_per_byte, schedulers).items():
            rows.append({"alpha_us": a * 1e6, "scheduler": s, "iteration_ms": res.iteration_time_s * 1e3,
                         "num_messages": res.metrics["num_messages"]})
    return pd.DataFrame(rows)
