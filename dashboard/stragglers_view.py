"""The sidebar's straggler setting, shown on the Timeline and Compare pages."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import sim
from dashboard import algorithms_figures as af
from dashboard import cached, state, ui
from dashboard.state import Config
from sim.schedulers.registry import get_spec

__all__ = ["breakdown_sentence", "compare_table", "limits_note", "setting", "timeline_panel"]

SHOWN_ITERATIONS = 3


def setting():
    """``(spec, seed)`` from the sidebar, None when off; an impossible setting shows an error."""
    try:
        return state.stragglers_from_state(st.session_state)
    except sim.SimInputError as exc:
        st.error(f"Stragglers: {exc}")
        return None


def _describe(spec) -> str:
    noise = "no noise" if spec.dist == "constant" else f"{spec.dist} compute noise, cv {spec.cv:g}"
    slow = f", {spec.stragglers} worker(s) {spec.factor:g}× slower" if spec.stragglers else ""
    return noise + slow


def timeline_panel(cfg: Config, scheduler: str, ideal_iteration_s: float) -> None:
    """Who waits for whom under ``scheduler``, with the p50/p99 iteration against identical workers."""
    chosen = setting()
    if chosen is None:
        return
    spec, seed = chosen
    st.subheader("Stragglers: who waits for whom")
    if not get_spec(scheduler).per_worker:
        st.info(f"The per-worker engine does not model {scheduler}; pick another scheduler to see stragglers.")
        return
    with st.spinner(f"Running the per-worker engine on {ui.plural(cfg.gpus, 'GPU')}… (a control change stops it)"):
        metrics, early, _, slow = ui.guarded(cached.stragglers, cfg, scheduler, spec, seed, SHOWN_ITERATIONS)
    cols = st.columns(4)
    cols[0].metric("Median iteration", ui.fmt_ms(metrics["iteration_p50_s"]),
                   f"{metrics['iteration_p50_s'] / ideal_iteration_s - 1:+.1%} vs identical workers",
                   delta_color="inverse")
    cols[1].metric("p99 iteration", ui.fmt_ms(metrics["iteration_p99_s"]))
    cols[2].metric("Slowdown", f"{metrics['straggler_slowdown']:.3f}×",
                   help="Mean iteration time over that of identical workers.")
    cols[3].metric("Mean wait per worker", ui.fmt_ms(metrics["wait_mean_s"]))
    st.caption(breakdown_sentence(metrics))
    lanes = list(dict.fromkeys([*slow, *range(cfg.gpus)]))[:4]
    if early is not None:
        ui.chart(af.worker_timeline_figure(early, sorted(lanes), slow,
                                           f"{scheduler}, iterations 1-{SHOWN_ITERATIONS}: {_describe(spec)}"),
                 "timeline_stragglers", f"stragglers-{cfg.model_label}-{scheduler}-{cfg.gpus}gpus")
    st.caption(f"Per-worker engine (`sim.workers`), seed {seed}, {metrics['iterations']} iterations; "
               "every all-reduce starts when the last worker's gradient is ready. " + limits_note(cfg, metrics, early))


def breakdown_sentence(metrics: dict) -> str:
    """Where the per-worker run's mean iteration goes (`sim.workers.phases`: the parts add up to it)."""
    parts = [("computing", metrics["compute_s"]), ("waiting for the slowest worker's gradients",
                                                    metrics.get("straggler_wait_s", 0.0)),
             ("waiting on the network (exposed communication)", metrics["comm_exposed_s"])]
    said = ", ".join(f"{what} {ui.fmt_ms(part_s)} ({part_s / metrics['iteration_time_s']:.0%})" for what, part_s in parts)
    return (f"Of the mean iteration, {ui.fmt_ms(metrics['iteration_time_s'])}, a worker spends on average: {said}; "
            f"{ui.fmt_ms(metrics['comm_hidden_s'])} more communication is hidden behind compute.")


