"""Hardware catalogs read from ``data/``: network links and GPUs.

Every row of a catalog file carries its source (see ``data/README.md``).
Values are converted to SI units once, here, at the edge: a `Network` holds
``alpha_s`` and ``beta_s_per_byte``, a `GPU` gives ``peak_flops(precision)``
in FLOP/s and ``mem_bw_bytes_per_s``.

Network presets can be extended by the user with a CSV of the same columns,
found at `user_networks_path` (``$SSGD_NETWORKS`` or
``~/.config/ssgd/networks.csv``). A user preset may not reuse a built-in name.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from sim.errors import SimInputError

__all__ = [
    "DATA_DIR",
    "GPU",
    "PRECISIONS",
    "Network",
    "USER_NETWORKS_ENV",
    "get_gpu",
    "get_network",
    "gpus",
    "networks",
    "user_networks_path",
]

DATA_DIR = Path(__file__).resolve().parent.parent / "data"

#: Environment variable naming a user presets CSV for networks.
USER_NETWORKS_ENV = "SSGD_NETWORKS"

_NETWORK_COLUMNS = ("name", "scope", "line_rate_gbps", "effective_gbps", "alpha_us", "source")
_NETWORK_SCOPES = ("intra", "inter", "any")

_GPU_COLUMNS = (
    "name",
    "fp32_tflops",
    "tf32_tflops",
    "fp16_tensor_tflops",
    "mem_bw_gb_per_s",
    "mem_gb",
    "source",
)

#: Precisions `GPU.peak_flops` knows, mapped to the field holding the rate.
PRECISIONS = {"fp32": "fp32_tflops", "tf32": "tf32_tflops", "fp16": "fp16_tensor_tflops"}


def _check_positive(owner: str, field: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise SimInputError(f"{owner}: {field} must be a finite number > 0, got {value!r}")


@dataclass(frozen=True)
class Network:
    """One link preset: latency ``alpha_s`` and effective bandwidth.

    ``line_rate_gbps`` is the nominal data rate of one direction of the link
    (after line coding), ``effective_gbps`` the rate NCCL or MPI reaches over
    it (bus bandwidth). ``beta_s_per_byte`` is the transfer time of one byte
    at the effective rate, not at the line rate. ``alpha_s`` is the latency
    of one step (one message) of a ring all-reduce over the link.
    """

    name: str
    scope: str
    line_rate_gbps: float
    effective_gbps: float
    alpha_s: float
    source: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        owner = f"network {self.name!r}"
        if self.scope not in _NETWORK_SCOPES:
            raise SimInputError(f"{owner}: scope must be intra, inter or any, got {self.scope!r}")
        for field in ("line_rate_gbps", "effective_gbps"):
            _check_positive(owner, field, getattr(self, field))
        if self.effective_gbps > self.line_rate_gbps:
            raise SimInputError(
                f"{owner}: effective_gbps {self.effective_gbps} exceeds line_rate_gbps {self.line_rate_gbps}"
            )
        if not (isinstance(self.alpha_s, (int, float)) and math.isfinite(self.alpha_s) and self.alpha_s >= 0):
            raise SimInputError(f"{owner}: alpha must be a finite number >= 0, got {self.alpha_s!r}")

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> Network:
        """Build from a ``data/networks.csv``-style row (``alpha_us`` in us),
        such as the dict `sim.fit.fit_to_network` returns."""
        name = str(row.get("name", ""))
        values = {}
        for field in ("line_rate_gbps", "effective_gbps", "alpha_us"):
            try:
                values[field] = float(row[field])  # type: ignore[arg-type]
            except (KeyError, TypeError, ValueError):
                raise SimInputError(f"network {name!r}: {field} must be a number, got {row.get(field)!r}") from None
        return cls(
            name=name,
            scope=str(row.get("scope", "")),
            line_rate_gbps=values["line_rate_gbps"],
            effective_gbps=values["effective_gbps"],
            alpha_s=values["alpha_us"] * 1e-6,
            source=str(row.get("source", "")),
            note=str(row.get("note", "")),
        )

    @property
    def beta_s_per_byte(self) -> float:
        """Seconds per byte at the effective rate: 8 / (effective_gbps * 1e9)."""
        return 8.0 / (self.effective_gbps * 1e9)

    @property
    def alpha_us(self) -> float:
        return self.alpha_s * 1e6


@dataclass(frozen=True)
class GPU:
    """One GPU's datasheet peaks (dense, no sparsity), in the units of the CSV.

    ``peak_flops(precision)`` and ``mem_bw_bytes_per_s`` give SI values.
    Where a GPU has no TF32 or no tensor cores, the CSV repeats the FP32 or
    the FP16 non-tensor rate, so every precision has a number.
    """

    name: str
    fp32_tflops: float
    tf32_tflops: float
    fp16_tensor_tflops: float
    mem_bw_gb_per_s: float
    mem_gb: float
    source: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        owner = f"gpu {self.name!r}"
        for field in ("fp32_tflops", "tf32_tflops", "fp16_tensor_tflops", "mem_bw_gb_per_s", "mem_gb"):
            _check_positive(owner, field, getattr(self, field))

    def peak_flops(self, precision: str = "fp32") -> float:
        """Peak FLOP/s at ``precision`` ("fp32", "tf32" or "fp16")."""
        if precision not in PRECISIONS:
            raise SimInputError(f"unknown precision {precision!r}; valid: {', '.join(PRECISIONS)}")
        return getattr(self, PRECISIONS[precision]) * 1e12

    @property
    def mem_bw_bytes_per_s(self) -> float:
        """Memory bandwidth in bytes/s (datasheet GB/s are 1e9 bytes/s)."""
        return self.mem_bw_gb_per_s * 1e9

    @property
    def mem_bytes(self) -> float:
        """Memory size in bytes, taking the datasheet's GB as 1e9 bytes."""
        return self.mem_gb * 1e9


