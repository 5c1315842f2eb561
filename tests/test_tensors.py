"""Gradients as frameworks have them: one per parameter tensor (`sim.tensors`).

Hand-worked cases (a conv-bn row's three tensors, ResNet-50's 161, WFBP over
the tensors of a two-layer model), the zoo's tensor counts against
``len(list(model.parameters()))`` of the reference implementations, the CSV
column's errors, and invariants of the tensor view.
"""

from __future__ import annotations

import dataclasses
import io
import json

import numpy as np
import pandas as pd
import pytest
from helpers import make_model, user_cluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sim
from sim.cli import main
from sim.errors import SimInputError
from sim.schedulers.names import WFBP
from sim.schedulers.registry import scheduler_names
from sim.tensors import DEFAULT_GRADIENTS, GRADIENTS
from sim.zoo import ARCHITECTURES, build_table, conv_bn

#: ``len(list(model.parameters()))`` of each reference implementation: torchvision
#: 0.19 for the CNNs (inception_v3 with its AuxLogits; googlenet without the aux heads),
#: timm for inception_v4, transformers' BertModel (with pooler) and GPT2LMHeadModel
#: (lm_head tied to wte, so no tensor of its own). Each follows from the module
#: structure: resnet50 = 53 conv-bn x 3 + fc 2 = 161; vgg16 = 13 conv x 2 + 3 fc x 2 = 32;
#: bert_base = 3 embeddings + LN 2 + 12 x 16 + pooler 2 = 199; gpt2 = 2 + 12 x 12 + ln_f 2 = 148.
TENSOR_COUNTS = {
    "alexnet": 16, "vgg16": 32, "googlenet": 173, "inception_v3": 292, "inception_v4": 449,
    "resnet50": 161, "resnet101": 314, "resnet152": 467, "densenet121": 364, "densenet161": 484,
    "densenet201": 604, "bert_base": 199, "bert_large": 391, "gpt2": 148,
}


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_conv_bn_row_has_three_tensors_of_the_right_sizes():
    row = conv_bn("conv1", 3, 64, 7, 2, 3, 224, 224)
    assert row["tensors"] == (64 * 3 * 7 * 7, 64, 64)  # conv.weight 9408, bn.weight, bn.bias
    assert build_table("resnet50").set_index("name").loc["conv1", "tensors"] == "64;64;9408"  # backward order


def test_resnet50_has_161_tensors_totalling_its_parameters():
    model = sim.load_model("resnet50")
    assert model.num_tensors == 161
    assert sum(sum(t) for t in model.tensor_params) == model.total_params == 25_557_032


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_zoo_tensor_counts_match_the_reference_implementations(name):
    model = sim.load_model(name)
    assert model.num_tensors == TENSOR_COUNTS[name]
    view = model.timed(gpu="v100-sxm2", batch_size=8).tensor_view()
    assert int(np.count_nonzero(view.params)) == TENSOR_COUNTS[name]


def _two_layer_model(**kw):
    """L0: 300 parameters as two tensors (ready in backward: 100 first, then 200); L1: 600, one."""
    frame = pd.DataFrame({"name": ["L0", "L1"], "params": [300, 600], "fwd_ms": [1.0, 2.0],
                          "bwd_ms": [3.0, 6.0], "tensors": ["100;200", ""]})
    return sim.model_from_frame(frame, "two", **kw)


def test_wfbp_over_the_tensors_of_a_two_layer_model_by_hand():
    """alpha 1 ms, beta 1 us/B, fp32. Forward 0-3 ms; backward of L1 3-9 (its 2400 B ready at 9),
    then L0's share by parameters: the 100-tensor 9-10, the 200-tensor 10-12.
    WFBP: L1 9 -> 12.4 (1 + 2.4 ms); L0.1 (400 B) 12.4 -> 13.8; L0.0 (800 B) 13.8 -> 15.6.
    Per layer, L0's 1200 B go at once: 12.4 -> 14.6."""
    cluster = user_cluster(gpus=4, alpha_s=1e-3, beta_s_per_byte=1e-6)
    tensors = sim.simulate(_two_layer_model(), cluster, WFBP, batch_size=1, gradients="tensor")
    layers = sim.simulate(_two_layer_model(), cluster, WFBP, batch_size=1, gradients="layer")
    assert tensors.iteration_time_s == pytest.approx(15.6e-3, rel=1e-12)
    assert layers.iteration_time_s == pytest.approx(14.6e-3, rel=1e-12)
    assert tensors.groups == [["L1"], ["L0.1"], ["L0.0"]]
    assert layers.groups == [["L1"], ["L0"]]
    assert (tensors.metrics["gradients"], layers.metrics["gradients"]) == ("tensor", "layer")
    assert tensors.metrics["params"] == layers.metrics["params"] == 900
    comm = tensors.timeline.query("kind == 'comm' and iteration == 0")
    assert list(comm["layer"]) == ["L1", "L0", "L0"]  # the layer view: each tensor's layer
    assert list(comm["bytes"]) == [2400, 400, 800]
    backward = tensors.timeline.query("kind == 'backward' and iteration == 0")
    assert backward["duration_s"].to_numpy() == pytest.approx([6e-3, 1e-3, 2e-3])
    assert list(backward["layer"]) == ["L1", "L0", "L0"] and backward["name"].iloc[1].endswith("L0.1")