def _cap_rule() -> str:
    return (f"a request's iterations are cut to fit {cached.STRAGGLER_WORK_BUDGET:,} GPU-tensor-iterations "
            f"(GPUs x (gradient tensors + {cached.STRAGGLER_CELLS_PER_ITERATION}) x iterations), never below "
            f"{cached.STRAGGLER_MIN_ITERATIONS} iterations")


def limits_note(cfg: Config, metrics: dict, early) -> str:
    """What the dashboard's work caps left out of a straggler view, in a sentence (or "")."""
    notes = []
    if metrics["iterations"] < cached.STRAGGLER_ITERATIONS:
        work = cached.straggler_work(cfg.gpus, cached.straggler_tensors(cfg), metrics["iterations"])
        notes.append(f"**Capped** at {metrics['iterations']} of {cached.STRAGGLER_ITERATIONS} iterations: "
                     f"{_cap_rule()}; this view ran {work:,}. "
                     "The CLI (`python -m sim run --stragglers ...`) has no such cap.")
    if early is None:
        notes.append(f"The per-worker timeline is not drawn for {cfg.gpus:,} GPUs (over "
                     f"{cached.MAX_WORKER_TIMELINE_ROWS:,} rows); the figures above use every worker.")
    return " ".join(notes)


def compare_table(cfg: Config, schedulers: list[str], ideal_s: dict[str, float]) -> None:
    """p50/p99 iteration of each scheduler with the sidebar's stragglers."""
    chosen = setting()
    if chosen is None:
        return
    spec, seed = chosen
    rows, names = [], [n for n in schedulers if n in ideal_s and get_spec(n).per_worker]
    budget = cached.STRAGGLER_WORK_BUDGET // max(len(names), 1)  # the whole table within one request's budget
    try:
        cached.check_straggler_work(cfg.gpus, cached.straggler_tensors(cfg), max(len(names), 1))
    except sim.SimInputError as exc:  # the table is left out; the rest of the page stays
        st.error(f"Stragglers: {exc}")
        return
    general = [n for n in names if cached.needs_general_engine(cfg, n)][cached.MAX_GENERAL_STRAGGLER_RUNS:]
    left_out = [f"{n}: the table runs at most {cached.MAX_GENERAL_STRAGGLER_RUNS} schedulers on the general "
                "per-worker engine (a few seconds each); pick fewer of them to see this one" for n in general]
    for name in (n for n in names if n not in general):
        with st.spinner(f"Stragglers under {name}…"):
            try:
                metrics, *_ = cached.stragglers(cfg, name, spec, seed, SHOWN_ITERATIONS, budget)
            except sim.SimInputError as exc:  # too big for the general engine: the others are still shown
                left_out.append(f"{name}: {exc}")
                continue
        rows.append({"scheduler": name, "identical workers (ms)": ideal_s[name] * 1e3,
                     "p50 (ms)": metrics["iteration_p50_s"] * 1e3, "p99 (ms)": metrics["iteration_p99_s"] * 1e3,
                     "slowdown": metrics["straggler_slowdown"]})
    if rows:
        st.subheader(f"With stragglers ({_describe(spec)})")
        st.dataframe(pd.DataFrame(rows), hide_index=True, key="compare_stragglers",
                     column_config={c: st.column_config.NumberColumn(format="%.2f")
                                    for c in ("identical workers (ms)", "p50 (ms)", "p99 (ms)")}
                     | {"slowdown": st.column_config.NumberColumn(format="%.3f×")})
        if (iterations := metrics["iterations"]) < cached.STRAGGLER_ITERATIONS:
            work = cached.straggler_work(cfg.gpus, cached.straggler_tensors(cfg), iterations, len(rows))
            st.caption(f"**Capped** at {iterations} iterations per scheduler: {_cap_rule()} (over the table's "
                       f"schedulers together); this table ran {work:,}.")
    for note in left_out:
        st.warning(f"Stragglers: left out {note}", icon=":material/warning:")
