"""Old import path of `sim.calib.fit`, kept so existing code keeps working."""

# ruff: noqa: F403, F405
from sim.calib.fit import *

__all__ = [
    "COLLECTIVES",
    "Fit",
    "WEIGHTINGS",
    "fit_alpha_beta",
    "fit_to_network",
    "parse_allreduce_log",
    "parse_nccl_tests",
    "parse_osu_allreduce",
]
