"""Plans of a sweep, each distinct one made once (`sim.parallel`'s workers use it).

A scheduler's plan is a function of what it reads. Most read only the layers'
gradient sizes (and their bucket size): one plan then serves every network,
GPU count and batch size of a model. Horovod reads the ready times too (one
plan per workload); MG-WFBP, optimal and any other scheduler read the cost.
``tests/test_scale.py`` checks the declarations below against the schedulers.
"""

from __future__ import annotations

import functools

from sim.core.cost import NO_COMM
from sim.core.plan import NO_GRADIENTS, GradientLayers, Plan, gradient_layers
from sim.schedulers import DEFAULT_BUCKET_MB, make_plan
from sim.schedulers.names import BUCKET, DDP, HOROVOD, SEQUENTIAL, SYNCEASGD, WFBP

__all__ = ["ONE_GPU_PER_LAYER", "PLAN_READS_READY_TIMES", "PLAN_READS_SIZES_ONLY", "PlanCache", "one_gpu_scheduler",
           "updates_per_layer"]

#: What a scheduler's plan reads besides the layers' gradient sizes (and its bucket size): these
#: read nothing else, so one plan serves every network, GPU count and batch size of a model ...
PLAN_READS_SIZES_ONLY = frozenset({SEQUENTIAL, WFBP, SYNCEASGD, BUCKET, DDP})
#: ... these read the ready times too (one plan per workload), never the cost; any other reads the cost.
PLAN_READS_READY_TIMES = frozenset({HOROVOD})
#: The "scheduler" of a one-GPU evaluation whose scheduler updates per layer: no message, one update,
#: and the next batch read while it runs (`sim.core.lower`); a one-GPU evaluation of any other is None.
ONE_GPU_PER_LAYER = "(one GPU, per-layer update)"


@functools.lru_cache(maxsize=64)
def updates_per_layer(scheduler: str) -> bool:
    """Whether ``scheduler``'s plans update per layer (its step returns at the end of backward)."""
    return make_plan(scheduler, NO_GRADIENTS, NO_COMM).per_layer_update


def one_gpu_scheduler(scheduler: str) -> str | None:
    """What a one-GPU evaluation of ``scheduler`` plans with: `ONE_GPU_PER_LAYER`, or None (no message)."""
    return ONE_GPU_PER_LAYER if updates_per_layer(scheduler) else None


class PlanCache:
    """Each distinct plan of a worker's evaluations, made once: a plan that reads only the
    gradient sizes serves every workload of the model, one that reads the ready times every
    cost of its workload (`PLAN_READS_SIZES_ONLY`, `PLAN_READS_READY_TIMES`)."""

    def __init__(self, workloads: dict):
        self.workloads = workloads
        self.grads: dict[int, GradientLayers] = {}
        self.ids: dict[tuple, int] = {}  # plan key -> plan id
        self.by_value: dict[Plan, int] = {}  # equal plans made under different keys share an id
        self.by_id: list[Plan] = []
        self.layout: dict[int, tuple] = {}

    def get(self, wid: int, scheduler, bucket_mb, cost) -> int:
        w = self.workloads[wid]
        if scheduler is None or scheduler == ONE_GPU_PER_LAYER:  # one GPU: no message
            key: tuple = (scheduler,)
        elif scheduler in PLAN_READS_SIZES_ONLY:
            if wid not in self.layout:
                self.layout[wid] = (w.model.layer_names, w.model.params.tobytes(), w.precision)
            key = (self.layout[wid], scheduler, bucket_mb)
        elif scheduler in PLAN_READS_READY_TIMES:
            key = (wid, scheduler, bucket_mb)
        else:
            key = (wid, scheduler, bucket_mb, cost)
        plan_id = self.ids.get(key)
        if plan_id is None:
            plan = self.make(wid, scheduler, bucket_mb, cost)
            plan_id = self.ids[key] = self.by_value.setdefault(plan, len(self.by_id))
            if plan_id == len(self.by_id):
                self.by_id.append(plan)
        return plan_id

    def make(self, wid: int, scheduler, bucket_mb, cost) -> Plan:
        if scheduler is None or scheduler == ONE_GPU_PER_LAYER:
            return Plan("", (), per_layer_update=scheduler == ONE_GPU_PER_LAYER)
        w = self.workloads[wid]
        if wid not in self.grads:
            self.grads[wid] = gradient_layers(w.model, w.precision)
        return make_plan(scheduler, self.grads[wid], cost, bucket_mb=DEFAULT_BUCKET_MB if bucket_mb is None else bucket_mb)
