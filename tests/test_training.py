"""The numpy training replay: the dataset, the gradient, the replay semantics, BSP's accuracy."""

import math

import numpy as np
import pandas as pd
import pytest

import sim
from sim.algorithms import (
    ALGORITHMS,
    NO_MODEL,
    SERVER,
    UPDATE_COLUMNS,
    AlgorithmConfig,
    AlgorithmResult,
    simulate_algorithm,
)
from sim.training import (
    accuracy_of,
    make_dataset,
    replay,
    time_to_accuracy,
    train_algorithms,
)
from sim.workers.training import _gradient, _loss_and_accuracy

DATA = make_dataset(0)


def tiny_model():
    return sim.model_from_frame(
        pd.DataFrame({"name": ["fc"], "params": [1_000_000], "fwd_ms": [3.0], "bwd_ms": [6.0]}), "fc"
    )


def simulated(name, gpus=4, steps=60, **kw):
    return simulate_algorithm(name, tiny_model(), sim.Cluster(gpus=gpus, network="10gbe"), batch_size=32,
                              steps=steps, **kw)


class TestDataset:
    def test_seeded_and_shaped(self):
        again = make_dataset(0)
        assert np.array_equal(DATA.x_train, again.x_train) and np.array_equal(DATA.y_test, again.y_test)
        assert DATA.x_train.shape == (4000, 8) and DATA.x_test.shape == (2000, 8) and DATA.classes == 4
        assert not np.array_equal(make_dataset(1).x_train, DATA.x_train)

    def test_bayes_accuracy_is_the_ceiling_of_a_linear_model(self):
        """Default dataset: Bayes accuracy ~0.91; the true LDA weights, written as softmax
        weights (W = S^-1 mu, b = -mu' S^-1 mu / 2), score exactly that."""
        assert 0.88 <= DATA.bayes_accuracy <= 0.94
        scales = 10.0 ** np.linspace(-0.5, 0.5, 8)
        pm = DATA.means / scales**2
        w = np.vstack([pm.T, -0.5 * np.sum(DATA.means * pm, axis=1)])
        assert accuracy_of(w, DATA) == DATA.bayes_accuracy

    def test_bad_parameters(self):
        with pytest.raises(sim.SimInputError, match="separation"):
            make_dataset(0, separation=-1.0)
        with pytest.raises(sim.SimInputError, match="spread"):
            make_dataset(0, spread=0.5)


def test_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((9, 4)) * 0.3
    x, y = DATA.x_train[:50], DATA.y_train[:50]
    g = _gradient(w, x, y)
    h = 1e-6
    for i, j in [(0, 0), (3, 2), (8, 1), (8, 3)]:
        e = np.zeros_like(w)
        e[i, j] = h
        numeric = (_loss_and_accuracy(w + e, x, y)[0] - _loss_and_accuracy(w - e, x, y)[0]) / (2 * h)
        assert g[i, j] == pytest.approx(numeric, rel=1e-5, abs=1e-8)


def hand_log(rows, workers, consensus="mean", name="hand"):
    frame = pd.DataFrame(rows, columns=list(UPDATE_COLUMNS))
    return AlgorithmResult(name, {}, frame, pd.DataFrame(), workers, consensus)


