"""Scale: correctness beyond the benchmarked sizes (no timing here; bench/scale.py times them)."""

import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import make_model

import sim
from sim import sweep_plans
from sim.comm import CommCost
from sim.core.plan import GradientLayers, gradient_layers
from sim.parallel import ConfigProduct, run_grid
from sim.schedulers import make_plan
from sim.schedulers.names import BUCKET, HOROVOD, MGWFBP, OPTIMAL, WFBP
from sim.schedulers.optimal_exact import choices_monotone

optimal_module = importlib.import_module("sim.schedulers.optimal")


def grads_of(n: int, seed: int, *, equal: bool = False) -> GradientLayers:
    """n layers, backward 0.05-1 ms, gradients 0.4-40 MB (all alike with ``equal``)."""
    rng = np.random.default_rng(seed)
    bwd = np.full(n, 2e-4) if equal else rng.uniform(5e-5, 1e-3, n)
    nbytes = np.full(n, 4_000_000) if equal else rng.integers(100_000, 10_000_000, n) * 4
    return GradientLayers(np.arange(n), np.cumsum(bwd[::-1])[::-1].copy(), nbytes.astype(np.int64))


def general_choices(grads: GradientLayers, cost: CommCost) -> np.ndarray:
    """The vectorised search over every j, ends within rounding of the least compared exactly."""
    exact = optimal_module._exact_inputs(grads, cost)
    return np.asarray(optimal_module._choices_general(grads, cost, exact))


def affine_choices(grads: GradientLayers, cost: CommCost) -> np.ndarray:
    """The monotone-queue DP (O(n)) on the same exact inputs."""
    exact = optimal_module._exact_inputs(grads, cost)
    return np.asarray(choices_monotone(exact["ready"], exact["cum"], exact["cost"]))


@pytest.mark.parametrize("seed", range(40))
def test_optimal_queue_equals_the_window_search(seed):
    """The O(n) search picks the same j at every step as the window search, ties included."""
    rng = np.random.default_rng(seed)
    grads = grads_of(int(rng.integers(1, 400)), seed, equal=seed % 3 == 0)
    cost = CommCost(float(rng.choice([0.0, 1e-6, 1e-5, 1e-4, 1e-3])), float(rng.choice([0.0, 1e-11, 1e-10, 1e-9])))
    assert np.array_equal(affine_choices(grads, cost), general_choices(grads, cost))


def test_optimal_at_ten_times_the_benchmarked_layers():
    """1,000,000 layers whose messages keep up with backward: every layer alone, and
    the plan's end equals the WFBP recurrence's."""
    grads = grads_of(1_000_000, 7)
    plan = make_plan(OPTIMAL, grads, CommCost(1e-6, 1e-13))
    assert len(plan.groups) == 1_000_000 and all(len(g) == 1 for g in plan.groups)


def test_optimal_hundred_thousand_layers_equals_the_window_search():
    grads = grads_of(100_000, 3)
    cost = CommCost(1e-5, 1e-11)
    assert np.array_equal(affine_choices(grads, cost), general_choices(grads, cost))


def test_plans_declared_cost_free_do_not_read_the_cost_or_batch():
    """The sweep makes one plan per model for these schedulers (sim.parallel): check that
    their plans are the same under other costs and batch sizes."""
    model = sim.load_model("resnet50")
    costs = [CommCost(0.0, 0.0), CommCost(1e-3, 1e-9), CommCost(5e-5, 1e-11)]
    for batch in (8, 64):
        grads = gradient_layers(model.timed(gpu="v100-sxm2", batch_size=batch), "fp32")
        for name in sorted(sweep_plans.PLAN_READS_SIZES_ONLY):
            plans = {make_plan(name, grads, c, bucket_mb=4.0) for c in costs}
            ref = make_plan(name, gradient_layers(model.timed(gpu="v100-sxm2", batch_size=32), "fp32"), costs[0],
                            bucket_mb=4.0)
            assert plans == {ref}, name
        for name in sorted(sweep_plans.PLAN_READS_READY_TIMES):
            assert len({make_plan(name, grads, c) for c in costs}) == 1, name


def test_a_product_gives_the_rows_of_its_list():
    models = [sim.load_model("alexnet"), sim.load_model("resnet50")]
    axes = {"model": models, "gpus": [1, 4, 16], "gpus_per_node": 4, "network": ["10gbe", "100gbe"],
            "scheduler": [WFBP, MGWFBP, OPTIMAL, BUCKET, HOROVOD], "batch_size": [16, 32]}
    product = ConfigProduct(**axes)
    configs = list(product)
    assert len(product) == len(configs) == 2 * 3 * 2 * 5 * 2
    assert product[7] == configs[7] and product[-1] == configs[-1] and product[2:5] == configs[2:5]
    pd.testing.assert_frame_equal(run_grid(product), run_grid(configs), check_exact=True)


def test_a_product_names_an_unknown_key():
    with pytest.raises(sim.SimInputError, match="gpu_count"):
        ConfigProduct(gpu_count=[1])