def test_tensor_view_names_sizes_and_split_times():
    view = _two_layer_model().tensor_view()
    assert view.layer_names == ("L0.0", "L0.1", "L1")
    assert view.tensor_layers == ("L0", "L0", "L1")
    assert list(view.params) == [200, 100, 600]
    assert view.fwd_s * 1e3 == pytest.approx([2 / 3, 1 / 3, 2.0])
    assert view.bwd_s * 1e3 == pytest.approx([2.0, 1.0, 6.0])
    assert view.tensor_view() is view  # a view's view is the view


def test_a_model_without_tensor_info_runs_exactly_as_before():
    model = make_model([1000, 0, 5000], [1.0, 0.5, 2.0], [2.0, 0.5, 4.0])
    cluster = user_cluster()
    a = sim.simulate(model, cluster, WFBP, batch_size=4, gradients="tensor")
    b = sim.simulate(model, cluster, WFBP, batch_size=4, gradients="layer")
    assert a.iteration_time_s == b.iteration_time_s and a.groups == b.groups
    assert model.tensor_view() is model


def test_measured_comm_keeps_layer_granularity():
    frame = pd.DataFrame({"name": ["a", "b"], "params": [10, 20], "fwd_ms": [1, 1], "bwd_ms": [1, 1],
                          "comm_ms": [0.5, 0.5], "tensors": ["5;5", "20"]})
    model = sim.model_from_frame(frame, "m")
    assert model.tensor_view() is model


def test_layers_frame_round_trips_the_tensors():
    model = _two_layer_model()
    frame = model.layers_frame()
    assert list(frame["tensors"]) == ["100;200", "600"]
    text = io.StringIO()
    frame.to_csv(text, index=False)
    back = sim.model_from_frame(pd.read_csv(io.StringIO(text.getvalue())), "two")
    assert back.tensor_params == model.tensor_params == ((100, 200), (600,))


@pytest.mark.parametrize("cell, message", [
    ("100;abc", r"row 2, column 'tensors': 'abc' is not a number"),
    ("100;0;200", r"row 2, column 'tensors': '0' is not a whole number >= 1"),
    ("100;-5", r"row 2, column 'tensors': '-5' is not a whole number >= 1"),
    ("100;2.5", r"row 2, column 'tensors': '2.5' is not a whole number >= 1"),
    ("100;100", r"row 2, column 'tensors': the tensors add up to 200 parameters, the layer has 300"),
])
def test_bad_tensors_cells_name_the_row_and_column(cell, message):
    frame = pd.DataFrame({"name": ["L0"], "params": [300], "fwd_ms": [1.0], "bwd_ms": [1.0], "tensors": [cell]})
    with pytest.raises(SimInputError, match=message):
        sim.model_from_frame(frame, "m")


def test_bad_tensor_params_given_directly_are_refused():
    model = _two_layer_model()
    with pytest.raises(SimInputError, match="layer 'L0'"):
        dataclasses.replace(model, tensor_params=((100, 100), (600,)))
    with pytest.raises(SimInputError, match="tensor_params has 1 entries for 2 layers"):
        dataclasses.replace(model, tensor_params=((300,),))
    lists = dataclasses.replace(model, tensor_params=[[100, 200], [600]])  # lists become tuples
    assert lists.tensor_params == ((100, 200), (600,))


def test_unknown_gradients_choice_is_refused():
    with pytest.raises(SimInputError, match="gradients must be one of tensor, layer"):
        sim.simulate(_two_layer_model(), user_cluster(), WFBP, batch_size=1, gradients="blob")


