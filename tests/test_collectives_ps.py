"""The survey's extra collectives and the parameter-server cost, against hand values."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.comm import (
    COLLECTIVES,
    Link,
    double_binary_tree,
    hierarchical,
    ps,
    ps_cost,
    ring,
    torus_2d,
)
from sim.errors import SimInputError

INTRA = Link(1e-6, 1e-10)
INTER = Link(1e-5, 1e-9)
M = 1e6


def t(cost, m=M):
    return float(cost.time_s(m))


def test_registered():
    assert {"torus_2d", "double_binary_tree", "ps"} <= set(COLLECTIVES)


class TestTorus2D:
    def test_sixteen_nodes_one_gpu_is_a_four_by_four_grid(self):
        # X = Y = 4, all links inter: 2*3 + 2*3 latencies; 2*3/4 M beta + 2*3/4 M/4 beta
        expect = 12 * 1e-5 + (1.5 + 0.375) * 1e-9 * M
        assert t(torus_2d(16, 1, INTRA, INTER, 0.0)) == pytest.approx(expect, rel=1e-12)

    def test_same_bandwidth_term_as_ring_fewer_latencies(self):
        tor, rin = torus_2d(16, 1, INTRA, INTER, 0.0), ring(16, 1, INTRA, INTER, 0.0)
        assert tor.beta_s_per_byte == pytest.approx(rin.beta_s_per_byte, rel=1e-12)
        assert tor.alpha_s == pytest.approx(12e-5) and rin.alpha_s == pytest.approx(30e-5)

    def test_rows_inside_nodes_equal_hierarchical(self):
        a, b = torus_2d(4, 4, INTRA, INTER, 1e-12), hierarchical(4, 4, INTRA, INTER, 1e-12)
        assert (a.alpha_s, a.beta_s_per_byte) == pytest.approx((b.alpha_s, b.beta_s_per_byte), rel=1e-12)

    def test_prime_node_count_degenerates_to_ring(self):
        a, b = torus_2d(7, 1, INTRA, INTER, 0.0), ring(7, 1, INTRA, INTER, 0.0)
        assert (a.alpha_s, a.beta_s_per_byte) == pytest.approx((b.alpha_s, b.beta_s_per_byte), rel=1e-12)


class TestDoubleBinaryTree:
    def test_eight_nodes_of_four(self):
        # 2 (lg 8 alpha_e + 3 alpha_i); the first 256 KiB chunk crosses every hop at that hop's rate,
        # 2 (lg 8 beta_e + 3 beta_i) C; the rest streams through the slowest link, 2 (M - C) beta_e
        c = 262144
        expect = 2 * (3 * 1e-5 + 3 * 1e-6) + 2 * (3 * 1e-9 + 3 * 1e-10) * c + 2 * 1e-9 * (M - c)
        assert t(double_binary_tree(8, 4, INTRA, INTER, 0.0)) == pytest.approx(expect, rel=1e-12)

    def test_a_message_smaller_than_a_chunk_is_one_chunk(self):
        # 100 kB < 256 KiB: the message crosses every hop once, each at its own rate, and nothing more
        small = 1e5
        expect = 2 * (3 * 1e-5 + 3 * 1e-6) + 2 * (3 * 1e-9 + 3 * 1e-10) * small
        cost = double_binary_tree(8, 4, INTRA, INTER, 0.0)
        assert float(cost.time_s(small)) == pytest.approx(expect, rel=1e-12)
        left, right = float(cost.time_s(262144 * (1 - 1e-12))), float(cost.time_s(262144))
        assert left == pytest.approx(right, rel=1e-9)  # continuous where the pipeline starts
        # without the fill (chunk 0): hop latencies and 2 M beta, the model before it
        bare = double_binary_tree(8, 4, INTRA, INTER, 0.0, chunk_bytes=0)
        assert float(bare.time_s(small)) == pytest.approx(2 * (3 * 1e-5 + 3 * 1e-6) + 2 * 1e-9 * small, rel=1e-12)

    def test_latency_grows_with_log_of_nodes(self):
        a16 = double_binary_tree(16, 1, INTRA, INTER, 0.0).alpha_s
        a1024 = double_binary_tree(1024, 1, INTRA, INTER, 0.0).alpha_s
        assert a16 == pytest.approx(8e-5) and a1024 == pytest.approx(20e-5)

    def test_gamma(self):
        d = t(double_binary_tree(4, 1, INTRA, INTER, 2e-12)) - t(double_binary_tree(4, 1, INTRA, INTER, 0.0))
        assert d == pytest.approx(2e-6)


class TestParameterServer:
    def test_separate_servers_as_many_as_workers(self):
        # 8 nodes x 4 GPUs, S = 8: push = 3 alpha_i + alpha_e + M (3/4 beta_i + beta_e)
        c = ps_cost(8, 4, INTRA, INTER)
        assert float(c.push_time_s(M)) == pytest.approx(3e-6 + 1e-5 + (0.75e-10 + 1e-9) * M, rel=1e-12)
        assert float(c.pull_time_s(M)) == pytest.approx(float(c.push_time_s(M)), rel=1e-12)
        assert not c.shared_lane

    def test_fewer_servers_bottleneck_the_server_link(self):
        # 8 workers, 2 servers: each server receives 8 M / 2 = 4 M bytes
        c = ps_cost(8, 1, INTRA, INTER, servers=2)
        assert float(c.push_time_s(M)) == pytest.approx(1e-5 + 4e-9 * M, rel=1e-12)

    def test_credit_limits_busy_servers(self):
        c = ps_cost(8, 1, INTRA, INTER, servers=8, in_flight=2)
        assert c.push_beta_s_per_byte == pytest.approx(4e-9)

    def test_colocated_moves_the_ring_volume(self):
        # S = N = 4 on the workers: (N-1)/N M each way, push and pull share the uplink
        c = ps_cost(4, 1, INTRA, INTER, colocated=True)
        assert c.shared_lane
        assert float(c.push_time_s(M) + c.pull_time_s(M)) == pytest.approx(2e-5 + 1.5e-9 * M, rel=1e-12)

    def test_one_node_is_the_node_reduce_and_broadcast(self):
        assert t(ps(1, 4, INTRA, INTER, 0.0)) == pytest.approx(t(ring(1, 4, INTRA, INTER, 0.0)), rel=1e-12)

    def test_collective_is_push_plus_pull(self):
        assert t(ps(4, 1, INTRA, INTER, 0.0)) == pytest.approx(2 * (1e-5 + 1e-9 * M), rel=1e-12)

    @pytest.mark.parametrize("kw, match", [({"servers": 0}, "servers"), ({"servers": 3, "colocated": True}, "colocated")])
    def test_bad_servers(self, kw, match):
        with pytest.raises(SimInputError, match=match):
            ps_cost(4, 1, INTRA, INTER, **kw)

    @given(st.integers(1, 64), st.integers(1, 8), st.integers(1, 32), st.integers(1, 5000) )
    def test_more_servers_never_slower(self, nodes, k, s, mb):
        a = ps_cost(nodes, k, INTRA, INTER, servers=s)
        b = ps_cost(nodes, k, INTRA, INTER, servers=2 * s)
        assert float(b.push_time_s(mb * 1e3)) <= float(a.push_time_s(mb * 1e3)) + 1e-15
