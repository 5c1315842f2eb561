"""Regressions found by fuzzing the timing engine's invariants (hostile review).

* A per-worker run's timeline was bounded only by the per-worker cell budget (16 x the task budget): the
  fast path timed 8,192 workers x 24 iterations of ResNet-50 in 2 s, and reading ``timeline`` (64 million
  rows) passed 24 GB. The timeline now keeps to the task budget, a row per task, as the README's limits say.
* A plan that updates per layer (ByteScheduler, DeAR): the last iteration has no next forward pass, so its
  updates run early and its period is short (up to 46 %). The aggregate run leaves it out of the steady state;
  the per-worker engine did not: `monte_carlo` reported a slowdown of 1.02-1.12 with nothing varying (its
  ideal was that period of a two-iteration run), identical workers run for two iterations missed the
  aggregate iteration, and mixed GPUs came out faster than one GPU of worker 0's type (efficiency 1.0008
  over 20 iterations).
"""

from __future__ import annotations

import dataclasses

import pytest
from helpers import make_model

import sim
import sim.core.run as core_run
from sim.workers import StragglerSpec, simulate_workers
from sim.workers.montecarlo import monte_carlo


def _comm_bound_model():
    """Two large layers, an update and a batch to read: the last iteration's updates run early."""
    return make_model([4_000_000, 4_000_000], [100.0, 100.0], [10.0, 10.0], update_ms=5.0, io_ms=3.0, h2d_ms=0.5)


def _slow_cluster(gpus=2):
    return sim.Cluster(gpus=gpus, gpus_per_node=1, network="ib-edr-100", network_gbps=1.0, interference=False,
                       sync_jitter_cv=0.0)


def test_a_per_worker_timeline_keeps_to_the_task_budget(monkeypatch):
    monkeypatch.setattr(core_run, "MAX_TASKS", 5_000)
    model = make_model([1000] * 50, [1.0] * 50, [2.0] * 50)
    cluster = sim.Cluster(gpus=4, gpus_per_node=1)
    res = simulate_workers(model, cluster, "wfbp", batch_size=4, iterations=30)  # within the cell budget
    with pytest.raises(sim.SimInputError, match="timeline_iterations"):
        res.timeline  # noqa: B018 (4 x 30 x 103 + 30 x 50 = 13,860 rows)
    shown = simulate_workers(model, cluster, "wfbp", batch_size=4, iterations=30, timeline_iterations=10)
    assert int(shown.timeline.iteration.max()) == 9


@pytest.mark.parametrize("gbps", [1.0, 5.0])
def test_monte_carlo_without_noise_has_no_slowdown(gbps):
    """Nothing varies: the mean period is the ideal one (the ideal was 2 % and 35 % short)."""
    cluster = dataclasses.replace(_slow_cluster(), network_gbps=gbps)
    frame = monte_carlo(_comm_bound_model(), cluster, "bytescheduler", batch_size=32, straggler=StragglerSpec(),
                        workers=(2,), iterations=10)
    aggregate = sim.simulate(_comm_bound_model(), cluster, "bytescheduler", batch_size=32).iteration_time_s
    assert frame.ideal_s[0] == pytest.approx(aggregate, rel=1e-9)
    assert frame.slowdown[0] == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("gbps", [1.0, 5.0])
def test_identical_workers_of_two_iterations_run_the_aggregate_steady_state(gbps):
    """Two iterations time one period, the last one's (2 % and 35 % short): the steady state comes from a run of
    as many iterations as the aggregate run times."""
    model, cluster = _comm_bound_model(), dataclasses.replace(_slow_cluster(), network_gbps=gbps)
    aggregate = sim.simulate(model, cluster, "bytescheduler", batch_size=32).iteration_time_s
    res = simulate_workers(model, cluster, "bytescheduler", batch_size=32, iterations=2)
    assert res.iteration_time_s == pytest.approx(aggregate, rel=1e-9)
    assert res.metrics["ideal_iteration_time_s"] == pytest.approx(aggregate, rel=1e-9)
    assert res.metrics["straggler_slowdown"] == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("iterations", [3, 5, 20])
def test_mixed_gpus_are_never_faster_than_one_gpu_of_worker_0s_type(iterations):
    cluster = sim.Cluster(gpus=2, gpus_per_node=1, network="10gbe", interference=False)
    res = simulate_workers(sim.load_model("googlenet"), cluster, method="ByteScheduler-PS", batch_size=16,
                           iterations=iterations, gpus_by_worker=["k80", "t4"], prefetch=True)
    assert 0 < res.metrics["scaling_efficiency"] <= 1 + 1e-12
    assert res.metrics["speedup"] <= cluster.gpus * (1 + 1e-12)
    assert len(res.iteration_times_s) == iterations - 2  # the last iteration's period is left out
