"""Tests for `sim.zoo`: hand-worked layers, exact model totals, invariants and
published FLOP figures."""

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sim.zoo import (
    ARCHITECTURES,
    COLUMNS,
    LAYER_TYPES,
    adaptive_avg_pool,
    attention,
    batchnorm,
    build_table,
    conv2d,
    conv_bn,
    conv_out_size,
    elementwise,
    embedding,
    layernorm,
    linear,
    merge,
    mlp,
    pool2d,
)

MODELS_DIR = Path(__file__).resolve().parents[1] / "data" / "models"


# --------------------------------------------------------------------------
# Helpers, worked by hand
# --------------------------------------------------------------------------


class TestConvOutSize:
    def test_resnet_stem(self):
        # (224 + 2*3 - 7) // 2 + 1 = 112
        assert conv_out_size(224, 7, 2, 3) == 112

    def test_ceil_mode_rounds_up(self):
        # GoogLeNet maxpool1: (112 - 3) / 2 = 54.5 -> floor 54 + 1 = 55, ceil 55 + 1 = 56
        assert conv_out_size(112, 3, 2) == 55
        assert conv_out_size(112, 3, 2, ceil_mode=True) == 56

    def test_ceil_mode_drops_window_starting_in_right_padding(self):
        # (3 + 2 - 2) / 2 = 1.5 -> ceil gives 3 windows, but the third would start
        # at padded index 4, in the right padding, so PyTorch keeps 2
        assert conv_out_size(3, 2, 2, 1, ceil_mode=True) == 2
        # (6 + 2 - 3) / 2 = 2.5 -> ceil gives 4 windows; the 4th starts at padded
        # index 6, still inside the input, so it is kept
        assert conv_out_size(6, 3, 2, 1, ceil_mode=True) == 4

    def test_too_small_input_raises(self):
        with pytest.raises(ValueError, match="too small"):
            conv_out_size(5, 11, 4, 2)

    @given(
        size=st.integers(1, 300),
        k=st.integers(1, 7),
        stride=st.integers(1, 4),
        padding=st.integers(0, 3),
    )
    def test_ceil_is_floor_or_one_more(self, size, k, stride, padding):
        assume(size + 2 * padding >= k and 2 * padding <= k)
        floor = conv_out_size(size, k, stride, padding)
        assert floor <= conv_out_size(size, k, stride, padding, ceil_mode=True) <= floor + 1


class TestConv2d:
    def test_3x3_64_to_64_on_56x56(self):
        row = conv2d("c", 64, 64, 3, 1, 1, 56, 56)
        assert row == {
            "name": "c",
            "type": "conv",
            "params": 64 * 64 * 3 * 3,  # 36,864
            "fwd_flops": 2 * 115_605_504,  # 36,864 MACs per pixel x 56*56 pixels
            "out_elems": 64 * 56 * 56,
            "tensors": (36864,),  # the weight; no bias
        }

    def test_alexnet_first_layer_with_bias(self):
        # 11x11 stride 4 pad 2 on 224: (224 + 4 - 11) // 4 + 1 = 55
        row = conv2d("c", 3, 64, 11, 4, 2, 224, 224, bias=True)
        assert row["params"] == 64 * 3 * 121 + 64 == 23_296
        assert row["fwd_flops"] == 2 * 23_232 * 55 * 55 == 140_553_600
        assert row["out_elems"] == 64 * 55 * 55

    def test_depthwise(self):
        row = conv2d("dw", 32, 32, 3, 1, 1, 112, 112, groups=32)
        assert row["params"] == 32 * 1 * 9 == 288
        assert row["fwd_flops"] == 2 * 288 * 112 * 112

    def test_asymmetric_kernel(self):
        # Inception's 1x7 with padding (0, 3) keeps a 17x17 map
        row = conv2d("c", 192, 192, (1, 7), 1, (0, 3), 17, 17)
        assert row["params"] == 192 * 192 * 7 == 258_048
        assert row["out_elems"] == 192 * 17 * 17
        assert row["fwd_flops"] == 2 * 258_048 * 17 * 17

    def test_groups_must_divide_channels(self):
        with pytest.raises(ValueError, match="groups"):
            conv2d("c", 30, 64, 3, 1, 1, 8, 8, groups=4)

    @given(
        c_in=st.integers(1, 64),
        c_out=st.integers(1, 64),
        half_k=st.integers(0, 3),
        hw=st.tuples(st.integers(1, 64), st.integers(1, 64)),
        hw2=st.tuples(st.integers(1, 64), st.integers(1, 64)),
    )
    def test_params_ignore_size_and_flops_scale_with_pixels(self, c_in, c_out, half_k, hw, hw2):
        k = 2 * half_k + 1  # odd kernel, "same" padding: output is h x w
        a = conv2d("a", c_in, c_out, k, 1, half_k, *hw)
        b = conv2d("b", c_in, c_out, k, 1, half_k, *hw2)
        assert a["params"] == b["params"]
        assert a["fwd_flops"] * hw2[0] * hw2[1] == b["fwd_flops"] * hw[0] * hw[1]
        assert a["fwd_flops"] == 2 * a["params"] * hw[0] * hw[1]


