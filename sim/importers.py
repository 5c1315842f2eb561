"""Old import path of `sim.calib.importers`, kept so existing code keeps working."""

# ruff: noqa: F403
import sim.calib.importers
from sim.calib.importers import *

__all__ = list(sim.calib.importers.__all__)
