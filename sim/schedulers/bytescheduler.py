"""``bytescheduler``: partitions sent by priority, the layer nearest the input first."""

from __future__ import annotations

from sim.comm import CommCost
from sim.core.plan import GradientLayers, Plan
from sim.schedulers.names import BYTESCHEDULER
from sim.schedulers.options import SchedulerOptions
from sim.schedulers.registry import SchedulerSpec, register
from sim.schedulers.wfbp import wfbp

__all__ = ["bytescheduler"]


def bytescheduler(grads: GradientLayers, cost: CommCost, options: SchedulerOptions | None = None) -> Plan:
    """ByteScheduler (Peng et al., SOSP 2019) and P3 (Jayarajan et al., MLSys 2019): priority with partitions.

    Every layer's gradient is cut into partitions of ``partition_bytes``;
    the channel always sends the ready partition of highest priority, the
    layer nearest the input first. Each layer is updated once its partitions
    are back, and the next iteration's forward of layer l starts as soon as
    layer l is updated, so communication overlaps the next forward as well as
    backward.

    ``credit`` (partitions in flight at once) bounds the parameter servers
    busy at once on the parameter-server architecture (`sim.comm.ps_cost`).
    On all-reduce the model sends one partition at a time, its launch cost
    (`sim.frameworks`) before its transfer, so no partition is in flight
    beside another and ``credit`` changes nothing there (the plan keeps it;
    `sim.tune` says when a knob leaves the timing unchanged). Pipelining a
    partition's launch behind the transfers before it, as a credit above one
    allows, is not modelled.
    """
    opt = SchedulerOptions.of(options)
    return Plan(BYTESCHEDULER, wfbp(grads, cost).groups, partition_bytes=int(opt.partition_bytes),
                priority="input_first", credit=int(opt.credit), per_layer_update=True)


SPEC = register(SchedulerSpec(
    BYTESCHEDULER, "ByteScheduler: partitions by priority, nearest the input first, overlapping the next forward.",
    "Peng et al., ByteScheduler, SOSP 2019; Jayarajan et al., P3, MLSys 2019",
    plan=lambda grads, cost, options, bucket_mb: bytescheduler(grads, cost, options), function=bytescheduler,
    knobs=("partition_bytes", "credit"), ps_in_flight_knob="credit"))
