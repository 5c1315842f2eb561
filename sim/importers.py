"""Old import path of `sim.calib.importers`, kept so existing code keeps working."""

# ruff: noqa: F403, F405
from sim.calib.importers import *

__all__ = [
    "FORWARD_OVER_BACKWARD",
    "IMPORTERS",
    "bcaffe_layers",
    "parse_bcaffe_blobs",
]
