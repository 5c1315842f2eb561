"""Importers and the fit-network command on the real logs in data/reference."""

import io
import json
from pathlib import Path

import pytest

import sim
from sim.cli import main
from sim.importers import bcaffe_layers, parse_bcaffe_blobs

REF = Path(__file__).resolve().parent.parent / "data" / "reference" / "bcaffe_k80_10gbe"  # see its README


def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main([str(a) for a in argv], out=out, err=err), out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "log, dumps, backward_ms, comm_ms",
    [  # the totals in data/reference/README.md's table, to its 0.1 ms rounding
        ("tmp8comm.log", 2, 205.3, 310.7),
        ("tmp8ocomm.log", 2, 202.3, 319.4),
        ("tmp4ocomm.log", 1, 202.0, 257.6),
    ],
)
def test_bcaffe_logs_match_the_published_totals(log, dumps, backward_ms, comm_ms):
    text = (REF / log).read_text()
    assert len(parse_bcaffe_blobs(text)) == dumps
    layers = bcaffe_layers(text, log)
    assert len(layers) == 64  # Caffe GoogLeNet: 57 conv + 1 fc + 6 in the two auxiliary heads
    assert int(layers.params.sum()) == 13_379_136  # the README's parameter count
    assert layers.bwd_ms.sum() == pytest.approx(backward_ms, abs=0.05)
    assert layers.comm_ms.sum() == pytest.approx(comm_ms, abs=0.05)
    assert (layers.fwd_ms == layers.bwd_ms / 2).all()


def test_import_bcaffe_cli_writes_a_loadable_csv(tmp_path):
    target = tmp_path / "g.csv"
    code, out, _ = cli("import-bcaffe", REF / "tmp8comm.log", "-o", target)
    assert code == 0 and "64 layers" in out
    model = sim.load_model(target)
    assert model.comm_s is not None and model.num_layers == 64


def test_bcaffe_hand_made_log_pairs_weight_and_bias():
    text = (
        "I0 x.cpp:1] [0, 100, 2000.0, 500, 0]\n"
        "I0 x.cpp:1] [1, 10, 2000.0, 0, 0]\n"
        "I0 x.cpp:1] [2, 300, 1000.0, 700, 0]\n"
    )
    layers = bcaffe_layers(text)
    assert layers.params.tolist() == [110, 300]
    assert layers.bwd_ms.tolist() == [2.0, 1.0]
    assert layers.comm_ms.tolist() == pytest.approx([0.5, 0.7])


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "no blob lines"),
        ("garbage line\n", r"line 1: no \[blob"),
        ("[0, 1, 2, 3]\n", "expected 5 numbers"),
        ("[0, 1, x, 3, 4]\n", "non-number"),
        ("[0, 1, 2, 3, 4]\n[2, 1, 2, 3, 4]\n", "blob 2 follows blob 0"),
        ("[0, 1, 0, 3, 4]\n", "no backward times"),
    ],
)
def test_bcaffe_bad_logs(text, match):
    with pytest.raises(sim.SimInputError, match=match):
        bcaffe_layers(text)


def test_fit_network_on_the_real_osu_log():
    code, out, _ = cli("fit-network", REF / "allreduce8.log", "--format", "json")
    assert code == 0
    fit = json.loads(out)
    assert fit["ranks"] == 8 and fit["n_points"] > 200
    # 10GbE bound: no all-reduce of 8 ranks beats 2*7/8 * 8/10e9 = 1.4e-9 s/B
    assert 1.4e-9 <= fit["beta_s_per_byte"] <= 5 * 1.4e-9
    assert 0 < fit["r2"] <= 1


def test_fit_network_saves_a_preset_that_network_accepts(tmp_path, monkeypatch):
    presets = tmp_path / "nets.csv"
    monkeypatch.setenv("SSGD_NETWORKS", str(presets))
    code, _, err = cli("fit-network", REF / "allreduce8.log", "--save", "k80lab", "--line-rate-gbps", "10")
    assert code == 0, err
    code, out, err = cli("run", "--model", "tests/data/tiny.csv", "--gpus", "8", "--network", "k80lab",
                         "--format", "json")
    assert code == 0, err
    assert json.loads(out)["network"] == "k80lab"
    code, _, err = cli("fit-network", REF / "allreduce8.log", "--save", "k80lab", "--line-rate-gbps", "10")
    assert code == 2 and "exists already" in err


@pytest.mark.parametrize(
    "argv, match",
    [
        (["fit-network", "no-such.log"], "cannot read"),
        (["import-bcaffe", "no-such.log", "-o", "x.csv"], "cannot read"),
    ],
)
def test_importer_cli_errors(argv, match):
    code, _, err = cli(*argv)
    assert code == 2 and match in err and err.count("\n") == 1


def test_fit_network_save_needs_line_rate(tmp_path):
    log = tmp_path / "osu.log"
    log.write_text("# OSU MPI Allreduce Latency Test\n# Size Avg Latency(us)\n4 10.0\n1024 20.0\n1048576 900.0\n")
    code, _, err = cli("fit-network", log, "--gpus", "4", "--save", "x")
    assert code == 2 and "--line-rate-gbps" in err
