"""Review of ``keep_iterations`` / ``timeline_iterations`` (commits 8b95b32, 8cea889).

Complements tests/test_kept_iterations.py: prefetch, mixed GPUs, 1 GPU, interference, keep past the run,
every row of a multi-row `sim.core.fast.evaluate`, its one-row and own-compute paths, numpy and huge
arguments, peak memory in a child process, and the dashboard's straggler view at and past its new limit.
"""

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import make_model as layers_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim
from sim.core import fast
from sim.methods import METHODS
from sim.workers import StragglerSpec, simulate_workers

REPO = Path(__file__).resolve().parent.parent
NAMES = [("scheduler", s) for s in sim.SCHEDULERS] + [("method", m) for m in METHODS]
SPEC = StragglerSpec(dist="lognormal", cv=0.3, stragglers=1, factor=2.0, jitter_cv=0.1)
ARRAYS = ("io_start_s", "io_end_s", "h2d_start_s", "h2d_end_s", "fwd_start_s", "update_start_s", "update_end_s",
          "backward_end_s")
KEPT_ARRAYS = ("fwd_end_s", "bwd_end_s", "comm_start_s", "comm_end_s")  # their first kept iterations only


def make_model(n, seed):
    rng = np.random.default_rng(seed)
    fwd = rng.uniform(0.2, 3.0, n)
    return layers_model(rng.integers(100_000, 5_000_000, n).tolist(), fwd.tolist(), (2 * fwd).tolist())


def assert_same_run(model, cluster, which, iterations, keep, **kw):
    """Every figure of the run that keeps ``keep`` iterations equals the run that keeps all, to the bit, and
    its timeline is the full timeline's first ``keep`` iterations."""
    kind, name = which
    extra = {"method": name} if kind == "method" else {}
    scheduler = "wfbp" if kind == "method" else name
    common = dict(batch_size=8, iterations=iterations, seed=7, **extra, **kw)
    full = simulate_workers(model, cluster, scheduler, **common)
    kept = simulate_workers(model, cluster, scheduler, timeline_iterations=keep, **common)
    assert full.metrics == kept.metrics
    assert full.iteration_time_s == kept.iteration_time_s
    np.testing.assert_array_equal(full.iteration_times_s, kept.iteration_times_s)
    np.testing.assert_array_equal(full.wait_s, kept.wait_s)
    shown = full.timeline.loc[full.timeline["iteration"] < keep].reset_index(drop=True)
    pd.testing.assert_frame_equal(shown, kept.timeline.reset_index(drop=True))
    assert kept.timeline["iteration"].max() == min(keep, iterations) - 1


@pytest.mark.parametrize("which", NAMES, ids=[n for _, n in NAMES])
def test_prefetch_mixed_gpus_and_link_jitter_keep_the_same_run(which):
    """A zoo model on a mix of GPU types (its own compute per worker), prefetch on, stragglers and link jitter."""
    model = sim.load_model("alexnet")
    cluster = sim.Cluster(gpus=4, gpus_per_node=2, network="10gbe")
    assert_same_run(model, cluster, which, 6, 2, straggler=SPEC, prefetch=True,
                    gpus_by_worker=["v100-sxm2", "t4", "a100", "v100-sxm2"])


@pytest.mark.parametrize("scheduler", list(sim.SCHEDULERS))
def test_one_gpu_and_a_keep_past_the_run(scheduler):
    model = make_model(5, seed=3)
    one = sim.Cluster(gpus=1, network="10gbe")
    assert_same_run(model, one, ("scheduler", scheduler), 5, 2, straggler=SPEC)
    assert_same_run(model, one, ("scheduler", scheduler), 5, 9, straggler=SPEC)  # keep > iterations: everything


@pytest.mark.parametrize("scheduler", ["wfbp", "mgwfbp", "horovod", "bytescheduler", "zero3"])
@pytest.mark.parametrize("slowdown", [{"compute_slowdown": 0.3}, {"compute_slowdown": 0.2, "comm_slowdown": 0.4}],
                         ids=["compute", "both"])
