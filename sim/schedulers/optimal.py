"""``optimal``: the fastest grouping of consecutive layers, by dynamic programming."""

from __future__ import annotations

import dataclasses
from collections import deque

import numpy as np

from sim.comm import CommCost
from sim.core.plan import GradientLayers, Plan
from sim.schedulers.base import plan_from_spans
from sim.schedulers.names import OPTIMAL
from sim.schedulers.registry import SchedulerSpec, ignoring_options, register

__all__ = ["optimal", "plan_from_choices"]

#: Near-tied candidates (see `_choices_affine`) evaluated one by one at most; more, and
#: that step evaluates its whole window, vectorised, as the general DP does.
_MAX_NEAR_TIES = 48
#: Rounding slack, in units of the largest magnitude in the DP times machine epsilon.
_SLACK_ULPS = 64.0


def optimal(grads: GradientLayers, cost: CommCost) -> Plan:
    """The fastest grouping of consecutive layers into messages, exactly.

    Dynamic programming over prefixes in sending order (output layer first).
    With E[j] the earliest end of the first j+1 layers' messages, a message
    holding layers j..i (sending positions) ends at
    ``max(E[j-1], r_i) + T(bytes_j..i)``; that is non-decreasing in E[j-1],
    so the best prefix is part of the best whole, and
    ``E[i] = min_j max(E[j-1], r_i) + T(B_j..i)``. Among equal ends it keeps
    the smaller last message (merges only where merging strictly helps).

    E is non-decreasing, and so are the ready times r. Every j with
    E[j-1] <= r_i gives r_i + T(B_j..i), which falls as j grows, so the
    search over j starts at the largest such j, lo (the channel's backlog).

    Complexity. With the alpha-beta cost ``T(M) = alpha + beta M`` (a plain
    `CommCost`), every later j gives ``E[j-1] - beta S_j + alpha + beta
    S_{i+1}`` (S the byte prefix sums): the best j is the minimum of a key over
    a sliding window, kept in a monotone queue, so the DP takes O(n) time
    amortised and O(n) memory when the minimum is clear. The exact ends of the
    candidates whose keys are within rounding of the minimum are compared as
    the definition computes them, so the plan is the same as the O(n^2)
    search's to the bit; a step with ends tied up to rounding (messages that
    cost the same either way, common when the channel is far behind) searches
    its whole window, vectorised, so the worst case stays O(n * backlog). Any other cost (measured per-layer times, other cost models):
    the window [lo, i] searched vectorised, O(n * backlog), O(n^2) at worst.
    """
    n = grads.n
    if n == 0:
        return Plan(OPTIMAL, ())
    r = grads.ready_s[::-1]  # sending order: output layer first, ready times non-decreasing
    b = grads.nbytes[::-1].astype(float)
    cum = np.concatenate(([0.0], np.cumsum(b)))
    monotone = bool(np.all(np.diff(r) >= 0) and np.all(b >= 0)) and not cost.is_measured
    choice = _choices_affine(r, cum, cost) if monotone and _is_affine(cost) else None
    if choice is None:
        choice = _choices_general(grads, r, b, cum, cost, monotone)
    return plan_from_choices(grads, choice)


def plan_from_choices(grads: GradientLayers, choice) -> Plan:
    """The plan of the DP's choices: ``choice[i]`` is the first sending position of
    the message that ends at position i (output layer first)."""
    n = grads.n
    spans_send: list[tuple[int, int]] = []
    i = n - 1
    while i >= 0:
        j = int(choice[i])
        spans_send.append((j, i))
        i = j - 1
    spans_send.reverse()
    # sending positions j..i map to gradient positions n-1-j down to n-1-i
    return plan_from_spans(OPTIMAL, grads, [(n - 1 - j, n - 1 - i) for j, i in spans_send])


def _is_affine(cost) -> bool:
    """True when ``cost.time_s`` is exactly ``alpha_s + beta_s_per_byte * M`` (a plain `CommCost`)."""
    return (type(cost) is CommCost and {f.name for f in dataclasses.fields(cost)} == {"alpha_s", "beta_s_per_byte",
                                                                                       "label"})


def _choices_general(grads, r, b, cum, cost, monotone: bool) -> np.ndarray:
    """The DP searching the window [lo, i] of every i, vectorised over j."""
    n = grads.n
    choice = np.empty(n, dtype=np.int64)
    prev = np.empty(n)  # prev[j] = E[j-1], with E[-1] = -inf
    prev[0] = -np.inf
    prev_list, r_list = [-np.inf], r.tolist()
    # Trace-driven costs time single-layer messages by measurement, not by T(M):
    # the bound below then no longer holds, so the search covers every j.
    measured = cost.is_measured
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
    return choice


