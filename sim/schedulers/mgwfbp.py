"""``mgwfbp``: merged-gradient wait-free backpropagation."""

from __future__ import annotations

import math

import numpy as np

from sim.comm import CommCost
from sim.core.plan import GradientLayers, Plan
from sim.schedulers.base import plan_from_spans, value_lists
from sim.schedulers.names import MGWFBP
from sim.schedulers.registry import SchedulerSpec, ignoring_options, register

__all__ = ["mgwfbp"]


def mgwfbp(grads: GradientLayers, cost: CommCost) -> Plan:
    """Merged-gradient WFBP (Shi, Chu and Li, INFOCOM 2019, arXiv 1811.11141),
    with the merge rule of the authors' published implementation.

    Walk l from the last layer down to the second. Let r = tau_b(l-1) +
    t_b(l-1), when layer l-1's gradient is ready. If r < tau_c(l) + t_c(l),
    merge layer l into layer l-1 when either tau_c(l) > r (l would not start
    before l-1 is ready anyway) or r - tau_c(l) < alpha (waiting costs less
    than the start-up a merge saves). t_c and tau_c of the merged message are
    recomputed after each merge; messages already committed do not change, so
    one pass in O(n) suffices.
    """
    n = grads.n
    if n == 0:
        return Plan(MGWFBP, ())
    r, nbytes = value_lists(grads)
    if type(cost).time_s is CommCost.time_s and not cost.regimes and not cost.is_measured:
        spans = _affine_spans(r, nbytes, cost.alpha_s, float(cost.alpha_s), float(cost.beta_s_per_byte))
        return plan_from_spans(MGWFBP, grads, spans)
    time_s = cost.scalar_time()
    spans: list[tuple[int, int]] = []
    prev_end = -np.inf
    hi = n - 1
    group_bytes = nbytes[n - 1]
    measured, alpha_s = cost.is_measured, cost.alpha_s
    for l in range(n - 1, 0, -1):
        tau_c = r[l] if r[l] > prev_end else prev_end  # the current message is ready once layer l is
        if measured:  # a single-layer message takes its measured time
            t_c = cost.message_time_s(tuple(int(i) for i in grads.index[l : hi + 1]), group_bytes)
        else:
            t_c = time_s(group_bytes)
        r_next = r[l - 1]
        if r_next < tau_c + t_c and (tau_c > r_next or r_next - tau_c < alpha_s):
            group_bytes += nbytes[l - 1]
        else:
            spans.append((hi, l))
            prev_end = tau_c + t_c
            hi = l - 1
            group_bytes = nbytes[l - 1]
    spans.append((hi, 0))
    return plan_from_spans(MGWFBP, grads, spans)


def _affine_spans(r: list[float], nbytes: list[float], alpha_s, alpha: float, beta: float) -> list[tuple[int, int]]:
    """`mgwfbp`'s spans under a plain alpha-beta line ``alpha + beta M`` (Python floats: the same
    product and sum as ``time_s``, so the same bits), the merge rule's ``alpha_s`` as given."""
    spans: list[tuple[int, int]] = []
    hi = len(r) - 1
    prev_end, group_bytes, r_l = -math.inf, nbytes[hi], r[hi]
    for l, r_next, bytes_next in zip(range(hi, 0, -1), reversed(r[:-1]), reversed(nbytes[:-1]), strict=True):
        tau_c = r_l if r_l > prev_end else prev_end
        end = tau_c + (alpha + beta * group_bytes)
        if r_next < end and (tau_c > r_next or r_next - tau_c < alpha_s):
            group_bytes += bytes_next
        else:
            spans.append((hi, l))
            prev_end, hi, group_bytes = end, l - 1, bytes_next
        r_l = r_next
    spans.append((hi, 0))
    return spans


SPEC = register(SchedulerSpec(
    MGWFBP, "Merged-gradient WFBP: merges a layer into the next when waiting costs less than a start-up.",
    "Shi, Chu and Li, MG-WFBP, INFOCOM 2019, arXiv 1811.11141 (merge rule of the authors' code)",
    plan=ignoring_options(mgwfbp), function=mgwfbp))
