"""``optimal``: the fastest grouping of consecutive layers, by dynamic programming."""

from __future__ import annotations

import numpy as np

from sim.comm import CommCost
from sim.core.plan import GradientLayers, Plan
from sim.schedulers.base import plan_from_spans
from sim.schedulers.names import OPTIMAL
from sim.schedulers.registry import SchedulerSpec, ignoring_options, register

__all__ = ["optimal"]


def optimal(grads: GradientLayers, cost: CommCost) -> Plan:
    """The fastest grouping of consecutive layers into messages, exactly.

    Dynamic programming over prefixes in sending order (output layer first).
    With E[j] the earliest end of the first j+1 layers' messages, a message
    holding layers j..i (sending positions) ends at
    ``max(E[j-1], r_i) + T(bytes_j..i)``; that is non-decreasing in E[j-1],
    so the best prefix is part of the best whole, and
    ``E[i] = min_j max(E[j-1], r_i) + T(B_j..i)``. O(n^2) time, vectorised
    over j. Among equal ends it keeps the smaller last message (merges only
    where merging strictly helps).

    E is non-decreasing, and so are the ready times r. Every j with
    E[j-1] <= r_i gives r_i + T(B_j..i), which falls as j grows, so the
    search over j starts at the largest such j: the channel's backlog bounds
    the work, and a model whose messages hide behind backward costs O(n).
    """
    n = grads.n
    if n == 0:
        return Plan(OPTIMAL, ())
    r = grads.ready_s[::-1]  # sending order: output layer first, ready times non-decreasing
    b = grads.nbytes[::-1].astype(float)
    cum = np.concatenate(([0.0], np.cumsum(b)))
    choice = np.empty(n, dtype=np.int64)
    prev = np.empty(n)  # prev[j] = E[j-1], with E[-1] = -inf
    prev[0] = -np.inf
    prev_list, r_list = [-np.inf], r.tolist()
    # Trace-driven costs time single-layer messages by measurement, not by T(M):
    # the bound below then no longer holds, so the search covers every j.
    measured = cost.is_measured
    monotone = bool(np.all(np.diff(r) >= 0) and np.all(b >= 0)) and not measured
    lo = 0  # the largest j with E[j-1] <= r_i, when monotone
    for i in range(n):
        if monotone:
            while lo < i and prev_list[lo + 1] <= r_list[i]:
                lo += 1
        ends = np.maximum(prev[lo : i + 1], r[i]) + cost.time_s(cum[i + 1] - cum[lo : i + 1])
        if measured:  # the message of layer i alone
            ends[-1] = max(prev[i], r[i]) + cost.message_time_s((int(grads.index[n - 1 - i]),), b[i])
        k = ends.shape[0] - 1 - int(np.argmin(ends[::-1]))  # the largest j among the minima
        choice[i] = lo + k
        if i + 1 < n:
            prev[i + 1] = ends[k]
            prev_list.append(float(ends[k]))
    spans_send: list[tuple[int, int]] = []
    i = n - 1
    while i >= 0:
        j = int(choice[i])
        spans_send.append((j, i))
        i = j - 1
    spans_send.reverse()
    # sending positions j..i map to gradient positions n-1-j down to n-1-i
    return plan_from_spans(OPTIMAL, grads, [(n - 1 - j, n - 1 - i) for j, i in spans_send])


SPEC = register(SchedulerSpec(
    OPTIMAL, "The fastest grouping of consecutive layers into messages, exactly (dynamic programming).",
    "this simulator's exact DP over prefixes (the bound MG-WFBP, INFOCOM 2019, is measured against)",
    plan=ignoring_options(optimal), function=optimal))
