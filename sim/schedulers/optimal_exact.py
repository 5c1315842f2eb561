"""Exact arithmetic for the ``optimal`` scheduler's dynamic programming.

Every time the DP adds is a float (ready times, a cost's alphas and betas, measured
per-layer times) or an integer (byte counts), so every end it computes is a sum of
floats and of floats times integers: a dyadic rational. Scaled by ``2**K`` (`scale_exponent`)
each is a Python integer, and sums, products by byte counts and comparisons of
integers are exact. The DP then compares ends as real numbers, and two plans whose
ends are equal in real arithmetic tie exactly (the tie rule decides), instead of
one winning by a rounding error of a few ulps.

`IntCost` is a cost in those units. For ready times that do not decrease,
`choices_monotone` is the DP in O(n * regimes) when the cost does not fall as the size
grows, and `choices_any_regimes` in O(n * regimes * log n) when it falls at a regime
start (see ``sim.schedulers.optimal`` for the arguments).
"""

from __future__ import annotations

import bisect
import functools
import heapq
import math
from collections import deque

import numpy as np

__all__ = ["IntCost", "choices_any_regimes", "choices_monotone", "float_exponent", "scale_exponent", "to_ints"]

def scale_exponent(*arrays) -> int | None:
    """The least K with ``53 - e <= K`` for every nonzero value ``m 2**e`` (``0.5 <= |m| < 1``)
    of ``arrays``, so that each value times ``2**K`` is an integer; None when one is not finite."""
    values = np.concatenate([np.ravel(np.asarray(a, dtype=float)) for a in arrays] + [np.zeros(1)])
    if not np.all(np.isfinite(values)):
        return None
    nonzero = values[values != 0]
    if nonzero.size == 0:
        return 0
    _, exps = np.frexp(nonzero)  # 53 mantissa bits: x 2**(53-e) is whole
    return max(int((53 - exps).max()), 0)


def to_ints(values, k: int) -> list[int]:
    """``values * 2**k`` as exact Python integers (k from `scale_exponent`, any size)."""
    mantissas, exps = np.frexp(np.asarray(values, dtype=float))
    whole = np.ldexp(mantissas, 53).astype(np.int64).tolist()  # |m 2**53| < 2**53: exact
    return [m << s if m else 0 for m, s in zip(whole, (exps + (k - 53)).tolist(), strict=True)]


def float_exponent(values) -> int | None:
    """`scale_exponent` of a few floats, on Python floats (the same ``frexp``: the same K)."""
    k = 0
    for x in values:
        m, e = math.frexp(float(x))
        if not math.isfinite(m):
            return None
        if m and 53 - e > k:
            k = 53 - e
    return k


def _int_of(x: float, k: int) -> int:
    """`to_ints` of one float."""
    m, e = math.frexp(float(x))
    return int(m * 9007199254740992.0) << (e + k - 53) if m else 0  # m 2**53: whole, exact


class IntCost:
    """A cost ``T(M) = alpha_k + beta_k M`` (regime k: the last whose start is at or below M)
    in units of ``2**-k`` seconds, on integer byte counts M."""

    def __init__(self, cost, k: int):
        table = [(r.from_bytes, r.alpha_s, r.beta_s_per_byte) for r in cost.regimes] or [
            (0.0, cost.alpha_s, cost.beta_s_per_byte)]
        self.starts = [float(s) for s, _, _ in table]
        self.alphas = [_int_of(a, k) for _, a, _ in table]
        self.betas = [_int_of(b, k) for _, _, b in table]

    @functools.cached_property
    def alpha_array(self) -> np.ndarray:
        return np.array(self.alphas, dtype=object)

    @functools.cached_property
    def beta_array(self) -> np.ndarray:
        return np.array(self.betas, dtype=object)

    @staticmethod
    def floats(cost) -> list[float]:
        """The floats this cost adds (for `scale_exponent`)."""
        if cost.regimes:
            return [x for r in cost.regimes for x in (r.alpha_s, r.beta_s_per_byte)]
        return [cost.alpha_s, cost.beta_s_per_byte]

    def regime(self, nbytes: int) -> int:
        return bisect.bisect_right(self.starts, nbytes) - 1

    def time(self, nbytes: int) -> int:
        k = bisect.bisect_right(self.starts, nbytes) - 1
        return self.alphas[k] + self.betas[k] * nbytes

    def non_decreasing(self) -> bool:
        """True when T never falls as the (whole) byte count grows: at each regime's first
        whole size, T is not below its value one byte less."""
        for k, start in enumerate(self.starts):
            first = math.ceil(start)
            if k and first >= 1 and (k + 1 == len(self.starts) or first < self.starts[k + 1]) \
                    and self.time(first) < self.time(first - 1):
                return False
        return True


