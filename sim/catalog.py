"""Hardware catalogs read from ``data/``: network links and GPUs.

Every row of a catalog file carries its source (see ``data/README.md``).
Values are converted to SI units once, here, at the edge: a `Network` holds
``alpha_s`` and ``beta_s_per_byte``, a `GPU` gives ``peak_flops(precision)``
in FLOP/s and ``mem_bw_bytes_per_s``.

Network presets can be extended by the user with a CSV of the same columns,
found at `user_networks_path` (``$SSGD_NETWORKS`` or
``~/.config/ssgd/networks.csv``) and written by `save_network`. A user preset
reuses a built-in name only where it says so (`OVERRIDES_BUILTIN_COLUMN`). A
malformed user file never breaks the built-in presets; `user_networks_error`
says what is wrong with it, naming the file and line.
"""

from __future__ import annotations

import contextlib
import csv
import fcntl
import functools
import math
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG

from sim.csv_table import csv_rows, read_text_file, table_lines
from sim.errors import SimInputError

#: Absurd beyond these: a link rate above 1 Pb/s or below 10 kb/s, a start-up time over 10 s.
MAX_LINK_GBPS, MIN_LINK_GBPS, MAX_ALPHA_S = 1e6, 1e-5, 10.0
#: Bytes of a presets file read at most (a preset with its source and note is 1 to 2 KB).
MAX_PRESETS_BYTES = 2 * 2**20

__all__ = [
    "DATA_DIR",
    "GPU",
    "PRECISIONS",
    "Network",
    "OVERRIDES_BUILTIN_COLUMN",
    "PRESET_NAME_PATTERN",
    "USER_NETWORKS_ENV",
    "check_preset_name",
    "file_stamp",
    "get_gpu",
    "get_network",
    "is_builtin_network",
    "gpus",
    "networks",
    "save_network",
    "user_networks",
    "user_networks_error",
    "user_networks_path",
]

DATA_DIR = Path(__file__).resolve().parent.parent / "data"

#: Environment variable naming a user presets CSV for networks.
USER_NETWORKS_ENV = "SSGD_NETWORKS"

#: What a user preset's name may be: lower-case letters, digits, '.', '_', '-'.
PRESET_NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")

#: Optional user-file column: ``yes`` lets that row replace the built-in of its name.
OVERRIDES_BUILTIN_COLUMN = "overrides_builtin"

_NETWORK_COLUMNS = ("name", "scope", "line_rate_gbps", "effective_gbps", "alpha_us", "source")
_NETWORK_SCOPES = ("intra", "inter", "any")
_GPU_COLUMNS = ("name", "fp32_tflops", "tf32_tflops", "fp16_tensor_tflops", "mem_bw_gb_per_s", "mem_gb", "source")

#: Precisions `GPU.peak_flops` knows, mapped to the field holding the rate.
PRECISIONS = {"fp32": "fp32_tflops", "tf32": "tf32_tflops", "fp16": "fp16_tensor_tflops"}


def _check_positive(owner: str, field: str, value: float, low: float = 0.0, high: float = math.inf) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise SimInputError(f"{owner}: {field} must be a finite number > 0, got {value!r}")
    if not low <= value <= high:
        raise SimInputError(f"{owner}: {field} must be in [{low:g}, {high:g}], got {value!r}")


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
            _check_positive(owner, field, getattr(self, field), MIN_LINK_GBPS, MAX_LINK_GBPS)
        if self.effective_gbps > self.line_rate_gbps:
            raise SimInputError(
                f"{owner}: effective_gbps {self.effective_gbps} exceeds line_rate_gbps {self.line_rate_gbps}"
            )
        if not (isinstance(self.alpha_s, (int, float)) and math.isfinite(self.alpha_s) and self.alpha_s >= 0):
            raise SimInputError(f"{owner}: alpha must be a finite number >= 0, got {self.alpha_s!r}")
        if self.alpha_s > MAX_ALPHA_S:
            raise SimInputError(f"{owner}: alpha_us must be at most {MAX_ALPHA_S * 1e6:,.0f}, got {self.alpha_s * 1e6:g}")

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


