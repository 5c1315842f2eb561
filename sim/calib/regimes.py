"""Piecewise alpha-beta fits: size regimes of all-reduce time from benchmark logs.

One line ``T(M) = alpha + beta M`` misses protocol and algorithm switches:
Open MPI's fixed decision rule runs an all-reduce below 10,000 bytes by
recursive doubling and a larger one by a ring (open-mpi/ompi
``ompi/mca/coll/tuned/coll_tuned_decision_fixed.c``),
MPI point-to-point switches from the eager to the rendezvous protocol, NCCL
from its LL to LL128 to Simple protocols and from tree to ring. The bundled
8-node K80 OSU log (``data/reference/bcaffe_k80_10gbe/allreduce8.log``) jumps
from 182 us at 8 KiB to 792 us at 12 KiB, a step no single line follows.

`fit_regimes` cuts the sizes into at most ``max_regimes`` regimes, each its
own line, choosing the cuts by least squares over every candidate
breakpoint (exactly, by dynamic programming over the measured sizes) and
the number of regimes by a stated criterion (`MIN_GAIN`). `RegimeFit.errors`
reports the error per size. `regimes_to_network` turns the fit into per-link
rows of ``data/network_regimes.csv`` by the ring inversion of
`sim.calib.fit.ring_link`, as `sim.calib.fit.fit_to_network` does for one line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.calib.fit import WEIGHTINGS, fit_points, ring_link
from sim.checks import check_choice, check_float, check_int
from sim.core.cost import CommCost, Regime
from sim.errors import SimInputError

__all__ = ["MAX_REGIMES", "MIN_GAIN", "MIN_POINTS", "RegimeFit", "fit_regimes", "regimes_to_network"]

#: Regimes at most by default: enough for eager / rendezvous plus a bandwidth
#: regime, or NCCL's LL / LL128 / Simple.
MAX_REGIMES = 3
#: Fewest measured points in a regime (and at least two distinct sizes), so
#: that no regime is a line through two noisy points.
MIN_POINTS = 3
#: The criterion for the number of regimes: one more regime is kept only if
#: it cuts the root-mean-square (relative, by default) error of the fit by at
#: least this fraction. 0.25 keeps the K80 log's real jump (1 -> 2 regimes
#: cuts the RMS relative error by over 60%) and refuses splits that only chase
#: noise.
MIN_GAIN = 0.25
#: Distinct message sizes at most in one fit (the search is quadratic in them).
MAX_SIZES = 2000


@dataclass(frozen=True)
class RegimeFit:
    """Result of `fit_regimes`: the regimes, and how well each count of regimes fitted.

    ``rms_error`` is the root-mean-square residual of the chosen fit, relative
    to the measured time with ``weighting="relative"`` (0.05 = 5 %), in
    seconds with ``"absolute"``; ``rms_by_count[k - 1]`` is that of the best
    fit with k regimes.
    """

    regimes: tuple[Regime, ...]
    weighting: str
    n_points: int
    min_bytes: int
    max_bytes: int
    rms_error: float
    rms_by_count: tuple[float, ...]

    @property
    def cost(self) -> CommCost:
        """The fit as an all-reduce cost (affine when one regime was kept)."""
        return CommCost.piecewise(self.regimes, "fitted regimes")

    def time_s(self, nbytes):
        """Fitted all-reduce time of ``nbytes`` (scalar or array)."""
        return self.cost.time_s(nbytes)

    def errors(self, bytes, time_s) -> pd.DataFrame:
        """Per size: ``bytes, measured_s, fitted_s, error_pct`` (signed, fitted vs measured)."""
        b = np.asarray(bytes, dtype=float)
        t = np.asarray(time_s, dtype=float)
        fitted = np.asarray(self.time_s(b), dtype=float)
        return pd.DataFrame({"bytes": b.astype(np.int64), "measured_s": t, "fitted_s": fitted,
                             "error_pct": (fitted - t) / t * 100.0})

    def median_error_pct(self, bytes, time_s) -> float:
        """Median |error| over the points, in percent."""
        return float(np.median(np.abs(self.errors(bytes, time_s)["error_pct"])))


def _prefix_moments(x: np.ndarray, t: np.ndarray, w2: np.ndarray) -> np.ndarray:
    """Cumulative weighted moments (W, Wx, Wxx, Wt, Wxt, Wtt), one row per prefix (first row 0)."""
    moments = np.stack([w2, w2 * x, w2 * x * x, w2 * t, w2 * x * t, w2 * t * t])
    return np.concatenate([np.zeros((6, 1)), np.cumsum(moments, axis=1)], axis=1)


def _line_of(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(alpha, beta, sse)`` of the weighted least-squares line with alpha, beta >= 0, from
    summed moments (leading axis of 6). A negative alpha refits through the origin, a
    negative beta fits a constant (each exact for the constraint it hits)."""
    sw, swx, swxx, swt, swxt, swtt = s
    with np.errstate(divide="ignore", invalid="ignore"):
        det = sw * swxx - swx * swx
        beta = (sw * swxt - swx * swt) / det
        alpha = (swt - beta * swx) / sw
        origin_beta = swxt / swxx
        const_alpha = swt / sw
    neg_alpha = ~(alpha >= 0)
    alpha, beta = np.where(neg_alpha, 0.0, alpha), np.where(neg_alpha, origin_beta, beta)
    neg_beta = ~(beta >= 0)
    alpha, beta = np.where(neg_beta, const_alpha, alpha), np.where(neg_beta, 0.0, beta)
    sse = swtt - 2 * alpha * swt - 2 * beta * swxt + alpha * alpha * sw + 2 * alpha * beta * swx + beta * beta * swxx
    return alpha, beta, np.maximum(sse, 0.0)


