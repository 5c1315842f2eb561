"""Interference (sim.core.interference): compute overlapped by communication slows down."""

import csv
import dataclasses
import math
from unittest import mock

import numpy as np
import pandas as pd
import pytest
from helpers import make_model, user_cluster
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_fast import runs as fast_runs

import sim
from sim.catalog import DATA_DIR, networks
from sim.comm import NO_COMM, CommCost
from sim.core import fast, interference
from sim.core import run as core_run
from sim.core.backward_stretch import backward_times, backward_times_row
from sim.core.plan import NO_GRADIENTS, gradient_layers
from sim.errors import SimInputError
from sim.interference import comm_slowdown, compute_slowdown
from sim.model import model_from_frame


def two_layers(bwd_a_ms: float) -> sim.Model:
    """Layer a (input side) and b; 1 ms forward each; b's backward 2 ms."""
    return model_from_frame(pd.DataFrame({"name": ["a", "b"], "params": [1000, 1000], "fwd_ms": [1.0, 1.0],
                                          "bwd_ms": [bwd_a_ms, 2.0]}), "two")


def run(model, kappa, alpha_s):
    cluster = sim.Cluster(gpus=2, alpha_s=alpha_s, beta_s_per_byte=0.0, compute_slowdown=kappa)
    return sim.simulate(model, cluster, "wfbp", batch_size=1, iterations=2)


def test_fully_overlapped_backward_stretches_by_kappa_by_hand():
    """b's message (5 ms) starts at 4 ms and covers all of a's backward (2 ms), so a's
    backward takes 2 x 1.5 = 3 ms; the iteration stays communication-bound: forward 2 +
    b's backward 2 + b's message 5 + a's message 5 = 14 ms, as without interference."""
    res = run(two_layers(2.0), 0.5, 5e-3)
    assert res.iteration_time_s == pytest.approx(14e-3, rel=1e-12)
    assert res.metrics["interference_s"] == pytest.approx(1e-3, rel=1e-9)
    tl = res.timeline
    bar = tl.loc[(tl.kind == "backward") & (tl.layer == "a") & (tl.iteration == 0)].iloc[0]
    assert bar.duration_s == pytest.approx(3e-3, rel=1e-9)  # the stretched bar


def test_partly_overlapped_backward_reaches_the_fixed_point():
    """b's message (1 ms) overlaps the first 1 ms of a's backward (4 ms): the stretched time x
    solves x = 4 (1 + 0.5 x 1/x) ms, i.e. x = 2 + sqrt(6) ms. The covered part does not move
    with the task, so the round's quadratic is exact: reached to rounding."""
    res = run(two_layers(4.0), 0.5, 1e-3)
    tl = res.timeline
    bar = tl.loc[(tl.kind == "backward") & (tl.layer == "a") & (tl.iteration == 0)].iloc[0]
    assert bar.duration_s == pytest.approx((2 + math.sqrt(6)) * 1e-3, rel=1e-9)
    plain = run(two_layers(4.0), 0.0, 1e-3)
    assert res.iteration_time_s > plain.iteration_time_s
    assert plain.metrics["interference_s"] == 0


def test_message_reaching_past_the_task_end_by_hand():
    """a's backward (4 ms) starts at 4 ms, beside b's message (4-9 ms), which still runs at
    its end: the first round stretches it as fully covered (4 x 1.3 = 5.2 ms), past the
    message's end; then only 5 ms of it are covered, and x = 4 (1 + 0.3 x 5/x) ms gives
    x = 2 + sqrt(10) ms."""
    res = run(two_layers(4.0), 0.3, 5e-3)
    tl = res.timeline
    bar = tl.loc[(tl.kind == "backward") & (tl.layer == "a") & (tl.iteration == 0)].iloc[0]
    assert bar.duration_s == pytest.approx((2 + math.sqrt(10)) * 1e-3, rel=1e-9)
    assert res.metrics["interference_s"] == pytest.approx((math.sqrt(10) - 2) * 1e-3, rel=1e-9)