def _read_table(path: Path, required: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """``(line number, row)`` for every row with a value; the header must name every column in ``required``.
    The file is checked as a layer CSV is (`sim.csv_table.csv_rows`, no comment lines). Errors name the file
    and the line."""
    label = _label(path)
    lines = table_lines(read_text_file(path, label, MAX_PRESETS_BYTES), label, comments=False)
    (header_line, header), *rows = csv_rows(lines, label) if lines else [(1, [])]
    missing = [c for c in required if c not in header]
    if missing:
        raise SimInputError(f"{label} line {header_line}: missing column(s) {', '.join(missing)}")
    return [(line_no, dict(zip(header, fields + [""] * (len(header) - len(fields)), strict=True)))
            for line_no, fields in rows if any(f.strip() for f in fields)]


def _text(row: dict, field: str) -> str:
    return str(row.get(field, "")).strip()


def _rows(rows: list[tuple[int, dict[str, str]]], path: Path):
    """``(at, where, row)``: ``at`` names file and line, ``where`` adds the preset."""
    for line_no, row in rows:
        at = f"{_label(path)} line {line_no}"
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


def _network_from_row(at: str, where: str, row: dict) -> Network:
    values = _numbers(row, ("line_rate_gbps", "effective_gbps", "alpha_us"), where)
    try:
        return Network(
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


def _read_networks(path: Path, builtin: Mapping[str, Network] | None = None) -> dict[str, Network]:
    """The presets in ``path``. For a user file (``builtin`` given), names are checked against
    `PRESET_NAME_PATTERN` and may reuse a built-in name only on a row whose ``overrides_builtin`` is yes."""
    out: dict[str, Network] = {}
    for at, where, row in _rows(_read_table(path, _NETWORK_COLUMNS), path):
        net = _network_from_row(at, where, row)
        if net.name in out:
            raise SimInputError(f"{where}: duplicate network name {net.name!r}")
        if builtin is not None:
            check_preset_name(net.name, f"{at}: name")
            if _text(row, OVERRIDES_BUILTIN_COLUMN).lower() not in ("", "yes", "no"):
                raise SimInputError(f"{where}: {OVERRIDES_BUILTIN_COLUMN} must be yes, no or empty, "
                                    f"got {_text(row, OVERRIDES_BUILTIN_COLUMN)[:40]!r}")
            if net.name in builtin and _text(row, OVERRIDES_BUILTIN_COLUMN).lower() != "yes":
                raise SimInputError(f"{where}: user preset {net.name} reuses a built-in name; rename it (e.g. add a "
                                    f"suffix such as '-mine') or set its {OVERRIDES_BUILTIN_COLUMN} column to yes")
        out[net.name] = net
    return out


def _read_gpus(path: Path) -> dict[str, GPU]:
    out: dict[str, GPU] = {}
    numeric = ("fp32_tflops", "tf32_tflops", "fp16_tensor_tflops", "mem_bw_gb_per_s", "mem_gb")
    for at, where, row in _rows(_read_table(path, _GPU_COLUMNS), path):
        values = _numbers(row, numeric, where)
        try:
            gpu = GPU(name=_text(row, "name"), source=_text(row, "source"), note=_text(row, "note"), **values)
        except SimInputError as exc:
            raise SimInputError(f"{at}: {exc}") from None
        if gpu.name in out:
            raise SimInputError(f"{where}: duplicate gpu name {gpu.name!r}")
        out[gpu.name] = gpu
    return out


@functools.cache
def _builtin_networks() -> dict[str, Network]:
    return _read_networks(DATA_DIR / "networks.csv")


def file_stamp(stat: os.stat_result) -> tuple[int, ...]:
    """What tells one version of a file from another: modification and change times, size, inode (an edit
    that keeps the size and sets the mtime back moves the ctime; a replaced file has a new inode)."""
    return stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino, stat.st_dev


@functools.lru_cache(maxsize=16)
def _cached_user_networks(path: str, stamp: tuple[int, ...]) -> tuple[dict[str, Network], str | None]:
    """Parsed user file or its error, keyed by path and `file_stamp` so an edit is seen."""
    try:
        return _read_networks(Path(path), _builtin_networks()), None
    except SimInputError as exc:
        return {}, str(exc)


def _user_networks_or_error() -> tuple[dict[str, Network], str | None]:
    """The user's presets, or no presets and the one-line reason they cannot be read."""
    path = _user_networks_file()
    try:
        stat = os.stat(path)  # one system call: whether it is a file, and its stamp
        is_file = S_ISREG(stat.st_mode)
    except (FileNotFoundError, NotADirectoryError):
        is_file = False
    except OSError as exc:
        return {}, f"{path}: cannot read ({exc.strerror})"
    if not is_file:  # an absent default file is fine; a named one must exist
        return {}, (f"{USER_NETWORKS_ENV}={path}: no such file" if os.environ.get(USER_NETWORKS_ENV, "").strip() else None)
    return _cached_user_networks(path, file_stamp(stat))


# --- public API ----------------------------------------------------------------


def check_preset_name(name: object, field: str = "name") -> str:
    """``name`` if it is a valid user preset name (`PRESET_NAME_PATTERN`: 1-64
    characters from a-z, 0-9, '.', '_' and '-', starting with a letter or digit,
    no spaces); else a `SimInputError` naming ``field``."""
    if not isinstance(name, str) or not PRESET_NAME_PATTERN.fullmatch(name):
        raise SimInputError(
            f"{field} {name!r} is not a valid preset name: use 1-64 characters a-z, 0-9, '.', '_' or '-', "
            "starting with a letter or digit, no spaces"
        )
    return name


def user_networks_path() -> Path:
    """Where user network presets are read from.

    ``$SSGD_NETWORKS`` if set (the file must then exist), else
    ``~/.config/ssgd/networks.csv`` (used only if it exists).
    """
    return Path(_user_networks_file())


def _user_networks_file() -> str:  # as a string: looked up on every run
    return os.path.expanduser(os.environ.get(USER_NETWORKS_ENV, "").strip() or "~/.config/ssgd/networks.csv")


def user_networks() -> dict[str, Network]:
    """The user's presets alone (see `user_networks_path`); a `SimInputError`
    naming the file, line and field if the file is malformed, if
    ``$SSGD_NETWORKS`` names a missing file, or if a preset reuses a built-in
    name without saying so."""
    table, error = _user_networks_or_error()
    if error:
        raise SimInputError(error)
    return dict(table)


def user_networks_error() -> str | None:
    """Why the user's presets file cannot be read (one line naming the file
    and line), or None if it is fine or absent."""
    return _user_networks_or_error()[1]


def networks() -> dict[str, Network]:
    """All network presets by name: the built-in file, then the user's.

    A malformed user file does not stop the built-in presets from working:
    its presets are left out and `user_networks_error` says why (asking
    `get_network` for a name that is not built in reports it too).
    """
    table = dict(_builtin_networks())
    table.update(_user_networks_or_error()[0])
    return table


def get_network(name: str) -> Network:
    """The preset called ``name``; an unknown name lists the valid ones."""
    table = networks()
    if name in table:
        return table[name]
    error = user_networks_error()
    if error:
        raise SimInputError(f"unknown network {name!r}, and the user presets cannot be read: {error}")
    raise SimInputError(f"unknown network {name!r}; valid: {', '.join(sorted(table))}")


def is_builtin_network(name: str) -> bool:
    """Whether preset ``name`` is the built-in one, not a user's (`save_network`): what was measured for
    a built-in (its size regimes, `sim.topology.network_regimes`) holds for the built-in's link alone."""
    builtin = _builtin_networks().get(name)
    return builtin is not None and networks().get(name) == builtin


def save_network(row: Mapping[str, object] | Network, *, overwrite_builtin: bool = False,
                 path: Path | str | None = None) -> Path:
    """Add one preset to the user's presets file and return the file's path.

    ``row`` is a `Network` or a ``data/networks.csv``-style row (``alpha_us``
    in us), such as `sim.calib.fit.fit_to_network` returns. The file is
    ``path`` or `user_networks_path`; it and its folder are created if need
    be. The write is atomic (a temporary file in the same folder, then
    ``os.replace``) under an exclusive lock on ``<file>.lock``, so two
    processes saving at once both land.

    A `SimInputError` for a bad name (`check_preset_name`) or value, a missing
    source, a name the file has already, a built-in's name without
    ``overwrite_builtin=True``, a malformed file (left as it is) or a failed write.
    """
    net = row if isinstance(row, Network) else Network.from_row(row)
    check_preset_name(net.name)
    if not net.source.strip():
        raise SimInputError(f"network {net.name!r}: source is empty; every preset must cite its source")
    if any(c in net.source + net.note for c in "\r\n"):
        raise SimInputError(f"network {net.name!r}: source and note must be one line each (one preset a line)")
    overrides = net.name in _builtin_networks()
    if overrides and not overwrite_builtin:
        raise SimInputError(
            f"network name {net.name!r} is a built-in preset; choose another name "
            "(or replace it with yours: --overwrite-builtin on the command line, overwrite_builtin=True in the API)"
        )
    target = Path(path).expanduser() if path is not None else user_networks_path()
    # through a link to its file (a dotfiles checkout), and never over a device, pipe or folder: the
    # rename below replaced what was there, and $SSGD_NETWORKS=/dev/full made /dev/full a regular file
    target = Path(os.path.realpath(target))
    if target.exists() and not target.is_file():
        raise SimInputError(f"cannot write {str(target)!r}: not a regular file (a directory, device or pipe)")
    alpha_us = float(row["alpha_us"]) if isinstance(row, Mapping) else net.alpha_us  # as given, no round trip
    record = {"name": net.name, "scope": net.scope, "line_rate_gbps": repr(net.line_rate_gbps),
              "effective_gbps": repr(net.effective_gbps), "alpha_us": repr(alpha_us),
              "source": net.source, "note": net.note, OVERRIDES_BUILTIN_COLUMN: "yes" if overrides else ""}
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with _locked(target):
            _append_preset(target, record)
    except OSError as exc:
        raise SimInputError(f"cannot write {str(target)!r}: {exc.strerror}") from None
    return target


@contextlib.contextmanager
def _locked(target: Path):
    """An exclusive lock on ``<target>.lock``, held for the block."""
    with target.with_name(target.name + ".lock").open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        yield  # closing the file releases the lock


def _append_preset(target: Path, record: dict[str, str]) -> None:
    """Rewrite ``target`` with its rows and ``record``; the caller holds the lock."""
    rows: list[dict[str, str]] = []
    header = list(_NETWORK_COLUMNS) + ["note", OVERRIDES_BUILTIN_COLUMN]
    if target.is_file() and target.stat().st_size > 0:
        existing = _read_networks(target, _builtin_networks())  # a malformed file is refused, not overwritten
        if record["name"] in existing:
            raise SimInputError(f"a network called {record['name']!r} exists already in {target}")
        parsed = _read_table(target, _NETWORK_COLUMNS)
        rows = [row for _, row in parsed]
        header = list(rows[0]) if rows else header
        header += [c for c in ("note", OVERRIDES_BUILTIN_COLUMN) if c not in header]
    rows.append(record)
    stem = os.fsencode(target.name)[:200].decode(errors="ignore")  # mkstemp adds 14 characters to a 255-byte name
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=header, extrasaction="ignore", restval="")
            writer.writeheader()
            writer.writerows(rows)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
