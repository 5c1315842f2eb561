"""What the schedulers share: turning spans of layers into a plan, filling
buckets, and the WFBP recurrence of a channel's message end times."""

from __future__ import annotations

import numpy as np

from sim.core.plan import GradientLayers, MessageLayers, Plan, kept_for

__all__ = ["comm_end_s", "fill_buckets", "index_lists", "plan_from_spans", "plan_per_gradient",
           "value_lists"]


def plan_from_spans(name: str, grads: GradientLayers, spans: list[tuple[int, int]],
                    after_backward: bool = False, lag_s: tuple[float, ...] = ()) -> Plan:
    """Turn spans of gradient positions [hi down to lo] into a plan of model indices. Spans that
    cover every gradient once, from the last down (as the schedulers cut them), give the plan its
    `Plan.message_layers` at once: the gradients' index reversed, cut at each span."""
    index, backward, repeats = index_lists(grads)
    last = len(index) - 1
    groups = tuple([(index[hi],) if hi == lo else tuple(backward[last - hi:last + 1 - lo]) for hi, lo in spans])
    plan = Plan(name, groups, after_backward, lag_s)
    expect, offsets = last, []
    for hi, lo in spans:
        if hi != expect or lo > hi:
            return plan  # not one cover from the last gradient down: worked out when read
        offsets.append(last - hi)
        expect = lo - 1
    if spans and expect == -1:
        flat, at = grads.index[::-1].astype(np.int64), np.array(offsets, np.int64)
        _know_layers(plan, flat, at, np.minimum.reduceat(flat, at), repeats)
    return plan


def plan_per_gradient(name: str, grads: GradientLayers, after_backward: bool = False) -> Plan:
    """One message per gradient, in backward order (the plan of the spans ``[(n-1, n-1), ..., (0, 0)]``),
    with its `Plan.message_layers` worked out from the gradients' index at once."""
    _, backward, repeats = index_lists(grads)
    plan = Plan(name, tuple(zip(backward)), after_backward)
    flat = grads.index[::-1].astype(np.int64)  # (a copy)
    _know_layers(plan, flat, np.arange(len(backward), dtype=np.int64), flat, repeats)
    return plan


def index_lists(grads: GradientLayers) -> tuple[list[int], list[int], bool]:
    """The gradients' model indices as a list, the same in backward order, and whether one
    repeats (or is negative); worked out once per gradients (`sim.core.plan.kept_for`)."""
    return kept_for(grads, "index", _index_lists)


def _index_lists(grads: GradientLayers) -> tuple[list[int], list[int], bool]:
    index = grads.index.tolist()
    return index, index[::-1], bool(index) and (min(index) < 0 or len(set(index)) < len(index))


def value_lists(grads: GradientLayers) -> tuple[list[float], list[float]]:
    """The gradients' ready times and sizes as lists of floats (the values ``float()`` gives, without
    numpy per item); worked out once per gradients (`sim.core.plan.kept_for`)."""
    return kept_for(grads, "values", _value_lists)


def _value_lists(grads: GradientLayers) -> tuple[list[float], list[float]]:
    return grads.ready_s.tolist(), grads.nbytes.astype(float).tolist()


def _know_layers(plan: Plan, flat: np.ndarray, offsets: np.ndarray, lowest: np.ndarray, repeats: bool) -> None:
    """Give ``plan`` its `Plan.message_layers` (a cached property: kept in the instance's dict), no
    message empty; ``repeats``: a layer is sent twice (the index repeats one, or one is negative)."""
    for arr in (flat, offsets, lowest):
        arr.flags.writeable = False
    plan.__dict__["message_layers"] = MessageLayers(flat, offsets, lowest, False, repeats)


def fill_buckets(grads: GradientLayers, first_cap_bytes: float, cap_bytes: float) -> list[tuple[int, int]]:
    """Spans of gradient positions, in ready order: a gradient joins the open bucket,
    which closes once it holds at least its cap (the first bucket's cap may differ)."""
    spans: list[tuple[int, int]] = []
    cap, hi, filled = first_cap_bytes, grads.n - 1, 0.0
    nbytes = value_lists(grads)[1]
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