def choices_monotone(ready: list[int], cum: list[int], cost: IntCost) -> list[int]:
    """``choice[i]``, the first sending position of the message ending at i, of the exact
    DP; ``ready`` must not decrease, nor ``cost`` with the size (see the module doc).

    ``lo`` is the largest j whose prefix ends by ``ready[i]``: j <= lo give
    ``ready[i] + T(cum[i+1] - cum[j])``, least at j = lo. Every later j gives
    ``E[j-1] - beta_k cum[j] + alpha_k + beta_k cum[i+1]`` in its regime k: one
    monotone queue of those keys per regime, over the j whose message is in it.
    """
    n = len(ready)
    if len(cost.starts) == 1:
        return _choices_affine(ready, cum, cost.alphas[0], cost.betas[0])
    prev: list = [float("-inf")] * (n + 1)  # prev[j] = E[j-1]
    choice = [0] * n
    queues = [_RegimeQueue(start, alpha, beta, nxt) for start, alpha, beta, nxt in
              zip(cost.starts, cost.alphas, cost.betas, cost.starts[1:] + [float("inf")], strict=True)]
    lo = 0
    for i in range(n):
        ri, total = ready[i], cum[i + 1]
        while lo < i and prev[lo + 1] <= ri:
            lo += 1
        best_j, best = lo, ri + cost.time(total - cum[lo])
        for queue in queues:
            found = queue.front(prev, cum, lo, i, total)
            if found is not None and (found[1] < best or (found[1] == best and found[0] > best_j)):
                best_j, best = found
        choice[i], prev[i + 1] = best_j, best
    return choice


class _RegimeQueue:
    """The j whose message to the current i falls in one regime, by key ``E[j-1] - beta cum[j]``."""

    def __init__(self, start, alpha: int, beta: int, end):
        self.start, self.end, self.alpha, self.beta = start, end, alpha, beta
        self.queue: deque = deque()  # (key, j), keys increasing, j increasing
        self.next_j = 1

    def front(self, prev, cum, lo: int, i: int, total: int) -> tuple[int, int] | None:
        """(j, end) of the best j in (lo, i] in this regime (the largest among equal keys), or None."""
        queue, beta = self.queue, self.beta
        j = max(self.next_j, lo + 1)
        while j <= i and total - cum[j] >= self.start:  # j enters once its message reaches the regime
            key = prev[j] - beta * cum[j]
            while queue and queue[-1][0] >= key:
                queue.pop()
            queue.append((key, j))
            j += 1
        self.next_j = j
        while queue and (queue[0][1] <= lo or total - cum[queue[0][1]] >= self.end):
            queue.popleft()
        if not queue:
            return None
        key, j = queue[0]
        return j, key + self.alpha + beta * total


def _choices_affine(ready: list[int], cum: list[int], alpha: int, beta: int) -> list[int]:
    """`choices_monotone` for one regime, ``T(M) = alpha + beta M``, inlined: O(n).

    With ``B[j] = beta cum[j]``, the message j..i ends at ``r_i - B[lo] + alpha + B[i+1]`` (j = lo)
    or ``key_j + alpha + B[i+1]`` (a later j, ``key_j = E[j-1] - B[j]``): the same ``alpha + B[i+1]``
    for every j, so the DP compares ``r_i - B[lo]`` with the least key (exact integers: the same
    choices as comparing the ends)."""
    n = len(ready)
    scaled = [beta * c for c in cum]  # B[j]
    prev: list = [float("-inf")] * (n + 1)  # prev[j] = E[j-1]
    choice = [0] * n
    keys: deque = deque()  # (E[j-1] - B[j], j) of j in (lo, i], keys increasing
    lo = 0
    for i, ri in enumerate(ready):
        if prev[i] <= ri:  # every message before i has ended by r_i (E does not fall): lo = i, no later j
            lo = i
            keys.clear()
            choice[i], prev[i + 1] = i, ri - scaled[i] + alpha + scaled[i + 1]
            continue
        key = prev[i] - scaled[i]  # j = i enters the window
        while keys and keys[-1][0] >= key:
            keys.pop()
        keys.append((key, i))
        while lo < i and prev[lo + 1] <= ri:
            lo += 1
        while keys and keys[0][1] <= lo:
            keys.popleft()
        best_j, best = lo, ri - scaled[lo]
        if keys and keys[0][0] <= best:  # j > lo: the smaller last message on a tie
            best, best_j = keys[0]
        choice[i], prev[i + 1] = best_j, best + alpha + scaled[i + 1]
    return choice


