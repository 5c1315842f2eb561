"""Accuracy, not only speed: replay a simulated schedule on a real numpy problem.

The algorithms of `sim.workers.algorithms` differ in *when* each gradient lands and
*which* model it was computed on. This module takes an algorithm's update
log and applies it, change by change, to a small real training problem:
softmax (multinomial logistic) regression on a seeded Gaussian mixture. Each
``gradient`` row computes a real mini-batch gradient on the exact snapshot
the simulated worker read and applies it where and when the schedule did;
each ``elastic``, ``gossip`` or ``average`` row mixes the snapshots it
names. The consensus model (the server, the center, or the mean of the
replicas) is evaluated on a held-out test set as simulated time passes.

The simulated clock belongs to the simulated workload (e.g. ResNet-50 on
10GbE); the optimisation problem is a stand-in. The curves therefore show
how each schedule's order and staleness affect learning, measured in that
workload's wall-clock time; they are not ResNet-50 accuracies.

The dataset: C classes in d dimensions with equal priors; class k is
N(mu_k, S) with S = diag(s_1^2, ..., s_d^2), the noise scales s_i spread
log-evenly over a factor ``spread`` (so gradient descent meets an
ill-conditioned problem and needs tens of steps, not one), and the means
drawn once from the seed at Mahalanobis distance ``separation`` from the
origin. With a shared covariance the Bayes-optimal classifier is linear,
``argmax_k mu_k' S^-1 x - mu_k' S^-1 mu_k / 2`` (Hastie, Tibshirani and
Friedman, The Elements of Statistical Learning, 2nd ed., Sec. 4.3, linear
discriminant analysis), so softmax regression can reach the Bayes accuracy,
which we compute on the test set from the true parameters: a target that
needs no guess.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.checks import check_float, check_int, check_seed
from sim.cluster import Cluster
from sim.model import Model
from sim.workers.algorithms import (
    ALGORITHMS,
    SERVER,
    AlgorithmConfig,
    AlgorithmResult,
    simulate_algorithms,
)
from sim.workers.stragglers import StragglerSpec

__all__ = [
    "CURVE_COLUMNS",
    "DEFAULT_LR",
    "TARGET_MARGIN",
    "AlgorithmComparison",
    "Dataset",
    "compare_algorithms",
    "accuracy_of",
    "make_dataset",
    "replay",
    "time_to_accuracy",
    "train_algorithms",
]

#: The largest learning rate the replay takes: past it softmax regression only diverges (its loss overflows).
MAX_LR = 100.0

CURVE_COLUMNS = ("algorithm", "time_s", "gradients", "loss", "accuracy")
#: Learning rate per gradient step (our choice: on the default dataset BSP
#: comes within 0.02 of the Bayes accuracy in 30 to 60 rounds; at 1.0 the
#: stale gradients of ASP with 16 workers already cost accuracy).
DEFAULT_LR = 0.5
DEFAULT_TRAIN_BATCH = 32
#: The default target accuracy is the Bayes accuracy minus this margin:
#: about 3 standard errors of a 2000-sample test accuracy near 0.9.
TARGET_MARGIN = 0.02


@dataclass(frozen=True, eq=False)
class Dataset:
    """A seeded Gaussian mixture split into train and test sets.

    ``bayes_accuracy`` is the test accuracy of the Bayes-optimal classifier
    built from the true class means.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    means: np.ndarray
    bayes_accuracy: float

    @property
    def classes(self) -> int:
        return self.means.shape[0]

    @property
    def dim(self) -> int:
        return self.means.shape[1]


