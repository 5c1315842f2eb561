"""The contract every registered scheduler and every method keeps.

A scheduler registered in `sim.schedulers` (or a method of `sim.methods`)
joins every test here by being registered. Over random models, clusters
(network presets and user alpha-beta, one or many nodes, all-reduce and
parameter server) and update times, on the engine's own timeline:

* iteration >= compute, and >= the update-to-update compute of one iteration (at every precision);
* 0 <= hidden, exposed; exposed <= iteration; no negative or non-finite time;
* hidden + exposed = communication, where communication and hidden are
  computed here from the timeline by a method of their own (elementary
  segments between all interval ends), not by the simulator's;
  communication includes the wait after backward with no message on the
  wire (Horovod's tick), so compute + exposed = iteration for every run
  without I/O (`test_compute_plus_exposed_is_the_iteration`);
* efficiency <= 1;
* the fast path equals the general engine (`simulate_dag`) to 1e-9;
* the per-worker engine with identical workers equals the aggregate run;
* the same seed gives the same output.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
from helpers import make_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim
from sim.api import simulate_dag
from sim.core import fast
from sim.core.metrics import iterations_to_run
from sim.methods import METHODS
from sim.model import BYTES_PER_PARAM
from sim.schedulers.registry import scheduler_names
from sim.workers import StragglerSpec, simulate_workers

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RUNS = [{"scheduler": name} for name in scheduler_names()] + [{"method": name} for name in METHODS]
IDS = [r.get("scheduler") or r["method"] for r in RUNS]
NETWORKS = ["10gbe", "ib-fdr-56", "100gbe", "nvlink3", "10gbe-k80-osu"]


@st.composite
def models(draw, max_layers=7):
    n = draw(st.integers(1, max_layers))
    params = draw(st.lists(st.integers(0, 4_000_000), min_size=n, max_size=n))
    if not any(params) and draw(st.integers(0, 3)):  # a model without parameters (nothing to send) now and then
        params[-1] = 1000
    fwd = draw(st.lists(st.floats(0.01, 5.0), min_size=n, max_size=n))
    bwd = draw(st.lists(st.floats(0.01, 10.0), min_size=n, max_size=n))
    model = make_model(params, fwd, bwd, update_ms=draw(st.one_of(st.just(0.0), st.floats(1e-9, 5.0))))
    if draw(st.booleans()):  # parameter tensors per layer (one gradient each, `sim.tensors`)
        tensors = []
        for p in params:
            cuts = sorted(draw(st.sets(st.integers(1, p - 1), max_size=2))) if p > 1 else []
            tensors.append(tuple(np.diff([0, *cuts, p]).tolist()) if p else ())
        model = dataclasses.replace(model, tensor_params=tuple(tensors),
                                    gradients=draw(st.sampled_from(["tensor", "layer"])))
    return model


@st.composite
def clusters(draw):
    gpus = draw(st.sampled_from([2, 4, 8, 16, 64]))
    per_node = draw(st.sampled_from([1, 2, 4]))
    # communication slowed by compute: the links' own (None), off, or a given coefficient
    comm_slowdown = draw(st.sampled_from([None, 0.0, 0.5, 3.0]))
    if draw(st.booleans()):
        return sim.Cluster(gpus=gpus, gpus_per_node=per_node, network=draw(st.sampled_from(NETWORKS)),
                           comm_slowdown=comm_slowdown)
    return sim.Cluster(gpus=gpus, gpus_per_node=per_node, alpha_s=draw(st.floats(0.0, 5e-3)),
                       beta_s_per_byte=draw(st.floats(1e-11, 5e-9)), comm_slowdown=comm_slowdown)


def _union_length(starts, ends) -> float:
    """Length of a union of intervals, by elementary segments."""
    return _covered(np.concatenate([starts, ends]), [(starts, ends)])


def _covered(points, sets) -> float:
    """Length of the points' elementary segments whose midpoint lies in every set of intervals."""
    cuts = np.unique(points)
    if len(cuts) < 2:
        return 0.0
    lo, hi = cuts[:-1], cuts[1:]
    mid = (lo + hi) / 2
    inside = np.ones(len(mid), dtype=bool)
    for starts, ends in sets:
        inside &= ((mid[:, None] > starts[None, :]) & (mid[:, None] < ends[None, :])).any(axis=1)
    return float((hi - lo)[inside].sum())