def test_interference_keeps_the_same_run(scheduler, slowdown):
    cluster = sim.Cluster(gpus=4, gpus_per_node=2, network="10gbe", **slowdown)
    assert_same_run(make_model(6, seed=1), cluster, ("scheduler", scheduler), 7, 3, straggler=SPEC)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 10), rows=st.integers(1, 4), iterations=st.integers(1, 8), keep=st.integers(1, 10),
       prefetch=st.booleans(), own=st.booleans(), scheduler=st.sampled_from(["wfbp", "mgwfbp", "horovod", "bucket"]),
       seed=st.integers(0, 20))
def test_fast_evaluate_keeps_every_array_and_every_rows_timeline(n, rows, iterations, keep, prefetch, own, scheduler,
                                                                  seed):
    """`fast.evaluate` with K costs (the one-row path too, cut after the fact by `FastRun.first`) and each row's
    own compute times: every kept figure equals the full run's, each row's timeline of the kept iterations
    too (never built from the scratch slot), and past them the timeline and phase figures are refused."""
    model = make_model(n, seed)
    res = sim.simulate(model, sim.Cluster(gpus=8, gpus_per_node=2, network="10gbe"), scheduler, batch_size=8)
    networks = ["10gbe", "ib-edr-100", "25gbe", "10gbe"]
    costs = [sim.Cluster(gpus=2 ** (r + 1), gpus_per_node=2, network=networks[r]).comm_cost(res.model)
             for r in range(rows)]
    kw = dict(iterations=iterations, prefetch=prefetch)
    if own:
        scale = np.linspace(0.7, 1.3, rows)[:, None]
        kw["compute_s"] = (np.tile(res.model.fwd_s, (rows, 1)) * scale, np.tile(res.model.bwd_s, (rows, 1)) / scale)
    full = fast.evaluate(res.model, res.plan, costs, **kw)
    cut = fast.evaluate(res.model, res.plan, costs, keep_iterations=keep, **kw)
    kept = min(keep, iterations)
    assert cut.iterations == iterations and cut.kept_iterations == kept
    for name in ARRAYS:
        np.testing.assert_array_equal(getattr(full, name), getattr(cut, name), err_msg=name)
    for name in KEPT_ARRAYS:
        assert getattr(cut, name).shape[1] == kept, name
        np.testing.assert_array_equal(getattr(full, name)[:, :kept], getattr(cut, name), err_msg=name)
    np.testing.assert_array_equal(full.iteration_time_s, cut.iteration_time_s)
    for r in range(rows):
        pd.testing.assert_frame_equal(full.timeline(r, kept), cut.timeline(r, kept))
    if kept == iterations:
        got = cut.phase_metrics()
        for key, value in full.phase_metrics().items():
            np.testing.assert_array_equal(value, got[key], err_msg=key)
        pd.testing.assert_frame_equal(full.timeline(0), cut.timeline(0))
    else:
        with pytest.raises(sim.SimInputError, match=f"first {kept} iterations only"):
            cut.timeline(0, kept + 1)
        with pytest.raises(sim.SimInputError, match="phase figures"):
            cut.phase_metrics()


