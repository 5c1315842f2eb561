"""Gradients as frameworks have them: one per parameter tensor.

A layer of a model may list its parameter tensors (``Model.tensor_params``,
the CSV's optional ``tensors`` column): a convolution's weight, its
batch-norm's weight and bias are three gradients, a linear layer's weight and
bias two. PyTorch's DDP and Horovod hand each tensor's gradient to
communication on its own as soon as it is ready, so a scheduler that plans over
tensors sees the messages and the ready times those frameworks see.

The ``tensors`` column holds the sizes (parameter counts) in the order the
gradients become ready in backward, i.e. the reverse of the module's
``parameters()`` order (the order DDP assumes when it fills its buckets),
joined by ``;``: ``64;64;9408`` for ResNet-50's ``conv1`` (bn.bias, bn.weight,
conv.weight). They must add up to the layer's ``params``. An empty cell means
one tensor of ``params`` (none for a parameter-free layer).

The tensor view (`tensor_view_arrays`, used by ``Model.tensor_view``) has one
row per tensor, in model order (input to output), named ``<layer>.<i>`` with
``i`` the tensor's place in the layer's ``parameters()`` order; a layer with
at most one tensor keeps its row and name. **Rule for the times:** a layer's
forward and backward time are split over its tensors in proportion to their
parameter counts. Backward runs through the layer's tensors in backward
order, so the first tensor's gradient is ready after its share of the
layer's backward, and the last one exactly when the layer's backward ends,
as in the layer view. The totals of parameters, forward and backward time
(and forward FLOPs) are unchanged; a layer's output elements stay on its
last tensor row (in forward order). A model with measured ``comm_ms``
(trace-driven mode) keeps layer granularity: its times are per layer.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from sim.errors import SimInputError

__all__ = [
    "DEFAULT_GRADIENTS", "GRADIENTS", "LAYER", "TENSOR", "check_gradients", "gradients_of", "layer_renamer",
    "parent_layers_text", "rows_named",
    "parse_tensors", "tensor_names", "tensor_rows", "tensor_sums", "tensor_view_arrays", "tensor_view_fields", "tensors_cell", "with_parent_layers",
]

TENSOR = "tensor"
LAYER = "layer"
GRADIENTS = (TENSOR, LAYER)
#: What schedulers plan over unless told: one gradient per parameter tensor, or per layer.
DEFAULT_GRADIENTS = TENSOR


def check_gradients(gradients) -> str:
    """``gradients`` if it is one of `GRADIENTS`, else a `SimInputError`."""
    if gradients not in GRADIENTS:
        raise SimInputError(f"gradients must be one of {', '.join(GRADIENTS)}, got {gradients!r}")
    return gradients


def _cell_sizes(raw, params: int, where: str) -> tuple[int, ...]:
    text = "" if raw is None or (isinstance(raw, float) and math.isnan(raw)) else str(raw).strip()
    if not text or text.lower() == "nan":
        return (params,) if params else ()
    sizes = []
    for part in text.split(";"):
        part = part.strip()
        try:
            value = float(part)
        except ValueError:
            raise SimInputError(f"{where}: {part!r} is not a number (tensors are parameter counts joined by ';')") \
                from None
        if not math.isfinite(value) or value != int(value) or value < 1:
            raise SimInputError(f"{where}: {part!r} is not a whole number >= 1")
        sizes.append(int(value))
    if sum(sizes) != params:
        raise SimInputError(f"{where}: the tensors add up to {sum(sizes)} parameters, the layer has {params}")
    return tuple(sizes)


def parse_tensors(values, params, where: str) -> tuple[tuple[int, ...], ...]:
    """The ``tensors`` column of a layer table as one tuple of sizes per layer
    (backward order); errors name the row (the header is line 1) and the column."""
    return tuple(_cell_sizes(raw, int(p), f"{where} row {i + 2}, column 'tensors'")
                 for i, (raw, p) in enumerate(zip(values, params, strict=True)))


def tensors_cell(sizes) -> str:
    """One layer's tensors (backward order) as the ``tensors`` column writes them."""
    return ";".join(str(int(s)) for s in sizes)


@functools.lru_cache(maxsize=64)
def tensor_sums(tensor_params) -> tuple[np.ndarray, int]:
    """Each layer's tensor total and the smallest tensor (cached: a model is
    re-checked whenever it is copied with new times)."""
    sums = np.array([sum(t) for t in tensor_params], dtype=np.int64)
    smallest = min((min(t) for t in tensor_params if t), default=1)
    return _shared(sums), int(smallest)


@functools.lru_cache(maxsize=64)
def tensor_names(layer_names, tensor_params) -> tuple[tuple[str, ...], np.ndarray]:
    """Names of the tensor rows in model order, and each row's layer index."""
    counts = np.array([max(len(t), 1) for t in tensor_params], dtype=np.int64)
    names: list[str] = []
    for name, sizes in zip(layer_names, tensor_params, strict=True):
        names.extend([name] if len(sizes) <= 1 else [f"{name}.{i}" for i in range(len(sizes))])
    if len(set(names)) != len(names):  # a tensor named like another layer: use ':' instead
        names = []
        for name, sizes in zip(layer_names, tensor_params, strict=True):
            names.extend([name] if len(sizes) <= 1 else [f"{name}:{i}" for i in range(len(sizes))])
    return tuple(names), _shared(np.repeat(np.arange(len(counts)), counts))


