"""Per-GPU memory of data-parallel training: weights, gradients, optimizer state, activations, buffers.

`memory_per_gpu` adds up, for one GPU, the bytes of

* **weights**, **gradients** and **optimizer state**, counted as the ZeRO paper
  does (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
  Trillion Parameter Models", SC 2020, Sec. 3.1): with Psi parameters, fp32
  training keeps 4 Psi bytes of weights, 4 Psi of gradients and K Psi of
  optimizer state, where K = 4 bytes per fp32 buffer (`OPTIMIZER_BUFFERS`:
  ``sgd`` none, ``momentum`` one, ``adam`` two). Mixed precision (``fp16``)
  keeps 2 Psi of fp16 weights and 2 Psi of fp16 gradients, and the optimizer
  holds an fp32 master copy of the weights as well: K = 4 + 4 x buffers, so
  mixed-precision Adam is 2 + 2 + 12 = 16 bytes per parameter, the paper's
  figure. Automatic mixed precision (``amp``, ``torch.autocast``) keeps the
  weights and gradients fp32 (4 + 4 Psi, no master copy) and adds the fp16
  copies of the weights autocast casts in the forward pass, which autograd saves
  for the backward (2 Psi, counted with the weights and whole on every GPU even
  under ZeRO-3 / FSDP, which cannot free a saved copy), with 2-byte activations
  (a lower bound for transformers, whose layer norms, softmax and residual
  stream autocast keeps in fp32).
* **sharding** (`SHARDS`, ZeRO's stages over Nd = ``gpus`` data-parallel
  ranks): ``none`` (2 + 2 + K) Psi; ``optimizer`` (stage 1)
  2 Psi + 2 Psi + K Psi / Nd; ``gradients`` (stage 2) 2 Psi + (2 + K) Psi / Nd;
  ``parameters`` (stage 3, FSDP full shard) (2 + 2 + K) Psi / Nd (the widths
  are 4 + 4 in fp32). A shard is rounded up to whole bytes.
* **ZeRO-3 / FSDP working memory** (`gathered_unit_bytes`, counted with a
  run's buffers, `sim.resources.run_memory`, which knows its schedule;
  `memory_per_gpu` alone gives the model states of the ZeRO paper's formulas
  and takes it as ``gathered_bytes``): under ``parameters`` on more than one GPU, a unit (one layer with
  parameters, `sim.schedulers.zero`; a tensor view's rows of a layer added
  up) is gathered whole while it computes, with the next one prefetched as
  `sim.core.shard` times it, and in the backward its whole gradient is held
  until the reduce-scatter: at the peak, in the forward p[i] + p[i+1], in the
  backward p[i] + p[i] + p[i-1] (PyTorch FSDP docs, ``BackwardPrefetch.
  BACKWARD_PRE``: "the current set of parameters, next set of parameters, and
  current set of gradients"), times ``WIDTH_BYTES`` (2 in fp16; 4 in fp32,
  tf32 and amp, whose weights and gradients are fp32). Without the prefetch
  this is DeepSpeed's documented estimator ``estimate_zero3_model_states_mem_needs``
  (DeepSpeed docs, "Memory Requirements", ZeRO-3; ``deepspeed/runtime/zero/stage3.py``):
  ``largest_layer_memory + 18 Psi / Nd`` with ``largest_layer_memory = 4 x
  largest_layer_params``, the largest layer's fp16 weights and gradients. The
  sharded term stays the ZeRO paper's 16 Psi / Nd (2 + 2 + 12): DeepSpeed's 18
  also counts a 4-byte fp32 gradient shard in place of the 2-byte one (its
  offload branch keeps 2 bytes a parameter on the GPU and 16 on the CPU).
  ZeRO-3 can need more than ZeRO-2 (which keeps the weights whole but gathers
  nothing), and even more than stage 0, when one layer holds most of the
  model: the gathered units come on top of the shards (VGG-16's fc6 holds
  74 %: 693 against 519 MB on 8 GPUs, mixed-precision Adam), as in FSDP and
  DeepSpeed.
* **activations** kept for the backward pass, an estimate from the model's
  layer shapes (zoo models; a layer CSV has none and counts 0, a lower
  bound): each row's output (``out_elems`` per sample) x the per-GPU batch x
  the bytes of one element (4 in fp32 and tf32, 2 in fp16 and amp) x a factor per layer type
  (`ACTIVATION_FACTOR`). For CNN rows the factor counts the tensors of the
  output's size that autograd saves: the output itself (the next layer's
  saved input, or the in-place ReLU's saved result), and for batch-norm also
  its input, the convolution's output (``conv_bn`` and ``bn``: 2). For the
  transformer rows it follows Korthikanti et al., "Reducing Activation
  Recomputation in Large Transformer Models", MLSys 2023 (arXiv 2205.05198),
  Sec. 4.1: one layer keeps 34 s b h + 5 a s^2 b bytes with 16-bit
  activations (attention block 11 s b h + 5 a s^2 b, MLP 19 s b h, the two
  layer-norms 4 s b h). Our ``attention`` row holds the attention block and
  one layer-norm, (11 + 2) s b h bytes = 6.5 elements of its output size, plus
  the 5 a s^2 b bytes of scores, softmax and dropout (2.5 a s^2 elements per
  sample, counted where the number of heads a and the sequence length s are
  known: `attention_scores`); the ``mlp`` row holds the MLP and the other
  layer-norm, (19 + 2) s b h bytes = 10.5 elements. In fp32 the same element
  counts are taken at 4 bytes (the 1-byte dropout masks are then counted at 4
  bytes: a small overestimate). The network's input batch, the CUDA context
  and allocator fragmentation are not counted.
* **communication buffers** (``bucket_bytes``, see `comm_buffer_bytes`): PyTorch
  DDP's gradient buckets (``bucket_cap_mb``, default 25 MiB; torch.nn.parallel.DistributedDataParallel
  docs): two buckets, one being filled while one is reduced, 2 x the bucket
  size (at most the whole gradient). This assumes ``gradient_as_bucket_view=True``; with PyTorch's default
  (False) the buckets hold a copy of every gradient, which the DDP docs say that
  option saves. Horovod's fusion buffer, allocated once at
  ``HOROVOD_FUSION_THRESHOLD`` bytes (64 MB by default; Horovod docs, "Tensor
  Fusion"). Other schedulers that merge layers pack each merged message into
  one flat buffer: the largest merged message.
* **gradient compression state** (`compression_state_bytes`, counted with the
  buffers; ``sim.compression`` kinds, on more than one GPU). The gradient's
  width is the run's (``WIDTH_BYTES``: fp32 but in ``fp16``). ``fp16`` /
  ``bf16``: one 16-bit copy of the largest message in flight (DDP's
  ``fp16_compress_hook`` casts the bucket, ``buffer.to(torch.float16)``).
  ``topk:RATIO``: an error-feedback residual the size of the whole gradient
  (local gradient accumulation: Lin et al., "Deep Gradient Compression",
  ICLR 2018, Sec. 3.1; Stich, Cordonnier and Jaggi, "Sparsified SGD with
  Memory", NeurIPS 2018), plus the all-gather's receive buffer of P k
  (value, int32 index) pairs of the largest message in flight (k = the sum of
  its layers' ceil(RATIO e)). ``powersgd:RANK``: an error-feedback buffer the
  size of the whole gradient and the P (n x r) and Q (m x r) factors of every
  compressed layer (Vogels, Karimireddy and Jaggi, "PowerSGD", NeurIPS 2019,
  Alg. 2; PyTorch's ``powerSGD_hook`` keeps ``error_dict``, ``p_memory_dict``
  and ``q_memory_dict``), a layer of e parameters taken as a square sqrt(e) x
  sqrt(e) matrix and left uncompressed when 2 sqrt(e) r >= e, as
  `sim.compression` times it; and the hook's copy of the message it
  compresses, which error feedback needs (``torch.clone(input_tensor)``), at
  the largest message. The messages are the run's (one per layer when not
  given). A 16-bit cast of 16-bit gradients is refused, as the run refuses it.

`fits_in_memory` compares the total with the GPU's memory (``mem_gb`` in
``data/gpus.csv``, GB = 1e9 bytes); nothing is held back for the CUDA context.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from sim.checks import check_choice, check_float, check_int
from sim.compression import INDEX_BYTES, Compression, check_width, parse_compression
from sim.compute import WIDTH_BYTES as COMPUTE_WIDTH_BYTES
from sim.model import Model
from sim.precision import BYTES_PER_PARAM
from sim.schedulers.names import BUCKET, DDP, HOROVOD

__all__ = [
    "ACTIVATION_FACTOR", "DEFAULT_OPTIMIZER", "MEMORY_KEYS", "MIB", "OPTIMIZERS", "OPTIMIZER_BUFFERS", "SHARDS",
    "ZOO_ATTENTION_HEADS", "MemoryEstimate", "activation_bytes", "attention_scores", "comm_buffer_bytes",
    "compression_state_bytes", "gathered_unit_bytes", "largest_layer_params", "memory_per_gpu",
    "model_state_bytes_per_param", "optimizer_bytes_per_param",
]

#: The optimizers whose state is counted, and the fp32 buffers of that state per parameter.
OPTIMIZER_BUFFERS = {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2, "lamb": 2}  # LAMB keeps Adam's two moments
OPTIMIZERS = tuple(OPTIMIZER_BUFFERS)
#: The optimizer of a run that names none: SGD with momentum, the update that
#: `sim.compute.update_time_s` times.
DEFAULT_OPTIMIZER = "momentum"
#: ZeRO's stages: what is partitioned over the data-parallel ranks.
SHARDS = ("none", "optimizer", "gradients", "parameters")
#: Bytes of one weight (and one gradient) at each precision: its gradient's width on the wire
#: (`sim.precision`; fp16 is an fp16 model with fp32 master weights, amp keeps fp32 weights and gradients).
WIDTH_BYTES = BYTES_PER_PARAM
#: Bytes of one activation element at each precision: the width its layers compute in (autocast's
#: products write fp16 outputs).
ACTIVATION_WIDTH_BYTES = COMPUTE_WIDTH_BYTES
#: Bytes per parameter of fp16 weight copies kept beside the weights: autocast's cast cache (amp).
CAST_COPY_BYTES = {"fp32": 0, "tf32": 0, "fp16": 0, "amp": 2}
FP32_BYTES = 4
#: Bytes of one fp16 or bf16 element (the ``fp16`` / ``bf16`` compressions' copy of a message).
HALF_BYTES = 2
MIB = 1 << 20

#: Activation elements kept per output element, by layer type (see the module docstring).
ACTIVATION_FACTOR = {
    "conv": 1.0, "conv_bn": 2.0, "bn": 2.0, "linear": 1.0, "pool": 1.0, "elementwise": 1.0,
    "embedding": 1.0, "layernorm": 1.0, "attention": 6.5, "mlp": 10.5,
}
DEFAULT_ACTIVATION_FACTOR = 1.0
#: Score, softmax and dropout elements per attention row, per (head x s^2): 5 a s^2 b bytes at 2 bytes each.
SCORE_ELEMENTS_PER_HEAD_SQ = 2.5
#: Attention heads of the zoo's transformers (their Hugging Face configs: bert-base-uncased 12,
#: bert-large-uncased 16, gpt2 12). A model can say its own in ``extra["attention_heads"]``.
ZOO_ATTENTION_HEADS = {"bert_base": 12, "bert_large": 16, "gpt2": 12}

#: The keys `MemoryEstimate.metrics` adds to a run's metrics.
MEMORY_KEYS = (
    "optimizer", "memory_weights_bytes", "memory_gradients_bytes", "memory_optimizer_bytes",
    "memory_activations_bytes", "memory_buffers_bytes", "memory_per_gpu_bytes", "gpu_memory_bytes",
    "fits_in_memory",
)


def optimizer_bytes_per_param(optimizer: str, precision: str) -> int:
    """K of the ZeRO paper: optimizer-state bytes per parameter (fp16 adds the fp32 master weights)."""
    check_choice("optimizer", optimizer, OPTIMIZERS)
    check_choice("precision", precision, tuple(WIDTH_BYTES))
    master = FP32_BYTES if precision == "fp16" else 0
    return master + FP32_BYTES * OPTIMIZER_BUFFERS[optimizer]


def model_state_bytes_per_param(optimizer: str, precision: str) -> int:
    """Weights (with autocast's fp16 copies) + gradients + optimizer state per parameter, unsharded
    (16 for mixed-precision Adam, 18 for Adam under autocast)."""
    state = optimizer_bytes_per_param(optimizer, precision)
    return 2 * WIDTH_BYTES[precision] + CAST_COPY_BYTES[precision] + state


def attention_scores(model: Model) -> float:
    """a x s^2 per sample of each attention row (heads x sequence length squared), or 0 when unknown.

    Heads from ``model.extra["attention_heads"]`` or `ZOO_ATTENTION_HEADS`; the
    sequence length from ``model.extra["seq_len"]``, the zoo arguments the model
    was built with, or its architecture's default.
    """
    extra = model.extra or {}
    heads = extra.get("attention_heads", ZOO_ATTENTION_HEADS.get(model.name))
    seq_len = extra.get("seq_len") or (extra.get("arch_kwargs") or {}).get("seq_len")
    if seq_len is None and model.name in ZOO_ATTENTION_HEADS:
        from sim.zoo import ARCHITECTURES

        seq_len = ARCHITECTURES[model.name].default_kwargs.get("seq_len")
    if not heads or not seq_len:
        return 0.0
    return float(heads) * float(seq_len) ** 2


def _one_row_per_layer(parents, rows: int) -> np.ndarray:
    """Row indices with one row per layer: in a tensor view (`Model.tensor_view`, ``parents`` its
    ``tensor_layers``) a layer's tensors share its output, which is kept once."""
    if parents is None:
        return np.arange(rows)
    return np.array([i for i, p in enumerate(parents) if i + 1 == len(parents) or parents[i + 1] != p], dtype=int)


def activation_bytes(model: Model, batch_size: int, precision: str) -> int:
    """Activation bytes kept for the backward pass on one GPU (0 for a model without layer shapes)."""
    if model.out_elems is None or model.layer_types is None:
        return 0
    return int(math.ceil(_activation_elements(model) * batch_size * ACTIVATION_WIDTH_BYTES[precision]))


def _activation_elements(model: Model) -> float:
    """Activation elements kept per sample: worked out once per layer types, rows and output sizes
    (`_kept_elements`, keyed by what they are, not by the model, whose arrays a caller may change in
    place), plus the attention scores (``model.extra``, read on every call)."""
    parents = getattr(model, "tensor_layers", None)
    elems, n_attention = _kept_elements(tuple(model.layer_types), None if parents is None else tuple(parents),
                                        np.asarray(model.out_elems, dtype=float).tobytes())
    return elems + n_attention * SCORE_ELEMENTS_PER_HEAD_SQ * attention_scores(model)


@functools.lru_cache(maxsize=16)
def _kept_elements(layer_types: tuple, parents: tuple | None, out_elems: bytes) -> tuple[float, int]:
    """Activation elements kept per sample without the attention scores, and the attention rows."""
    keep = _one_row_per_layer(parents, len(layer_types))
    types = [layer_types[i] for i in keep]
    factor = np.array([ACTIVATION_FACTOR.get(t, DEFAULT_ACTIVATION_FACTOR) for t in types])
    elems = float(np.dot(np.frombuffer(out_elems, dtype=float)[keep], factor))
    return elems, sum(1 for t in types if t == "attention")


def comm_buffer_bytes(scheduler: str, *, gpus: int, gradient_bytes: int, largest_message_bytes: int = 0,
                      bucket_mb: float = 25.0, fusion_threshold_mb: float = 64.0) -> int:
    """Communication buffer bytes on one GPU (see the module docstring); 0 on one GPU.

    ``gradient_bytes`` is the model's whole gradient, ``largest_message_bytes``
    the largest message of the plan that merges several layers (0 if none).
    """
    if gpus <= 1:
        return 0
    if scheduler in (DDP, BUCKET):
        return int(math.ceil(min(2 * bucket_mb * MIB, gradient_bytes)))
    if scheduler == HOROVOD:
        if not math.isfinite(fusion_threshold_mb):
            return int(gradient_bytes)
        return int(math.ceil(fusion_threshold_mb * MIB))
    return int(largest_message_bytes)


def _unit_params(model: Model) -> np.ndarray:
    """Parameters of each layer with any, in layer order: ZeRO-3 / FSDP's units (`sim.schedulers.zero`); in a
    tensor view (``tensor_layers`` its rows' layers, in order) a layer's tensor rows are added up."""
    params = np.asarray(model.params, dtype=np.int64)
    parents = getattr(model, "tensor_layers", None)
    if parents is not None and len(params):
        _, first, inverse = np.unique(np.asarray(parents), return_index=True, return_inverse=True)
        totals = np.zeros(len(first), dtype=np.int64)
        np.add.at(totals, inverse.ravel(), params)
        params = totals[np.argsort(first, kind="stable")]  # the layers in the order their first rows come
    return params[params > 0]


def largest_layer_params(model: Model) -> int:
    """Parameters of the model's largest layer (a ZeRO-3 / FSDP unit; a tensor view's rows of one layer added up)."""
    return int(_unit_params(model).max(initial=0))


def gathered_unit_bytes(model: Model, precision: str, *, gpus: int, shard: str) -> int:
    """ZeRO-3 / FSDP working memory on one GPU (see the module docstring): at its peak, a unit gathered whole
    with the next one prefetched, in the forward p[i] + p[i+1], in the backward p[i] (weights) + p[i]
    (gradient) + p[i-1] (the next one's weights; the first unit, 2 p[0]), times ``WIDTH_BYTES``. Without the
    prefetch it is DeepSpeed's ``largest_layer_memory = 4 x largest_layer_params`` (fp16). 0 unless ``shard``
    is ``"parameters"`` on more than one GPU."""
    check_choice("shard", shard, SHARDS)
    if shard != "parameters" or gpus <= 1:
        return 0
    p = _unit_params(model)
    if len(p) < 2:
        return int(2 * p.sum()) * WIDTH_BYTES[precision]
    peak = max(int((p[:-1] + p[1:]).max()), int((2 * p[1:] + p[:-1]).max()), 2 * int(p[0]))  # (unit 0: no next)
    return peak * WIDTH_BYTES[precision]


def _message_sums(values: np.ndarray, messages) -> np.ndarray:
    """Per message, the sum of ``values`` over its rows (``messages``: row indices; None: one message per row)."""
    if messages is None:
        return values
    rows = [np.asarray(list(m), dtype=np.int64) for m in messages]
    rows = [r for r in rows if len(r)]
    if not rows:
        return np.zeros(0, dtype=values.dtype)
    offsets = np.cumsum([0] + [len(r) for r in rows[:-1]])
    return np.add.reduceat(values[np.concatenate(rows)], offsets)


def compression_state_bytes(compression: Compression | str | None, layer_elems, messages=None, *, gpus: int,
                            width_bytes: int) -> int:
    """Bytes on one GPU that gradient compression adds (see the module docstring); 0 without it or on one GPU.

    ``layer_elems`` are each row's gradient elements, ``messages`` the run's
    messages as lists of row indices (None: one per row), ``width_bytes`` the
    bytes of one gradient element, ``gpus`` P. A 16-bit cast of 16-bit gradients
    is refused, as the run refuses it (`sim.compression.compressed_cost`).
    """
    comp = parse_compression(compression)
    check_int("gpus", gpus, 1)
    check_width(comp, width_bytes)
    if comp is None or gpus <= 1:
        return 0
    elems = np.asarray(layer_elems, dtype=np.int64)
    largest = int(_message_sums(elems, messages).max(initial=0))  # the largest message, in elements
    if comp.kind in ("fp16", "bf16"):
        return HALF_BYTES * largest
    residual = int(elems.sum()) * int(width_bytes)
    if comp.kind == "topk":  # k of each layer as `sim.compression.CompressedCost.layer_time_parts` sends it
        k = np.where(elems > 0, np.ceil(comp.ratio * elems.astype(float)), 0.0).astype(np.int64)
        pairs = int(_message_sums(k, messages).max(initial=0))
        return residual + gpus * pairs * (int(width_bytes) + INDEX_BYTES)
    # P and Q of a square sqrt(e) x sqrt(e) layer: 2 sqrt(e) r elements, if that is fewer than e; and the
    # hook's copy of the message it compresses (error feedback: ``torch.clone(input_tensor)``)
    side = 2 * np.sqrt(elems.astype(float)) * comp.rank
    factors = math.fsum(side[(elems > 0) & (side < elems)].tolist())
    return residual + int(math.ceil(factors * width_bytes)) + largest * int(width_bytes)


@dataclass(frozen=True)
class MemoryEstimate:
    """One GPU's memory, by part, in bytes."""

    optimizer: str
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    buffers_bytes: int

    @property
    def total_bytes(self) -> int:
        return (self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes
                + self.buffers_bytes)

    def metrics(self, gpu_memory_bytes: float) -> dict:
        """The `MEMORY_KEYS` of a run on a GPU with ``gpu_memory_bytes``."""
        return {
            "optimizer": self.optimizer, "memory_weights_bytes": self.weights_bytes,
            "memory_gradients_bytes": self.gradients_bytes, "memory_optimizer_bytes": self.optimizer_bytes,
            "memory_activations_bytes": self.activations_bytes, "memory_buffers_bytes": self.buffers_bytes,
            "memory_per_gpu_bytes": self.total_bytes, "gpu_memory_bytes": int(gpu_memory_bytes),
            "fits_in_memory": bool(self.total_bytes <= gpu_memory_bytes),
        }


def _share(total_bytes: int, parts: int) -> int:
    """One rank's share of ``total_bytes`` split over ``parts`` ranks, rounded up."""
    return -(-int(total_bytes) // parts)


def _model_states(psi: int, width: int, k: int, level: int, gpus: int) -> tuple[int, int, int]:
    """(weights, gradients, optimizer state) bytes of ``psi`` parameters at ZeRO stage ``level`` on ``gpus``."""
    weights, grads, state = psi * width, psi * width, psi * k
    if level >= 1:
        state = _share(state, gpus)
    if level >= 2:
        grads = _share(grads, gpus)
    if level >= 3:
        weights = _share(weights, gpus)
    return weights, grads, state


def memory_per_gpu(model: Model, *, batch_size: int, precision: str = "fp32", optimizer: str = DEFAULT_OPTIMIZER,
                   gpus: int = 1, shard: str = "none", bucket_bytes: int = 0, gathered_bytes: int = 0,
                   compression: Compression | str | None = None, messages=None) -> MemoryEstimate:
    """Bytes on one GPU of ``gpus`` data-parallel ranks, by part (see the module docstring).

    Parameters
    ----------
    model : Model
        Its ``params`` (Psi = their sum) and, for activations, ``out_elems`` and ``layer_types``.
    batch_size : int
        Samples per GPU.
    precision : {"fp32", "tf32", "fp16", "amp"}
        fp32 training, mixed precision with an fp16 model and fp32 master weights, or autocast.
    optimizer : {"sgd", "momentum", "adam"}
    gpus : int
        Data-parallel ranks Nd over which a ``shard`` partitions.
    shard : {"none", "optimizer", "gradients", "parameters"}
        ZeRO stage 0, 1, 2 or 3: the model states of the ZeRO paper's formulas (its Figure 1).
    bucket_bytes : int
        Communication buffers on the GPU (`comm_buffer_bytes`).
    gathered_bytes : int
        Working memory of a schedule that gathers sharded parameters, added to the buffers: a run
        (`sim.resources.run_memory`) gives ZeRO-3's, `gathered_unit_bytes`.
    compression, messages
        The run's gradient compression (`sim.compression`) and messages (lists of row indices; None: one
        per row), whose state is added to the buffers (`compression_state_bytes`).
    """
    check_int("batch_size", batch_size, 1)
    check_int("gpus", gpus, 1)
    check_choice("shard", shard, SHARDS)
    check_float("bucket_bytes", bucket_bytes, 0)
    check_float("gathered_bytes", gathered_bytes, 0)
    k = optimizer_bytes_per_param(optimizer, precision)
    psi = int(np.sum(model.params, dtype=np.int64))
    width = WIDTH_BYTES[precision]
    weights, grads, state = _model_states(psi, width, k, SHARDS.index(shard), gpus)
    weights += psi * CAST_COPY_BYTES[precision]  # autocast's fp16 copies, saved whole for backward (not sharded)
    compressed = 0 if compression is None else compression_state_bytes(compression, model.params, messages,
                                                                         gpus=gpus, width_bytes=width)
    return MemoryEstimate(optimizer, weights, grads, state, activation_bytes(model, batch_size, precision),
                          int(math.ceil(bucket_bytes)) + int(math.ceil(gathered_bytes)) + compressed)