def test_numpy_and_huge_timeline_iterations_are_taken_as_whole_numbers():
    model = make_model(4, seed=0)
    cluster = sim.Cluster(gpus=2, gpus_per_node=2, network="10gbe")
    common = dict(batch_size=8, iterations=4, straggler=SPEC, seed=1)
    two = simulate_workers(model, cluster, "wfbp", timeline_iterations=2, **common)
    for same in (np.int64(2), np.uint8(2)):
        pd.testing.assert_frame_equal(two.timeline, simulate_workers(model, cluster, "wfbp",
                                                                     timeline_iterations=same, **common).timeline)
    everything = simulate_workers(model, cluster, "wfbp", **common)
    for big in (10**30, np.uint64(2**64 - 1)):
        got = simulate_workers(model, cluster, "wfbp", timeline_iterations=big, **common)
        pd.testing.assert_frame_equal(everything.timeline, got.timeline)
    for bad in (np.float64(2.0), np.bool_(True), np.array([2])):
        with pytest.raises(sim.SimInputError, match="timeline_iterations must be a whole number") as err:
            simulate_workers(model, cluster, "wfbp", timeline_iterations=bad, **common)
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("bad", [0, -3, 2.5, "3", True, np.float64(2.0)], ids=repr)
def test_fast_evaluate_refuses_a_bad_keep_iterations_naming_it(bad):
    """DEFECT: `fast.evaluate` (public: in `sim.core.fast.__all__`, reached by `sim.core.run.time_workers`)
    clamps 0 and -3 to 1, truncates 2.5 to 2 and parses the string "3" (``int(keep_iterations)``,
    sim/core/fast.py:283) instead of refusing them as `run_sync` does."""
    model = make_model(3, seed=0)
    res = sim.simulate(model, sim.Cluster(gpus=4, gpus_per_node=2, network="10gbe"), "wfbp", batch_size=8)
    cost = res.cluster.comm_cost(res.model)
    with pytest.raises(sim.SimInputError, match="keep_iterations"):
        fast.evaluate(res.model, res.plan, [cost, cost], iterations=4, keep_iterations=bad)


_PEAK = textwrap.dedent("""
    import json, re, sys
    sys.path.insert(0, {tests!r})
    import numpy as np, sim
    from helpers import make_model
    from sim.workers import StragglerSpec, simulate_workers
    keep = json.loads(sys.argv[1])
    rng = np.random.default_rng(0)
    fwd = rng.uniform(0.2, 3.0, 160)
    model = make_model(rng.integers(100_000, 5_000_000, 160).tolist(), fwd.tolist(), (2 * fwd).tolist())
    cluster = sim.Cluster(gpus=2048, gpus_per_node=1, network="10gbe")
    def peak_kib():  # this process's own high-water mark (ru_maxrss keeps the forking parent's across exec)
        return int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1))
    before = peak_kib()
    res = simulate_workers(model, cluster, "wfbp", batch_size=8, iterations=60, timeline_iterations=keep,
                           straggler=StragglerSpec(dist="normal", cv=0.1, stragglers=2, factor=1.5))
    print(json.dumps([peak_kib() - before, res.iteration_time_s]))
""")


