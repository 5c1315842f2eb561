"""All-reduce cost formulas against values worked out by hand (Thakur et al. 2005)."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sim
from sim.comm import (
    Link,
    allreduce_cost,
    binary_tree,
    hierarchical,
    recursive_doubling,
    recursive_halving_doubling,
    ring,
)

INTRA = Link(1e-6, 1e-10)
INTER = Link(1e-5, 1e-9)
M = 1e6


def t(cost, m=M):
    return float(cost.time_s(m))


class TestRing:
    def test_four_nodes_one_gpu_each(self):
        # 2(P-1) alpha + 2(P-1)/P M beta = 6e-5 + 1.5e-3
        assert t(ring(4, 1, INTRA, INTER, 0.0)) == pytest.approx(6e-5 + 1.5e-9 * M, rel=1e-12)

    def test_gamma_term(self):
        # (P-1)/P M gamma = 0.75 * 1e6 * 2e-12
        assert t(ring(4, 1, INTRA, INTER, 2e-12)) - t(ring(4, 1, INTRA, INTER, 0.0)) == pytest.approx(1.5e-6)

    def test_single_node_uses_intra_link(self):
        assert t(ring(1, 4, INTRA, INTER, 0.0)) == pytest.approx(6e-6 + 1.5e-10 * M, rel=1e-12)

    def test_mixed_cluster_is_bound_by_slowest_link(self):
        # 2 nodes x 2 GPUs, P = 4: every step as slow as the inter-node edge
        assert t(ring(2, 2, INTRA, INTER, 0.0)) == pytest.approx(6e-5 + 1.5e-9 * M, rel=1e-12)


class TestTree:
    def test_eight_nodes(self):
        # reduce + broadcast: 2 * 3 (alpha + M beta)
        assert t(binary_tree(8, 1, INTRA, INTER, 0.0)) == pytest.approx(6 * (1e-5 + 1e-3), rel=1e-12)

    def test_two_by_two_splits_steps_between_links(self):
        # one intra step and one inter step each way
        expect = 2 * (1e-6 + 1e-10 * M) + 2 * (1e-5 + 1e-9 * M)
        assert t(binary_tree(2, 2, INTRA, INTER, 0.0)) == pytest.approx(expect, rel=1e-12)


class TestRecursiveDoubling:
    def test_power_of_two(self):
        assert t(recursive_doubling(8, 1, INTRA, INTER, 0.0)) == pytest.approx(3 * (1e-5 + 1e-3), rel=1e-12)

    def test_non_power_of_two_adds_two_steps(self):
        # P = 6: lg 4 = 2 steps, plus 2 alpha + 2 M beta for the extra ranks
        assert t(recursive_doubling(6, 1, INTRA, INTER, 0.0)) == pytest.approx(4 * (1e-5 + 1e-3), rel=1e-12)

    def test_shared_interface_carries_k_messages(self):
        # 2 nodes x 2 GPUs: 1 intra step (M), 1 inter step with 2 GPUs sharing the NIC (2M)
        expect = (1e-6 + 1e-10 * M) + (1e-5 + 2e-9 * M)
        assert t(recursive_doubling(2, 2, INTRA, INTER, 0.0)) == pytest.approx(expect, rel=1e-12)


class TestHalvingDoubling:
    def test_power_of_two(self):
        expect = 2 * 3 * 1e-5 + 2 * (7 / 8) * 1e-9 * M
        assert t(recursive_halving_doubling(8, 1, INTRA, INTER, 0.0)) == pytest.approx(expect, rel=1e-12)


class TestHierarchical:
    def test_two_by_two(self):
        # intra RS + AG: 2 alpha_i + 2 * 1/2 M beta_i; inter ring of 2 nodes: 2 alpha_e + 2 * 1/2 M beta_e
        expect = 2e-6 + 1e-10 * M + 2e-5 + 1e-9 * M
        assert t(hierarchical(2, 2, INTRA, INTER, 0.0)) == pytest.approx(expect, rel=1e-12)

    @given(st.integers(2, 64), st.booleans())
    def test_degenerates_to_ring_on_one_level(self, p, across_nodes):
        nodes, k = (p, 1) if across_nodes else (1, p)
        h = hierarchical(nodes, k, INTRA, INTER, 3e-12)
        r = ring(nodes, k, INTRA, INTER, 3e-12)
        assert h.alpha_s == pytest.approx(r.alpha_s, rel=1e-12)
        assert h.beta_s_per_byte == pytest.approx(r.beta_s_per_byte, rel=1e-12)


@given(st.integers(1, 32), st.integers(1, 8), st.floats(0, 1e9))
def test_nccl_runs_the_faster_of_ring_and_tree(nodes, k, m):
    """collective 'nccl' (NCCL's per-size choice): min(ring, double binary tree) at every size;
    rings inside one node."""
    from sim.comm import double_binary_tree, nccl, ring

    intra, inter = Link(7e-6, 1e-10), Link(3.7e-5, 8.6e-10)
    got = float(nccl(nodes, k, intra, inter, 0.0).time_s(m))
    r = float(ring(nodes, k, intra, inter, 0.0).time_s(m))
    want = r if nodes == 1 else min(r, float(double_binary_tree(nodes, k, intra, inter, 0.0).time_s(m)))
    assert got == pytest.approx(want, rel=1e-9, abs=1e-15)


@given(st.sampled_from(sorted(sim.COLLECTIVES)), st.integers(1, 32), st.integers(1, 8),
       st.floats(0, 1e9), st.floats(0, 1e9))
def test_costs_are_piecewise_affine_continuous_nonnegative_and_monotone(name, nodes, k, m1, m2):
    """Every collective is affine in M, or piecewise affine where it cuts size regimes of its own
    (the tree's chunk, nccl's choice): continuous at every cut, so never cheaper for more bytes."""
    cost = allreduce_cost(name, nodes, k, INTRA, INTER, 1e-12)
    lo, hi = sorted((m1, m2))
    assert 0 <= float(cost.time_s(lo)) <= float(cost.time_s(hi))
    if not cost.regimes:
        assert math.isclose(float(cost.time_s(lo)), cost.alpha_s + cost.beta_s_per_byte * lo, rel_tol=1e-12)
    for before, r in zip(cost.regimes[:-1], cost.regimes[1:], strict=True):
        left = before.alpha_s + before.beta_s_per_byte * r.from_bytes
        assert math.isclose(left, r.alpha_s + r.beta_s_per_byte * r.from_bytes, rel_tol=1e-9)


def test_one_gpu_is_free():
    assert allreduce_cost("ring", 1, 1, INTRA, INTER).is_free
    assert sim.Cluster(gpus=1).comm_cost().is_free


def test_user_alpha_beta_override_ignores_p_and_collective():
    for p, coll in [(2, "ring"), (64, "binary_tree"), (16, "hierarchical")]:
        c = sim.Cluster(gpus=p, gpus_per_node=2 if coll == "hierarchical" else 1, collective=coll,
                        alpha_s=2e-4, beta_s_per_byte=3e-10)
        assert float(c.comm_cost().time_s(1e6)) == pytest.approx(2e-4 + 3e-4, rel=1e-12)


def test_unknown_collective_lists_valid_ones():
    with pytest.raises(sim.SimInputError, match="valid: ring"):
        sim.Cluster(gpus=4, collective="butterfly")


@given(st.lists(st.tuples(st.floats(0, 1e-2), st.floats(0, 1e-8), st.floats(1, 1e7), st.floats(0, 1e-2),
                          st.floats(0, 1e-8)), min_size=1, max_size=4),
       st.floats(0, 1e8))
def test_lower_envelope_is_the_cheapest_cost_at_every_size(specs, m):
    """`lower_envelope` (nccl's choice) costs what the cheapest of its costs costs, at every size."""
    from sim.core.cost import CommCost, Regime, lower_envelope

    costs = [CommCost.piecewise([Regime(0.0, a1, b1), Regime(cut, a2, b2)]) for a1, b1, cut, a2, b2 in specs]
    env = lower_envelope(costs, "min")
    want = min(float(c.time_s(m)) for c in costs)
    assert float(env.time_s(m)) == pytest.approx(want, rel=1e-9, abs=1e-15)


def test_tree_chunk_bytes_zero_is_the_tree_without_its_pipeline_fill():
    """Cluster(tree_chunk_bytes=0): the double binary tree costs its hops' latencies and 2 M beta alone
    (the model before the fill); the default fills the pipeline with NCCL's 256 KiB chunk."""
    from sim.comm import TREE_CHUNK_BYTES

    kw = dict(gpus=16, gpus_per_node=4, network="10gbe", collective="double_binary_tree")
    plain = sim.Cluster(**kw, tree_chunk_bytes=0).comm_cost()
    intra, inter = sim.Cluster(**kw).links()
    assert not plain.regimes
    assert plain.alpha_s == pytest.approx(2 * (2 * inter.alpha_s + 3 * intra.alpha_s))
    assert plain.beta_s_per_byte == pytest.approx(2 * max(inter.beta_s_per_byte, intra.beta_s_per_byte))
    filled = sim.Cluster(**kw).comm_cost()
    hops_s_per_byte = 2 * (2 * inter.beta_s_per_byte + 3 * intra.beta_s_per_byte)  # a byte through every hop
    stream_s_per_byte = plain.beta_s_per_byte
    for m in (1e3, 1e5, 1e7):
        first = min(m, TREE_CHUNK_BYTES)  # the first chunk fills the pipeline; the rest streams
        want = plain.alpha_s + hops_s_per_byte * first + stream_s_per_byte * (m - first)
        assert float(filled.time_s(m)) == pytest.approx(want, rel=1e-12)
        assert float(filled.time_s(m)) > float(plain.time_s(m))
    ring = sim.Cluster(**{**kw, "collective": "ring"})
    assert sim.Cluster(**{**kw, "collective": "ring"}, tree_chunk_bytes=0).comm_cost() == ring.comm_cost()


@given(st.sampled_from(["nccl", "double_binary_tree", "ring"]), st.integers(2, 16), st.integers(1, 8))
def test_the_links_size_regimes_and_a_collectives_own_combine(collective, nodes, k):
    """Links with measured size regimes under a collective that cuts its own (nccl's tree then ring, the tree's
    chunk): at every size the cost is the collective's formula on the links of that size's regime."""
    from sim.core.cost import Regime

    intra = Link(7e-6, 1e-10, (Regime(0.0, 7e-6, 1e-10), Regime(8192.0, 2e-5, 8e-11)))
    inter = Link(5e-6, 1.2e-9, (Regime(0.0, 5e-6, 1.2e-9), Regime(65536.0, 6.8e-5, 7e-10),
                                Regime(524288.0, 1.5e-4, 6e-10)))
    cost = allreduce_cost(collective, nodes, k, intra, inter)
    for m in np.geomspace(1.0, 1e9, 400):
        want = float(sim.COLLECTIVES[collective](nodes, k, intra.at(m), inter.at(m), 0.0).time_s(m))
        assert float(cost.time_s(m)) == pytest.approx(want, rel=1e-9)
