"""Alias of `sim.workers.training`, the accuracy replay of the algorithms (kept for old imports)."""

from sim.workers.training import *  # noqa: F403
from sim.workers.training import __all__  # noqa: F401
