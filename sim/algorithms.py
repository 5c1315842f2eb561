"""Alias of `sim.workers.algorithms`, the seven distributed SGD algorithms (kept for old imports)."""

from sim.workers.algorithms import *  # noqa: F403
from sim.workers.algorithms import __all__  # noqa: F401
