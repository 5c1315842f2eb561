"""``wfbp``: wait-free backpropagation, one message per layer as soon as it is ready."""

from __future__ import annotations

from sim.comm import CommCost
from sim.core.plan import GradientLayers, Plan
from sim.schedulers.base import plan_per_gradient
from sim.schedulers.names import WFBP
from sim.schedulers.registry import SchedulerSpec, ignoring_options, register

__all__ = ["wfbp"]


def wfbp(grads: GradientLayers, cost: CommCost) -> Plan:
    """Wait-free backpropagation: one message per layer, sent as soon as its
    gradient is ready; the channel serves messages in order.

    tau_c(l) = max(tau_c(l+1) + t_c(l+1), tau_b(l) + t_b(l))  (MG-WFBP, Eq. 5).
    """
    return plan_per_gradient(WFBP, grads)


SPEC = register(SchedulerSpec(
    WFBP, "Wait-free backpropagation: one message per layer, sent as soon as its gradient is ready.",
    "Zhang et al., Poseidon, USENIX ATC 2017; MG-WFBP (INFOCOM 2019), Eq. 5",
    plan=ignoring_options(wfbp), function=wfbp))
