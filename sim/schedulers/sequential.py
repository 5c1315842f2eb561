"""``sequential``: no overlap of communication with backward."""

from __future__ import annotations

from sim.comm import CommCost
from sim.core.plan import GradientLayers, Plan
from sim.schedulers.base import plan_per_gradient
from sim.schedulers.names import SEQUENTIAL
from sim.schedulers.registry import SchedulerSpec, ignoring_options, register

__all__ = ["sequential"]


def sequential(grads: GradientLayers, cost: CommCost) -> Plan:
    """No overlap: one message per layer, all sent after backward ends."""
    return plan_per_gradient(SEQUENTIAL, grads, after_backward=True)


SPEC = register(SchedulerSpec(
    SEQUENTIAL, "No overlap: one message per layer, all sent after backward ends.",
    "Shi, Chu and Li, MG-WFBP, INFOCOM 2019, Sec. III (the baseline without overlap)",
    plan=ignoring_options(sequential), function=sequential))