class TestConvBn:
    def test_resnet_3x3(self):
        row = conv_bn("c", 64, 64, 3, 1, 1, 56, 56)
        assert row["type"] == "conv_bn"
        assert row["params"] == 36_864 + 2 * 64
        # conv 231,211,008 + bn 5 x 200,704 + relu 1 x 200,704
        assert row["fwd_flops"] == 231_211_008 + 6 * 200_704 == 232_415_232

    def test_resnet_stem(self):
        row = conv_bn("conv1", 3, 64, 7, 2, 3, 224, 224)
        assert row["params"] == 64 * 3 * 49 + 128 == 9_536
        assert row["fwd_flops"] == 2 * 9_408 * 112 * 112 + 6 * 64 * 112 * 112 == 240_844_800

    def test_without_relu_plus_residual(self):
        row = conv_bn("c", 4, 4, 1, 1, 0, 2, 2, relu=False, extra_elementwise=1)
        # conv 2 x 16 x 4 = 128, bn 5 x 16 = 80, add 16
        assert row["fwd_flops"] == 128 + 80 + 16


class TestNorms:
    def test_batchnorm(self):
        assert batchnorm("bn", 64, 56, 56) == {
            "name": "bn",
            "type": "bn",
            "params": 128,
            "fwd_flops": 5 * 200_704,
            "out_elems": 200_704,
            "tensors": (64, 64),  # weight (scale) and bias (shift)
        }

    def test_layernorm(self):
        row = layernorm("ln", 768, 128)
        assert (row["params"], row["fwd_flops"], row["out_elems"]) == (1536, 491_520, 98_304)


class TestLinearAndEmbedding:
    def test_resnet_fc(self):
        row = linear("fc", 2048, 1000)
        assert (row["params"], row["fwd_flops"], row["out_elems"]) == (2_049_000, 4_096_000, 1000)

    def test_tokens_without_bias(self):
        row = linear("l", 4, 3, tokens=2, bias=False)
        assert (row["params"], row["fwd_flops"], row["out_elems"]) == (12, 48, 6)

    def test_embedding_is_a_free_lookup(self):
        row = embedding("e", 30522, 768, 128)
        assert (row["params"], row["fwd_flops"], row["out_elems"]) == (23_440_896, 0, 98_304)


class TestAttention:
    def test_bert_base_layer(self):
        row = attention("a", 768, 12, 128)
        assert row["params"] == 4 * 768 * 768 + 4 * 768 == 2_362_368
        projections = 8 * 128 * 768 * 768  # 603,979,776
        scores_and_context = 4 * 128 * 128 * 768  # 50,331,648
        scale_and_softmax = 6 * 12 * 128 * 128  # 1,179,648
        assert row["fwd_flops"] == projections + scores_and_context + scale_and_softmax
        assert row["fwd_flops"] == 655_491_072
        assert row["out_elems"] == 128 * 768

    def test_heads_must_divide_width(self):
        with pytest.raises(ValueError, match="n_heads"):
            attention("a", 100, 12, 8)

    @given(heads=st.sampled_from([1, 2, 4, 8]), s=st.integers(1, 600))
    def test_params_ignore_seq_len_flops_per_token_grow(self, heads, s):
        a, b = attention("a", 64, heads, s), attention("b", 64, heads, s + 1)
        assert a["params"] == b["params"]
        assert a["fwd_flops"] * (s + 1) < b["fwd_flops"] * s


class TestMlp:
    def test_bert_base_feed_forward(self):
        row = mlp("m", 768, 3072, 128)
        assert row["type"] == "mlp"
        assert row["params"] == (768 * 3072 + 3072) + (3072 * 768 + 768) == 4_722_432
        # two matmuls of 128 x 768 x 3072 MACs, plus GELU on 128 x 3072 elements
        assert row["fwd_flops"] == 2 * 2 * 128 * 768 * 3072 + 128 * 3072 == 1_208_352_768


class TestPooling:
    def test_resnet_maxpool(self):
        row = pool2d("maxpool", 64, 3, 2, 1, 112, 112)
        assert row == {
            "name": "maxpool",
            "type": "pool",
            "params": 0,
            "fwd_flops": 9 * 64 * 56 * 56,
            "out_elems": 64 * 56 * 56,
            "tensors": (),
        }

    def test_global_average(self):
        row = adaptive_avg_pool("avgpool", 2048, 7, 7)
        assert (row["params"], row["fwd_flops"], row["out_elems"]) == (0, 100_352, 2048)


