"""The tunable settings of the schedulers and of the parameter server, as data.

Each `Knob` is one `SchedulerOptions` field (or ``bucket_mb``, which stays an
argument of its own): its type, unit, default, inclusive bounds and help.
Validation (`SchedulerOptions`, ``bucket_mb``), the CLI's flags, `sim.tune`
and the dashboard all read this one table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.checks import check_float, check_int
from sim.errors import SimInputError
from sim.schedulers.names import BYTESCHEDULER, DDP, HOROVOD

__all__ = ["DEFAULT_BUCKET_MB", "KNOBS", "Knob"]

DEFAULT_BUCKET_MB = 25.0
#: Upper bounds of the knobs, far above any real setting; they keep sizes and counts inside int64 and
#: floats exact (raise them here): 1 PiB in MiB (a fusion threshold may also be inf: no limit), one hour in ms, 2**53 bytes, 2**20 servers or partitions.
MAX_MB = float(2**30)
MAX_CYCLE_MS = 3_600_000.0
#: The shortest cycle time above 0, one nanosecond: shorter ones overflow the count of ticks.
MIN_CYCLE_MS = 1e-6
MAX_BYTES = 2**53
MAX_COUNT = 2**20


@dataclass(frozen=True)
class Knob:
    """One tunable setting.

    ``low`` and ``high`` are inclusive bounds (None: unbounded), except that
    ``low_open`` excludes ``low`` itself; ``allow_inf`` accepts +inf (a float
    knob with no limit). ``ps``: the parameter-server architecture reads it,
    whatever the scheduler; ``setting``: reported among a run's settings when
    read. ``min_positive``: a value above ``low`` is at least this (a cycle time is 0, no
    wait, or long enough to count ticks in). ``tune_scheduler``: the scheduler `sim.tune` tunes it with by default;
    ``grid``: values worth trying (the dashboard's tuning grid; empty: not offered).
    """

    name: str
    kind: type
    unit: str
    default: object
    low: float | None
    high: float | None
    help: str
    low_open: bool = False
    allow_inf: bool = False
    ps: bool = False
    setting: bool = True
    min_positive: float | None = None
    tune_scheduler: str | None = None
    grid: tuple = ()

    @property
    def flag(self) -> str:
        """The command-line flag, e.g. ``--fusion-threshold-mb``."""
        return "--" + self.name.replace("_", "-")

    def check(self, value):
        """``value`` as this knob's type, or a `SimInputError` naming the knob.

        None is accepted only when it is the default (``servers``: one per node).
        """
        if value is None and self.default is None:
            return None
        if self.kind is bool:
            if not isinstance(value, (bool, np.bool_)):
                raise SimInputError(f"{self.name} must be true or false, got {value!r}")
            return bool(value)
        if self.kind is int:
            return check_int(self.name, value, self.low, self.high)
        value = check_float(self.name, value, self.low, self.high, low_open=self.low_open, allow_inf=self.allow_inf)
        if self.min_positive is not None and self.low < value < self.min_positive:
            raise SimInputError(f"{self.name} must be {self.low:g} or at least {self.min_positive:g}, got {value!r}")
        return value


KNOBS: dict[str, Knob] = {k.name: k for k in (
    Knob("bucket_mb", float, "MiB", DEFAULT_BUCKET_MB, 0, MAX_MB,
         "bucket size in MiB (PyTorch DDP's bucket_cap_mb)", low_open=True, tune_scheduler=DDP,
         grid=(1, 2, 5, 10, 25, 50, 100, 200)),
    Knob("fusion_threshold_mb", float, "MiB", 64.0, 0, MAX_MB,
         "Horovod fusion threshold in MiB (HOROVOD_FUSION_THRESHOLD: 64 up to Horovod 0.20, 128 from 0.21; "
         "0 disables fusion)", allow_inf=True,
         tune_scheduler=HOROVOD, grid=(1, 4, 16, 32, 64, 128, 256)),
    Knob("cycle_time_ms", float, "ms", 1.0, 0, MAX_CYCLE_MS, "Horovod cycle time in ms (HOROVOD_CYCLE_TIME: 5 up to Horovod 0.20, 1 from 0.21; 0: no wait)",
         min_positive=MIN_CYCLE_MS, tune_scheduler=HOROVOD, grid=(0, 0.5, 1, 2, 5, 10)),
    Knob("first_bucket_mb", float, "MiB", 1.0, 0, MAX_MB,
         "PyTorch DDP's first bucket cap in MiB (_DEFAULT_FIRST_BUCKET_BYTES)", low_open=True, tune_scheduler=DDP,
         grid=(0.25, 0.5, 1, 2, 5, 10, 25)),
    Knob("partition_bytes", int, "bytes", 4_096_000, 1, MAX_BYTES,
         "partition size in bytes (ByteScheduler; BytePS's 4,096,000)", ps=True, tune_scheduler=BYTESCHEDULER,
         grid=(1_000_000, 2_000_000, 4_096_000, 8_000_000, 16_000_000, 64_000_000)),
    Knob("credit", int, "", 4, 1, MAX_COUNT,
         "ByteScheduler's credit: on parameter servers, the servers busy at once; on all-reduce, 1 launches each "
         "partition just before its transfer, 2 or more run the launches ahead of the transfers (not bounded further)",
         tune_scheduler=BYTESCHEDULER, grid=(1, 2, 4, 8, 16)),
    Knob("servers", int, "", None, 1, MAX_COUNT, "parameter servers S (default: as many as worker machines)", ps=True),
    Knob("colocated", bool, "", False, None, None,
         "parameter servers on the worker machines instead of separate hosts", ps=True),
    Knob("ps_link_efficiency", float, "", 1.0, 0.001, 1,
         "fraction of the network's effective rate that parameter-server push and pull reach (1: all of it; "
         "at least 0.001)", ps=True, setting=False),
)}
