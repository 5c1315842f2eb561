"""Fit the alpha-beta model of all-reduce time to benchmark logs.

An all-reduce of M bytes is modelled as ``T(M) = alpha + beta * M`` (Hockney's
model, as used by MG-WFBP: Shi, Chu and Li, INFOCOM 2019, Eq. 2). This module
reads the two common benchmark outputs, fits ``alpha`` and ``beta`` by least
squares, and turns an all-reduce fit into a per-link network preset:

* `parse_osu_allreduce` - OSU Micro-Benchmarks ``osu_allreduce``;
* `parse_nccl_tests` - NVIDIA nccl-tests ``all_reduce_perf``;
* `parse_allreduce_log` - either, detected from the text;
* `fit_alpha_beta` - least squares, weighted by relative or absolute error;
* `fit_to_network` - all-reduce fit on P workers -> link preset row.

Everything here is pure: text in, numbers out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sim.checks import check_choice, check_float, check_int
from sim.errors import SimInputError

__all__ = ["COLLECTIVES", "MAX_LOG_LINES", "MAX_POINTS", "WEIGHTINGS", "Fit", "fit_alpha_beta", "fit_points",
           "fit_to_network", "parse_allreduce_log", "parse_nccl_tests", "parse_osu_allreduce", "ring_link"]

#: Residual weightings `fit_alpha_beta` accepts.
#:
#: Why relative by default: benchmark sweeps span orders of magnitude (4 B to
#: 1 MiB gives 30 us to 5 ms in the B-Caffe OSU log), and timing noise grows
#: roughly in proportion to the time. Plain least squares is then decided by
#: the few largest messages: a 1 % miss at 5 ms outweighs missing the 30 us
#: latency entirely, so ``alpha`` is just the extrapolated intercept of the
#: large-message line (711 us for the 8-node log, whose 4-byte all-reduce
#: takes 82 us). Relative weighting gives every size the same say (93 us
#: there). Simulated gradients range from bias vectors of a few hundred bytes
#: to weight tensors of tens of MB, and the WFBP / MG-WFBP schedules hinge on
#: the per-message ``alpha``, so both ends must be right.
WEIGHTINGS = ("relative", "absolute")

#: Collectives `fit_to_network` can invert.
COLLECTIVES = ("ring",)

@dataclass(frozen=True)
class Fit:
    """Result of `fit_alpha_beta`: ``T(M) = alpha_s + beta_s_per_byte * M``.

    ``r2`` is the coefficient of determination in the metric that was
    minimised (weighted for ``weighting="relative"``, as for weighted least
    squares in statsmodels' ``WLS.rsquared``). ``min_bytes`` and
    ``max_bytes`` bound the message sizes actually used.
    """

    alpha_s: float
    beta_s_per_byte: float
    r2: float
    n_points: int
    min_bytes: int
    max_bytes: int
    weighting: str = "relative"

    def time_s(self, nbytes):
        """Fitted all-reduce time of ``nbytes`` (scalar or array)."""
        return self.alpha_s + self.beta_s_per_byte * np.asarray(nbytes, dtype=float)


# --- parsing -------------------------------------------------------------------


def _frame(rows: list[tuple[int, float]], fmt: str, ranks: int | None) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["bytes", "time_s"]).astype({"bytes": "int64", "time_s": "float64"})
    df.attrs["format"] = fmt
    df.attrs["ranks"] = ranks
    return df


#: Bounds of a measured point, far outside any real all-reduce (raise them here): 1 PiB, 1 ns to one day.
MAX_MESSAGE_BYTES = 2**50
MIN_TIME_S = 1e-9
MAX_TIME_S = 86_400.0
#: Lines read from a log and data points fitted, at most: far above real sweeps (a few dozen sizes), a bound on the work.
MAX_LOG_LINES, MAX_POINTS = 1_000_000, 10_000


def _log_lines(text: str) -> list[str]:
    """The log's lines (split at LF, CRLF or CR), once their count and the data lines' (a digit first) are in bounds."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    count = text.count("\n") + (not text.endswith("\n"))
    if count > MAX_LOG_LINES:
        raise SimInputError(f"all-reduce log of {count:,} lines; at most {MAX_LOG_LINES:,} are read (sim.calib.fit.MAX_LOG_LINES)")
    lines = text.split("\n")
    points = sum(1 for line in lines if line.lstrip()[:1].isdigit())
    if points > MAX_POINTS:
        raise SimInputError(f"all-reduce log of {points:,} data lines; a fit takes at most {MAX_POINTS:,} points "
                            "(sim.calib.fit.MAX_POINTS)")
    return lines


def _check_point(line_no: int, nbytes: int, time_s: float) -> None:
    if not 0 <= nbytes <= MAX_MESSAGE_BYTES:
        raise SimInputError(f"line {line_no}: message size must be from 0 to {MAX_MESSAGE_BYTES} bytes "
                            f"(sim.calib.fit.MAX_MESSAGE_BYTES), got {nbytes:.3g}")
    if not (math.isfinite(time_s) and MIN_TIME_S <= time_s <= MAX_TIME_S):
        raise SimInputError(f"line {line_no}: time must be a finite number > 0, from {MIN_TIME_S:g} to {MAX_TIME_S:g} s, "
                            f"got {time_s:g}")


def parse_osu_allreduce(text: str) -> pd.DataFrame:
    """Rows of OSU ``osu_allreduce`` output as a DataFrame ``bytes, time_s``.

    Comment lines start with ``#``. A data line is ``<size> <avg latency us>``,
    possibly followed by more columns (min, max, iterations with ``-f``).
    The size may carry a rank-count prefix, ``<ranks>,<size>``, as in the
    B-Caffe logs (``8,4   82.28``); the rank count then goes to
    ``df.attrs["ranks"]`` (else None).

    Raises
    ------
    SimInputError
        On a line that is neither a comment nor a data line (naming it), on
        mixed rank prefixes, or if there is no data line.
    """
    rows: list[tuple[int, float]] = []
    prefixes: set[int] = set()
    for line_no, raw in enumerate(_log_lines(text), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        tokens = line.split(None, 2)
        size_token = tokens[0]
        try:
            if "," in size_token:
                ranks_text, size_text = size_token.split(",")
                prefixes.add(int(ranks_text))
            else:
                size_text = size_token
            nbytes = int(size_text)
            latency_us = float(tokens[1])
        except (ValueError, IndexError):
            raise SimInputError(
                f"line {line_no}: expected '<bytes> <avg latency us>' (OSU osu_allreduce), got {line[:60]!r}"
            ) from None
        _check_point(line_no, nbytes, latency_us * 1e-6)
        rows.append((nbytes, latency_us * 1e-6))
    if not rows:
        raise SimInputError("OSU osu_allreduce output has no data lines")
    if len(prefixes) > 1:
        raise SimInputError(f"OSU output mixes rank counts {sorted(prefixes)}; give one run at a time")
    return _frame(rows, "osu", prefixes.pop() if prefixes else None)


_NCCL_RANK = re.compile(r"^#\s*Rank\s+\d+\b")


def _nccl_header(lines: list[str]) -> tuple[int, list[str]] | None:
    """Index and column names of the nccl-tests header line, if any."""
    for i, raw in enumerate(lines):
        line = raw.strip()
        if line.startswith("#"):
            names = line.lstrip("#").split(None, 64)  # a header has a dozen names; a long comment is not split up
            if "time" in names and "algbw" in names and "busbw" in names:
                return i, names
    return None


def parse_nccl_tests(text: str) -> pd.DataFrame:
    """Rows of nccl-tests ``all_reduce_perf`` output as ``bytes, time_s``.

    The header line names the columns (``size count type redop root time
    algbw busbw #wrong`` then the in-place ones; older versions lack
    ``root``). The out-of-place ``time`` (the first one) is used, in the unit
    of the units line below the header (``(us)``; older releases printed
    milliseconds); without a units line, the unit is inferred from the
    ``algbw`` column. Lines that are not rows (``NCCL INFO`` logging, the
    version banner) are skipped. ``df.attrs["ranks"]`` counts the
    ``# Rank N`` lines (None if there are none).

    Raises
    ------
    SimInputError
        If there is no header, a row is malformed (naming its line), or
        there are no rows.
    """
    lines = _log_lines(text)
    header = _nccl_header(lines)
    if header is None:
        raise SimInputError("nccl-tests output has no header line (a '#' line naming time, algbw and busbw)")
    header_at, names = header
    rows, algbws, ranks = _nccl_rows(lines, header_at, names)
    if not rows:
        raise SimInputError("nccl-tests output has no data rows")
    unit_s = _nccl_units_line(lines, header_at) or _infer_nccl_unit(rows, algbws)
    out = []
    for line_no, nbytes, value in rows:
        _check_point(line_no, nbytes, value * unit_s)
        out.append((nbytes, value * unit_s))
    return _frame(out, "nccl-tests", ranks or None)


def _nccl_units_line(lines: list[str], header_at: int) -> float | None:
    """Seconds per time unit from the units line below the header (``(us)`` or
    ``(ms)``), or None if there is no such line."""
    unit_s = None
    for raw in lines[header_at + 1 : header_at + 3]:
        if raw.strip().startswith("#") and "(B)" in raw:
            unit_s = 1e-6 if "(us)" in raw else 1e-3 if "(ms)" in raw else None
    return unit_s


def _nccl_rows(lines: list[str], header_at: int, names: list[str]):
    """The data rows below the header as ``(line number, bytes, time in file
    units)``, their ``algbw`` values, and the number of ``# Rank`` lines."""
    time_col, algbw_col = names.index("time"), names.index("algbw")
    rows: list[tuple[int, int, float]] = []
    algbws: list[float] = []
    ranks = 0
    for line_no, raw in enumerate(lines, start=1):
        line = raw.strip()
        if _NCCL_RANK.match(line):
            ranks += 1
        if line_no <= header_at + 1 or not line or line.startswith("#"):
            continue
        tokens = line.split(None, len(names))
        if not tokens[0].isdigit():
            continue  # logging, banners
        try:
            if len(tokens) != len(names):
                raise ValueError
            rows.append((line_no, int(tokens[0]), float(tokens[time_col])))
            algbws.append(float(tokens[algbw_col]))
            wrong = [tokens[i] for i, n in enumerate(names) if n == "#wrong" and tokens[i].isdigit()]
        except ValueError:
            raise SimInputError(
                f"line {line_no}: nccl-tests row does not match the {len(names)}-column header "
                f"({' '.join(names[: time_col + 2])} ...): {line[:60]!r}"
            ) from None
        if not (math.isfinite(rows[-1][2]) and math.isfinite(algbws[-1]) and algbws[-1] >= 0):
            raise SimInputError(f"line {line_no}: nccl-tests time and algbw must be finite, algbw >= 0; got time "
                                f"{tokens[time_col][:20]!r}, algbw {tokens[algbw_col][:20]!r}")
        if any(int(w) for w in wrong):
            raise SimInputError(f"line {line_no}: nccl-tests counts {max(map(int, wrong))} wrong results in this "
                                "row: a wrong all-reduce's time is not a measurement to fit")
    return rows, algbws, ranks


def _infer_nccl_unit(rows: list[tuple[int, int, float]], algbws: list[float]) -> float:
    """Seconds per time unit, us or ms: the one within a factor of ten of size / algbw (GB/s) / time
    on the largest row where all three are positive."""
    usable = [(nbytes, nbytes / (algbw * 1e9) / value, line_no)
              for (line_no, nbytes, value), algbw in zip(rows, algbws, strict=True) if min(nbytes, value, algbw) > 0]
    _, implied, line_no = max(usable) if usable else (0, math.nan, 0)  # seconds per unit
    for unit_s in (1e-6, 1e-3):
        if unit_s / 10 <= implied <= unit_s * 10:
            return unit_s
    found = f"line {line_no}: size / algbw / time is {implied:.3g} s" if usable else "no row with positive size, time, algbw"
    raise SimInputError(f"nccl-tests output without a units line: {found}, which tells neither us nor ms per time unit; "
                        "add the units line ('# (B) (elements) ... (us) (GB/s)')")


def parse_allreduce_log(text: str) -> pd.DataFrame:
    """Parse OSU or nccl-tests all-reduce output, detecting which it is.

    nccl-tests output is recognised by its header (``time``, ``algbw``,
    ``busbw``); anything else whose first non-comment line is
    ``<bytes> <latency>`` is read as OSU. ``df.attrs["format"]`` says which.

    Raises
    ------
    SimInputError
        If the text is neither format or has no data rows.
    """
    lines = _log_lines(text)
    nccl = _nccl_header(lines) is not None
    first = next((ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")), None)
    osu_banner = any("OSU" in ln and ln.strip().startswith("#") for ln in lines)
    del lines  # (the parser splits the text again)
    if nccl:
        return parse_nccl_tests(text)
    if osu_banner or (first and re.match(r"^(\d+,)?\d+\s+[\d.eE+-]+(\s|$)", first)):
        return parse_osu_allreduce(text)
    if first is None:
        raise SimInputError("all-reduce log has no data rows")
    raise SimInputError(
        "unrecognised all-reduce log: expected OSU osu_allreduce output ('<bytes> <avg latency us>' lines) "
        f"or nccl-tests all_reduce_perf output (a header naming algbw, busbw); first line: {first[:60]!r}"
    )


# --- fitting ---------------------------------------------------------------------


def fit_points(bytes, time_s, min_bytes) -> tuple[np.ndarray, np.ndarray]:
    """The checked sizes and times as float arrays, those below ``min_bytes`` dropped."""
    try:
        b = np.asarray(bytes, dtype=float).ravel()
        t = np.asarray(time_s, dtype=float).ravel()
    except (TypeError, ValueError):
        raise SimInputError("bytes and time_s must be numbers") from None
    if b.shape != t.shape:
        raise SimInputError(f"bytes and time_s differ in length ({b.size} vs {t.size})")
    if not np.all(np.isfinite(b)) or np.any(b < 0) or np.any(b > MAX_MESSAGE_BYTES):
        raise SimInputError(f"bytes must be finite and >= 0, at most {MAX_MESSAGE_BYTES} "
                            "(sim.calib.fit.MAX_MESSAGE_BYTES)")
    if not np.all(np.isfinite(t)) or np.any(t < MIN_TIME_S) or np.any(t > MAX_TIME_S):
        raise SimInputError(f"time_s must be finite and > 0, from {MIN_TIME_S:g} to {MAX_TIME_S:g} s")
    if min_bytes is not None:
        check_float("min_bytes", min_bytes, 0)
        keep = b >= min_bytes
        b, t = b[keep], t[keep]
    if np.unique(b).size < 2:
        where = f" at or above min_bytes = {min_bytes}" if min_bytes is not None else ""
        raise SimInputError(f"need at least two distinct message sizes{where}, got {np.unique(b).size}")
    return b, t


def _weighted_line(b: np.ndarray, t: np.ndarray, weighting: str) -> tuple[float, float, float]:
    """``(alpha, beta, r2)`` of the (weighted) least-squares line ``t = alpha + beta b``."""
    # Scale sizes to [0, 1] so the two columns are comparable; then weight rows.
    scale = float(b.max())
    design = np.column_stack([np.ones_like(b), b / scale])
    w = 1.0 / t if weighting == "relative" else np.ones_like(t)
    coef, *_ = np.linalg.lstsq(design * w[:, None], t * w, rcond=None)
    alpha, beta = float(coef[0]), float(coef[1]) / scale

    fitted = alpha + beta * b
    w2 = w * w
    mean = float(np.sum(w2 * t) / np.sum(w2))
    ss_tot = float(np.sum(w2 * (t - mean) ** 2))
    ss_res = float(np.sum(w2 * (t - fitted) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else (1.0 if ss_res == 0 else 0.0)
    return alpha, beta, r2


def fit_alpha_beta(bytes, time_s, min_bytes=None, weighting: str = "relative") -> Fit:
    """Least-squares fit of ``time_s = alpha + beta * bytes``.

    Parameters
    ----------
    bytes, time_s : array-like
        Message sizes (bytes, >= 0) and their measured times (seconds, > 0).
    min_bytes : int, optional
        Ignore messages smaller than this (e.g. to fit only the bandwidth
        regime, past a protocol switch).
    weighting : {"relative", "absolute"}
        ``"relative"`` (default) minimises ``sum(((fit - t) / t) ** 2)``, the
        squared *relative* errors; ``"absolute"`` minimises
        ``sum((fit - t) ** 2)``. See `WEIGHTINGS` for why relative is
        the default; use ``"absolute"`` when only large (bucketed) messages
        matter.

    Returns
    -------
    Fit
        ``alpha_s`` and ``beta_s_per_byte`` may come out negative on data
        far from affine; `fit_to_network` refuses those.

    Raises
    ------
    SimInputError
        Unknown weighting (listing the valid ones), mismatched lengths,
        non-finite or out-of-range values, or fewer than two distinct sizes
        left after ``min_bytes``.

    Examples
    --------
    >>> f = fit_alpha_beta([0, 1000], [1e-5, 2e-5])
    >>> round(f.alpha_s, 12), round(f.beta_s_per_byte, 15)
    (1e-05, 1e-08)

    References
    ----------
    Hockney, "The communication challenge for MPP: Intel Paragon and Meiko
    CS-2", Parallel Computing 20(3), 1994 (the alpha-beta model).
    """
    check_choice("weighting", weighting, WEIGHTINGS)
    b, t = fit_points(bytes, time_s, min_bytes)
    alpha, beta, r2 = _weighted_line(b, t, weighting)
    return Fit(
        alpha_s=alpha,
        beta_s_per_byte=beta,
        r2=r2,
        n_points=int(b.size),
        min_bytes=int(b.min()),
        max_bytes=int(b.max()),
        weighting=weighting,
    )


def _check_network_fit(fit: Fit, gpus: int, collective: str) -> int:
    """The worker count P, once collective, P and the fit's signs are checked."""
    check_choice("collective", collective, COLLECTIVES)
    try:
        p = check_int("gpus", gpus, 2)
    except SimInputError:
        raise SimInputError(f"gpus must be a whole number >= 2 (workers in the all-reduce), got {gpus!r}") from None
    if not fit.alpha_s >= 0:
        raise SimInputError(
            f"fit alpha = {fit.alpha_s:.3g} s is negative; use weighting='relative' or a smaller min_bytes"
        )
    if not fit.beta_s_per_byte > 0:
        raise SimInputError(f"fit beta = {fit.beta_s_per_byte:.3g} s/B is not positive; is time growing with size?")
    return p


def _derivation(fit: Fit, p: int) -> str:
    """The note that records how a link preset was derived from the fit."""
    return (
        f"ring all-reduce fit on P={p} ({fit.weighting} least squares, {fit.n_points} sizes "
        f"{fit.min_bytes}-{fit.max_bytes} B, R2={fit.r2:.3f}): alpha_AR={fit.alpha_s * 1e6:.4g} us, "
        f"beta_AR={fit.beta_s_per_byte:.4g} s/B; alpha_link=alpha_AR/(2(P-1)), "
        f"beta_link=beta_AR*P/(2(P-1))"
    )


def ring_link(alpha_s: float, beta_s_per_byte: float, p: int) -> tuple[float, float]:
    """Per-link ``(alpha_s, effective_gbps)`` of a ring all-reduce ``alpha_s + beta_s_per_byte M`` on P workers.

    For a ring all-reduce on P workers (Patarasuk and Yuan 2009; Thakur,
    Rabenseifner and Gropp 2005, Sec. 4), every one of the 2(P-1) steps
    costs one link latency and moves M/P bytes over every link at once::

        T(M) = 2(P-1) alpha_link + 2(P-1)/P * M * beta_link

    so matching ``T = alpha + beta * M`` gives::

        alpha_link = alpha / (2(P-1))
        beta_link  = beta * P / (2(P-1))       effective_gbps = 8 / beta_link / 1e9

    This inverts `sim.comm.ring`.
    """
    steps = 2 * (p - 1)
    beta_link = beta_s_per_byte * p / steps
    return alpha_s / steps, 8.0 / beta_link / 1e9


def fit_to_network(
    fit: Fit,
    name: str,
    gpus: int,
    collective: str = "ring",
    *,
    scope: str = "inter",
    line_rate_gbps: float | None = None,
    source: str = "",
    note: str = "",
) -> dict:
    """Turn an all-reduce fit on ``gpus`` workers into a link preset row.

    The fit is inverted for a ring all-reduce (see `ring_link` for the
    algebra), so a cluster of P workers simulated with the returned preset
    reproduces the fitted T(M).

    Parameters
    ----------
    fit : Fit
        From `fit_alpha_beta`, on all-reduce times of ``gpus`` workers.
    name : str
        Name of the new preset.
    gpus : int
        Number of workers P (>= 2) that took part in the measured all-reduce.
    collective : {"ring"}
        The algorithm assumed when inverting the fit.
    scope, line_rate_gbps, source, note
        The other columns of ``data/networks.csv``. ``line_rate_gbps`` may be
        left None (fill it in before building a `sim.catalog.Network`); when
        given, a fit implying a faster link is refused.

    Returns
    -------
    dict
        The columns of ``data/networks.csv``; the note records the derivation.

    Raises
    ------
    SimInputError
        Unknown collective, ``gpus`` < 2, a negative alpha or non-positive
        beta, or an effective rate above ``line_rate_gbps``.
    """
    p = _check_network_fit(fit, gpus, collective)
    alpha_link_s, effective_gbps = ring_link(fit.alpha_s, fit.beta_s_per_byte, p)
    if line_rate_gbps is not None and effective_gbps > line_rate_gbps:
        raise SimInputError(
            f"{name}: the fit implies {effective_gbps:.3g} Gb/s per link, above the line rate "
            f"{line_rate_gbps} Gb/s; is gpus = {p} right, or was the algorithm not a ring?"
        )
    derivation = _derivation(fit, p)  # how the row was derived, kept in its note
    return {
        "name": name,
        "scope": scope,
        "line_rate_gbps": line_rate_gbps,
        "effective_gbps": effective_gbps,
        "alpha_us": alpha_link_s * 1e6,
        "source": source,
        "note": f"{note}; {derivation}" if note else derivation,
    }
