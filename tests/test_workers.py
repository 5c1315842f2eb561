"""The per-worker engine: exactness against `sim.simulate`, stragglers, the closed forms.

Sources of the expected values: hand-worked small cases (in comments), the
identity with `sim.simulate` when every worker is the same, and tables of
expected normal order statistics (Harter, "Expected values of normal order
statistics", Biometrika 48, 1961: E[max of 2] = 0.5642, of 10 = 1.5388, of
16 = 1.7660).
"""

import math

import numpy as np
import pytest
from helpers import make_model, user_cluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim
from sim.workers import (
    WORKER_TIMELINE_COLUMNS,
    Engine,
    StragglerSpec,
    blom_expected_max,
    expected_max_factor,
    monte_carlo,
    simulate_workers,
)

MS = 1e-3
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class TestEngine:
    def test_orders_by_time_then_priority_then_insertion(self):
        log = []
        env = Engine()
        env.at(2.0, log.append, "c")
        env.at(1.0, log.append, "a")
        env.at(2.0, log.append, "b", priority=-1)
        env.at(2.0, log.append, "d")
        env.run()
        assert log == ["a", "b", "c", "d"]
        assert env.now_s == 2.0

    def test_actions_schedule_more_actions(self):
        env, log = Engine(), []

        def tick(n):
            log.append((env.now_s, n))
            if n < 3:
                env.at(env.now_s + 0.5, tick, n + 1)

        env.at(0.0, tick, 0)
        env.run()
        assert log == [(0.0, 0), (0.5, 1), (1.0, 2), (1.5, 3)]

    def test_refuses_the_past_and_two_engines_share_nothing(self):
        a, b = Engine(), Engine()
        a.at(1.0, lambda: None)
        a.run()
        with pytest.raises(ValueError, match="before now"):
            a.at(0.5, lambda: None)
        assert b.now_s == 0.0 and b.events_run == 0


@st.composite
def models(draw):
    n = draw(st.integers(1, 7))
    params = draw(st.lists(st.integers(0, 3_000_000), min_size=n, max_size=n))
    fwd = draw(st.lists(st.floats(0.01, 5.0), min_size=n, max_size=n))
    bwd = draw(st.lists(st.floats(0.01, 10.0), min_size=n, max_size=n))
    extra = {k: draw(st.sampled_from([0.0, 0.5, 3.0])) for k in ("io_ms", "h2d_ms", "update_ms")}
    return make_model(params, fwd, bwd, **extra)


clusters = st.builds(
    user_cluster, gpus=st.sampled_from([1, 2, 4, 16]), alpha_s=st.floats(0.0, 5e-3),
    beta_s_per_byte=st.floats(1e-11, 5e-9),
)


class TestExactWithoutVariability:
    @SETTINGS
    @given(models(), clusters, st.sampled_from(sorted(set(sim.SCHEDULERS) - {"bytescheduler", "dear", "horovod"})),
           st.booleans())
    def test_reproduces_sim_simulate(self, model, cluster, scheduler, prefetch):
        """Identical workers: the iteration time and every update end match to 1e-9 relative."""
        ref = sim.simulate(model, cluster, scheduler, batch_size=4, iterations=3, prefetch=prefetch)
        res = simulate_workers(model, cluster, scheduler, batch_size=4, iterations=3, prefetch=prefetch)
        assert res.iteration_time_s == pytest.approx(ref.iteration_time_s, rel=1e-9)
        ref_updates = ref.timeline.loc[ref.timeline.kind == "update"].sort_values("iteration")["end_s"].to_numpy()
        for w in range(cluster.gpus):
            mine = res.timeline.loc[(res.timeline.kind == "update") & (res.timeline.worker == w)]
            assert mine.sort_values("iteration")["end_s"].to_numpy() == pytest.approx(ref_updates, rel=1e-9)
        assert res.metrics["straggler_slowdown"] == pytest.approx(1.0, rel=1e-9)

    def test_zoo_model_on_a_real_cluster(self):
        model = sim.load_model("resnet50")
        cluster = sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe")
        for scheduler in ("wfbp", "mgwfbp", "synceasgd"):
            ref = sim.simulate(model, cluster, scheduler, batch_size=32, iterations=2)
            res = simulate_workers(model, cluster, scheduler, batch_size=32, iterations=2)
            assert res.iteration_time_s == pytest.approx(ref.iteration_time_s, rel=1e-9)


