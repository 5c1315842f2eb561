"""Node topologies (`sim.topology`, `sim.comm.topology_links`): NICs shared by the GPUs of a node,
the path across the CPU socket to the NIC, and partly connected NVLink meshes (DGX-1)."""

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.catalog import get_network
from sim.cli import main
from sim.comm import Link, allreduce_cost
from sim.topology import get_topology, topologies

EDR = 8 / (96 * 1e9)  # ib-edr-100 effective 96 Gb/s
PATH = get_network("pcie3").beta_s_per_byte  # pcie3's effective rate (fitted, data/networks.csv)
NVL = get_network("nvlink2").beta_s_per_byte  # nvlink2's effective rate (fitted, data/networks.csv)


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def dgx(gpus=16, k=8, collective="ring", **kw):
    return sim.Cluster(gpus=gpus, gpus_per_node=k, intra="nvlink2", network="ib-edr-100", collective=collective, **kw)


class TestFlatKeepsTheOldModel:
    @pytest.mark.parametrize("collective", sorted(sim.COLLECTIVES))
    def test_flat_is_the_formula_on_the_presets(self, collective):
        c = sim.Cluster(gpus=32, gpus_per_node=4, network="10gbe", intra="pcie3", collective=collective)
        intra, inter = get_network("pcie3"), get_network("10gbe")
        want = allreduce_cost(collective, 8, 4, Link(intra.alpha_s, intra.beta_s_per_byte),
                              Link(inter.alpha_s, inter.beta_s_per_byte))
        assert c.comm_cost() == want
        assert sim.Cluster(gpus=32, gpus_per_node=4, network="10gbe", intra="pcie3", collective=collective,
                           topology="flat").comm_cost() == want

    def test_every_preset_cites_a_source(self):
        assert {t.name for t in topologies()} >= {"flat", "dgx1", "dgx1-4nic", "pcie-2socket"}
        assert all(t.source for t in topologies())


class TestNicPath:
    def test_ring_streams_through_the_socket_path(self):
        """One NIC reached by GPUs 4-7 across the socket: NCCL sends from a distant GPU, so the
        ring's network edge runs at the slower of NIC and path (pcie3, 36.9 Gb/s < 96)."""
        cost = dgx(topology="dgx1").comm_cost()
        f = 2 * 15 / 16
        assert cost.beta_s_per_byte == pytest.approx(f * PATH, rel=1e-12)
        flat = dgx(topology="flat").comm_cost()
        assert flat.beta_s_per_byte == pytest.approx(f * EDR, rel=1e-12)
        alpha = 2 * 15 * (get_network("ib-edr-100").alpha_s + get_network("pcie3").alpha_s)
        assert cost.alpha_s == pytest.approx(alpha, rel=1e-12)

    def test_hierarchical_spreads_over_near_and_far_gpus(self):
        """Half the node's shards cross the path: beta_e becomes max(beta_e, 0.5 beta_path), which is
        0.5 beta_path with pcie3 at 36.9 Gb/s; across N = 2 nodes the ring term 2 (N-1)/N beta_e grows by that much."""
        cost = dgx(collective="hierarchical", topology="dgx1").comm_cost()
        flat = dgx(collective="hierarchical").comm_cost()
        assert cost.beta_s_per_byte - flat.beta_s_per_byte == pytest.approx(max(EDR, 0.5 * PATH) - EDR, rel=1e-9)
        assert cost.alpha_s == pytest.approx(flat.alpha_s + 2 * get_network("pcie3").alpha_s, rel=1e-12)

    def test_no_far_gpu_no_path(self):
        """Four GPUs a node: all on the NIC's socket."""
        near = dgx(gpus=8, k=4, topology="dgx1").comm_cost()
        scaled = sim.Cluster(gpus=8, gpus_per_node=4, intra="nvlink2", network="ib-edr-100").comm_cost()
        assert near.alpha_s == scaled.alpha_s

    def test_overrides(self):
        c = sim.Cluster(gpus=8, gpus_per_node=4, network="ib-edr-100", nic_near_gpus=2, nic_path="pcie3")
        assert c.comm_cost().beta_s_per_byte == pytest.approx(2 * 7 / 8 * PATH, rel=1e-12)

    def test_parameter_server_uses_the_topology(self):
        ps = dgx(topology="dgx1").ps_cost()
        flat = dgx().ps_cost()
        assert ps.push_beta_s_per_byte > flat.push_beta_s_per_byte


class TestNics:
    def test_two_nics_halve_the_node_network_time(self):
        one = sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe", collective="hierarchical").comm_cost()
        two = sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe", collective="hierarchical",
                          nics_per_node=2).comm_cost()
        inter = 2 * 3 / 4 * get_network("10gbe").beta_s_per_byte
        assert one.beta_s_per_byte - two.beta_s_per_byte == pytest.approx(inter / 2, rel=1e-12)

    def test_no_more_nics_used_than_gpus(self):
        c = sim.Cluster(gpus=4, gpus_per_node=1, network="10gbe", nics_per_node=4)
        assert c.comm_cost() == sim.Cluster(gpus=4, gpus_per_node=1, network="10gbe").comm_cost()


