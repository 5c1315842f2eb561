"""Calibration: fitting networks, importing measured traces, validation against published measurements."""
