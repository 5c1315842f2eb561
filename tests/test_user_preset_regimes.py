"""A user's preset that replaces a built-in one is its own line: the built-in's measured size-regime
table (`sim.topology.network_regimes`, data/network_regimes.csv) describes the built-in's link only.

Before, `fit-network --save --overwrite-builtin` of ``10gbe-k80-osu`` (the preset with OSU tables) left the
OSU tables in force for every message size they cover, so the user's fitted line was never used
(hostile review of shared state)."""

import pytest

import sim
from sim.catalog import USER_NETWORKS_ENV, is_builtin_network, save_network

NAME = "10gbe-k80-osu"


@pytest.fixture
def presets_file(tmp_path, monkeypatch):
    path = tmp_path / "networks.csv"
    monkeypatch.setenv(USER_NETWORKS_ENV, str(path))
    return path


def cost_of(cluster):
    return cluster.comm_cost()


def test_the_builtin_preset_keeps_its_measured_table(presets_file):
    assert is_builtin_network(NAME)
    cost = cost_of(sim.Cluster(gpus=8, gpus_per_node=1, network=NAME))
    assert cost.regimes  # the OSU tables


def test_a_user_preset_of_that_name_is_its_own_line(presets_file):
    save_network({"name": NAME, "scope": "inter", "line_rate_gbps": 10, "effective_gbps": 9.0, "alpha_us": 5,
                  "source": "nccl-tests on our cluster"}, overwrite_builtin=True)
    assert not is_builtin_network(NAME)
    cluster = sim.Cluster(gpus=8, gpus_per_node=1, network=NAME)
    cost = cost_of(cluster)
    assert not cost.regimes
    # the user's line for a 1 MiB message on a ring of 8: 2 (P-1) alpha + 2 (P-1)/P M / rate
    ring_s = 14 * 5e-6 + 2 * 7 / 8 * 2**20 * 8 / 9.0e9
    assert cost.time_s(2**20) == pytest.approx(ring_s, rel=0.05)


def test_unknown_and_new_names_are_not_builtin(presets_file):
    save_network({"name": "mynet", "scope": "inter", "line_rate_gbps": 10, "effective_gbps": 9.0, "alpha_us": 5,
                  "source": "nccl-tests on our cluster"})
    assert not is_builtin_network("mynet")
    assert not is_builtin_network("no-such-network")
    assert is_builtin_network("10gbe")
