"""Checks of a Kineto trace's values, one event at a time: what `sim.calib.kineto` keeps must be usable.

A bad value is a `SimInputError` naming the event (its index and name) and the field; nothing absurd is carried
into the layer table or the report.
"""

from __future__ import annotations

import math

from sim.errors import SimInputError

__all__ = ["DTYPE_BYTES", "MAX_DUR_US", "MAX_ELEMENTS", "check_dtype", "check_elements", "check_number",
           "check_world_size"]

#: Bytes per element of the ``dtype`` names PyTorch writes into NCCL kernel args.
DTYPE_BYTES = {
    "Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2,
    "Char": 1, "Byte": 1, "Bool": 1, "ComplexFloat": 8, "ComplexDouble": 16,
    "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1,
}

#: A complete event longer than a day (in the trace's microseconds) is absurd; an NCCL message of more than
#: 2^48 elements (a petabyte of fp32) too.
MAX_DUR_US = 86_400e6
MAX_ELEMENTS = 2**48


def check_number(event: dict, key: str, index: int, where: str) -> float:
    """An event's ``ts`` or ``dur``: a finite number; a duration from 0 to `MAX_DUR_US`."""
    value = event.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or (
        key == "dur" and not 0 <= value <= MAX_DUR_US
    ):
        raise SimInputError(f"{where}: event {index} ({str(event.get('name'))[:40]!r}) has a bad {key!r}: {value!r}"
                            + (f" (a duration from 0 to {MAX_DUR_US:.0f} us)" if key == "dur" else ""))
    return float(value)


def check_elements(event: dict, args: dict, index: int, where: str) -> int | None:
    """An NCCL kernel's ``In msg nelems``: None when absent, else a whole number from 0 to `MAX_ELEMENTS`."""
    value = args.get("In msg nelems")
    if value is None:
        return None
    whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())
    if isinstance(value, bool) or not whole or not 0 <= value <= MAX_ELEMENTS:
        raise SimInputError(f"{where}: event {index} ({str(event.get('name'))[:40]!r}) has a bad 'In msg nelems': "
                            f"{value!r} (a whole number from 0 to 2^48)")
    return int(value)


def check_dtype(event: dict, args: dict, index: int, where: str):
    """An NCCL kernel's ``dtype``: absent, or one `DTYPE_BYTES` knows."""
    value = args.get("dtype")
    if value is not None and value not in DTYPE_BYTES:
        raise SimInputError(f"{where}: event {index} ({str(event.get('name'))[:40]!r}) has an unknown dtype "
                            f"{str(value)[:40]!r}; known: {', '.join(DTYPE_BYTES)}")
    return value


def check_world_size(value, where: str) -> int | None:
    """``distributedInfo.world_size``: absent, or a whole number of ranks from 1 to 2^20."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 2**20:
        raise SimInputError(f"{where}: distributedInfo has a bad world_size: {str(value)[:40]!r} (a whole number of "
                            "ranks from 1 to 1048576)")
    return value