class TestMerge:
    def test_sums_params_and_flops_keeps_last_output(self):
        rows = [linear("a", 4, 3), elementwise("relu", 3)]
        assert merge("a", "linear", rows) == {
            "name": "a",
            "type": "linear",
            "params": 15,
            "fwd_flops": 24 + 3,
            "out_elems": 3,
            "tensors": (12, 3),  # the linear layer's weight and bias; ReLU has none
        }

    def test_unknown_type_raises(self):
        with pytest.raises(ValueError, match="type"):
            merge("a", "convolution", [linear("a", 1, 1)])


# --------------------------------------------------------------------------
# Whole models
# --------------------------------------------------------------------------

# Exact parameter totals of the reference implementations.
PARAM_TOTALS = {
    "alexnet": 61_100_840,  # torchvision AlexNet_Weights meta num_params
    "vgg16": 138_357_544,  # torchvision VGG16_Weights
    "googlenet": 6_624_904,  # torchvision GoogLeNet_Weights (aux heads removed)
    "inception_v3": 27_161_264,  # torchvision Inception_V3_Weights (AuxLogits included)
    "inception_v4": 42_679_816,  # timm inception_v4, 1000 classes
    "resnet50": 25_557_032,  # torchvision ResNet50_Weights
    "resnet101": 44_549_160,  # torchvision ResNet101_Weights
    "resnet152": 60_192_808,  # torchvision ResNet152_Weights
    "densenet121": 7_978_856,  # torchvision DenseNet121_Weights
    "densenet161": 28_681_000,  # torchvision DenseNet161_Weights
    "densenet201": 20_013_928,  # torchvision DenseNet201_Weights
    "bert_base": 109_482_240,  # HF BertModel(bert-base-uncased) incl. pooler
    "bert_large": 335_141_888,  # HF BertModel(bert-large-uncased) incl. pooler
    "gpt2": 124_439_808,  # HF GPT2LMHeadModel(gpt2), lm_head tied to wte
}


def test_every_architecture_has_a_total():
    assert set(ARCHITECTURES) == set(PARAM_TOTALS)


@pytest.mark.parametrize("name", sorted(PARAM_TOTALS))
class TestModelTables:
    def test_parameter_total_is_exact(self, name):
        assert int(build_table(name)["params"].sum()) == PARAM_TOTALS[name]

    def test_schema(self, name):
        table = build_table(name)
        assert tuple(table.columns) == COLUMNS
        assert all(table[c].dtype == "int64" for c in ("params", "fwd_flops", "out_elems"))
        assert set(table["type"]) <= LAYER_TYPES
        assert (table["params"] >= 0).all() and (table["fwd_flops"] >= 0).all()
        assert (table["out_elems"] > 0).all()

    def test_layer_names_are_unique(self, name):
        assert build_table(name)["name"].is_unique


def test_inception_v3_aux_head_is_the_difference_to_timm():
    # timm's inception_v3.tv_in1k model card gives 23.8 M params (no aux head).
    without_aux = build_table("inception_v3", aux_logits=False)
    assert int(without_aux["params"].sum()) == 23_834_568
    assert not without_aux["name"].str.startswith("AuxLogits").any()


def test_gpt2_lm_head_is_tied():
    table = build_table("gpt2").set_index("name")
    assert table.loc["lm_head", "params"] == 0
    assert table.loc["wte", "params"] == 50257 * 768


@pytest.mark.parametrize("name", ["bert_base", "gpt2"])
@settings(max_examples=15, deadline=None)
@given(seq_len=st.integers(1, 512))
def test_transformer_params_ignore_seq_len(name, seq_len):
    assert int(build_table(name, seq_len=seq_len)["params"].sum()) == PARAM_TOTALS[name]


@pytest.mark.parametrize("image_size", [64, 160, 256, 320])
def test_cnn_params_ignore_image_size(image_size):
    table = build_table("resnet50", image_size=image_size)
    assert int(table["params"].sum()) == PARAM_TOTALS["resnet50"]


# --------------------------------------------------------------------------
# Published FLOP figures
# --------------------------------------------------------------------------

