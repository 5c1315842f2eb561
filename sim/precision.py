"""Training precisions: what each computes at and sends.

``fp32`` computes and sends fp32. ``tf32`` keeps fp32 tensors but runs
convolutions and matrix products on TF32 tensor cores (Ampere and later;
inputs rounded to a 10-bit mantissa, fp32 accumulate): PyTorch's default for
convolutions on those GPUs (``torch.backends.cudnn.allow_tf32``, True by
default), and for matrix products too once ``torch.backends.cuda.matmul.allow_tf32``
or ``torch.set_float32_matmul_precision("high")`` allows it; TensorFlow's
default for both since 2.4. On a GPU without TF32 (``tf32_tflops`` equal to
``fp32_tflops`` in ``data/gpus.csv``: V100, T4, P100) it is fp32. ``fp16`` is an fp16 model with fp32 master
weights (apex O2, DeepSpeed's fp16): fp16 compute and fp16 gradients. ``amp`` is
automatic mixed precision (``torch.autocast`` with ``GradScaler``, TensorFlow's
AMP, apex O1): fp16 tensor-core compute, but fp32 weights and fp32 gradients on
the wire. How each one computes is `sim.compute`'s, what it keeps `sim.memory`'s.
"""

from __future__ import annotations

from sim.errors import SimInputError

__all__ = ["BYTES_PER_PARAM", "PRECISIONS", "bytes_per_param"]

#: Gradient bytes per parameter of each precision. ``amp`` all-reduces fp32 gradients: under
#: ``torch.autocast`` the parameters stay fp32 and so do their ``.grad`` (PyTorch's
#: ``GradScaler._unscale_grads_`` refuses fp16 gradients: "Attempting to unscale FP16 gradients";
#: DDP's ``fp16_compress_hook`` exists to halve them, `sim.compression` ``fp16``).
BYTES_PER_PARAM = {"fp32": 4, "tf32": 4, "fp16": 2, "amp": 4}
#: What each precision means, for help texts (the keys of `BYTES_PER_PARAM`).
PRECISIONS = {
    "fp32": "fp32 compute, fp32 gradients",
    "tf32": "fp32 tensors, convolutions and matrix products on TF32 tensor cores (Ampere and later; fp32 elsewhere)",
    "fp16": "mixed precision with an fp16 model: fp16 compute and gradients, fp32 master weights (apex O2)",
    "amp": "automatic mixed precision (autocast): fp16 compute, fp32 weights and gradients",
}


def bytes_per_param(precision: str) -> int:
    """Gradient bytes per parameter for ``precision`` (a key of `BYTES_PER_PARAM`)."""
    if not isinstance(precision, str) or precision not in BYTES_PER_PARAM:
        raise SimInputError(f"unknown precision {precision!r}; valid: {', '.join(BYTES_PER_PARAM)}")
    return BYTES_PER_PARAM[precision]