def make_dataset(seed: int = 0, *, classes: int = 4, dim: int = 8, separation: float = 3.0, spread: float = 10.0,
                 n_train: int = 4000, n_test: int = 2000) -> Dataset:
    """``classes`` Gaussian clusters N(mu_k, S) in ``dim`` dimensions (see the module docstring).

    With the defaults the Bayes accuracy is about 0.91, and full-batch-like
    steps of learning rate 0.5 from zero weights need about 25 steps to come
    within 0.02 of it: enough for the order of updates to show.
    """
    seed = check_seed(seed)
    classes = check_int("classes", classes, 2, 50)
    dim = check_int("dim", dim, 1, 1000)
    n_train = check_int("n_train", n_train, 10, 10**6)
    n_test = check_int("n_test", n_test, 10, 10**6)
    separation = check_float("separation", separation, 0, low_open=True)
    spread = check_float("spread", spread, 1)
    rng = np.random.default_rng([seed, 7])
    scales = spread ** np.linspace(-0.5, 0.5, dim)  # from 1/sqrt(spread) to sqrt(spread)
    directions = rng.standard_normal((classes, dim))
    means = separation * scales * directions / np.linalg.norm(directions, axis=1, keepdims=True)

    def draw(n):
        y = rng.integers(classes, size=n)
        return means[y] + rng.standard_normal((n, dim)) * scales, y

    x_train, y_train = draw(n_train)
    x_test, y_test = draw(n_test)
    precision_means = means / scales**2
    scores = x_test @ precision_means.T - 0.5 * np.sum(means * precision_means, axis=1)
    bayes = np.argmax(scores, axis=1)
    return Dataset(x_train, y_train, x_test, y_test, means, float(np.mean(bayes == y_test)))


