"""What the schedulers share: turning spans of layers into a plan, filling
buckets, and the WFBP recurrence of a channel's message end times."""

from __future__ import annotations

import numpy as np

from sim.core.plan import GradientLayers, MessageLayers, Plan

__all__ = ["comm_end_s", "fill_buckets", "plan_from_spans", "plan_per_gradient"]


def plan_from_spans(name: str, grads: GradientLayers, spans: list[tuple[int, int]],
                    after_backward: bool = False, lag_s: tuple[float, ...] = ()) -> Plan:
    """Turn spans of gradient positions [hi down to lo] into a plan of model indices. Spans that
    cover every gradient once, from the last down (as the schedulers cut them), give the plan its
    `Plan.message_layers` at once: the gradients' index reversed, cut at each span."""
    index = grads.index.tolist()
    groups = tuple([(index[hi],) if hi == lo else tuple(index[lo:hi + 1][::-1]) for hi, lo in spans])
    plan = Plan(name, groups, after_backward, lag_s)
    expect, offsets = len(index) - 1, []
    for hi, lo in spans:
        if hi != expect or lo > hi:
            return plan  # not one cover from the last gradient down: worked out when read
        offsets.append(len(index) - 1 - hi)
        expect = lo - 1
    if spans and expect == -1:
        flat, at = grads.index[::-1].astype(np.int64), np.array(offsets, np.int64)
        _know_layers(plan, flat, at, np.minimum.reduceat(flat, at), index)
    return plan


def plan_per_gradient(name: str, grads: GradientLayers, after_backward: bool = False) -> Plan:
    """One message per gradient, in backward order (the plan of the spans ``[(n-1, n-1), ..., (0, 0)]``),
    with its `Plan.message_layers` worked out from the gradients' index at once."""
    index = grads.index.tolist()
    plan = Plan(name, tuple(zip(reversed(index))), after_backward)
    flat = grads.index[::-1].astype(np.int64)  # (a copy)
    _know_layers(plan, flat, np.arange(len(index), dtype=np.int64), flat, index)
    return plan


def _know_layers(plan: Plan, flat: np.ndarray, offsets: np.ndarray, lowest: np.ndarray, index: list) -> None:
    """Give ``plan`` its `Plan.message_layers` (a cached property: kept in the instance's dict), no
    message empty; a layer is sent twice when ``index`` repeats one (or one is negative)."""
    repeats = bool(index) and (min(index) < 0 or len(set(index)) < len(index))
    for arr in (flat, offsets, lowest):
        arr.flags.writeable = False
    plan.__dict__["message_layers"] = MessageLayers(flat, offsets, lowest, False, repeats)


def fill_buckets(grads: GradientLayers, first_cap_bytes: float, cap_bytes: float) -> list[tuple[int, int]]:
    """Spans of gradient positions, in ready order: a gradient joins the open bucket,
    which closes once it holds at least its cap (the first bucket's cap may differ)."""
    spans: list[tuple[int, int]] = []
    cap, hi, filled = first_cap_bytes, grads.n - 1, 0.0
    nbytes = grads.nbytes.astype(float).tolist()  # Python floats: the values float() gives, without numpy per item
    for l in range(grads.n - 1, -1, -1):
        filled += nbytes[l]
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