def _comm_run(kappa_c: float, engine: str = "auto"):
    cluster = sim.Cluster(gpus=2, alpha_s=2e-3, beta_s_per_byte=0.0, compute_slowdown=0.0, comm_slowdown=kappa_c)
    return sim.simulate(two_layers(3.0), cluster, "wfbp", batch_size=1, iterations=2, engine=engine)


@pytest.mark.parametrize("engine", ["auto", "general"])
def test_a_message_slowed_by_the_backward_pass_by_hand(engine):
    """b's message (2 ms of work) starts at 4 ms, when b's backward ends; a's backward runs
    from 4 to 7 ms. With comm_slowdown 1 the message makes half its progress while a's
    backward runs: 1.5 ms of work by 7 ms, the other 0.5 ms alone, so it ends at 7.5 ms (not
    6). a's message (2 ms) then starts at 7.5 ms, alone, and ends at 9.5 ms: forward 2 +
    backward 5 + 2.5 ms exposed = 9.5 ms (without the slowdown, 9 ms)."""
    plain, slowed = _comm_run(0.0, engine), _comm_run(1.0, engine)
    assert plain.iteration_time_s == pytest.approx(9e-3, rel=1e-12)
    assert slowed.iteration_time_s == pytest.approx(9.5e-3, rel=1e-12)
    tl = slowed.timeline
    comm = tl.loc[(tl.iteration == 0) & ~tl.kind.isin(["forward", "backward", "update", "io", "h2d"])]
    assert sorted(zip(comm.start_s.round(12), comm.end_s.round(12), strict=True)) == [(4e-3, 7.5e-3), (7.5e-3, 9.5e-3)]
    assert slowed.metrics["interference_s"] == 0  # compute is not stretched: only the message
    assert slowed.metrics["comm_exposed_s"] == pytest.approx(2.5e-3, rel=1e-9)
    assert slowed.metrics["comm_hidden_s"] == pytest.approx(3e-3, rel=1e-9)


def test_a_message_wholly_inside_the_backward_pass_takes_one_plus_kappa_times_as_long():
    """b's message (2 ms) inside a's backward of 10 ms: with comm_slowdown 0.5 it takes 3 ms."""
    cluster = sim.Cluster(gpus=2, alpha_s=2e-3, beta_s_per_byte=0.0, compute_slowdown=0.0, comm_slowdown=0.5)
    res = sim.simulate(two_layers(10.0), cluster, "wfbp", batch_size=1, iterations=2)
    tl = res.timeline
    comm = tl.loc[(tl.iteration == 0) & (tl.layer == "b") & ~tl.kind.isin(["forward", "backward"])]
    assert float((comm.end_s - comm.start_s).iloc[0]) == pytest.approx(3e-3, rel=1e-12)


def test_switch_and_override():
    model = sim.load_model("resnet50")
    on = sim.simulate(model, sim.Cluster(gpus=8, gpus_per_node=4, network="ib-edr-100"), "wfbp", batch_size=32)
    off = sim.simulate(model, sim.Cluster(gpus=8, gpus_per_node=4, network="ib-edr-100", interference=False),
                       "wfbp", batch_size=32)
    zero = sim.simulate(model, sim.Cluster(gpus=8, gpus_per_node=4, network="ib-edr-100", compute_slowdown=0.0,
                                           comm_slowdown=0.0), "wfbp", batch_size=32)
    assert on.metrics["interference_s"] > 0 and off.metrics["interference_s"] == 0
    assert off.iteration_time_s == zero.iteration_time_s <= on.iteration_time_s
    # communication slowed by compute alone: no compute stretched, more communication exposed
    comm_only = sim.simulate(model, sim.Cluster(gpus=8, gpus_per_node=4, network="ib-edr-100", compute_slowdown=0.0,
                                                comm_slowdown=1.0), "wfbp", batch_size=32)
    assert comm_only.metrics["interference_s"] == 0
    assert comm_only.metrics["comm_exposed_s"] > zero.metrics["comm_exposed_s"]
    assert comm_only.iteration_time_s > zero.iteration_time_s
    for name in ("compute_slowdown", "comm_slowdown"):
        with pytest.raises(SimInputError, match=name):
            sim.Cluster(gpus=2, **{name: -1.0})
        with pytest.raises(SimInputError, match=name):
            sim.Cluster(gpus=2, **{name: 11.0})
    with pytest.raises(SimInputError, match="interference"):
        sim.Cluster(gpus=2, interference="yes")


