"""``optimal``: the fastest grouping of consecutive layers, by dynamic programming."""

from __future__ import annotations

import heapq
import itertools

import numpy as np

from sim.comm import CommCost
from sim.core.plan import GradientLayers, Plan, kept_for
from sim.schedulers.base import plan_from_spans
from sim.schedulers.names import OPTIMAL
from sim.schedulers.optimal_exact import (
    IntCost,
    choices_any_regimes,
    choices_monotone,
    float_exponent,
    scale_exponent,
    to_ints,
)
from sim.schedulers.registry import SchedulerSpec, ignoring_options, register

__all__ = ["optimal", "optimal_every_j", "plan_from_choices"]

#: Rounding slack of the general search's float ends, in units of machine epsilon
#: times the largest magnitude in the window (each end is within 3 of them).
_SLACK_EPS = 16.0


def optimal(grads: GradientLayers, cost: CommCost) -> Plan:
    """The fastest grouping of consecutive layers into messages, exactly, under ``cost`` and the
    gradients' ready times (interference, which `sim.core.run` times a run with, is not part of
    the plan: with it, another grouping can run faster).

    Dynamic programming over prefixes in sending order (output layer first).
    With E[j] the earliest end of the first j+1 layers' messages, a message
    holding layers j..i (sending positions) ends at
    ``max(E[j-1], r_i) + T(bytes_j..i)``; that is non-decreasing in E[j-1],
    so the best prefix is part of the best whole, and
    ``E[i] = min_j max(E[j-1], r_i) + T(B_j..i)``. Among equal ends it keeps
    the smaller last message (the largest j: merges only where merging
    strictly helps).

    Ends are compared exactly, as real numbers (`sim.schedulers.optimal_exact`:
    times are integers in units of 2**-K s). When the channel is behind, many
    groupings cost exactly the same (``E[j-1] - beta S_j`` is the same for
    every j inside one message sent as soon as the previous one ended); in
    floats they would differ by rounding errors and the plan would depend on
    them. (A cost class that times messages its own way, a ready time that is
    not finite or byte counts that are not whole: float ends, ties by rounding.)

    Complexity (n layers with gradients, R size regimes of the cost; ready
    times r non-decreasing in sending order, as a chain's always are):

    * T non-decreasing in the (whole) byte count (affine costs; piecewise
      ones that do not fall at a regime start): E is non-decreasing; every j
      with E[j-1] <= r_i gives r_i + T(B_j..i), least at the largest such j,
      lo; every later j gives ``E[j-1] - beta_k S_j + alpha_k + beta_k S_{i+1}``
      (S the byte prefix sums, k its regime), the minimum of a key over a
      sliding window: one monotone queue per regime. O(n R) time, O(n) memory
      (`choices_monotone`).
    * T falling at a regime start: E may fall too. Per regime, the j whose
      message falls in it are a sliding window; the j with E[j-1] <= r_i (a
      set that only grows) give their least end at the largest of them (a
      Fenwick tree of prefix maxima), the others are kept in a heap by key.
      O(n R log n) time, O(n R) memory (`choices_any_regimes`).
    * measured single-layer times (trace-driven costs, an affine line for
      merged messages): the same with one regime plus the layer alone,
      O(n log n) time, O(n) memory.
    * otherwise (ready times out of order, a cost class timing messages its
      own way): every j, vectorised, with the ends within rounding of the
      least compared exactly: O(n^2) time, O(n) memory.
    """
    n = grads.n
    if n == 0:
        return Plan(OPTIMAL, ())
    exact = _exact_inputs(grads, cost)
    choice = None
    if exact is not None and exact["ready_sorted"]:
        if not cost.is_measured:
            fast = choices_monotone if exact["cost"].non_decreasing() else choices_any_regimes
            choice = fast(exact["ready"], exact["cum"], exact["cost"])
        elif not cost.regimes:
            choice = _choices_measured(exact)
    if choice is None:
        choice = _choices_general(grads, cost, exact)
    return plan_from_choices(grads, choice)


def optimal_every_j(grads: GradientLayers, cost: CommCost) -> Plan:
    """The same plan as `optimal`, by the definition's search over every j <= i (O(n^2),
    vectorised, ends compared exactly): the reference the fast paths are held to."""
    if grads.n == 0:
        return Plan(OPTIMAL, ())
    return plan_from_choices(grads, _choices_general(grads, cost, _exact_inputs(grads, cost), every_j=True))


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


