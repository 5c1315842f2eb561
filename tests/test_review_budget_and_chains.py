"""Review of the scaled chain sums, the shared channel's max-then-lag, and the per-worker cell budget.

The previous code (HEAD~6: `chain_ends` on a fresh buffer of ``durations * scale``, the per-row copy of the
profile's times, the lag added per worker before the max over workers) is reconstructed here and patched in,
so the change is compared with it to the bit; the per-worker fast path is compared with the general engine
and identical workers with `sim.simulate`. The budget tests measure a child's peak memory (VmHWM).
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from helpers import make_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim
from sim.core import channel as channel_mod
from sim.core import fast
from sim.core.budget import CELLS_PER_TASK, WORK_CELLS_PER_TASK, cell_budget_error
from sim.core.channel import chain_ends, channel
from sim.core.cost import CommCost
from sim.errors import SimInputError
from sim.workers import StragglerSpec, run_sync, simulate_workers

SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                           HealthCheck.function_scoped_fixture])
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


# --- the previous code, reconstructed (git show HEAD~6:sim/core/channel.py, sim/core/fast.py) ------------------

def old_chain_ends(start, durations, scale=None):
    assert scale is None  # (the previous code scaled the times before the sum: `_old_scaled`)
    buf = np.empty((start.shape[0], durations.shape[-1] + 1))
    buf[:, 0] = start
    buf[:, 1:] = durations
    return np.cumsum(buf, axis=1)[:, 1:]


def _old_scaled(work, times, k):
    """The per-row copy of the profile's times, scaled before the sum (and no scale left for `chain_ends`)."""
    if work.profile_of is None:
        return times, None
    return times[work.profile_of] * work.compute_scale[k][:, None], None


def _old_communicate(self, k, work, plan, t_c, lag, lowest_at, free, shared, k1):
    backward_done = self.bwd_done[:, k]
    if t_c.shape[1]:
        ready = self.bwd_end[:, min(k, self.kept), lowest_at] + lag
        if plan.after_backward:
            ready = np.maximum(ready, backward_done[:, None])
        busy_until = backward_done
        if shared:
            ready = ready.max(axis=0, keepdims=True)
            busy_until = backward_done.max(keepdims=True)
        s = min(k, self.kept)  # (the channel's times now kept as the per-layer ones are: the same slots)
        self.c_start[:, s], self.c_end[:, s] = channel(free, ready, t_c * work.comm_scale(k), busy_until, k1)
        free = self.c_end[:, s].max(axis=1)
        self.upd_start[:, k] = np.maximum(backward_done, free)
    else:
        self.upd_start[:, k] = backward_done
    self.upd_end[:, k] = self.upd_start[:, k] + work.update_s
    return free


def with_old_code(fn):
    """fn() run with the previous fast path patched in."""
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(fast._Work, "scaled", _old_scaled)
        mp.setattr(fast, "chain_ends", old_chain_ends)
        mp.setattr(fast._Arrays, "communicate", _old_communicate)
        mp.setattr(channel_mod, "chain_ends", old_chain_ends)
        return fn()
    finally:
        mp.undo()


def bits(a):
    a = np.ascontiguousarray(np.asarray(a, dtype=float))
    return a.shape, a.tobytes()


# --- 1. chain_ends --------------------------------------------------------------------------------------------

FLOATS = st.one_of(st.sampled_from([0.0, -0.0, 1e-12, 1e6, 5e-324, 1e-300, 1e300, 3.0]),
                   st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_subnormal=True))


