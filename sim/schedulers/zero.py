"""``zero1``, ``zero2``, ``zero3``: sharded data parallelism (ZeRO, FSDP full-shard).

Rajbhandari, Rasley, Ruwase and He, "ZeRO: Memory Optimizations Toward
Training Trillion Parameter Models", SC 2020 (arXiv 1910.02054), Sec. 5
(memory) and 7 (communication); Zhao et al., "PyTorch FSDP: Experiences on
Scaling Fully Sharded Data Parallel", VLDB 2023.

Each GPU keeps 1/P of the optimizer states (stage 1, ``shard="optimizer"``),
also of the gradients (stage 2, ``"gradients"``), also of the parameters
(stage 3, ``"parameters"``); the memory this saves is `sim.memory`'s, read
from each spec's ``shard``. The communication, timed by the lowering
(`sim.core.shard`):

* stages 1 and 2: gradients reduce-scattered in buckets of
  ``reduce_bucket_mb`` MiB as backward produces them (DeepSpeed's
  ``overlap_comm`` with ``reduce_bucket_size``), each GPU updates its shard, then the updated
  parameters are all-gathered bucket by bucket before the next forward:
  2 Psi per iteration, as plain data parallelism (paper, Sec. 7.2.1).
* stage 3: one unit per layer with parameters (FSDP wrapping every layer):
  parameters all-gathered before each unit's forward (prefetching the next
  unit's) and again before its backward, gradients reduce-scattered unit by
  unit as backward produces them: 3 Psi per iteration (Sec. 7.2.2).

Each reduce-scatter and all-gather of M bytes takes T(M) / 2, T the
all-reduce time (`sim.core.cost`). The parameter server is refused.
"""

from __future__ import annotations

from sim.comm import CommCost
from sim.core.plan import SHARD_GRADIENTS, SHARD_OPTIMIZER, SHARD_PARAMETERS, GradientLayers, Plan
from sim.schedulers.base import fill_buckets, plan_from_spans
from sim.schedulers.knobs import DEFAULT_BUCKET_MB, MAX_MB, Knob
from sim.schedulers.names import ZERO1, ZERO2, ZERO3
from sim.schedulers.options import MIB, SchedulerOptions
from sim.schedulers.registry import SchedulerSpec, register
from sim.schedulers.wfbp import wfbp

__all__ = ["zero1", "zero2", "zero3"]

CITATION = "Rajbhandari et al., ZeRO, SC 2020 (arXiv 1910.02054), Sec. 5 and 7"

#: The reduce-scatter bucket of stages 1 and 2 (DeepSpeed's ``reduce_bucket_size``, given in MiB here).
REDUCE_BUCKET = Knob("reduce_bucket_mb", float, "MiB", DEFAULT_BUCKET_MB, 0, MAX_MB,
                     "ZeRO-1/2 reduce-scatter bucket in MiB (DeepSpeed's reduce_bucket_size)", low_open=True,
                     tune_scheduler=ZERO1, grid=(1, 5, 25, 100, 500))


def _bucketed(name: str, shard: str, grads: GradientLayers, options: SchedulerOptions | None) -> Plan:
    cap_mb = REDUCE_BUCKET.check(SchedulerOptions.of(options).reduce_bucket_mb)
    spans = fill_buckets(grads, cap_mb * MIB, cap_mb * MIB)
    return Plan(name, plan_from_spans(name, grads, spans).groups, shard=shard)


def zero1(grads: GradientLayers, cost: CommCost, options: SchedulerOptions | dict | None = None) -> Plan:
    """ZeRO stage 1 (optimizer states sharded): reduce-scatter in buckets of
    ``reduce_bucket_mb`` MiB with backward, the shard's update, then the
    all-gather of the updated parameters."""
    return _bucketed(ZERO1, SHARD_OPTIMIZER, grads, options)


def zero2(grads: GradientLayers, cost: CommCost, options: SchedulerOptions | dict | None = None) -> Plan:
    """ZeRO stage 2 (optimizer states and gradients sharded): the communication of stage 1."""
    return _bucketed(ZERO2, SHARD_GRADIENTS, grads, options)


def zero3(grads: GradientLayers, cost: CommCost) -> Plan:
    """ZeRO stage 3 / FSDP full-shard (parameters sharded too): one unit per
    layer, all-gathered before its forward and its backward, reduce-scattered after it."""
    return Plan(ZERO3, wfbp(grads, cost).groups, shard=SHARD_PARAMETERS)


SPECS = (
    register(SchedulerSpec(
        ZERO1, "ZeRO-1: optimizer states sharded; bucketed reduce-scatter with backward, all-gather after the update.",
        CITATION, plan=lambda grads, cost, options, bucket_mb: zero1(grads, cost, options), function=zero1,
        knobs=(REDUCE_BUCKET,), allreduce_only=True, shard=SHARD_OPTIMIZER)),
    register(SchedulerSpec(
        ZERO2, "ZeRO-2: optimizer states and gradients sharded; the communication of ZeRO-1.",
        CITATION, plan=lambda grads, cost, options, bucket_mb: zero2(grads, cost, options), function=zero2,
        knobs=(REDUCE_BUCKET,), allreduce_only=True, shard=SHARD_GRADIENTS)),
    register(SchedulerSpec(
        ZERO3, "ZeRO-3 / FSDP full-shard: parameters all-gathered before each layer's forward and backward, "
        "gradients reduce-scattered.",
        CITATION + "; Zhao et al., PyTorch FSDP, VLDB 2023",
        plan=lambda grads, cost, options, bucket_mb: zero3(grads, cost), function=zero3,
        allreduce_only=True, shard=SHARD_PARAMETERS)),
)
