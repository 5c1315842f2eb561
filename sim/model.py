"""Workloads: a DNN as an ordered table of layers, from input to output.

A `Model` holds, per layer, its name, parameter count and its forward and
backward time on one GPU at the model's batch size (``fwd_s``, ``bwd_s``).
Times are converted from the CSV's milliseconds once, here.

A CSV model holds only what it says: no I/O, host-to-device copy or update
time is added unless given (``io_ms``, ``h2d_ms``, ``update_ms`` arguments).

The gradient of a layer is ``params * bytes_per_param`` bytes, where the
precision decides the width (`PRECISIONS`): fp32 and tf32 = 4 bytes; fp16 = 2 bytes
(an fp16 model with fp32 master weights, as apex O2 or DeepSpeed's fp16 train);
amp = 4 bytes (autocast: fp16 tensor-core compute, but the weights and their
gradients stay fp32, as ``torch.autocast`` with ``GradScaler`` or TensorFlow's
automatic mixed precision train).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import TYPE_CHECKING

import numpy as np

from sim.checks import MAX_TIME_S, MIN_NORMAL, check_array, check_float, check_int
from sim.csv_table import MAX_LAYERS, check_csv_shape, check_layer_names, read_csv_table, stat_path
from sim.errors import SimInputError, SimInputWarning
from sim.precision import BYTES_PER_PARAM, PRECISIONS, bytes_per_param
from sim.tensors import (
    DEFAULT_GRADIENTS,
    LAYER,
    check_gradients,
    parse_tensors,
    tensor_sums,
    tensor_view_fields,
    tensors_cell,
)

if TYPE_CHECKING:  # pandas is imported where a table is read or built, not with sim
    import pandas as pd

__all__ = [
    "BYTES_PER_PARAM",
    "PRECISIONS",
    "HF_PREFIX",
    "REQUIRED_COLUMNS",
    "Model",
    "MAX_LAYERS",
    "MAX_PARAMS",
    "bytes_per_param",
    "check_batch_size",
    "check_csv_shape",
    "hf_model",
    "load_model",
    "model_from_frame",
    "zoo_model",
    "zoo_names",
]

REQUIRED_COLUMNS = ("name", "params", "fwd_ms", "bwd_ms")
#: Every column `model_from_frame` reads; and the columns the project's own writers add for the reader's
#: information (`Model.layers_frame`, the B-Caffe and Kineto importers), which it leaves unread without a word.
READ_COLUMNS = (*REQUIRED_COLUMNS, "type", "comm_ms", "tensors")
NOTE_COLUMNS = ("fwd_flops", "out_elems", "dtype", "allreduce_bytes", "blobs")
#: Parameters per model: 1e15 (a thousand times the largest published models), so that the gradient's
#: bytes (params x 4) stay far inside int64; raise it here.
MAX_PARAMS = 10**15
#: Characters of a model name or path (a path on Linux is at most 4,096 bytes).
MAX_SOURCE_CHARS = 4096
#: Upper bounds of a model's per-layer arrays: a layer's time, as any time given, at most `MAX_TIME_S`.
_HIGH = {"fwd_s": MAX_TIME_S, "bwd_s": MAX_TIME_S, "comm_s": MAX_TIME_S}
#: A model source ``hf:PATH`` is a Hugging Face config.json (`hf_model`).
HF_PREFIX = "hf:"


def check_batch_size(batch_size) -> None:
    """Refuse a batch size that is not a whole number >= 1."""
    check_int("batch_size", batch_size, 1)


#: Said where a '#' sits inside a cell: only a line that starts with it is a comment (`sim.csv_table`).
_HASH_NOTE = " (a '#' starts a comment only at the start of a line: move the comment to a line of its own)"


def _check_scalar(name: str, value: float) -> float:
    """A time from 0 to `MAX_TIME_S` (in ms for a name ending _ms), not subnormal (as `check_array`)."""
    value = check_float(name, value, 0, MAX_TIME_S * (1e3 if name.endswith("_ms") else 1.0))
    if 0 < value * (1e-3 if name.endswith("_ms") else 1.0) < MIN_NORMAL:
        raise SimInputError(f"{name} must be 0 or at least {MIN_NORMAL:g} s, got {value!r}")
    return value


@dataclass(frozen=True, eq=False)
class Model:
    """An ordered list of layers with their per-layer compute times.

    Attributes
    ----------
    name : str
        The model's name (zoo name or CSV file stem).
    layer_names : tuple of str
        Unique layer names, input to output.
    params : ndarray of int64
        Parameter count per layer; 0 for parameter-free layers.
    fwd_s, bwd_s : ndarray of float or None
        Forward and backward time of each layer on one GPU, in seconds. None
        for a zoo model, whose times are estimated for the cluster's GPU, the
        batch size and the precision when it is simulated (`sim.compute`).
    comm_s : ndarray of float or None
        Measured all-reduce time of each layer's gradient alone (trace-driven
        mode); None when communication comes from a cost model.
    io_s, h2d_s, update_s : float
        Per-iteration read, host-to-device copy and parameter-update times.
    tensor_params : tuple of tuple of int, or None
        Per layer, its parameter tensors' sizes in the order their gradients
        become ready in backward (`sim.tensors`); None: one tensor per layer.
    tensor_layers : tuple of str, or None
        In a tensor view (`tensor_view`), the layer each row's tensor belongs to.
    gradients : {"tensor", "layer"} or None
        What schedulers plan over when this model is run (`sim.tensors.GRADIENTS`);
        None: the run's choice, else `sim.tensors.DEFAULT_GRADIENTS`.
    """

    name: str
    layer_names: tuple[str, ...]
    params: np.ndarray
    fwd_s: np.ndarray | None
    bwd_s: np.ndarray | None
    layer_types: tuple[str, ...] | None = None
    comm_s: np.ndarray | None = None
    io_s: float = 0.0
    h2d_s: float = 0.0
    update_s: float = 0.0
    source: str = ""
    fwd_flops: np.ndarray | None = None
    out_elems: np.ndarray | None = None
    extra: dict = field(default_factory=dict)
    tensor_params: tuple[tuple[int, ...], ...] | None = None
    tensor_layers: tuple[str, ...] | None = None
    gradients: str | None = None

    def __post_init__(self) -> None:
        n = len(self.layer_names)
        if n == 0:
            raise SimInputError(f"model {self.name!r} has no layers")
        if n > MAX_LAYERS:
            raise SimInputError(f"model {self.name!r} has {n} layers; at most {MAX_LAYERS} are allowed")
        if (self.fwd_s is None) != (self.bwd_s is None):
            raise SimInputError(f"model {self.name!r}: give both forward and backward times, or neither")
        if self.fwd_s is None and (self.fwd_flops is None or self.out_elems is None or self.layer_types is None):
            raise SimInputError(f"model {self.name!r}: without times, a model needs fwd_flops, out_elems and types")
        if isinstance(self.layer_names, str) or not all(isinstance(layer, str) for layer in self.layer_names):
            raise SimInputError(f"model {self.name!r}: layer_names must be a sequence of names (str)")
        for attr in ("params", "fwd_s", "bwd_s", "comm_s", "fwd_flops", "out_elems"):
            if getattr(self, attr) is not None:
                object.__setattr__(self, attr, check_array(f"model {self.name!r}: {attr}", getattr(self, attr), n,
                                                           integer=attr == "params", high=_HIGH.get(attr)))
        if self.params is not None and float(np.sum(self.params, dtype=float)) > MAX_PARAMS * (1 - 1e-9):
            total = sum(self.params.tolist())  # exact, near the bound (a float sum rounds 10**15 + 1 to 10**15)
            if total > MAX_PARAMS:
                raise SimInputError(f"model {self.name!r} has {total:,} parameters; at most {MAX_PARAMS:,} are "
                                    "allowed (sim.model.MAX_PARAMS)")
        if len(set(self.layer_names)) != n:
            raise SimInputError(f"model {self.name!r}: layer names must be unique")
        for attr in ("io_s", "h2d_s", "update_s"):
            _check_scalar(attr, getattr(self, attr))
        self._check_tensors()

    def _check_tensors(self) -> None:
        n = self.num_layers
        if self.gradients is not None:
            check_gradients(self.gradients)
        if self.tensor_layers is not None and len(self.tensor_layers) != n:
            raise SimInputError(f"model {self.name!r}: tensor_layers has {len(self.tensor_layers)} entries for {n} rows")
        if self.tensor_params is None:
            return
        try:
            hash(self.tensor_params)
        except TypeError:  # lists given: the cached checks need tuples
            object.__setattr__(self, "tensor_params", tuple(tuple(int(s) for s in t) for t in self.tensor_params))
        if len(self.tensor_params) != n:
            raise SimInputError(f"model {self.name!r}: tensor_params has {len(self.tensor_params)} entries for {n} layers")
        sums, smallest = tensor_sums(self.tensor_params)
        bad = np.flatnonzero(sums != self.params)
        if smallest < 1 or bad.size:
            i = int(bad[0]) if bad.size else next(i for i, t in enumerate(self.tensor_params) if t and min(t) < 1)
            raise SimInputError(f"model {self.name!r}, layer {self.layer_names[i]!r}: tensors "
                                f"{tuple(self.tensor_params[i])} must be >= 1 each and add up to its "
                                f"{int(self.params[i])} parameters")

    @property
    def num_layers(self) -> int:
        return len(self.layer_names)

    @property
    def is_timed(self) -> bool:
        """True when the model carries its own compute times."""
        return self.fwd_s is not None

    @property
    def total_params(self) -> int:
        return int(self.params.sum())

    @property
    def num_tensors(self) -> int:
        """Parameter tensors (gradients as frameworks have them); one per layer with parameters without tensor info."""
        if self.tensor_params is None:
            return int(np.count_nonzero(self.params))
        return sum(len(t) for t in self.tensor_params)

    def tensor_view(self) -> Model:
        """One row per parameter tensor (`sim.tensors` documents the names and how
        the layer's times are split); the model itself when it has no tensor info
        or measured ``comm_s`` (trace-driven: layer granularity)."""
        fields = tensor_view_fields(self)
        return self if fields is None else dataclasses.replace(self, **fields)

    def with_gradients(self, gradients: str | None = None) -> Model:
        """The model schedulers plan over: its tensor view for ``"tensor"``, the model
        without tensor info for ``"layer"``. ``None``: the model's own choice
        (``gradients``), else `sim.tensors.DEFAULT_GRADIENTS`. Needs compute times
        (a zoo model is timed first, `timed`); a view's view is the view."""
        choice = check_gradients(gradients if gradients is not None else self.gradients or DEFAULT_GRADIENTS)
        if choice == LAYER:
            return self if self.tensor_params is None else dataclasses.replace(self, tensor_params=None)
        return self.tensor_view()

    def gradient_bytes(self, precision: str = "fp32") -> np.ndarray:
        """Bytes of each layer's gradient at ``precision``."""
        return self.params.astype(np.int64) * bytes_per_param(precision)

    def layers_frame(self) -> pd.DataFrame:
        """The layer table in CSV units (milliseconds)."""
        import pandas as pd

        frame = pd.DataFrame({"name": list(self.layer_names), "params": self.params})
        if self.fwd_s is not None:
            frame["fwd_ms"] = self.fwd_s * 1e3
            frame["bwd_ms"] = self.bwd_s * 1e3
        if self.fwd_flops is not None:
            frame["fwd_flops"] = self.fwd_flops
            frame["out_elems"] = self.out_elems
        if self.layer_types is not None:
            frame["type"] = list(self.layer_types)
        if self.comm_s is not None:
            frame["comm_ms"] = self.comm_s * 1e3
        if self.tensor_params is not None:
            frame["tensors"] = [tensors_cell(t) for t in self.tensor_params]
        return frame

    def scaled(self, factor: float) -> Model:
        """The same model with every compute time multiplied by ``factor``."""
        if not (math.isfinite(factor) and factor > 0):
            raise SimInputError(f"compute scale factor must be > 0, got {factor}")
        if not self.is_timed:
            raise SimInputError(f"model {self.name!r} has no compute times to scale yet")
        return dataclasses.replace(
            self, fwd_s=self.fwd_s * factor, bwd_s=self.bwd_s * factor, update_s=self.update_s * factor
        )

    def timed(self, *, gpu: str, batch_size: int, precision: str = "fp32", optimizer: str | None = None) -> Model:
        """This model with compute times: its own, or estimated by `sim.compute`
        for ``gpu``, ``batch_size`` and ``precision`` (plus the update time)."""
        check_batch_size(batch_size)
        if self.is_timed:
            return self
        from sim.compute import layer_times_s, update_time_s

        fwd, bwd = layer_times_s(self.layer_types, self.fwd_flops, self.params, self.out_elems,
                                 gpu=gpu, batch_size=batch_size, precision=precision)
        update = self.update_s + update_time_s(self.total_params, gpu=gpu, precision=precision,
                                               **({"optimizer": optimizer} if optimizer else {}))
        extra = {**self.extra, "times": f"estimated for {gpu}, batch {batch_size}, {precision} (roofline)"}
        return dataclasses.replace(self, fwd_s=fwd, bwd_s=bwd, update_s=update, extra=extra)


def _numeric_column(frame: pd.DataFrame, column: str, where: str, *, integer: bool) -> np.ndarray:
    import pandas as pd

    try:
        values = pd.to_numeric(frame[column], errors="coerce")
    except OverflowError:  # an int beyond a float's range: as text it reads as inf, refused below
        values = pd.to_numeric(frame[column].astype(str), errors="coerce")
    for i, (raw, val) in enumerate(zip(frame[column], values, strict=True)):
        row = i + 2  # header is line 1
        try:  # a bool, a complex number, pd.NA or an int beyond a float's range is no count or time
            number = math.nan if isinstance(raw, (bool, np.bool_, complex, np.complexfloating)) else float(val)
        except (TypeError, OverflowError):
            number = math.nan
        if not math.isfinite(number):
            raise SimInputError(f"{where} row {row}, column {column!r}: {raw!r} is not a finite number" + _HASH_NOTE * (
                "#" in str(raw)))
        if number < 0:
            raise SimInputError(f"{where} row {row}, column {column!r}: {raw!r} is negative")
        if integer and number != int(number):
            raise SimInputError(f"{where} row {row}, column {column!r}: {raw!r} is not a whole number")
        if integer and number > MAX_PARAMS:
            raise SimInputError(f"{where} row {row}, column {column!r}: {raw!r} exceeds the limit of {MAX_PARAMS:.0e} "
                                f"(sim.model.MAX_PARAMS)")
        if column.endswith("_ms") and number > MAX_TIME_S * 1e3:
            raise SimInputError(f"{where} row {row}, column {column!r}: {raw!r} exceeds a day ({MAX_TIME_S * 1e3:,.0f} ms)")
        if column.endswith("_ms") and 0 < number * 1e-3 < MIN_NORMAL:
            raise SimInputError(f"{where} row {row}, column {column!r}: {raw!r} is too small to time (0, or at least "
                                f"{MIN_NORMAL * 1e3:.1e} ms)")
    return values.to_numpy(dtype=np.int64 if integer else float)


def _warn_unread(frame, where: str) -> None:
    """A warning naming the columns `model_from_frame` does not read (a misspelled ``comm_ms`` would be lost)."""
    unread = [str(c) for c in frame.columns if c not in READ_COLUMNS + NOTE_COLUMNS]
    if unread:
        warnings.warn(f"{where}: column(s) {', '.join(map(repr, unread[:5]))} not read (a layer table reads "
                      f"{', '.join(READ_COLUMNS)}): check the spelling", SimInputWarning, stacklevel=3)


def model_from_frame(
    frame: pd.DataFrame,
    name: str,
    *,
    where: str | None = None,
    io_ms: float = 0.0,
    h2d_ms: float = 0.0,
    update_ms: float = 0.0,
    source: str = "",
) -> Model:
    """Validate a layer table with columns ``name,params,fwd_ms,bwd_ms``.

    Optional columns: ``type`` (free text), ``comm_ms`` (measured all-reduce
    time of the layer's gradient alone) and ``tensors`` (the parameter tensors'
    sizes in backward order, joined by ``;``, `sim.tensors`). Errors name the
    row and column.
    """
    where = where or name
    if not hasattr(frame, "rename"):
        raise SimInputError(f"{where}: a layer table must be a pandas DataFrame, got {type(frame).__name__}")
    frame = frame.rename(columns=lambda c: str(c).strip())
    repeated = frame.columns[frame.columns.duplicated()]
    if len(repeated):
        raise SimInputError(f"{where}: duplicate column {repeated[0]!r}; each column may appear once")
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise SimInputError(f"{where}: missing column(s) {', '.join(missing)}; need {', '.join(REQUIRED_COLUMNS)}"
                            + _HASH_NOTE * any("#" in c for c in frame.columns))
    if len(frame) == 0:
        raise SimInputError(f"{where}: no layer rows")
    if len(frame) > MAX_LAYERS:  # before the per-row checks
        raise SimInputError(f"{where} has {len(frame)} layers; at most {MAX_LAYERS} are allowed (sim.model.MAX_LAYERS)")
    _warn_unread(frame, where)
    names = check_layer_names(frame["name"], where)
    params = _numeric_column(frame, "params", where, integer=True)
    fwd_ms = _numeric_column(frame, "fwd_ms", where, integer=False)
    bwd_ms = _numeric_column(frame, "bwd_ms", where, integer=False)
    comm_s = None
    if "comm_ms" in frame.columns:
        comm_s = _numeric_column(frame, "comm_ms", where, integer=False) * 1e-3
    types = None
    if "type" in frame.columns:
        types = tuple(str(v) for v in frame["type"])
    tensors = parse_tensors(frame["tensors"], params, where) if "tensors" in frame.columns else None
    return Model(
        name=name,
        layer_names=tuple(names),
        params=params,
        fwd_s=fwd_ms * 1e-3,
        bwd_s=bwd_ms * 1e-3,
        layer_types=types,
        comm_s=comm_s,
        io_s=_check_scalar("io_ms", io_ms) * 1e-3,
        h2d_s=_check_scalar("h2d_ms", h2d_ms) * 1e-3,
        update_s=_check_scalar("update_ms", update_ms) * 1e-3,
        source=source,
        tensor_params=tensors,
    )


def load_model(
    source: str | Path,
    *,
    io_ms: float = 0.0,
    h2d_ms: float = 0.0,
    update_ms: float = 0.0,
    **arch_kwargs,
) -> Model:
    """Load a model from a layer CSV path or the zoo.

    Parameters
    ----------
    source : str or Path
        A zoo name (``python -m sim list models``), a path to a CSV with at
        least ``name,params,fwd_ms,bwd_ms``, or ``hf:PATH`` for a Hugging Face
        ``config.json`` (`hf_model`).
    io_ms, h2d_ms, update_ms : float
        Per-iteration times to add; zero unless given.

    Raises
    ------
    SimInputError
        For a missing file, an unknown name or a malformed table, naming the
        row and column at fault.
    """
    if not isinstance(source, (str, Path)) or not str(source).strip():
        raise SimInputError(f"model must be a zoo name or a path to a layer CSV, got {source!r}")
    if len(str(source)) > MAX_SOURCE_CHARS:
        raise SimInputError(f"model name or path of {len(str(source))} characters; at most {MAX_SOURCE_CHARS} "
                            f"(sim.model.MAX_SOURCE_CHARS): {str(source)[:40]!r}...")
    if isinstance(source, str) and source.startswith(HF_PREFIX):
        unknown = sorted(set(arch_kwargs) - {"seq_len"})
        if unknown:
            raise SimInputError(f"a Hugging Face model takes no argument {unknown[0]!r}; valid: seq_len")
        return hf_model(source[len(HF_PREFIX):], io_ms=io_ms, h2d_ms=h2d_ms, update_ms=update_ms, **arch_kwargs)
    path = Path(source)
    status = stat_path(path, "model path")
    if path.suffix.lower() == ".csv" or status is not None:
        if status is None:
            raise SimInputError(f"model file {str(path)!r} does not exist")
        if S_ISDIR(status.st_mode):
            raise SimInputError(f"model path {str(path)!r} is a folder, not a layer CSV")
        if not S_ISREG(status.st_mode):
            raise SimInputError(f"model path {str(path)!r} is not a regular file (a layer CSV)")
        frame = read_csv_table(path, path.name)
        return model_from_frame(
            frame, path.stem, where=path.name, io_ms=io_ms, h2d_ms=h2d_ms, update_ms=update_ms,
            source=f"user CSV {path.name}",
        )
    return zoo_model(str(source), io_ms=io_ms, h2d_ms=h2d_ms, update_ms=update_ms, **arch_kwargs)


def zoo_names() -> list[str]:
    """Names of the models in the zoo."""
    from sim.zoo import ARCHITECTURES

    return list(ARCHITECTURES)


@functools.lru_cache(maxsize=64)
def _zoo_table(name: str, kwargs: tuple) -> pd.DataFrame:
    """``build_table``; ``kwargs`` as ``(name, (type, value))`` pairs (128 == 128.0: one is refused)."""
    from sim.zoo import build_table

    return build_table(name, **{key: value for key, (_, value) in kwargs})


def zoo_model(name: str, *, io_ms: float = 0.0, h2d_ms: float = 0.0, update_ms: float = 0.0, **arch_kwargs) -> Model:
    """A zoo model (layer shapes, no times yet); ``arch_kwargs`` such as
    ``seq_len`` or ``image_size`` go to its builder."""
    from sim.zoo import ARCHITECTURES

    if name not in ARCHITECTURES:
        raise SimInputError(
            f"unknown model {name if len(name) <= 80 else name[:60] + '...'!r}; valid: {', '.join(ARCHITECTURES)}, or a path to a layer CSV"
        )
    for key, value in arch_kwargs.items():  # before the cache: True == 1 would find 1's table, a list no key
        if isinstance(value, bool) or not isinstance(value, (int, float, str, np.integer, np.floating)):
            raise SimInputError(f"{key} must be a number, got {type(value).__name__} {str(value)[:40]!r}")
    table = _zoo_table(name, tuple(sorted((k, (type(v), v)) for k, v in arch_kwargs.items())))
    return _table_model(table, name, ARCHITECTURES[name].source, io_ms, h2d_ms, update_ms,
                        {"arch_kwargs": dict(arch_kwargs)})


def _table_model(table: pd.DataFrame, name: str, source: str, io_ms: float, h2d_ms: float, update_ms: float,
                 extra: dict) -> Model:
    """A zoo-style table (`sim.zoo.COLUMNS`: shapes, no times) as a Model."""
    return Model(
        name=name,
        layer_names=tuple(table["name"]),
        params=table["params"].to_numpy(dtype=np.int64),
        fwd_s=None,
        bwd_s=None,
        layer_types=tuple(table["type"]),
        io_s=_check_scalar("io_ms", io_ms) * 1e-3,
        h2d_s=_check_scalar("h2d_ms", h2d_ms) * 1e-3,
        update_s=_check_scalar("update_ms", update_ms) * 1e-3,
        source=source,
        fwd_flops=table["fwd_flops"].to_numpy(dtype=float),
        out_elems=table["out_elems"].to_numpy(dtype=float),
        extra=extra,
        tensor_params=parse_tensors(table["tensors"], table["params"], name),
    )


def hf_model(path: str | Path, *, io_ms: float = 0.0, h2d_ms: float = 0.0, update_ms: float = 0.0,
             seq_len: int | None = None, text: str | None = None) -> Model:
    """A transformer from a Hugging Face ``config.json`` (a file, or a folder holding
    one; or its content as ``text``, ``path`` then only naming it), built by
    `sim.zoo.hf` (BERT, GPT-2, Llama, Mistral); no network access."""
    from sim.zoo import hf_table, parse_hf_config, read_hf_config

    where = f"hf config {str(path)!r}"
    config, name = (parse_hf_config(text, where), Path(path).stem) if text is not None else read_hf_config(path)
    table = hf_table(config, where=where, seq_len=seq_len)
    source = f"Hugging Face config {path} (model_type {config['model_type']})"
    return _table_model(table, name, source, io_ms, h2d_ms, update_ms, {"hf_config": str(path)})
