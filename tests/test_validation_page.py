"""The Validation page: its figures, the case hand-over, and the page under AppTest."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

import sim
from dashboard import validation_view
from dashboard.state import DEFAULTS, UPLOAD, config_from_state
from sim.calib.validation import _cluster
from sim.validation import case_model, load_cases, run_validation

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "data" / "reference"  # copied into the repo, see its README


@pytest.fixture(scope="module")
def results():
    return run_validation(reference_dir=REF)


def test_parity_figure_has_one_point_per_case_and_the_identity_line(results):
    fig = validation_view.parity_figure(results)
    points = sum(len(t.x) for t in fig.data if t.mode == "markers")
    assert points == int((results.status == "ok").sum())
    identity = fig.data[0]
    assert list(identity.x) == list(identity.y)


def test_error_figure_is_sorted(results):
    bars = validation_view.error_figure(results).data[0]
    assert list(bars.x) == sorted(bars.x)


def test_a_plain_zoo_case_maps_exactly_onto_the_sidebar():
    row, model = case_model("ddl-resnet50-MG-WFBP-16gpu")
    settings, note = validation_view.case_settings(row, model)
    assert settings["model"] == "resnet50" and settings["gpus"] == 16 and settings["per_node"] == 4
    assert settings["calib"] and settings["calib_s"] == pytest.approx(64 / 253.1)
    assert note.startswith("exact")
    # the sidebar's settings reproduce the validation number
    assert settings["coll"] == "nccl"  # the survey ran NCCL 2.4: ring or tree per message size
    cluster = sim.Cluster(gpus=16, gpus_per_node=4, network="10gbe", intra="pcie3", gpu="v100-pcie",
                          collective=settings["coll"])
    res = sim.simulate(sim.load_model("resnet50"), cluster, "mgwfbp", batch_size=64,
                       calibrate_iteration_s=settings["calib_s"])
    measured = run_validation(reference_dir=REF).set_index("case").loc["ddl-resnet50-MG-WFBP-16gpu"]
    assert res.metrics["throughput_samples_per_s"] == pytest.approx(measured.simulated, rel=1e-9)


def test_every_case_hands_over_the_cluster_it_was_validated_on():
    """Network, intra link, node topology (NVIDIA's DGX-1 rows: dgx1-4nic), collective and GPUs: the
    Timeline's cluster costs each message as `validate` does (the compute goes over as above)."""
    for row in load_cases().itertuples(index=False):
        settings, _ = validation_view.case_settings(row._asdict(), sim.load_model("resnet50"))
        shown = config_from_state({**DEFAULTS, **settings}).cluster()
        assert shown.comm_cost() == _cluster(row).comm_cost(), row.case
        assert shown.topology == row.topology
        assert shown.framework == _cluster(row).framework, row.case  # B-Caffe's mpi: the Timeline ran auto


def test_a_transformer_case_goes_over_as_a_layer_table():
    row, model = case_model("ddl-bert_base-WFBP-A2A-8gpu")
    settings, note = validation_view.case_settings(row, model)
    assert settings["model"] == UPLOAD and settings["csv_text"].startswith("name,params,fwd_ms,bwd_ms")
    assert "update time" in note


def test_validation_page_runs_and_shows_the_summary():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/validation.py").run()
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert {"Median |error|", "Held-out cases", "Bias"} <= set(labels)
    assert any("A Quantitative Survey" in md.value for md in at.markdown)