def test_engines_agree_with_interference():
    model = sim.load_model("resnet50")
    cluster = sim.Cluster(gpus=16, gpus_per_node=4, network="ib-edr-100")
    for scheduler in ("wfbp", "mgwfbp", "ddp"):
        a = sim.simulate(model, cluster, scheduler, batch_size=32)
        b = sim.simulate_dag(model, cluster, scheduler, batch_size=32)
        assert a.iteration_time_s == pytest.approx(b.iteration_time_s, rel=1e-9)
        assert a.metrics["interference_s"] == pytest.approx(b.metrics["interference_s"], rel=1e-9, abs=1e-15)


def test_every_link_preset_has_a_sourced_coefficient():
    with open(DATA_DIR / "interference.csv", encoding="utf-8") as fh:
        rows = {r["network"]: r for r in csv.DictReader(fh)}
    assert set(rows) == set(networks())  # the built-in presets (tests run without user presets)
    for name, row in rows.items():
        assert ("FITTED" in row["source"]) or ("DERIVED" in row["source"]), name
        assert compute_slowdown(name) == float(row["compute_slowdown"]) >= 0
        # the coefficient the other way says where it comes from too
        assert ("comm_slowdown: FITTED" in row["source"]) or ("comm_slowdown: DERIVED" in row["source"]), name
        assert comm_slowdown(name) == float(row["comm_slowdown"]) >= 0


def test_the_fraction_names_kept_from_the_earlier_rounds_by_hand():
    """Without interference, b's message (1 ms, from 4 ms) covers the first quarter of a's
    backward (4 ms, from 4 ms): fraction 0.25 by the timeline and by the fast path's arrays;
    one round of the earlier stretch makes it 4 x (1 + 0.5 x 0.25) = 4.5 ms."""
    from sim.core.interference import overlap_fractions, stretched_model

    res = run(two_layers(4.0), 0.0, 1e-3)
    f_fwd, f_bwd = overlap_fractions(res.timeline, res.model.layer_names, 0)
    assert f_bwd.tolist() == pytest.approx([0.25, 0.0], abs=1e-12) and f_fwd.tolist() == [0.0, 0.0]
    one_round = stretched_model(res.model, res.timeline, 0, 0.5)
    assert one_round.bwd_s.tolist() == pytest.approx([4.5e-3, 2e-3], rel=1e-12)


def test_a_measured_trace_is_stretched_only_when_asked():
    """A trace's compute already ran beside its communication: no stretch by default; an
    explicit compute_slowdown stretches it like any run (b's 3 ms message covers a's 2 ms
    backward: 2 x 1.5 = 3 ms)."""
    trace = model_from_frame(pd.DataFrame({"name": ["a", "b"], "params": [1000, 1000], "fwd_ms": [1.0, 1.0],
                                           "bwd_ms": [2.0, 2.0], "comm_ms": [3.0, 3.0]}), "trace")
    plain = sim.simulate(trace, sim.Cluster(gpus=2), "wfbp", batch_size=1)
    asked = sim.simulate(trace, sim.Cluster(gpus=2, compute_slowdown=0.5), "wfbp", batch_size=1)
    assert plain.metrics["interference_s"] == 0
    assert asked.metrics["interference_s"] == pytest.approx(1e-3, rel=1e-9)
    assert asked.iteration_time_s >= plain.iteration_time_s


