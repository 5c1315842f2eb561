"""A per-worker run that keeps the task times of its first iterations only (``timeline_iterations``).

Its per-layer arrays then grow with the iterations shown, not with those run (4,096 workers x 40
iterations of resnet50: 555 MiB peak before, 199 MiB after, `python bench/scale.py --only workers`
style run, 2026-11-26). What it computes must not change: every figure, and the timeline of the
kept iterations, equal the run that keeps everything, to the bit, for every scheduler and method;
a timeline past the kept iterations is refused in one line.
"""

import numpy as np
import pandas as pd
import pytest
from helpers import make_model as layers_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim
from sim.core import fast
from sim.core.cost import NO_COMM
from sim.core.plan import Plan
from sim.methods import METHODS
from sim.workers import StragglerSpec, run_sync, simulate_workers

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = [("scheduler", s) for s in sim.SCHEDULERS] + [("method", m) for m in METHODS]
SPEC = StragglerSpec(dist="normal", cv=0.2, stragglers=1, factor=1.5, jitter_cv=0.05)


def make_model(n, seed):
    """n layers: 0.1-5 M parameters, forward 0.2-3 ms, backward twice that (seeded)."""
    rng = np.random.default_rng(seed)
    fwd = rng.uniform(0.2, 3.0, n)
    return layers_model(rng.integers(100_000, 5_000_000, n).tolist(), fwd.tolist(), (2 * fwd).tolist())


def _both(model, cluster, which, iterations, keep):
    kind, name = which
    kw = {"method": name} if kind == "method" else {}
    scheduler = "wfbp" if kind == "method" else name
    common = dict(batch_size=8, straggler=SPEC, iterations=iterations, seed=3, **kw)
    return (simulate_workers(model, cluster, scheduler, **common),
            simulate_workers(model, cluster, scheduler, timeline_iterations=keep, **common))


@pytest.mark.parametrize("which", NAMES, ids=[n for _, n in NAMES])
def test_figures_and_the_kept_timeline_equal_the_run_that_keeps_everything(which):
    model = make_model(7, seed=5)
    cluster = sim.Cluster(gpus=4, gpus_per_node=2, network="10gbe")
    full, kept = _both(model, cluster, which, 9, 3)
    assert full.metrics == kept.metrics
    np.testing.assert_array_equal(full.iteration_times_s, kept.iteration_times_s)
    np.testing.assert_array_equal(full.wait_s, kept.wait_s)
    shown = full.timeline.loc[full.timeline["iteration"] < 3].reset_index(drop=True)
    pd.testing.assert_frame_equal(shown, kept.timeline.reset_index(drop=True))


@SETTINGS
@given(n=st.integers(1, 12), gpus=st.sampled_from([2, 4, 6, 8, 16]), iterations=st.integers(2, 12), keep=st.integers(1, 14),
       seed=st.integers(0, 50), which=st.sampled_from([s for s in NAMES if s[0] == "scheduler"]))
def test_every_scheduler_keeps_the_same_run_whatever_it_keeps(n, gpus, iterations, keep, seed, which):
    model = make_model(n, seed=seed)
    cluster = sim.Cluster(gpus=gpus, gpus_per_node=2, network="ib-edr-100")
    full, kept = _both(model, cluster, which, iterations, keep)
    assert full.metrics == kept.metrics
    np.testing.assert_array_equal(full.wait_s, kept.wait_s)
    assert len(kept.timeline) == int((full.timeline["iteration"] < keep).sum())


def test_the_arrays_kept_grow_with_the_iterations_kept_not_those_run():
    model = make_model(30, seed=1)
    cluster = sim.Cluster(gpus=64, gpus_per_node=8, network="10gbe")
    run = run_sync(model, cluster, "wfbp", batch_size=8, spec=SPEC, iterations=50, seed=0, keep_iterations=2)
    full = run_sync(model, cluster, "wfbp", batch_size=8, spec=SPEC, iterations=50, seed=0)
    np.testing.assert_array_equal(run.update_end_s, full.update_end_s)
    np.testing.assert_array_equal(run.backward_end_s, full.backward_end_s)
    res = sim.simulate(model, cluster, "wfbp", batch_size=8)
    got = fast.evaluate(res.model, res.plan, [res.cluster.comm_cost(res.model)], iterations=50, keep_iterations=2)
    assert got.fwd_end_s.shape[1] == got.bwd_end_s.shape[1] == got.kept_iterations == 2
    assert got.backward_end_s.shape == (1, 50)