class TestReplaySemantics:
    def test_a_pairwise_average_makes_two_replicas_their_mean(self):
        # worker 0 takes one step, then 0 and 1 average: both hold half of worker 0's step;
        # the consensus (mean of replicas) is unchanged by the average.
        g = ("gradient", 0, 0, 0, 1, 0, 0, NO_MODEL, -1, 1.0, 0)
        avg0 = ("average", 0, 0, 0, 2, 1, 0, 0, 1, 0.5, 0)
        avg1 = ("average", 0, 0, 1, 1, 0, 1, 1, 0, 0.5, 0)
        before = replay(hand_log([(1.0, *g)], 2), DATA, eval_every=1)
        after = replay(hand_log([(1.0, *g), (2.0, *avg0), (3.0, *avg1)], 2), DATA, eval_every=1)
        assert after.loss.iloc[-1] == pytest.approx(before.loss.iloc[-1], rel=1e-12)

    def test_stale_gradient_uses_the_snapshot_it_read(self):
        """Two gradients read version 0 of the server; the second lands on version 1 but
        is computed at version 0: the result is the sum of two gradients at zero weights."""
        rows = [(1.0, "gradient", w, 0, SERVER, w + 1, SERVER, 0, NO_MODEL, -1, 0.5, w) for w in (0, 1)]
        curve = replay(hand_log(rows, 2, consensus="server"), DATA, lr=0.5, eval_every=2)
        zero = np.zeros((9, 4))
        w = zero.copy()
        for worker in (0, 1):
            idx = np.random.default_rng([0, worker, 0]).integers(4000, size=32)
            w -= 0.5 * 0.5 * _gradient(zero, DATA.x_train[idx], DATA.y_train[idx])
        assert curve.accuracy.iloc[-1] == accuracy_of(w, DATA)

    def test_ssp_zero_and_ar_sgd_learn_exactly_as_bsp(self):
        """Same snapshots, same mini-batches: only the clock differs (loss to 1e-12)."""
        bsp = replay(simulated("BSP", steps=10), DATA)
        ssp = replay(simulated("SSP", steps=10, config=AlgorithmConfig(staleness=0)), DATA)
        ar = replay(simulated("AR-SGD", steps=10), DATA)
        assert np.allclose(bsp.loss, ssp.loss, rtol=1e-12) and np.allclose(bsp.loss, ar.loss, rtol=1e-12)
        assert not np.allclose(bsp.time_s, ar.time_s)


def test_bsp_reaches_near_bayes_accuracy():
    """Threshold: Bayes accuracy - 0.02. The Bayes classifier is the ceiling of any model;
    0.02 is about 3 standard errors of a 2000-sample test accuracy near 0.9
    (sqrt(0.9 * 0.1 / 2000) = 0.0067), so a model that has learned the LDA
    solution passes and one still on its way (0.82 after 5 steps, 0.885 after
    20, here) fails; it ends at 0.910 against a Bayes accuracy of 0.9155.
    4 workers x 60 steps of 32 samples, lr 0.5, seed 0."""
    curve = replay(simulated("BSP"), DATA)
    assert curve.accuracy.iloc[-1] >= DATA.bayes_accuracy - 0.02
    assert curve.accuracy.iloc[5] < DATA.bayes_accuracy - 0.02  # it is learning, not lucky at start
    assert curve.loss.iloc[-1] < curve.loss.iloc[0]


def test_curves_and_time_to_accuracy():
    results = {name: simulated(name, steps=30) for name in ("BSP", "ASP", "GoSGD")}
    curves = train_algorithms(results, DATA)
    assert list(curves.algorithm.unique()) == ["BSP", "ASP", "GoSGD"]
    for _, c in curves.groupby("algorithm"):
        assert c.time_s.is_monotonic_increasing and c.gradients.iloc[-1] == 4 * 30
    again = train_algorithms(results, DATA)
    assert curves.equals(again)
    reached = time_to_accuracy(curves, 0.0)
    assert reached == {"BSP": 0.0, "ASP": 0.0, "GoSGD": 0.0}
    assert all(math.isnan(v) for v in time_to_accuracy(curves, 1.01).values())


def test_time_to_accuracy_by_hand():
    frame = pd.DataFrame({"algorithm": ["a"] * 3 + ["b"] * 2, "time_s": [0, 1, 2, 0, 5],
                          "gradients": 0, "loss": 0.0, "accuracy": [0.1, 0.8, 0.9, 0.2, 0.85]})
    assert time_to_accuracy(frame, 0.8) == {"a": 1.0, "b": 5.0}


def test_replay_rejects_bad_input():
    res = simulated("BSP", steps=2)
    with pytest.raises(sim.SimInputError, match="lr"):
        replay(res, DATA, lr=0.0)
    with pytest.raises(sim.SimInputError, match="eval_every"):
        replay(res, DATA, eval_every=0)


@pytest.mark.parametrize("name", ALGORITHMS)
def test_every_algorithm_learns_with_one_worker(name):
    """One worker is plain SGD under every algorithm, so each model scored (EASGD's is the center) reaches
    the BSP threshold above. EASGD skipped its exchange with the center on one worker, and the center it
    scores never moved: 0.2475 after 100 steps of resnet50 (hostile review, 2026-11-25)."""
    curve = replay(simulated(name, gpus=1, steps=240), DATA)  # the gradients of the BSP test above (4 x 60)
    assert curve.accuracy.iloc[-1] >= DATA.bayes_accuracy - 0.02