def _segment_sse(prefix: np.ndarray, bounds: np.ndarray, n_sizes: np.ndarray, min_points: int) -> np.ndarray:
    """SSE of one line over the points between candidate bounds i < j (inf where not allowed)."""
    s = prefix[:, bounds][:, None, :] - prefix[:, bounds][:, :, None]  # [moment, i, j]
    _, _, sse = _line_of(s)
    points = bounds[None, :] - bounds[:, None]
    sizes = n_sizes[None, :] - n_sizes[:, None]
    ok = (points >= min_points) & (sizes >= 2)
    return np.where(ok, sse, np.inf)


def _best_cuts(seg: np.ndarray, regimes: int) -> tuple[float, list[int]]:
    """Least total SSE over ``regimes`` consecutive segments from bound 0 to the last, and
    the bound indices that cut them (dynamic programming)."""
    m = seg.shape[0]
    best = seg[0].copy()
    back: list[np.ndarray] = []
    for _ in range(1, regimes):
        total = best[:, None] + seg  # end of the previous segments at i, next one i -> j
        back.append(np.argmin(total, axis=0))
        best = total[back[-1], np.arange(m)]
    cuts, j = [], m - 1
    for arg in reversed(back):
        j = int(arg[j])
        cuts.append(j)
    return float(best[m - 1]), sorted(cuts)


def _check_options(max_regimes, min_points, min_gain, weighting) -> None:
    check_int("max_regimes", max_regimes, 1, 10)
    check_int("min_points", min_points, 2)
    check_float("min_gain", min_gain, 0, 1)
    check_choice("weighting", weighting, WEIGHTINGS)


