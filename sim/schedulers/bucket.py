"""``bucket``: fixed-size buckets in gradient-ready order."""

from __future__ import annotations

from sim.comm import CommCost
from sim.core.plan import GradientLayers, Plan
from sim.schedulers.base import fill_buckets, plan_from_spans
from sim.schedulers.knobs import DEFAULT_BUCKET_MB, KNOBS
from sim.schedulers.names import BUCKET
from sim.schedulers.options import MIB
from sim.schedulers.registry import SchedulerSpec, register

__all__ = ["bucket"]


def bucket(grads: GradientLayers, cost: CommCost, bucket_mb: float = DEFAULT_BUCKET_MB) -> Plan:
    """Fixed-size buckets in gradient-ready order, as PyTorch DDP and Horovod
    tensor fusion do: gradients join the open bucket, which is sent once it
    holds at least ``bucket_mb`` MiB (2^20 bytes, as DDP's ``bucket_cap_mb``);
    the last bucket takes what is left.
    """
    KNOBS["bucket_mb"].check(bucket_mb)
    return plan_from_spans(BUCKET, grads, fill_buckets(grads, bucket_mb * MIB, bucket_mb * MIB))


SPEC = register(SchedulerSpec(
    BUCKET, "Fixed-size buckets in gradient-ready order: a bucket is sent once it holds bucket_mb MiB.",
    "Li et al., PyTorch Distributed, VLDB 2020 (buckets of bucket_cap_mb)",
    plan=lambda grads, cost, options, bucket_mb: bucket(grads, cost, bucket_mb=bucket_mb), function=bucket,
    knobs=("bucket_mb",)))
