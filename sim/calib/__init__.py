"""Calibration: fitting networks, importing measured traces, validation against published measurements."""

from sim.lazy import submodules

__getattr__ = submodules(__name__)
