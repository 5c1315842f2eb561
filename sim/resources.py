"""What a run needs and costs: per-GPU memory (`sim.memory`) and dollars and joules (`sim.pricing`).

`resource_metrics` gives the `RESOURCE_KEYS` of one run, which `sim.simulate`
adds to its metrics and `sim.sweep` to its rows: the GPU type, the memory
parts and whether they fit, and the cost and energy per iteration and per
1,000 samples.

The shard of a scheduler (ZeRO's stages, `sim.memory.SHARDS`) is read from its
registry spec's ``shard`` attribute when it has one (``"none"`` otherwise), so
that a sharded scheduler's memory follows from its registration. A run's
gradient compression (``compression``, `sim.compression`) adds its state
(`sim.memory.compression_state_bytes`) over the run's messages (``groups``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from sim.catalog import get_gpu
from sim.compression import Compression
from sim.memory import (
    DEFAULT_OPTIMIZER,
    MEMORY_KEYS,
    MemoryEstimate,
    comm_buffer_bytes,
    gathered_unit_bytes,
    memory_per_gpu,
)
from sim.model import Model
from sim.pricing import COST_KEYS, cost_metrics
from sim.schedulers.knobs import DEFAULT_BUCKET_MB
from sim.schedulers.options import SchedulerOptions

if TYPE_CHECKING:
    import pandas as pd
from sim.schedulers.registry import get_spec

__all__ = ["RESOURCE_KEYS", "resource_columns", "resource_metrics", "run_memory", "shard_of"]

#: The keys `resource_metrics` returns, in order.
RESOURCE_KEYS = ("gpu", *MEMORY_KEYS, *COST_KEYS)


def shard_of(scheduler: str) -> str:
    """What ``scheduler`` partitions over the ranks: its spec's ``shard``, else ``"none"``."""
    return getattr(get_spec(scheduler), "shard", "none")


@functools.lru_cache(maxsize=16)
def _bytes_by_name(layer_names: tuple, nbytes: bytes) -> dict[str, int]:
    """Each layer's gradient bytes (``nbytes``, int64) by its name: built once per names and sizes (keyed by
    what they are, not by the model, whose arrays a caller may change in place). Shared: not to be changed."""
    return dict(zip(layer_names, np.frombuffer(nbytes, dtype=np.int64).tolist(), strict=True))


def _largest_merged_message_bytes(model: Model, precision: str, groups: Sequence[Sequence[str]]) -> int:
    """Bytes of the largest message that merges several layers (0 if every message is one layer)."""
    if max(map(len, groups), default=0) <= 1:
        return 0
    sizes = _bytes_by_name(tuple(model.layer_names), model.gradient_bytes(precision).tobytes())
    return max((sum(map(sizes.__getitem__, group)) for group in groups if len(group) > 1), default=0)


def _message_rows(model: Model, groups: Sequence[Sequence[str]]) -> list[list[int]]:
    """The run's messages (lists of layer names) as lists of the model's row indices."""
    row = {name: i for i, name in enumerate(model.layer_names)}
    return [[row[name] for name in group] for group in groups]


def run_memory(model: Model, *, gpus: int, scheduler: str, groups: Sequence[Sequence[str]], batch_size: int,
               precision: str, optimizer: str = DEFAULT_OPTIMIZER, bucket_mb: float = DEFAULT_BUCKET_MB,
               options: SchedulerOptions | dict | None = None,
               compression: Compression | str | None = None) -> MemoryEstimate:
    """`sim.memory.memory_per_gpu` of one run: its scheduler's buffers and shard, and its compression's state.

    ``groups`` are the run's messages as lists of layer names (`sim.SimResult.groups`); ``compression``
    the run's (`sim.compression`, a kind or its text; None: none).
    """
    opts = SchedulerOptions.of(options)
    buffers = comm_buffer_bytes(
        get_spec(scheduler).name, gpus=gpus, gradient_bytes=int(np.sum(model.gradient_bytes(precision))),
        largest_message_bytes=_largest_merged_message_bytes(model, precision, groups), bucket_mb=bucket_mb,
        fusion_threshold_mb=opts.fusion_threshold_mb,
    )
    messages = None if compression is None else _message_rows(model, groups)
    shard = shard_of(scheduler)
    return memory_per_gpu(model, batch_size=batch_size, precision=precision, optimizer=optimizer, gpus=gpus,
                          shard=shard, bucket_bytes=buffers,
                          gathered_bytes=gathered_unit_bytes(model, precision, gpus=gpus, shard=shard),
                          compression=compression, messages=messages)


