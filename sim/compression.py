"""Gradient compression for the all-reduce schedulers: fewer bytes, plus the work to (de)compress.

``--compression`` (CLI) or ``compression=`` (`sim.simulate`) takes one of:

* ``fp16`` / ``bf16``: gradients cast to 16 bits before the all-reduce and
  back after it: half the bytes of fp32 (Micikevicius et al., "Mixed
  Precision Training", ICLR 2018; PyTorch DDP's ``fp16_compress_hook`` and
  ``bf16_compress_hook``).
* ``topk:RATIO``: each layer sends its ``k = ceil(RATIO * n)`` largest
  gradient entries as (value, int32 index) pairs. Sparse vectors do not add
  up in place, so the pairs are all-gathered: each GPU receives P * k pairs
  (Renggli et al., "SparCML", SC 2019; Shi et al., "A Distributed Synchronous
  SGD Algorithm with Global Top-k Sparsification", ICDCS 2019; Lin et al.,
  "Deep Gradient Compression", ICLR 2018). 0 < RATIO <= 1.
* ``powersgd:RANK``: each layer's gradient, an n x m matrix, is replaced by
  P (n x r) and Q (m x r), all-reduced one after the other (two all-reduces
  per message), after one power iteration (Vogels, Karimireddy and Jaggi,
  "PowerSGD", NeurIPS 2019). The model's layer tables carry parameter counts,
  not shapes: a layer of e parameters is taken as a square sqrt(e) x sqrt(e)
  matrix (the smallest n + m for its size, so the most favourable case), and
  a layer is sent uncompressed when (n + m) r >= n m (small tensors). A 1-D
  tensor is taken as square too, so a large one is compressed, where PyTorch's
  hook sends every 1-D tensor as it is; in the zoo's CNNs the batch-norm and
  bias tensors hold well under 1 % of the parameters.

Times. A compressed message's time on the channel is its collective on the
fewer bytes (`sim.core.cost`: an all-reduce T(M); an all-gather of the P
pieces T(P k b) / 2) plus the compression and decompression kernels, which
are memory-bandwidth bound: ``bytes touched per element / mem_bw`` of the
run's GPU (``data/gpus.csv``), per element of the uncompressed gradient
(`BYTES_TOUCHED_PER_ELEMENT`; PowerSGD also its matrix products at the GPU's
fp32 peak, whichever is slower). The kernels are put on the message's path
(before and after its collective), not on the GPU's compute stream: their
contention with backward is not modelled. Gradients in fp32; ``fp16`` and
``bf16`` do nothing to fp16 gradients and are refused there.

Compression applies to all-reduce schedulers; the parameter server and the
schedulers that split the all-reduce (DeAR, ZeRO) are refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sim.core.cost import NO_COMM, CommCost
from sim.core.plan import NO_GRADIENTS, SHARD_NONE
from sim.errors import SimInputError
from sim.schedulers.registry import make_plan

__all__ = ["BYTES_TOUCHED_PER_ELEMENT", "INDEX_BYTES", "KINDS", "Compression", "CompressedCost", "check_width",
           "compressed_cost", "parse_compression", "refusal"]

#: The kinds of ``--compression`` and how each is written.
KINDS = ("fp16", "bf16", "topk:RATIO", "powersgd:RANK")
#: Top-k below one element in a million sends nothing a model of any size would notice: refused.
MIN_TOPK_RATIO = 1e-6
#: The largest PowerSGD rank taken (Vogels et al. use ranks 1-32; a rank is bounded by a layer's side).
MAX_POWERSGD_RANK = 1 << 16
#: Bytes of a top-k index (int32).
INDEX_BYTES = 4

#: Bytes of GPU memory read and written per element of an fp32 gradient, by kind (a model, not a
#: measurement). fp16/bf16: cast down (read 4, write 2) and back up (read 2, write 4) = 12.
#: topk: error feedback (read gradient and residual, write the sum: 12), selection by radix select
#: (4 passes of 8-bit digits over the 32-bit keys, each reading 4 bytes: 16; PyTorch's multi-block
#: top-k), the residual update (read 4, write 4: 8) and zeroing the dense result (4) = 40, plus
#: `TOPK_SCATTER_BYTES` per received (value, index) pair. powersgd: error feedback (12), M Q and
#: M^T P each reading M (8), the reconstruction P Q^T written (4) and the residual update (8) = 32.
BYTES_TOUCHED_PER_ELEMENT = {"fp16": 12, "bf16": 12, "topk": 40, "powersgd": 32}
#: Decompressing top-k: read a (value, index) pair (8) and read-modify-write its dense entry (8).
TOPK_SCATTER_BYTES = 16
#: PowerSGD's floating-point operations per gradient element and rank: M Q, M^T P and P Q^T, 2 each.
POWERSGD_FLOPS_PER_ELEMENT_RANK = 6


@dataclass(frozen=True)
class Compression:
    """One compression: ``kind`` (fp16, bf16, topk, powersgd), top-k's ``ratio``, PowerSGD's ``rank``."""

    kind: str
    ratio: float = 1.0
    rank: int = 0

    def __str__(self) -> str:
        if self.kind == "topk":
            return f"topk:{self.ratio!r}"  # (all its digits: the label rebuilds the same ratio)
        if self.kind == "powersgd":
            return f"powersgd:{self.rank}"
        return self.kind


def parse_compression(text, name: str = "compression") -> Compression | None:
    """``"fp16"``, ``"bf16"``, ``"topk:RATIO"`` or ``"powersgd:RANK"`` (None or ``"none"``: no compression);
    ``name`` names the argument in an error."""
    if text is None or isinstance(text, Compression):
        return text
    if not isinstance(text, str):
        raise SimInputError(f"{name} must be a string such as 'topk:0.01', got {type(text).__name__}")
    value = text.strip().lower()
    if value in ("", "none"):
        return None
    kind, _, arg = value.partition(":")
    if kind in ("fp16", "bf16") and not arg:
        return Compression(kind)
    if kind == "topk" and arg:
        try:
            ratio = float(arg)
        except ValueError:
            ratio = math.nan
        if not (MIN_TOPK_RATIO <= ratio <= 1):
            raise SimInputError(f"{name} {text!r}: the top-k ratio must be a number in [1e-06, 1], e.g. topk:0.01")
        return Compression("topk", ratio=ratio)
    if kind == "powersgd" and arg:
        if not (arg.isascii() and arg.isdigit() and len(arg) <= 7) or not 1 <= int(arg) <= MAX_POWERSGD_RANK:
            raise SimInputError(f"{name} {text!r}: the PowerSGD rank must be a whole number in 1..{MAX_POWERSGD_RANK:,}, "
                                "e.g. powersgd:4")
        return Compression("powersgd", rank=int(arg))
    raise SimInputError(f"{name} {text!r}: unknown kind; valid: {', '.join(KINDS)}")


def refusal(scheduler: str, architecture: str = "allreduce") -> str | None:
    """Why ``scheduler`` on ``architecture`` cannot compress its gradients (one line), or None if it can."""
    if architecture != "allreduce":
        return f"compression applies to all-reduce schedulers, not to architecture {architecture!r}"
    probe = make_plan(scheduler, NO_GRADIENTS, NO_COMM)
    if probe.decoupled or probe.shard != SHARD_NONE:
        return (f"compression applies to all-reduce schedulers; {scheduler} splits the all-reduce into a "
                "reduce-scatter and an all-gather")
    return None


@dataclass(frozen=True)
class CompressedCost(CommCost):
    """An all-reduce cost with the messages compressed (see the module docstring).

    ``base`` times the collectives on the compressed bytes; ``layer_elems``
    are each model layer's gradient elements, ``elem_bytes`` their width,
    ``gpus`` P, ``mem_bw_bytes_per_s`` and ``peak_flops`` the GPU's. The
    inherited ``alpha_s`` and ``beta_s_per_byte`` are an affine fit for the
    schedulers to plan with; every task is timed by `step_time_s`.
    """

    base: CommCost = field(default=None, repr=False)
    compression: Compression = field(default=None)
    layer_elems: tuple = field(default=(), repr=False)
    elem_bytes: int = 4
    gpus: int = 1
    mem_bw_bytes_per_s: float = 1.0
    peak_flops: float = 1.0

    def layer_time_parts(self, i: int) -> tuple[float, float, float]:
        """Layer i's (bytes all-reduced, bytes each GPU contributes to an all-gather, kernel seconds)."""
        e, c = float(self.layer_elems[i]), self.compression
        if e <= 0:
            return 0.0, 0.0, 0.0
        kernel = BYTES_TOUCHED_PER_ELEMENT[c.kind] * e / self.mem_bw_bytes_per_s
        if c.kind in ("fp16", "bf16"):
            return 2.0 * e, 0.0, kernel
        if c.kind == "topk":
            k = math.ceil(c.ratio * e)
            kernel += TOPK_SCATTER_BYTES * self.gpus * k / self.mem_bw_bytes_per_s
            return 0.0, float(k * (self.elem_bytes + INDEX_BYTES)), kernel
        side = math.sqrt(e)
        if 2 * side * c.rank >= e:  # too small to gain: sent as it is
            return e * self.elem_bytes, 0.0, 0.0
        flops = POWERSGD_FLOPS_PER_ELEMENT_RANK * e * c.rank / self.peak_flops
        return 2 * side * c.rank * self.elem_bytes, 0.0, max(kernel, flops)

    def message_time_s(self, members, nbytes, share: float = 1.0) -> float:
        """Compress, communicate and decompress the message of layers ``members``
        (or a ``share`` of it: a partition, with a start-up of its own)."""
        parts = np.array([self.layer_time_parts(int(i)) for i in members], dtype=float).reshape(-1, 3)
        reduced, gathered, kernel = parts.sum(axis=0) * share
        if self.compression.kind == "topk":
            return 0.5 * float(self.base.time_s(self.gpus * gathered)) + kernel
        if self.compression.kind == "powersgd":  # P and Q in two all-reduces of half the bytes each
            return 2.0 * float(self.base.time_s(0.5 * reduced)) + kernel
        return float(self.base.time_s(reduced)) + kernel

    def step_time_s(self, step: str, members, nbytes, *, whole: bool = True) -> float:
        """A compressed all-reduce; a partition of a message takes its share of the whole. Its
        ``launch`` is the framework's launches of its collectives (`launch_s`), its ``transfer`` the rest."""
        if step in ("launch", "transfer"):
            return super().step_time_s(step, members, nbytes, whole=whole)
        if step != "allreduce":
            raise SimInputError(f"compression applies to all-reduces, not to a {step}")
        if whole:
            return self.message_time_s(members, nbytes)
        full = float(sum(float(self.layer_elems[int(i)]) for i in members)) * self.elem_bytes
        return self.message_time_s(members, nbytes, float(nbytes) / full if full else 1.0)