def fit_regimes(bytes, time_s, *, max_regimes: int = MAX_REGIMES, min_points: int = MIN_POINTS,
                min_gain: float = MIN_GAIN, weighting: str = "relative", min_bytes=None) -> RegimeFit:
    """Fit up to ``max_regimes`` size regimes, each ``alpha + beta M`` (alpha, beta >= 0).

    For each count of regimes k, the cuts are the exact least-squares optimum
    over all cuts between distinct measured sizes (each regime at least
    ``min_points`` points and two sizes), with residuals weighted as in
    `sim.calib.fit.fit_alpha_beta`. The count is the smallest k whose best fit
    is not beaten by more than ``min_gain`` (relative cut of the RMS error) by
    k + 1 regimes (`MIN_GAIN`). A regime starts (``from_bytes``) at its
    smallest measured size, the first at 0: the switch lies between that size
    and the one measured before it.

    Raises
    ------
    SimInputError
        Bad options, points (as `fit_alpha_beta`), or more than `MAX_SIZES` sizes.
    """
    _check_options(max_regimes, min_points, min_gain, weighting)
    b, t = fit_points(bytes, time_s, min_bytes)
    min_points = min(min_points, b.size)  # a short log is one line through all its points
    order = np.argsort(b, kind="stable")
    b, t = b[order], t[order]
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])  # first point of each distinct size
    if starts.size > MAX_SIZES:
        raise SimInputError(f"{starts.size} distinct message sizes; a regime fit takes at most {MAX_SIZES}")
    scale = float(b.max())
    w = 1.0 / t if weighting == "relative" else np.ones_like(t)
    prefix = _prefix_moments(b / scale, t, w * w)
    bounds = np.r_[starts, b.size]
    seg = _segment_sse(prefix, bounds, np.arange(bounds.size), min_points)
    fits = []
    for k in range(1, max_regimes + 1):
        sse, cuts = _best_cuts(seg, k)
        if not np.isfinite(sse):
            break
        fits.append((float(np.sqrt(sse / b.size)), cuts))
    if not fits:
        raise SimInputError(f"need at least {min_points} points and two distinct sizes for a fit, got {b.size}")
    chosen = 0
    while chosen + 1 < len(fits) and fits[chosen + 1][0] <= (1 - min_gain) * fits[chosen][0]:
        chosen += 1
    rms, cuts = fits[chosen]
    edges = [0, *cuts, bounds.size - 1]
    regimes = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        alpha, beta, _ = _line_of(prefix[:, bounds[hi]] - prefix[:, bounds[lo]])
        regimes.append(Regime(0.0 if lo == 0 else float(b[bounds[lo]]), float(alpha), float(beta) / scale))
    return RegimeFit(tuple(regimes), weighting, int(b.size), int(b.min()), int(b.max()), rms,
                     tuple(f[0] for f in fits))


def regimes_to_network(fit: RegimeFit, name: str, gpus: int, *, source: str = "", note: str = "") -> list[dict]:
    """Rows of ``data/network_regimes.csv`` for preset ``name``: each regime inverted for a
    ring all-reduce on ``gpus`` workers (`sim.calib.fit.ring_link`), so a P-worker ring
    over the preset reproduces the fitted T(M) in every regime; ``nodes`` is P (the
    benchmark's ranks, one a node: the count the table was measured on).

    A regime with no per-byte cost (a constant) gets an ``effective_gbps`` of ``inf``.
    """
    try:
        p = check_int("gpus", gpus, 2)
    except SimInputError:
        raise SimInputError(f"gpus must be a whole number >= 2 (workers in the all-reduce), got {gpus!r}") from None
    rows = []
    for r in fit.regimes:
        if r.beta_s_per_byte > 0:
            alpha_link, gbps = ring_link(r.alpha_s, r.beta_s_per_byte, p)
        else:
            alpha_link, gbps = r.alpha_s / (2 * (p - 1)), float("inf")
        derivation = (f"ring fit on P={p}: alpha_AR={r.alpha_s * 1e6:.4g} us, beta_AR={r.beta_s_per_byte:.4g} s/B "
                      f"from {r.from_bytes:.0f} B")
        rows.append({"network": name, "nodes": p, "from_bytes": int(r.from_bytes), "alpha_us": alpha_link * 1e6,
                     "effective_gbps": gbps, "source": source,
                     "note": f"{note}; {derivation}" if note else derivation})
    return rows
