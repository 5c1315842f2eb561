"""The fast path's kept timeline columns (`sim.core.fast_columns`) stay within their cell budget.

Before the budget only the count of entries was bounded (64): a 100k-layer model's timelines under a
few schedulers kept 407 MiB after every result was dropped, and ResNet-50 timelines of 62 iteration
counts 1.5 GiB (hostile review of shared state)."""

import numpy as np
import pytest

import sim
from sim.core import fast_columns


@pytest.fixture(autouse=True)
def _fresh():
    fast_columns.forget_static_columns()
    yield
    fast_columns.forget_static_columns()


def test_forgetting_leaves_nothing_counted():
    res = sim.simulate(sim.load_model("resnet50"), sim.Cluster(gpus=4, network="10gbe"), "wfbp", batch_size=32)
    assert len(res.timeline) > 0
    assert fast_columns.kept_cells() > 0
    fast_columns.forget_static_columns()
    assert fast_columns.kept_cells() == 0


#: The budget the module states (`fast_columns.KEPT_CELLS`), as a literal: the walk below also runs on
#: code without the budget, where it found about 60 million cells held.
BUDGET_CELLS = 4_000_000


def held_cells() -> int:
    """Array and tuple elements held by every kept entry, found by walking them (not by the module's count)."""
    def size(value) -> int:
        if isinstance(value, dict):
            return sum(size(v) for v in value.values())
        return len(value) if isinstance(value, (np.ndarray, tuple)) else 0
    return sum(size(entry) for entry in fast_columns._STATIC.values())


def test_many_iteration_counts_stay_within_the_budget():
    model, cluster = sim.load_model("resnet50"), sim.Cluster(gpus=4, network="10gbe")
    for iterations in range(10, 630, 10):
        res = sim.simulate(model, cluster, "wfbp", batch_size=32, iterations=iterations)
        assert res.timeline["iteration"].nunique() == iterations
        del res
    assert held_cells() <= BUDGET_CELLS
    assert fast_columns.kept_cells() == held_cells()  # the module's count is what it holds
    assert held_cells() > BUDGET_CELLS // 4  # the budget is used, not left empty


def test_large_models_stay_within_the_budget_and_timelines_are_unchanged():
    rng = np.random.default_rng(0)
    n = 30_000
    fwd = rng.uniform(1e-5, 1e-4, n)
    model = sim.Model("big", tuple(f"l{i}" for i in range(n)), rng.integers(1, 10_000, n), fwd, 2 * fwd)
    cluster = sim.Cluster(gpus=8, network="10gbe")
    first = {}
    for precision in ("fp32", "fp16"):
        for scheduler in ("wfbp", "mgwfbp", "synceasgd"):
            tl = sim.simulate(model, cluster, scheduler, batch_size=8, precision=precision, iterations=2).timeline
            first[precision, scheduler] = tl
            assert fast_columns.kept_cells() <= fast_columns.KEPT_CELLS
    for (precision, scheduler), tl in first.items():  # built again from what is kept or afresh: the same rows
        again = sim.simulate(model, cluster, scheduler, batch_size=8, precision=precision, iterations=2).timeline
        assert again.equals(tl)


def test_a_kept_entry_is_reused():
    names, groups, nbytes = ("a", "b"), ((1,), (0,)), np.array([4, 8], np.int64)
    first = fast_columns.static_columns(names, groups, nbytes)
    assert fast_columns.static_columns(names, groups, nbytes.copy()) is first
    assert fast_columns.kept_cells() == first["cells"]