# ---- the one-pass solver (sim.core.backward_stretch) against the rounds of sim.core.interference

@st.composite
def _stretch_cases(draw):
    n = draw(st.integers(1, 8))
    time_ms = st.one_of(st.just(0.0), st.floats(0.01, 10.0))
    model = make_model(draw(st.lists(st.integers(1, 4_000_000), min_size=n, max_size=n)),
                       draw(st.lists(time_ms, min_size=n, max_size=n)), draw(st.lists(time_ms, min_size=n, max_size=n)))
    scheduler = draw(st.sampled_from(sorted(s for s in sim.SCHEDULERS if sim.schedulers.make_plan(
        s, NO_GRADIENTS, NO_COMM).is_plain)))
    cost = CommCost(draw(st.floats(0.0, 5e-3)), draw(st.floats(0.0, 1e-8)))
    return model, scheduler, cost, draw(st.floats(0.0, 0.95))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_stretch_cases())
def test_one_pass_solution_is_the_fixed_point_the_rounds_reach(case):
    """Solved task by task, each backward time is the one the timing rounds converge to
    (`fixed_point`, unbounded rounds here); forward times are never stretched on this path."""
    model, scheduler, cost, kappa = case
    plan = sim.schedulers.make_plan(scheduler, gradient_layers(model, "fp32"), cost)
    prepared = fast.layout(model, plan, [cost])
    solved = backward_times(model.bwd_s, prepared.t_c_s, model.num_layers - 1 - prepared.lowest, plan.lag_s,
                            plan.after_backward, np.array([kappa]))
    if solved is None:  # served by priority: the rounds handle it
        return

    def time_rows(fwd, bwd):
        return fast.evaluate(model, plan, [cost], iterations=3, compute_s=(fwd, bwd), prepared=prepared)

    with mock.patch.object(interference, "PASSES", 60):
        fwd, bwd, _ = interference.fixed_point(time_rows, lambda run: interference.fast_overlap(run, 1), model.fwd_s,
                                               model.bwd_s, np.array([kappa]))
    np.testing.assert_array_equal(fwd[0], model.fwd_s)
    np.testing.assert_allclose(solved[0], bwd[0], rtol=1e-9, atol=1e-15)


def test_a_message_released_later_leaves_a_gap_by_hand():
    """Task 0 (1 ms) releases a 1 ms message after a 0.5 ms lag; task 1 (4 ms, kappa 0.5) starts at 1 ms,
    and the message covers 1.5-2.5 ms of it, all inside the task: x = 4 (1 + 0.5 x 1/x) ms, so
    x^2 = 4x + 2 (in ms) and x = 2 + sqrt(6) ms."""
    got = backward_times_row([1e-3, 4e-3], [1e-3], [0], [0.5e-3], 0.5)
    assert got[0] == 1e-3
    assert got[1] == pytest.approx((2 + math.sqrt(6)) * 1e-3, rel=1e-12)
    # a message released 10 ms later never meets the task: it runs alone
    assert backward_times_row([1e-3, 4e-3], [1e-3], [0], [10e-3], 0.5)[1] == 4e-3
    # released out of plan order: the channel serves by priority, and the solver declines
    assert backward_times_row([1e-3, 1e-3, 1e-3], [1e-3, 1e-3], [0, 1], [5e-3, 0.0], 0.5) is None


def test_a_task_that_ends_as_a_lagged_message_begins_runs_alone():
    """Task 1 (0.1 ms) starts at 0.3 ms, and message 0, released 0.1 ms after task 0 ends, begins as it
    ends: nothing covers it (to rounding), and for kappa < 1 (one root) it takes 0.1 ms. The root lies
    at the end of the gap before the message, where rounding once lost it in both pieces and the task
    took 0.1 (1 + kappa) ms, as if covered throughout."""
    for kappa in np.arange(0, 1000) / 1000:
        got = backward_times_row([3e-4, 1e-4], [5e-4, 5e-4], [0, 1], [1e-4, 2e-4], float(kappa))
        assert got[1] == pytest.approx(1e-4, rel=1e-9), kappa


