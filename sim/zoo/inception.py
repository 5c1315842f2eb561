"""Inception v3 (torchvision) and Inception v4 (timm) for the zoo.

Each Inception block is a function that appends its rows to a `Convs` and
returns the block's output channels (and, for the reduction blocks, the
output spatial size); the builders string the blocks together in the
reference implementation's module order, so the row order is the same.
"""

from __future__ import annotations

import pandas as pd

from sim.checks import check_int
from sim.errors import SimInputError
from sim.zoo.layers import MAX_IMAGE_SIZE, Convs, to_table

__all__ = ["inception_v3", "inception_v4"]

HW = tuple[int, int]


# --------------------------------------------------------------------------
# Inception v3 (torchvision.models.inception_v3)
# --------------------------------------------------------------------------


def _v3_stem(net: Convs, image_size: int) -> HW:
    hw = net.conv_bn("Conv2d_1a_3x3", 3, 32, 3, (image_size, image_size), stride=2)
    hw = net.conv_bn("Conv2d_2a_3x3", 32, 32, 3, hw)
    hw = net.conv_bn("Conv2d_2b_3x3", 32, 64, 3, hw, padding=1)
    hw = net.pool("maxpool1", 64, 3, hw, stride=2)
    hw = net.conv_bn("Conv2d_3b_1x1", 64, 80, 1, hw)
    hw = net.conv_bn("Conv2d_4a_3x3", 80, 192, 3, hw)
    return net.pool("maxpool2", 192, 3, hw, stride=2)


def _v3_block_a(net: Convs, hw: HW, name: str, c_in: int, pool_features: int) -> int:
    net.conv_bn(f"{name}.branch1x1", c_in, 64, 1, hw)
    net.conv_bn(f"{name}.branch5x5_1", c_in, 48, 1, hw)
    net.conv_bn(f"{name}.branch5x5_2", 48, 64, 5, hw, padding=2)
    net.conv_bn(f"{name}.branch3x3dbl_1", c_in, 64, 1, hw)
    net.conv_bn(f"{name}.branch3x3dbl_2", 64, 96, 3, hw, padding=1)
    net.conv_bn(f"{name}.branch3x3dbl_3", 96, 96, 3, hw, padding=1)
    net.pool(f"{name}.avg_pool", c_in, 3, hw, stride=1, padding=1)
    net.conv_bn(f"{name}.branch_pool", c_in, pool_features, 1, hw)
    return 64 + 64 + 96 + pool_features


def _v3_block_b(net: Convs, hw: HW, name: str, c_in: int) -> tuple[int, HW]:
    out = net.conv_bn(f"{name}.branch3x3", c_in, 384, 3, hw, stride=2)
    net.conv_bn(f"{name}.branch3x3dbl_1", c_in, 64, 1, hw)
    net.conv_bn(f"{name}.branch3x3dbl_2", 64, 96, 3, hw, padding=1)
    net.conv_bn(f"{name}.branch3x3dbl_3", 96, 96, 3, hw, stride=2)
    net.pool(f"{name}.max_pool", c_in, 3, hw, stride=2)
    return 384 + 96 + c_in, out


def _v3_block_c(net: Convs, hw: HW, name: str, c_in: int, c7: int) -> int:
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


def _v3_block_d(net: Convs, hw: HW, name: str, c_in: int) -> tuple[int, HW]:
    net.conv_bn(f"{name}.branch3x3_1", c_in, 192, 1, hw)
    out = net.conv_bn(f"{name}.branch3x3_2", 192, 320, 3, hw, stride=2)
    net.conv_bn(f"{name}.branch7x7x3_1", c_in, 192, 1, hw)
    net.conv_bn(f"{name}.branch7x7x3_2", 192, 192, (1, 7), hw, padding=(0, 3))
    net.conv_bn(f"{name}.branch7x7x3_3", 192, 192, (7, 1), hw, padding=(3, 0))
    net.conv_bn(f"{name}.branch7x7x3_4", 192, 192, 3, hw, stride=2)
    net.pool(f"{name}.max_pool", c_in, 3, hw, stride=2)
    return 320 + 192 + c_in, out


def _v3_block_e(net: Convs, hw: HW, name: str, c_in: int) -> int:
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


def _v3_aux_logits(net: Convs, hw: HW, c_in: int, num_classes: int) -> None:
    """The auxiliary classifier that branches off after ``Mixed_6e``."""
    aux_hw = net.pool("AuxLogits.avg_pool", c_in, 5, hw, stride=3)
    aux_hw = net.conv_bn("AuxLogits.conv0", c_in, 128, 1, aux_hw)
    aux_hw = net.conv_bn("AuxLogits.conv1", 128, 768, 5, aux_hw)
    net.head(768, aux_hw, num_classes, pool="AuxLogits.adaptive_avg_pool", fc="AuxLogits.fc")


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
    check_int("image_size", image_size, 1, MAX_IMAGE_SIZE)
    if not isinstance(aux_logits, bool):
        raise SimInputError(f"aux_logits must be True or False, got {aux_logits!r}")
    net = Convs()
    hw = _v3_stem(net, image_size)
    c = _v3_block_a(net, hw, "Mixed_5b", 192, 32)
    c = _v3_block_a(net, hw, "Mixed_5c", c, 64)
    c = _v3_block_a(net, hw, "Mixed_5d", c, 64)
    c, hw = _v3_block_b(net, hw, "Mixed_6a", c)
    c = _v3_block_c(net, hw, "Mixed_6b", c, 128)
    c = _v3_block_c(net, hw, "Mixed_6c", c, 160)
    c = _v3_block_c(net, hw, "Mixed_6d", c, 160)
    c = _v3_block_c(net, hw, "Mixed_6e", c, 192)
    if aux_logits:
        _v3_aux_logits(net, hw, c, num_classes)
    c, hw = _v3_block_d(net, hw, "Mixed_7a", c)
    c = _v3_block_e(net, hw, "Mixed_7b", c)
    c = _v3_block_e(net, hw, "Mixed_7c", c)
    net.head(c, hw, num_classes)
    return to_table(net.rows)


