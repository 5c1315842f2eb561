"""The command line's outputs and round trips (hostile review, 2026-11-25): what a script relies on.

Each test failed before its fix: a reason the OS gave (not None), one line for
Ctrl-C and a full disk, no UnicodeEncodeError, the same CSV columns in the same
order, a printed command that reproduces the run, no input overwritten, a preset
file that stays a link or a device, a unit in the column's name.
"""

import io
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from sim.catalog import save_network
from sim.cli import main
from sim.errors import SimInputError

ROOT = Path(__file__).resolve().parent.parent
TINY = str(ROOT / "tests" / "data" / "tiny.csv")
KINETO = str(ROOT / "tests" / "data" / "kineto" / "nccl_data.json.gz")
BCAFFE = str(ROOT / "data" / "reference" / "bcaffe_k80_10gbe" / "tmp8comm.log")
NCCL_LOG = str(ROOT / "tests" / "data" / "nccl_tests_h100_2node_tree.txt")


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def sim_process(*argv, **kwargs):
    env = {**os.environ, "PYTHONPATH": str(ROOT), **kwargs.pop("env", {})}
    streams = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **kwargs}
    return subprocess.run([sys.executable, "-m", "sim", *map(str, argv)], cwd=ROOT, env=env, text=True,
                          timeout=120, **streams)


# ---------------------------------------------------------------- files written


def test_import_bcaffe_into_a_missing_folder_says_why(tmp_path):
    code, _, err = run_cli("import-bcaffe", BCAFFE, "-o", tmp_path / "no" / "layers.csv")
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: -o: cannot write")
    assert "No such file or directory" in err and "None" not in err


@pytest.mark.parametrize("command", ["import-trace", "import-bcaffe", "trace"])
def test_an_output_is_never_the_input_file(tmp_path, command):
    if command == "import-trace":
        source = tmp_path / "trace.json.gz"
        source.write_bytes(Path(KINETO).read_bytes())
        argv = ["import-trace", source, "-o", tmp_path / "." / "trace.json.gz"]
    elif command == "import-bcaffe":
        source = tmp_path / "tmp8comm.log"
        source.write_bytes(Path(BCAFFE).read_bytes())
        argv = ["import-bcaffe", source, "-o", source]
    else:
        source = tmp_path / "layers.csv"
        source.write_bytes(Path(TINY).read_bytes())
        argv = ["trace", "--model", source, "--gpus", "2", "-o", source]
    before = source.read_bytes()
    code, _, err = run_cli(*argv)
    assert code == 2 and err.count("\n") == 1
    assert "-o:" in err and "the input file" in err
    assert source.read_bytes() == before


def test_import_trace_report_and_layer_csv_are_two_files(tmp_path):
    code, _, err = run_cli("import-trace", KINETO, "-o", tmp_path / "x.csv", "--report", tmp_path / "x.csv")
    assert code == 2 and err.startswith("error: --report:") and "the file of -o" in err
    assert not (tmp_path / "x.csv").exists()


def test_trace_to_a_name_that_is_not_utf8(tmp_path):
    target = os.fsdecode(os.fsencode(str(tmp_path)) + b"/tr\xff.json")
    code, out, err = run_cli("trace", "--model", TINY, "--gpus", "2", "-o", target)
    assert (code, err) == (0, "")
    assert json.loads(Path(target).read_text())["traceEvents"]


# ---------------------------------------------------------------- stdout and stderr


def test_stdout_on_a_full_disk_is_one_line_not_a_traceback():
    if not Path("/dev/full").is_char_device():
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        res = sim_process("run", "--model", TINY, "--gpus", "2", "--format", "json", stdout=full)
    assert res.returncode == 2
    assert res.stderr == "error: cannot write the output: No space left on device\n"


