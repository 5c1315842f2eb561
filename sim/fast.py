"""Alias of `sim.core.fast` (the fast path), kept for existing imports."""

from sim.core.fast import FastRun, evaluate, message_times_s, single_gpu_iteration_s, supports

__all__ = ["FastRun", "evaluate", "message_times_s", "single_gpu_iteration_s", "supports"]