# --- reading CSV files -------------------------------------------------------


def _label(path: Path) -> str:
    """Short name for a built-in file, the full path for a user's."""
    return path.name if path.parent == DATA_DIR else str(path)


def _read_table(path: Path, required: tuple[str, ...]) -> pd.DataFrame:
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except FileNotFoundError:
        raise SimInputError(f"{path}: file not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise SimInputError(f"{_label(path)}: not a readable CSV ({str(exc).splitlines()[0]})") from None
    missing = [c for c in required if c not in table.columns]
    if missing:
        raise SimInputError(f"{_label(path)}: missing column(s) {', '.join(missing)}")
    return table


def _text(row: dict, field: str) -> str:
    return str(row.get(field, "")).strip()


def _rows(table: pd.DataFrame, path: Path):
    """``(at, where, row)``: ``at`` names file and line, ``where`` adds the preset."""
    for line_no, row in enumerate(table.to_dict("records"), start=2):
        at = f"{_label(path)} row {line_no}"
        name = _text(row, "name")
        if not name:
            raise SimInputError(f"{at}: name is empty")
        where = f"{at} ({name})"
        if not _text(row, "source"):
            raise SimInputError(f"{where}: source is empty; every preset must cite its source")
        yield at, where, row


def _numbers(row: dict, fields: tuple[str, ...], where: str) -> dict[str, float]:
    out = {}
    for field in fields:
        text = _text(row, field)
        try:
            out[field] = float(text)
        except ValueError:
            raise SimInputError(f"{where}: {field} must be a number, got {text!r}") from None
    return out


def _read_networks(path: Path) -> dict[str, Network]:
    table = _read_table(path, _NETWORK_COLUMNS)
    out: dict[str, Network] = {}
    for at, where, row in _rows(table, path):
        values = _numbers(row, ("line_rate_gbps", "effective_gbps", "alpha_us"), where)
        try:
            net = Network(
                name=_text(row, "name"),
                scope=_text(row, "scope"),
                line_rate_gbps=values["line_rate_gbps"],
                effective_gbps=values["effective_gbps"],
                alpha_s=values["alpha_us"] * 1e-6,
                source=_text(row, "source"),
                note=_text(row, "note"),
            )
        except SimInputError as exc:
            raise SimInputError(f"{at}: {exc}") from None
        if net.name in out:
            raise SimInputError(f"{where}: duplicate network name {net.name!r}")
        out[net.name] = net
    return out


def _read_gpus(path: Path) -> dict[str, GPU]:
    table = _read_table(path, _GPU_COLUMNS)
    out: dict[str, GPU] = {}
    numeric = ("fp32_tflops", "tf32_tflops", "fp16_tensor_tflops", "mem_bw_gb_per_s", "mem_gb")
    for at, where, row in _rows(table, path):
        values = _numbers(row, numeric, where)
        try:
            gpu = GPU(name=_text(row, "name"), source=_text(row, "source"), note=_text(row, "note"), **values)
        except SimInputError as exc:
            raise SimInputError(f"{at}: {exc}") from None
        if gpu.name in out:
            raise SimInputError(f"{where}: duplicate gpu name {gpu.name!r}")
        out[gpu.name] = gpu
    return out


@functools.lru_cache(maxsize=16)
def _cached_networks(path: str, stamp: tuple[int, int]) -> dict[str, Network]:
    """Parsed file, keyed by path and (mtime, size) so an edit is seen."""
    return _read_networks(Path(path))


def _load_networks(path: Path) -> dict[str, Network]:
    stat = path.stat()
    return _cached_networks(str(path), (stat.st_mtime_ns, stat.st_size))


# --- public API ----------------------------------------------------------------


def user_networks_path() -> Path:
    """Where user network presets are read from.

    ``$SSGD_NETWORKS`` if set (the file must then exist), else
    ``~/.config/ssgd/networks.csv`` (used only if it exists).
    """
    env = os.environ.get(USER_NETWORKS_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    return Path.home() / ".config" / "ssgd" / "networks.csv"


def networks() -> dict[str, Network]:
    """All network presets by name: the built-in file, then the user's.

    Raises
    ------
    SimInputError
        If either file is malformed (the message names the file, row and
        field), if ``$SSGD_NETWORKS`` names a missing file, or if a user
        preset reuses a built-in name.
    """
    table = dict(_load_networks(DATA_DIR / "networks.csv"))
    user_path = user_networks_path()
    if os.environ.get(USER_NETWORKS_ENV, "").strip() and not user_path.is_file():
        raise SimInputError(f"{USER_NETWORKS_ENV}={user_path}: no such file")
    if user_path.is_file():
        user = _load_networks(user_path)
        clashes = sorted(set(user) & set(table))
        if clashes:
            raise SimInputError(
                f"{user_path}: user preset(s) {', '.join(clashes)} reuse built-in name(s); "
                "rename them (e.g. add a suffix such as '-mine')"
            )
        table.update(user)
    return table


def get_network(name: str) -> Network:
    """The preset called ``name``; an unknown name lists the valid ones."""
    table = networks()
    if name not in table:
        raise SimInputError(f"unknown network {name!r}; valid: {', '.join(sorted(table))}")
    return table[name]


@functools.cache
def _builtin_gpus() -> dict[str, GPU]:
    return _read_gpus(DATA_DIR / "gpus.csv")


def gpus() -> dict[str, GPU]:
    """All GPUs in ``data/gpus.csv``, by name."""
    return dict(_builtin_gpus())


def get_gpu(name: str) -> GPU:
    """The GPU called ``name``; an unknown name lists the valid ones."""
    table = _builtin_gpus()
    if name not in table:
        raise SimInputError(f"unknown gpu {name!r}; valid: {', '.join(sorted(table))}")
    return table[name]
