"""The sweep grid (`sim.grid`): a row is checked as if it came alone, and a bad one is named."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim
from sim.grid import ConfigProduct, Grid
from sim.model import BYTES_PER_PARAM
from sim.parallel import run_grid

TINY = str(Path(__file__).parent / "data" / "tiny.csv")
BASE = {"model": TINY, "batch_size": 8, "gpus": 4}


def _alone_error(config: dict) -> str:
    with pytest.raises(sim.SimInputError) as alone:
        Grid([config])
    return str(alone.value).removeprefix("configuration 0: ")


@pytest.mark.parametrize("key, good, bad, extra", [
    ("batch_size", 8, 8.0, {}),
    ("batch_size", 1, True, {}),
    ("gpus", 4, 4.0, {}),
    ("gpus", 4, np.float64(4.0), {}),
    ("gpus", 1, True, {}),
    ("gpus_per_node", 2, 2.0, {}),
    ("bucket_mb", 1, True, {"scheduler": "bucket"}),
    ("compute_slowdown", 1, True, {}),
])
def test_a_value_equal_to_an_earlier_one_of_another_type_is_checked_as_alone(key, good, bad, extra):
    """4.0 == 4 and True == 1 as keys, but neither is a GPU count; a row the grid refuses alone it
    refuses after a row with the equal value too (it once took the earlier row's checked settings)."""
    message = _alone_error({**BASE, **extra, key: bad})
    with pytest.raises(sim.SimInputError) as after:
        Grid([{**BASE, **extra, key: good}, {**BASE, **extra, key: bad}])
    assert str(after.value) == f"configuration 1: {message}"
    with pytest.raises(sim.SimInputError) as in_product:
        Grid(ConfigProduct(**{**BASE, **extra, key: [good, bad]}))
    assert str(in_product.value) == f"configuration 1: {message}"


def test_a_product_without_mixed_types_shares_its_evaluations():
    grid = Grid(ConfigProduct(model=TINY, batch_size=[8, 16], gpus=[2, 4], scheduler=["wfbp", "bucket"],
                              bucket_mb=[1.0, 2.0]))
    assert len(grid.workloads) == 2 and len(grid.clusters) == 2
    # wfbp ignores bucket_mb: (2 workloads x 2 clusters) x (1 wfbp + 2 bucket sizes)
    assert len(grid.units) == 12


@pytest.mark.parametrize("key", ["model", "batch_size", "scheduler", "precision", "prefetch", "bucket_mb",
                                 "calibrate_iteration_s", "gpus", "network", "compute_slowdown"])
def test_a_list_where_one_value_belongs_is_named(key):
    for bad in ([1], {"a": 1}, np.array([2, 4])):
        with pytest.raises(sim.SimInputError) as error:
            run_grid([BASE, BASE, {**BASE, key: bad}], jobs=1)
        assert str(error.value) == f"configuration 2: {key} must be one value, got a {type(bad).__name__}"


@pytest.mark.parametrize("axes, row", [
    ({"gpus": [2, 4, -1]}, 2),
    ({"gpus": [2, -1], "scheduler": ["wfbp", "bucket"]}, 2),
    ({"scheduler": ["wfbp", "nope"], "gpus": [2, 4]}, 2),
    ({"batch_size": [8, 0], "gpus": [2, 4, 8]}, 3),
])
def test_a_bad_row_of_a_product_is_named_by_its_index(axes, row):
    product = ConfigProduct(**{"model": TINY, "batch_size": 8, **axes})
    with pytest.raises(sim.SimInputError, match=f"^configuration {row}: ") as error:
        run_grid(product, jobs=1)
    assert str(error.value).removeprefix(f"configuration {row}: ") == _alone_error(product[row])


def test_a_product_of_no_axes_is_no_configuration():
    """Its length is 0, and so is what it hands over (it once handed one empty configuration, refused
    as 'model' is required)."""
    empty = ConfigProduct()
    assert len(empty) == 0 and list(empty) == [] and list(empty.grid_rows()) == []
    assert list(run_grid(empty).columns) == list(sim.METRIC_KEYS) and len(run_grid(empty)) == 0


_AXES = {
    "model": [TINY, "alexnet"],
    "batch_size": [8, 16, 3],
    "gpus": [1, 2, 4, 16],
    "gpus_per_node": [1, 4],
    "network": ["10gbe", "ib-edr-100"],
    "scheduler": ["wfbp", "mgwfbp", "bucket", "horovod", "sequential"],
    "precision": sorted(BYTES_PER_PARAM),
    "bucket_mb": [1.0, 25.0],
    "prefetch": [False, True],
    "sync_jitter_cv": [0.0, 0.02],
}


def _row_by_row(configs) -> Grid:
    """The grid as `Grid` resolves a list of configurations: one row at a time."""
    return Grid(list(configs))


@settings(max_examples=40, deadline=None)
@given(st.fixed_dictionaries({}, optional={k: st.lists(st.sampled_from(v), min_size=1, max_size=3, unique=True)
                                           for k, v in _AXES.items()}),
       st.sampled_from([TINY, "alexnet"]), st.sampled_from([8, 4]))
def test_a_product_resolved_by_its_axes_is_the_grid_row_by_row(axes, model, batch):
    """A `ConfigProduct` is resolved axis group by axis group (each distinct run, cluster, workload and
    evaluation once, the rows' ids by numpy); every id, in order, and every evaluation are those of
    resolving its configurations one by one."""
    product = ConfigProduct(**{"model": model, "batch_size": batch, **axes})
    fast, slow = Grid(product), _row_by_row(product)
    for name in ("cluster_of_row", "workload_of_row", "unit_of_row", "scheduler_code_of_row"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name)), name
    assert fast.schedulers == slow.schedulers and fast.units == slow.units
    assert [c for c, _ in fast.clusters] == [c for c, _ in slow.clusters]
    assert [(w.batch_size, w.precision, w.prefetch, w.single_gpu_iteration_s) for w in fast.workloads] == \
           [(w.batch_size, w.precision, w.prefetch, w.single_gpu_iteration_s) for w in slow.workloads]
    assert all(np.array_equal(a.model.bwd_s, b.model.bwd_s) for a, b in zip(fast.workloads, slow.workloads, strict=True))
    parts = min(5, len(fast.units))
    assert not parts or fast.chunks(parts) == slow.chunks(parts)


def test_a_model_given_as_a_path_is_read_as_its_name_is():
    """`load_model` takes a `pathlib.Path`; so does a grid (it once refused one: 'got PosixPath')."""
    by_path = run_grid([{**BASE, "model": Path(TINY)}], jobs=1)
    by_name = run_grid([BASE], jobs=1)
    assert by_path["iteration_time_s"].tolist() == by_name["iteration_time_s"].tolist()
