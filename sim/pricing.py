"""Cost and energy of an iteration: an hourly price and a board power per GPU type.

``data/prices.csv`` gives, per GPU of ``data/gpus.csv``, a public cloud's
on-demand price per GPU-hour (with the page, the region and the year, and how a
per-GPU share was derived from an instance of several GPUs) and the board
power from the GPU's datasheet (its TDP / maximum board power). A GPU with no
public on-demand offer has no price: its cost figures are NaN unless a price
is given.

The model, kept simple on purpose:

* cost per iteration = price per GPU-hour x GPUs x iteration time / 3600 s;
* energy per iteration = board power x GPUs x iteration time: every GPU is
  taken to draw its full board power for the whole iteration, also while it
  waits for communication. This is an upper bound of the GPUs' own energy
  (an idle or waiting GPU draws less); hosts, network and cooling are not
  counted;
* per 1,000 samples = per iteration x 1000 / (batch per GPU x GPUs).

Both inputs can be overridden (``--price-usd-per-hour``, ``--power-w``; the
API's ``price_usd_per_hour`` and ``power_w``), both per GPU.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from sim.catalog import DATA_DIR
from sim.checks import check_float
from sim.errors import SimInputError

__all__ = ["COST_KEYS", "MAX_POWER_W", "MAX_PRICE_USD_PER_HOUR", "PRICES_FILE", "GpuPrice", "check_overrides",
           "cost_metrics", "gpu_price", "prices"]

#: One GPU's price per hour and board power beyond which a given value is absurd (GPUs list at a few
#: dollars an hour and under 1 kW; at 1e308 the cost and energy overflowed to blank).
MAX_PRICE_USD_PER_HOUR = 1e4
MAX_POWER_W = 1e5

PRICES_FILE = DATA_DIR / "prices.csv"
_COLUMNS = ("name", "price_usd_per_hour", "price_source", "power_w", "power_source")
#: The keys `cost_metrics` returns.
COST_KEYS = (
    "price_usd_per_gpu_hour", "power_w_per_gpu", "cost_usd_per_iteration", "cost_usd_per_1000_samples",
    "energy_j_per_iteration", "energy_j_per_1000_samples",
)
SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True)
class GpuPrice:
    """One GPU type's on-demand price per GPU-hour (None: no public offer) and board power."""

    name: str
    price_usd_per_hour: float | None
    power_w: float
    price_source: str
    power_source: str
    note: str = ""


def _number(text: str, field: str, where: str, *, optional: bool) -> float | None:
    text = text.strip()
    if not text and optional:
        return None
    try:
        value = float(text)
    except ValueError:
        raise SimInputError(f"{where}: {field} must be a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise SimInputError(f"{where}: {field} must be a finite number > 0, got {text!r}")
    return value


def _row(line: int, row: dict) -> GpuPrice:
    where = f"{PRICES_FILE.name} line {line}"
    for field in ("name", "price_source", "power_source"):
        if not str(row.get(field) or "").strip():
            raise SimInputError(f"{where}: {field} is empty; every number must cite its source")
    return GpuPrice(
        name=row["name"].strip(),
        price_usd_per_hour=_number(row.get("price_usd_per_hour") or "", "price_usd_per_hour", where, optional=True),
        power_w=_number(row.get("power_w") or "", "power_w", where, optional=False),
        price_source=row["price_source"].strip(), power_source=row["power_source"].strip(),
        note=str(row.get("note") or "").strip(),
    )


@functools.cache
def prices() -> Mapping[str, GpuPrice]:
    """Every row of ``data/prices.csv``, by GPU name: read once per process and shared by every caller
    (every session of the dashboard), so read-only (``dict(prices())`` is a copy to change)."""
    try:
        text = PRICES_FILE.read_text(encoding="utf-8")
    except OSError as exc:
        raise SimInputError(f"{PRICES_FILE.name}: cannot read ({exc.strerror})") from None
    reader = csv.DictReader(io.StringIO(text), skipinitialspace=True)
    missing = [c for c in _COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise SimInputError(f"{PRICES_FILE.name} line 1: missing column(s) {', '.join(missing)}")
    out: dict[str, GpuPrice] = {}
    for row in reader:
        entry = _row(reader.line_num, row)
        if entry.name in out:
            raise SimInputError(f"{PRICES_FILE.name} line {reader.line_num}: duplicate gpu {entry.name!r}")
        out[entry.name] = entry
    return MappingProxyType(out)


def gpu_price(gpu: str) -> GpuPrice | None:
    """The price row of ``gpu``, or None when ``data/prices.csv`` has none."""
    return prices().get(gpu)


def _override(name: str, value, high: float) -> float | None:
    return None if value is None else check_float(name, value, 0, high, low_open=True)


def check_overrides(price_usd_per_hour, power_w) -> None:
    """Refuse a given price or power that is not a number > 0 and within its `MAX_...` bound."""
    _override("price_usd_per_hour", price_usd_per_hour, MAX_PRICE_USD_PER_HOUR)
    _override("power_w", power_w, MAX_POWER_W)


def cost_metrics(*, gpu: str, gpus: int, batch_size: int, iteration_time_s: float,
                 price_usd_per_hour: float | None = None, power_w: float | None = None) -> dict:
    """`COST_KEYS` of one run: the catalog's price and power for ``gpu`` unless given (per GPU).

    A figure without its input (no price for the GPU, none given) is NaN.
    """
    row = gpu_price(gpu)
    price = _override("price_usd_per_hour", price_usd_per_hour, MAX_PRICE_USD_PER_HOUR)
    power = _override("power_w", power_w, MAX_POWER_W)
    if price is None and row is not None:
        price = row.price_usd_per_hour
    if power is None and row is not None:
        power = row.power_w
    nan = float("nan")
    price = nan if price is None else float(price)
    power = nan if power is None else float(power)
    cost = price * gpus * iteration_time_s / SECONDS_PER_HOUR
    energy = power * gpus * iteration_time_s
    per_1000 = 1000.0 / (batch_size * gpus)
    return {
        "price_usd_per_gpu_hour": price, "power_w_per_gpu": power,
        "cost_usd_per_iteration": cost, "cost_usd_per_1000_samples": cost * per_1000,
        "energy_j_per_iteration": energy, "energy_j_per_1000_samples": energy * per_1000,
    }
