"""Compute-time model: per-layer forward and backward time from FLOPs and bytes.

A roofline per layer (Williams, Waterman and Patterson, "Roofline", CACM 2009):

    t = max(FLOPs / (peak_flops * efficiency[type]),  bytes / (mem_bw * MEM_EFFICIENCY))

* FLOPs: the zoo's forward FLOPs per sample (2 per multiply-add) times the batch.
* bytes: the layer's input and output activations (batch x elements x width)
  plus its weights (params x width), read or written once.
* peak_flops: the GPU's datasheet rate at the precision (fp32: FP32 CUDA
  cores; fp16 and amp: FP16 tensor cores, where faster; tf32: TF32 tensor cores for the
  tensor-core layer types, where faster, `_tensor_core_rates`), from ``data/gpus.csv``.

Backward costs ``BACKWARD_FACTOR[type]`` times the forward: 2 for layers with
weights (the gradient with respect to the input and to the weights each cost
about one forward), 1 for parameter-free and normalisation layers, which are
memory-bound. The update of SGD with momentum reads the parameter, its
gradient and its momentum and writes the parameter and the momentum: 5 words
per parameter through memory.

This is an estimate. The efficiencies below are assumptions, not fits to any
measurement in this project; measured times beat them. Calibrate with a
measured one-GPU iteration (``--calibrate-iteration-s``), which scales every
layer by one factor and keeps these proportions, or bring a layer CSV.
"""

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from sim.catalog import DATA_DIR, get_gpu
from sim.checks import MAX_TIME_S
from sim.errors import SimInputError

__all__ = [
    "BACKWARD_FACTOR",
    "COMPUTE_EFFICIENCY",
    "MEM_EFFICIENCY",
    "UPDATE_WORDS_PER_PARAM",
    "has_tf32",
    "layer_times_s",
    "tensor_core_families",
    "tensor_core_scales",
    "update_time_s",
]

#: Fraction of the datasheet peak reached by each layer type. Assumed: dense
#: convolutions and GEMMs in cuDNN/cuBLAS commonly run at one half to two
#: thirds of peak on large shapes; we take 0.5 and lower values for layer
#: types with small or irregular GEMMs. Parameter-free layers are memory-bound
#: and their FLOPs barely matter.
COMPUTE_EFFICIENCY = {
    "conv": 0.5,
    "conv_bn": 0.5,
    "linear": 0.5,
    "mlp": 0.5,
    "attention": 0.4,
    "embedding": 0.1,
    "bn": 0.1,
    "layernorm": 0.1,
    "pool": 0.1,
    "elementwise": 0.1,
}
DEFAULT_EFFICIENCY = 0.3
#: Fraction of the datasheet memory bandwidth reached by streaming kernels
#: (assumed; STREAM-like copies reach 80-90% on recent GPUs).
MEM_EFFICIENCY = 0.8
BACKWARD_FACTOR = {"bn": 1.0, "layernorm": 1.0, "pool": 1.0, "elementwise": 1.0, "embedding": 1.0}
DEFAULT_BACKWARD_FACTOR = 2.0
UPDATE_WORDS_PER_PARAM = 5
#: The GPU rate each precision computes at (`sim.catalog.PRECISIONS`): autocast (``amp``) runs
#: convolutions and matrix products in fp16 on the tensor cores, as an fp16 model does; ``tf32``
#: runs them on the TF32 tensor cores (`layer_times_s`: the other layers at the fp32 rate).
COMPUTE_PRECISION = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "amp": "fp16"}
#: Bytes of an activation and of a weight as a layer reads them: autocast casts the fp32 weights
#: to fp16 before the product (and keeps the copies: `sim.memory`), so a layer reads 2-byte values.
WIDTH_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "amp": 2}


#: Each layer type's tensor-core efficiency as a share of its `COMPUTE_EFFICIENCY`, for the
#: precisions computed on tensor cores (fp16, amp; tf32 takes the same shares, DERIVED: no
#: TF32 row is fitted): FITTED, with its source, in this file.
TENSOR_CORES_PATH = DATA_DIR / "tensor_cores.csv"