@SETTINGS
@given(k=st.integers(1, 9), n=st.integers(1, 12), data=st.data(), per_row=st.booleans(), scaled=st.booleans())
def test_chain_ends_gives_the_previous_bits(k, n, data, per_row, scaled):
    start = np.array(data.draw(st.lists(FLOATS, min_size=k, max_size=k)))
    shape = (k, n) if per_row else (n,)
    d = np.array(data.draw(st.lists(FLOATS, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))).reshape(shape)
    if scaled:
        scale = np.array(data.draw(st.lists(st.one_of(st.sampled_from([1.0, 0.0, 1e-6, 1e6]),
                                                      st.floats(0.01, 100.0)), min_size=k, max_size=k)))
        # the previous fast path: the profile's rows copied, then times the row's factor
        before = old_chain_ends(start, np.broadcast_to(d, (k, n)) * scale[:, None])
        got = chain_ends(start, d, scale)
    else:
        before = old_chain_ends(start, d)
        got = chain_ends(start, d)
    assert bits(got) == bits(before)


# --- 2. per-worker runs and multi-row evaluate: new == previous == general engine -----------------------------

SCHEDULERS = ["wfbp", "synceasgd", "sequential", "horovod", "mgwfbp", "bucket", "ddp", "optimal"]


def small_model(n, seed, unit):
    rng = np.random.default_rng(seed)
    fwd = rng.uniform(0.2, 3.0, n) * unit
    fwd[1:][rng.random(n - 1) < 0.2] = 0.0  # zero-duration layers (never all)
    return make_model(rng.integers(1_000, 3_000_000, n).tolist(), fwd.tolist(), (2 * fwd).tolist())


def sync_arrays(run):
    return [bits(run.update_end_s), bits(run.backward_end_s), bits(run.update_s), bits(run.periods_s),
            bits(run.wait_s)]


@SETTINGS
@given(n=st.integers(1, 9), gpus=st.sampled_from([1, 2, 3, 8, 9]), iterations=st.integers(2, 6),
       seed=st.integers(0, 40), scheduler=st.sampled_from(SCHEDULERS), prefetch=st.booleans(),
       unit=st.sampled_from([1.0, 1e-9, 1e-6, 1e4, 1e7]),
       slow=st.sampled_from([(None, None), (0.3, None), (None, 0.5), (0.2, 0.4)]),
       keep=st.sampled_from([None, 1, 2]), cv=st.sampled_from([0.0, 0.2]), jitter=st.sampled_from([0.0, 0.1]))
def test_per_worker_runs_equal_the_previous_code(n, gpus, iterations, seed, scheduler, prefetch, unit, slow, keep,
                                                 cv, jitter):
    model = small_model(n, seed, unit)
    cluster = sim.Cluster(gpus=gpus, gpus_per_node=1, network="10gbe", compute_slowdown=slow[0],
                          comm_slowdown=slow[1])
    spec = StragglerSpec(dist="normal", cv=cv, stragglers=min(1, gpus), factor=1.5, jitter_cv=jitter)
    kw = dict(batch_size=8, spec=spec, iterations=iterations, seed=seed, prefetch=prefetch, keep_iterations=keep)
    new = run_sync(model, cluster, scheduler, **kw)
    old = with_old_code(lambda: run_sync(model, cluster, scheduler, **kw))
    assert sync_arrays(new) == sync_arrays(old)


@SETTINGS
@given(n=st.integers(1, 8), gpus=st.sampled_from([2, 4, 8]), iterations=st.integers(2, 5), seed=st.integers(0, 40),
       scheduler=st.sampled_from(SCHEDULERS), prefetch=st.booleans())
