"""Old import path of `sim.calib.fit`, kept so existing code keeps working."""

# ruff: noqa: F403
import sim.calib.fit
from sim.calib.fit import *

__all__ = list(sim.calib.fit.__all__)
