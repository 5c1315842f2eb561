"""``python -m sim fit-network``: alpha and beta from an OSU or nccl-tests all-reduce log."""

from __future__ import annotations

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
    parser.add_argument("--scope", choices=["inter", "intra"], default=None,
                        help="link scope of the saved preset (default inter)")
    parser.add_argument("--overwrite-builtin", action="store_true",
                        help="with --save: let the preset replace the built-in one of the same name")
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
    else:
        given = [flag for flag, value in (("--line-rate-gbps", args.line_rate_gbps), ("--scope", args.scope),
                                          ("--overwrite-builtin", args.overwrite_builtin)) if value]
        if given:
            raise SimInputError(f"{', '.join(given)} only apply with --save NAME")
    if args.format == "json":
        write_json(result, out)
    else:
        out.write(table({k: v for k, v in result.items() if k != "preset"}) + "\n")


def save_preset(args, fit, ranks, file_name: str) -> dict:
    """Save the fit as a network preset in the user's presets file (`sim.catalog.save_network`:
    a checked name, an atomic write under a lock); what was saved."""
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