@functools.lru_cache(maxsize=1)
def tensor_core_families() -> Mapping[str, tuple[tuple[str, ...], float]]:
    """Family -> (its layer types, the share of their fp32 efficiency their fp16 tensor-core
    kernels reach), as ``data/tensor_cores.csv`` holds them: read once per process and shared
    by every caller, so read-only (``dict(...)`` is a copy to change)."""
    out = {}
    with open(TENSOR_CORES_PATH, newline="", encoding="utf-8") as fh:
        for line, row in enumerate(csv.DictReader(fh), start=2):
            try:
                scale = float(row["efficiency_scale"])
            except (KeyError, TypeError, ValueError):
                raise SimInputError(f"tensor_cores.csv line {line}: efficiency_scale must be a number") from None
            if not (math.isfinite(scale) and 0 < scale <= 1):
                raise SimInputError(f"tensor_cores.csv line {line}: efficiency_scale must be in (0, 1], got {scale}")
            out[row["family"]] = (tuple(str(row["layer_types"]).split(";")), scale)
    return MappingProxyType(out)


def tensor_core_scales() -> dict[str, float]:
    """Layer type -> its family's scale (`tensor_core_families`; a type the file does not list keeps 1)."""
    return {t: scale for types, scale in tensor_core_families().values() for t in types}