def test_per_worker_fast_path_equals_the_general_engine(n, gpus, iterations, seed, scheduler, prefetch):
    model = small_model(n, seed, 1.0)
    # interference off: with it the general engine stretches compute as the aggregate run does
    # (`_general_interference`), a different model from the fast path's shared slowed channel (pre-existing)
    cluster = sim.Cluster(gpus=gpus, gpus_per_node=2, network="10gbe", interference=False)
    spec = StragglerSpec(dist="normal", cv=0.2, stragglers=1, factor=1.5, jitter_cv=0.05)
    kw = dict(batch_size=8, spec=spec, iterations=iterations, seed=seed, prefetch=prefetch)
    new = run_sync(model, cluster, scheduler, **kw)
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(fast, "supports", lambda *a, **k: False)
        general = run_sync(model, cluster, scheduler, **kw)
    finally:
        mp.undo()
    assert sync_arrays(new)[:2] == sync_arrays(general)[:2]


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_mixed_gpu_types_equal_the_previous_code(scheduler):
    model = sim.load_model("resnet50")
    cluster = sim.Cluster(gpus=6, gpus_per_node=2, network="10gbe", gpu="v100-sxm2")
    gpus = ["v100-sxm2", "a100", "v100-sxm2", "t4", "a100", "v100-sxm2"]
    spec = StragglerSpec(dist="lognormal", cv=0.1, stragglers=2, factor=1.3, jitter_cv=0.05)
    kw = dict(batch_size=32, straggler=spec, iterations=4, seed=2, gpus_by_worker=gpus)
    new = simulate_workers(model, cluster, scheduler, **kw)
    old = with_old_code(lambda: simulate_workers(model, cluster, scheduler, **kw))
    assert new.metrics == old.metrics
    assert bits(new.iteration_times_s) == bits(old.iteration_times_s) and bits(new.wait_s) == bits(old.wait_s)
    assert new.timeline.equals(old.timeline)


@pytest.mark.parametrize("scheduler", ["wfbp", "horovod", "synceasgd", "sequential"])
@pytest.mark.parametrize("gpus", [1, 2, 16])
def test_identical_workers_equal_simulate(scheduler, gpus):
    model = sim.load_model("resnet50")
    cluster = sim.Cluster(gpus=gpus, gpus_per_node=min(gpus, 8), network="10gbe", sync_jitter_cv=0.0)
    agg = sim.simulate(model, cluster, scheduler, batch_size=32)
    general = sim.simulate(model, cluster, scheduler, batch_size=32, engine="general")
    workers = simulate_workers(model, cluster, scheduler, batch_size=32, iterations=3)
    # the period is a difference of ends at times that depend on the iterations run: equal to rounding only
    assert general.iteration_time_s == pytest.approx(agg.iteration_time_s, rel=1e-12)
    assert workers.iteration_time_s == pytest.approx(agg.iteration_time_s, rel=1e-12)


@SETTINGS
@given(n=st.integers(1, 9), rows=st.integers(2, 12), iterations=st.integers(1, 5), seed=st.integers(0, 40),
       scheduler=st.sampled_from(SCHEDULERS), prefetch=st.booleans(), unit=st.sampled_from([1.0, 1e-9, 1e7]),
       k1=st.sampled_from([0.0, 0.5]), own=st.booleans())
def test_multi_row_evaluate_equals_the_previous_code(n, rows, iterations, seed, scheduler, prefetch, unit, k1, own):
    model = small_model(n, seed, unit)
    cluster = sim.Cluster(gpus=4, gpus_per_node=2, network="10gbe", sync_jitter_cv=0.0)
    plan = sim.simulate(model, cluster, scheduler, batch_size=8).plan
    if not fast.supports(plan, model.num_layers):
        return
    rng = np.random.default_rng(seed)
    costs = [CommCost(alpha_s=float(a), beta_s_per_byte=float(b), comm_slowdown=k1)
             for a, b in zip(rng.uniform(0, 1e-3, rows) * unit, rng.uniform(1e-10, 1e-8, rows), strict=True)]
    compute = None
    if own:
        compute = (np.tile(model.fwd_s, (rows, 1)) * rng.uniform(0.5, 2, (rows, 1)),
                   np.tile(model.bwd_s, (rows, 1)) * rng.uniform(0.5, 2, (rows, 1)))
    kw = dict(iterations=iterations, prefetch=prefetch, compute_s=compute)
    new = fast.evaluate(model, plan, costs, **kw)
    old = with_old_code(lambda: fast.evaluate(model, plan, costs, **kw))
    for name in ("update_end_s", "update_start_s", "comm_start_s", "comm_end_s", "fwd_end_s", "bwd_end_s"):
        assert bits(getattr(new, name)) == bits(getattr(old, name)), name