def _first_root(b, kappa, t, starts, ends):
    """The smallest x > 0 with x^2 = b x + b kappa c(x), c the time [t, t + x) overlaps the messages,
    found by bisection with every g(x) exact (fractions), the messages as given (floats)."""
    from fractions import Fraction

    b, kappa = Fraction(b), Fraction(kappa)
    spans = [(Fraction(s) - Fraction(t), Fraction(e) - Fraction(t)) for s, e in zip(starts, ends, strict=True)]

    def g(x):
        return x * x - b * x - b * kappa * sum(max(Fraction(0), min(e, x) - max(s, Fraction(0))) for s, e in spans)

    lo = Fraction(0)
    for hi in sorted({p for span in spans for p in span if p > 0}) + [2 * b * (1 + kappa)]:
        if g(hi) >= 0:
            for _ in range(70):
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if g(mid) >= 0 else (mid, hi)
            return float(hi)
        lo = hi
    raise AssertionError("no root")


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_each_task_takes_the_first_root_exactly(data):
    """On a grid of times (tasks ending as messages begin or end), with lags and kappa < 1 (one root),
    each task's time is the root of its equation found with exact arithmetic, to 1e-9."""
    unit = data.draw(st.sampled_from([1e-3, 0.5e-3, 0.3e-3, 0.1e-3, 1e-3 / 3]))
    n = data.draw(st.integers(2, 6))
    bwd = [unit * k for k in data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))]
    lowest_at = sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1)))
    t_c = [unit * k for k in data.draw(st.lists(st.integers(0, 6), min_size=len(lowest_at), max_size=len(lowest_at)))]
    lag = [unit * k for k in data.draw(st.lists(st.integers(0, 3), min_size=len(lowest_at), max_size=len(lowest_at)))]
    kappa = data.draw(st.one_of(st.sampled_from([0.25, 0.5, 0.75]), st.floats(0.0, 0.95)))
    got = backward_times_row(bwd, t_c, lowest_at, lag, kappa)
    assume(got is not None)  # released out of plan order: the rounds' case
    t, task_end, starts, ends, free, g = 0.0, [], [], [], -math.inf, 0
    for p, b in enumerate(bwd):  # the channel as the solver's times place it
        while g < len(lowest_at) and lowest_at[g] < p:
            ready = task_end[lowest_at[g]] + lag[g]
            starts.append(ready if ready > free else free)
            free = starts[-1] + t_c[g]
            ends.append(free)
            g += 1
        want = b if b == 0 else _first_root(b, kappa, t, starts, ends)
        assert got[p] == pytest.approx(want, rel=1e-9), p
        t += got[p]
        task_end.append(t)


#: Horovod's ticks: released at cycle boundaries, each gradient alone or fused up to 1 MiB
_HOROVOD_OPTIONS = st.sampled_from([None, {"cycle_time_ms": 0.5, "fusion_threshold_mb": 0.0},
                                    {"cycle_time_ms": 3.0, "fusion_threshold_mb": 1.0}])


