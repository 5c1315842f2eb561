"""What the subcommands share to parse flags and print results."""

from __future__ import annotations

import argparse
import json
import math
import warnings

import numpy as np

from sim.checks import MAX_SEED
from sim.errors import SimInputError, SimInputWarning
from sim.schedulers.knobs import Knob

__all__ = ["add_resource_flags", "float_list", "int_list", "items", "knob_type", "name_list", "nonneg_float", "nonneg_int", "positive_float", "read_text",
           "positive_int", "seed", "strict_json", "table", "write_json"]


def int_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= {minimum}")
    return value


def seed(text: str) -> int:
    """A random seed: a whole number from 0 to `sim.checks.MAX_SEED`."""
    value = int_at_least(text, 0)
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"{text!r} must be <= {MAX_SEED}")
    return value


def positive_int(text: str) -> int:
    return int_at_least(text, 1)


def nonneg_int(text: str) -> int:
    return int_at_least(text, 0)


def empty(text: str):
    raise argparse.ArgumentTypeError(f"{text!r} is an empty list")


def items(text: str, parse) -> list:
    """The comma-separated items of ``text``, each parsed: an empty item (``1,,2``, a trailing comma) is
    bad input; an item given twice is kept once, with a warning (`SimInputWarning`)."""
    parts = [part.strip() for part in text.split(",")]
    if not any(parts):
        empty(text)
    if not all(parts):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty item (two commas in a row, or one at an end)")
    values = [parse(part) for part in parts]
    kept = list(dict.fromkeys(values))
    if len(kept) < len(values):
        twice = [v for i, v in enumerate(values) if v in values[:i]]
        warnings.warn(f"{text!r} lists {', '.join(map(str, dict.fromkeys(twice)))} more than once: "
                      "each is run once", SimInputWarning, stacklevel=2)
    return kept


def int_list(text: str) -> list[int]:
    return items(text, positive_int)


def name_list(text: str) -> list[str]:
    return items(text, str)


def nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return value


def positive_float(text: str) -> float:
    value = nonneg_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def float_list(text: str) -> list[float]:
    return [int(v) if float(v).is_integer() else v for v in items(text, nonneg_float)]


def knob_type(knob: Knob):
    """The argparse type of ``knob``'s flag: its kind, finite, within its bounds."""

    def parse(text: str):
        try:
            value = knob.kind(text) if knob.kind is int else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'a whole number' if knob.kind is int else 'a number'}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
        try:
            return knob.check(value)
        except SimInputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = knob.name
    return parse


def strict_json(value):
    """``value`` with numpy scalars as Python ones and every non-finite float as None."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict_json(v) for v in value]
    return value


def write_json(value, out, default=None) -> None:
    """``value`` as strict JSON (no NaN or Infinity tokens: non-finite numbers are null), indented."""
    out.write(json.dumps(strict_json(value), indent=2, allow_nan=False, default=default) + "\n")


def table(metrics: dict) -> str:
    """``key  value`` lines; groups joined with ``+`` and ``|``, floats to 6 significant digits."""
    width = max(len(k) for k in metrics)
    lines = []
    for key, value in metrics.items():
        if key == "groups":
            value = " | ".join("+".join(g) for g in value)
        elif isinstance(value, float):
            value = f"{value:.6g}"
        lines.append(f"{key.ljust(width)}  {value}")
    return "\n".join(lines)


def add_resource_flags(parser) -> None:
    """--optimizer (memory) and the per-GPU price and power overrides (cost, energy): `sim.resources`."""
    from sim.memory import DEFAULT_OPTIMIZER, OPTIMIZERS

    parser.add_argument("--optimizer", choices=list(OPTIMIZERS), default=DEFAULT_OPTIMIZER,
                        help="optimizer: its state counts in the memory per GPU (sgd: none, momentum: one buffer, "
                             "adam, adamw, lamb: two) and its step sets a zoo model's update time "
                             f"(default {DEFAULT_OPTIMIZER})")
    parser.add_argument("--price-usd-per-hour", type=positive_float, default=None, metavar="USD",
                        help="price of one GPU per hour, replacing the GPU type's on-demand price in data/prices.csv")
    parser.add_argument("--power-w", type=positive_float, default=None, metavar="W",
                        help="board power of one GPU in watts, replacing its datasheet TDP in data/prices.csv")


def memory_line(metrics: dict) -> str:
    """``memory per GPU: X GB of Y GB (fits|DOES NOT FIT)`` (GB = 1e9 bytes, as the datasheets)."""
    verdict = "fits" if metrics["fits_in_memory"] else "DOES NOT FIT"
    line = (f"memory per GPU: {metrics['memory_per_gpu_bytes'] / 1e9:.3g} GB of "
            f"{metrics['gpu_memory_bytes'] / 1e9:.3g} GB ({verdict})")
    if metrics["memory_activations_bytes"] == 0:
        line += "; activations not estimated (the layer table has no shapes)"
    return line


#: Bytes of a measured log read by `read_text` (a benchmark log is kilobytes; /dev/zero never ends).
MAX_LOG_BYTES = 100 * 10**6


def read_text(path) -> str:
    """A log file's text; an unreadable, endless or over-`MAX_LOG_BYTES` file is bad input."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(MAX_LOG_BYTES + 1)
    except OSError as exc:
        raise SimInputError(f"cannot read {str(path)!r}: {exc.strerror}") from None
    if len(data) > MAX_LOG_BYTES:
        raise SimInputError(f"{str(path)!r} is over {MAX_LOG_BYTES / 1e6:g} MB, the limit of a log file")
    return data.decode("utf-8", errors="replace")


def add_gradients_flag(p) -> None:
    """``--gradients {tensor,layer}``: what schedulers plan over (`sim.tensors`)."""
    from sim.tensors import DEFAULT_GRADIENTS, GRADIENTS

    p.add_argument("--gradients", choices=list(GRADIENTS), default=None,
                   help="one gradient per parameter tensor, as frameworks have them, or one per layer "
                        f"(default {DEFAULT_GRADIENTS}; a layer CSV without a tensors column has one per layer)")
