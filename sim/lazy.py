"""A package attribute that imports the package's submodule of that name on first use (PEP 562).

``sim``, ``sim.core`` and ``sim.calib`` load nothing they do not need at import: a script's
``import sim`` then ``sim.core.run.MAX_TASKS = ...`` imports ``sim.core.run`` when it is read.
"""

from __future__ import annotations

import importlib

__all__ = ["submodule", "submodules"]


def submodule(package: str, name: str):
    """``package.name`` imported; an AttributeError (as for any missing attribute) when there is none."""
    if not name.startswith("__"):
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{name}":
                raise
    raise AttributeError(f"module {package!r} has no attribute {name!r}")


def submodules(package: str):
    """A module-level ``__getattr__`` for ``package`` that imports its submodules on first use."""
    def __getattr__(name: str):
        return submodule(package, name)
    return __getattr__