# --------------------------------------------------------------------------
# Inception v4 (timm inception_v4)
# --------------------------------------------------------------------------


def _v4_stem(net: Convs, image_size: int) -> HW:
    """``features.0`` to ``features.5``: 3 -> 384 channels."""
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
    return net.pool("features.5.maxpool", 192, 3, hw, stride=2)


def _v4_inception_a(net: Convs, hw: HW, p: str) -> None:
    """InceptionA, 384 channels in and out."""
    net.conv_bn(f"{p}.branch0", 384, 96, 1, hw)
    net.conv_bn(f"{p}.branch1.0", 384, 64, 1, hw)
    net.conv_bn(f"{p}.branch1.1", 64, 96, 3, hw, padding=1)
    net.conv_bn(f"{p}.branch2.0", 384, 64, 1, hw)
    net.conv_bn(f"{p}.branch2.1", 64, 96, 3, hw, padding=1)
    net.conv_bn(f"{p}.branch2.2", 96, 96, 3, hw, padding=1)
    net.pool(f"{p}.branch3.0", 384, 3, hw, stride=1, padding=1)
    net.conv_bn(f"{p}.branch3.1", 384, 96, 1, hw)


def _v4_reduction_a(net: Convs, hw: HW, p: str) -> HW:
    """ReductionA: 384 -> 1024 channels."""
    out = net.conv_bn(f"{p}.branch0", 384, 384, 3, hw, stride=2)
    net.conv_bn(f"{p}.branch1.0", 384, 192, 1, hw)
    net.conv_bn(f"{p}.branch1.1", 192, 224, 3, hw, padding=1)
    net.conv_bn(f"{p}.branch1.2", 224, 256, 3, hw, stride=2)
    net.pool(f"{p}.branch2", 384, 3, hw, stride=2)
    return out


def _v4_inception_b(net: Convs, hw: HW, p: str) -> None:
    """InceptionB, 1024 channels in and out."""
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


def _v4_reduction_b(net: Convs, hw: HW, p: str) -> HW:
    """ReductionB: 1024 -> 1536 channels."""
    net.conv_bn(f"{p}.branch0.0", 1024, 192, 1, hw)
    out = net.conv_bn(f"{p}.branch0.1", 192, 192, 3, hw, stride=2)
    net.conv_bn(f"{p}.branch1.0", 1024, 256, 1, hw)
    net.conv_bn(f"{p}.branch1.1", 256, 256, (1, 7), hw, padding=(0, 3))
    net.conv_bn(f"{p}.branch1.2", 256, 320, (7, 1), hw, padding=(3, 0))
    net.conv_bn(f"{p}.branch1.3", 320, 320, 3, hw, stride=2)
    net.pool(f"{p}.branch2", 1024, 3, hw, stride=2)
    return out


def _v4_inception_c(net: Convs, hw: HW, p: str) -> None:
    """InceptionC, 1536 channels in and out."""
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


def inception_v4(image_size: int = 299, num_classes: int = 1000) -> pd.DataFrame:
    """Inception v4 as in timm's ``inception_v4`` (``timm/models/inception_v4.py``,
    ported from Cadene's ``pretrainedmodels``), with a 1000-class head.

    Row names follow timm's module paths (``features.6.branch1.0``): the stem
    is ``features.0-5``, then 4 InceptionA, ReductionA, 7 InceptionB,
    ReductionB and 3 InceptionC blocks as ``features.6`` to ``features.21``.

    References
    ----------
    Szegedy, Ioffe, Vanhoucke and Alemi, "Inception-v4, Inception-ResNet and
    the Impact of Residual Connections on Learning", AAAI 2017
    (arXiv:1602.07261), Figures 3-9.
    """
    check_int("image_size", image_size, 1, MAX_IMAGE_SIZE)
    net = Convs()
    hw = _v4_stem(net, image_size)
    index = 6
    for _ in range(4):
        _v4_inception_a(net, hw, f"features.{index}")
        index += 1
    hw, index = _v4_reduction_a(net, hw, f"features.{index}"), index + 1
    for _ in range(7):
        _v4_inception_b(net, hw, f"features.{index}")
        index += 1
    hw, index = _v4_reduction_b(net, hw, f"features.{index}"), index + 1
    for _ in range(3):
        _v4_inception_c(net, hw, f"features.{index}")
        index += 1
    net.head(1536, hw, num_classes, pool="global_pool", fc="last_linear")
    return to_table(net.rows)
