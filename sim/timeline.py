"""Alias of `sim.core.timeline` (the one timeline schema), kept for existing imports."""

from sim.core.timeline import (
    COMPUTE_KINDS,
    TIMELINE_COLUMNS,
    frame,
    graph_timeline,
    interval_overlap_s,
)

__all__ = ["COMPUTE_KINDS", "TIMELINE_COLUMNS", "frame", "graph_timeline", "interval_overlap_s"]