@pytest.mark.parametrize("prefetch", [False, True])
def test_single_gpu_time_on_floats_equals_the_fast_path(prefetch):
    """`sim.core.run.single_gpu_iteration_s` times one GPU on plain floats: the same bits as the arrays."""
    from sim.core import fast
    from sim.core import run as core_run
    from sim.core.cost import NO_COMM
    from sim.core.plan import Plan

    rng = np.random.default_rng(int(prefetch))
    for _ in range(200):
        n = int(rng.integers(1, 300))
        fwd = rng.uniform(0, 1e-2, n) * (rng.random(n) > 0.1)
        model = sim.Model("m", tuple(f"l{i}" for i in range(n)), rng.integers(0, 10**6, n), fwd,
                          rng.uniform(0, 2e-2, n), io_s=float(rng.choice([0, 1e-3, 5e-2])),
                          h2d_s=float(rng.choice([0, 1e-3, 3e-2])), update_s=float(rng.choice([0, 2e-3])))
        arrays = fast.evaluate(model, Plan("", ()), NO_COMM, iterations=2, prefetch=prefetch)
        assert core_run.single_gpu_iteration_s(model, prefetch=prefetch) == float(arrays.iteration_time_s[0])


def test_a_threaded_main_script_is_not_run_again_by_the_pool(tmp_path):
    """The fork-server trap: after a Dask client (any thread) exists, worker processes would import
    an unguarded main script again and run it; run_grid then stays in this process instead."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "sweep_script.py"
    script.write_text(
        "import sys, threading, time\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})\n"
        "print('main ran', flush=True)\n"
        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "import sim\n"
        "from sim.parallel import ConfigProduct, run_grid\n"
        "grid = ConfigProduct(model=sim.load_model('resnet50'), gpus=[2, 4], network=['10gbe', '100gbe'], "
        "batch_size=[8, 16])\n"
        "print(len(run_grid(grid, jobs=2)), flush=True)\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-500:]
    assert proc.stdout.split() == ["main", "ran", "8"]


def test_import_sim_is_lazy_and_every_public_name_resolves():
    """``import sim`` reads the package's own file only (no numpy, no engine); the first use of a public
    name imports its module, without pandas, networkx, dask or plotly (issue 17, item 1); every name of
    ``__all__`` and the submodules resolve, and an unknown name is an AttributeError."""
    code = (
        "import sys, sim\n"
        "assert 'numpy' not in sys.modules and 'sim.api' not in sys.modules, sorted(sys.modules)\n"
        "assert sim.core.run.MAX_TASKS > 0  # (a deep module first, as a script setting a limit does)\n"
        "values = [getattr(sim, name) for name in sim.__all__]\n"
        "heavy = [m for m in ('pandas', 'networkx', 'dask', 'plotly', 'pyarrow') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "from sim import simulate, Cluster\n"
        "assert simulate is sim.simulate and Cluster is sim.Cluster and sim.SimInputError is sim.errors.SimInputError\n"
        "assert sim.core.engine.run and sim.core.run.MAX_TASKS and sim.calib.validation.run_validation\n"
        "assert sim.parallel.run_grid\n"
        "try:\n    sim.core.no_such_module\nexcept AttributeError as exc:\n    assert 'no_such_module' in str(exc)\n"
        "else:\n    raise AssertionError('no AttributeError')\n"
        "try:\n    sim.no_such_name\nexcept AttributeError as exc:\n    assert 'no_such_name' in str(exc)\n"
        "else:\n    raise AssertionError('no AttributeError')\n"
        "assert set(sim.__all__) <= set(dir(sim)) and set(sim.__all__) == {*sim._WHERE, 'SimInputError', 'SimInputWarning'}\n"
        "print('ok')\n")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert got.returncode == 0 and got.stdout.strip() == "ok", got.stderr


def test_a_partitioned_message_of_many_layers_names_them_once_not_per_part():
    """BSP-PS of a 100k-layer upload filled the dashboard's server past 23 GB: each 4 MB part's push and pull row
    named every layer of the one merged message in the timeline's `layer` column (layers x parts characters;
    30k layers: 291 M). A part names its message as its label does (first and last layer, `PART_LABEL_LAYERS`),
    in the `layer` column too; a message sent whole keeps its full name (every layer, `+`-joined)."""
    from sim.core.messages import PART_LABEL_LAYERS

    n = 30_000
    model = make_model([100_000] * n, [0.01] * n, [0.02] * n)
    res = sim.simulate(model, sim.Cluster(gpus=8, gpus_per_node=4, network="10gbe"), method="BSP-PS", batch_size=32)
    timeline = res.timeline
    parts = timeline[timeline.name.str.contains("#", regex=False)]
    assert len(parts) > 1000  # 12 GB of gradients in 4 MB parts
    assert parts.layer.str.len().max() < 40 and timeline.layer.str.len().sum() < 100 * len(timeline)
    assert all("+...+" in name or name.count("+") < PART_LABEL_LAYERS for name in parts.layer)
    small = make_model([1000] * 5, [0.01] * 5, [0.02] * 5)
    whole = sim.simulate(small, sim.Cluster(gpus=8, gpus_per_node=4, network="10gbe"), "synceasgd", batch_size=32)
    comm = whole.timeline[whole.timeline.kind == "comm"]
    assert set(comm.layer) == {"+".join(f"L{i}" for i in range(4, -1, -1))} or set(comm.layer) == {
        "+".join(f"L{i}" for i in range(5))}
