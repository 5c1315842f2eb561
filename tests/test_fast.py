"""The fast path (`sim.fast`) against the reference: the DAG timed by the engine.

`sim.simulate` times the iteration from arrays; `sim.api.simulate_dag` builds
every task and runs the discrete-event engine. They must agree on every metric
(to 1e-9 relative; in fact to the bit) and on the timeline, for random models
with parameter-free layers, io/h2d/update times, prefetch on and off, every
scheduler, one and many GPUs, and 1 to 3 iterations.
"""

import dataclasses
import pickle

import numpy as np
import pandas as pd
import pytest
from helpers import make_model, user_cluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_optimal import reference_plan

import sim
from sim import fast
from sim.api import simulate_dag
from sim.comm import NO_COMM, CommCost
from sim.core import engine
from sim.core.lower import lower
from sim.core.metrics import graph_figures
from sim.core.plan import NO_GRADIENTS, gradient_layers
from sim.core.timeline import graph_timeline
from sim.model import BYTES_PER_PARAM
from sim.schedulers import GradientLayers, Plan, _plan, optimal


def _reference(model, plan, cost, iterations, prefetch):
    """The general engine's timeline, iteration time and phase figures (the fast path's check)."""
    graph = lower(model, plan, cost, iterations=iterations, prefetch=prefetch)
    start, end = engine.run(graph)
    t_iter, phases = graph_figures(graph, start, end, plan.per_layer_update)
    return graph_timeline(graph, start, end), t_iter, phases


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MS = 1e-3


@st.composite
def models(draw, max_layers=10):
    """Random layer tables: some layers without parameters, some with zero times."""
    n = draw(st.integers(1, max_layers))
    params = draw(st.lists(st.one_of(st.just(0), st.integers(1, 4_000_000)), min_size=n, max_size=n))
    time_ms = st.one_of(st.just(0.0), st.floats(0.001, 10.0))
    fwd = draw(st.lists(time_ms, min_size=n, max_size=n))
    bwd = draw(st.lists(time_ms, min_size=n, max_size=n))
    extra = {k: draw(st.one_of(st.just(0.0), st.floats(0.01, 20.0))) for k in ("io_ms", "h2d_ms", "update_ms")}
    return make_model(params, fwd, bwd, **extra)


clusters = st.one_of(
    st.builds(user_cluster, gpus=st.sampled_from([1, 2, 4, 16]), alpha_s=st.one_of(st.just(0.0), st.floats(1e-6, 5e-3)),
              beta_s_per_byte=st.one_of(st.just(0.0), st.floats(1e-12, 5e-9))),
    st.builds(sim.Cluster, gpus=st.sampled_from([1, 2, 8, 32]), gpus_per_node=st.sampled_from([1, 2]),
              network=st.sampled_from(["10gbe", "100gbe"]), collective=st.sampled_from(sorted(sim.COLLECTIVES))),
)
#: Schedulers whose plans the fast path times (the others go to the general engine
#: in `simulate` too, so comparing them with `simulate_dag` would compare the engine with itself).
FAST_SCHEDULERS = sorted(s for s in sim.SCHEDULERS
                         if sim.schedulers.make_plan(s, NO_GRADIENTS, NO_COMM).is_plain)
runs = st.fixed_dictionaries({
    "scheduler": st.sampled_from(FAST_SCHEDULERS),
    "iterations": st.integers(1, 3),
    "prefetch": st.booleans(),
    "bucket_mb": st.sampled_from([0.5, 4.0, 25.0]),
    "precision": st.sampled_from(sorted(BYTES_PER_PARAM)),
})


def both(model, cluster, run):
    """(fast result, reference result), or None when both reject the input alike."""
    results = []
    for method in (sim.simulate, simulate_dag):
        try:
            results.append(method(model, cluster, batch_size=8, **run))
        except sim.SimInputError as exc:
            results.append(str(exc))
    fast_res, ref = results
    if isinstance(fast_res, str) or isinstance(ref, str):
        assert fast_res == ref  # the same one-line error from both
        return None
    return fast_res, ref