def test_a_timeline_or_phase_figures_past_the_kept_iterations_are_refused_in_one_line():
    model = make_model(5, seed=2)
    cluster = sim.Cluster(gpus=4, gpus_per_node=2, network="10gbe")
    run = run_sync(model, cluster, "wfbp", batch_size=8, spec=SPEC, iterations=6, seed=0, keep_iterations=2)
    assert len(run.timeline(2)) > 0
    with pytest.raises(sim.SimInputError, match=r"first 2 iterations only .*timeline of 3 cannot be built"):
        run.timeline(3)
    with pytest.raises(sim.SimInputError, match="first 2 iterations only"):
        run.timeline(None)
    got = fast.evaluate(sim.simulate(model, cluster, "wfbp", batch_size=8).model, Plan("", ()), NO_COMM,
                        iterations=4, keep_iterations=1)
    with pytest.raises(sim.SimInputError, match="phase figures"):
        got.phase_metrics()


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3", True])
def test_a_bad_keep_iterations_is_refused_naming_it(bad):
    cluster = sim.Cluster(gpus=2, gpus_per_node=2, network="10gbe")
    with pytest.raises(sim.SimInputError, match="keep_iterations"):
        run_sync(make_model(3, seed=0), cluster, "wfbp", batch_size=8, spec=SPEC, iterations=4, seed=0,
                 keep_iterations=bad)


def test_the_cell_budget_counts_what_a_run_holds_and_what_it_works_out():
    """Keeping the per-layer times of its first iterations only, a run holds far fewer numbers than it works
    out: the memory bound (`CELLS_PER_TASK`) counts those it holds, the work bound (`WORK_CELLS_PER_TASK`) all."""
    from sim.core.budget import CELLS_PER_TASK, WORK_CELLS_PER_TASK, cell_budget_error

    tasks = 8_000_000
    args = ("163 gradient tensors", 163, 161)
    # 8,192 workers x 100 iterations of resnet50: 531 M task times, over 16 x 8 M if held, under 128 x 8 M
    work = 2 * 8192 * 100 * (163 + 161)
    assert CELLS_PER_TASK * tasks < work < WORK_CELLS_PER_TASK * tasks
    assert cell_budget_error(*args, 100, 8192, 1, None, tasks).startswith(f"this run would hold about {work:,}")
    assert cell_budget_error(*args, 100, 8192, 1, 1, tasks) == ""
    held = 2 * 8192 * (2 * (163 + 161) + 8 * 100)
    assert held < CELLS_PER_TASK * tasks
    # twice the iterations: under the memory bound still, over the work bound
    got = cell_budget_error(*args, 200, 8192, 1, 1, tasks)
    assert got.startswith(f"this run would work out about {2 * work:,} task times") and "128 x $SSGD_MAX_TASKS" in got
    # keeping every iteration (or more than run) is holding them all
    assert cell_budget_error(*args, 100, 8192, 1, 100, tasks) == cell_budget_error(*args, 100, 8192, 1, None, tasks)


def test_the_cli_runs_stragglers_on_8192_gpus():
    """`run --stragglers` keeps one iteration's per-layer times (it reports metrics only): 8,192 workers x 100
    iterations were refused by the memory bound; they run (3.3 s and 246 MiB on this machine, 2026-11-26)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    out = subprocess.run([sys.executable, "-m", "sim", "run", "--model", "resnet50", "--gpus", "8192",
                          "--gpus-per-node", "8", "--stragglers", "8", "--straggler-dist", "normal",
                          "--straggler-cv", "0.1", "--format", "json"], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent, timeout=600)
    assert out.returncode == 0, out.stderr
    metrics = json.loads(out.stdout)
    assert metrics["gpus"] == 8192 and metrics["straggler_iterations"] == 100
    assert metrics["iteration_p99_s"] >= metrics["iteration_p50_s"] > 0
    assert len(metrics["straggler_workers"]) == 8
