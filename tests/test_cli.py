"""The CLI: outputs, and every error path gives one line and exit code 2."""

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import sim
from sim.cli import main

TINY = str(Path(__file__).parent / "data" / "tiny.csv")


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_run_json_has_the_documented_keys():
    code, out, _ = run_cli("run", "--model", TINY, "--gpus", "4", "--scheduler", "mgwfbp", "--format", "json")
    assert code == 0
    data = json.loads(out)
    for key in ("iteration_time_s", "throughput_samples_per_s", "compute_s", "comm_s", "comm_hidden_s",
                "comm_exposed_s", "speedup", "scaling_efficiency", "scheduler", "gpus", "groups"):
        assert key in data
    api = sim.simulate(sim.load_model(TINY), sim.Cluster(gpus=4), "mgwfbp", batch_size=32)
    assert data["iteration_time_s"] == pytest.approx(api.iteration_time_s, rel=1e-12)
    assert data["groups"] == api.groups


def test_run_with_alpha_beta():
    code, out, _ = run_cli("run", "--model", TINY, "--gpus", "2", "--scheduler", "synceasgd",
                           "--alpha", "0.001", "--beta", "1e-9", "--format", "json")
    assert code == 0
    # compute 8.5 ms, one message of 17,004,000 bytes: 1 ms + 17.004 ms
    assert json.loads(out)["iteration_time_s"] == pytest.approx(8.5e-3 + 1e-3 + 17.004e-3, rel=1e-12)


def test_sweep_json_and_csv():
    code, out, _ = run_cli("sweep", "--model", TINY, "--gpus", "1,2,4", "--scheduler", "wfbp,optimal", "--format", "json")
    assert code == 0
    rows = json.loads(out)
    assert [(r["gpus"], r["scheduler"]) for r in rows] == [
        (1, "wfbp"), (1, "optimal"), (2, "wfbp"), (2, "optimal"), (4, "wfbp"), (4, "optimal")
    ]
    code, out, _ = run_cli("sweep", "--model", TINY, "--gpus", "1,2", "--scheduler", "wfbp", "--format", "csv")
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[0].startswith("model,scheduler,gpus") and len(lines) == 3


def test_trace_writes_chrome_json(tmp_path):
    target = tmp_path / "t.json"
    code, out, _ = run_cli("trace", "--model", TINY, "--gpus", "4", "--iterations", "2", "-o", str(target))
    assert code == 0
    events = json.loads(target.read_text())["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == 2 * (2 + 4 + 4 + 3 + 1)  # io,h2d, 4 fwd, 4 bwd, 3 msgs, update


def test_trace_writes_to_a_name_of_the_longest_length(tmp_path):
    """A 250-byte file name is legal, but the partial file beside it took the name and 17 characters more
    (File name too long; hostile review, 2026-11-25)."""
    target = tmp_path / ("t" * 245 + ".json")
    code, _, err = run_cli("trace", "--model", TINY, "--gpus", "4", "-o", str(target))
    assert code == 0, err
    assert json.loads(target.read_text())["traceEvents"] and [p.name for p in tmp_path.iterdir()] == [target.name]


def test_list_json():
    code, out, _ = run_cli("list", "schedulers", "--format", "json")
    assert code == 0
    assert {r["name"] for r in json.loads(out)} == set(sim.SCHEDULERS)


def write(tmp_path, text, name="m.csv"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize(
    "argv, match",
    [
        (["run", "--model", "no-such-model"], "unknown model"),
        (["run", "--model", "missing.csv"], "does not exist"),
        (["run", "--model", TINY, "--gpus", "0"], "--gpus"),
        (["run", "--model", TINY, "--gpus", "-3"], "--gpus"),
        (["run", "--model", TINY, "--scheduler", "fifo"], "unknown scheduler 'fifo'"),
        (["run", "--model", TINY, "--network", "wifi", "--gpus", "2"], "unknown network 'wifi'"),
        (["run", "--model", TINY, "--collective", "magic", "--gpus", "2"], "unknown collective"),
        (["run", "--model", TINY, "--gpus", "6", "--gpus-per-node", "4"], "whole nodes"),
        (["run", "--model", TINY, "--alpha", "0.001"], "--alpha and --beta"),
        (["run", "--model", TINY, "--bucket-mb", "4"], "--bucket-mb does nothing for scheduler wfbp; it applies to: bucket, ddp"),
        (["run", "--model", TINY, "--bucket-mb", "0", "--scheduler", "bucket"], "--bucket-mb"),
        (["run", "--model", TINY, "--precision", "fp8"], "--precision"),
        (["run", "--model", TINY, "--batch-size", "x"], "--batch-size"),
        (["sweep", "--model", TINY, "--gpus", "1,,x"], "--gpus"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
    ],
)
def test_bad_flags_give_one_line_and_exit_2(argv, match):
    code, out, err = run_cli(*argv)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1
    assert match in err


@pytest.mark.parametrize(
    "text, match",
    [
        ("", "empty file"),
        ("name,params,fwd_ms\nconv,1,1\n", "missing column(s) bwd_ms"),
        ("name,params,fwd_ms,bwd_ms\nconv,1,abc,1\n", "row 2, column 'fwd_ms'"),
        ("name,params,fwd_ms,bwd_ms\nconv,1,1,1\nfc,-5,1,1\n", "row 3, column 'params'"),
        ("name,params,fwd_ms,bwd_ms\nconv,1,1,nan\n", "row 2, column 'bwd_ms'"),
        ("name,params,fwd_ms,bwd_ms\nconv,1,1,1\nconv,1,1,1\n", "duplicate layer name 'conv'"),
        ("name,params,fwd_ms,bwd_ms\nconv,1.5,1,1\n", "not a whole number"),
        ("name,params,fwd_ms,bwd_ms\n", "no layer rows"),
    ],
)
def test_malformed_csv_names_row_and_column(tmp_path, text, match):
    code, _, err = run_cli("run", "--model", write(tmp_path, text))
    assert code == 2
    assert match in err and err.count("\n") == 1


def test_module_entry_point_never_shows_a_traceback():
    proc = subprocess.run([sys.executable, "-m", "sim", "run", "--model", "nope.csv"],
                          capture_output=True, text=True, cwd=Path(__file__).parent.parent)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("error:")


def test_a_sweep_that_fits_nowhere_says_so():
    """sweep --fits-only --format table with every configuration over the GPUs' memory: one sentence, not
    pandas' "Empty DataFrame" (the hostile review)."""
    out, err = io.StringIO(), io.StringIO()
    code = main(["sweep", "--model", "gpt2", "--gpus", "2", "--batch-size", "100000", "--fits-only", "--format",
                 "table"], out=out, err=err)
    assert code == 0 and "Empty DataFrame" not in out.getvalue()
    assert out.getvalue().startswith("no configuration fits in its GPUs' memory (--fits-only)")