def layer_times_s(
    layer_types,
    fwd_flops: np.ndarray,
    params: np.ndarray,
    out_elems: np.ndarray,
    *,
    gpu: str,
    batch_size: int,
    precision: str = "fp32",
    tensor_core_scale: Mapping[str, float] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Forward and backward time of each layer on ``gpu`` at ``batch_size``; on tensor cores each
    type's efficiency is scaled by ``tensor_core_scale`` (None: `tensor_core_scales`)."""
    if precision not in COMPUTE_PRECISION:
        raise SimInputError(f"unknown precision {precision!r}; valid: {', '.join(COMPUTE_PRECISION)}")
    spec = get_gpu(gpu)
    width = WIDTH_BYTES[precision]
    peak = spec.peak_flops(COMPUTE_PRECISION[precision])
    eff = np.array([COMPUTE_EFFICIENCY.get(t, DEFAULT_EFFICIENCY) for t in layer_types])
    if COMPUTE_PRECISION[precision] in ("fp16", "tf32"):  # tensor cores reach a smaller share of their peak
        scale = tensor_core_scales() if tensor_core_scale is None else tensor_core_scale
        factor = np.array([scale.get(t, 1.0) for t in layer_types])
        peak, eff = _tensor_core_rates(spec, COMPUTE_PRECISION[precision], layer_types, eff, factor)
    back = np.array([BACKWARD_FACTOR.get(t, DEFAULT_BACKWARD_FACTOR) for t in layer_types])
    out_elems = np.asarray(out_elems, dtype=float)
    in_elems = np.concatenate(([out_elems[0]], out_elems[:-1]))  # a layer reads its predecessor's output
    flops = np.asarray(fwd_flops, dtype=float) * batch_size
    nbytes = (in_elems + out_elems) * batch_size * width + np.asarray(params, dtype=float) * width
    fwd = np.maximum(flops / (peak * eff), nbytes / (spec.mem_bw_bytes_per_s * MEM_EFFICIENCY))
    bwd = fwd * back
    slowest = float(np.max(bwd, initial=0.0))
    if slowest > MAX_TIME_S:
        raise SimInputError(f"batch_size {batch_size:,} is too large for {gpu}: a layer's backward would take "
                            f"{slowest:.3g} s, over a day (sim.checks.MAX_TIME_S)")
    return fwd, bwd


def _tensor_core_rates(spec, kind: str, layer_types, eff: np.ndarray, factor: np.ndarray,
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Per layer, the peak and efficiency under ``fp16`` or ``tf32`` (``kind``): a layer runs at that
    peak times its efficiency times its family's scale (``factor``, ``data/tensor_cores.csv``) where that
    beats the fp32 rate, as cuDNN and cuBLAS pick the faster kernel (a half-precision convolution can
    always compute in fp32), else at the fp32 peak. So mixed precision is never slower than fp32 in its
    arithmetic: on a GPU without tensor cores (K80, P100: no fp16 units past 2x) or with few (RTX 4090:
    165 against 83 TFLOPS, less than the scale fitted on the V100's 8x needs) the layers keep the fp32 rate
    and gain only the halved memory traffic. Under ``tf32`` only the tensor-core families use TF32 at all,
    so every layer of a GPU without TF32 (`has_tf32`) runs at the fp32 peak, as fp32 does."""
    fp32, low = spec.peak_flops("fp32"), spec.peak_flops(kind)
    eligible = np.ones(len(factor), dtype=bool)
    if kind == "tf32":
        stored = tensor_core_scales()
        eligible = np.array([t in stored for t in layer_types], dtype=bool)
    faster = eligible & (low * factor > fp32)
    return np.where(faster, low, fp32), np.where(faster, eff * factor, eff)


def has_tf32(gpu: str) -> bool:
    """Whether ``gpu``'s TF32 tensor cores beat its fp32 rate (V100, T4: ``tf32_tflops`` = ``fp32_tflops``,
    so ``tf32`` is fp32 there)."""
    spec = get_gpu(gpu)
    return spec.peak_flops("tf32") > spec.peak_flops("fp32")


#: Bytes an optimizer step reads and writes per parameter, all in fp32 (the
#: element-wise kernels are memory-bound): SGD reads the weight and the
#: gradient and writes the weight (3 words); momentum adds its buffer, read and
#: written (5); Adam/AdamW two moments (7; Kingma and Ba, ICLR 2015); LAMB
#: Adam's traffic plus a second pass over weight and update for the layer-wise
#: trust ratio (9; You et al., ICLR 2020, Algorithm 2).
OPTIMIZER_WORDS_PER_PARAM = {"sgd": 3, "momentum": UPDATE_WORDS_PER_PARAM, "adam": 7, "adamw": 7, "lamb": 9}
DEFAULT_OPTIMIZER = "momentum"
#: Mixed precision keeps fp32 master weights (Micikevicius et al., "Mixed Precision
#: Training", ICLR 2018): the fp16 gradient is read and cast up (2 + 4 bytes) and the
#: updated master weight is cast down to the fp16 copy (4 + 2 bytes), beside the fp32 step.
MIXED_PRECISION_EXTRA_BYTES_PER_PARAM = 12
#: Autocast's element-wise passes over the parameters in an iteration, beside the fp32 step (no
#: master copy), counted with the update: ``GradScaler`` unscales the fp32 gradients in place and
#: checks them for inf/NaN (PyTorch ``torch/amp/grad_scaler.py``, ``_unscale_grads_`` calling
#: ``torch._amp_foreach_non_finite_check_and_unscale_``: read and write, 4 + 4 bytes); the forward
#: casts each fp32 weight to fp16 (4 + 2) and the backward casts each fp16 weight gradient up to
#: the fp32 ``.grad`` (2 + 4).
AMP_UNSCALE_BYTES_PER_PARAM = 8 + 6 + 6
#: Extra bytes per parameter of each precision's step beside the fp32 optimizer's own.
UPDATE_EXTRA_BYTES_PER_PARAM = {"fp32": 0, "tf32": 0, "fp16": MIXED_PRECISION_EXTRA_BYTES_PER_PARAM,
                                "amp": AMP_UNSCALE_BYTES_PER_PARAM}


def update_time_s(total_params: int, *, gpu: str, precision: str = "fp32", optimizer: str = DEFAULT_OPTIMIZER) -> float:
    """One optimizer step over ``total_params`` parameters, from the bytes it
    moves (`OPTIMIZER_WORDS_PER_PARAM` fp32 words, plus the master-weight
    copies of fp16 mixed precision or autocast's unscaling pass:
    `UPDATE_EXTRA_BYTES_PER_PARAM`) at the GPU's streaming memory bandwidth."""
    if optimizer not in OPTIMIZER_WORDS_PER_PARAM:
        raise SimInputError(f"unknown optimizer {optimizer!r}; valid: {', '.join(OPTIMIZER_WORDS_PER_PARAM)}")
    spec = get_gpu(gpu)
    if precision not in UPDATE_EXTRA_BYTES_PER_PARAM:
        raise SimInputError(f"unknown precision {precision!r}; valid: {', '.join(UPDATE_EXTRA_BYTES_PER_PARAM)}")
    per_param = OPTIMIZER_WORDS_PER_PARAM[optimizer] * 4 + UPDATE_EXTRA_BYTES_PER_PARAM[precision]
    return total_params * per_param / (spec.mem_bw_bytes_per_s * MEM_EFFICIENCY)
