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

    ``credit`` (ByteScheduler's partitions in flight at once) bounds the parameter servers
    busy at once on the parameter-server architecture (`sim.comm.ps_cost`).
    On all-reduce it decides where each partition's launch runs (ByteScheduler's
    Python core schedules every partition as a task of its own, a per-partition
    cost fitted in `sim.frameworks`): with credit 1 the launch comes just before
    the partition's transfer, on the channel; with 2 or more the framework
    launches the next partitions while one is on the wire, so the launches run
    on a ``launch`` lane of their own, ahead of the transfers
    (`sim.core.lower.launches_ahead`). How far ahead is not bounded by the
    credit beyond that, so credits of 2 and more time alike (`sim.tune` says so).
    """
    opt = SchedulerOptions.of(options)
    return Plan(BYTESCHEDULER, wfbp(grads, cost).groups, partition_bytes=int(opt.partition_bytes),
                priority="input_first", credit=int(opt.credit), per_layer_update=True)


SPEC = register(SchedulerSpec(
    BYTESCHEDULER, "ByteScheduler: partitions by priority, nearest the input first, overlapping the next forward.",
    "Peng et al., ByteScheduler, SOSP 2019; Jayarajan et al., P3, MLSys 2019",
    plan=lambda grads, cost, options, bucket_mb: bytescheduler(grads, cost, options), function=bytescheduler,
    knobs=("partition_bytes", "credit"), ps_in_flight_knob="credit"))
