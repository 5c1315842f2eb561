"""Model zoo: per-layer tables derived from layer shapes.

Every table here is computed from the layer shapes of a named reference
implementation; nothing is typed in by hand.  Small helpers (`conv2d`,
`batchnorm`, `linear`, `attention`, ...) return one row each, and one builder
per architecture strings them together from input to output.

A table has the columns ``name, type, params, fwd_flops, out_elems``, all per
sample (one image or one sequence):

``name``
    Unique within the model; where possible the module path of the reference
    implementation (``layer1.0.conv2``, ``Mixed_6e.branch7x7_1``).
``type``
    One of `LAYER_TYPES`, so that a compute-time model can give each kind of
    layer its own efficiency.
``params``
    Exact count of trainable parameters (weights and biases; batch-norm running
    statistics are buffers and are not counted).
``fwd_flops``
    Forward floating-point operations for one sample, counted as below.
``out_elems``
    Elements of the row's output activation for one sample.

FLOP conventions
----------------
* Convolution, linear layer and attention matmul: **2 FLOPs per
  multiply-accumulate** (FLOPs = 2 x MACs).  Bias additions are not counted.
* Elementwise operations (ReLU, GELU, tanh, residual add, embedding sum,
  attention-score scaling): 1 FLOP per element
  (`ELEMENTWISE_FLOPS_PER_ELEM`).
* Batch-norm and layer-norm: 5 FLOPs per element, one for each of the mean,
  variance, normalise, scale and shift passes (`NORM_FLOPS_PER_ELEM`).
* Softmax: 5 FLOPs per element, one for each of max, subtract, exp, sum and
  divide (`SOFTMAX_FLOPS_PER_ELEM`).
* Pooling: 1 FLOP per window element per output element (a comparison for max
  pooling, an addition for average pooling); adaptive average pooling costs 1
  FLOP per input element.
* Embedding lookup, dropout, flatten and concatenation: 0 FLOPs.

Granularity
-----------
* A convolution followed by its batch-norm (and ReLU) is one ``conv_bn`` row,
  as in torchvision's ``BasicConv2d``.  DenseNet's pre-activation layers
  (BN-ReLU-conv) are split into ``bn`` and ``conv`` rows instead, because
  there the norm belongs to the following convolution's input.
* An activation function or residual addition is folded into the row that
  produces its input; ResNet's residual add and final ReLU sit in the
  ``conv3`` row of each bottleneck.
* Pooling layers are rows of their own (0 parameters, but they cost time).
* A transformer block is two rows: ``attention`` (Q, K, V and output
  projections, scores, softmax, context, residual add and its layer-norm) and
  ``mlp`` (both dense layers, activation, residual add and its layer-norm).

Examples
--------
>>> row = conv2d("c", 64, 64, 3, 1, 1, 56, 56)
>>> row["params"], row["fwd_flops"] // 2
(36864, 115605504)
>>> int(build_table("resnet50")["params"].sum())
25557032
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import pandas as pd

from sim.errors import SimInputError

__all__ = [
    "ARCHITECTURES",
    "COLUMNS",
    "ELEMENTWISE_FLOPS_PER_ELEM",
    "LAYER_TYPES",
    "NORM_FLOPS_PER_ELEM",
    "SOFTMAX_FLOPS_PER_ELEM",
    "Architecture",
    "adaptive_avg_pool",
    "alexnet",
    "attention",
    "batchnorm",
    "bert",
    "build_table",
    "conv2d",
    "conv_bn",
    "conv_out_size",
    "densenet",
    "elementwise",
    "embedding",
    "googlenet",
    "gpt2",
    "inception_v3",
    "inception_v4",
    "layernorm",
    "linear",
    "merge",
    "mlp",
    "pool2d",
    "resnet",
    "vgg16",
]

COLUMNS = ("name", "type", "params", "fwd_flops", "out_elems")

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


def _row(name: str, type_: str, params: int, fwd_flops: int, out_elems: int) -> Row:
    return {
        "name": name,
        "type": type_,
        "params": int(params),
        "fwd_flops": int(fwd_flops),
        "out_elems": int(out_elems),
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
    return _row(name, "conv", params, 2 * macs, c_out * h_out * w_out)


def batchnorm(name: str, channels: int, h: int, w: int) -> Row:
    """Batch-norm over a ``channels x h x w`` map: ``2*channels`` parameters
    (scale and shift), `NORM_FLOPS_PER_ELEM` FLOPs per element."""
    elems = channels * h * w
    return _row(name, "bn", 2 * channels, NORM_FLOPS_PER_ELEM * elems, elems)


def layernorm(name: str, dim: int, tokens: int) -> Row:
    """Layer-norm over ``dim`` features of ``tokens`` tokens: ``2*dim``
    parameters, `NORM_FLOPS_PER_ELEM` FLOPs per element."""
    elems = dim * tokens
    return _row(name, "layernorm", 2 * dim, NORM_FLOPS_PER_ELEM * elems, elems)


def elementwise(name: str, elems: int, ops_per_elem: int = 1) -> Row:
    """Pointwise ops (activation, residual add): ``ops_per_elem`` FLOPs per
    element, no parameters.  Usually folded into a neighbour with `merge`."""
    return _row(name, "elementwise", 0, ops_per_elem * ELEMENTWISE_FLOPS_PER_ELEM * elems, elems)


def linear(name: str, d_in: int, d_out: int, tokens: int = 1, bias: bool = True) -> Row:
    """Fully connected layer applied to ``tokens`` vectors:
    ``params = d_in*d_out (+ d_out)``, ``fwd_flops = 2*tokens*d_in*d_out``."""
    params = d_in * d_out + (d_out if bias else 0)
    return _row(name, "linear", params, 2 * tokens * d_in * d_out, tokens * d_out)


def embedding(name: str, num_embeddings: int, dim: int, tokens: int) -> Row:
    """Embedding table lookup: ``num_embeddings*dim`` parameters, 0 FLOPs."""
    return _row(name, "embedding", num_embeddings * dim, 0, tokens * dim)


def attention(name: str, d_model: int, n_heads: int, seq_len: int, bias: bool = True) -> Row:
    """Multi-head self-attention over ``seq_len`` tokens.

    ``params = 4*d*d (+ 4*d)`` for the Q, K, V and output projections, and
    ``fwd_flops = 8*s*d*d + 4*s*s*d + (1 + 5)*n_heads*s*s``: the four
    projections, the ``QK^T`` scores and the attention-weighted sum of V
    (2 FLOPs per MAC each), then score scaling (1 FLOP) and softmax
    (`SOFTMAX_FLOPS_PER_ELEM`) on each of the ``n_heads*s*s`` scores.  Causal
    masking is not used to skip work (the reference implementations compute
    the full score matrix).

    References
    ----------
    Vaswani et al., "Attention Is All You Need", NeurIPS 2017, Sec. 3.2.
    """
    if d_model % n_heads:
        raise SimInputError(f"n_heads={n_heads} must divide d_model={d_model}")
    s, d = seq_len, d_model
    params = 4 * d * d + (4 * d if bias else 0)
    projections = 2 * 4 * s * d * d
    scores_and_context = 2 * 2 * s * s * d
    softmax = (ELEMENTWISE_FLOPS_PER_ELEM + SOFTMAX_FLOPS_PER_ELEM) * n_heads * s * s
    return _row(name, "attention", params, projections + scores_and_context + softmax, s * d)


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
    )


def conv_bn(
    name: str,
    c_in: int,
    c_out: int,
    k: IntPair,
    stride: IntPair,
    padding: IntPair,
    h_in: int,
    w_in: int,
    relu: bool = True,
    extra_elementwise: int = 0,
) -> Row:
    """Bias-free convolution, batch-norm and (optionally) ReLU as one row.

    ``extra_elementwise`` adds that many further elementwise ops per output
    element (ResNet uses 1 for the residual add folded into ``conv3``).
    """
    conv = conv2d(name, c_in, c_out, k, stride, padding, h_in, w_in)
    h_out, w_out = _conv_hw(h_in, w_in, k, stride, padding)
    ops = int(relu) + extra_elementwise
    rows = [conv, batchnorm(name, c_out, h_out, w_out), elementwise(name, conv["out_elems"], ops)]
    return merge(name, "conv_bn", rows)


def _conv_hw(
    h_in: int, w_in: int, k: IntPair, stride: IntPair, padding: IntPair
) -> tuple[int, int]:
    (kh, kw), (sh, sw), (ph, pw) = _pair(k), _pair(stride), _pair(padding)
    return conv_out_size(h_in, kh, sh, ph), conv_out_size(w_in, kw, sw, pw)


# --------------------------------------------------------------------------
# Builders
# --------------------------------------------------------------------------


def _table(rows: list[Row]) -> pd.DataFrame:
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    return table.astype({"params": "int64", "fwd_flops": "int64", "out_elems": "int64"})


def _check_int(field_name: str, value: object, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SimInputError(f"{field_name} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise SimInputError(f"{field_name} must be {bound}, got {value}")
    return value


class _Convs:
    """Row list for a CNN under construction: appends a row, returns its
    output spatial size so the builder can thread shapes along."""

    def __init__(self) -> None:
        self.rows: list[Row] = []

    def conv_bn(self, name, c_in, c_out, k, hw, stride=1, padding=0, **kw) -> tuple[int, int]:
        self.rows.append(conv_bn(name, c_in, c_out, k, stride, padding, *hw, **kw))
        return _conv_hw(*hw, k, stride, padding)

    def conv(self, name, c_in, c_out, k, hw, stride=1, padding=0, relu=True) -> tuple[int, int]:
        """Convolution with bias (and ReLU), as in AlexNet and VGG."""
        row = conv2d(name, c_in, c_out, k, stride, padding, *hw, bias=True)
        if relu:
            row = merge(name, "conv", [row, elementwise(name, row["out_elems"])])
        self.rows.append(row)
        return _conv_hw(*hw, k, stride, padding)

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


def alexnet(image_size: int = 224, num_classes: int = 1000) -> pd.DataFrame:
    """AlexNet as in ``torchvision.models.alexnet`` (one-GPU variant, 61.1 M params).

    References
    ----------
    Krizhevsky, "One weird trick for parallelizing convolutional neural
    networks", arXiv:1404.5997 (2014).
    """
    _check_int("image_size", image_size, 1)
    net = _Convs()
    hw = (image_size, image_size)
    hw = net.conv("features.0", 3, 64, 11, hw, stride=4, padding=2)
    hw = net.pool("features.2", 64, 3, hw, stride=2)
    hw = net.conv("features.3", 64, 192, 5, hw, padding=2)
    hw = net.pool("features.5", 192, 3, hw, stride=2)
    hw = net.conv("features.6", 192, 384, 3, hw, padding=1)
    hw = net.conv("features.8", 384, 256, 3, hw, padding=1)
    hw = net.conv("features.10", 256, 256, 3, hw, padding=1)
    hw = net.pool("features.12", 256, 3, hw, stride=2)
    net.rows.append(adaptive_avg_pool("avgpool", 256, *hw, 6, 6))
    _relu_classifier(net.rows, 256 * 6 * 6, [4096, 4096], num_classes, first_index=1)
    return _table(net.rows)


def _relu_classifier(rows, d_in, hidden, num_classes, first_index) -> None:
    """``Linear-ReLU-Dropout`` stack as in torchvision's AlexNet/VGG classifier."""
    index = first_index
    for width in hidden:
        layer = linear(f"classifier.{index}", d_in, width)
        rows.append(merge(layer["name"], "linear", [layer, elementwise("relu", width)]))
        d_in, index = width, index + 3
    rows.append(linear(f"classifier.{index}", d_in, num_classes))