class TestAgainstTheEngine:
    @SETTINGS
    @given(models(), clusters, runs)
    def test_every_metric_within_1e9(self, model, cluster, run):
        pair = both(model, cluster, run)
        if pair is None:
            return
        fast_res, ref = pair
        assert set(fast_res.metrics) == set(ref.metrics) == set(sim.METRIC_KEYS) | set(sim.api.RESOURCE_KEYS)
        for key in sim.METRIC_KEYS:
            got, want = fast_res.metrics[key], ref.metrics[key]
            if isinstance(want, float):
                assert got == pytest.approx(want, rel=1e-9, abs=0), key
            else:
                assert got == want, key
        assert fast_res.iteration_time_s == pytest.approx(ref.iteration_time_s, rel=1e-9, abs=0)
        assert fast_res.groups == ref.groups
        assert fast_res.plan == ref.plan

    @SETTINGS
    @given(models(), clusters.map(lambda c: dataclasses.replace(c, comm_slowdown=0.0)), runs)
    def test_timeline_is_the_engines_to_the_bit(self, model, cluster, run):
        """The same recurrences in the same order: the same bits. Without communication slowed by
        compute: the fast path ends a slowed message by a closed form (`sim.core.channel.slowed_end`),
        the general engine by rounds that reach it to rounding, held to 1e-9 over every coefficient
        by `tests/test_interference.py::test_fast_path_and_general_engine_agree_under_interference`."""
        pair = both(model, cluster, run)
        if pair is None:
            return
        fast_res, ref = pair
        pd.testing.assert_frame_equal(fast_res.timeline, ref.timeline, check_exact=True)
        assert fast_res.iteration_time_s == ref.iteration_time_s
        for key in ("comm_s", "comm_hidden_s", "comm_exposed_s"):
            assert fast_res.metrics[key] == ref.metrics[key], key

    @SETTINGS
    @given(models(max_layers=12), st.data())
    def test_any_grouping_in_ready_order(self, model, data):
        """Random plans, not only the schedulers': consecutive runs of the
        gradient layers, sent in ready order, held until backward ends or not."""
        grads = gradient_layers(model, "fp32")
        n = grads.n
        cuts = data.draw(st.lists(st.booleans(), min_size=max(n - 1, 0), max_size=max(n - 1, 0)))
        spans, hi = [], n - 1
        for pos in range(n - 1, 0, -1):
            if cuts[pos - 1]:
                spans.append((hi, pos))
                hi = pos - 1
        if n:
            spans.append((hi, 0))
        plan = _plan("random", grads, spans, after_backward=data.draw(st.booleans()))
        assert fast.supports(plan, model.num_layers)
        cost = CommCost(data.draw(st.floats(0, 2e-3)), data.draw(st.floats(0, 3e-9)))
        prefetch = data.draw(st.booleans())
        iterations = data.draw(st.integers(1, 3))
        run = fast.evaluate(model, plan, cost, iterations=iterations, prefetch=prefetch)
        ref, ref_t, ref_phases = _reference(model, plan, cost, iterations, prefetch)
        pd.testing.assert_frame_equal(run.timeline(), ref, check_exact=True)
        assert float(run.iteration_time_s[0]) == ref_t
        phases = {k: float(v[0]) for k, v in run.phase_metrics().items()}
        for key, want in ref_phases.items():
            assert phases[key] == pytest.approx(want, rel=1e-9, abs=0), key


class TestLags:
    """A plan's ``lag_s`` holds each message back after its gradients are ready
    (Horovod's ticks); lags may release messages out of plan order."""

    @SETTINGS
    @given(models(max_layers=10), st.data())
    def test_random_lags_even_out_of_order(self, model, data):
        grads = gradient_layers(model, "fp32")
        plan = sim.schedulers.make_plan(data.draw(st.sampled_from(["wfbp", "sequential", "bucket"])), grads,
                                        CommCost(1e-4, 1e-9), bucket_mb=1.0)
        lag_s = st.one_of(st.just(0.0), st.floats(0, 10 * MS))
        plan = dataclasses.replace(plan, lag_s=tuple(data.draw(lag_s) for _ in plan.groups))
        assert fast.supports(plan, model.num_layers)
        cost = CommCost(data.draw(st.floats(0, 2e-3)), data.draw(st.floats(0, 3e-9)))
        prefetch = data.draw(st.booleans())
        run = fast.evaluate(model, plan, [cost, CommCost(0.0, 0.0)], iterations=3, prefetch=prefetch)
        for row, row_cost in enumerate((cost, CommCost(0.0, 0.0))):
            ref, ref_t, ref_phases = _reference(model, plan, row_cost, 3, prefetch)
            pd.testing.assert_frame_equal(run.timeline(row), ref, check_exact=True)
            assert float(run.iteration_time_s[row]) == ref_t
            phases = {k: float(v[row]) for k, v in run.phase_metrics().items()}
            for key, want in ref_phases.items():
                assert phases[key] == pytest.approx(want, rel=1e-9, abs=0), key

    def test_a_lagged_first_message_goes_second(self):
        # L1 ready at 4 ms but held 5 ms; L0 ready at 6 ms goes first, then L1 at 9 ms
        model = make_model([1000, 1000], [1, 1], [2, 2])
        plan = Plan("wfbp", ((1,), (0,)), lag_s=(5 * MS, 0.0))
        run = fast.evaluate(model, plan, CommCost(1 * MS, 0.0), iterations=2)
        assert run.comm_start_s[0, 0].tolist() == pytest.approx([9 * MS, 6 * MS])
        assert run.update_start_s[0, 0] == pytest.approx(10 * MS)

    @SETTINGS
    @given(models(max_layers=12), st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([0.0, 4.0, 64.0]))
    def test_horovod_ticks(self, model, cycle_ms, threshold_mb):
        """Messages cut at one tick are released at that tick up to rounding; the engine
        serves whichever rounds earlier, and so must the fast path."""
        cluster = user_cluster(gpus=4, alpha_s=1e-4, beta_s_per_byte=1e-9)
        options = {"cycle_time_ms": cycle_ms, "fusion_threshold_mb": threshold_mb}
        pair = both(model, cluster, {"scheduler": "horovod", "iterations": 2, "options": options})
        if pair is None:
            return
        pd.testing.assert_frame_equal(pair[0].timeline, pair[1].timeline, check_exact=True)
        for key in sim.METRIC_KEYS:
            got, want = pair[0].metrics[key], pair[1].metrics[key]
            assert got == (pytest.approx(want, rel=1e-9, abs=0) if isinstance(want, float) else want), key


