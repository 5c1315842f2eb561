"""``ddp``: PyTorch DDP's gradient buckets, with its smaller first bucket."""

from __future__ import annotations

from sim.comm import CommCost
from sim.core.plan import GradientLayers, Plan
from sim.schedulers.base import fill_buckets, plan_from_spans
from sim.schedulers.knobs import DEFAULT_BUCKET_MB, KNOBS
from sim.schedulers.names import DDP
from sim.schedulers.options import MIB, SchedulerOptions
from sim.schedulers.registry import SchedulerSpec, register

__all__ = ["ddp"]


def ddp(grads: GradientLayers, cost: CommCost, bucket_mb: float = DEFAULT_BUCKET_MB,
        options: SchedulerOptions | None = None) -> Plan:
    """PyTorch DDP's gradient buckets (Li et al., VLDB 2020; ``compute_bucket_assignment_by_size``).

    Parameters are assigned to buckets in reverse order (the order their
    gradients become ready); a bucket closes once it holds at least its cap:
    ``first_bucket_mb`` (1 MiB, ``dist._DEFAULT_FIRST_BUCKET_BYTES``) for the
    first, ``bucket_mb`` (``bucket_cap_mb``, 25 MiB) for the rest. A bucket's
    all-reduce starts when all its gradients are ready.
    """
    opt = SchedulerOptions.of(options)
    KNOBS["bucket_mb"].check(bucket_mb)
    return plan_from_spans(DDP, grads, fill_buckets(grads, opt.first_bucket_mb * MIB, bucket_mb * MIB))


SPEC = register(SchedulerSpec(
    DDP, "PyTorch DDP's buckets: a first bucket of first_bucket_mb MiB, then buckets of bucket_mb MiB.",
    "Li et al., PyTorch Distributed, VLDB 2020; compute_bucket_assignment_by_size",
    plan=lambda grads, cost, options, bucket_mb: ddp(grads, cost, bucket_mb=bucket_mb, options=options), function=ddp,
    knobs=("bucket_mb", "first_bucket_mb")))
