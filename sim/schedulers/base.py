"""What the schedulers share: turning spans of layers into a plan, filling
buckets, and the WFBP recurrence of a channel's message end times."""

from __future__ import annotations

import numpy as np

from sim.core.plan import GradientLayers, MessageLayers, Plan

__all__ = ["comm_end_s", "fill_buckets", "plan_from_spans", "plan_per_gradient"]


def plan_from_spans(name: str, grads: GradientLayers, spans: list[tuple[int, int]],
                    after_backward: bool = False) -> Plan:
    """Turn spans of gradient positions [hi down to lo] into a plan of model indices."""
    index = grads.index.tolist()
    groups = tuple([(index[hi],) if hi == lo else tuple(index[lo:hi + 1][::-1]) for hi, lo in spans])
    return Plan(name, groups, after_backward)


def plan_per_gradient(name: str, grads: GradientLayers, after_backward: bool = False) -> Plan:
    """One message per gradient, in backward order (the plan of the spans ``[(n-1, n-1), ..., (0, 0)]``),
    with its `Plan.message_layers` worked out from the gradients' index at once."""
    index = grads.index.tolist()
    plan = Plan(name, tuple(zip(reversed(index))), after_backward)
    flat = np.array(index[::-1], dtype=np.int64)
    repeats = bool(index) and (min(index) < 0 or len(set(index)) < len(index))
    offsets = np.arange(len(index), dtype=np.int64)
    for arr in (flat, offsets):
        arr.flags.writeable = False
    plan.__dict__["message_layers"] = MessageLayers(flat, offsets, flat, False, repeats)  # (a cached_property)
    return plan


def fill_buckets(grads: GradientLayers, first_cap_bytes: float, cap_bytes: float) -> list[tuple[int, int]]:
    """Spans of gradient positions, in ready order: a gradient joins the open bucket,
    which closes once it holds at least its cap (the first bucket's cap may differ)."""
    spans: list[tuple[int, int]] = []
    cap, hi, filled = first_cap_bytes, grads.n - 1, 0.0
    for l in range(grads.n - 1, -1, -1):
        filled += float(grads.nbytes[l])
        if filled >= cap:
            spans.append((hi, l))
            cap, hi, filled = cap_bytes, l - 1, 0.0
    if hi >= 0:
        spans.append((hi, 0))
    return spans


def comm_end_s(ready_s: np.ndarray, t_c_s: np.ndarray) -> np.ndarray:
    """End time of each message sent in order on one channel.

    ``end[g] = max(end[g-1], ready[g]) + t_c[g]``, the WFBP recurrence
    (MG-WFBP paper, Eq. 5), evaluated as a max-plus prefix scan:
    ``end = C + cummax(ready - C_prev)`` with ``C`` the cumulative sum of t_c.
    """
    c = np.cumsum(t_c_s)
    c_prev = c - t_c_s
    return c + np.maximum.accumulate(ready_s - c_prev)
