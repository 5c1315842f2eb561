"""``synceasgd``: every gradient in one message after backward."""

from __future__ import annotations

from sim.comm import CommCost
from sim.core.plan import GradientLayers, Plan
from sim.schedulers.base import plan_from_spans
from sim.schedulers.names import SYNCEASGD
from sim.schedulers.registry import SchedulerSpec, ignoring_options, register

__all__ = ["synceasgd"]


def synceasgd(grads: GradientLayers, cost: CommCost) -> Plan:
    """SyncEASGD: one message with every gradient, sent after backward ends."""
    return plan_from_spans(SYNCEASGD, grads, [(grads.n - 1, 0)] if grads.n else [])


SPEC = register(SchedulerSpec(
    SYNCEASGD, "SyncEASGD: one message with every gradient, sent after backward ends.",
    "You et al., ImageNet Training in Minutes, ICPP 2018 (as compared in MG-WFBP, INFOCOM 2019)",
    plan=ignoring_options(synceasgd), function=synceasgd))
