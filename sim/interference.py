"""Interference coefficients per link preset, read from ``data/interference.csv``.

Each row gives a link's ``compute_slowdown`` (see `sim.core.interference`),
fitted on the validation's calibration cases or derived from a link of the
same class, with its source.
"""

from __future__ import annotations

import csv
import functools
import math

from sim.catalog import DATA_DIR
from sim.errors import SimInputError

__all__ = ["INTERFERENCE_PATH", "compute_slowdown"]

INTERFERENCE_PATH = DATA_DIR / "interference.csv"


@functools.lru_cache(maxsize=1)
def _interference() -> dict[str, float]:
    out = {}
    with open(INTERFERENCE_PATH, newline="", encoding="utf-8") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            try:
                value = float(row["compute_slowdown"])
            except (TypeError, ValueError):
                raise SimInputError(f"interference.csv line {line}: compute_slowdown must be a number") from None
            if not (math.isfinite(value) and value >= 0):
                raise SimInputError(f"interference.csv line {line}: compute_slowdown must be >= 0, got {value}")
            out[row["network"]] = value
    return out


def compute_slowdown(network: str) -> float:
    """Interference coefficient of a link preset (``data/interference.csv``; 0 for a link it does not list,
    such as a user preset)."""
    return _interference().get(network, 0.0)