class TestNvlinkMesh:
    @pytest.mark.parametrize("k, rings", [(2, 2), (4, 4), (8, 6)])
    def test_rings_over_the_cube_mesh(self, k, rings):
        """Inside one DGX-1 node a ring runs at rings / 6 of the six-link rate."""
        cost = dgx(gpus=k, k=k, topology="dgx1").comm_cost()
        assert cost.beta_s_per_byte == pytest.approx(2 * (k - 1) / k * NVL * 6 / rings, rel=1e-12)
        assert get_topology("dgx1").intra_scale(k) == rings / 6


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(sim.COLLECTIVES)), st.sampled_from([1, 2, 4, 8]), st.sampled_from([1, 2, 4]),
       st.sampled_from(["dgx1", "dgx1-4nic", "pcie-2socket"]), st.integers(1, 1 << 26))
def test_a_topology_never_makes_one_nic_faster(collective, k, nodes, topology, nbytes):
    """dgx1 and pcie-2socket only slow a flat node down; dgx1-4nic gains only by its extra NICs."""
    flat = dgx(gpus=k * nodes, k=k, collective=collective).comm_cost()
    topo = dgx(gpus=k * nodes, k=k, collective=collective, topology=topology).comm_cost()
    if topology != "dgx1-4nic":
        assert float(topo.time_s(nbytes)) >= float(flat.time_s(nbytes)) * (1 - 1e-12)
    else:
        one_nic = dgx(gpus=k * nodes, k=k, collective=collective, topology=topology, nics_per_node=1).comm_cost()
        assert float(topo.time_s(nbytes)) <= float(one_nic.time_s(nbytes)) * (1 + 1e-12)


class TestBadInput:
    @pytest.mark.parametrize("kw, match", [
        ({"topology": "dgx2"}, "unknown topology 'dgx2'; valid: flat"),
        ({"nic_path": "pcie3"}, "nic_path 'pcie3' needs nic_near_gpus"),
        ({"nics_per_node": 0}, "nics_per_node"),
        ({"nic_near_gpus": -1}, "nic_near_gpus"),
        ({"topology": "dgx1", "intra": "nvlink2", "nic_path": "nope"}, "nope"),
        ({"size_regimes": "yes"}, "size_regimes must be true or false"),
        ({"topology": "dgx1", "intra": "pcie3"}, "topology 'dgx1' is built of intra link 'nvlink2', not 'pcie3'"),
    ])
    def test_cluster(self, kw, match):
        with pytest.raises(sim.SimInputError, match=match):
            sim.Cluster(gpus=16, gpus_per_node=8, **kw)

    def test_a_dgx1_node_has_eight_gpus(self):
        with pytest.raises(sim.SimInputError, match="at most 8 GPUs a node, got gpus_per_node = 16"):
            sim.Cluster(gpus=32, gpus_per_node=16, intra="nvlink2", topology="dgx1")

    @pytest.mark.parametrize("argv, match", [
        (["--topology", "dgx2"], "unknown topology"),
        (["--topology", "dgx1"], "--intra nvlink2"),
        (["--nic-path", "pcie3"], "needs nic_near_gpus"),
        (["--nics-per-node", "0"], "--nics-per-node"),
    ])
    def test_cli(self, argv, match):
        code, _, err = cli("run", "--model", "resnet50", "--gpus", "16", "--gpus-per-node", "8", *argv)
        assert code == 2 and match in err and err.count("\n") == 1


def test_cli_flags_reach_the_cluster():
    base = ["run", "--model", "resnet50", "--gpus", "16", "--gpus-per-node", "8", "--intra", "nvlink2",
            "--network", "ib-edr-100", "--format", "json"]
    _, flat, _ = cli(*base)
    code, topo, err = cli(*base, "--topology", "dgx1")
    assert code == 0, err
    assert json.loads(topo)["alpha_s"] > json.loads(flat)["alpha_s"]
    k80 = ["run", "--model", "resnet50", "--gpus", "8", "--network", "10gbe-k80-osu", "--format", "json"]
    code, regimes, err = cli(*k80, "--size-regimes")
    assert code == 0 and err == "", err
    code, line, err = cli(*k80, "--no-size-regimes")
    assert code == 0 and err == "", err
    _, default, _ = cli(*k80)
    assert json.loads(regimes) == json.loads(default)  # the preset's measured table is the default
    assert json.loads(regimes)["iteration_time_s"] < json.loads(line)["iteration_time_s"]
