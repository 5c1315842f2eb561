"""The ``optimal`` scheduler against its definition, evaluated in exact arithmetic over every j.

The reference (`reference_plan`) is the O(n^2) DP of the docstring with every
time a `Fraction` (floats and byte counts are exact rationals): ends that are
equal in real arithmetic tie, and the tie goes to the largest j (the smaller
last message). The fast paths must give the same plan on every input,
backlogged channels (many exact ties) included.
"""

from __future__ import annotations

import importlib
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.comm import CommCost
from sim.core.cost import Regime, measured_cost
from sim.core.plan import GradientLayers
from sim.schedulers import optimal
from sim.schedulers.optimal import optimal_every_j, plan_from_choices

optimal_module = importlib.import_module("sim.schedulers.optimal")


def _time(cost, nbytes: int) -> Fraction:
    regimes = cost.regimes or (Regime(0.0, cost.alpha_s, cost.beta_s_per_byte),)
    regime = [g for g in regimes if g.from_bytes <= nbytes][-1]
    return Fraction(regime.alpha_s) + Fraction(regime.beta_s_per_byte) * nbytes


def reference_choices(grads: GradientLayers, cost) -> list[int]:
    """choice[i] of ``E[i] = min_j max(E[j-1], r_i) + T(B_j..i)`` over every j <= i, exactly."""
    ready = [Fraction(x) for x in grads.ready_s[::-1].tolist()]
    nbytes = [int(x) for x in grads.nbytes[::-1].tolist()]
    layers = grads.index[::-1].tolist()
    cum = [0]
    for b in nbytes:
        cum.append(cum[-1] + b)
    ends: list[Fraction] = []
    choice: list[int] = []
    for i in range(grads.n):
        best, best_j = None, -1
        for j in range(i + 1):
            start = ready[i] if j == 0 else max(ends[j - 1], ready[i])
            if j == i and cost.is_measured:  # a layer alone takes its measured time
                took = (Fraction(cost.layer_s[layers[i]]) + Fraction(cost.added_alpha_s)
                        + Fraction(cost.added_beta_s_per_byte) * nbytes[i])
            else:
                took = _time(cost, cum[i + 1] - cum[j])
            if best is None or start + took <= best:  # ascending j: the largest j wins a tie
                best, best_j = start + took, j
        ends.append(best)
        choice.append(best_j)
    return choice


def reference_plan(grads: GradientLayers, cost):
    return plan_from_choices(grads, reference_choices(grads, cost))


def chain(n: int, seed: int, *, equal=False, zeros=False, shuffled=False, max_bytes=10_000_000) -> GradientLayers:
    """n layers of a chain: backward 0.05-1 ms (some 0 with ``zeros``), gradients 4 B-40 MB
    (all 16 MB with ``equal``); ``shuffled`` puts the ready times out of order."""
    rng = np.random.default_rng(seed)
    bwd = np.full(n, 2e-4) if equal else rng.uniform(5e-5, 1e-3, n)
    if zeros:
        bwd = bwd * (rng.random(n) >= 0.5)
    nbytes = np.full(n, 4_000_000) if equal else rng.integers(1, max_bytes, n)
    ready = np.cumsum(bwd[::-1])[::-1].copy()
    return GradientLayers(np.arange(n), rng.permutation(ready) if shuffled else ready, nbytes.astype(np.int64) * 4)


AFFINE = st.builds(CommCost, st.sampled_from([0.0, 1e-6, 1e-5, 5e-5, 1e-4, 1e-3, 1e-2]),
                   st.sampled_from([0.0, 1e-12, 1e-11, 1e-10, 1e-9, 3e-9]))
SHAPES = st.fixed_dictionaries({"equal": st.booleans(), "zeros": st.booleans()})


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 40), st.integers(0, 2**32 - 1), AFFINE, SHAPES)
def test_affine_same_plan_as_the_exact_quadratic_search(n, seed, cost, shape):
    """Backlogged channels (alpha 1-10 ms, beta 1-3 ns/B against 0.05-1 ms of backward per layer)
    tie at most steps: alpha 0 or equal layers make every split of a backlogged message tie."""
    grads = chain(n, seed, **shape)
    assert optimal(grads, cost) == reference_plan(grads, cost)


def _piecewise(seed: int) -> CommCost:
    """Two or three size regimes with random lines: T may jump up or down at a regime start."""
    rng = np.random.default_rng(seed)
    starts = sorted(rng.choice([1e5, 1e6, 4e6, 2e7, 8e7], int(rng.integers(1, 3)), replace=False))
    return CommCost.piecewise([Regime(0.0, float(rng.choice([0.0, 1e-5, 1e-3])), float(rng.choice([1e-10, 1e-9])))]
                              + [Regime(float(s), float(rng.choice([0.0, 5e-5, 2e-3])),
                                        float(rng.choice([0.0, 1e-10, 4e-10, 1e-9]))) for s in starts])


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 30), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), SHAPES)
def test_piecewise_same_plan_as_the_exact_quadratic_search(n, seed, cost_seed, shape):
    grads, cost = chain(n, seed, **shape), _piecewise(cost_seed)
    assert optimal(grads, cost) == reference_plan(grads, cost)


