"""Shared state between callers (hostile review): the dashboard runs every session's script in a
thread of one process, so whatever `sim` keeps at module level is shared by all of them. A value
kept for one caller must not be one that another caller can change, nor one that outlives a
change of what it was worked out from."""

from __future__ import annotations

import dataclasses
import gc
import os
import sys
import threading
import weakref

import numpy as np
import pandas as pd
import pytest

import sim
from sim.catalog import USER_NETWORKS_ENV, get_network
from sim.compute import tensor_core_families
from sim.pricing import gpu_price, prices
from sim.tensors import tensor_names, tensor_sums, tensor_view_arrays

HEADER = "name,scope,line_rate_gbps,effective_gbps,alpha_us,source\n"


def tensor_model(seed: int, name: str = "resnet50") -> sim.Model:
    """A layer table with parameter tensors of sizes no other test uses (a fresh cache entry)."""
    rng = np.random.default_rng(seed)
    first, second = rng.integers(1_000, 90_000, 12), rng.integers(1_000, 90_000, 12)
    frame = pd.DataFrame({"name": [f"layer{i}" for i in range(12)], "params": first + second,
                          "fwd_ms": np.linspace(0.1, 1.2, 12), "bwd_ms": np.linspace(0.2, 2.4, 12),
                          "tensors": [f"{a};{b}" for a, b in zip(first, second, strict=True)]})
    return sim.model_from_frame(frame, name)


def test_a_tensor_view_cannot_change_the_params_of_every_other_view():
    """`Model.tensor_view`'s params were the array `tensor_view_arrays` keeps for every model with
    those tensors, and writable: a caller changing its own view changed every later run of them
    (resnet50's params read 25,547,499 instead of 25,557,032 in another session)."""
    mine, other = tensor_model(7), tensor_model(7)
    expected = other.tensor_view().params.copy()
    view = mine.tensor_view()
    with pytest.raises(ValueError, match="read-only"):
        view.params[:3] = 1
    assert np.array_equal(other.tensor_view().params, expected)
    res = sim.simulate(other, sim.Cluster(gpus=8, gpus_per_node=4), "wfbp", batch_size=32)
    assert res.metrics["params"] == int(other.params.sum())


def test_the_tensor_tables_kept_for_every_caller_are_read_only():
    tensors = ((3, 4), (5,), (6, 7, 8))
    arrays = [*tensor_view_arrays(tensors), tensor_sums(tensors)[0], tensor_names(("a", "b", "c"), tensors)[1]]
    assert not any(a.flags.writeable for a in arrays)


def _plain_model() -> sim.Model:
    n = 6
    return sim.Model(name="m", layer_names=tuple(f"l{i}" for i in range(n)), params=np.full(n, 1_000_000),
                     fwd_s=np.full(n, 1e-3), bwd_s=np.full(n, 2e-3), layer_types=("conv",) * n,
                     out_elems=np.full(n, 1e5), fwd_flops=np.full(n, 1e9))


def test_memory_follows_a_model_changed_in_place():
    """The activation and buffer memory were kept per model object (functools caches keyed by the
    model), so a model whose arrays were changed in place kept its old memory while its iteration
    time followed the change: activations 76.8 MB instead of 6.9 GB."""
    cluster = sim.Cluster(gpus=8, gpus_per_node=4)
    model = _plain_model()
    sim.simulate(model, cluster, "mgwfbp", batch_size=32)
    model.params[:] = 5_000_000
    model.out_elems[:] = 9e6
    changed = sim.simulate(model, cluster, "mgwfbp", batch_size=32).metrics
    fresh = sim.simulate(dataclasses.replace(model), cluster, "mgwfbp", batch_size=32).metrics
    for key in ("memory_activations_bytes", "memory_buffers_bytes", "memory_per_gpu_bytes"):
        assert changed[key] == fresh[key], key


def test_a_model_its_caller_dropped_is_freed():
    """The buffer memory was kept per model object in a functools cache (16 of them): a model the
    caller (a dashboard session) had dropped stayed alive, and with it every plan and resolved model
    kept for it."""
    model = _plain_model()
    res = sim.simulate(model, sim.Cluster(gpus=8, gpus_per_node=4), "synceasgd", batch_size=32)
    assert max(map(len, res.groups)) > 1  # a merged message: its bytes were looked up by layer name
    alive = weakref.ref(model)
    del model, res
    gc.collect()
    assert alive() is None


