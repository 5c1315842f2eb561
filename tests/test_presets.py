"""The user's network presets file: safe names, locked atomic saves, and a
malformed file that never breaks the built-in presets."""

import csv
import os
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

import pytest

from sim.catalog import (
    USER_NETWORKS_ENV,
    check_preset_name,
    get_network,
    networks,
    save_network,
    user_networks,
    user_networks_error,
)
from sim.errors import SimInputError

REPO = Path(__file__).resolve().parent.parent
HEADER = "name,scope,line_rate_gbps,effective_gbps,alpha_us,source,note\n"


def preset(name, effective_gbps=8.0, **extra):
    return {"name": name, "scope": "inter", "line_rate_gbps": 10, "effective_gbps": effective_gbps,
            "alpha_us": 20, "source": "nccl-tests on our cluster", **extra}


@pytest.fixture
def presets_file(tmp_path, monkeypatch):
    path = tmp_path / "cfg" / "networks.csv"
    monkeypatch.setenv(USER_NETWORKS_ENV, str(path))
    return path


def _save_many(path: str, prefix: str, count: int) -> None:
    for i in range(count):
        save_network(preset(f"{prefix}-{i}"), path=path)


def test_a_presets_file_of_the_longest_name_is_written(tmp_path):
    """Its temporary file beside it took the 250-byte name and 14 characters more (hostile review, 2026-11-25)."""
    path = tmp_path / ("n" * 246 + ".csv")
    save_network(preset("lab"), path=path)
    assert "lab" in path.read_text() and not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


class TestNames:
    @pytest.mark.parametrize("name", ["lab", "ib-hdr-200", "k80.osu_2024", "0", "a" * 64])
    def test_accepted(self, name):
        assert check_preset_name(name) == name

    @pytest.mark.parametrize("name", [" mynet", "10gbe ", "My-Net", "-lab", ".lab", "la b", "a" * 65, "", "läb", 7])
    def test_refused(self, name):
        with pytest.raises(SimInputError, match="is not a valid preset name"):
            check_preset_name(name)

    @pytest.mark.parametrize("name", [" mynet", "10gbe "])
    def test_save_refuses_padded_names_naming_the_field(self, presets_file, name):
        with pytest.raises(SimInputError, match=rf"^name {name!r} is not a valid preset name"):
            save_network(preset(name))
        assert not presets_file.exists()

    def test_bad_name_in_the_file_is_reported_with_its_line(self, presets_file):
        presets_file.parent.mkdir()
        presets_file.write_text(HEADER + "lab,inter,10,8,20,meas,\nOur Lab,inter,10,8,20,meas,\n")
        with pytest.raises(SimInputError, match=rf"^{presets_file} line 3: name 'Our Lab' is not a valid"):
            user_networks()


class TestSave:
    def test_creates_the_file_and_the_preset_is_usable(self, presets_file):
        assert save_network(preset("lab")) == presets_file
        net = get_network("lab")
        assert (net.effective_gbps, net.alpha_us, net.source) == (8.0, 20.0, "nccl-tests on our cluster")
        assert [p.name for p in presets_file.parent.iterdir()] == ["networks.csv", "networks.csv.lock"]

    def test_appends_and_keeps_the_other_rows(self, presets_file):
        save_network(preset("lab"))
        save_network(preset("lab2", 5.0))
        assert {n: v.effective_gbps for n, v in user_networks().items()} == {"lab": 8.0, "lab2": 5.0}

    def test_existing_name_refused(self, presets_file):
        save_network(preset("lab"))
        with pytest.raises(SimInputError, match="a network called 'lab' exists already"):
            save_network(preset("lab", 5.0))
        assert get_network("lab").effective_gbps == 8.0

    def test_builtin_name_refused_without_overwrite_builtin(self, presets_file):
        with pytest.raises(SimInputError, match="'10gbe' is a built-in preset.*overwrite_builtin=True"):
            save_network(preset("10gbe", 5.0))
        assert not presets_file.exists()
        assert get_network("10gbe").effective_gbps == 9.33

    def test_builtin_name_replaced_with_overwrite_builtin(self, presets_file):
        save_network(preset("10gbe", 5.0), overwrite_builtin=True)
        assert get_network("10gbe").effective_gbps == 5.0
        with presets_file.open() as fh:
            assert next(csv.DictReader(fh))["overrides_builtin"] == "yes"

    def test_missing_source_refused(self, presets_file):
        with pytest.raises(SimInputError, match="source is empty"):
            save_network(preset("lab", source=" "))

    def test_malformed_file_is_left_alone(self, presets_file):
        presets_file.parent.mkdir()
        body = HEADER + "lab,inter,fast,8,20,meas,\n"
        presets_file.write_text(body)
        with pytest.raises(SimInputError, match=rf"{presets_file} line 2 \(lab\): line_rate_gbps must be a number"):
            save_network(preset("lab2"))
        assert presets_file.read_text() == body

    def test_file_written_by_hand_without_the_override_column(self, presets_file):
        presets_file.parent.mkdir()
        presets_file.write_text(HEADER + "lab,inter,10,8,20,meas,my note\n")
        save_network(preset("10gbe", 5.0), overwrite_builtin=True)
        assert get_network("lab").note == "my note"
        assert get_network("10gbe").effective_gbps == 5.0

    def test_two_processes_saving_at_once_both_land(self, presets_file):
        count = 25
        with ProcessPoolExecutor(2, mp_context=get_context("fork")) as pool:
            jobs = [pool.submit(_save_many, str(presets_file), prefix, count) for prefix in ("a", "b")]
            for job in jobs:
                job.result()
        saved = user_networks()
        assert sorted(saved) == sorted(f"{p}-{i}" for p in "ab" for i in range(count))
        with presets_file.open() as fh:
            assert len(list(csv.DictReader(fh))) == 2 * count
        assert not [p for p in presets_file.parent.iterdir() if p.name.endswith(".tmp")]