def vgg16(image_size: int = 224, num_classes: int = 1000) -> pd.DataFrame:
    """VGG-16 (configuration D, no batch-norm) as in ``torchvision.models.vgg16``.

    References
    ----------
    Simonyan and Zisserman, "Very Deep Convolutional Networks for Large-Scale
    Image Recognition", ICLR 2015, Table 1 (column D).
    """
    _check_int("image_size", image_size, 1)
    config = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M"]
    config += [512, 512, 512, "M"]
    net = _Convs()
    hw, c_in, index = (image_size, image_size), 3, 0
    for item in config:
        if item == "M":
            hw = net.pool(f"features.{index}", c_in, 2, hw, stride=2)
            index += 1
        else:
            hw = net.conv(f"features.{index}", c_in, item, 3, hw, padding=1)
            c_in, index = item, index + 2
    net.rows.append(adaptive_avg_pool("avgpool", 512, *hw, 7, 7))
    _relu_classifier(net.rows, 512 * 7 * 7, [4096, 4096], num_classes, first_index=0)
    return _table(net.rows)


def googlenet(image_size: int = 224, num_classes: int = 1000) -> pd.DataFrame:
    """GoogLeNet (Inception v1) as in ``torchvision.models.googlenet`` with
    ``aux_logits=False`` (the auxiliary heads are left out).

    torchvision's branch3 uses a 3x3 convolution where the paper has 5x5
    (pytorch/vision#906); this table follows torchvision.

    References
    ----------
    Szegedy et al., "Going Deeper with Convolutions", CVPR 2015, Table 1.
    """
    _check_int("image_size", image_size, 1)
    net = _Convs()
    hw = net.conv_bn("conv1", 3, 64, 7, (image_size, image_size), stride=2, padding=3)
    hw = net.pool("maxpool1", 64, 3, hw, stride=2, ceil_mode=True)
    hw = net.conv_bn("conv2", 64, 64, 1, hw)
    hw = net.conv_bn("conv3", 64, 192, 3, hw, padding=1)
    hw = net.pool("maxpool2", 192, 3, hw, stride=2, ceil_mode=True)

    def inception(name, c_in, ch1x1, ch3x3red, ch3x3, ch5x5red, ch5x5, pool_proj) -> int:
        net.conv_bn(f"{name}.branch1", c_in, ch1x1, 1, hw)
        net.conv_bn(f"{name}.branch2.0", c_in, ch3x3red, 1, hw)
        net.conv_bn(f"{name}.branch2.1", ch3x3red, ch3x3, 3, hw, padding=1)
        net.conv_bn(f"{name}.branch3.0", c_in, ch5x5red, 1, hw)
        net.conv_bn(f"{name}.branch3.1", ch5x5red, ch5x5, 3, hw, padding=1)
        net.pool(f"{name}.branch4.0", c_in, 3, hw, stride=1, padding=1, ceil_mode=True)
        net.conv_bn(f"{name}.branch4.1", c_in, pool_proj, 1, hw)
        return ch1x1 + ch3x3 + ch5x5 + pool_proj

    c = inception("inception3a", 192, 64, 96, 128, 16, 32, 32)
    c = inception("inception3b", c, 128, 128, 192, 32, 96, 64)
    hw = net.pool("maxpool3", c, 3, hw, stride=2, ceil_mode=True)
    c = inception("inception4a", c, 192, 96, 208, 16, 48, 64)
    c = inception("inception4b", c, 160, 112, 224, 24, 64, 64)
    c = inception("inception4c", c, 128, 128, 256, 24, 64, 64)
    c = inception("inception4d", c, 112, 144, 288, 32, 64, 64)
    c = inception("inception4e", c, 256, 160, 320, 32, 128, 128)
    hw = net.pool("maxpool4", c, 2, hw, stride=2, ceil_mode=True)
    c = inception("inception5a", c, 256, 160, 320, 32, 128, 128)
    c = inception("inception5b", c, 384, 192, 384, 48, 128, 128)
    net.head(c, hw, num_classes)
    return _table(net.rows)