# Giga multiply-accumulates per image at the default image size.  torchvision's
# figures are the `_ops` field of each `*_Weights.IMAGENET1K_V1.meta` in
# torchvision/models/*.py (torchvision 0.19; the docs label the column "GFLOPS",
# but the values count one per multiply-add: ResNet-50 4.089).
PUBLISHED_GMACS = {
    "alexnet": (0.714, "torchvision AlexNet_Weights meta _ops"),
    "vgg16": (15.47, "torchvision VGG16_Weights meta _ops"),
    "googlenet": (1.498, "torchvision GoogLeNet_Weights meta _ops"),
    "inception_v3": (5.713, "torchvision Inception_V3_Weights meta _ops"),
    "resnet50": (4.089, "torchvision ResNet50_Weights meta _ops"),
    "resnet101": (7.801, "torchvision ResNet101_Weights meta _ops"),
    "resnet152": (11.514, "torchvision ResNet152_Weights meta _ops"),
    "densenet121": (2.834, "torchvision DenseNet121_Weights meta _ops"),
    "densenet161": (7.728, "torchvision DenseNet161_Weights meta _ops"),
    "densenet201": (4.291, "torchvision DenseNet201_Weights meta _ops"),
    # OpenVINO Open Model Zoo, models/public/googlenet-v4-tf/googlenet-v4-tf.md:
    # "GFLOPs 24.584" (2 FLOPs per MAC) at 299x299.
    "inception_v4": (24.584 / 2, "OpenVINO open_model_zoo googlenet-v4-tf"),
}
TOLERANCE = 0.05  # our count adds norms, activations and pooling


@pytest.mark.parametrize("name", sorted(PUBLISHED_GMACS))
def test_cnn_flops_match_published(name):
    gmacs, source = PUBLISHED_GMACS[name]
    ours = build_table(name)["fwd_flops"].sum() / 2e9
    assert ours == pytest.approx(gmacs, rel=TOLERANCE), source


def megatron_forward_flops(s, n_layers, h, vocab=0):
    """Forward FLOPs per sequence: 24*s*l*h^2 + 4*s^2*l*h + 2*s*h*V.

    The forward share (one quarter of the transformer terms, one third of the
    logit term) of the per-iteration count in Narayanan et al., "Efficient
    Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
    SC 2021, arXiv:2104.04473, appendix on FLOP counting.  For BERT there is no
    logit layer (V = 0).  Embedding parameters do no multiply-adds, which is
    why this is well below 2 x 110 M x s for BERT-base.
    """
    return 24 * s * n_layers * h * h + 4 * s * s * n_layers * h + 2 * s * h * vocab


@pytest.mark.parametrize(
    ("name", "seq_len", "n_layers", "h", "vocab"),
    [
        ("bert_base", 128, 12, 768, 0),
        ("bert_base", 512, 12, 768, 0),
        ("bert_large", 128, 24, 1024, 0),
        ("gpt2", 1024, 12, 768, 50257),
        ("gpt2", 128, 12, 768, 50257),
    ],
)
def test_transformer_flops_match_megatron_formula(name, seq_len, n_layers, h, vocab):
    ours = build_table(name, seq_len=seq_len)["fwd_flops"].sum()
    expected = megatron_forward_flops(seq_len, n_layers, h, vocab)
    assert ours == pytest.approx(expected, rel=TOLERANCE)


# --------------------------------------------------------------------------
# Registry, errors and generated files
# --------------------------------------------------------------------------


class TestBuildTable:
    def test_unknown_name_lists_valid_names(self):
        with pytest.raises(ValueError, match="resnet50") as info:
            build_table("resnet51")
        assert "gpt2" in str(info.value)

    def test_unknown_keyword_raises(self):
        with pytest.raises(ValueError, match="seq_len"):
            build_table("resnet50", seq_len=128)

    def test_seq_len_beyond_position_table_raises(self):
        with pytest.raises(ValueError, match="seq_len"):
            build_table("bert_base", seq_len=513)

    def test_image_too_small_raises(self):
        with pytest.raises(ValueError, match="too small"):
            build_table("alexnet", image_size=16)

    def test_non_integer_image_size_raises(self):
        with pytest.raises(ValueError, match="image_size"):
            build_table("vgg16", image_size=224.0)

    def test_every_architecture_cites_a_source(self):
        assert all(a.source and a.name == key for key, a in ARCHITECTURES.items())

    def test_default_kwargs_are_read_only(self):
        with pytest.raises(TypeError):
            ARCHITECTURES["resnet50"].default_kwargs["image_size"] = 1


def test_generated_files_match():
    """data/models/<name>.csv is exactly build_table(name) at default kwargs."""
    assert {p.stem for p in MODELS_DIR.glob("*.csv")} == set(ARCHITECTURES)
    for name in ARCHITECTURES:
        # (the tensors column is text: an empty cell is a parameter-free layer, not a missing value)
        on_disk = pd.read_csv(MODELS_DIR / f"{name}.csv", dtype={"tensors": str}, keep_default_na=False)
        pd.testing.assert_frame_equal(on_disk, build_table(name), check_dtype=False, obj=name)