@st.composite
def _interfering_runs(draw, high=sim.core.cost.MAX_COMPUTE_SLOWDOWN, high_comm=sim.core.cost.MAX_COMM_SLOWDOWN):
    n = draw(st.integers(1, 8))
    time_ms = st.one_of(st.just(0.0), st.floats(0.01, 10.0))
    model = make_model(draw(st.lists(st.one_of(st.just(0), st.integers(1, 4_000_000)), min_size=n, max_size=n)),
                       draw(st.lists(time_ms, min_size=n, max_size=n)), draw(st.lists(time_ms, min_size=n, max_size=n)),
                       update_ms=draw(st.sampled_from([0.0, 1.0])))
    cluster = dataclasses.replace(
        user_cluster(draw(st.sampled_from([2, 4, 16])), draw(st.one_of(st.just(0.0), st.floats(1e-6, 5e-3))),
                     draw(st.one_of(st.just(0.0), st.floats(1e-12, 5e-9)))),
        compute_slowdown=draw(st.one_of(st.just(high), st.floats(0.0, high))),
        comm_slowdown=draw(st.one_of(st.just(0.0), st.just(high_comm), st.floats(0.0, high_comm))))
    run = draw(fast_runs)
    if run["scheduler"] == "horovod":
        run = {**run, "options": draw(_HOROVOD_OPTIONS)}
    return model, cluster, run


def _both(first, second):
    """Both results, or None when both refuse the input with the same one-line error."""
    results = []
    for run in (first, second):
        try:
            results.append(run())
        except SimInputError as exc:
            results.append(str(exc))
    if isinstance(results[0], str) or isinstance(results[1], str):
        assert results[0] == results[1]
        return None
    return tuple(results)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_interfering_runs())
def test_fast_path_and_general_engine_agree_under_interference(case):
    """`simulate` and `simulate_dag` with compute_slowdown anywhere in [0, 1] and comm_slowdown in [0, 10],
    every fast-path scheduler (Horovod's ticks too): every metric to 1e-9."""
    model, cluster, run = case
    pair = _both(lambda: sim.simulate(model, cluster, batch_size=8, **run),
                 lambda: sim.api.simulate_dag(model, cluster, batch_size=8, **run))
    assume(pair is not None)
    fast_res, ref = pair
    for key in sim.METRIC_KEYS:
        if isinstance(ref.metrics[key], float):
            assert fast_res.metrics[key] == pytest.approx(ref.metrics[key], rel=1e-9, abs=1e-15), key
        else:
            assert fast_res.metrics[key] == ref.metrics[key], key


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_interfering_runs(high=0.95))
def test_one_pass_is_what_the_general_engines_rounds_converge_to(case):
    """With kappa < 1 (one root per task) the one-pass times on the fast path are those the rounds over
    the general engine's task graph converge to (the check `simulate_dag` no longer makes, since both
    engines now take the one-pass times)."""
    model, cluster, run = case

    def by_rounds():
        with mock.patch.object(core_run, "_solved_backward", lambda *a, **k: None), \
                mock.patch.object(interference, "PASSES", 60):
            return sim.api.simulate_dag(model, cluster, batch_size=8, **run)

    pair = _both(lambda: sim.simulate(model, cluster, batch_size=8, **run), by_rounds)
    assume(pair is not None)
    fast_res, rounds = pair
    # the rounds stop once no task moves by more than TOLERANCE of the longest (which they keep unmoved)
    settled_s = model.num_layers * interference.TOLERANCE * rounds.iteration_time_s
    assert fast_res.metrics["interference_s"] == pytest.approx(rounds.metrics["interference_s"], rel=1e-9,
                                                               abs=settled_s)
    assert fast_res.iteration_time_s == pytest.approx(rounds.iteration_time_s, rel=1e-9)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_interfering_runs(), st.floats(0.0, sim.core.cost.MAX_COMM_SLOWDOWN))
def test_communication_slowed_by_compute_never_shortens_an_iteration(case, kappa_c):
    """On the fast path's schedulers (Horovod's ticks too), with compute slowed as well or not, a
    message that runs slower beside the backward pass can only delay what follows it. (The general
    engine's list schedules can finish sooner when a task is delayed, Graham's anomaly: not held.)"""
    model, cluster, run = case
    plain = dataclasses.replace(cluster, comm_slowdown=0.0)
    slowed = dataclasses.replace(cluster, comm_slowdown=kappa_c)
    pair = _both(lambda: sim.simulate(model, plain, batch_size=8, **run),
                 lambda: sim.simulate(model, slowed, batch_size=8, **run))
    assume(pair is not None)
    before, after = pair
    assert after.iteration_time_s >= before.iteration_time_s * (1 - 1e-12)
    assert after.metrics["comm_s"] >= before.metrics["comm_s"] * (1 - 1e-12)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 6)), min_size=1, max_size=10),
       st.lists(st.tuples(st.integers(0, 30), st.integers(0, 6)), max_size=12), st.booleans())
