"""``horovod``: Horovod's tensor fusion with its cycle time."""

from __future__ import annotations

import math

from sim.comm import CommCost
from sim.core.plan import GradientLayers, Plan
from sim.schedulers.base import plan_from_spans, value_lists
from sim.schedulers.names import HOROVOD
from sim.schedulers.options import MIB, SchedulerOptions
from sim.schedulers.registry import SchedulerSpec, register

__all__ = ["horovod"]


def horovod(grads: GradientLayers, cost: CommCost, options: SchedulerOptions | None = None) -> Plan:
    """Horovod tensor fusion (Sergeev and Del Balso, arXiv 1802.05799; Horovod 0.19).

    Horovod's background thread wakes every cycle (``cycle_time_ms``, default
    1 ms) and packs the gradients that have become ready since the last tick,
    in ready order, into fusion buffers of at most ``fusion_threshold_mb`` MiB
    (default 64). The defaults mix two releases: Horovod 0.19 and 0.20 wake
    every 5 ms with 64 MB buffers, and 0.21 and later every 1 ms with 128 MB
    (Horovod v0.21.0 release notes, "Changed default cycle time from 5ms to 1ms
    and fusion threshold from 64MB to 128MB", PR #2468): give both knobs to
    model one release. A gradient larger than the threshold goes alone, and a
    threshold of 0 sends every gradient alone. Ticks fall at j x cycle from
    the start of backward, so a gradient ready at r waits for
    ``ceil(r / cycle) x cycle`` (``Plan.lag_s``). With a cycle of 0 a message
    leaves when its gradients are ready: threshold 0 is then `wfbp`, and an
    unbounded threshold with a cycle equal to the backward time is
    `synceasgd`.
    """
    opt = SchedulerOptions.of(options)
    cycle_s = opt.cycle_time_ms * 1e-3
    cap = opt.fusion_threshold_mb * MIB
    spans: list[tuple[int, int]] = []
    lags: list[float] = []
    hi, filled, tick_open = grads.n - 1, 0.0, None
    ready_s, nbytes = value_lists(grads)  # Python floats: the same values
    for l in range(grads.n - 1, -1, -1):
        r = ready_s[l]
        tick = r if cycle_s == 0 else math.ceil(r / cycle_s - 1e-9) * cycle_s
        b = nbytes[l]
        if tick_open is not None and (tick != tick_open or filled + b > cap):
            spans.append((hi, l + 1))
            lags.append(tick_open - ready_s[l + 1])
            hi, filled = l, 0.0
        tick_open = tick
        filled += b
    if grads.n:
        spans.append((hi, 0))
        lags.append(tick_open - ready_s[0])
    return plan_from_spans(HOROVOD, grads, spans, lag_s=tuple(max(x, 0.0) for x in lags))


SPEC = register(SchedulerSpec(
    HOROVOD, "Horovod tensor fusion: ready gradients packed each cycle into buffers up to the threshold.",
    "Sergeev and Del Balso, Horovod, arXiv 1802.05799; Horovod 0.19",
    plan=lambda grads, cost, options, bucket_mb: horovod(grads, cost, options), function=horovod,
    knobs=("fusion_threshold_mb", "cycle_time_ms")))
