"""The bad-input corpus (`tests/bad_input_cases.py`): every case refused with one line naming
the field, row, flag or limit; never a traceback, never a silent default; before the work starts.

Then the issue's bugs one by one, as regression tests that run the real entry points.
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sim
import sim.calib.fit
import sim.catalog
import sim.fit
import sim.importers
import sim.parallel
import sim.tune
import sim.workers
import sim.workers.algorithms
import sim.workers.training
from dashboard import state
from dashboard.upload import model_from_csv_text, read_layer_csv
from sim.cli import main
from sim.schedulers.knobs import KNOBS
from tests.bad_input_cases import (
    API_CASES,
    CLI_CASES,
    DASHBOARD_CASES,
    FILES,
    UPLOAD_CASES,
    WARNING_CASES,
)

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "tests" / "data" / "tiny.csv"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bad_input")
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(autouse=True)
def own_presets(tmp_path, monkeypatch):
    """Saving a preset writes to a file of this test's own."""
    monkeypatch.setenv(sim.catalog.USER_NETWORKS_ENV, str(tmp_path / "networks.csv"))


def cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out, err)
    return code, out.getvalue(), err.getvalue()


def test_the_corpus_is_large_and_covers_every_subcommand():
    from sim.cli import COMMANDS

    assert len(CLI_CASES) + len(API_CASES) + len(DASHBOARD_CASES) + len(UPLOAD_CASES) >= 150
    first_words = {line.split()[0] for line, _ in CLI_CASES if line.split()}
    assert {c.NAME for c in COMMANDS} <= first_words
    assert len({line for line, _ in CLI_CASES}) == len(CLI_CASES), "a command line is listed twice"


@pytest.mark.parametrize(("line", "expected"), CLI_CASES, ids=[c[0][:70] for c in CLI_CASES])
def test_cli_refuses(files, line, expected):
    argv = shlex.split(line.replace("{d}", str(files)))
    code, out, err = cli(argv)
    assert code == 2, f"exit {code}; stdout {out[:200]!r}"
    assert err.startswith("error: ") and err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert expected in err, err


@pytest.mark.parametrize(("line", "expected", "flag"), WARNING_CASES, ids=[c[0][:70] for c in WARNING_CASES])
def test_cli_warns_of_input_that_does_nothing(line, expected, flag):
    """The run goes on (exit 0) with one ``warning:`` line; a run's numbers are those of the run without
    the flag (the link really is unused)."""
    argv = shlex.split(line)
    code, out, err = cli(argv)
    assert code == 0, err
    assert err.startswith("warning: ") and err.count("\n") == 1 and expected in err, err
    assert out.strip()
    if argv[0] == "run":
        at = argv.index(f"--{flag}")
        code, with_flag, _ = cli(argv + ["--format", "json"])
        code_bare, bare, err_bare = cli(argv[:at] + argv[at + 2:] + ["--format", "json"])
        assert code == code_bare == 0 and err_bare == ""
        with_flag, bare = json.loads(with_flag), json.loads(bare)
        if flag in with_flag:  # a link or collective the metrics name
            assert with_flag.pop(flag) != bare.pop(flag)  # the flag was taken...
        assert with_flag == bare  # ...and changed nothing else


@pytest.mark.parametrize(("case", "source", "expected"), API_CASES, ids=[c[0] for c in API_CASES])
def test_api_refuses(files, case, source, expected):
    names = {"sim": sim, "np": np, "pd": pd, "Cluster": sim.Cluster, "load_model": sim.load_model,
             "simulate": sim.simulate, "sweep": sim.sweep, "tiny": sim.load_model(TINY), "d": str(files)}
    with pytest.raises(sim.SimInputError) as info:
        eval(source, names)  # noqa: S307 - the corpus is our own source text
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("case", "session", "expected"), DASHBOARD_CASES, ids=[c[0] for c in DASHBOARD_CASES])
def test_dashboard_url_refused(case, session, expected):
    with pytest.raises(sim.SimInputError) as info:
        state.config_from_state(session)
        state.stragglers_from_state(session)
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("case", "filename", "data", "expected"), UPLOAD_CASES, ids=[c[0] for c in UPLOAD_CASES])
def test_upload_refused(case, filename, data, expected):
    with pytest.raises(sim.SimInputError) as info:
        model_from_csv_text(read_layer_csv(filename, data), filename)
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


# --- the bugs, one by one --------------------------------------------------------------------------


def test_a_row_with_more_fields_than_the_header_is_not_shifted(files):
    with pytest.raises(sim.SimInputError, match="extra_fields.csv line 2: 5 fields but the header has 4"):
        sim.load_model(files / "extra_fields.csv")
    assert sim.load_model(files / "ok.csv").params.tolist() == [100, 200]