def test_task_overlap_is_the_covered_time_before_each_end_less_before_each_start(busy, tasks, repeated_start):
    """`sim.core.interference.task_overlap` (one running length, the end's interval found once) gives the
    bits of `covered_before` at each end less at each start, and of a search for the last interval begun
    before each end, on integer times that tie often (and on starts that repeat, as a union never gives)."""
    from sim.core.intervals import covered_before

    start = np.array([float(s) for s, _ in busy])
    end = start + [float(d) for _, d in busy]
    if repeated_start:
        start, end = np.repeat(start, 2), np.repeat(end, 2)
    order = np.argsort(start, kind="stable")
    b = (start[order], end[order])
    t_start = np.array([float(s) for s, _ in tasks])
    t_end = t_start + [float(d) for _, d in tasks]
    covered, at_end = interference.task_overlap(t_start, t_end, b)
    want = np.clip(covered_before(*b, t_end) - covered_before(*b, t_start), 0.0, t_end - t_start)
    at = np.searchsorted(b[0], t_end, side="left") - 1
    assert covered.tobytes() == want.tobytes()
    assert at_end.tolist() == ((at >= 0) & (t_end < b[1][np.clip(at, 0, None)])).tolist()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 20), max_size=8, unique=True), st.integers(0, 4), st.lists(st.integers(0, 25), max_size=6))
def test_key_positions_of_repeated_keys_are_those_the_search_finds(keys, repeats, others):
    """`sim.core.interference.key_positions` of the keys again and again (every iteration's messages) gives
    the positions a search gives, as for any other keys."""
    keys = np.array(sorted(keys), dtype=np.int64)

    def searched(key):
        at = np.minimum(np.searchsorted(keys, key), max(len(keys) - 1, 0))
        found = keys[at] == key if len(keys) else np.zeros(len(key), bool)
        return np.where(found, at, len(keys)).astype(np.int32)

    for key in (np.tile(keys, repeats), np.array(others, dtype=np.int64), np.concatenate([np.tile(keys, repeats), others])):
        got = interference.key_positions(keys, key)
        assert got.dtype == np.int32 and got.tolist() == searched(key).tolist()


def test_a_compute_slowdown_over_one_is_refused_for_its_stretch_has_more_than_one_root():
    """Found by hypothesis on 2026-11-25: with compute_slowdown 10 and Horovod's ticks the fast path gave
    7.8 ms and the general engine 7.3 ms, each settling on another root of a task's stretch (above 1 the
    quadratic may have several; at or below 1 it has one). Above 1 is now refused, by the API, the CLI
    and the presets file alike."""
    model = sim.Model("m", tuple(f"L{i}" for i in range(8)), np.array([0, 0, 0, 0, 1, 262144, 0, 1]), np.zeros(8),
                      np.array([0, 0, 0, 0, 1.90625e-03, 6e-03, 9.375e-05, 3.125e-05]))
    with pytest.raises(SimInputError, match=r"compute_slowdown must be <= 1 \(one root of its stretch; sim.core.cost\), got 10"):
        sim.Cluster(gpus=2, gpus_per_node=1, network="10gbe", alpha_s=0.00390625, beta_s_per_byte=0.0,
                    compute_slowdown=10.0, comm_slowdown=10.0)
    with pytest.raises(SimInputError, match=r"compute_slowdown must be <= 1 \(one root"):
        sim.core.cost.CommCost(1e-3, 0.0, compute_slowdown=1.5)
    at_one = sim.Cluster(gpus=2, gpus_per_node=1, network="10gbe", alpha_s=0.00390625, beta_s_per_byte=0.0,
                         compute_slowdown=1.0, comm_slowdown=10.0)
    run = {"scheduler": "horovod", "batch_size": 8, "options": {"cycle_time_ms": 3.0, "fusion_threshold_mb": 1.0}}
    fast, general = sim.simulate(model, at_one, **run), sim.api.simulate_dag(model, at_one, **run)
    assert fast.iteration_time_s == pytest.approx(general.iteration_time_s, rel=1e-9)


