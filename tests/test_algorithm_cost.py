"""The algorithms' message time comes from one `sim.comm.CommCost`, `message_cost`."""

from __future__ import annotations

import pytest
from helpers import make_model

import sim
from sim.comm import CommCost
from sim.workers import algorithms
from sim.workers.algorithms import AlgorithmConfig, message_cost, simulate_algorithm

MS = 1e-3
#: data/networks.csv, row 10gbe: alpha 37.4 us, effective rate 9.33 Gb/s.
ALPHA_10GBE_S = 37.4e-6
BETA_10GBE_S_PER_BYTE = 8 / 9.33e9


def one_megabyte_model():
    """250 000 fp32 parameters, 1 MB on the wire; compute 10 ms a step."""
    return make_model([250_000], [10 / 3], [20 / 3])


def test_message_cost_of_10gbe_by_hand():
    # 1 MB over 10GbE: 37.4 us + 1e6 B x 8 / 9.33e9 b/s = 37.4 us + 857.449 us = 894.849 us
    cost = message_cost(sim.Cluster(gpus=2, network="10gbe"))
    assert isinstance(cost, CommCost)
    assert cost.message_time_s((0,), 1_000_000) == pytest.approx(894.849e-6, abs=1e-9)
    assert cost.message_time_s((0,), 1_000_000) == pytest.approx(
        ALPHA_10GBE_S + BETA_10GBE_S_PER_BYTE * 1_000_000, rel=1e-12)


@pytest.mark.parametrize("name", ["BSP", "ASP", "SSP", "EASGD", "GoSGD", "AD-PSGD"])
def test_every_message_takes_the_cost_objects_time(name):
    cluster = sim.Cluster(gpus=2, network="10gbe")
    res = simulate_algorithm(name, one_megabyte_model(), cluster, batch_size=8, steps=4,
                             config=AlgorithmConfig(tau=2, gossip_p=1.0))  # every algorithm sends in 4 steps
    assert res.metrics["model_bytes"] == 1_000_000
    assert res.metrics["message_s"] == message_cost(cluster).message_time_s((0,), 1_000_000)
    transfers = res.timeline.loc[res.timeline.kind.isin(["push", "pull", "gossip", "average"])]
    assert len(transfers) > 0
    assert transfers.duration_s.to_numpy() == pytest.approx(res.metrics["message_s"], rel=1e-9)


def test_a_changed_cost_object_changes_the_run(monkeypatch):
    # BSP, 2 workers, 2 steps (as in test_algorithms): the last push lands at 20 ms + 5 t.
    # With a cost of 1 ms a message whatever its size, that is 25 ms.
    monkeypatch.setattr(algorithms, "message_cost", lambda cluster: CommCost(1 * MS, 0.0, "1 ms a message"))
    res = simulate_algorithm("BSP", one_megabyte_model(), sim.Cluster(gpus=2, network="10gbe"), batch_size=8,
                             steps=2)
    assert res.metrics["message_s"] == 1 * MS
    assert res.metrics["time_s"] == pytest.approx(25 * MS, rel=1e-12)
