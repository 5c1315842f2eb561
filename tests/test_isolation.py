"""The suite stands alone: tests/conftest.py keeps the user's HOME,
XDG_CONFIG_HOME and $SSGD_NETWORKS out of every test."""

import os
import subprocess
import sys
from pathlib import Path

from sim.catalog import USER_NETWORKS_ENV, user_networks_path

REPO = Path(__file__).resolve().parent.parent
GARBAGE = "name;scope\nnot,a,presets,file,at,all,really,no\n\x00\n"


def test_session_environment_is_isolated():
    assert USER_NETWORKS_ENV not in os.environ
    home = Path(os.environ["HOME"])
    assert home.name == "home" and home.parent.name.startswith("ssgd-tests-home-")
    assert os.environ["XDG_CONFIG_HOME"] == str(home / ".config")
    assert user_networks_path() == home / ".config" / "ssgd" / "networks.csv"
    assert not user_networks_path().exists()


def test_a_broken_user_config_does_not_reach_the_tests(tmp_path):
    home = tmp_path / "home"
    (home / ".config" / "ssgd").mkdir(parents=True)
    (home / ".config" / "ssgd" / "networks.csv").write_text(GARBAGE)
    bad = tmp_path / "garbage.csv"
    bad.write_text(GARBAGE)
    env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), USER_NETWORKS_ENV: str(bad)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "tests/test_isolation.py::test_session_environment_is_isolated", "tests/test_catalog.py::TestUserPresets"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