class _Latest:
    """The largest marked position up to a bound (a Fenwick tree of prefix maxima)."""

    def __init__(self, n: int):
        self.tree = [-1] * (n + 2)
        self.top = -1  # the largest marked position

    def mark(self, j: int) -> None:
        tree, at = self.tree, j + 1
        self.top = max(self.top, j)
        while at < len(tree):
            if tree[at] < j:
                tree[at] = j
            at += at & -at

    def latest(self, bound: int) -> int:
        if bound >= self.top:
            return self.top
        tree, at, found = self.tree, bound + 1, -1
        while at > 0:
            if tree[at] > found:
                found = tree[at]
            at -= at & -at
        return found


class _Regime:
    """The j whose message to the current i falls in one regime, the waiting ones by key."""

    def __init__(self, start, end, alpha: int, beta: int):
        # whole byte counts M are in the regime when ceil(start) <= M < ceil(end)
        self.start, self.alpha, self.beta = math.ceil(start), alpha, beta
        self.end = math.ceil(end) if math.isfinite(end) else None
        self.first, self.last = 0, -1  # the window [first, last] of j
        self.by_key: list = []  # (E[j-1] - beta cum[j], -j) of the j that entered while waiting, lazily

    def best(self, prev, cum, i: int, ready_i: int, latest: _Latest) -> tuple[int, int] | None:
        """(j, end) of the best j of the window at step i (the largest among equal ends), or None."""
        total, beta, by_key = cum[i + 1], self.beta, self.by_key
        last, bound = self.last, total - self.start
        while last < i and cum[last + 1] <= bound:  # j enters once its message reaches the regime
            last += 1
            if prev[last] > ready_i:
                heapq.heappush(by_key, (prev[last] - beta * cum[last], -last))
        first = self.first
        if self.end is not None:
            bound = total - self.end
            while first <= last and cum[first] <= bound:  # and leaves once it is past it
                first += 1
        self.first, self.last = first, last
        if first > last:
            return None
        found = None
        while by_key and (-by_key[0][1] < first or prev[-by_key[0][1]] <= ready_i):
            heapq.heappop(by_key)
        if by_key:
            found = (-by_key[0][1], by_key[0][0] + self.alpha + beta * total)
        j = latest.latest(last)  # the largest j whose prefix ended by r_i
        if j >= first:
            end = ready_i + self.alpha + beta * (total - cum[j])
            if found is None or end < found[1] or (end == found[1] and j > found[0]):
                found = (j, end)
        return found


def choices_any_regimes(ready: list[int], cum: list[int], cost: IntCost) -> list[int]:
    """`choices_monotone` for a cost that may fall at a regime start (``ready`` still not
    decreasing): E may then fall too. Per regime, the j whose message falls in it form a
    window; among them, those whose prefix ended by r_i (a set that only grows, as r does)
    give the least end at the largest such j, and the others are kept in a heap by key.
    O(n R log n)."""
    n = len(ready)
    prev: list = [float("-inf")] * (n + 1)  # prev[j] = E[j-1]
    choice = [0] * n
    regimes = [_Regime(start, end, alpha, beta) for start, end, alpha, beta in
               zip(cost.starts, cost.starts[1:] + [float("inf")], cost.alphas, cost.betas, strict=True)]
    latest, waiting = _Latest(n), []  # waiting: (E[j-1], j) of the j whose prefix ends after r_i
    for i in range(n):
        ri = ready[i]
        if prev[i] <= ri:
            latest.mark(i)
        else:
            heapq.heappush(waiting, (prev[i], i))
        while waiting and waiting[0][0] <= ri:
            latest.mark(heapq.heappop(waiting)[1])
        best_j, best = -1, None
        for regime in regimes:
            found = regime.best(prev, cum, i, ri, latest)
            if found is not None and (best is None or found[1] < best or (found[1] == best and found[0] > best_j)):
                best_j, best = found
        choice[i], prev[i + 1] = best_j, best
    return choice
