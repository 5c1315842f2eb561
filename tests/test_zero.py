"""Sharded data parallelism (ZeRO stages 1-3, FSDP full-shard), worked out on paper.

The three-layer model of tests/test_core.py: L0, L1, L2 with 1000, 2000,
3000 parameters (4000, 8000, 12000 bytes in fp32), forward 1 ms and backward
2 ms each, one update of 3 ms, no io or h2d. An all-reduce of M bytes costs
T(M) = 1 ms + 1e-7 s/B * M; a reduce-scatter or an all-gather T(M) / 2:
4000 B: 0.7 ms, 8000 B: 0.9 ms, 12000 B: 1.1 ms.
"""

from __future__ import annotations

import io
import json

import pytest
from helpers import make_model

import sim
from sim.cli import main
from sim.core import engine
from sim.core.cost import CommCost
from sim.core.lower import lower
from sim.core.plan import (
    SHARD_GRADIENTS,
    SHARD_NONE,
    SHARD_OPTIMIZER,
    SHARD_PARAMETERS,
    Plan,
    gradient_layers,
)
from sim.core.timeline import graph_timeline
from sim.schedulers.names import DDP, DEAR, WFBP, ZERO1, ZERO2, ZERO3
from sim.schedulers.registry import get_spec, make_plan

MS = 1e-3
COST = CommCost(1 * MS, 1e-7)
#: 0.008 MiB = 8388.6 bytes: L2 (12000 B) fills a bucket alone, L1 + L0 (12000 B) the next
SMALL_BUCKETS = {"reduce_bucket_mb": 0.008}


def three_layers(update_ms=3.0):
    return make_model([1000, 2000, 3000], [1, 1, 1], [2, 2, 2], update_ms=update_ms)


def times_of(plan, iterations=2):
    """``{task name: (start_ms, end_ms)}`` of the first ``iterations`` iterations by the engine."""
    graph = lower(three_layers(), plan, COST, iterations=max(iterations, 2))
    start, end = engine.run(graph)
    tl = graph_timeline(graph, start, end, iterations)
    return {row.name: (round(row.start_s / MS, 9), round(row.end_s / MS, 9)) for row in tl.itertuples()}


def plan_of(name, options=None):
    return make_plan(name, gradient_layers(three_layers(), "fp32"), COST, options=options)


@pytest.mark.parametrize("name", [ZERO1, ZERO2])
def test_stages_1_and_2_by_hand(name):
    """Reduce-scatter per bucket as backward produces it, one update, then the all-gathers."""
    plan = plan_of(name, SMALL_BUCKETS)
    assert plan.groups == ((2,), (1, 0))
    t = times_of(plan)
    assert t["it0/backward/L0"] == (7.0, 9.0)
    assert t["it0/comm/reduce-scatter:L2"] == (5.0, 6.1)  # hidden behind the backward of L1
    assert t["it0/comm/reduce-scatter:L1+L0"] == (9.0, 10.1)
    assert t["it0/update/0"] == (10.1, 13.1)
    assert t["it0/comm/all-gather:L2"] == (13.1, 14.2)
    assert t["it0/comm/all-gather:L1+L0"] == (14.2, 15.3)
    assert t["it1/forward/L0"] == (15.3, 16.3)  # the next forward waits for every all-gather
    assert t["it1/update/0"] == (25.4, 28.4)


@pytest.mark.parametrize("name", [ZERO1, ZERO2])
def test_stages_1_and_2_figures(name):
    res = sim.simulate(three_layers(), sim.Cluster(gpus=4, alpha_s=1 * MS, beta_s_per_byte=1e-7), name,
                       batch_size=1, options=SMALL_BUCKETS)
    m = res.metrics
    assert m["iteration_time_s"] == pytest.approx(15.3 * MS, rel=1e-12)
    assert m["comm_s"] == pytest.approx(4.4 * MS, rel=1e-12)  # 2 Psi: the volume of an all-reduce
    assert m["comm_hidden_s"] == pytest.approx(1.1 * MS, rel=1e-12)
    assert m["comm_exposed_s"] == pytest.approx(3.3 * MS, rel=1e-12)
    assert m["groups"] == [["L2"], ["L1", "L0"]]