def _wait_after_backward(ref_rows, cs, ce, per_layer_update: bool) -> float:
    """From the end of backward to the update's start, the time no message is on the wire
    (elementary segments of that span outside every message), for one update per iteration."""
    backward, update = ref_rows[ref_rows.kind == "backward"], ref_rows[ref_rows.kind == "update"]
    if per_layer_update or backward.empty or update.empty:
        return 0.0
    lo, hi = float(backward.end_s.max()), float(update.start_s.min())
    if hi <= lo:
        return 0.0
    span = _covered(np.concatenate([[lo, hi], cs, ce]), [(np.array([lo]), np.array([hi]))])
    return span - _covered(np.concatenate([[lo, hi], cs, ce]), [(np.array([lo]), np.array([hi])), (cs, ce)])


def _simulate(model, cluster, run, **kw):
    try:
        return sim.simulate(model, cluster, batch_size=4, **run, **kw)
    except sim.SimInputError as exc:  # a combination the method refuses (e.g. dear on a parameter server)
        assert any(s in str(exc) for s in ("needs architecture", "colocated", "needs network presets")), exc
        return None


@pytest.mark.parametrize("run", RUNS, ids=IDS)
@SETTINGS
@given(model=models(), cluster=clusters(), precision=st.sampled_from(sorted(BYTES_PER_PARAM)))
def test_breakdown_is_consistent_with_the_timeline(run, model, cluster, precision):
    res = _simulate(model, cluster, run, iterations=iterations_to_run(sim.Plan("", (), per_layer_update=True), 1),
                    precision=precision)
    if res is None:
        return
    m, tl = res.metrics, res.timeline
    assert np.all(np.isfinite(tl[["start_s", "end_s"]].to_numpy())) and (tl.duration_s >= 0).all()
    for key in ("iteration_time_s", "compute_s", "comm_s", "comm_hidden_s", "comm_exposed_s"):
        assert math.isfinite(m[key]) and m[key] >= 0, key
    assert m["iteration_time_s"] >= m["compute_s"] * (1 - 1e-9)
    assert m["comm_exposed_s"] <= m["iteration_time_s"] * (1 + 1e-9)
    assert 0 < m["scaling_efficiency"] <= 1 + 1e-9
    ref = int(tl.iteration.max()) - (1 if res.plan.per_layer_update else 0)
    comm = tl[(tl.kind == "comm") & (tl.iteration == ref)]
    compute = tl[tl.kind.isin(["forward", "backward", "update"])]
    total = _union_length(comm.start_s.to_numpy(), comm.end_s.to_numpy())
    cs, ce = comm.start_s.to_numpy(), comm.end_s.to_numpy()
    ks, ke = compute.start_s.to_numpy(), compute.end_s.to_numpy()
    hidden = _covered(np.concatenate([cs, ce, ks, ke]), [(cs, ce), (ks, ke)])
    total += _wait_after_backward(tl[tl.iteration == ref], cs, ce, res.plan.per_layer_update)
    assert m["comm_s"] == pytest.approx(total, rel=1e-9, abs=1e-12)
    assert m["comm_hidden_s"] == pytest.approx(hidden, rel=1e-9, abs=1e-12)
    assert m["comm_hidden_s"] + m["comm_exposed_s"] == pytest.approx(total, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
@SETTINGS
@given(model=models(), cluster=clusters(), io_ms=st.one_of(st.just(0.0), st.floats(1e-9, 8.0)),
       h2d_ms=st.one_of(st.just(0.0), st.floats(1e-9, 4.0)),
       prefetch=st.booleans())
def test_with_input_reads_and_host_copies_p_gpus_never_beat_one(run, model, cluster, io_ms, h2d_ms, prefetch):
    """With a batch to read and copy to the GPU, the speedup stays at most P (efficiency <= 1) and the
    iteration covers the compute. A plan that updates per layer reads the next batch while the GPU updates;
    its one-GPU reference does the same (it was the serial one, so DeAR reached 1.6 on 2 GPUs)."""
    model = dataclasses.replace(model, io_s=io_ms * 1e-3, h2d_s=h2d_ms * 1e-3)
    res = _simulate(model, cluster, run, prefetch=prefetch)
    if res is None:
        return
    m = res.metrics
    assert 0 < m["scaling_efficiency"] <= 1 + 1e-9
    assert m["iteration_time_s"] >= m["compute_s"] * (1 - 1e-9)
    # and against the same scheduler's own run on one GPU (a per-layer-update plan reads the next batch during
    # its update there too: its one-GPU run was serial, so two GPUs reached 2.03 times its throughput)
    one = _simulate(model, cluster.with_gpus(1), run, prefetch=prefetch)
    assert one.metrics["scaling_efficiency"] == pytest.approx(1.0, rel=1e-9)
    assert m["throughput_samples_per_s"] <= cluster.gpus * one.metrics["throughput_samples_per_s"] * (1 + 1e-9)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
@SETTINGS
@given(model=models(), cluster=clusters(), precision=st.sampled_from(sorted(BYTES_PER_PARAM)))
def test_compute_plus_exposed_is_the_iteration(run, model, cluster, precision):
    """Without I/O or host copies the GPU either computes or waits on communication, so the
    breakdown adds up to the iteration (the dashboard's idle is 0): what the Compare page shows."""
    res = _simulate(model, cluster, run, precision=precision)
    if res is None:
        return
    m = res.metrics
    assert m["io_s"] == 0 and m["h2d_s"] == 0
    assert m["compute_s"] + m["comm_exposed_s"] == pytest.approx(m["iteration_time_s"], rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
@SETTINGS
@given(model=models(), cluster=clusters(), prefetch=st.booleans())
def test_fast_path_equals_the_general_engine(run, model, cluster, prefetch):
    res = _simulate(model, cluster, run, prefetch=prefetch)
    if res is None or not fast.supports(res.plan, res.cluster.comm_cost(res.model), res.model.num_layers):
        return  # the general engine times it in `simulate` too: comparing would compare it with itself
    ref = simulate_dag(model, cluster, batch_size=4, prefetch=prefetch, **run)
    for key in sim.METRIC_KEYS:
        want = ref.metrics[key]
        assert res.metrics[key] == (pytest.approx(want, rel=1e-9, abs=1e-15) if isinstance(want, float) else want), key


@pytest.mark.parametrize("run", RUNS, ids=IDS)
@SETTINGS
@given(model=models(max_layers=5), cluster=clusters())
def test_per_worker_with_identical_workers_equals_the_aggregate(run, model, cluster):
    cluster = cluster.with_gpus(min(cluster.gpus, 8))
    res = _simulate(model, cluster, run)
    if res is None:
        return
    workers = simulate_workers(model, cluster, batch_size=4, iterations=10, **run)
    assert workers.iteration_time_s == pytest.approx(res.iteration_time_s, rel=1e-9)
    assert workers.metrics["ideal_iteration_time_s"] == pytest.approx(res.iteration_time_s, rel=1e-9)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
@settings(max_examples=5, deadline=None)
@given(model=models(max_layers=4), seed=st.integers(0, 2**32))
def test_same_seed_same_output(run, model, seed):
    cluster = sim.Cluster(gpus=4, gpus_per_node=2)
    spec = StragglerSpec("lognormal", cv=0.2, stragglers=1, factor=1.5, jitter_cv=0.1)
    try:
        a = simulate_workers(model, cluster, batch_size=4, iterations=5, straggler=spec, seed=seed, **run)
    except sim.SimInputError:
        return
    b = simulate_workers(model, cluster, batch_size=4, iterations=5, straggler=spec, seed=seed, **run)
    assert a.metrics == b.metrics
    assert a.timeline.equals(b.timeline)


def _measured_model():
    """GoogLeNet with its measured per-layer all-reduce times (the B-Caffe trace at 8 nodes)."""
    from sim.calib.importers import bcaffe_layers

    text = (Path(__file__).parent.parent / "data" / "reference" / "bcaffe_k80_10gbe" / "tmp8comm.log").read_text()
    return sim.model_from_frame(bcaffe_layers(text, "tmp8comm.log"), "googlenet-trace")


@pytest.mark.parametrize("model_name", ["resnet50", "googlenet-trace"])
@pytest.mark.parametrize("network", ["10gbe", "ib-fdr-56"])
def test_simulate_equals_engine_workers_and_sweep_on_zoo_models(model_name, network):
    """Every scheduler, with the cost model and with measured communication: `simulate`
    = `simulate_dag` = the per-worker engine (no noise) = `sim.sweep`, to 1e-9."""
    model = _measured_model() if model_name == "googlenet-trace" else sim.load_model(model_name)
    names = list(scheduler_names())
    for gpus in (2, 16):
        cluster = sim.Cluster(gpus=gpus, gpus_per_node=min(gpus, 4), network=network)
        rows = sim.sweep(model, cluster, gpus=[gpus], schedulers=names, batch_size=32)
        for name, row in zip(names, rows.itertuples(), strict=True):
            res = sim.simulate(model, cluster, name, batch_size=32)
            ref = simulate_dag(model, cluster, name, batch_size=32)
            workers = simulate_workers(model, cluster, name, batch_size=32, iterations=10)
            for other in (ref.iteration_time_s, workers.iteration_time_s, row.iteration_time_s):
                assert other == pytest.approx(res.iteration_time_s, rel=1e-9), (name, gpus)
            for key in ("comm_s", "comm_hidden_s", "comm_exposed_s", "speedup"):
                assert getattr(row, key) == pytest.approx(res.metrics[key], rel=1e-9, abs=1e-15), (name, key)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_per_worker_metrics_have_every_metric_key_and_agree_without_noise(run):
    """The per-worker result's metrics are the one metrics dict (plus the per-worker figures),
    and with nothing varying they equal the aggregate run's."""
    model, cluster = sim.load_model("resnet50"), sim.Cluster(gpus=8, gpus_per_node=4)
    res = sim.simulate(model, cluster, batch_size=32, **run)
    workers = simulate_workers(model, cluster, batch_size=32, iterations=10, **run)
    assert set(sim.METRIC_KEYS) <= set(workers.metrics)
    for key in sim.METRIC_KEYS:
        want = res.metrics[key]
        got = workers.metrics[key]
        assert got == (pytest.approx(want, rel=1e-9, abs=1e-15) if isinstance(want, float) else want), key


@pytest.mark.parametrize("flags", [["--architecture", "ps", "--scheduler", "wfbp"],
                                   ["--scheduler", "horovod", "--cycle-time-ms", "20"],
                                   ["--method", "BSP-PS"], ["--method", "ByteScheduler-A2A"]])
def test_run_with_a_seed_and_no_noise_is_the_plain_run(flags, capsys):
    """The straggler flags switch `run` to the per-worker engine with the same method,
    architecture and knobs: with nothing varying, the iteration time is the plain run's."""
    import json

    from sim.cli import main

    base = ["run", "--model", "resnet50", "--gpus", "16", "--gpus-per-node", "4", "--batch-size", "32",
            "--format", "json", *flags]
    times = []
    for extra in ([], ["--straggler-dist", "constant", "--seed", "0"]):
        assert main(base + extra) == 0
        times.append(json.loads(capsys.readouterr().out)["iteration_time_s"])
    assert times[1] == pytest.approx(times[0], rel=1e-9)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
@pytest.mark.parametrize("io_ms", [0.0, 3.0])
def test_a_model_without_parameters_runs_its_compute_alone(run, io_ms):
    """Nothing to send: every scheduler and method runs the one-GPU iteration on any GPU count, its update
    included (a plan that updates per layer had no update task left, and DeAR on 2 GPUs came out 182 times
    faster than one GPU); with a batch to read, a plan that updates per layer reads it during the update."""
    model = dataclasses.replace(make_model([0, 0], [1.0, 2.0], [2.0, 4.0], update_ms=5.0), io_s=io_ms * 1e-3)
    serial = (1.0 + 2.0 + 2.0 + 4.0 + 5.0 + io_ms) * 1e-3
    for gpus in (1, 2, 64):
        res = _simulate(model, sim.Cluster(gpus=gpus, gpus_per_node=2 if gpus > 1 else 1), run)
        if res is None:
            continue
        m = res.metrics
        expected = serial - (min(5.0, io_ms) * 1e-3 if res.plan.per_layer_update else 0.0)
        assert m["iteration_time_s"] == pytest.approx(expected, rel=1e-9), gpus
        assert m["compute_s"] == pytest.approx(14e-3, rel=1e-9) and m["comm_s"] == 0.0
        assert m["scaling_efficiency"] == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("run", RUNS, ids=IDS)
def test_per_worker_timelines_run_one_task_at_a_time_on_a_lane(run):
    """Each worker's lane (and the shared channel) runs one task at a time, the wait rows included, with
    stragglers and jitter: the wait rows covered the per-layer updates of ByteScheduler and DeAR (a plan that
    updates per layer now adds none)."""
    model = make_model([4_000_000, 1_000_000, 2_000_000], [1.0, 1.0, 2.0], [2.0, 2.0, 3.0], update_ms=1.0)
    spec = StragglerSpec("lognormal", cv=0.5, stragglers=1, factor=2.0, jitter_cv=0.3)
    try:
        res = simulate_workers(model, sim.Cluster(gpus=4, gpus_per_node=2, alpha_s=5e-3, beta_s_per_byte=1e-9),
                               batch_size=4, iterations=4, straggler=spec, seed=7, **run)
    except sim.SimInputError as exc:
        assert any(s in str(exc) for s in ("needs architecture", "colocated", "needs network presets")), exc
        return
    tl = res.timeline
    for (worker, lane), rows in tl.groupby(["worker", "lane"]):
        rows = rows.sort_values(["start_s", "end_s"], kind="stable")
        gaps = rows.start_s.to_numpy()[1:] - rows.end_s.to_numpy()[:-1]
        assert (gaps >= -1e-12).all(), (worker, lane, rows.iloc[np.flatnonzero(gaps < -1e-12)[:2]])