class _Window:
    """The keys ``E[j-1] - beta S_j`` of j in (lo, i], as a monotone queue.

    The queue holds the j whose key is below every later key (its front is
    the minimum). A j pushed out by a later j' with a key within twice
    ``slack`` of its own may still be the exact minimum after rounding (each
    key is within ``slack`` of its end): j' counts such j (``near``), and a
    step whose minimum has any is searched over its whole window.
    """

    def __init__(self, slack: float):
        self.slack = slack
        self.queue: deque = deque()  # (key, j, near-ties pushed out by it)

    def push(self, key: float, j: int) -> None:
        near = 0
        queue, bound = self.queue, key + 2 * self.slack
        while queue and queue[-1][0] >= key:
            k_old, _, near_old = queue.pop()
            if k_old <= bound:
                near += 1 + near_old
        queue.append((key, j, near))

    def candidates(self, lo: int) -> list[int] | None:
        """Every j > lo whose key is within twice the slack of the minimum; None when
        some j pushed out of the queue may be one (then the caller searches the window)."""
        queue = self.queue
        while queue and queue[0][1] <= lo:
            queue.popleft()
        if not queue:
            return []
        bound = queue[0][0] + 2 * self.slack
        found: list[int] = []
        for key, j, near in queue:
            if key > bound:
                break
            if near or len(found) >= _MAX_NEAR_TIES:
                return None
            found.append(j)
        return found


def _choices_affine(r: np.ndarray, cum: np.ndarray, cost: CommCost) -> np.ndarray | None:
    """The DP for ``T(M) = alpha + beta M`` in O(n) amortised (see `optimal`); None
    if E turns out not non-decreasing (then the general DP decides)."""
    n = len(r)
    alpha, beta = float(cost.alpha_s), float(cost.beta_s_per_byte)
    r_l, cum_l = r.tolist(), cum.tolist()
    # every quantity the DP adds is at most about this large: rounding errors are below slack
    scale = abs(r_l[0]) + abs(r_l[-1]) + (n + 1) * alpha + 2 * beta * cum_l[-1]
    window = _Window(_SLACK_ULPS * float(np.finfo(float).eps) * scale)
    prev = [-np.inf] * (n + 1)  # prev[j] = E[j-1]
    prev_a = np.full(n + 1, -np.inf)  # the same, for the vectorised windows
    choice = np.empty(n, dtype=np.int64)
    lo = 0
    for i in range(n):
        ri, total = r_l[i], cum_l[i + 1]
        while lo < i and prev[lo + 1] <= ri:
            lo += 1
        p = prev[lo]
        best_j, best = lo, (p if p > ri else ri) + (alpha + beta * (total - cum_l[lo]))
        near = window.candidates(lo)
        if near is None:  # too many near-ties: the whole window, as the general DP computes it
            best_j, best = _best_in(prev_a, r_l[i], cum, lo, i, alpha, beta)
        else:
            for j in near:
                end = prev[j] + (alpha + beta * (total - cum_l[j]))
                if end < best or (end == best and j > best_j):
                    best_j, best = j, end
        choice[i] = best_j
        if best < prev[i]:  # E would decrease: the window's premise fails
            return None
        prev[i + 1] = prev_a[i + 1] = best
        if i + 1 < n:
            window.push(best - beta * cum_l[i + 1], i + 1)
    return choice


def _best_in(prev: np.ndarray, r_i: float, cum: np.ndarray, lo, i, alpha, beta) -> tuple[int, float]:
    """The largest j in [lo, i] among the minima of the exact ends, vectorised."""
    ends = np.maximum(prev[lo : i + 1], r_i) + (alpha + beta * (cum[i + 1] - cum[lo : i + 1]))
    k = ends.shape[0] - 1 - int(np.argmin(ends[::-1]))
    return lo + k, float(ends[k])


SPEC = register(SchedulerSpec(
    OPTIMAL, "The fastest grouping of consecutive layers into messages, exactly (dynamic programming).",
    "this simulator's exact DP over prefixes (the bound MG-WFBP, INFOCOM 2019, is measured against)",
    plan=ignoring_options(optimal), function=optimal))