def test_stage_3_by_hand():
    """Each unit's forward waits for its all-gather, issued one unit ahead (the first two as the iteration
    starts), in the first iteration too (the parameters live sharded from the start); each backward but the
    last unit's waits for its own. Every iteration is the first shifted by the period, 13.5."""
    plan = plan_of(ZERO3)
    assert plan.groups == ((2,), (1,), (0,)) and plan.shard == SHARD_PARAMETERS
    t = times_of(plan)
    for k, at in ((0, 0.0), (1, 13.5)):
        def tt(name, k=k):
            return t[f"it{k}/{name}"]

        def shifted(a, b, at=at):
            return (round(a + at, 1), round(b + at, 1))

        assert tt("comm/all-gather-fwd:L0") == shifted(0.0, 0.7)  # the first two issued as the iteration starts
        assert tt("comm/all-gather-fwd:L1") == shifted(0.7, 1.6)
        assert tt("forward/L0") == shifted(0.7, 1.7)
        assert tt("comm/all-gather-fwd:L2") == shifted(1.7, 2.8)  # issued as L0's forward ends (L1's starts)
        assert tt("forward/L1") == shifted(1.7, 2.7)
        assert tt("forward/L2") == shifted(2.8, 3.8)
        assert tt("comm/all-gather-bwd:L1") == shifted(3.8, 4.7)  # issued as the backward of L2 starts
        assert tt("backward/L2") == shifted(3.8, 5.8)  # the last unit stays gathered: no wait
        assert tt("comm/all-gather-bwd:L0") == shifted(5.8, 6.5)  # as the backward of L1 starts; before RS:L2
        assert tt("comm/reduce-scatter:L2") == shifted(6.5, 7.6)
        assert tt("backward/L1") == shifted(5.8, 7.8)
        assert tt("comm/reduce-scatter:L1") == shifted(7.8, 8.7)
        assert tt("backward/L0") == shifted(7.8, 9.8)
        assert tt("comm/reduce-scatter:L0") == shifted(9.8, 10.5)
        assert tt("update/0") == shifted(10.5, 13.5)


def test_stage_3_figures():
    res = sim.simulate(three_layers(), sim.Cluster(gpus=4, alpha_s=1 * MS, beta_s_per_byte=1e-7), ZERO3,
                       batch_size=1, iterations=3)
    m = res.metrics
    assert m["iteration_time_s"] == pytest.approx(13.5 * MS, rel=1e-12)
    # forward gathers 0.7 + 0.9 + 1.1, backward gathers 0.9 + 0.7, reduce-scatters 1.1 + 0.9 + 0.7 (about 3 Psi)
    assert m["comm_s"] == pytest.approx(7.0 * MS, rel=1e-12)
    assert m["comm_exposed_s"] == pytest.approx((13.5 - 12.0) * MS, rel=1e-12)
    tl = res.timeline
    assert (tl.loc[tl.kind == "comm", "lane"] == "comm").all()


def test_every_zero_step_moves_half_an_all_reduce():
    """Each reduce-scatter and all-gather of M bytes takes T(M) / 2 on the same cluster (the cost
    model alone: without communication slowed by the compute it overlaps)."""
    model, cluster = three_layers(), sim.Cluster(gpus=8, network="10gbe", comm_slowdown=0.0)
    res = sim.simulate(model, cluster, ZERO3, batch_size=1, iterations=2)
    cost = cluster.framework_cost(cluster.comm_cost(res.model), ZERO3)  # with the framework's per-message cost
    comm = res.timeline[res.timeline.kind == "comm"]
    for row in comm.itertuples():
        assert row.duration_s == pytest.approx(0.5 * float(cost.time_s(row.bytes)), rel=1e-12), row.name


def test_zero_refuses_the_parameter_server():
    for name in (ZERO1, ZERO2, ZERO3):
        with pytest.raises(sim.SimInputError, match="needs architecture 'allreduce'"):
            sim.simulate(three_layers(), sim.Cluster(gpus=4), name, batch_size=1, architecture="ps")


def test_existing_plans_stay_unsharded():
    grads = gradient_layers(three_layers(), "fp32")
    for name in (WFBP, DDP, DEAR):
        assert make_plan(name, grads, COST).shard == SHARD_NONE
        assert get_spec(name).shard == SHARD_NONE
    assert Plan("x", ((0,),), shard=SHARD_OPTIMIZER).is_plain is False