def test_a_presets_file_edited_to_the_same_size_and_modification_time_is_read_again(tmp_path, monkeypatch):
    """The presets were kept by (modification time, size): an edit of the same size whose
    modification time was set back (``touch -r``, ``cp -p``, ``os.utime``) kept the old rates."""
    path = tmp_path / "networks.csv"
    path.write_text(HEADER + "mynet,inter,10,8.0,10,test\n")
    monkeypatch.setenv(USER_NETWORKS_ENV, str(path))
    cluster = sim.Cluster(gpus=8, gpus_per_node=4, network="mynet")
    model = tensor_model(11)
    before = sim.simulate(model, cluster, "wfbp", batch_size=32).iteration_time_s
    old = os.stat(path)
    edited = HEADER + "mynet,inter,10,4.0,10,test\n"
    for _ in range(100_000):  # until the change time moves on (a coarse clock may need a few ms)
        path.write_text(edited)
        os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
        if os.stat(path).st_ctime_ns != old.st_ctime_ns:
            break
    now = os.stat(path)
    assert (now.st_mtime_ns, now.st_size) == (old.st_mtime_ns, old.st_size)
    assert get_network("mynet").effective_gbps == 4.0
    after = sim.simulate(model, cluster, "wfbp", batch_size=32).iteration_time_s
    other = tmp_path / "other.csv"
    other.write_text(edited)
    monkeypatch.setenv(USER_NETWORKS_ENV, str(other))
    assert after == sim.simulate(model, cluster, "wfbp", batch_size=32).iteration_time_s != before


def test_the_tables_read_once_per_process_cannot_be_changed_for_every_caller():
    """`prices()` and `tensor_core_families()` returned the dict kept for the whole process: a
    caller trying a price (``prices()["v100-sxm2"] = ...``) changed every session's costs."""
    price = gpu_price("v100-sxm2")
    with pytest.raises(TypeError):
        prices()["v100-sxm2"] = dataclasses.replace(price, price_usd_per_hour=1000.0)
    families = dict(tensor_core_families())
    with pytest.raises(TypeError):
        tensor_core_families()["conv"] = (("conv",), 0.01)
    assert gpu_price("v100-sxm2") == price and dict(tensor_core_families()) == families
    assert dict(prices())["v100-sxm2"] == price  # a copy to change


def test_zoo_arguments_of_equal_value_and_other_type_are_checked_each():
    """The zoo's tables were kept by the arguments' values: 77 == 77.0, so whether ``seq_len=77.0``
    was refused depended on whether any caller had asked for ``seq_len=77`` before."""
    assert sim.load_model("bert_base", seq_len=77).num_layers > 0
    with pytest.raises(sim.SimInputError, match="seq_len must be a whole number"):
        sim.load_model("bert_base", seq_len=77.0)


def _configs():
    zoo = sim.load_model("resnet50")
    same_name = tensor_model(3)  # named like the zoo model, other sizes
    c = sim.Cluster
    return [
        lambda: sim.simulate(zoo, c(gpus=16, gpus_per_node=4), "wfbp", batch_size=32, iterations=2),
        lambda: sim.simulate(same_name, c(gpus=8, gpus_per_node=4, network="100gbe"), "mgwfbp", batch_size=32,
                             precision="fp16", iterations=2),
        lambda: sim.simulate(same_name, c(gpus=8, gpus_per_node=8, intra="nvlink2", topology="dgx1"), "bucket",
                             batch_size=16, bucket_mb=0.05),
        lambda: sim.simulate(zoo, c(gpus=8, gpus_per_node=4), "bytescheduler", batch_size=64, precision="amp",
                             compression="topk:0.01"),
        lambda: sim.simulate(same_name, c(gpus=4, gpus_per_node=4, compute_slowdown=0.3, comm_slowdown=0.2), "ddp",
                             batch_size=32, engine="general", iterations=2),
        lambda: sim.simulate(zoo, c(gpus=8, gpus_per_node=4), "dear", batch_size=32, iterations=2),
    ]


def _seen(res) -> tuple:
    return res.iteration_time_s, repr(res.metrics), res.timeline


def test_runs_in_threads_give_the_serial_results():
    """Eight threads, each running another configuration, forced to switch often: every metric and
    the timeline as run one after another (nothing kept between runs leaks from one to another)."""
    configs = _configs()
    serial = [_seen(run()) for run in configs]
    wrong: list = []

    def work(first: int) -> None:
        try:
            for k in range(2 * len(configs)):
                i = (first + k) % len(configs)
                t, metrics, timeline = _seen(configs[i]())
                if (t, metrics) != serial[i][:2] or not timeline.equals(serial[i][2]):
                    wrong.append(i)
        except Exception as exc:  # (reported below, not lost in the thread)
            wrong.append(repr(exc))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert wrong == []