def _logits(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return x @ w[:-1] + w[-1]


def _loss_and_accuracy(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    z = _logits(w, x)
    z = z - z.max(axis=1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-log_p[np.arange(len(y)), y].mean()), float(np.mean(np.argmax(z, axis=1) == y))


def accuracy_of(w: np.ndarray, data: Dataset) -> float:
    """Test accuracy of softmax-regression weights ``w`` (shape (dim + 1, classes))."""
    return _loss_and_accuracy(w, data.x_test, data.y_test)[1]


def _gradient(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Gradient of the mean cross-entropy of softmax regression; the last row is the bias."""
    z = _logits(w, x)
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1.0
    p /= len(y)
    return np.vstack([x.T @ p, p.sum(axis=0)])


def replay(result: AlgorithmResult, data: Dataset | None = None, *, lr: float = DEFAULT_LR,
           batch_size: int = DEFAULT_TRAIN_BATCH, seed: int = 0, eval_every: int | None = None) -> pd.DataFrame:
    """Apply ``result.log`` to softmax regression on ``data``; the loss and accuracy curve.

    Parameters
    ----------
    result : AlgorithmResult
        A simulated run; its log says which snapshot each gradient reads and
        where and when it lands.
    data : Dataset, optional
        ``make_dataset(seed)`` when not given.
    lr : float
        Learning rate; a gradient row changes its target by ``-lr * weight * g``.
    batch_size : int
        Training samples per gradient (the mini-batch of worker w at step s
        is drawn by a Generator seeded with ``(seed, w, s)``, whatever the algorithm).
    seed : int
        Seeds the dataset and the mini-batches.
    eval_every : int, optional
        Evaluate after every this many gradients (default: P, one round).

    Returns
    -------
    pandas.DataFrame
        `CURVE_COLUMNS`: the consensus model's test loss and accuracy at
        time 0 and after every ``eval_every`` gradients, and at the end.
    """
    lr = check_float("lr", lr, 0, MAX_LR, low_open=True)
    batch_size = check_int("batch_size", batch_size, 1)
    seed = check_seed(seed)
    every = result.workers if eval_every is None else check_int("eval_every", eval_every, 1)
    data = data if data is not None else make_dataset(seed)
    return pd.DataFrame(_replay_curve(result, data, lr, batch_size, seed, every), columns=list(CURVE_COLUMNS))


def _replay_curve(result: AlgorithmResult, data: Dataset, lr: float, batch_size: int, seed: int,
                  every: int) -> list[tuple]:
    """`replay`'s rows: the log applied change by change, the consensus model evaluated every ``every`` gradients."""
    p = result.workers
    n = len(data.y_train)
    zero = np.zeros((data.dim + 1, data.classes))
    current = dict.fromkeys(range(SERVER, p), zero)
    snapshots: dict[tuple[int, int], np.ndarray] = {(m, 0): zero for m in range(SERVER, p)}

    def evaluate(time_s: float, done: int) -> tuple:
        model = np.mean([current[m] for m in range(p)], axis=0) if result.consensus == "mean" else current[SERVER]
        loss, acc = _loss_and_accuracy(model, data.x_test, data.y_test)
        return (result.algorithm, time_s, done, loss, acc)

    curve = [evaluate(0.0, 0)]
    done = 0
    log = result.log
    columns = [log[c].to_numpy() for c in ("time_s", "kind", "worker", "step", "target", "version", "src",
                                            "src_version", "ref", "ref_version", "weight")]
    for t, kind, worker, step, target, version, src, src_v, ref, ref_v, weight in zip(*columns, strict=True):
        if kind == "gradient":
            idx = np.random.default_rng([seed, int(worker), int(step)]).integers(n, size=batch_size)
            g = _gradient(snapshots[(int(src), int(src_v))], data.x_train[idx], data.y_train[idx])
            new = current[target] - lr * weight * g
            done += 1
        else:
            new = current[target] + weight * (snapshots[(int(src), int(src_v))] - snapshots[(int(ref), int(ref_v))])
        current[target] = new
        snapshots[(int(target), int(version))] = new
        if kind == "gradient" and done % every == 0:
            curve.append(evaluate(float(t), done))
    if curve[-1][2] != done:
        curve.append(evaluate(float(log.time_s.iloc[-1]), done))
    return curve


def train_algorithms(results: Mapping[str, AlgorithmResult], data: Dataset | None = None, **kwargs) -> pd.DataFrame:
    """`replay` each result on the same data; the curves stacked, `CURVE_COLUMNS`."""
    seed = kwargs.get("seed", 0)
    data = data if data is not None else make_dataset(seed)
    return pd.concat([replay(r, data, **kwargs) for r in results.values()], ignore_index=True)


def time_to_accuracy(curves: pd.DataFrame, target: float) -> dict[str, float]:
    """First simulated time each algorithm's test accuracy reaches ``target``; NaN if never."""
    out = {}
    for name, curve in curves.groupby("algorithm", sort=False):
        hit = curve.loc[curve.accuracy >= target, "time_s"]
        out[str(name)] = float(hit.iloc[0]) if len(hit) else math.nan
    return out


@dataclass(frozen=True, eq=False)
class AlgorithmComparison:
    """What `compare_algorithms` returns.

    ``table`` has one row per algorithm: the simulation's metrics plus
    ``final_accuracy``, ``best_accuracy``, ``target_accuracy`` and
    ``time_to_accuracy_s`` (NaN if the target is not reached within the
    budget). ``curves`` follows `CURVE_COLUMNS`.
    """

    table: pd.DataFrame
    curves: pd.DataFrame
    results: dict
    target_accuracy: float
    bayes_accuracy: float


def compare_algorithms(model: Model, cluster: Cluster, *, batch_size: int, algorithms=ALGORITHMS, steps: int = 100,
                       seed: int = 0, straggler: StragglerSpec | None = None, config: AlgorithmConfig | None = None,
                       precision: str = "fp32", gpus_by_worker=None, lr: float = DEFAULT_LR,
                       target_accuracy: float | None = None) -> AlgorithmComparison:
    """Simulate each algorithm, replay its log on the seeded dataset, and time it to a target accuracy.

    The target defaults to the dataset's Bayes accuracy minus `TARGET_MARGIN`.
    Everything (schedules, mini-batches, data) follows from ``seed``.
    """
    data = make_dataset(seed)
    target = (data.bayes_accuracy - TARGET_MARGIN if target_accuracy is None
              else check_float("target_accuracy", target_accuracy, 0, 1, low_open=True))
    results = simulate_algorithms(model, cluster, algorithms, batch_size=batch_size, steps=steps, seed=seed,
                                  straggler=straggler, config=config, precision=precision,
                                  gpus_by_worker=gpus_by_worker)
    curves = train_algorithms(results, data, lr=lr, seed=seed)
    reached = time_to_accuracy(curves, target)
    rows = []
    for name, res in results.items():
        curve = curves.loc[curves.algorithm == name]
        rows.append(res.metrics | {
            "final_accuracy": float(curve.accuracy.iloc[-1]),
            "best_accuracy": float(curve.accuracy.max()),
            "final_loss": float(curve.loss.iloc[-1]),
            "target_accuracy": target,
            "time_to_accuracy_s": reached[name],
        })
    return AlgorithmComparison(pd.DataFrame(rows), curves, results, target, data.bayes_accuracy)
