"""Interference coefficients per link preset, read from ``data/interference.csv``.

Each row gives a link's ``compute_slowdown`` (compute overlapped by
communication runs longer: `sim.core.interference`) and ``comm_slowdown``
(communication overlapped by compute progresses slower: `sim.core.channel`),
each fitted on the validation's calibration cases or derived from a link of
the same class, with its source.
"""

from __future__ import annotations

import csv
import functools
import math

from sim.catalog import DATA_DIR
from sim.core.cost import MAX_SLOWDOWN  # (compute's stretch has one root only up to 1)
from sim.errors import SimInputError

__all__ = ["COLUMNS", "INTERFERENCE_PATH", "coefficient", "comm_slowdown", "compute_slowdown"]

INTERFERENCE_PATH = DATA_DIR / "interference.csv"


#: The coefficients each row holds.
COLUMNS = ("compute_slowdown", "comm_slowdown")


@functools.lru_cache(maxsize=1)
def _interference() -> dict[str, dict[str, float]]:
    out = {}
    with open(INTERFERENCE_PATH, newline="", encoding="utf-8") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            values = {}
            for column in COLUMNS:
                try:
                    value = float(row[column])
                except (KeyError, TypeError, ValueError):
                    raise SimInputError(f"interference.csv line {line}: {column} must be a number") from None
                if not (math.isfinite(value) and 0 <= value <= MAX_SLOWDOWN[column]):
                    raise SimInputError(f"interference.csv line {line}: {column} must be in [0, {MAX_SLOWDOWN[column]:g}], "
                                        f"got {value}")
                values[column] = value
            out[row["network"]] = values
    return out


def coefficient(network: str, column: str) -> float:
    """One of `COLUMNS` for a link preset (0 for a link the file does not list, such as a user preset)."""
    return _interference().get(network, {}).get(column, 0.0)


def compute_slowdown(network: str) -> float:
    """Interference coefficient of a link preset (``data/interference.csv``; 0 for a link it does not list):
    overlapped compute runs ``1 + this x (overlapped fraction)`` times as long."""
    return coefficient(network, "compute_slowdown")


def comm_slowdown(network: str) -> float:
    """Interference coefficient the other way (0 for a link the file does not list): a message makes
    ``1 / (1 + this)`` of its progress while its worker computes."""
    return coefficient(network, "comm_slowdown")