def test_piecewise_continuous_at_a_rounded_cut():
    """NCCL's tree-then-ring cost is continuous at the crossing in real numbers, but the cut
    is a rounded float: at it, T falls by less than an ulp. Over whole byte counts it still
    does not fall (the fast path's premise), and the plan is the definition's."""
    tree, ring = (1e-5, 7e-10), (5e-5, 2e-10)
    cut = (ring[0] - tree[0]) / (tree[1] - ring[1])
    t_tree, t_ring = (Fraction(a) + Fraction(b) * Fraction(cut) for a, b in (tree, ring))
    assert cut > 80_000 and t_tree > t_ring
    cost = CommCost.piecewise([Regime(0.0, *tree), Regime(cut, *ring)])
    for seed in range(10):
        grads = chain(30, seed, max_bytes=100_000)
        assert optimal(grads, cost) == reference_plan(grads, cost)


@pytest.mark.parametrize("cut", [99_999.5, 100_000.0, 100_000.5, 199_999.99999999997, 200_000.00000000003])
def test_regime_starts_between_whole_byte_counts(cut):
    """Layers of 100 kB: merged messages land exactly on or one byte off a regime start."""
    cost = CommCost.piecewise([Regime(0.0, 1e-3, 1e-9), Regime(cut, 0.0, 1e-10), Regime(250_000.0, 2e-3, 0.0)])
    for seed in range(5):
        rng = np.random.default_rng(seed)
        grads = GradientLayers(np.arange(20), np.cumsum(rng.uniform(0, 3e-4, 20))[::-1].copy(), np.full(20, 100_000))
        assert optimal(grads, cost) == reference_plan(grads, cost)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30), st.integers(0, 2**32 - 1), st.sampled_from([0.0, 1e-5, 1e-3]),
       st.sampled_from([1e-11, 1e-10, 1e-9]), st.booleans(), st.booleans())
def test_measured_same_plan_as_the_exact_quadratic_search(n, seed, alpha_s, beta, on_the_line, added):
    """Trace-driven costs: each layer alone takes its measured time, merged messages the fitted
    line; measured times exactly on a line tie with merging whenever the channel is behind."""
    grads = chain(n, seed)
    rng = np.random.default_rng(seed)
    nbytes = grads.nbytes.astype(float)
    measured = alpha_s + beta * nbytes * (1.0 if on_the_line else rng.uniform(0.5, 1.5, n))
    cost = measured_cost(measured, grads.nbytes)
    if added:
        cost = cost.plus(1e-5, 1e-12)
    assert optimal(grads, cost) == reference_plan(grads, cost)


@pytest.mark.parametrize("seed", range(20))
def test_ready_times_out_of_order(seed):
    """Ready times out of order (not a chain's): the search covers every j."""
    grads = chain(25, seed, shuffled=True)
    for cost in (CommCost(1e-3, 1e-9), CommCost(0.0, 1e-10), _piecewise(seed)):
        assert optimal(grads, cost) == reference_plan(grads, cost)


def test_a_backlogged_tie_keeps_the_smaller_last_message():
    """Hand-worked: alpha 0, three 1 MB layers ready at 0, 0 and 0 s, beta 1 ns/B: every
    grouping ends at 3 ms exactly, so the tie rule sends each layer alone."""
    grads = GradientLayers(np.arange(3), np.zeros(3), np.full(3, 1_000_000))
    plan = optimal(grads, CommCost(0.0, 1e-9))
    assert plan.groups == ((2,), (1,), (0,))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 30), st.integers(0, 2**32 - 1), AFFINE, st.integers(0, 2**32 - 1), st.booleans())
def test_the_search_over_every_j_is_the_definition(n, seed, affine, cost_seed, piecewise):
    grads = chain(n, seed, equal=seed % 3 == 0)
    cost = _piecewise(cost_seed) if piecewise else affine
    assert optimal_every_j(grads, cost) == reference_plan(grads, cost)


def test_the_search_over_every_j_agrees_with_the_fast_paths():
    """The vectorised search over every j (the O(n^2) reference bench/ times) picks the same
    plan as the fast paths on a 2,000-layer chain, backlogged (most steps tie) and not."""
    grads = chain(2000, 5, max_bytes=10_000_000)
    for cost in (CommCost(1e-3, 1e-9), CommCost(1e-5, 1e-11), _piecewise(3), _piecewise(6),  # T falls, rises
                 measured_cost(np.full(2000, 1e-3) + 1e-9 * grads.nbytes, grads.nbytes)):
        assert optimal_every_j(grads, cost) == optimal(grads, cost)


def test_the_window_search_agrees_with_the_fast_paths():
    """The same search from the backlog's start lo (when T does not fall): same plans."""
    grads = chain(2000, 6)
    for cost in (CommCost(1e-3, 1e-9), CommCost(5e-5, 1e-10)):
        exact = optimal_module._exact_inputs(grads, cost)
        assert plan_from_choices(grads, optimal_module._choices_general(grads, cost, exact)) == optimal(grads, cost)
