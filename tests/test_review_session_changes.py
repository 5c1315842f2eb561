"""Review of the session's commits after 67d0bee (compute_slowdown bounded at 1; ZeRO-3 working memory and
gradient compression state in ``memory_buffers_bytes``). Each test is one defect found, with its input and
the expected against the actual behaviour in its docstring; none is marked xfail."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import make_model

import sim
from sim.compression import parse_compression
from sim.memory import compression_state_bytes
from sim.resources import run_memory


def _rows(timeline, name_part):
    rows = timeline.loc[(timeline["iteration"] == 0) & timeline["name"].str.contains(name_part, regex=False)]
    assert len(rows) == 1, name_part
    return rows.iloc[0]


def test_zero3_working_memory_holds_the_unit_the_schedule_prefetches():
    """Input: three layers of 10M parameters, zero3, 4 GPUs in one node (nvlink2), fp16, Adam.

    The simulator's own ZeRO-3 schedule (`sim.core.shard`: "BACKWARD_PRE" prefetch, the gather of a unit
    issued when the backward of the unit after it starts) finishes the all-gather of L1's weights while L2's
    backward still runs, so when L2's backward ends its weights, its whole gradient and L1's gathered weights
    are all on the GPU: 3 x 10M x 2 bytes = 60 MB (PyTorch's FSDP docs, BackwardPrefetch.BACKWARD_PRE: "at
    the peak, it holds the current set of parameters, next set of parameters, and current set of gradients").

    Expected: memory_buffers_bytes >= 60 MB (the commit says ZeRO-3 "is no longer a lower bound").
    Actual: 40 MB, one unit's weights and gradient (DeepSpeed's 4 x largest_layer_params), below what the
    run's own timeline holds at once. Cause: sim/memory.py `gathered_unit_bytes`."""
    p = 10_000_000
    model = make_model([p, p, p], [2.0, 2.0, 2.0], [4.0, 4.0, 4.0])
    cluster = sim.Cluster(gpus=4, gpus_per_node=4, intra="nvlink2")
    res = sim.simulate(model, cluster, "zero3", batch_size=8, precision="fp16", optimizer="adam")
    timeline = res.timeline() if callable(res.timeline) else res.timeline
    gather_l1 = _rows(timeline, "all-gather-bwd:L1")
    backward_l2 = _rows(timeline, "backward/L2")
    # the schedule itself: L1's weights are gathered before L2's backward (whose gradient is whole) ends
    assert gather_l1["end_s"] < backward_l2["end_s"]
    held_at_once = (p + p + p) * 2  # L2's fp16 weights and gradient, L1's fp16 weights
    assert res.metrics["memory_buffers_bytes"] >= held_at_once, (
        f"buffers {res.metrics['memory_buffers_bytes']:,} B < {held_at_once:,} B that the timeline holds at once")


def test_powersgd_state_counts_the_copy_of_the_message_the_cited_hook_keeps():
    """Input: compression_state_bytes("powersgd:4", layers of 100, 400 and 10000 elements, messages
    [[0, 1], [2]], gpus=4, fp32).

    `sim.memory` cites PyTorch's ``powerSGD_hook`` for what PowerSGD keeps (``error_dict``, ``p_memory_dict``,
    ``q_memory_dict``), but that hook, with error feedback on (its default), also clones the message it
    compresses (``input_tensor_cp = torch.clone(input_tensor).detach()``, to compute the new error after
    decompressing): one more copy of the largest message in flight, 10000 x 4 = 40000 bytes here.

    Expected: >= 42000 (error buffer) + 4160 (P and Q) + 40000 (the clone) = 86160.
    Actual: 46160. Cause: sim/memory.py `compression_state_bytes`, the powersgd branch."""
    got = compression_state_bytes("powersgd:4", [100, 400, 10000], [[0, 1], [2]], gpus=4, width_bytes=4)
    assert got >= 42000 + 4160 + 4 * 10000


def test_memory_refuses_fp16_compression_of_fp16_gradients_as_the_run_does():
    """Input: run_memory(resnet50, 4 GPUs, wfbp, precision="fp16", compression="fp16").

    `sim.simulate` refuses it ("compression fp16 does nothing to 16-bit gradients"), but the memory
    functions the session extended (`run_memory`, `memory_per_gpu(compression=)`, public in the README)
    silently count a 16-bit copy of the largest message for a cast that does not exist.

    Expected: SimInputError naming the compression (or no bytes added).
    Actual: 4,718,592 bytes added. Cause: sim/memory.py `compression_state_bytes` (no check of the width)."""
    model = sim.load_model("resnet50")
    res = sim.simulate(model, sim.Cluster(gpus=4), "wfbp", batch_size=8, precision="fp16")
    with pytest.raises(sim.SimInputError, match="fp16"):
        run_memory(res.model, gpus=4, scheduler="wfbp", groups=res.groups, batch_size=8, precision="fp16",
                   compression="fp16")


def test_the_runs_compression_label_rebuilds_its_memory():
    """Input: two layers of 1e9 and 1000 parameters, ddp, 4 GPUs, compression "topk:0.00123456789"; then
    `run_memory` with ``res.metrics["compression"]``, as the Timeline page's memory panel now does when the
    optimizer changes (dashboard/resources_view.py) and the session's own test does.

    ``metrics["compression"]`` is ``str(Compression)``, ``f"topk:{ratio:g}"`` = "topk:0.00123457": six
    significant digits, another ratio, so k of the 1e9 layer is 1234570 instead of 1234568.

    Expected: the same memory_buffers_bytes as the run (4,091,939,040).
    Actual: 4,091,939,104 (64 bytes more). Cause: sim/compression.py `Compression.__str__` (``:g``)."""
    model = sim.Model("m", ("a", "b"), np.array([1_000_000_000, 1000]), np.full(2, 1e-3), np.full(2, 2e-3))
    res = sim.simulate(model, sim.Cluster(gpus=4, gpus_per_node=4, intra="nvlink2"), "ddp", batch_size=1,
                       compression="topk:0.00123456789")
    assert parse_compression(res.metrics["compression"]) == parse_compression("topk:0.00123456789")
    est = run_memory(res.model, gpus=4, scheduler="ddp", groups=res.groups, batch_size=1, precision="fp32",
                     compression=res.metrics["compression"])
    assert est.buffers_bytes == res.metrics["memory_buffers_bytes"]