class TestMalformedUserFile:
    GARBAGE = "this is not\na presets file,,,\n\x00\n"

    @pytest.fixture
    def garbage(self, presets_file):
        presets_file.parent.mkdir()
        presets_file.write_text(HEADER + "ok,inter,10,8,20,meas,\nbad,inter,10,80,20,meas,\n")
        return presets_file

    def test_builtins_still_work(self, garbage):
        assert get_network("10gbe").scope == "inter"
        assert {"10gbe", "nvlink3"} <= set(networks())
        assert "ok" not in networks()  # a file with an error contributes nothing

    def test_error_names_path_and_line(self, garbage):
        assert user_networks_error() == (
            f"{garbage} line 3: network 'bad': effective_gbps 80.0 exceeds line_rate_gbps 10.0"
        )

    def test_asking_for_a_user_preset_reports_it(self, garbage):
        with pytest.raises(SimInputError, match=rf"unknown network 'ok', and the user presets cannot be read: {garbage} line 3"):
            get_network("ok")

    def test_not_a_csv_at_all(self, presets_file):
        presets_file.parent.mkdir()
        presets_file.write_text(self.GARBAGE)
        assert user_networks_error().startswith(f"{presets_file} line ")
        assert get_network("10gbe").name == "10gbe"

    def test_not_utf8(self, presets_file):
        presets_file.parent.mkdir()
        presets_file.write_bytes(b"\xff\xfe\x00garbage")
        assert user_networks_error().startswith(f"{presets_file}: not a UTF-8 text file")
        assert get_network("10gbe").name == "10gbe"

    def test_cli_still_runs(self, tmp_path):
        bad = tmp_path / "garbage.csv"
        bad.write_text(self.GARBAGE)
        env = {**os.environ, USER_NETWORKS_ENV: str(bad)}

        def sim_cli(*argv):
            return subprocess.run([sys.executable, "-m", "sim", *argv], cwd=REPO, env=env,
                                  capture_output=True, text=True, timeout=120)

        listed = sim_cli("list", "networks")
        assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
        assert "10gbe" in listed.stdout
        ran = sim_cli("run", "--model", "tests/data/tiny.csv", "--gpus", "8", "--network", "10gbe")
        assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr
        unknown = sim_cli("run", "--model", "tests/data/tiny.csv", "--gpus", "8", "--network", "lab")
        assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
        assert f"the user presets cannot be read: {bad} line " in unknown.stderr


@pytest.mark.parametrize(("row", "expected"), [
    ("n1,inter,100,10,1e308,s,,", "alpha_us must be at most 10,000,000, got 1e+308"),
    ("n1,inter,100,1e-300,5,s,,", "effective_gbps must be in [1e-05, 1e+06], got 1e-300"),
    ("n1,inter,1e300,10,5,s,,", "line_rate_gbps must be in [1e-05, 1e+06], got 1e+300"),
    ("n1,inter,100,10,5,s,,maybe", "overrides_builtin must be yes, no or empty"),
])
def test_a_preset_row_with_an_absurd_value_is_refused_naming_its_line(presets_file, row, expected):
    """A hand-written preset file meets the bounds the flags have (found by the hostile review of
    2026-11-25: a start-up time of 1e308 us gave an iteration of 1e304 s, without a word)."""
    presets_file.parent.mkdir()
    presets_file.write_text("name,scope,line_rate_gbps,effective_gbps,alpha_us,source,note,overrides_builtin\n" + row + "\n")
    error = user_networks_error()
    assert error.startswith(f"{presets_file} line 2") and expected in error, error
    with pytest.raises(SimInputError, match="unknown network 'n1', and the user presets cannot be read"):
        get_network("n1")