@functools.lru_cache(maxsize=64)
def tensor_rows(layer_names, tensor_params, layer_types):
    """``(names, layer_of, parents, types)`` of the tensor rows: their names, each
    row's layer index, layer name and type (None without types). Cached."""
    names, layer_of = tensor_names(layer_names, tensor_params)
    rows = layer_of.tolist()
    types = None if layer_types is None else tuple(layer_types[i] for i in rows)
    return names, layer_of, tuple(layer_names[i] for i in rows), types


@functools.lru_cache(maxsize=64)
def tensor_view_arrays(tensor_params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(sizes, share, last)`` of the tensor rows in model order: each row's
    parameters, its share of its layer's times, and whether it is the layer's
    last row (which keeps the layer's output). Cached: read-only arrays."""
    sizes, share, last = [], [], []
    for sizes_bwd in tensor_params:
        total = sum(sizes_bwd)
        fwd = list(reversed(sizes_bwd)) or [0]
        sizes.extend(fwd)
        share.extend([s / total for s in fwd] if total else [1.0])
        last.extend([False] * (len(fwd) - 1) + [True])
    # read-only: a tensor view's params are ``sizes`` itself, shared by every view of these tensors
    return (_shared(np.array(sizes, dtype=np.int64)), _shared(np.array(share, dtype=float)),
            _shared(np.array(last, dtype=bool)))


def _shared(arr: np.ndarray) -> np.ndarray:
    """``arr`` made read-only: a cached value every caller (every session of the dashboard) is given."""
    arr.flags.writeable = False
    return arr


def parent_layers_text(text: str, parent_of: dict) -> str:
    """A timeline's ``layer`` cell with tensor names replaced by their layer's
    (``+``-joined for a message, each layer once, in order)."""
    if not text:
        return text
    seen: dict[str, None] = {}
    for part in text.split("+"):
        seen.setdefault(parent_of.get(part, part), None)
    return "+".join(seen)


#: Cell texts a renamer remembers before it starts afresh (bounds its memory).
_RENAMED_MAX = 1 << 16


@functools.lru_cache(maxsize=16)
def _renamer(row_names: tuple, tensor_layers: tuple):
    """``text -> parent_layers_text(text)`` for one model's tensor view, remembering
    each text it has renamed (a timeline repeats its cells every iteration and
    every run of the model)."""
    parent_of = {n: p for n, p in zip(row_names, tensor_layers, strict=True) if n != p}
    renamed: dict = {}

    def rename(text):
        out = renamed.get(text)
        if out is None:
            if len(renamed) >= _RENAMED_MAX:
                renamed.clear()
            out = renamed[text] = parent_layers_text(text, parent_of) if isinstance(text, str) else text
        return out

    return rename


def layer_renamer(row_names, tensor_layers):
    """The function that turns a timeline's ``layer`` cell of a tensor view into its layers'
    names (`parent_layers_text`, remembered per model); None without a tensor view or
    when every row is its own layer."""
    if tensor_layers is None:
        return None
    row_names, tensor_layers = tuple(row_names), tuple(tensor_layers)
    return None if row_names == tensor_layers else _renamer(row_names, tensor_layers)


def with_parent_layers(timeline, row_names, tensor_layers):
    """``timeline`` with its ``layer`` column naming each tensor's layer (the layer
    view); the tensor stays in the task ``name``. Unchanged without a tensor view.
    A new frame: ``timeline`` itself is not changed."""
    rename = layer_renamer(row_names, tensor_layers)
    if rename is None:
        return timeline
    # (imported when used: the timeline is a DataFrame, pandas is loaded already)
    from sim.core.timeline import renamed_layers

    return renamed_layers(timeline, rename)


def gradients_of(model) -> str:
    """What a resolved model's schedulers plan over: ``"tensor"`` for a tensor view
    (``Model.tensor_view``), else ``"layer"``."""
    return TENSOR if model.tensor_layers is not None else LAYER


def tensor_view_fields(model) -> dict | None:
    """The fields that turn ``model`` (a `sim.model.Model`) into its tensor view, or
    None when it has no tensor info or measured ``comm_s`` (layer granularity)."""
    if model.tensor_params is None or model.comm_s is not None:
        return None
    names, layer_of, parents, types = tensor_rows(model.layer_names, model.tensor_params, model.layer_types)
    if len(names) == model.num_layers:
        return {"tensor_params": None, "tensor_layers": model.layer_names}
    sizes, share, last = tensor_view_arrays(model.tensor_params)

    def split(arr):
        return None if arr is None else arr[layer_of] * share

    return {
        "layer_names": names, "params": sizes, "fwd_s": split(model.fwd_s), "bwd_s": split(model.bwd_s),
        "layer_types": types, "fwd_flops": split(model.fwd_flops),
        "out_elems": None if model.out_elems is None else model.out_elems[layer_of] * last,
        "tensor_params": None, "tensor_layers": parents, "extra": {**model.extra, "gradients": TENSOR},
    }


def rows_named(model) -> str:
    """How many rows ``model`` has and what they are: a tensor view's gradient tensors, else layers."""
    return f"{model.num_layers:,} {'gradient tensors' if getattr(model, 'tensor_layers', None) else 'layers'}"