def inception_v3(
    image_size: int = 299, num_classes: int = 1000, aux_logits: bool = True
) -> pd.DataFrame:
    """Inception v3 as in ``torchvision.models.inception_v3``.

    With ``aux_logits=True`` (the default, as torchvision builds the model for
    its ``IMAGENET1K_V1`` weights) the auxiliary classifier ``AuxLogits`` is
    included after ``Mixed_6e``, where it branches off; it runs in training
    mode only.  Its 3,326,696 parameters are part of torchvision's published
    ``num_params`` of 27,161,264; without it the total is 23,834,568.

    References
    ----------
    Szegedy et al., "Rethinking the Inception Architecture for Computer
    Vision", CVPR 2016, Table 1.
    """
    _check_int("image_size", image_size, 1)
    if not isinstance(aux_logits, bool):
        raise SimInputError(f"aux_logits must be True or False, got {aux_logits!r}")
    net = _Convs()
    hw = net.conv_bn("Conv2d_1a_3x3", 3, 32, 3, (image_size, image_size), stride=2)
    hw = net.conv_bn("Conv2d_2a_3x3", 32, 32, 3, hw)
    hw = net.conv_bn("Conv2d_2b_3x3", 32, 64, 3, hw, padding=1)
    hw = net.pool("maxpool1", 64, 3, hw, stride=2)
    hw = net.conv_bn("Conv2d_3b_1x1", 64, 80, 1, hw)
    hw = net.conv_bn("Conv2d_4a_3x3", 80, 192, 3, hw)
    hw = net.pool("maxpool2", 192, 3, hw, stride=2)

    def block_a(name, c_in, pool_features) -> int:
        net.conv_bn(f"{name}.branch1x1", c_in, 64, 1, hw)
        net.conv_bn(f"{name}.branch5x5_1", c_in, 48, 1, hw)
        net.conv_bn(f"{name}.branch5x5_2", 48, 64, 5, hw, padding=2)
        net.conv_bn(f"{name}.branch3x3dbl_1", c_in, 64, 1, hw)
        net.conv_bn(f"{name}.branch3x3dbl_2", 64, 96, 3, hw, padding=1)
        net.conv_bn(f"{name}.branch3x3dbl_3", 96, 96, 3, hw, padding=1)
        net.pool(f"{name}.avg_pool", c_in, 3, hw, stride=1, padding=1)
        net.conv_bn(f"{name}.branch_pool", c_in, pool_features, 1, hw)
        return 64 + 64 + 96 + pool_features

    def block_b(name, c_in) -> tuple[int, tuple[int, int]]:
        out = net.conv_bn(f"{name}.branch3x3", c_in, 384, 3, hw, stride=2)
        net.conv_bn(f"{name}.branch3x3dbl_1", c_in, 64, 1, hw)
        net.conv_bn(f"{name}.branch3x3dbl_2", 64, 96, 3, hw, padding=1)
        net.conv_bn(f"{name}.branch3x3dbl_3", 96, 96, 3, hw, stride=2)
        net.pool(f"{name}.max_pool", c_in, 3, hw, stride=2)
        return 384 + 96 + c_in, out

    def block_c(name, c_in, c7) -> int:
        net.conv_bn(f"{name}.branch1x1", c_in, 192, 1, hw)
        net.conv_bn(f"{name}.branch7x7_1", c_in, c7, 1, hw)
        net.conv_bn(f"{name}.branch7x7_2", c7, c7, (1, 7), hw, padding=(0, 3))
        net.conv_bn(f"{name}.branch7x7_3", c7, 192, (7, 1), hw, padding=(3, 0))
        net.conv_bn(f"{name}.branch7x7dbl_1", c_in, c7, 1, hw)
        net.conv_bn(f"{name}.branch7x7dbl_2", c7, c7, (7, 1), hw, padding=(3, 0))
        net.conv_bn(f"{name}.branch7x7dbl_3", c7, c7, (1, 7), hw, padding=(0, 3))
        net.conv_bn(f"{name}.branch7x7dbl_4", c7, c7, (7, 1), hw, padding=(3, 0))
        net.conv_bn(f"{name}.branch7x7dbl_5", c7, 192, (1, 7), hw, padding=(0, 3))
        net.pool(f"{name}.avg_pool", c_in, 3, hw, stride=1, padding=1)
        net.conv_bn(f"{name}.branch_pool", c_in, 192, 1, hw)
        return 4 * 192

    def block_d(name, c_in) -> tuple[int, tuple[int, int]]:
        net.conv_bn(f"{name}.branch3x3_1", c_in, 192, 1, hw)
        out = net.conv_bn(f"{name}.branch3x3_2", 192, 320, 3, hw, stride=2)
        net.conv_bn(f"{name}.branch7x7x3_1", c_in, 192, 1, hw)
        net.conv_bn(f"{name}.branch7x7x3_2", 192, 192, (1, 7), hw, padding=(0, 3))
        net.conv_bn(f"{name}.branch7x7x3_3", 192, 192, (7, 1), hw, padding=(3, 0))
        net.conv_bn(f"{name}.branch7x7x3_4", 192, 192, 3, hw, stride=2)
        net.pool(f"{name}.max_pool", c_in, 3, hw, stride=2)
        return 320 + 192 + c_in, out

    def block_e(name, c_in) -> int:
        net.conv_bn(f"{name}.branch1x1", c_in, 320, 1, hw)
        net.conv_bn(f"{name}.branch3x3_1", c_in, 384, 1, hw)
        net.conv_bn(f"{name}.branch3x3_2a", 384, 384, (1, 3), hw, padding=(0, 1))
        net.conv_bn(f"{name}.branch3x3_2b", 384, 384, (3, 1), hw, padding=(1, 0))
        net.conv_bn(f"{name}.branch3x3dbl_1", c_in, 448, 1, hw)
        net.conv_bn(f"{name}.branch3x3dbl_2", 448, 384, 3, hw, padding=1)
        net.conv_bn(f"{name}.branch3x3dbl_3a", 384, 384, (1, 3), hw, padding=(0, 1))
        net.conv_bn(f"{name}.branch3x3dbl_3b", 384, 384, (3, 1), hw, padding=(1, 0))
        net.pool(f"{name}.avg_pool", c_in, 3, hw, stride=1, padding=1)
        net.conv_bn(f"{name}.branch_pool", c_in, 192, 1, hw)
        return 320 + 2 * 384 + 2 * 384 + 192

    c = block_a("Mixed_5b", 192, 32)
    c = block_a("Mixed_5c", c, 64)
    c = block_a("Mixed_5d", c, 64)
    c, hw = block_b("Mixed_6a", c)
    c = block_c("Mixed_6b", c, 128)
    c = block_c("Mixed_6c", c, 160)
    c = block_c("Mixed_6d", c, 160)
    c = block_c("Mixed_6e", c, 192)
    if aux_logits:
        aux_hw = net.pool("AuxLogits.avg_pool", c, 5, hw, stride=3)
        aux_hw = net.conv_bn("AuxLogits.conv0", c, 128, 1, aux_hw)
        aux_hw = net.conv_bn("AuxLogits.conv1", 128, 768, 5, aux_hw)
        net.head(768, aux_hw, num_classes, pool="AuxLogits.adaptive_avg_pool", fc="AuxLogits.fc")
    c, hw = block_d("Mixed_7a", c)
    c = block_e("Mixed_7b", c)
    c = block_e("Mixed_7c", c)
    net.head(c, hw, num_classes)
    return _table(net.rows)


