"""Alias: the survey's architectures and schedulers are lowered by `sim.core.lower`."""

from __future__ import annotations

from sim.core.lower import needs_general_engine, parts_of
from sim.dag import build_dag

__all__ = ["build_arch_dag", "needs_arch_dag", "parts_of"]

#: The one lowering builds every plan (see `sim.core.lower`).
build_arch_dag = build_dag
needs_arch_dag = needs_general_engine
