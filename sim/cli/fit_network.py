"""``python -m sim fit-network``: alpha and beta from an OSU or nccl-tests all-reduce log."""

from __future__ import annotations

import csv
from pathlib import Path

from sim.cli.args import positive_float, positive_int, read_text, table, write_json
from sim.errors import SimInputError

NAME = "fit-network"
HELP = "fit alpha and beta to an OSU or nccl-tests all-reduce log"
PRESET_COLUMNS = ["name", "scope", "line_rate_gbps", "effective_gbps", "alpha_us", "source", "note"]


def add_arguments(parser) -> None:
    parser.add_argument("file", help="osu_allreduce or all_reduce_perf output")
    parser.add_argument("--gpus", type=positive_int, default=None, help="ranks in the all-reduce (read from the log if it says)")
    parser.add_argument("--min-bytes", type=positive_int, default=None, help="ignore messages smaller than this")
    parser.add_argument("--weighting", choices=["relative", "absolute"], default="relative")
    parser.add_argument("--save", metavar="NAME", default=None, help="save as a network preset that --network accepts")
    parser.add_argument("--line-rate-gbps", type=positive_float, default=None, help="the link's nominal rate (with --save)")
    parser.add_argument("--scope", choices=["inter", "intra"], default="inter", help="link scope of the saved preset")
    parser.add_argument("--format", choices=["json", "table"], default="table")


def run(args, out) -> None:
    from sim.fit import fit_alpha_beta, parse_allreduce_log

    path = Path(args.file)
    points = parse_allreduce_log(read_text(path))
    fit = fit_alpha_beta(points["bytes"], points["time_s"], min_bytes=args.min_bytes, weighting=args.weighting)
    ranks = args.gpus or points.attrs.get("ranks")
    result = {
        "file": path.name, "format": points.attrs.get("format"), "ranks": ranks,
        "alpha_s": fit.alpha_s, "beta_s_per_byte": fit.beta_s_per_byte, "r2": fit.r2,
        "n_points": fit.n_points, "min_bytes": fit.min_bytes, "max_bytes": fit.max_bytes, "weighting": fit.weighting,
    }
    if args.save:
        result.update(save_preset(args, fit, ranks, path.name))
    if args.format == "json":
        write_json(result, out)
    else:
        out.write(table({k: v for k, v in result.items() if k != "preset"}) + "\n")


def save_preset(args, fit, ranks, file_name: str) -> dict:
    """Append the fit as a network preset to the user's networks file; what was saved."""
    from sim.catalog import USER_NETWORKS_ENV, Network, networks, user_networks_path
    from sim.fit import fit_to_network

    if args.line_rate_gbps is None:
        raise SimInputError("--save needs --line-rate-gbps, the link's nominal rate")
    if not ranks:
        raise SimInputError("--save needs --gpus: the log does not say how many ranks ran")
    row = fit_to_network(fit, args.save, int(ranks), scope=args.scope, line_rate_gbps=args.line_rate_gbps,
                         source=f"fit of {file_name} by python -m sim fit-network")
    Network.from_row(row)  # validate before writing
    target = user_networks_path()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.stat().st_size == 0:
            with target.open("w", newline="", encoding="utf-8") as fh:
                csv.DictWriter(fh, fieldnames=PRESET_COLUMNS).writeheader()
        if args.save in networks():
            raise SimInputError(f"--save: a network called {args.save!r} exists already")
        with target.open("a", newline="", encoding="utf-8") as fh:
            csv.DictWriter(fh, fieldnames=PRESET_COLUMNS).writerow({k: row[k] for k in PRESET_COLUMNS})
    except OSError as exc:
        raise SimInputError(f"--save: cannot write {str(target)!r}: {exc.strerror}") from None
    return {"saved_as": args.save, "saved_to": f"{target} (set ${USER_NETWORKS_ENV} to use another file)",
            "preset": row}