def check_width(compression: Compression | None, elem_bytes: int) -> None:
    """Refuse a 16-bit cast of gradients that are 16-bit already (``elem_bytes`` each)."""
    if compression is not None and compression.kind in ("fp16", "bf16") and elem_bytes <= 2:
        raise SimInputError(f"compression {compression} does nothing to {8 * int(elem_bytes)}-bit gradients: "
                            "use precision fp32, tf32 or amp (fp32 gradients), or another compression")


def compressed_cost(cost: CommCost, compression: Compression, layer_elems, *, elem_bytes: int, gpus: int,
                    mem_bw_bytes_per_s: float, peak_flops: float) -> CompressedCost:
    """``cost`` with ``compression`` applied to every message (layers of ``layer_elems`` elements)."""
    check_width(compression, elem_bytes)
    elems = tuple(int(e) for e in np.asarray(layer_elems, dtype=np.int64))
    parts = {"base": cost, "compression": compression, "layer_elems": elems, "elem_bytes": int(elem_bytes),
             "gpus": int(gpus), "mem_bw_bytes_per_s": float(mem_bw_bytes_per_s), "peak_flops": float(peak_flops)}
    draft = CompressedCost(0.0, 0.0, "", **parts)
    # the affine fit the schedulers plan with: the time of one message of all layers, and its
    # start-up (the message of no bytes), as T(M) = alpha + beta M over the uncompressed bytes
    total = sum(elems) * elem_bytes
    everything = tuple(i for i, e in enumerate(elems) if e > 0)
    starts = {"topk": 0.5, "powersgd": 2.0}.get(compression.kind, 1.0)  # start-ups per message, as timed
    alpha = starts * cost.alpha_s
    beta = max(draft.message_time_s(everything, total) - alpha, 0.0) / total if total else 0.0
    label = f"{cost.label}, compressed {compression}".lstrip(", ")
    # the framework's launches stay host work a plan may run ahead of the transfers (ByteScheduler's credit)
    return CompressedCost(alpha, beta, label, compute_slowdown=getattr(cost, "compute_slowdown", 0.0),
                          comm_slowdown=getattr(cost, "comm_slowdown", 0.0), launch_s=starts * cost.launch_s, **parts)