def inception_v4(image_size: int = 299, num_classes: int = 1000) -> pd.DataFrame:
    """Inception v4 as in timm's ``inception_v4`` (``timm/models/inception_v4.py``,
    ported from Cadene's ``pretrainedmodels``), with a 1000-class head.

    Row names follow timm's module paths (``features.6.branch1.0``).

    References
    ----------
    Szegedy, Ioffe, Vanhoucke and Alemi, "Inception-v4, Inception-ResNet and
    the Impact of Residual Connections on Learning", AAAI 2017
    (arXiv:1602.07261), Figures 3-9.
    """
    _check_int("image_size", image_size, 1)
    net = _Convs()
    hw = net.conv_bn("features.0", 3, 32, 3, (image_size, image_size), stride=2)
    hw = net.conv_bn("features.1", 32, 32, 3, hw)
    hw = net.conv_bn("features.2", 32, 64, 3, hw, padding=1)
    # Mixed3a: max-pool and a strided conv side by side.
    net.pool("features.3.maxpool", 64, 3, hw, stride=2)
    hw = net.conv_bn("features.3.conv", 64, 96, 3, hw, stride=2)
    # Mixed4a
    net.conv_bn("features.4.branch0.0", 160, 64, 1, hw)
    net.conv_bn("features.4.branch0.1", 64, 96, 3, hw)
    net.conv_bn("features.4.branch1.0", 160, 64, 1, hw)
    net.conv_bn("features.4.branch1.1", 64, 64, (1, 7), hw, padding=(0, 3))
    net.conv_bn("features.4.branch1.2", 64, 64, (7, 1), hw, padding=(3, 0))
    hw = net.conv_bn("features.4.branch1.3", 64, 96, 3, hw)
    # Mixed5a
    net.conv_bn("features.5.conv", 192, 192, 3, hw, stride=2)
    hw = net.pool("features.5.maxpool", 192, 3, hw, stride=2)

    index = 6
    for _ in range(4):  # InceptionA, 384 channels in and out
        p = f"features.{index}"
        net.conv_bn(f"{p}.branch0", 384, 96, 1, hw)
        net.conv_bn(f"{p}.branch1.0", 384, 64, 1, hw)
        net.conv_bn(f"{p}.branch1.1", 64, 96, 3, hw, padding=1)
        net.conv_bn(f"{p}.branch2.0", 384, 64, 1, hw)
        net.conv_bn(f"{p}.branch2.1", 64, 96, 3, hw, padding=1)
        net.conv_bn(f"{p}.branch2.2", 96, 96, 3, hw, padding=1)
        net.pool(f"{p}.branch3.0", 384, 3, hw, stride=1, padding=1)
        net.conv_bn(f"{p}.branch3.1", 384, 96, 1, hw)
        index += 1

    p = f"features.{index}"  # ReductionA: 384 -> 1024 channels
    out = net.conv_bn(f"{p}.branch0", 384, 384, 3, hw, stride=2)
    net.conv_bn(f"{p}.branch1.0", 384, 192, 1, hw)
    net.conv_bn(f"{p}.branch1.1", 192, 224, 3, hw, padding=1)
    net.conv_bn(f"{p}.branch1.2", 224, 256, 3, hw, stride=2)
    net.pool(f"{p}.branch2", 384, 3, hw, stride=2)
    hw, index = out, index + 1

    for _ in range(7):  # InceptionB, 1024 channels in and out
        p = f"features.{index}"
        net.conv_bn(f"{p}.branch0", 1024, 384, 1, hw)
        net.conv_bn(f"{p}.branch1.0", 1024, 192, 1, hw)
        net.conv_bn(f"{p}.branch1.1", 192, 224, (1, 7), hw, padding=(0, 3))
        net.conv_bn(f"{p}.branch1.2", 224, 256, (7, 1), hw, padding=(3, 0))
        net.conv_bn(f"{p}.branch2.0", 1024, 192, 1, hw)
        net.conv_bn(f"{p}.branch2.1", 192, 192, (7, 1), hw, padding=(3, 0))
        net.conv_bn(f"{p}.branch2.2", 192, 224, (1, 7), hw, padding=(0, 3))
        net.conv_bn(f"{p}.branch2.3", 224, 224, (7, 1), hw, padding=(3, 0))
        net.conv_bn(f"{p}.branch2.4", 224, 256, (1, 7), hw, padding=(0, 3))
        net.pool(f"{p}.branch3.0", 1024, 3, hw, stride=1, padding=1)
        net.conv_bn(f"{p}.branch3.1", 1024, 128, 1, hw)
        index += 1

    p = f"features.{index}"  # ReductionB: 1024 -> 1536 channels
    net.conv_bn(f"{p}.branch0.0", 1024, 192, 1, hw)
    out = net.conv_bn(f"{p}.branch0.1", 192, 192, 3, hw, stride=2)
    net.conv_bn(f"{p}.branch1.0", 1024, 256, 1, hw)
    net.conv_bn(f"{p}.branch1.1", 256, 256, (1, 7), hw, padding=(0, 3))
    net.conv_bn(f"{p}.branch1.2", 256, 320, (7, 1), hw, padding=(3, 0))
    net.conv_bn(f"{p}.branch1.3", 320, 320, 3, hw, stride=2)
    net.pool(f"{p}.branch2", 1024, 3, hw, stride=2)
    hw, index = out, index + 1

    for _ in range(3):  # InceptionC, 1536 channels in and out
        p = f"features.{index}"
        net.conv_bn(f"{p}.branch0", 1536, 256, 1, hw)
        net.conv_bn(f"{p}.branch1_0", 1536, 384, 1, hw)
        net.conv_bn(f"{p}.branch1_1a", 384, 256, (1, 3), hw, padding=(0, 1))
        net.conv_bn(f"{p}.branch1_1b", 384, 256, (3, 1), hw, padding=(1, 0))
        net.conv_bn(f"{p}.branch2_0", 1536, 384, 1, hw)
        net.conv_bn(f"{p}.branch2_1", 384, 448, (3, 1), hw, padding=(1, 0))
        net.conv_bn(f"{p}.branch2_2", 448, 512, (1, 3), hw, padding=(0, 1))
        net.conv_bn(f"{p}.branch2_3a", 512, 256, (1, 3), hw, padding=(0, 1))
        net.conv_bn(f"{p}.branch2_3b", 512, 256, (3, 1), hw, padding=(1, 0))
        net.pool(f"{p}.branch3.0", 1536, 3, hw, stride=1, padding=1)
        net.conv_bn(f"{p}.branch3.1", 1536, 256, 1, hw)
        index += 1

    net.head(1536, hw, num_classes, pool="global_pool", fc="last_linear")
    return _table(net.rows)


