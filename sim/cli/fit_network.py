"""``python -m sim fit-network``: alpha and beta, and size regimes, from an OSU or nccl-tests all-reduce log."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np

from sim.cli.args import (
    int_at_least,
    nonneg_float,
    positive_float,
    positive_int,
    read_text,
    table,
    write_json,
)
from sim.cluster import MAX_GPUS
from sim.errors import SimInputError, SimInputWarning

NAME = "fit-network"
HELP = "fit alpha and beta (and size regimes) to an OSU or nccl-tests all-reduce log"
PRESET_COLUMNS = ["name", "scope", "line_rate_gbps", "effective_gbps", "alpha_us", "source", "note"]


def _fraction(text: str) -> float:
    value = nonneg_float(text)
    if value >= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be below 1")
    return value


def add_arguments(parser) -> None:
    parser.add_argument("file", help="osu_allreduce or all_reduce_perf output")
    parser.add_argument("--gpus", type=positive_int, default=None, help="ranks in the all-reduce (read from the log if it says)")
    parser.add_argument("--min-bytes", type=positive_int, default=None, help="ignore messages smaller than this")
    parser.add_argument("--weighting", choices=["relative", "absolute"], default="relative")
    parser.add_argument("--max-regimes", type=lambda t: int_at_least(t, 1), default=3,
                        help="size regimes at most, each its own alpha-beta line (1: one line); default 3")
    parser.add_argument("--min-gain", type=_fraction, default=0.25,
                        help="keep one more regime only if it cuts the RMS error by this fraction (default 0.25)")
    parser.add_argument("--save", metavar="NAME", default=None, help="save as a network preset that --network accepts")
    parser.add_argument("--line-rate-gbps", type=positive_float, default=None, help="the link's nominal rate (with --save)")
    parser.add_argument("--scope", choices=["inter", "intra"], default=None,
                        help="link scope of the saved preset (default inter)")
    parser.add_argument("--overwrite-builtin", action="store_true",
                        help="with --save: let the preset replace the built-in one of the same name")
    parser.add_argument("--format", choices=["json", "table"], default="table")


def regime_report(points, args, ranks) -> dict:
    """The regime fit of the log's points: regimes, error per size and medians (line vs regimes), and,
    when the rank count is known, the per-link rows of a regime table (``data/network_regimes.csv``)."""
    from sim.calib.regimes import fit_regimes, regimes_to_network

    if args.max_regimes > 10:
        raise SimInputError(f"--max-regimes must be at most 10, got {args.max_regimes}")
    kept = points if args.min_bytes is None else points[points["bytes"] >= args.min_bytes]
    line = fit_regimes(points["bytes"], points["time_s"], max_regimes=1, weighting=args.weighting,
                       min_bytes=args.min_bytes)
    fit = fit_regimes(points["bytes"], points["time_s"], max_regimes=args.max_regimes, min_gain=args.min_gain,
                      weighting=args.weighting, min_bytes=args.min_bytes)
    errors = fit.errors(kept["bytes"], kept["time_s"])
    links = ([{k: row[k] for k in ("nodes", "from_bytes", "alpha_us", "effective_gbps")}
              for row in regimes_to_network(fit, "fit", int(ranks))] if ranks and int(ranks) >= 2 else None)
    return {
        "regimes": [{"from_bytes": int(r.from_bytes), "alpha_s": r.alpha_s, "beta_s_per_byte": r.beta_s_per_byte}
                    for r in fit.regimes],
        "median_error_pct": float(np.median(np.abs(errors["error_pct"]))),
        "line_median_error_pct": line.median_error_pct(kept["bytes"], kept["time_s"]),
        "rms_error_by_regime_count": list(fit.rms_by_count),
        "regime_links": links,
        "errors": errors.to_dict(orient="records"),
    }


def _print_tables(result: dict, out) -> None:
    summary = {k: v for k, v in result.items()
               if k not in ("preset", "regimes", "errors", "rms_error_by_regime_count", "regime_links")}
    out.write(table(summary) + "\n\n")
    links = result["regime_links"] or [None] * len(result["regimes"])
    out.write(f"{'regime from (B)':>16} {'alpha (us)':>12} {'beta (s/B)':>12}"
              f"{'   ring link alpha (us), Gb/s' if result['regime_links'] else ''}\n")
    for r, link in zip(result["regimes"], links, strict=True):
        ring = f"   {link['alpha_us']:>12.4g} {link['effective_gbps']:>8.4g}" if link else ""
        out.write(f"{r['from_bytes']:>16} {r['alpha_s'] * 1e6:>12.4g} {r['beta_s_per_byte']:>12.4g}{ring}\n")
    out.write(f"\n{'size (B)':>12} {'measured (us)':>14} {'fitted (us)':>12} {'error %':>8}\n")
    for e in result["errors"]:
        out.write(f"{e['bytes']:>12} {e['measured_s'] * 1e6:>14.2f} {e['fitted_s'] * 1e6:>12.2f} "
                  f"{e['error_pct']:>8.2f}\n")
    out.write(f"median |error|: {result['median_error_pct']:.2f} % with {len(result['regimes'])} regime(s), "
              f"{result['line_median_error_pct']:.2f} % with one line\n")


def run(args, out) -> None:
    from sim.fit import fit_alpha_beta, parse_allreduce_log

    if args.gpus is not None and not 2 <= args.gpus <= MAX_GPUS:
        raise SimInputError(f"--gpus: an all-reduce log has 2 to {MAX_GPUS:,} ranks, got {args.gpus:,}")
    path = Path(args.file)
    points = parse_allreduce_log(read_text(path))
    fit = fit_alpha_beta(points["bytes"], points["time_s"], min_bytes=args.min_bytes, weighting=args.weighting)
    if fit.alpha_s < 0 or fit.beta_s_per_byte < 0:
        warnings.warn(f"the fitted line has a negative {'beta' if fit.beta_s_per_byte < 0 else 'alpha'}: the log's "
                      "times do not grow with the message size as an alpha-beta line does (--save refuses it)",
                      SimInputWarning, stacklevel=2)
    ranks = args.gpus or points.attrs.get("ranks")
    result = {
        "file": path.name, "format": points.attrs.get("format"), "ranks": ranks,
        "alpha_s": fit.alpha_s, "beta_s_per_byte": fit.beta_s_per_byte, "r2": fit.r2,
        "n_points": fit.n_points, "min_bytes": fit.min_bytes, "max_bytes": fit.max_bytes, "weighting": fit.weighting,
        **regime_report(points, args, ranks),
    }
    if args.save:
        result.update(save_preset(args, fit, ranks, path.name))
    else:
        given = [flag for flag, value in (("--line-rate-gbps", args.line_rate_gbps), ("--scope", args.scope),
                                          ("--overwrite-builtin", args.overwrite_builtin)) if value]
        if given:
            raise SimInputError(f"{', '.join(given)} only apply with --save NAME")
    if args.format == "json":
        write_json(result, out)
    else:
        _print_tables(result, out)


def save_preset(args, fit, ranks, file_name: str) -> dict:
    """Save the fit as a network preset in the user's presets file (`sim.catalog.save_network`:
    a checked name, an atomic write under a lock); what was saved. The preset is the one-line
    fit: user presets have no regime table (the built-in ones do, ``data/network_regimes.csv``)."""
    from sim.catalog import USER_NETWORKS_ENV, save_network
    from sim.fit import fit_to_network

    if args.line_rate_gbps is None:
        raise SimInputError("--save needs --line-rate-gbps, the link's nominal rate")
    if not ranks:
        raise SimInputError("--save needs --gpus: the log does not say how many ranks ran")
    row = fit_to_network(fit, args.save, int(ranks), scope=args.scope or "inter", line_rate_gbps=args.line_rate_gbps,
                         source=f"fit of {file_name} by python -m sim fit-network")
    try:
        target = save_network(row, overwrite_builtin=args.overwrite_builtin)
    except SimInputError as exc:
        raise SimInputError(f"--save: {exc}") from None
    return {"saved_as": args.save, "saved_to": f"{target} (set ${USER_NETWORKS_ENV} to use another file)",
            "preset": {k: row[k] for k in PRESET_COLUMNS}}
