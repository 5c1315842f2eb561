"""Old import path of `sim.calib.validation`, kept so existing code keeps working."""

# ruff: noqa: F403, F405
from sim.calib.validation import *

__all__ = [
    "CASE_COLUMNS",
    "DEFAULT_REFERENCE_DIR",
    "case_model",
    "coarse_versus_fine",
    "fit_ps_link_efficiency",
    "load_cases",
    "run_validation",
    "summarize",
]
