"""Keep the user's own configuration out of the whole test session.

The network catalog reads user presets from ``$SSGD_NETWORKS`` or
``~/.config/ssgd/networks.csv``. A developer's file there (malformed, or
defining presets the tests do not expect) must not change what the suite
sees, and some test modules simulate at import time, during collection. So
before collection starts, ``HOME`` and ``XDG_CONFIG_HOME`` point into a fresh
temporary directory and ``$SSGD_NETWORKS`` is removed, for this process and
every subprocess it starts. Tests that need a presets file set their own.
"""

import os
import shutil
import tempfile

from hypothesis import settings

# No per-example deadline anywhere: a deadline is a timed assertion, and the suite runs its tests two
# at a time (pytest-xdist) on two cores beside browsers, where an example's wall time says nothing.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

_ISOLATED = ("HOME", "XDG_CONFIG_HOME", "SSGD_NETWORKS")
_saved: dict[str, str | None] = {}
_tmp: list[str] = []


def pytest_configure(config):
    root = tempfile.mkdtemp(prefix="ssgd-tests-home-")
    _tmp.append(root)
    _saved.update({name: os.environ.get(name) for name in _ISOLATED})
    home = os.path.join(root, "home")
    os.makedirs(os.path.join(home, ".config"))
    os.environ["HOME"] = home
    os.environ["XDG_CONFIG_HOME"] = os.path.join(home, ".config")
    os.environ.pop("SSGD_NETWORKS", None)


def pytest_unconfigure(config):
    for name, value in _saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    for root in _tmp:
        shutil.rmtree(root, ignore_errors=True)
