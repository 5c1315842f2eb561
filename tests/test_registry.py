"""The scheduler registry's contract: every scheduler is data the CLI, tune and listings read."""

import io
import json
import math

import numpy as np
import pytest

import sim
from sim.cli import build_parser, main
from sim.cli.args import write_json
from sim.core.plan import GradientLayers, Plan
from sim.schedulers import SCHEDULER_OPTIONS, SCHEDULERS, SchedulerOptions, make_plan, settings_of
from sim.schedulers.names import BYTESCHEDULER, DDP, HOROVOD, MGWFBP, WFBP
from sim.schedulers.registry import (
    KNOBS,
    SchedulerSpec,
    check_knobs_apply,
    get_spec,
    register,
    scheduler_names,
    specs,
    unregister,
)
from sim.tune import KNOBS as TUNABLE

TINY = "tests/data/tiny.csv"
#: The subcommands that take a workload, hence every knob's flag.
WORKLOAD_COMMANDS = ("run", "sweep", "trace", "tune")


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def subparser(name: str):
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    return action.choices[name]


def flags_of(parser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def test_registration_order_is_the_published_order():
    """The built-in schedulers come first, in the published order; a module added later follows them."""
    assert scheduler_names()[:10] == ("sequential", "wfbp", "synceasgd", "mgwfbp", "optimal", "bucket", "horovod",
                                      "ddp", "bytescheduler", "dear")
    assert list(SCHEDULERS) == list(scheduler_names())


@pytest.mark.parametrize("spec", specs(), ids=lambda s: s.name)
def test_every_spec_is_complete(spec):
    assert spec.description.strip() and spec.description.endswith(".")
    assert spec.citation.strip()
    assert set(spec.knobs) <= set(KNOBS)
    assert spec.ps_in_flight_knob is None or spec.ps_in_flight_knob in spec.knobs
    assert SCHEDULER_OPTIONS[spec.name] == spec.knobs


@pytest.mark.parametrize("knob", KNOBS.values(), ids=lambda k: k.name)
def test_every_knob_default_lies_within_its_bounds(knob):
    assert knob.kind in (int, float, bool)
    assert knob.flag == "--" + knob.name.replace("_", "-")
    assert knob.help.strip()
    if knob.default is None:
        return
    assert knob.check(knob.default) == knob.default
    if knob.low is not None:
        assert knob.default > knob.low if knob.low_open else knob.default >= knob.low
    if knob.high is not None:
        assert knob.default <= knob.high
    for value in knob.grid:
        assert knob.check(value) == value


def test_every_knob_is_read_by_a_scheduler_or_the_parameter_server():
    read = {k for s in specs() for k in s.knobs}
    assert {k.name for k in KNOBS.values() if not k.ps} <= read


def test_scheduler_options_are_the_knobs_with_their_defaults():
    defaults = SchedulerOptions()
    for name in ("fusion_threshold_mb", "cycle_time_ms", "first_bucket_mb", "partition_bytes", "credit",
                 "servers", "colocated", "ps_link_efficiency"):
        assert getattr(defaults, name) == KNOBS[name].default


@pytest.mark.parametrize("options, match", [
    ({"credit": 0}, "credit must be a whole number >= 1, got 0"),
    ({"partition_bytes": 2.5}, "partition_bytes must be a whole number"),
    ({"first_bucket_mb": 0}, "first_bucket_mb must be > 0"),
    ({"cycle_time_ms": -1}, "cycle_time_ms must be >= 0"),
    ({"cycle_time_ms": math.inf}, "cycle_time_ms must be a finite number"),
    ({"ps_link_efficiency": 1.5}, "ps_link_efficiency must be <= 1"),
    ({"ps_link_efficiency": 0}, "ps_link_efficiency must be >= 0.001"),
    ({"colocated": "yes"}, "colocated must be true or false"),
    ({"servers": 0}, "servers must be a whole number >= 1"),
    ({"credit": True}, "credit must be a whole number"),
])
def test_options_are_checked_against_the_knobs(options, match):
    with pytest.raises(sim.SimInputError, match=match):
        SchedulerOptions(**options)


def test_options_keep_the_values_given():
    opts = SchedulerOptions(fusion_threshold_mb=math.inf, credit=np.int64(3), servers=None, colocated=np.bool_(True))
    assert opts.fusion_threshold_mb == math.inf and opts.credit == 3 and type(opts.credit) is np.int64


def test_unknown_scheduler_lists_the_valid_ones():
    with pytest.raises(sim.SimInputError, match="unknown scheduler 'fifo'; valid: sequential, wfbp, synceasgd"):
        get_spec("fifo")
    with pytest.raises(sim.SimInputError, match="valid: sequential"):
        make_plan("fifo", None, None)


def test_settings_of_names_what_each_run_reads():
    opts = SchedulerOptions(credit=2)
    assert settings_of(DDP, "allreduce", opts, 10.0) == {"bucket_mb": 10.0, "first_bucket_mb": 1.0}
    assert settings_of(WFBP, "allreduce", opts, 10.0) == {}
    assert settings_of(BYTESCHEDULER, "ps", opts, 10.0) == {
        "partition_bytes": 4_096_000, "credit": 2, "servers": None, "colocated": False}
    assert list(settings_of(HOROVOD, "ps", opts, 10.0)) == [
        "fusion_threshold_mb", "cycle_time_ms", "partition_bytes", "servers", "colocated"]


def test_check_knobs_apply_names_who_reads_the_knob():
    check_knobs_apply(["credit"], [(WFBP, "allreduce"), (BYTESCHEDULER, "allreduce")])
    check_knobs_apply(["servers"], [(WFBP, "ps")])
    with pytest.raises(sim.SimInputError) as exc:
        check_knobs_apply(["bucket_mb"], [(WFBP, "allreduce"), (MGWFBP, "ps")])
    assert str(exc.value) == "bucket_mb does nothing for schedulers wfbp, mgwfbp; it applies to: bucket, ddp"


@pytest.mark.parametrize("command", WORKLOAD_COMMANDS)
def test_the_cli_has_a_flag_for_every_knob(command):
    assert {k.flag for k in KNOBS.values()} <= flags_of(subparser(command))


def test_a_knob_flag_takes_the_knobs_type_and_bounds():
    assert run_cli("run", "--model", TINY, "--scheduler", BYTESCHEDULER, "--credit", "0")[2] == (
        "error: argument --credit: credit must be a whole number >= 1, got 0\n")
    assert "'2.5' is not a whole number" in run_cli("run", "--model", TINY, "--scheduler", BYTESCHEDULER,
                                                    "--partition-bytes", "2.5")[2]
    assert "must be a finite number" in run_cli("run", "--model", TINY, "--scheduler", HOROVOD,
                                                "--fusion-threshold-mb", "inf")[2]
    assert "ps_link_efficiency must be <= 1" in run_cli("run", "--model", TINY, "--architecture", "ps",
                                                        "--ps-link-efficiency", "1.5")[2]


def test_tune_offers_every_knob():
    assert {name for name, _ in TUNABLE.values()} == set(KNOBS)
    assert set(subparser("tune")._option_string_actions["--knob"].choices) == set(TUNABLE)
    assert TUNABLE["bucket-mb"] == ("bucket_mb", DDP)
    assert TUNABLE["fusion-threshold-mb"] == ("fusion_threshold_mb", HOROVOD)


def test_tune_a_parameter_server_knob_on_the_parameter_server():
    from sim.tune import tune

    m, c = sim.load_model(TINY), sim.Cluster(gpus=4)
    res = tune(m, c, "servers", [1, 4], batch_size=8)
    assert res.best["default_value"] is None and list(res.frame["value"]) == [1, 4]
    # one server per node is the default: 4 servers on 4 one-GPU nodes is that default
    assert res.frame["iteration_time_s"].iloc[1] == pytest.approx(res.best["default_iteration_time_s"], rel=1e-12)
    with pytest.raises(sim.SimInputError, match="servers does nothing for scheduler wfbp; it applies to: architecture ps"):
        tune(m, c, "servers", [1, 4], batch_size=8, architecture="allreduce")


# --- a toy scheduler, registered for one test ------------------------------------------------


def reversed_wfbp(grads: GradientLayers, cost, options: SchedulerOptions, bucket_mb: float) -> Plan:
    """One message per layer, the layer nearest the input first, after backward (reads credit, ignores it)."""
    return Plan("toy", tuple((int(i),) for i in grads.index), after_backward=True)


@pytest.fixture
def toy():
    spec = register(SchedulerSpec("toy", "A toy: one message per layer, input first, after backward.",
                                  "tests/test_registry.py", reversed_wfbp, knobs=("credit",)))
    try:
        yield spec
    finally:
        unregister("toy")
    assert "toy" not in scheduler_names()


def test_a_registered_scheduler_appears_everywhere(toy):
    assert scheduler_names()[-1] == "toy" and "toy" in SCHEDULERS and SCHEDULER_OPTIONS["toy"] == ("credit",)
    grads = GradientLayers(np.array([0, 2, 3]), np.array([3.0, 2.0, 1.0]), np.array([8, 8, 8]))
    assert make_plan("toy", grads, None).groups == ((0,), (2,), (3,))
    assert "toy" in subparser("run")._option_string_actions["--scheduler"].help
    assert "toy" in subparser("run")._option_string_actions["--credit"].help
    code, out, _ = run_cli("run", "--model", TINY, "--gpus", "2", "--scheduler", "toy", "--credit", "2",
                           "--format", "json")
    assert code == 0 and json.loads(out)["scheduler"] == "toy" and json.loads(out)["num_messages"] == 3
    code, out, _ = run_cli("list", "schedulers", "--format", "json")
    assert json.loads(out)[-1] == {"name": "toy", "description": toy.description}


def test_a_name_registers_once(toy):
    with pytest.raises(sim.SimInputError, match="registered already"):
        register(toy)


def test_a_spec_reads_only_known_knobs():
    with pytest.raises(sim.SimInputError, match="unknown knob 'nope'"):
        SchedulerSpec("toy2", "A toy.", "here", reversed_wfbp, knobs=("nope",))


# --- the command line: a knob no run reads, strict JSON ------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["run", "--model", TINY, "--fusion-threshold-mb", "4"],
     "--fusion-threshold-mb does nothing for scheduler wfbp; it applies to: horovod"),
    (["run", "--model", TINY, "--scheduler", DDP, "--cycle-time-ms", "2"],
     "--cycle-time-ms does nothing for scheduler ddp; it applies to: horovod"),
    (["run", "--model", TINY, "--method", "BSP-A2A", "--credit", "2"],
     "--credit does nothing for scheduler synceasgd; it applies to: bytescheduler"),
    (["run", "--model", TINY, "--colocated"],
     "--colocated does nothing for scheduler wfbp; it applies to: architecture ps"),
    (["sweep", "--model", TINY, "--first-bucket-mb", "2"],
     "--first-bucket-mb does nothing for schedulers wfbp, mgwfbp; it applies to: ddp"),
    (["trace", "--model", TINY, "--bucket-mb", "4", "-o", "unused.json"],
     "--bucket-mb does nothing for scheduler wfbp; it applies to: bucket, ddp"),
    (["tune", "--model", TINY, "--knob", "credit", "--values", "1,2", "--cycle-time-ms", "2"],
     "--cycle-time-ms does nothing for scheduler bytescheduler; it applies to: horovod"),
])
def test_a_knob_flag_for_runs_that_do_not_read_it_is_an_error(argv, message):
    assert run_cli(*argv) == (2, "", f"error: {message}\n")