def test_shared_channel_negative_zero_lag_and_ends():
    """The max-then-lag of the shared channel on signed zeros: ends of -0.0 and +0.0 with a lag of -0.0."""
    arrays_new = fast._Arrays(3, 1, 2, 2, 1, 1)
    arrays_old = fast._Arrays(3, 1, 2, 2, 1, 1)
    for a in (arrays_new, arrays_old):
        a.bwd_end[:] = np.array([[[-0.0, -0.0]], [[0.0, -0.0]], [[-0.0, 0.0]]])
        a.bwd_done[:] = np.array([[-0.0], [0.0], [-0.0]])

    class P:
        after_backward = True

    class W:
        update_s = 0.0

        @staticmethod
        def comm_scale(k):
            return 1.0

    args = (0, W, P, np.array([[0.0, 0.0]]), np.array([-0.0, -0.0]), np.array([0, 1]), np.array([-np.inf]), True,
            np.array([1.0]))
    fast._Arrays.communicate(arrays_new, *args)
    _old_communicate(arrays_old, *args)
    assert bits(arrays_new.c_start) == bits(arrays_old.c_start)
    assert bits(arrays_new.upd_end) == bits(arrays_old.upd_end)


# --- 3. the budget: what it admits runs in bounded memory, and its refusals are one line ------------------------

PROBE = textwrap.dedent("""
    import sys
    sys.path[:0] = [{here!r}, {root!r}]
    import numpy as np
    from helpers import make_model
    import sim
    from sim.errors import SimInputError
    from sim.workers import StragglerSpec, simulate_workers
    n, gpus, iterations, keep, scheduler = {n}, {gpus}, {iterations}, {keep}, {scheduler!r}
    fwd = np.linspace(0.2, 3.0, n)
    model = make_model([1000] * n, fwd.tolist(), (2 * fwd).tolist())
    cluster = sim.Cluster(gpus=gpus, gpus_per_node=1, network="10gbe")
    try:
        r = simulate_workers(model, cluster, scheduler, batch_size=8, iterations=iterations, timeline_iterations=keep,
                             straggler=StragglerSpec(dist="normal", cv=0.1))
        print("RAN", len(r.plan.groups))
    except SimInputError as e:
        print("REFUSED", str(e))
    print("HWM", [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0])
""")


def probe(n, gpus, iterations, keep, scheduler="wfbp", max_tasks=None, limit_mib=4096):
    env = dict(os.environ)
    if max_tasks is not None:
        env["SSGD_MAX_TASKS"] = str(max_tasks)
    code = PROBE.format(here=HERE, root=ROOT, n=n, gpus=gpus, iterations=iterations, keep=keep, scheduler=scheduler)
    # a child capped at limit_mib of address space: a run that would take more fails rather than swap the machine
    pre = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({limit_mib} << 20, {limit_mib} << 20))\n"
    out = subprocess.run([sys.executable, "-c", pre + code], capture_output=True, text=True, env=env, timeout=300)
    return out