class TestStragglers:
    def test_hand_worked_straggler_and_waits(self):
        # two layers: fwd 1+1 ms, bwd 2+2 ms, 1000 params each; one message of 8000 B
        # after backward (synceasgd): 1 ms + 8000 B * 1e-9 s/B = 1.008 ms.
        # Worker compute 6 ms; the straggler (factor 2) 12 ms. Period = 12 + 1.008 ms.
        model = make_model([1000, 1000], [1, 1], [2, 2])
        res = simulate_workers(model, user_cluster(gpus=2), "synceasgd", batch_size=8, iterations=3,
                               straggler=StragglerSpec(stragglers=1, factor=2.0), seed=0)
        assert res.iteration_time_s == pytest.approx(13.008 * MS, rel=1e-12)
        assert res.metrics["ideal_iteration_time_s"] == pytest.approx(7.008 * MS, rel=1e-12)
        slow = res.straggler_workers[0]
        fast = 1 - slow
        # the fast worker idles 6 ms for the straggler, then 1.008 ms for the all-reduce
        assert res.wait_s[1, fast] == pytest.approx(7.008 * MS, rel=1e-12)
        assert res.wait_s[1, slow] == pytest.approx(1.008 * MS, rel=1e-12)
        it1 = res.timeline.loc[(res.timeline.iteration == 1) & (res.timeline.worker == fast)]
        spans = dict(zip(it1.kind, it1.duration_s, strict=True))
        assert spans["wait"] == pytest.approx(6 * MS) and spans["comm_wait"] == pytest.approx(1.008 * MS)
        assert tuple(res.timeline.columns) == WORKER_TIMELINE_COLUMNS

    @SETTINGS
    @given(models(), st.sampled_from([2, 4, 16]), st.floats(1.0, 4.0), st.integers(1, 2))
    def test_persistent_stragglers_add_exactly_their_extra_compute(self, model, gpus, factor, k):
        """synceasgd without noise: period = ideal + (factor - 1)(F + B + U)."""
        cluster = user_cluster(gpus=gpus)
        res = simulate_workers(model, cluster, "synceasgd", batch_size=4, iterations=3,
                               straggler=StragglerSpec(stragglers=k, factor=factor))
        compute = float(model.fwd_s.sum() + model.bwd_s.sum() + model.update_s)
        expected = res.metrics["ideal_iteration_time_s"] + (factor - 1) * compute
        if model.params[0] == 0:  # the message leaves before the parameter-free first layer's backward
            assert res.iteration_time_s <= expected * (1 + 1e-9)
        else:
            assert res.iteration_time_s == pytest.approx(expected, rel=1e-9)

    def test_seed_fixes_everything(self):
        model = make_model([1000, 5000, 200], [1, 2, 1], [2, 3, 1])
        spec = StragglerSpec("lognormal", cv=0.3, stragglers=1, factor=1.5, jitter_cv=0.2)
        a = simulate_workers(model, user_cluster(gpus=8), "wfbp", batch_size=4, iterations=10, straggler=spec, seed=3)
        b = simulate_workers(model, user_cluster(gpus=8), "wfbp", batch_size=4, iterations=10, straggler=spec, seed=3)
        c = simulate_workers(model, user_cluster(gpus=8), "wfbp", batch_size=4, iterations=10, straggler=spec, seed=4)
        assert a.timeline.equals(b.timeline) and a.metrics == b.metrics
        assert not np.array_equal(a.iteration_times_s, c.iteration_times_s)

    @pytest.mark.parametrize("dist", ["normal", "lognormal", "exponential"])
    @pytest.mark.parametrize("seed", [0, 1, 5])
    def test_one_gpu_is_its_own_reference(self, dist, seed):
        """On one GPU the drawn factors' sample mean is not 1 (a lognormal's, over 100 draws, is below 1 more
        often than not): the run is its own one-GPU reference, speedup and efficiency exactly 1, while the
        slowdown against the ideal (no variability) run still reports the draws."""
        model = make_model([1000, 5000, 200], [1, 2, 1], [2, 3, 1])
        spec = StragglerSpec(dist, cv=0.3)
        res = simulate_workers(model, user_cluster(gpus=1), "wfbp", batch_size=4, iterations=100, straggler=spec,
                               seed=seed)
        m = res.metrics
        assert m["speedup"] == 1.0 and m["scaling_efficiency"] == 1.0
        assert m["single_gpu_iteration_time_s"] == m["iteration_time_s"]
        assert m["straggler_slowdown"] == pytest.approx(m["iteration_time_s"] / m["ideal_iteration_time_s"])
        assert m["straggler_slowdown"] != 1.0

    def test_no_run_beats_one_gpu_with_the_same_draws(self):
        """P GPUs against one GPU of worker 0's type computing with worker 0's draws: the sample mean of the
        draws (below 1 for a lognormal more often than not) and GPUs faster than cluster.gpu gave 1.05-1.31 and
        4.2 against the ideal one-GPU iteration of cluster.gpu."""
        model = make_model([4_000_000, 1_000_000, 2_000_000], [1.0, 1.0, 2.0], [2.0, 2.0, 3.0], update_ms=1.0)
        spec = StragglerSpec("lognormal", cv=0.5)
        for seed in range(30):
            res = simulate_workers(model, user_cluster(gpus=2), "wfbp", batch_size=4, iterations=3, straggler=spec,
                                   seed=seed)
            assert res.metrics["scaling_efficiency"] <= 1 + 1e-12, seed
        zoo = sim.load_model("resnet50")
        fast = simulate_workers(zoo, sim.Cluster(gpus=2, gpus_per_node=2, intra="nvlink3", gpu="v100-sxm2"), "wfbp",
                                batch_size=32, gpus_by_worker=["h100", "h100"], iterations=5)
        assert 0.9 < fast.metrics["scaling_efficiency"] <= 1 + 1e-12
        alone = simulate_workers(zoo, sim.Cluster(gpus=1, gpu="v100-sxm2"), "wfbp", batch_size=32,
                                 gpus_by_worker=["h100"], iterations=5)
        assert fast.metrics["single_gpu_iteration_time_s"] == pytest.approx(alone.iteration_time_s, rel=1e-12)

    def test_a_per_layer_plans_wait_is_its_idle_time(self):
        """ByteScheduler's updates run among its messages and its next forward pass among them: the wait before
        its step's end was that span less its updates, so it counted the forward pass (0.281 s against 0.247 s
        of exposed communication on resnet50, 2 GPUs). The idle time on the worker's compute lane is it."""
        model = make_model([4_000_000, 1_000_000, 2_000_000], [1.0, 1.0, 2.0], [2.0, 2.0, 3.0], update_ms=1.0)
        cluster = sim.Cluster(gpus=2, gpus_per_node=1, alpha_s=5e-3, beta_s_per_byte=5e-9)
        res = simulate_workers(model, cluster, "bytescheduler", batch_size=4, iterations=4,
                               straggler=StragglerSpec("constant", stragglers=1, factor=1.5), seed=1)
        tl = res.timeline
        for k in range(1, 4):
            for w in range(2):
                mine = tl[(tl.worker == w) & (tl.lane == "compute")]
                back_end = mine[(mine.iteration == k) & (mine.kind == "backward")].end_s.max()
                step_end = mine[(mine.iteration == k) & (mine.kind == "update")].end_s.max()
                inside = (np.minimum(mine.end_s, step_end) - np.maximum(mine.start_s, back_end)).clip(lower=0).sum()
                assert res.wait_s[k, w] == pytest.approx(step_end - back_end - inside, abs=1e-12), (k, w)

    def test_a_mixed_cluster_runs_at_its_slowest_gpu(self):
        """One V100 and one K80 with one message after backward: the K80 sets every step,
        so the mix equals a cluster of two K80s (same plan, same network)."""
        model = sim.load_model("resnet50")
        # framework "nccl": no fusion-buffer copies, which are timed at the cluster's GPU (its memory bandwidth)
        mixed = simulate_workers(model, sim.Cluster(gpus=2, gpu="v100-sxm2", framework="nccl"), "synceasgd",
                                 batch_size=32, iterations=3, gpus_by_worker=["v100-sxm2", "k80"])
        k80 = sim.simulate(model, sim.Cluster(gpus=2, gpu="k80", framework="nccl"), "synceasgd", batch_size=32,
                           iterations=2)
        assert mixed.iteration_time_s == pytest.approx(k80.iteration_time_s, rel=1e-9)
        assert mixed.gpus_by_worker == ("v100-sxm2", "k80")

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            (dict(straggler=StragglerSpec(stragglers=5)), "stragglers = 5 exceeds"),
            (dict(gpus_by_worker=["k80"]), "gpus_by_worker names 1"),
            (dict(gpus_by_worker=["k80", "nope", "k80", "k80"]), "unknown gpu"),
            (dict(iterations=1), "iterations"),
            (dict(seed=-1), "seed"),
            (dict(batch_size=0), "batch_size"),
        ],
    )
    def test_bad_input(self, kwargs, match):
        args = dict(batch_size=4, iterations=2)
        args.update(kwargs)
        with pytest.raises(sim.SimInputError, match=match):
            simulate_workers(sim.load_model("resnet50"), sim.Cluster(gpus=4), "wfbp", **args)

    def test_csv_models_cannot_mix_gpu_types(self):
        with pytest.raises(sim.SimInputError, match="zoo model"):
            simulate_workers(make_model([10], [1], [1]), sim.Cluster(gpus=2), batch_size=4,
                             gpus_by_worker=["k80", "v100-sxm2"])

    @pytest.mark.parametrize(
        ("kwargs", "match"),
        [
            (dict(dist="gamma"), "unknown dist"),
            (dict(dist="normal", cv=-0.1), "cv"),
            (dict(dist="exponential", cv=1.5), "cv must be <= 1"),
            (dict(dist="constant", cv=0.2), "cv applies"),
            (dict(dist="empirical"), "samples"),
            (dict(dist="empirical", samples=(1.0, -2.0)), "samples"),
            (dict(stragglers=1, factor=0.5), "factor"),
            (dict(jitter_cv=math.nan), "jitter_cv"),
        ],
    )
    def test_spec_validation(self, kwargs, match):
        with pytest.raises(sim.SimInputError, match=match):
            StragglerSpec(**kwargs)