def resource_metrics(model: Model, *, gpu: str, gpus: int, scheduler: str, groups: Sequence[Sequence[str]],
                     batch_size: int, precision: str, iteration_time_s: float, optimizer: str = DEFAULT_OPTIMIZER,
                     bucket_mb: float = DEFAULT_BUCKET_MB, options: SchedulerOptions | dict | None = None,
                     price_usd_per_hour: float | None = None, power_w: float | None = None,
                     compression: Compression | str | None = None) -> dict:
    """The `RESOURCE_KEYS` of one run on ``gpus`` GPUs of type ``gpu`` (``compression`` as in `run_memory`)."""
    memory = run_memory(model, gpus=gpus, scheduler=scheduler, groups=groups, batch_size=batch_size,
                        precision=precision, optimizer=optimizer, bucket_mb=bucket_mb, options=options,
                        compression=compression)
    cost = cost_metrics(gpu=gpu, gpus=gpus, batch_size=batch_size, iteration_time_s=iteration_time_s,
                        price_usd_per_hour=price_usd_per_hour, power_w=power_w)
    return {"gpu": gpu, **memory.metrics(get_gpu(gpu).mem_bytes), **cost}


def resource_columns(frame: pd.DataFrame, model: Model, *, gpu: str, bucket_mbs: Sequence[float],
                     optimizer: str = DEFAULT_OPTIMIZER, price_usd_per_hour: float | None = None,
                     power_w: float | None = None) -> pd.DataFrame:
    """``frame`` (rows of `sim.sweep`: ``gpus``, ``scheduler``, ``batch_size``, ``precision``,
    ``iteration_time_s``, ``groups``) with the `RESOURCE_KEYS` columns after its own.

    ``bucket_mbs`` is each row's bucket size. Each value is `resource_metrics`'s for
    its row; the memory is worked out once per distinct plan.
    """
    if frame.empty:
        return frame.reindex(columns=[*frame.columns, *RESOURCE_KEYS])
    memo: dict = {}
    memory_rows = []
    for i, row in enumerate(frame[["gpus", "scheduler", "batch_size", "precision", "groups"]].itertuples(index=False)):
        key = (int(row.gpus), row.scheduler, int(row.batch_size), row.precision, float(bucket_mbs[i]), id(row.groups))
        if key not in memo:
            memory = run_memory(model, gpus=key[0], scheduler=row.scheduler, groups=row.groups, batch_size=key[2],
                                precision=row.precision, optimizer=optimizer, bucket_mb=key[4])
            memo[key] = memory.metrics(get_gpu(gpu).mem_bytes)
        memory_rows.append(memo[key])
    # the same arithmetic as `resource_metrics`, on whole columns: the same values to the bit
    cost = cost_metrics(gpu=gpu, gpus=frame["gpus"].to_numpy(dtype=np.int64),
                        batch_size=frame["batch_size"].to_numpy(dtype=np.int64),
                        iteration_time_s=frame["iteration_time_s"].to_numpy(dtype=float),
                        price_usd_per_hour=price_usd_per_hour, power_w=power_w)
    import pandas as pd

    extra = pd.DataFrame(memory_rows, index=frame.index)
    extra.insert(0, "gpu", gpu)
    for key, values in cost.items():
        extra[key] = values
    return pd.concat([frame, extra[list(RESOURCE_KEYS)]], axis=1)