_RESNET_BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def resnet(depth: int = 50, image_size: int = 224, num_classes: int = 1000) -> pd.DataFrame:
    """Bottleneck ResNet (v1.5: stride on the 3x3 conv) as in
    ``torchvision.models.resnet50/101/152``.

    Each bottleneck is ``conv1`` (1x1), ``conv2`` (3x3), ``conv3`` (1x1, with
    the residual add and the block's final ReLU folded in) and, on the first
    block of a stage, ``downsample`` (1x1 projection).

    References
    ----------
    He et al., "Deep Residual Learning for Image Recognition", CVPR 2016,
    Table 1.
    """
    if depth not in _RESNET_BLOCKS:
        raise SimInputError(f"depth must be one of {sorted(_RESNET_BLOCKS)}, got {depth!r}")
    _check_int("image_size", image_size, 1)
    net = _Convs()
    hw = net.conv_bn("conv1", 3, 64, 7, (image_size, image_size), stride=2, padding=3)
    hw = net.pool("maxpool", 64, 3, hw, stride=2, padding=1)
    c_in = 64
    for stage, (n_blocks, width) in enumerate(
        zip(_RESNET_BLOCKS[depth], (64, 128, 256, 512), strict=True)
    ):
        for block in range(n_blocks):
            p = f"layer{stage + 1}.{block}"
            stride = 2 if stage > 0 and block == 0 else 1
            net.conv_bn(f"{p}.conv1", c_in, width, 1, hw)
            out = net.conv_bn(f"{p}.conv2", width, width, 3, hw, stride=stride, padding=1)
            net.conv_bn(f"{p}.conv3", width, 4 * width, 1, out, relu=True, extra_elementwise=1)
            if block == 0:
                net.conv_bn(f"{p}.downsample", c_in, 4 * width, 1, hw, stride=stride, relu=False)
            c_in, hw = 4 * width, out
    net.head(c_in, hw, num_classes)
    return _table(net.rows)