def test_a_progress_bar_that_cannot_be_drawn_does_not_stop_the_sweep():
    if not Path("/dev/full").is_char_device():
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        res = sim_process("sweep", "--model", TINY, "--gpus", "1,2", "--progress", "on", "--format", "csv", stderr=full)
    assert res.returncode == 0
    assert len(pd.read_csv(io.StringIO(res.stdout))) == 4


def test_a_closed_stdout_is_no_traceback():
    res = subprocess.run(f"{sys.executable} -m sim list >&-", shell=True, cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert (res.returncode, res.stderr) == (0, "")


@pytest.mark.parametrize("argv", [["run", "--gpus", "2"], ["sweep", "--gpus", "1,2", "--format", "csv"]])
def test_non_ascii_names_on_an_ascii_terminal(tmp_path, argv):
    model = tmp_path / "modèle_α.csv"
    model.write_bytes(Path(TINY).read_bytes())
    res = sim_process(argv[0], "--model", model, *argv[1:], env={"PYTHONIOENCODING": "ascii"})
    assert (res.returncode, res.stderr) == (0, "")
    assert "mod\\xe8le_\\u03b1" in res.stdout


def test_ctrl_c_in_main_is_one_line(monkeypatch):
    import sim.cli.run as run_command

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_command, "run_one", interrupted)
    try:
        code, out, err = run_cli("run", "--model", TINY)
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped main()")
    assert (code, out, err) == (130, "", "interrupted\n")


def test_ctrl_c_during_a_parallel_sweep_is_one_line():
    """SIGINT to the whole process group (as Ctrl-C sends it) once the pool has finished a chunk: the
    workers end quietly and the sweep says ``interrupted``, without a traceback from any process."""
    gpus = ",".join(str(p) for p in range(2, 2001))
    proc = subprocess.Popen(
        [sys.executable, "-m", "sim", "sweep", "--model", "densenet201", "--gradients", "tensor", "--gpus", gpus,
         "--scheduler", "wfbp,mgwfbp,optimal,ddp,bucket,horovod", "--jobs", "2", "--progress", "on",
         "--format", "csv"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        start_new_session=True)
    try:
        first = proc.stderr.read(len("\rsweep ["))  # the first chunk is done: the workers are running
        os.killpg(proc.pid, signal.SIGINT)
        rest = proc.communicate(timeout=120)[1].decode()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert first == b"\rsweep ["
    assert proc.returncode == 130
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest
    assert rest.endswith("interrupted\n")


def test_a_pool_worker_ends_quietly_on_ctrl_c():
    """What `sim.parallel` starts each pool worker with: SIGINT ends it at once, with nothing on stderr (a
    worker that raised KeyboardInterrupt printed a traceback, and once left the sweep hanging)."""
    code = ("import os, signal, time; from sim.parallel import _leave_interrupt_to_parent as start; start(); "
            "os.kill(os.getpid(), signal.SIGINT); time.sleep(5); print('still running')")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stdout, res.stderr) == (-signal.SIGINT, "", "")


# ---------------------------------------------------------------- tables


def test_every_kind_of_sweep_has_the_plain_sweeps_columns_in_its_order():
    def header(*extra):
        code, out, err = run_cli("sweep", "--model", TINY, "--gpus", "1,2", "--format", "csv", *extra)
        assert code == 0, err
        return out.splitlines()[0].split(",")

    plain = header("--scheduler", "wfbp")
    for extra in (["--method", "BSP-PS"], ["--scheduler", "wfbp", "--compression", "fp16"],
                  ["--scheduler", "ddp", "--bucket-mb", "5"], ["--scheduler", "wfbp", "--stragglers", "1"]):
        assert header(*extra)[:len(plain)] == plain, extra


def test_gap_csv_has_the_gap_in_per_cent():
    code, out, _ = run_cli("gap", "--trials", "5", "--format", "csv")
    assert code == 0
    cases = pd.read_csv(io.StringIO(out))
    assert list(cases.columns[:6]) == ["layers", "alpha_s", "beta_s_per_byte", "mgwfbp_s", "optimal_s", "gap"]
    assert (cases["gap_pct"] == 100 * cases["gap"]).all()


