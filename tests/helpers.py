"""Small builders shared by the tests."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

import sim
from sim.dag import gradient_layers
from sim.schedulers import comm_end_s


def make_model(params, fwd_ms, bwd_ms, name="m", **kw) -> sim.Model:
    n = len(params)
    frame = pd.DataFrame(
        {"name": [f"L{i}" for i in range(n)], "params": params, "fwd_ms": fwd_ms, "bwd_ms": bwd_ms}
    )
    return sim.model_from_frame(frame, name, **kw)


def user_cluster(gpus=4, alpha_s=1e-3, beta_s_per_byte=1e-9) -> sim.Cluster:
    """A cluster whose every all-reduce of M bytes takes alpha + beta*M."""
    return sim.Cluster(gpus=gpus, alpha_s=alpha_s, beta_s_per_byte=beta_s_per_byte)


def groupings(n: int):
    """Every way to cut n items (in sending order) into consecutive runs."""
    for cuts in itertools.product((False, True), repeat=max(n - 1, 0)):
        runs, start = [], 0
        for i, cut in enumerate(cuts, start=1):
            if cut:
                runs.append((start, i - 1))
                start = i
        runs.append((start, n - 1))
        yield runs


def comm_phase_end_s(model: sim.Model, cost: sim.CommCost, runs_in_send_order) -> float:
    """End of the last message for a grouping given as runs of sending positions."""
    grads = gradient_layers(model, "fp32")
    r = grads.ready_s[::-1]
    b = grads.nbytes[::-1].astype(float)
    ready = np.array([r[hi] for _, hi in runs_in_send_order])
    t_c = np.array([cost.time_s(b[lo : hi + 1].sum()) for lo, hi in runs_in_send_order])
    return float(comm_end_s(ready, t_c)[-1])


def zoo_ready() -> bool:
    """Whether the model zoo loads (`sim.load_model`)."""
    try:
        sim.load_model("resnet50")
    except sim.SimInputError:
        return False
    return True


needs_zoo = pytest.mark.skipif(not zoo_ready(), reason="the model zoo (sim.load_model('resnet50')) is not available")
