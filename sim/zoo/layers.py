"""Row builders of the model zoo: one layer (or fused group of layers) per row.

See `sim.zoo` for the table's columns and the FLOP conventions. Besides the
public one-row helpers, `to_table` turns rows into a table and `Convs` threads
spatial sizes through a CNN under construction; both are shared by the
architecture builders in `sim.zoo.cnn`, `sim.zoo.inception` and
`sim.zoo.transformers`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from sim.errors import SimInputError

__all__ = [
    "COLUMNS",
    "ELEMENTWISE_FLOPS_PER_ELEM",
    "LAYER_TYPES",
    "MAX_IMAGE_SIZE",
    "NORM_FLOPS_PER_ELEM",
    "SOFTMAX_FLOPS_PER_ELEM",
    "Convs",
    "IntPair",
    "Row",
    "adaptive_avg_pool",
    "attention",
    "batchnorm",
    "conv2d",
    "conv_bn",
    "conv_hw",
    "conv_out_size",
    "elementwise",
    "embedding",
    "layernorm",
    "linear",
    "merge",
    "mlp",
    "pool2d",
    "tensors_text",
    "to_table",
]

#: Side of a CNN zoo model's input image, pixels: 64 Ki (a 4 Gpixel image; beyond it a VGG classifier's
#: parameter count overflows int64).
MAX_IMAGE_SIZE = 65_536

COLUMNS = ("name", "type", "params", "fwd_flops", "out_elems", "tensors")

LAYER_TYPES = frozenset(
    {
        "conv",  # convolution (with its bias and activation, if any)
        "conv_bn",  # convolution + batch-norm (+ activation / residual add)
        "bn",  # batch-norm (+ activation) on its own
        "linear",  # fully connected layer (+ activation)
        "pool",  # max / average / adaptive pooling, no parameters
        "embedding",  # table lookup (+ sum into the running embedding)
        "layernorm",  # layer-norm on its own
        "attention",  # multi-head self-attention sub-block
        "mlp",  # transformer feed-forward sub-block
        "elementwise",  # parameter-free pointwise op (usually merged away)
    }
)

ELEMENTWISE_FLOPS_PER_ELEM = 1
NORM_FLOPS_PER_ELEM = 5
SOFTMAX_FLOPS_PER_ELEM = 5

Row = dict[str, object]
IntPair = int | tuple[int, int]


# --------------------------------------------------------------------------
# Shape arithmetic
# --------------------------------------------------------------------------


def _pair(value: IntPair) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else (int(value[0]), int(value[1]))


def conv_out_size(
    size: int, k: int, stride: int = 1, padding: int = 0, ceil_mode: bool = False
) -> int:
    """Output length of a convolution or pooling window along one axis.

    ``floor((size + 2*padding - k) / stride) + 1`` (``ceil`` with `ceil_mode`,
    where, as in PyTorch, the last window must start inside the input or the
    left padding).

    Raises
    ------
    ValueError
        If the output would be empty (the input is too small for the window).
    """
    span = size + 2 * padding - k
    if span < 0:
        raise SimInputError(f"input size {size} is too small for window {k} with padding {padding}")
    out = -(-span // stride) + 1 if ceil_mode else span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + padding:
        out -= 1
    return out


def _row(name: str, type_: str, params: int, fwd_flops: int, out_elems: int, tensors=None) -> Row:
    """One row; ``tensors`` lists the parameter tensors' sizes in the module's
    ``parameters()`` order (forward order; default: one tensor of ``params``)."""
    tensors = tuple(int(t) for t in (tensors if tensors is not None else ((params,) if params else ())))
    if sum(tensors) != int(params):
        raise SimInputError(f"row {name!r}: tensors {tensors} do not sum to its {params} parameters")
    return {
        "name": name,
        "type": type_,
        "params": int(params),
        "fwd_flops": int(fwd_flops),
        "out_elems": int(out_elems),
        "tensors": tensors,
    }


# --------------------------------------------------------------------------
# One-row helpers
# --------------------------------------------------------------------------


def conv2d(
    name: str,
    c_in: int,
    c_out: int,
    k: IntPair,
    stride: IntPair,
    padding: IntPair,
    h_in: int,
    w_in: int,
    bias: bool = False,
    groups: int = 1,
) -> Row:
    """2-D convolution: ``params = c_out*(c_in/groups)*kh*kw (+ c_out)``,
    ``fwd_flops = 2 * params_w * h_out * w_out``.

    Parameters
    ----------
    k, stride, padding : int or (int, int)
        Kernel size, stride and zero padding, as ``(height, width)`` if a pair.
    h_in, w_in : int
        Spatial size of the input.

    Examples
    --------
    >>> conv2d("c", 64, 64, 3, 1, 1, 56, 56)["params"]
    36864
    """
    if c_in % groups or c_out % groups:
        raise SimInputError(f"groups={groups} must divide c_in={c_in} and c_out={c_out}")
    kh, kw = _pair(k)
    sh, sw = _pair(stride)
    ph, pw = _pair(padding)
    h_out = conv_out_size(h_in, kh, sh, ph)
    w_out = conv_out_size(w_in, kw, sw, pw)
    weights = c_out * (c_in // groups) * kh * kw
    macs = weights * h_out * w_out
    params = weights + (c_out if bias else 0)
    tensors = (weights, c_out) if bias else (weights,)
    return _row(name, "conv", params, 2 * macs, c_out * h_out * w_out, tensors)


def batchnorm(name: str, channels: int, h: int, w: int) -> Row:
    """Batch-norm over a ``channels x h x w`` map: ``2*channels`` parameters
    (scale and shift), `NORM_FLOPS_PER_ELEM` FLOPs per element."""
    elems = channels * h * w
    return _row(name, "bn", 2 * channels, NORM_FLOPS_PER_ELEM * elems, elems, (channels, channels))


def layernorm(name: str, dim: int, tokens: int) -> Row:
    """Layer-norm over ``dim`` features of ``tokens`` tokens: ``2*dim``
    parameters, `NORM_FLOPS_PER_ELEM` FLOPs per element."""
    elems = dim * tokens
    return _row(name, "layernorm", 2 * dim, NORM_FLOPS_PER_ELEM * elems, elems, (dim, dim))


def elementwise(name: str, elems: int, ops_per_elem: int = 1) -> Row:
    """Pointwise ops (activation, residual add): ``ops_per_elem`` FLOPs per
    element, no parameters.  Usually folded into a neighbour with `merge`."""
    return _row(name, "elementwise", 0, ops_per_elem * ELEMENTWISE_FLOPS_PER_ELEM * elems, elems)


def linear(name: str, d_in: int, d_out: int, tokens: int = 1, bias: bool = True) -> Row:
    """Fully connected layer applied to ``tokens`` vectors:
    ``params = d_in*d_out (+ d_out)``, ``fwd_flops = 2*tokens*d_in*d_out``."""
    params = d_in * d_out + (d_out if bias else 0)
    tensors = (d_in * d_out, d_out) if bias else (d_in * d_out,)
    return _row(name, "linear", params, 2 * tokens * d_in * d_out, tokens * d_out, tensors)


def embedding(name: str, num_embeddings: int, dim: int, tokens: int) -> Row:
    """Embedding table lookup: ``num_embeddings*dim`` parameters (one tensor), 0 FLOPs."""
    return _row(name, "embedding", num_embeddings * dim, 0, tokens * dim)


def attention(name: str, d_model: int, n_heads: int, seq_len: int, bias: bool = True, fused_qkv: bool = False) -> Row:
    """Multi-head self-attention over ``seq_len`` tokens.

    ``params = 4*d*d (+ 4*d)`` for the Q, K, V and output projections, and
    ``fwd_flops = 8*s*d*d + 4*s*s*d + (1 + 5)*n_heads*s*s``: the four
    projections, the ``QK^T`` scores and the attention-weighted sum of V
    (2 FLOPs per MAC each), then score scaling (1 FLOP) and softmax
    (`SOFTMAX_FLOPS_PER_ELEM`) on each of the ``n_heads*s*s`` scores.  Causal
    masking is not used to skip work (the reference implementations compute
    the full score matrix).

    Tensors: query, key, value and output weights (each followed by its bias),
    as in BERT; with ``fused_qkv`` one ``3d x d`` weight and its bias for Q, K
    and V together, then the output projection, as GPT-2's ``c_attn``/``c_proj``.

    References
    ----------
    Vaswani et al., "Attention Is All You Need", NeurIPS 2017, Sec. 3.2.
    """
    if d_model % n_heads:
        raise SimInputError(f"n_heads={n_heads} must divide d_model={d_model}")
    s, d = seq_len, d_model
    params = 4 * d * d + (4 * d if bias else 0)
    one = (d * d, d) if bias else (d * d,)
    tensors = (3 * d * d, 3 * d, d * d, d) if fused_qkv and bias else (3 * d * d, d * d) if fused_qkv else one * 4
    projections = 2 * 4 * s * d * d
    scores_and_context = 2 * 2 * s * s * d
    softmax = (ELEMENTWISE_FLOPS_PER_ELEM + SOFTMAX_FLOPS_PER_ELEM) * n_heads * s * s
    return _row(name, "attention", params, projections + scores_and_context + softmax, s * d, tensors)


def mlp(name: str, d_model: int, d_ff: int, tokens: int, bias: bool = True) -> Row:
    """Transformer feed-forward block ``d_model -> d_ff -> d_model`` with one
    activation (GELU) on the hidden layer."""
    rows = [
        linear(f"{name}.fc1", d_model, d_ff, tokens, bias),
        elementwise(f"{name}.act", d_ff * tokens),
        linear(f"{name}.fc2", d_ff, d_model, tokens, bias),
    ]
    return merge(name, "mlp", rows)


def pool2d(
    name: str,
    channels: int,
    k: int,
    stride: int,
    padding: int,
    h_in: int,
    w_in: int,
    ceil_mode: bool = False,
) -> Row:
    """Max or average pooling: no parameters, ``k*k`` FLOPs per output element."""
    h_out = conv_out_size(h_in, k, stride, padding, ceil_mode)
    w_out = conv_out_size(w_in, k, stride, padding, ceil_mode)
    elems = channels * h_out * w_out
    return _row(name, "pool", 0, k * k * elems, elems)


def adaptive_avg_pool(
    name: str, channels: int, h_in: int, w_in: int, h_out: int = 1, w_out: int = 1
) -> Row:
    """Adaptive average pooling to ``h_out x w_out``: 1 FLOP per input element."""
    return _row(name, "pool", 0, channels * h_in * w_in, channels * h_out * w_out)


def merge(name: str, type_: str, rows: Sequence[Row]) -> Row:
    """Fold several rows into one: parameters and FLOPs add up, the output is
    that of the last row."""
    if type_ not in LAYER_TYPES:
        raise SimInputError(f"type {type_!r} is not one of {sorted(LAYER_TYPES)}")
    return _row(
        name,
        type_,
        sum(int(r["params"]) for r in rows),
        sum(int(r["fwd_flops"]) for r in rows),
        int(rows[-1]["out_elems"]),
        tuple(t for r in rows for t in r.get("tensors", ())),
    )


def conv_bn(name: str, c_in: int, c_out: int, k: IntPair, stride: IntPair, padding: IntPair, h_in: int, w_in: int,
            relu: bool = True, extra_elementwise: int = 0) -> Row:
    """Bias-free convolution, batch-norm and (optionally) ReLU as one row.

    ``extra_elementwise`` adds that many further elementwise ops per output
    element (ResNet uses 1 for the residual add folded into ``conv3``).
    """
    conv = conv2d(name, c_in, c_out, k, stride, padding, h_in, w_in)
    h_out, w_out = conv_hw(h_in, w_in, k, stride, padding)
    ops = int(relu) + extra_elementwise
    rows = [conv, batchnorm(name, c_out, h_out, w_out), elementwise(name, conv["out_elems"], ops)]
    return merge(name, "conv_bn", rows)


def conv_hw(
    h_in: int, w_in: int, k: IntPair, stride: IntPair, padding: IntPair
) -> tuple[int, int]:
    """Output ``(height, width)`` of a convolution window over an ``h_in x w_in`` input."""
    (kh, kw), (sh, sw), (ph, pw) = _pair(k), _pair(stride), _pair(padding)
    return conv_out_size(h_in, kh, sh, ph), conv_out_size(w_in, kw, sw, pw)


# --------------------------------------------------------------------------
# Building a table
# --------------------------------------------------------------------------


def tensors_text(tensors) -> str:
    """A row's tensors (forward order) as the ``tensors`` column holds them: sizes in
    the order their gradients become ready in backward (reversed), joined by ``;``."""
    return ";".join(str(int(t)) for t in reversed(tuple(tensors)))


def to_table(rows: list[Row]) -> pd.DataFrame:
    """The rows as a table with columns `COLUMNS` and 64-bit integer counts; the
    ``tensors`` column in backward order (`tensors_text`)."""
    rows = [{**r, "tensors": tensors_text(r.get("tensors", ()))} for r in rows]
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    return table.astype({"params": "int64", "fwd_flops": "int64", "out_elems": "int64"})


class Convs:
    """Row list for a CNN under construction: appends a row, returns its
    output spatial size so the builder can thread shapes along."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def conv_bn(self, name, c_in, c_out, k, hw, stride=1, padding=0, **kw) -> tuple[int, int]:
        self.rows.append(conv_bn(name, c_in, c_out, k, stride, padding, *hw, **kw))
        return conv_hw(*hw, k, stride, padding)

    def conv(self, name, c_in, c_out, k, hw, stride=1, padding=0, relu=True) -> tuple[int, int]:
        """Convolution with bias (and ReLU), as in AlexNet and VGG."""
        row = conv2d(name, c_in, c_out, k, stride, padding, *hw, bias=True)
        if relu:
            row = merge(name, "conv", [row, elementwise(name, row["out_elems"])])
        self.rows.append(row)
        return conv_hw(*hw, k, stride, padding)

    def pool(self, name, channels, k, hw, stride, padding=0, ceil_mode=False) -> tuple[int, int]:
        self.rows.append(pool2d(name, channels, k, stride, padding, *hw, ceil_mode))
        return (
            conv_out_size(hw[0], k, stride, padding, ceil_mode),
            conv_out_size(hw[1], k, stride, padding, ceil_mode),
        )

    def head(self, channels: int, hw: tuple[int, int], classes: int, pool="avgpool", fc="fc"):
        """Global average pool and the classifier."""
        self.rows.append(adaptive_avg_pool(pool, channels, *hw))
        self.rows.append(linear(fc, channels, classes))
