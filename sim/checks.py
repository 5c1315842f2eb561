"""Shared input validators: one place that turns a bad value into a one-line
`SimInputError` naming the field.

Every public entry point checks its arguments with these before any work
starts, so a bad value never reaches the engine as a silently wrong number.
"""

from __future__ import annotations

import math

import numpy as np

from sim.errors import SimInputError

__all__ = ["MAX_TIME_S", "MIN_NORMAL", "check_array", "check_choice", "check_float", "check_int", "check_seed"]

#: The largest seed numpy's Generator is given here (a 64-bit unsigned integer).
MAX_SEED = 2**63 - 1
#: The longest time a user gives for one thing (a layer's pass, a read, an update, a measured iteration):
#: a day. Beyond it a value is absurd, and at 1e300 every figure of the run became 1e300 or blank.
MAX_TIME_S = 86_400.0
#: The smallest normal float: a positive time below it (subnormal) is refused, in arrays and scalars alike
#: (sums and ratios of one overflow).
MIN_NORMAL = float(np.finfo(float).tiny)


def check_int(name: str, value, low: int | None = None, high: int | None = None) -> int:
    """``value`` as a Python int, or a `SimInputError` naming ``name``.

    Booleans and floats are refused (``True`` is not a GPU count and 2.5 is not
    a layer count); bounds are inclusive.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise SimInputError(f"{name} must be a whole number, got {value!r}")
    value = int(value)
    if low is not None and value < low:
        raise SimInputError(f"{name} must be a whole number >= {low}, got {value}")
    if high is not None and value > high:
        raise SimInputError(f"{name} must be a whole number <= {high}, got {value}")
    return value


def check_float(name: str, value, low: float | None = None, high: float | None = None, *,
                low_open: bool = False, allow_inf: bool = False) -> float:
    """``value`` as a finite float within [low, high] (or (low, high] with
    ``low_open``), or a `SimInputError` naming ``name``. NaN is always refused;
    +inf only with ``allow_inf`` (then above ``high`` too: no limit)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise SimInputError(f"{name} must be a number, got {value!r}")
    try:
        value = float(value)
    except OverflowError:  # an int beyond a float's range (10**400)
        raise SimInputError(f"{name} must be a finite number, got an integer of {len(str(abs(value)))} digits") from None
    if math.isnan(value) or (math.isinf(value) and not (allow_inf and value > 0)):
        raise SimInputError(f"{name} must be a finite number, got {value}")
    if low is not None and (value < low or (low_open and value == low)):
        raise SimInputError(f"{name} must be {'>' if low_open else '>='} {low:g}, got {value:g}")
    if high is not None and value > high and not (allow_inf and math.isinf(value)):
        shown = f"{value:g}" if f"{value:g}" != f"{high:g}" else repr(value)  # 1073741825 shows as 1.07374e+09
        raise SimInputError(f"{name} must be <= {high:g}, got {shown}")
    return value


def check_seed(value) -> int:
    """A random seed: a whole number from 0 to `MAX_SEED`."""
    return check_int("seed", value, 0, MAX_SEED)


def check_choice(name: str, value, choices) -> str:
    """``value`` if it is one of ``choices``; else an error listing them."""
    if not isinstance(value, str) or value not in choices:
        raise SimInputError(f"unknown {name} {value!r}; valid: {', '.join(choices)}")
    return value


def check_array(name: str, values, length: int, *, integer: bool = False, high: float | None = None) -> np.ndarray:
    """``values`` as a 1-D array of ``length`` finite numbers from 0 to ``high`` (whole with ``integer``),
    or a `SimInputError` naming ``name``. Booleans, text and nested lists are refused."""
    arr = np.asarray(values)
    if arr.ndim != 1 or arr.dtype.kind not in "iuf":
        raise SimInputError(f"{name} must be a flat array of numbers, got {arr.ndim}-D {arr.dtype} values")
    if arr.shape[0] != length:
        raise SimInputError(f"{name} has {arr.shape[0]} entries for {length} layers")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise SimInputError(f"{name} must be finite and >= 0")
    if arr.dtype.kind == "f" and np.any((arr > 0) & (arr < MIN_NORMAL)):  # subnormal: sums and ratios of it overflow
        raise SimInputError(f"{name} must be 0 or at least {MIN_NORMAL:g}, got {float(arr[(arr > 0) & (arr < MIN_NORMAL)][0]):g}")
    if high is not None and np.any(arr > high):
        raise SimInputError(f"{name} must be <= {high:g}, got {float(arr.max()):g}")
    if integer and arr.dtype.kind == "f" and np.any(arr != np.floor(arr)):
        raise SimInputError(f"{name} must be whole numbers")
    return arr
