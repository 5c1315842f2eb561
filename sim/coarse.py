"""Old import path of `sim.calib.coarse`, kept so existing code keeps working."""

# ruff: noqa: F403
import sim.calib.coarse
from sim.calib.coarse import *

__all__ = list(sim.calib.coarse.__all__)