# ---------------------------------------------------------------- round trips


def test_the_run_import_trace_prints_reproduces_the_trace(tmp_path):
    layers = tmp_path / "my layers.csv"
    code, out, _ = run_cli("import-trace", KINETO, "-o", layers)
    assert code == 0
    command = out.strip().splitlines()[-1].split("simulate with: ", 1)[1]
    assert command.startswith(f"run --model '{layers}' --gpus 2 --scheduler ddp --update-ms ")
    import shlex

    code, printed, _ = run_cli(*shlex.split(command), "--format", "json")
    assert code == 0
    code, readme, _ = run_cli("run", "--model", layers, "--gpus", "2", "--gpus-per-node", "2", "--scheduler", "ddp",
                              "--update-ms", command.rsplit(" ", 1)[1], "--format", "json")
    assert json.loads(printed)["iteration_time_s"] == json.loads(readme)["iteration_time_s"]
    assert json.loads(printed)["iteration_time_s"] == pytest.approx(0.0414, abs=5e-5)  # README, "Profiler traces in"


def test_import_trace_of_the_simulators_own_trace_says_what_it_is(tmp_path):
    target = tmp_path / "t.json"
    assert run_cli("trace", "--model", TINY, "--gpus", "4", "-o", target)[0] == 0
    code, _, err = run_cli("import-trace", target)
    assert code == 2 and err.count("\n") == 1
    assert "written by python -m sim trace" in err


def _row(name: str) -> dict:
    return {"name": name, "scope": "inter", "line_rate_gbps": 100.0, "effective_gbps": 80.0, "alpha_us": 2.0,
            "source": "test", "note": ""}


def test_saving_a_preset_keeps_a_link_and_refuses_a_pipe(tmp_path):
    real = tmp_path / "dotfiles" / "networks.csv"
    real.parent.mkdir()
    link = tmp_path / "networks.csv"
    link.symlink_to(real)
    save_network(_row("lab-a"), path=link)
    assert link.is_symlink() and "lab-a" in real.read_text()
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    with pytest.raises(SimInputError, match="not a regular file"):
        save_network(_row("lab-b"), path=fifo)
    assert fifo.is_fifo() and not (tmp_path / "fifo.csv.lock").exists()


def test_fit_network_save_to_a_pipe_is_one_line(tmp_path, monkeypatch):
    fifo = tmp_path / "presets.csv"
    os.mkfifo(fifo)
    monkeypatch.setenv("SSGD_NETWORKS", str(fifo))
    code, _, err = run_cli("fit-network", NCCL_LOG, "--gpus", "16", "--save", "lab", "--line-rate-gbps", "800")
    assert code == 2 and err.startswith("error: --save: cannot write") and "not a regular file" in err
    assert fifo.is_fifo()


@pytest.mark.parametrize("argv", [
    ["trace", "--model", "resnet50", "--gpus", "2", "-o", "-"],
    ["trace", "--model", "resnet50", "--gpus", "2", "-o", ""],
    ["import-bcaffe", "data/reference/bcaffe_k80_10gbe/tmp4ocomm.log", "-o", "-"],
    ["import-trace", "tests/data/kineto/nccl_data.json.gz", "--report", "-"],
])
def test_an_output_path_that_names_no_file_is_refused(argv, tmp_path, monkeypatch):
    """``-o -`` made a file called ``-`` (these outputs go to files; stdout gets the summary)."""
    import io

    from sim.cli import main

    repo = Path(__file__).resolve().parent.parent
    argv = [str(repo / a) if a.startswith(("data/", "tests/")) else a for a in argv]
    monkeypatch.chdir(tmp_path)
    err = io.StringIO()
    assert main(argv, out=io.StringIO(), err=err) == 2
    assert "give a file path" in err.getvalue() and err.getvalue().count("\n") == 1
    assert not (tmp_path / "-").exists()