class TestClosedForms:
    @pytest.mark.parametrize(("p", "table"), [(2, 0.5642), (10, 1.5388), (16, 1.7660)])
    def test_blom_against_harter_tables(self, p, table):
        """Blom overshoots by 0.025 at P = 2 and by less as P grows (0.003 at 16)."""
        assert blom_expected_max(p) == pytest.approx(table, abs=0.03)
        assert blom_expected_max(1) == 0.0

    def test_exponential_and_empirical_are_exact(self):
        # exponential: 1 - cv + cv H_3, H_3 = 11/6
        assert expected_max_factor(StragglerSpec("exponential", cv=0.5), 3) == pytest.approx(0.5 + 0.5 * 11 / 6)
        # samples {1, 3} normalised to {0.5, 1.5}: max of 2 draws is 1.5 unless both are 0.5 (prob 1/4)
        assert expected_max_factor(StragglerSpec("empirical", samples=(1.0, 3.0)), 2) == pytest.approx(1.25)
        assert math.isnan(expected_max_factor(StragglerSpec("lognormal", cv=0.1), 4))

    @pytest.mark.parametrize(
        ("spec", "extra_tol"),
        [
            (StragglerSpec("normal", cv=0.1), 0.03 * 0.1),  # Blom's error < 0.03 sigma
            (StragglerSpec("exponential", cv=0.2), 0.0),
            (StragglerSpec("empirical", samples=(0.9, 1.0, 1.1, 1.5)), 0.0),
            (StragglerSpec("normal", cv=0.1, jitter_cv=0.3), 0.03 * 0.1),  # jitter keeps the mean
        ],
    )
    def test_monte_carlo_agrees_with_the_closed_form(self, spec, extra_tol):
        """Mean period within 4 standard errors (+ Blom's bias) of t_ideal + (F+B)(E[max f] - 1)."""
        model = make_model([1000, 1000], [1, 1], [2, 2], io_ms=0.5, update_ms=0.5)
        df = monte_carlo(model, user_cluster(gpus=1), "synceasgd", batch_size=4, straggler=spec,
                         workers=[1, 4, 16], iterations=1500, seed=1)
        fb = 6 * MS
        for row in df.itertuples():
            assert abs(row.mean_s - row.closed_form_s) <= 4 * row.sem_s + extra_tol * fb, row
        assert df.slowdown.is_monotonic_increasing

    def test_no_closed_form_where_communication_overlaps(self):
        df = monte_carlo(make_model([1000, 1000], [1, 1], [2, 2]), user_cluster(), "wfbp", batch_size=4,
                         straggler=StragglerSpec("normal", cv=0.1), workers=[2], iterations=20)
        assert math.isnan(df.closed_form_s.iloc[0])


