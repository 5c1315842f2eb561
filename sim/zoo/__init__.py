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

``tensors``
    The row's parameter tensors (one gradient each, as frameworks have
    them), as sizes in the order their gradients become ready in backward,
    joined by ``;`` (`sim.tensors`); empty for a parameter-free row.

The package holds the row builders (`sim.zoo.layers`), the architectures
(`sim.zoo.cnn`, `sim.zoo.inception`, `sim.zoo.transformers`), models from
Hugging Face configs (`sim.zoo.hf`) and the registry (`sim.zoo.registry`);
every public name is importable from ``sim.zoo``.

Examples
--------
>>> row = conv2d("c", 64, 64, 3, 1, 1, 56, 56)
>>> row["params"], row["fwd_flops"] // 2
(36864, 115605504)
>>> int(build_table("resnet50")["params"].sum())
25557032
"""

# ruff: noqa: F403, F405
from sim.zoo.cnn import *
from sim.zoo.hf import *
from sim.zoo.inception import *
from sim.zoo.layers import *
from sim.zoo.registry import *
from sim.zoo.transformers import *

__all__ = [
    "ARCHITECTURES",
    "COLUMNS",
    "ELEMENTWISE_FLOPS_PER_ELEM",
    "HF_MODEL_TYPES",
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
    "hf_table",
    "inception_v3",
    "inception_v4",
    "layernorm",
    "linear",
    "merge",
    "mlp",
    "parse_hf_config",
    "pool2d",
    "read_hf_config",
    "resnet",
    "tensors_text",
    "vgg16",
]