@pytest.mark.parametrize("argv", [
    ["run", "--model", TINY, "--gpus", "2", "--scheduler", HOROVOD, "--cycle-time-ms", "0"],
    ["run", "--model", TINY, "--gpus", "2", "--method", "WFBP-PS", "--servers", "1"],
    ["sweep", "--model", TINY, "--gpus", "2", "--scheduler", "wfbp,ddp", "--first-bucket-mb", "2"],
    ["run", "--model", TINY, "--gpus", "2", "--architecture", "ps", "--partition-bytes", "1000"],
])
def test_a_knob_flag_read_by_some_run_is_accepted(argv):
    code, _, err = run_cli(*argv)
    assert (code, err) == (0, "")


def strict_loads(text: str):
    def refuse(token):
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


def test_write_json_turns_non_finite_numbers_into_null():
    out = io.StringIO()
    write_json({"a": math.nan, "b": [math.inf, -math.inf, np.float64("nan"), np.float64(1.5)], "c": np.int64(3),
                "d": (1, None)}, out)
    assert strict_loads(out.getvalue()) == {"a": None, "b": [None, None, None, 1.5], "c": 3, "d": [1, None]}
    assert out.getvalue().endswith("}\n")


def test_a_reference_folder_without_the_traces_is_refused(tmp_path):
    """validate --reference naming a folder that lacks the traces the cases read: one line, exit 2, naming the
    first missing file (it printed every such case as skipped, with no simulated time, and exited 0). The
    library still marks such a case skipped, with no number (NaN, never a made-up one)."""
    from sim.calib.validation import load_cases, run_validation

    code, out, err = run_cli("validate", "--source", "b-caffe", "--reference", str(tmp_path), "--format", "json")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"error: --reference: {str(tmp_path)!r} lacks the traces") and "not found" in err
    cases = load_cases()
    rows = run_validation(cases.loc[cases["source"] == "b-caffe-trace"].head(1), reference_dir=tmp_path)
    assert rows.status.str.startswith("skipped").all() and rows.simulated.isna().all()