_DENSENET_CONFIGS = {
    # depth: (growth_rate, block_config, num_init_features)
    121: (32, (6, 12, 24, 16), 64),
    161: (48, (6, 12, 36, 24), 96),
    201: (32, (6, 12, 48, 32), 64),
}


def densenet(depth: int = 121, image_size: int = 224, num_classes: int = 1000) -> pd.DataFrame:
    """DenseNet-BC as in ``torchvision.models.densenet121/161/201`` (bn_size 4,
    compression 0.5).

    Dense layers are pre-activation (BN-ReLU-conv), so each is four rows:
    ``norm1`` (bn), ``conv1`` (1x1 conv), ``norm2`` (bn), ``conv2`` (3x3 conv).
    The channel concatenation is a memory copy and is not counted.

    References
    ----------
    Huang et al., "Densely Connected Convolutional Networks", CVPR 2017,
    Table 1.
    """
    if depth not in _DENSENET_CONFIGS:
        raise SimInputError(f"depth must be one of {sorted(_DENSENET_CONFIGS)}, got {depth!r}")
    _check_int("image_size", image_size, 1)
    growth, block_config, c = _DENSENET_CONFIGS[depth]
    bottleneck = 4 * growth
    net = _Convs()
    rows = net.rows
    hw = net.conv_bn("features.conv0", 3, c, 7, (image_size, image_size), stride=2, padding=3)
    hw = net.pool("features.pool0", c, 3, hw, stride=2, padding=1)

    def bn_relu(name: str, channels: int) -> None:
        norm = batchnorm(name, channels, *hw)
        rows.append(merge(name, "bn", [norm, elementwise(name, norm["out_elems"])]))

    for b, n_layers in enumerate(block_config, start=1):
        for i in range(1, n_layers + 1):
            p = f"features.denseblock{b}.denselayer{i}"
            bn_relu(f"{p}.norm1", c)
            rows.append(conv2d(f"{p}.conv1", c, bottleneck, 1, 1, 0, *hw))
            bn_relu(f"{p}.norm2", bottleneck)
            rows.append(conv2d(f"{p}.conv2", bottleneck, growth, 3, 1, 1, *hw))
            c += growth
        if b < len(block_config):
            p = f"features.transition{b}"
            bn_relu(f"{p}.norm", c)
            rows.append(conv2d(f"{p}.conv", c, c // 2, 1, 1, 0, *hw))
            c //= 2
            hw = net.pool(f"{p}.pool", c, 2, hw, stride=2)
    bn_relu("features.norm5", c)
    net.head(c, hw, num_classes, fc="classifier")
    return _table(rows)


def bert(
    seq_len: int = 128,
    d_model: int = 768,
    n_layers: int = 12,
    n_heads: int = 12,
    d_ff: int = 3072,
    vocab_size: int = 30522,
    max_positions: int = 512,
    type_vocab_size: int = 2,
) -> pd.DataFrame:
    """BERT encoder with pooler, as in Hugging Face ``transformers.BertModel``.

    Rows: three embedding tables (position and token-type rows include their
    addition into the sum), the embedding layer-norm, then per layer an
    ``attention`` row (self-attention, residual add, layer-norm) and an
    ``mlp`` row (intermediate dense, GELU, output dense, residual add,
    layer-norm), and finally the ``pooler`` (dense + tanh on the [CLS] token).
    No masked-LM head.

    References
    ----------
    Devlin et al., "BERT: Pre-training of Deep Bidirectional Transformers for
    Language Understanding", NAACL 2019, Sec. 3.
    """
    _check_int("seq_len", seq_len, 1, max_positions)
    s, d = seq_len, d_model
    rows = [
        embedding("embeddings.word_embeddings", vocab_size, d, s),
        merge(
            "embeddings.position_embeddings",
            "embedding",
            [embedding("pos", max_positions, d, s), elementwise("add", s * d)],
        ),
        merge(
            "embeddings.token_type_embeddings",
            "embedding",
            [embedding("type", type_vocab_size, d, s), elementwise("add", s * d)],
        ),
        layernorm("embeddings.LayerNorm", d, s),
    ]
    for i in range(n_layers):
        p = f"encoder.layer.{i}"
        add_norm = [elementwise("add", s * d), layernorm("norm", d, s)]
        rows.append(
            merge(f"{p}.attention", "attention", [attention("a", d, n_heads, s), *add_norm])
        )
        rows.append(merge(f"{p}.mlp", "mlp", [mlp("m", d, d_ff, s), *add_norm]))
    rows.append(merge("pooler", "linear", [linear("pooler", d, d), elementwise("tanh", d)]))
    return _table(rows)


def gpt2(
    seq_len: int = 1024,
    d_model: int = 768,
    n_layers: int = 12,
    n_heads: int = 12,
    vocab_size: int = 50257,
    max_positions: int = 1024,
) -> pd.DataFrame:
    """GPT-2 language model as in Hugging Face ``transformers.GPT2LMHeadModel``.

    Pre-layer-norm blocks: ``h.{i}.attn`` holds ``ln_1``, self-attention and the
    residual add; ``h.{i}.mlp`` holds ``ln_2``, the 4x MLP and the residual add.
    The ``lm_head`` shares its weight with ``wte``, so its row has 0 parameters
    (the weight, and its gradient, are counted once in ``wte``) but carries the
    logits' FLOPs.

    References
    ----------
    Radford et al., "Language Models are Unsupervised Multitask Learners",
    OpenAI 2019, Sec. 2.3.
    """
    _check_int("seq_len", seq_len, 1, max_positions)
    s, d = seq_len, d_model
    rows = [
        embedding("wte", vocab_size, d, s),
        merge(
            "wpe", "embedding", [embedding("wpe", max_positions, d, s), elementwise("add", s * d)]
        ),
    ]
    for i in range(n_layers):
        norm, add = layernorm("ln", d, s), elementwise("add", s * d)
        rows.append(merge(f"h.{i}.attn", "attention", [norm, attention("a", d, n_heads, s), add]))
        rows.append(merge(f"h.{i}.mlp", "mlp", [norm, mlp("m", d, 4 * d, s), add]))
    rows.append(layernorm("ln_f", d, s))
    rows.append({**linear("lm_head", d, vocab_size, s, bias=False), "params": 0})  # tied to wte
    return _table(rows)


# --------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Architecture:
    """One named model: how to build its table and where its shapes come from.

    Attributes
    ----------
    name : str
        Registry key, e.g. ``"resnet50"``.
    builder : callable
        Returns the model's table; takes the keyword arguments in
        ``default_kwargs`` (``image_size`` for CNNs, ``seq_len`` for
        transformers).
    source : str
        The reference implementation whose layer shapes the builder follows.
    default_kwargs : mapping
        The builder's user-facing keyword arguments and their defaults.
    """

    name: str
    builder: Callable[..., pd.DataFrame]
    source: str
    default_kwargs: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A read-only copy, so one architecture's defaults cannot leak into another's.
        object.__setattr__(self, "default_kwargs", MappingProxyType(dict(self.default_kwargs)))


def _fixed(builder: Callable[..., pd.DataFrame], **fixed: object) -> Callable[..., pd.DataFrame]:
    """``builder`` with some keyword arguments pinned (e.g. ``depth=50``)."""

    def build(**kwargs: object) -> pd.DataFrame:
        return builder(**fixed, **kwargs)

    build.__name__ = builder.__name__ + "".join(str(v) for v in fixed.values())
    build.__doc__ = builder.__doc__
    return build


_TV = "torchvision 0.19"
_IMAGE_224 = {"image_size": 224}
_IMAGE_299 = {"image_size": 299}

ARCHITECTURES: dict[str, Architecture] = {
    a.name: a
    for a in [
        Architecture("alexnet", alexnet, f"torchvision.models.alexnet ({_TV})", _IMAGE_224),
        Architecture("vgg16", vgg16, f"torchvision.models.vgg16 ({_TV})", _IMAGE_224),
        Architecture(
            "googlenet",
            googlenet,
            f"torchvision.models.googlenet with aux_logits=False ({_TV})",
            _IMAGE_224,
        ),
        Architecture(
            "inception_v3",
            inception_v3,
            f"torchvision.models.inception_v3 with aux_logits=True ({_TV})",
            {"image_size": 299, "aux_logits": True},
        ),
        Architecture(
            "inception_v4",
            inception_v4,
            "timm inception_v4 (timm/models/inception_v4.py, from Cadene pretrainedmodels), "
            "1000 classes",
            _IMAGE_299,
        ),
        *(
            Architecture(
                f"resnet{d}",
                _fixed(resnet, depth=d),
                f"torchvision.models.resnet{d} ({_TV})",
                _IMAGE_224,
            )
            for d in (50, 101, 152)
        ),
        *(
            Architecture(
                f"densenet{d}",
                _fixed(densenet, depth=d),
                f"torchvision.models.densenet{d} ({_TV})",
                _IMAGE_224,
            )
            for d in (121, 161, 201)
        ),
        Architecture(
            "bert_base",
            bert,
            "transformers.BertModel with pooler, bert-base-uncased config",
            {"seq_len": 128},
        ),
        Architecture(
            "bert_large",
            _fixed(bert, d_model=1024, n_layers=24, n_heads=16, d_ff=4096),
            "transformers.BertModel with pooler, bert-large-uncased config",
            {"seq_len": 128},
        ),
        Architecture(
            "gpt2",
            gpt2,
            "transformers.GPT2LMHeadModel, gpt2 config (lm_head tied to wte)",
            {"seq_len": 1024},
        ),
    ]
}


def build_table(name: str, **kwargs: object) -> pd.DataFrame:
    """Per-layer table of the named architecture.

    Parameters
    ----------
    name : str
        A key of `ARCHITECTURES`.
    **kwargs
        Overrides of the architecture's ``default_kwargs`` (e.g.
        ``seq_len=512`` or ``image_size=256``).

    Returns
    -------
    pandas.DataFrame
        Columns `COLUMNS`, one row per layer from input to output.

    Raises
    ------
    ValueError
        (`SimInputError`) for an unknown name or keyword, or a bad value.

    Examples
    --------
    >>> int(build_table("bert_base", seq_len=64)["params"].sum())
    109482240
    """
    if name not in ARCHITECTURES:
        raise SimInputError(f"unknown model {name!r}; valid names: {', '.join(ARCHITECTURES)}")
    arch = ARCHITECTURES[name]
    unknown = sorted(set(kwargs) - set(arch.default_kwargs))
    if unknown:
        raise SimInputError(
            f"{name} takes no argument {unknown[0]!r}; valid: {', '.join(arch.default_kwargs)}"
        )
    return arch.builder(**{**arch.default_kwargs, **kwargs})