class TestVectorisedRows:
    @SETTINGS
    @given(models(), st.lists(st.tuples(st.floats(0, 5e-3), st.floats(0, 5e-9)), min_size=1, max_size=12),
           st.booleans(), st.sampled_from(["wfbp", "sequential", "synceasgd", "bucket"]))
    def test_each_row_equals_its_own_run(self, model, costs, prefetch, scheduler):
        """K costs in one pass give, row by row, what K separate passes give, to the bit."""
        grads = gradient_layers(model, "fp32")
        plan = sim.schedulers.make_plan(scheduler, grads, CommCost(*costs[0]), bucket_mb=1.0)
        together = fast.evaluate(model, plan, [CommCost(a, b) for a, b in costs], prefetch=prefetch)
        phases = together.phase_metrics()
        for row, (a, b) in enumerate(costs):
            alone = fast.evaluate(model, plan, CommCost(a, b), prefetch=prefetch)
            assert together.iteration_time_s[row] == alone.iteration_time_s[0]
            for key, values in alone.phase_metrics().items():
                assert phases[key][row] == values[0], key
            pd.testing.assert_frame_equal(together.timeline(row), alone.timeline(), check_exact=True)


@dataclasses.dataclass(frozen=True)
class SteppedCost(CommCost):
    """A cost that is not affine: every started MiB costs ``alpha_s`` more."""

    def time_s(self, nbytes):
        nbytes = np.asarray(nbytes, dtype=float)
        return self.alpha_s * (1 + np.ceil(nbytes / 2**20)) + self.beta_s_per_byte * nbytes


PLAIN_SCHEDULERS = FAST_SCHEDULERS


class TestOtherCostModels:
    @SETTINGS
    @given(models(), st.floats(0, 2e-3), st.floats(0, 3e-9), st.sampled_from(PLAIN_SCHEDULERS), st.booleans())
    def test_message_times_come_from_the_cost_model(self, model, alpha_s, beta, scheduler, prefetch):
        """A cost model other than alpha-beta is asked message by message, as the DAG asks it."""
        cost = SteppedCost(alpha_s, beta)
        plan = sim.schedulers.make_plan(scheduler, gradient_layers(model, "fp32"), cost, bucket_mb=1.0)
        run = fast.evaluate(model, plan, [CommCost(alpha_s, beta), cost], iterations=2, prefetch=prefetch)
        ref = _reference(model, plan, cost, 2, prefetch)[0]
        pd.testing.assert_frame_equal(run.timeline(row=1), ref, check_exact=True)
        plain = _reference(model, plan, CommCost(alpha_s, beta), 2, prefetch)[0]
        pd.testing.assert_frame_equal(run.timeline(row=0), plain, check_exact=True)