def _exact_inputs(grads: GradientLayers, cost) -> dict | None:
    """The DP's inputs as exact integers (sending order), or None when the cost is not a
    `CommCost` (or one that times messages its own way), a value is not finite or a byte
    count not whole."""
    if not isinstance(cost, CommCost) or type(cost).time_s is not CommCost.time_s:
        return None
    layers = kept_for(grads, "optimal", _ExactLayers.of)
    if layers is None:
        return None
    if cost.is_measured:
        k = scale_exponent(IntCost.floats(cost), np.asarray(cost.layer_s, dtype=float),
                           [cost.added_alpha_s, cost.added_beta_s_per_byte])
    else:
        k = float_exponent(IntCost.floats(cost))
    if k is None:
        return None
    k = max(k, layers.k)  # the least K for the ready times and the cost's floats together
    return {"k": k, "ready": layers.ready_at(k), "cum": layers.cum, "cost": IntCost(cost, k),
            "ready_sorted": layers.ready_sorted, "single": _single_times(grads, cost, k)}


class _ExactLayers:
    """What `_exact_inputs` reads of the gradients alone, worked out once per gradients
    (`sim.core.plan.kept_for`): the least K of the ready times, the ready times in units of
    ``2**-K`` s (at each larger K asked for: shifted, the same integers `to_ints` gives) and the
    byte counts' prefix sums, in sending order; whether the ready times do not decrease."""

    def __init__(self, k: int, ready: list[int], cum: list[int], ready_sorted: bool):
        self.k, self.cum, self.ready_sorted = k, cum, ready_sorted
        self._ready = {k: ready}

    @classmethod
    def of(cls, grads: GradientLayers) -> _ExactLayers | None:
        """None when a byte count is not whole or a ready time not finite."""
        r = np.asarray(grads.ready_s, dtype=float)[::-1]
        nbytes = np.asarray(grads.nbytes)[::-1]
        if nbytes.size and not (np.all(nbytes >= 0) and np.all(np.floor(nbytes) == nbytes)):
            return None
        k = scale_exponent(r)
        if k is None:
            return None
        cum = list(itertools.accumulate(map(int, nbytes.tolist()), initial=0))
        return cls(k, to_ints(r, k), cum, bool(np.all(np.diff(r) >= 0)))

    def ready_at(self, k: int) -> list[int]:
        """The ready times in units of ``2**-k`` s (k at least `k`); the list is shared: not to be changed."""
        found = self._ready.get(k)
        if found is None:
            shift = k - self.k
            found = self._ready[k] = [x << shift for x in self._ready[self.k]]
        return found


def _single_times(grads: GradientLayers, cost, k: int) -> list[int] | None:
    """The exact time of each layer's message alone (sending order) when measured, else None."""
    if not cost.is_measured:
        return None
    added_alpha, added_beta = to_ints([cost.added_alpha_s, cost.added_beta_s_per_byte], k)
    layer = to_ints(cost.layer_s, k)
    return [layer[int(i)] + added_alpha + added_beta * int(b)
            for i, b in zip(grads.index[::-1].tolist(), grads.nbytes[::-1].tolist(), strict=True)]


def _choices_measured(exact: dict) -> list[int]:
    """The exact DP with measured single-layer times and an affine line for merged messages,
    ready times non-decreasing: O(n log n) (see `optimal`)."""
    ready, cum, single = exact["ready"], exact["cum"], exact["single"]
    alpha, beta = exact["cost"].alphas[0], exact["cost"].betas[0]
    n = len(ready)
    prev: list = [float("-inf")] * (n + 1)  # prev[j] = E[j-1]
    choice = [0] * n
    by_key: list = []  # (E[j-1] - beta cum[j], -j): the j < i with E[j-1] > r_i, lazily
    by_end: list = []  # (E[j-1], j): the same, by when they stop waiting
    waited = -1  # the largest j < i with E[j-1] <= r_i
    for i in range(n):
        ri, total = ready[i], cum[i + 1]
        if i:  # j = i - 1 may now start a merged message ending at i
            j = i - 1
            if prev[j] <= ri:
                waited = max(waited, j)
            else:
                heapq.heappush(by_key, (prev[j] - beta * cum[j], -j))
                heapq.heappush(by_end, (prev[j], j))
        while by_end and by_end[0][0] <= ri:
            waited = max(waited, heapq.heappop(by_end)[1])
        while by_key and prev[-by_key[0][1]] <= ri:
            heapq.heappop(by_key)
        best_j, best = i, max(prev[i], ri) + single[i]
        candidates = [(ri + alpha + beta * (total - cum[waited]), waited)] if waited >= 0 else []
        if by_key:
            candidates.append((by_key[0][0] + alpha + beta * total, -by_key[0][1]))
        for end, j in candidates:  # every j here is below i: the larger j wins a tie
            if end < best:
                best_j, best = j, end
            elif end == best and j > best_j:
                best_j = j
        choice[i], prev[i + 1] = best_j, best
    return choice