def _peak_growth_kib(keep):
    out = subprocess.run([sys.executable, "-c", _PEAK.format(tests=str(REPO / "tests")), json.dumps(keep)],
                         capture_output=True, text=True, cwd=REPO, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_run_that_keeps_two_iterations_peaks_far_lower_than_one_that_keeps_sixty():
    """2,048 workers x 60 iterations x 160 layers: measured here +326 MiB keeping everything, +36 MiB keeping 2."""
    grown_all, t_all = _peak_growth_kib(None)
    grown_two, t_two = _peak_growth_kib(2)
    assert t_all == t_two
    assert grown_two < 0.4 * grown_all, (grown_two, grown_all)


def _straggler_config(model, gpus, **kw):
    from dashboard.state import Config

    return Config(model=model, gpus=gpus, gpus_per_node=1, **kw)


def test_the_straggler_view_runs_at_its_new_limit_and_refuses_one_gpu_past_it():
    from dashboard import cached, state

    spec, seed = state.stragglers_from_state({"strag": True})
    tensors = cached.straggler_tensors(_straggler_config("resnet50", 16))
    per_gpu = cached.straggler_work(1, tensors, cached.STRAGGLER_MIN_ITERATIONS)
    at_limit = cached.MAX_STRAGGLER_WORK // per_gpu  # 4,469 for resnet50
    metrics, early, times, _ = cached.stragglers(_straggler_config("resnet50", at_limit), "wfbp", spec, seed, 3)
    assert metrics["iterations"] == cached.STRAGGLER_MIN_ITERATIONS and early is None
    assert len(times) == cached.STRAGGLER_MIN_ITERATIONS - 1 and np.all(np.isfinite(times))
    with pytest.raises(sim.SimInputError, match=fr"{at_limit + 1:,} GPUs x \({tensors} gradient tensors") as err:
        cached.stragglers(_straggler_config("resnet50", at_limit + 1), "wfbp", spec, seed, 3)
    assert "\n" not in str(err.value)


def test_the_capped_note_states_the_work_the_view_really_ran():
    """Was a defect: the heavy URL (4,096 GPUs, one a node) runs 40 iterations, past the 8,000,000 its note
    said it kept under (`STRAGGLER_WORK_BUDGET` cuts iterations but never below `STRAGGLER_MIN_ITERATIONS`).
    The note now states the rule and the work the view ran, in the units of its limits."""
    from dashboard import cached, state
    from dashboard.stragglers_view import limits_note

    cfg = _straggler_config("resnet50", 4096)
    spec, seed = state.stragglers_from_state({"strag": True})
    metrics, early, _, _ = cached.stragglers(cfg, "wfbp", spec, seed, 3)
    note = limits_note(cfg, metrics, early)
    ran = int(re.search(r"this view ran ([\d,]+)", note).group(1).replace(",", ""))
    assert ran == cfg.gpus * (cached.straggler_tensors(cfg) + cached.STRAGGLER_CELLS_PER_ITERATION) * 40 == 29_327_360
    assert metrics["iterations"] == 40 and "never below 40 iterations" in note
    assert ran <= cached.MAX_STRAGGLER_WORK


_UPLOAD_PEAK = textwrap.dedent("""
    import logging, re, sys
    logging.disable(logging.WARNING)
    import sim
    from dashboard import cached, state
    from dashboard.state import UPLOAD, Config
    spec, seed = state.stragglers_from_state({"strag": True})
    cfg = Config(model=UPLOAD, csv_text="name,params,fwd_ms,bwd_ms\\nl0,1000000,1.0,2.0\\n", csv_name="one.csv",
                 gpus=int(sys.argv[1]), gpus_per_node=1)
    try:
        iterations = cached.stragglers(cfg, "wfbp", spec, seed, 3)[0]["iterations"]
    except sim.SimInputError:
        iterations = 0
    print(iterations, int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) // 1024)
""")


def test_a_straggler_view_within_the_work_limit_keeps_the_server_under_a_gib():
    """Was a defect: the work limit counted GPUs x gradient tensors x iterations, but the per-worker engine
    holds about fifteen arrays of GPUs x iterations whatever the tensors: a one-layer upload on the sidebar's
    65,536 GPUs passed the check and peaked at ~1,029 MiB. The limits now count
    `STRAGGLER_CELLS_PER_ITERATION` more per GPU and iteration: that view is refused, and the largest one-layer
    view that runs (47,058 GPUs, 40 iterations) stays well under 1 GiB."""
    from dashboard import cached

    largest = cached.MAX_STRAGGLER_WORK // cached.straggler_work(1, 1, cached.STRAGGLER_MIN_ITERATIONS)
    assert largest == 47_058
    for gpus, ran in ((65_536, 0), (largest, cached.STRAGGLER_MIN_ITERATIONS)):
        out = subprocess.run([sys.executable, "-c", _UPLOAD_PEAK, str(gpus)], capture_output=True, text=True,
                             cwd=REPO, check=True)
        iterations, peak_mib = map(int, out.stdout.split()[-2:])
        assert iterations == ran, (gpus, iterations)
        assert peak_mib < 1024, f"{iterations} iterations of {gpus:,} one-layer workers peaked at {peak_mib} MiB"