def test_the_held_count_includes_the_shared_channel_arrays():
    """Was a defect: the shared channel's message times (iterations x messages, twice) and the link jitter's
    draws are held for every iteration whatever is kept, and its Python loop steps through every message of
    every iteration; `cell_budget_error` counted (kept + 1) x messages per worker only, and admitted 2 workers
    x 5,000 iterations x (25,000 layers + 25,000 messages): 3,005 MiB peak and 44.5 s of CPU. Now refused."""
    n, gpus, iterations = 25_000, 2, 5_000
    got = cell_budget_error("layers", n, n, iterations, gpus, 1, 1, 8_000_000)
    assert got.startswith("this run would") and "\n" not in got
    # the channel now keeps its kept iterations only, as the per-layer times are; the link's draws are held
    # for every iteration and message (when the link jitters), and counted so whatever is kept
    from sim.core.budget import CELLS_PER_TASK as cells

    iterations, m = 8_000, 16_001  # 128 M draws held, 128 M channel steps
    assert "hold about" in cell_budget_error("layers", 10, m, iterations, 2, 1, 1, 8_000_000)
    assert iterations * m > cells * 8_000_000
    steps = cell_budget_error("layers", 10, 500, 40_000, 2, 1, 1, 8_000_000)  # 20 M steps, little held
    assert steps.startswith("this run would step its channel through 20,000,000 messages")
    assert "the limit is 16,000,000 (2 x $SSGD_MAX_TASKS" in steps
    assert cell_budget_error("layers", 10, 500, 30_000, 2, 1, 1, 8_000_000) == ""  # 15 M steps


def test_an_admitted_run_stays_near_its_memory_bound():
    """With SSGD_MAX_TASKS = 2 M (32 M numbers held, 256 M worked out, 8 M channel steps): 2 workers x 100
    iterations x (16,000 layers + 16,000 messages), one kept, is admitted; its peak stays near what the budget
    lets it hold (32 M numbers, 244 MiB) above an interpreter's ~150 MiB."""
    n, gpus, iterations, tasks = 16_000, 2, 100, 2_000_000
    assert cell_budget_error("layers", n, n, iterations, gpus, 1, 1, tasks) == ""
    out = probe(n, gpus, iterations, 1, max_tasks=tasks, limit_mib=3072)
    hwm_mib = int(out.stdout.split("HWM")[-1]) / 1024 if "HWM" in out.stdout else float("inf")
    assert hwm_mib < 150 + 2 * CELLS_PER_TASK * tasks * 8 / 2**20, (out.stdout, out.stderr[-500:])


def test_a_run_the_budget_admits_is_not_refused_by_its_own_reference_run():
    """A run that varies times a one-GPU reference of all its iterations (`_reference_s`) without
    keep_iterations: 2 workers x 5,000 iterations x 20,000 layers (mgwfbp: few messages) kept to one iteration
    is admitted (its work 4 x 10^8 <= 128 x 8 M), but the reference holds 2 x 5,000 x 20,000 = 2 x 10^8 > 16 x 8 M
    and is refused after the run has been timed (scaled down here by SSGD_MAX_TASKS)."""
    n, gpus, iterations, tasks = 2_000, 2, 500, 100_000
    assert cell_budget_error("layers", n, 4, iterations, gpus, 1, 1, tasks) == ""
    out = probe(n, gpus, iterations, 1, scheduler="bucket", max_tasks=tasks)
    assert "RAN" in out.stdout, out.stdout + out.stderr[-800:]


@pytest.mark.parametrize("kept", [None, 1])
def test_refusals_are_one_line_and_name_the_bound(kept):
    for args in [("163 gradient tensors", 163, 40, 5000, 65_536, 1), ("3 layers", 3, 3, 5000, 4096, 14),
                 ("10 layers", 10, 10, 5000, 10**6, 1)]:
        message = cell_budget_error(*args, kept, 8_000_000)
        assert message and "\n" not in message
        assert f"{CELLS_PER_TASK * 8_000_000:,}" in message or f"{WORK_CELLS_PER_TASK * 8_000_000:,}" in message
    model = sim.load_model("resnet50")
    cluster = sim.Cluster(gpus=65_536, gpus_per_node=8, network="10gbe")
    with pytest.raises(SimInputError) as err:
        simulate_workers(model, cluster, "wfbp", batch_size=32, iterations=5000, timeline_iterations=kept,
                         straggler=StragglerSpec(dist="normal", cv=0.1, stragglers=8))
    assert "\n" not in str(err.value) and "limit is" in str(err.value)