class TestHandWorked:
    def test_wfbp_two_layers(self):
        # fwd 1+1, bwd 2 (L1) then 2 (L0); L1's 1000 params = 4000 bytes: t_c = 1 ms + 4000 * 1e-6 ms
        model = make_model([1000, 1000], [1, 1], [2, 2])
        run = fast.evaluate(model, Plan("wfbp", ((1,), (0,))), CommCost(1e-3, 1e-9), iterations=2)
        t_c = 1e-3 + 4000 * 1e-9
        # L1 ready at 4 ms, sent 4 .. 4+t_c; L0 ready at 6 ms, sent 6 .. 6+t_c; update 6+t_c (0 long)
        assert run.comm_start_s[0, 0].tolist() == pytest.approx([4 * MS, 6 * MS])
        assert run.comm_end_s[0, 0].tolist() == pytest.approx([4 * MS + t_c, 6 * MS + t_c])
        assert run.iteration_time_s[0] == pytest.approx(6 * MS + t_c)
        phases = run.phase_metrics()
        # the first message hides behind L0's backward, the last is exposed
        assert phases["comm_hidden_s"][0] == pytest.approx(t_c)
        assert phases["comm_exposed_s"][0] == pytest.approx(t_c)

    def test_prefetch_overlaps_the_loader(self):
        # io 2 + h2d 1 ahead of 7 ms of compute: the period is the compute
        model = make_model([1000, 1000], [1, 1], [2, 2], io_ms=2, h2d_ms=1, update_ms=1)
        assert fast.evaluate(model, Plan("wfbp", ()), NO_COMM, iterations=3, prefetch=True).iteration_time_s[0] == \
            pytest.approx(7 * MS)
        assert fast.single_gpu_iteration_s(model) == pytest.approx(10 * MS)

    def test_supports_only_plans_the_channel_serves_in_order(self):
        assert fast.supports(Plan("x", ((2, 1), (0,))), 3)
        assert not fast.supports(Plan("x", ((0,), (2, 1))), 3)  # out of ready order
        assert fast.supports(Plan("x", ((0,), (2, 1)), after_backward=True), 3)  # all released at once
        assert not fast.supports(Plan("x", ((2,), (2, 1))), 3)  # a layer sent twice
        assert not fast.supports(Plan("x", ((2,), ())), 3)  # an empty message
        assert not fast.supports(Plan("x", ((3,),)), 3)  # no such layer


class TestLazyTimeline:
    def test_fields_unchanged_and_timeline_built_on_access(self):
        assert [f.name for f in dataclasses.fields(sim.SimResult)] == [
            "iteration_time_s", "metrics", "timeline", "groups", "plan", "model", "cluster",
            "iteration_times_s", "wait_s", "straggler_workers", "gpus_by_worker", "timeline_of"]  # (added last)
        res = sim.simulate(make_model([1000, 2000], [1, 1], [2, 2]), user_cluster(), "mgwfbp", batch_size=8)
        first = res.timeline
        assert isinstance(first, pd.DataFrame) and res.timeline is first
        with pytest.raises(dataclasses.FrozenInstanceError):
            res.timeline = first

    def test_pickles_before_and_after_access(self):
        res = sim.simulate(make_model([1000, 2000], [1, 1], [2, 2]), user_cluster(), "wfbp", batch_size=8, iterations=2)
        cold = pickle.loads(pickle.dumps(res))
        pd.testing.assert_frame_equal(cold.timeline, res.timeline, check_exact=True)
        warm = pickle.loads(pickle.dumps(res))
        pd.testing.assert_frame_equal(warm.timeline, res.timeline, check_exact=True)
        assert cold.metrics == res.metrics

    def test_a_given_frame_is_kept(self):
        frame = pd.DataFrame({"a": [1]})
        res = sim.SimResult(1.0, {}, frame, [], Plan("wfbp", ()), None, None)
        assert res.timeline is frame


def optimal_quadratic(grads: GradientLayers, cost: CommCost) -> Plan:
    """The DP over every j, in exact arithmetic (ties in real numbers go to the largest j)."""
    return reference_plan(grads, cost)


class TestOptimal:
    @settings(max_examples=200, deadline=None)
    @given(st.integers(1, 200), st.integers(0, 2**32 - 1), st.floats(0, 5e-2), st.floats(0, 1e-8), st.booleans())
    def test_same_plan_as_the_full_quadratic_search(self, n, seed, alpha_s, beta, zeros):
        rng = np.random.default_rng(seed)
        bwd = rng.uniform(1e-5, 2e-3, n) * (rng.random(n) >= (0.5 if zeros else 0.0))
        grads = GradientLayers(np.arange(n), np.cumsum(bwd[::-1])[::-1], rng.integers(1, 10_000_000, n) * 4)
        cost = CommCost(alpha_s, beta)
        assert optimal(grads, cost) == optimal_quadratic(grads, cost)

    def test_ready_times_out_of_order_still_searched_fully(self):
        grads = GradientLayers(np.arange(4), np.array([1.0, 3.0, 2.0, 0.5]), np.array([8, 8, 8, 8]))
        cost = CommCost(0.1, 0.01)
        assert optimal(grads, cost) == optimal_quadratic(grads, cost)
