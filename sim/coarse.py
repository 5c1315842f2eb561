"""Old import path of `sim.calib.coarse`, kept so existing code keeps working."""

# ruff: noqa: F403, F405
from sim.calib.coarse import *

__all__ = [
    "COARSE_PHASES",
    "coarse_iteration",
    "compare_coarse_fine",
    "fit_overlap",
]
