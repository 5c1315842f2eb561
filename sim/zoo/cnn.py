"""Convolutional networks of the zoo: AlexNet, VGG-16, GoogLeNet, ResNet and
DenseNet, each following the layer shapes of its reference implementation
(the Inception v3/v4 builders are in `sim.zoo.inception`)."""

from __future__ import annotations

import pandas as pd

from sim.checks import check_int
from sim.errors import SimInputError
from sim.zoo.layers import (
    MAX_IMAGE_SIZE,
    Convs,
    adaptive_avg_pool,
    batchnorm,
    conv2d,
    elementwise,
    linear,
    merge,
    to_table,
)

__all__ = ["alexnet", "densenet", "googlenet", "resnet", "vgg16"]


def alexnet(image_size: int = 224, num_classes: int = 1000) -> pd.DataFrame:
    """AlexNet as in ``torchvision.models.alexnet`` (one-GPU variant, 61.1 M params).

    References
    ----------
    Krizhevsky, "One weird trick for parallelizing convolutional neural
    networks", arXiv:1404.5997 (2014).
    """
    check_int("image_size", image_size, 1, MAX_IMAGE_SIZE)
    net = Convs()
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
    return to_table(net.rows)


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
    check_int("image_size", image_size, 1, MAX_IMAGE_SIZE)
    config = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M"]
    config += [512, 512, 512, "M"]
    net = Convs()
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
    return to_table(net.rows)


def googlenet(image_size: int = 224, num_classes: int = 1000) -> pd.DataFrame:
    """GoogLeNet (Inception v1) as in ``torchvision.models.googlenet`` with
    ``aux_logits=False`` (the auxiliary heads are left out).

    torchvision's branch3 uses a 3x3 convolution where the paper has 5x5
    (pytorch/vision#906); this table follows torchvision.

    References
    ----------
    Szegedy et al., "Going Deeper with Convolutions", CVPR 2015, Table 1.
    """
    check_int("image_size", image_size, 1, MAX_IMAGE_SIZE)
    net = Convs()
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
    return to_table(net.rows)



_RESNET_BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}


def _check_depth_and_size(depth, depths: dict, image_size) -> None:
    if depth not in depths:
        raise SimInputError(f"depth must be one of {sorted(depths)}, got {depth!r}")
    check_int("image_size", image_size, 1, MAX_IMAGE_SIZE)


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
    _check_depth_and_size(depth, _RESNET_BLOCKS, image_size)
    net = Convs()
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
    return to_table(net.rows)


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
    _check_depth_and_size(depth, _DENSENET_CONFIGS, image_size)
    growth, block_config, c = _DENSENET_CONFIGS[depth]
    bottleneck = 4 * growth
    net = Convs()
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
    return to_table(rows)