def test_reduce_bucket_knob_is_checked():
    with pytest.raises(sim.SimInputError, match="reduce_bucket_mb must be > 0"):
        plan_of(ZERO1, {"reduce_bucket_mb": 0})
    assert plan_of(ZERO2).groups == ((2, 1, 0),)  # 25 MiB by default: one bucket


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_runs_zero3_and_the_knob_applies_to_zero1_and_zero2():
    code, out, err = run_cli("run", "--model", "tests/data/tiny.csv", "--gpus", "4", "--scheduler", ZERO3,
                             "--format", "json")
    assert code == 0, err
    assert json.loads(out)["scheduler"] == ZERO3
    code, out, err = run_cli("run", "--model", "tests/data/tiny.csv", "--gpus", "4", "--scheduler", WFBP,
                             "--reduce-bucket-mb", "5")
    assert code == 2 and err == "error: --reduce-bucket-mb does nothing for scheduler wfbp; it applies to: zero1, zero2\n"


# --- memory: the ZeRO paper's model-state formulas (Sec. 5.1, Figure 1) ------------------------

GB = 1e9


def model_states_bytes(params: float, gpus: int, shard: str, k: int = 12) -> float:
    """Model-state bytes per GPU, mixed-precision Adam (2 bytes of fp16 parameters and of
    fp16 gradients per parameter, K = 12 bytes of optimizer state): ZeRO paper, Sec. 5.1."""
    weights, grads, states = 2.0 * params, 2.0 * params, float(k) * params
    if shard in (SHARD_OPTIMIZER, SHARD_GRADIENTS, SHARD_PARAMETERS):
        states /= gpus
    if shard in (SHARD_GRADIENTS, SHARD_PARAMETERS):
        grads /= gpus
    if shard == SHARD_PARAMETERS:
        weights /= gpus
    return weights + grads + states


@pytest.mark.parametrize("shard, formula, published_gb", [
    (SHARD_NONE, lambda p, n, k: (2 + 2 + k) * p, 120),
    (SHARD_OPTIMIZER, lambda p, n, k: 2 * p + 2 * p + k * p / n, 31.4),
    (SHARD_GRADIENTS, lambda p, n, k: 2 * p + (2 + k) * p / n, 16.6),
    (SHARD_PARAMETERS, lambda p, n, k: (2 + 2 + k) * p / n, 1.9),
])
def test_the_zero_memory_formulas(shard, formula, published_gb):
    """Figure 1 of the paper: Psi = 7.5 B parameters, N_d = 64, K = 12."""
    psi, nd, k = 7.5e9, 64, 12
    assert model_states_bytes(psi, nd, shard, k) == pytest.approx(formula(psi, nd, k), rel=1e-12)
    assert model_states_bytes(psi, nd, shard, k) / GB == pytest.approx(published_gb, abs=0.05)


def test_each_zero_spec_declares_its_shard_level():
    assert [get_spec(n).shard for n in (ZERO1, ZERO2, ZERO3)] == [SHARD_OPTIMIZER, SHARD_GRADIENTS, SHARD_PARAMETERS]
    assert [plan_of(n).shard for n in (ZERO1, ZERO2, ZERO3)] == [SHARD_OPTIMIZER, SHARD_GRADIENTS, SHARD_PARAMETERS]


def test_tune_tries_the_reduce_bucket():
    """A knob a scheduler module declares (kept in SchedulerOptions.extra) is tuned like the others."""
    from sim.tune import tune

    res = tune(three_layers(), sim.Cluster(gpus=4, alpha_s=1 * MS, beta_s_per_byte=1e-7), "reduce-bucket-mb",
               [0.008, 25], batch_size=1)
    assert res.frame["scheduler"].tolist() == [ZERO1, ZERO1]
    # 0.008 MiB: two buckets, 15.3 ms (worked out above); 25 MiB: one bucket of 24,000 B (1.7 ms a step):
    # reduce-scatter 9 -> 10.7, update -> 13.7, all-gather -> 15.4 ms
    assert res.frame["iteration_time_s"].tolist() == pytest.approx([15.3 * MS, 15.4 * MS], rel=1e-12)
    assert res.best["value"] == 0.008


def test_the_task_estimate_bounds_the_sharded_graphs():
    from sim.core.run import estimated_tasks

    model = three_layers()
    for name in (ZERO1, ZERO3):
        plan = plan_of(name, SMALL_BUCKETS if name == ZERO1 else None)
        graph = lower(model, plan, COST, iterations=3)
        assert len(graph.kind) <= estimated_tasks(model, plan, "fp32", 3)