def test_duplicate_columns_are_refused(files):
    with pytest.raises(sim.SimInputError, match="duplicate column 'params' \\(columns 2 and 3\\)"):
        sim.load_model(files / "dup_column.csv")


def test_parameters_that_would_overflow_int64_are_refused(files):
    with pytest.raises(sim.SimInputError, match="row 2, column 'params'.*limit of 1e\\+15"):
        sim.load_model(files / "huge_params.csv")
    # at the limit the gradient's bytes stay exact and positive
    model = sim.Model("m", ("a",), np.array([sim.model.MAX_PARAMS]), np.array([1e-3]), np.array([1e-3]))
    res = sim.simulate(model, sim.Cluster(gpus=4), batch_size=1)
    assert res.metrics["comm_s"] > 0 and math.isfinite(res.metrics["comm_s"])


@pytest.mark.parametrize("value", [-1, 0, float("nan"), float("inf")])
def test_single_gpu_iteration_must_be_a_positive_finite_time(value):
    with pytest.raises(sim.SimInputError, match="single_gpu_iteration_s"):
        sim.simulate(sim.load_model(TINY), sim.Cluster(gpus=4), batch_size=8, single_gpu_iteration_s=value)


def test_a_closed_pipe_ends_quietly():
    proc = subprocess.run(f"{sys.executable} -m sim gap --trials 3000 --format csv | head -1", shell=True,
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.stdout.startswith("layers,")
    assert proc.stderr == ""


def test_validate_with_a_missing_reference_folder_exits_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "sim", "validate", "--reference", str(tmp_path / "none")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: --reference:") and proc.stderr.count("\n") == 1


def test_partition_bytes_one_is_refused_at_once(monkeypatch):
    """Refused by the task estimate, before any task graph is lowered (no timing: the lowering fails the test)."""
    import sim.core.run

    def lowered(*args, **kwargs):
        raise AssertionError("a task graph was lowered before the refusal")

    monkeypatch.setattr(sim.core.run, "lower", lowered)
    code, _, err = cli(["run", "--model", "resnet50", "--gpus", "4", "--scheduler", "bytescheduler",
                        "--partition-bytes", "1"])
    assert code == 2 and "SSGD_MAX_TASKS" in err


def test_the_task_estimate_bounds_the_real_graph():
    """The budget's estimate is an upper bound of the tasks the lowering creates."""
    from sim.core import lower as core_lower
    from sim.core.metrics import iterations_to_run
    from sim.core.run import estimated_tasks

    model = sim.api.resolve_model(sim.load_model("resnet50"), sim.Cluster(gpus=4), 8, "fp32")
    res = sim.simulate(model, sim.Cluster(gpus=4), "bytescheduler", batch_size=8,
                       options={"partition_bytes": 100_000}, engine="general")
    cost = sim.Cluster(gpus=4).comm_cost(model)
    n_run = iterations_to_run(res.plan, 1)
    graph = core_lower.lower(model, res.plan, cost, iterations=n_run)
    estimate = estimated_tasks(model, res.plan, "fp32", n_run)
    assert len(graph.kind) <= estimate <= 3 * len(graph.kind)


def test_flags_given_for_nothing_are_errors_and_the_same_flags_work_where_they_apply(files):
    assert cli(["run", "--model", "resnet50", "--gpu", "a100", "--format", "json"])[0] == 0
    assert cli(["run", "--model", "resnet50", "--gpus", "4", "--alpha", "1e-5", "--beta", "1e-9"])[0] == 0
    assert cli(["run", "--model", "resnet50", "--gpus", "4", "--collective", "binary_tree"])[0] == 0
    assert cli(["run", "--model", "resnet50", "--gpus", "4", "--stragglers", "1", "--seed", "3"])[0] == 0
    assert cli(["algorithms", "--model", "resnet50", "--gpus", "4", "--steps", "4", "--algorithms", "EASGD",
                "--tau", "2"])[0] == 0


def test_json_output_is_strict(files):
    code, out, _ = cli(["run", "--model", str(files / "ok.csv"), "--format", "json"])
    assert code == 0

    def refuse(token):
        raise ValueError(f"non-strict JSON token {token}")

    metrics = json.loads(out, parse_constant=refuse)
    assert metrics["iteration_time_s"] > 0


def test_the_dashboard_straggler_view_is_bounded():
    """Counted in the gradient tensors the engine times (resnet50: 163, not its 56 layers) plus 16 per
    worker and iteration; the limit's measured cost is in its comment."""
    from dashboard.cached import MAX_STRAGGLER_WORK, check_straggler_work, straggler_tensors
    from dashboard.state import Config

    assert straggler_tensors(Config(model="resnet50", gpus=16)) == 163
    check_straggler_work(16, 163)
    check_straggler_work(4096, 163)  # issue 15's heavy URL runs (0.9 s, 249 MiB)
    with pytest.raises(sim.SimInputError, match=r"limited to 32,000,000 GPU-tensor-iterations.*8,192 GPUs x \(163 "):
        check_straggler_work(8192, 163)
    with pytest.raises(sim.SimInputError, match="x 2 schedulers"):
        check_straggler_work(4096, 163, runs=2)
    assert MAX_STRAGGLER_WORK == 32_000_000


def test_the_server_config_matches_the_apps_bounds():
    import tomllib

    from dashboard.upload import MAX_UPLOAD_MB

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert config["server"]["maxUploadSize"] == MAX_UPLOAD_MB
    assert config["server"]["address"] == "localhost"
    assert config["client"]["showErrorDetails"] in ("none", False)


@pytest.mark.parametrize("value", ["abc", "", "1e30", "nan", "-1", "0", str(2**41)])
def test_a_bad_task_limit_in_the_environment_is_refused_by_every_command(value):
    """$SSGD_MAX_TASKS that is not a whole number from 1 to 2^40: one line, exit 2, even for a command that
    times nothing (it was a traceback on import, or a limit of -1 that refused every run)."""
    env = {**os.environ, "SSGD_MAX_TASKS": value}
    proc = subprocess.run([sys.executable, "-m", "sim", "list", "gpus"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: $SSGD_MAX_TASKS must be a whole number of tasks from 1 to")
    assert proc.stderr.count("\n") == 1


def test_a_good_task_limit_in_the_environment_is_used():
    env = {**os.environ, "SSGD_MAX_TASKS": "1000"}
    proc = subprocess.run([sys.executable, "-m", "sim", "run", "--model", "resnet50", "--gpus", "4", "--scheduler",
                           "bytescheduler"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "the limit is 1,000" in proc.stderr


@pytest.mark.parametrize("flag, extra, expected", [
    (flag, extra, expected.format(flag=flag)) for flag in ("--size-regimes", "--no-size-regimes")
    for extra, expected in (
        (["--network", "100gbe"], "{flag} does nothing with --network 100gbe: it has no measured"),
        (["--network", "10gbe-k80-osu", "--network-gbps", "3"], "{flag} does nothing with --network-gbps"),
    )
])
def test_size_regimes_that_do_nothing_say_so(flag, extra, expected):
    """--size-regimes or --no-size-regimes without a measured table for the network, or with its rate
    overridden: a warning, and the numbers of the run without the flag."""
    argv = ["run", "--model", "resnet50", "--gpus", "8", *extra, "--format", "json"]
    code, out, err = cli([*argv, flag])
    assert code == 0 and err.startswith("warning: ") and expected in err and err.count("\n") == 1, err
    code_bare, bare, err_bare = cli(argv)
    assert code_bare == 0 and err_bare == "" and json.loads(out) == json.loads(bare)


def test_a_misspelled_layer_column_is_named(tmp_path):
    """A layer CSV's column the reader does not know (comm_msec for comm_ms) is named in a warning; it was
    dropped without a word and the links' cost simulated instead of the measured one. The columns the
    project's own writers add (fwd_flops, out_elems; the importers' dtype, allreduce_bytes, blobs) pass."""
    path = tmp_path / "typo.csv"
    path.write_text("name,params,fwd_ms,bwd_ms,comm_msec\nl1,100,1,2,50\nl2,100,1,2,90\n")
    code, _, err = cli(["run", "--model", str(path), "--gpus", "4"])
    assert code == 0 and err.count("\n") == 1
    assert "typo.csv: column(s) 'comm_msec' not read" in err
    written = tmp_path / "written.csv"
    sim.load_model("resnet50").timed(gpu="v100-sxm2", batch_size=8).layers_frame().to_csv(written, index=False)
    code, _, err = cli(["run", "--model", str(written), "--gpus", "4"])
    assert code == 0 and err == ""


def test_more_nics_than_gpus_in_a_node_are_clamped_and_say_so():
    """--nics-per-node above the node's GPUs: a warning, and the run of one NIC per GPU (it was clamped without a
    word: the hostile review)."""
    argv = ["run", "--model", "resnet50", "--gpus", "8", "--gpus-per-node", "4", "--format", "json"]
    code, out, err = cli([*argv, "--nics-per-node", "1000"])
    assert code == 0 and err.startswith("warning: --nics-per-node 1000: a node of 4 GPU(s) uses 4")
    code4, out4, err4 = cli([*argv, "--nics-per-node", "4"])
    assert code4 == 0 and err4 == "" and json.loads(out) == json.loads(out4)


def test_a_quote_left_open_in_a_layer_file_is_refused_on_its_line(tmp_path):
    """A quoted field that is never closed runs on into the next lines, so the CSV reader gives fewer rows than
    the file has lines: the shape check refuses it naming the line (it raised ValueError from ``zip(strict=True)``,
    a traceback on the dashboard and the CLI)."""
    path = tmp_path / "q.csv"
    path.write_text('name,params,fwd_ms,bwd_ms\na,1,1,1\n"conv1,1000,1.0\nfc,1,1,1\n')
    with pytest.raises(sim.SimInputError, match="q.csv line 3: a quote"):
        sim.load_model(path)


def test_size_regime_flags_see_the_intra_node_link_too():
    """The measured table applies to whichever role uses the preset: with --intra 10gbe-k80-osu,
    --no-size-regimes changes the run and says nothing; in one node a network's table is not used, and
    the warning says why (it said the preset had no table)."""
    two_nodes = ["run", "--model", "resnet50", "--gpus", "8", "--gpus-per-node", "4", "--network", "10gbe",
                 "--intra", "10gbe-k80-osu", "--format", "json"]
    code, line, err = cli([*two_nodes, "--no-size-regimes"])
    assert code == 0 and err == "", err
    _, table, _ = cli(two_nodes)
    assert json.loads(line)["iteration_time_s"] > json.loads(table)["iteration_time_s"]
    code, _, err = cli(["run", "--model", "resnet50", "--gpus", "4", "--gpus-per-node", "4", "--network",
                        "10gbe-k80-osu", "--no-size-regimes"])
    assert code == 0 and "--no-size-regimes does nothing: every GPU is in one node" in err, err


def test_an_unlimited_fusion_threshold_is_still_accepted_and_a_huge_finite_one_is_not():
    """``fusion_threshold_mb=inf`` (no limit) fuses as the largest finite threshold does; 1e308 MiB is
    refused (it overflowed the fusion buffer's byte count), and so is a cycle time of a few
    hundred zeptoseconds (its tick count overflowed)."""
    model, cluster = sim.load_model("resnet50"), sim.Cluster(gpus=8, gpus_per_node=4)
    run = functools.partial(sim.simulate, model, cluster, "horovod", batch_size=32)
    unlimited = run(options={"fusion_threshold_mb": float("inf")})
    assert unlimited.iteration_time_s == run(options={"fusion_threshold_mb": KNOBS["fusion_threshold_mb"].high}
                                             ).iteration_time_s
    for options in ({"fusion_threshold_mb": 1e308}, {"cycle_time_ms": 1e-320}):
        with pytest.raises(sim.SimInputError):
            run(options=options)
    assert run(options={"cycle_time_ms": 0.0}).iteration_time_s > 0


@pytest.mark.parametrize("interference", [True, False])
@pytest.mark.parametrize("engine", ["auto", "general"])
def test_the_task_budget_holds_on_either_engine_with_or_without_interference(engine, interference):
    """With interference on (the default) the general engine lowered the asked iterations without the
    budget (1,000 iterations of 10 kB partitions: 21 M tasks, 6.5 s and 1.8 GB), and the fast path had
    none (1,000 iterations of 100k layers: 57 s, its timeline killed by memory): both are refused at once,
    naming the iterations asked."""
    model = sim.load_model("resnet50")
    cluster = sim.Cluster(gpus=8, gpus_per_node=8, interference=interference)
    with pytest.raises(sim.SimInputError, match="1000 iterations of"):
        sim.simulate(model, cluster, "bytescheduler", batch_size=32, iterations=1000, engine=engine,
                     options={"partition_bytes": 10_000})
    n = 10_000
    wide = sim.Model("wide", tuple(f"l{i}" for i in range(n)), np.full(n, 10_000), np.full(n, 1e-5), np.full(n, 2e-5))
    with pytest.raises(sim.SimInputError, match="1000 iterations of 10,000 layers"):
        sim.simulate(wide, cluster, "wfbp", batch_size=32, iterations=1000, engine=engine)
    assert sim.simulate(model, cluster, "wfbp", batch_size=32, iterations=5, engine=engine).iteration_time_s > 0


def test_the_budgets_quick_bound_holds_for_every_scheduler():
    """`sim.core.run` skips the exact count when 3 + 3 n + 4 m tasks per iteration fit: that bound holds
    for every scheduler's plan without partitions (`task_count` exact)."""
    from sim.core.lower import task_count
    from sim.schedulers import SCHEDULERS

    model = sim.api.resolve_model(sim.load_model("resnet50"), sim.Cluster(gpus=8), 8, "fp32")
    cluster = sim.Cluster(gpus=8, gpus_per_node=4)
    for name in SCHEDULERS:
        plan = sim.simulate(model, cluster, name, batch_size=8).plan
        if plan.partition_bytes:
            continue
        exact = task_count(model, plan, cluster.comm_cost(model), iterations=1)
        assert exact <= 3 + 3 * model.num_layers + 4 * len(plan.groups), name