def test_default_gradients_is_one_of_the_choices_and_the_model_may_carry_its_own():
    assert DEFAULT_GRADIENTS in GRADIENTS
    cluster = user_cluster(gpus=4, alpha_s=1e-3, beta_s_per_byte=1e-6)
    as_layers = dataclasses.replace(_two_layer_model(), gradients="layer")
    res = sim.simulate(as_layers, cluster, WFBP, batch_size=1)
    assert res.metrics["gradients"] == "layer" and res.iteration_time_s == pytest.approx(14.6e-3)
    # the run's argument wins over the model's own choice
    assert sim.simulate(as_layers, cluster, WFBP, batch_size=1, gradients="tensor").metrics["gradients"] == "tensor"


def test_sweep_rows_carry_gradients_and_params():
    frame = sim.sweep(_two_layer_model(), user_cluster(), gpus=[2, 4], schedulers=[WFBP], batch_size=1,
                      gradients="tensor")
    assert list(frame["gradients"]) == ["tensor"] * 2 and list(frame["params"]) == [900, 900]
    assert list(frame["num_messages"]) == [3, 3]


def test_cli_gradients_flag(tmp_path):
    path = tmp_path / "two.csv"
    _two_layer_model().layers_frame().to_csv(path, index=False)
    out = {}
    for choice in GRADIENTS:
        code, text, _ = run_cli("run", "--model", str(path), "--gpus", "4", "--alpha", "0.001", "--beta", "1e-6",
                                "--batch-size", "1", "--gradients", choice, "--format", "json")
        assert code == 0
        out[choice] = json.loads(text)
    assert out["tensor"]["num_messages"] == 3 and out["layer"]["num_messages"] == 2
    assert out["tensor"]["iteration_time_s"] == pytest.approx(15.6e-3)
    assert out["layer"]["params"] == 900


# --------------------------------------------------------------------------
# Invariants
# --------------------------------------------------------------------------


@st.composite
def tensor_models(draw):
    n = draw(st.integers(1, 6))
    params = draw(st.lists(st.integers(0, 3_000_000), min_size=n, max_size=n))
    if not any(params):
        params[-1] = 1000
    tensors = []
    for p in params:
        cuts = sorted(draw(st.sets(st.integers(1, p - 1), max_size=3))) if p > 1 else []
        tensors.append(tuple(np.diff([0, *cuts, p]).tolist()) if p else ())
    fwd = draw(st.lists(st.floats(0.01, 5.0), min_size=n, max_size=n))
    bwd = draw(st.lists(st.floats(0.01, 10.0), min_size=n, max_size=n))
    return dataclasses.replace(make_model(params, fwd, bwd), tensor_params=tuple(tensors))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=tensor_models())
def test_tensor_view_preserves_params_compute_and_layer_ready_times(model):
    view = model.tensor_view()
    assert view.total_params == model.total_params
    assert view.num_layers == sum(max(len(t), 1) for t in model.tensor_params)
    assert view.fwd_s.sum() == pytest.approx(model.fwd_s.sum(), rel=1e-12)
    assert view.bwd_s.sum() == pytest.approx(model.bwd_s.sum(), rel=1e-12)
    for layer, sizes in zip(model.layer_names, model.tensor_params, strict=True):
        rows = [i for i, p in enumerate(view.tensor_layers) if p == layer]
        assert [int(view.params[i]) for i in rows][::-1] == (list(sizes) or [0])  # backward order
        assert view.bwd_s[rows].sum() == pytest.approx(model.bwd_s[model.layer_names.index(layer)], rel=1e-12)
    # a layer's last gradient is ready when its backward ends, as in the layer view
    ready_layer = np.cumsum(model.bwd_s[::-1])[::-1]
    ready_view = np.cumsum(view.bwd_s[::-1])[::-1]
    for i, layer in enumerate(model.layer_names):
        first_row = view.tensor_layers.index(layer)
        assert ready_view[first_row] == pytest.approx(ready_layer[i], rel=1e-12)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=tensor_models())
def test_every_scheduler_runs_on_the_tensor_view(model):
    cluster = user_cluster(gpus=4)
    for name in scheduler_names():
        res = sim.simulate(model, cluster, name, batch_size=2, gradients="tensor")
        assert res.metrics["gradients"] == "tensor" and res.metrics["params"] == model.total_params
        assert res.iteration_time_s >= model.fwd_s.sum() + model.bwd_s.sum() - 1e-12
        sent = sorted(i for group in res.plan.groups for i in group)
        assert sent == sorted(set(sent)) and len(sent) <= int(np.count_nonzero(res.model.params))
