"""Old import path of `sim.calib.validation`, kept so existing code keeps working."""

# ruff: noqa: F403
import sim.calib.validation
from sim.calib.validation import *

__all__ = list(sim.calib.validation.__all__)