def test_the_interference_file_refuses_a_compute_slowdown_over_one(tmp_path, monkeypatch):
    """A preset row above the bound is refused with its line, not later by a run that meets it."""
    bad = tmp_path / "interference.csv"
    bad.write_text("network,compute_slowdown,comm_slowdown,source,note\n10gbe,1.2,0.1,x,\n", encoding="utf-8")
    monkeypatch.setattr(sim.interference, "INTERFERENCE_PATH", bad)
    sim.interference._interference.cache_clear()
    try:
        with pytest.raises(SimInputError, match=r"interference.csv line 2: compute_slowdown must be in \[0, 1\], got 1.2"):
            sim.interference.compute_slowdown("10gbe")
    finally:
        sim.interference._interference.cache_clear()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_interfering_runs(), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_more_compute_slowdown_never_shortens_an_iteration_on_the_fast_path(case, k1, k2):
    """With one root per task (compute_slowdown <= 1), a task stretched more ends no sooner, so every
    release and the iteration move no earlier, on the fast path's schedulers (Horovod's ticks too). (The
    general engine's list schedules can finish sooner when a task is delayed, Graham's anomaly: not held.)"""
    model, cluster, run = case
    low, high = sorted((k1, k2))
    pair = _both(lambda: sim.simulate(model, dataclasses.replace(cluster, compute_slowdown=low), batch_size=8, **run),
                 lambda: sim.simulate(model, dataclasses.replace(cluster, compute_slowdown=high), batch_size=8, **run))
    assume(pair is not None)
    before, after = pair
    assert after.iteration_time_s >= before.iteration_time_s * (1 - 1e-12)
    assert after.metrics["interference_s"] >= before.metrics["interference_s"] - 1e-12 * after.iteration_time_s


@pytest.mark.xfail(strict=True, reason="known: the general engine's rounds stop after four timings (interference."
                   "PASSES); with Horovod's ticks serving by priority and comm_slowdown on, they need more to settle "
                   "on the fast path's answer (five here)")
def test_horovods_ticks_with_both_coefficients_may_need_more_rounds_than_the_general_engine_takes():
    """Found by the hostile fuzz on 2026-11-25: 20.03 ms on the fast path, 19.83 ms on the general engine
    (1.05 %), with compute_slowdown 0.5 and comm_slowdown 2; with five rounds the general engine gives the
    fast path's 20.03 ms. More rounds for every general-engine run would double its time at 100k layers."""
    model = sim.Model("m", ("L0", "L1", "L2", "L3"), np.array([1_000_000, 1, 1_000_000, 1000]), np.zeros(4),
                      np.array([5e-3, 2e-3, 5e-3, 2e-3]))
    cluster = sim.Cluster(gpus=2, alpha_s=1e-3, beta_s_per_byte=1e-10, compute_slowdown=0.5, comm_slowdown=2.0)
    run = {"scheduler": "horovod", "batch_size": 8, "options": {"fusion_threshold_mb": 0.001, "cycle_time_ms": 3.0}}
    fast, general = sim.simulate(model, cluster, **run), sim.api.simulate_dag(model, cluster, **run)
    assert fast.iteration_time_s == pytest.approx(general.iteration_time_s, rel=1e-9)