def _choices_general(grads: GradientLayers, cost, exact: dict | None, every_j: bool = False) -> np.ndarray:
    """The DP over every j <= i, vectorised over j (over j >= lo when the premise of
    `choices_monotone` holds, unless ``every_j``); with ``exact``, the ends within
    rounding of the least are compared exactly, else the float ends are."""
    n = grads.n
    r = np.asarray(grads.ready_s, dtype=float)[::-1]
    b = np.asarray(grads.nbytes)[::-1].astype(float)
    cum = np.concatenate(([0.0], np.cumsum(b)))
    choice = np.empty(n, dtype=np.int64)
    prev = np.full(n + 1, -np.inf)  # prev[j] = E[j-1] (rounded from the exact one with ``exact``)
    prev_exact = np.full(n + 1, float("-inf"), dtype=object)  # exact E[j-1] (Python integers)
    cum_exact = None if exact is None else np.array(exact["cum"], dtype=object)
    eps = float(np.finfo(float).eps)
    from_lo = (not every_j and exact is not None and exact["ready_sorted"] and not cost.is_measured
               and exact["cost"].non_decreasing())
    lo = 0
    for i in range(n):
        while from_lo and lo < i and prev_exact[lo + 1] <= exact["ready"][i]:
            lo += 1
        start = np.maximum(prev[lo : i + 1], r[i])
        ends = start + cost.time_s(cum[i + 1] - cum[lo : i + 1])
        if cost.is_measured:  # the message of layer i alone
            ends[-1] = start[-1] + cost.message_time_s((int(grads.index[n - 1 - i]),), b[i])
        if exact is None:
            j = i - int(np.argmin(ends[::-1]))  # the largest j among the minima
            prev[i + 1] = ends[j - lo]
        else:
            slack = _SLACK_EPS * eps * float(np.max(np.abs(start)) + np.max(np.abs(ends - start)))
            near = (lo + np.flatnonzero(ends <= float(ends.min()) + 2 * slack))[::-1]
            j, prev_exact[i + 1] = _least_exact(exact, cum_exact, prev_exact, i, near)
            prev[i + 1] = prev_exact[i + 1] / (1 << exact["k"])  # correctly rounded
        choice[i] = j
    return choice


def _least_exact(exact: dict, cum: np.ndarray, prev: np.ndarray, i: int, near: np.ndarray) -> tuple[int, int]:
    """(j, end) of the least exact end among the j in ``near`` (descending): the largest on a tie.
    Python integers in object arrays: exact, and vectorised over the candidates."""
    cost = exact["cost"]
    nbytes = cum[i + 1] - cum[near]
    regime = np.searchsorted(cost.starts, nbytes.astype(float), side="right") - 1  # whole counts: exact
    took = cost.alpha_array[regime] + cost.beta_array[regime] * nbytes
    if exact["single"] is not None and near[0] == i:
        took[0] = exact["single"][i]
    ends = np.maximum(prev[near], exact["ready"][i]) + took
    k = list(ends).index(ends.min())
    return int(near[k]), ends[k]


SPEC = register(SchedulerSpec(
    OPTIMAL, "The fastest grouping of consecutive layers into messages, exactly (dynamic programming).",
    "this simulator's exact DP over prefixes (the bound MG-WFBP, INFOCOM 2019, is measured against)",
    plan=ignoring_options(optimal), function=optimal))