class TestCommandLine:
    """``run`` and ``sweep`` with --straggler-* flags use the per-worker engine."""

    @staticmethod
    def cli(*argv):
        import io

        from sim.cli import main

        out, err = io.StringIO(), io.StringIO()
        return main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()

    def test_run_adds_percentiles_and_keeps_every_plain_key(self):
        import json

        base = ("run", "--model", "tests/data/tiny.csv", "--gpus", "4", "--scheduler", "synceasgd", "--format", "json")
        code, out, _ = self.cli(*base)
        plain = json.loads(out)
        assert set(plain) == set(sim.METRIC_KEYS) | set(sim.api.RESOURCE_KEYS)  # no straggler flag: the plain output, unchanged
        code, out, _ = self.cli(*base, "--stragglers", "1", "--straggler-factor", "2", "--seed", "3")
        slow = json.loads(out)
        assert code == 0 and set(sim.METRIC_KEYS) <= set(slow)
        assert slow["iteration_p50_s"] <= slow["iteration_p99_s"]
        assert slow["iteration_time_s"] > plain["iteration_time_s"] and slow["straggler_slowdown"] > 1
        assert slow["ideal_iteration_time_s"] == pytest.approx(plain["iteration_time_s"], rel=1e-9)

    def test_one_gpu_with_straggler_flags_is_its_own_reference(self):
        """The CLI took the plain run's ideal one-GPU iteration: efficiency 1.13 on one GPU (seed 5)."""
        import json

        code, out, _ = self.cli("run", "--model", "resnet50", "--gpus", "1", "--straggler-dist", "lognormal",
                                "--straggler-cv", "0.5", "--seed", "5", "--format", "json")
        got = json.loads(out)
        assert code == 0 and got["scaling_efficiency"] == 1.0 and got["speedup"] == 1.0
        assert got["single_gpu_iteration_time_s"] == got["iteration_time_s"]

    def test_sweep_adds_columns(self):
        code, out, _ = self.cli("sweep", "--model", "tests/data/tiny.csv", "--gpus", "2,4", "--scheduler", "wfbp",
                                "--straggler-dist", "lognormal", "--straggler-cv", "0.2", "--format", "csv")
        assert code == 0
        header = out.splitlines()[0].split(",")
        assert "iteration_p50_s" in header and "iteration_p99_s" in header and len(out.splitlines()) == 3

    @pytest.mark.parametrize(
        ("argv", "flag"),
        [
            (["--straggler-cv", "0.2"], "--straggler-cv"),
            (["--straggler-dist", "normal"], "--straggler-dist"),
            (["--stragglers", "5"], "--stragglers"),
            (["--straggler-factor", "3"], "--straggler-factor"),
            (["--stragglers", "1", "--straggler-factor", "0.5"], "--straggler-factor"),
            (["--straggler-dist", "exponential", "--straggler-cv", "1.5"], "--straggler-cv"),
            (["--seed", "-2"], "--seed"),
        ],
    )
    def test_bad_flags(self, argv, flag):
        code, out, err = self.cli("run", "--model", "tests/data/tiny.csv", "--gpus", "4", *argv)
        assert code == 2 and out == "" and flag in err and err.startswith("error: ")


