"""``dear``: the all-reduce decoupled into a reduce-scatter and an all-gather."""

from __future__ import annotations

from sim.comm import CommCost
from sim.core.plan import GradientLayers, Plan
from sim.schedulers.names import DEAR
from sim.schedulers.options import SchedulerOptions
from sim.schedulers.registry import SchedulerSpec, register
from sim.schedulers.wfbp import wfbp

__all__ = ["dear"]


def dear(grads: GradientLayers, cost: CommCost, options: SchedulerOptions | None = None) -> Plan:
    """DeAR (Zhang et al., "Decoupling the All-Reduce Primitive for Accelerating
    Distributed Deep Learning", arXiv 2302.12445): reduce-scatter with backward, all-gather with the next forward.

    Each layer's all-reduce is split into its two halves: the reduce-scatter
    is sent as the gradient is ready (WFBP order); the layer's shard is then
    updated, and the all-gather of the updated parameters runs during the next
    iteration's forward, each before the forward that needs it: whenever the
    channel is free it starts the released all-gather nearest the input
    (`sim.core.decoupled`). An all-gather is released once its layer's update
    ends, so a later layer's can take the channel before layer 0's is released
    and delay it (vgg16 fp16 on 10 GPUs, 2 a node, 100gbe without size regimes
    or interference: 182.9 ms at 105 Gb/s, 170.7 ms at 50 Gb/s, the kind of
    anomaly the README notes for launch costs). Each half costs
    T(M) / 2 (exact for ring and halving-doubling).
    """
    return Plan(DEAR, wfbp(grads, cost).groups, per_layer_update=True, decoupled=True)


SPEC = register(SchedulerSpec(
    DEAR, "DeAR: reduce-scatter as gradients are ready, all-gather just before the next forward needs it.",
    "Zhang et al., DeAR, arXiv 2302.12445",
    plan=lambda grads, cost, options, bucket_mb: dear(grads, cost, options), function=dear,
    allreduce_only=True))