def test_the_readme_example_registers_a_scheduler():
    """The README's "Add a scheduler" example, run as written."""
    import re
    from pathlib import Path

    text = (Path(__file__).parent.parent / "README.md").read_text()
    section = text.split("## Add a scheduler", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(code.strip().splitlines()) <= 15
    namespace: dict = {}
    code = code.replace('"reverse"', '"readme_reverse"')  # the name a user's own copy of the example would take
    exec(compile(code, "README.md", "exec"), namespace)
    try:
        grads = GradientLayers(np.array([1, 4]), np.array([2.0, 1.0]), np.array([8, 8]))
        plan = make_plan("readme_reverse", grads, None)
        assert plan.groups == ((1,), (4,)) and plan.after_backward
        code, out, _ = run_cli("run", "--model", TINY, "--gpus", "2", "--scheduler", "readme_reverse",
                               "--format", "json")
        assert code == 0 and json.loads(out)["num_messages"] == 3
    finally:
        unregister("readme_reverse")


def test_a_scheduler_declares_its_own_knob_in_its_spec():
    """A knob declared in the spec (name, type, unit, default, bounds, help) gets a flag,
    a check, a place in `sim.tune` and in the run's settings, and reaches the plan; it
    leaves with its scheduler."""
    from sim.schedulers.knobs import KNOBS, Knob

    gap = Knob("toy_group_size", int, "", 2, 1, 64, "layers per message of the toy scheduler")

    def plan(grads, cost, options, bucket_mb):
        size = options.toy_group_size
        order = [int(i) for i in grads.index[::-1]]
        return Plan("toy_sized", tuple(tuple(order[i:i + size]) for i in range(0, len(order), size)))

    register(SchedulerSpec("toy_sized", "Messages of a fixed number of layers.", "a test", plan=plan,
                           knobs=(gap,)))
    try:
        grads = GradientLayers(np.array([0, 1, 2, 3, 4]), np.linspace(5.0, 1.0, 5), np.full(5, 8))
        assert len(make_plan("toy_sized", grads, None).groups) == 3  # the default, 2 layers a message
        assert len(make_plan("toy_sized", grads, None, options={"toy_group_size": 5}).groups) == 1
        with pytest.raises(sim.SimInputError, match="toy_group_size"):
            make_plan("toy_sized", grads, None, options={"toy_group_size": 0})
        code, out, err = run_cli("run", "--model", TINY, "--gpus", "2", "--scheduler", "toy_sized",
                                 "--toy-group-size", "1", "--format", "json")
        assert code == 0, err
        assert json.loads(out)["num_messages"] == json.loads(
            run_cli("run", "--model", TINY, "--gpus", "2", "--scheduler", "wfbp", "--format", "json")[1])["num_messages"]
        code, _, err = run_cli("run", "--model", TINY, "--gpus", "2", "--scheduler", "wfbp", "--toy-group-size", "1")
        assert code == 2 and "toy_sized" in err
        assert TUNABLE["toy-group-size"] == ("toy_group_size", "toy_sized")
        options = SchedulerOptions.of({"toy_group_size": 3})
        assert settings_of("toy_sized", "allreduce", options, 25.0) == {"toy_group_size": 3}
    finally:
        unregister("toy_sized")
    assert "toy_group_size" not in KNOBS