@pytest.mark.parametrize("scheduler", sorted(sim.SCHEDULERS))
@pytest.mark.parametrize("cluster_kw", [dict(gpus=16, gpus_per_node=4, network="10gbe"),
                                        dict(gpus=32, gpus_per_node=8, intra="nvlink2", topology="dgx1-4nic",
                                             network="ib-edr-100")])
def test_one_row_times_identical_workers_as_every_row_does(scheduler, cluster_kw):
    """`ideal_iteration_s` times identical workers on all-reduce with one row (8,192 rows took 0.9 GB):
    every worker's step ends alike, so the first row's ends are every row's, to the bit."""
    from sim.workers.engine import run_sync
    from sim.workers.stragglers import StragglerSpec

    cluster = sim.Cluster(**cluster_kw)
    common = dict(batch_size=32, spec=StragglerSpec(), iterations=5, seed=0, prefetch=True)
    every = run_sync(sim.load_model("resnet50"), cluster, scheduler, **common)
    one = run_sync(sim.load_model("resnet50"), cluster, scheduler, rows=1, **common)
    assert every.update_end_s.shape == (5, cluster.gpus) and one.update_end_s.shape == (5, 1)
    assert np.array_equal(every.update_end_s.max(axis=1), one.update_end_s[:, 0])
    assert np.array_equal(every.update_end_s, np.repeat(one.update_end_s, cluster.gpus, axis=1))
