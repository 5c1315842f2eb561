"""``python -m sim validate``: every published measurement in data/validation against the simulator."""

from __future__ import annotations

from pathlib import Path

from sim.cli.args import table, write_json
from sim.errors import SimInputError

NAME = "validate"
HELP = "simulate every published measurement in data/validation and report the error"
COLUMNS = ["case", "source", "method", "network", "split", "measured", "simulated", "error_pct", "status"]
GROUPS = ("source", "method", "network")


def add_arguments(parser) -> None:
    parser.add_argument("--format", choices=["json", "table", "csv"], default="table")
    parser.add_argument("--reference", default=None, help="folder of the reference traces (default data/reference, bundled)")
    parser.add_argument("--source", default=None, help="only the cases of this source")
    parser.add_argument("--split", choices=["all", "calibration", "held-out"], default="all",
                        help="only the cases of this part of the fit (summaries always report the held-out cases "
                             "and each part apart)")


def run(args, out) -> None:
    from sim.validation import coarse_versus_fine, load_cases, run_validation, summarize

    if args.reference is not None and (not args.reference.strip() or not Path(args.reference).is_dir()):
        raise SimInputError(f"--reference: {args.reference!r} is not a folder")
    cases = load_cases()
    if args.source is not None:
        if args.source not in set(cases["source"]):
            raise SimInputError(f"--source: unknown source {args.source!r}; valid: {', '.join(sorted(set(cases['source'])))}")
        cases = cases.loc[cases["source"] == args.source]
    if args.split != "all":
        cases = cases.loc[cases["split"] == args.split]
    results = run_validation(cases, reference_dir=args.reference)
    skipped = results.loc[results["status"] != "ok", "status"]
    if args.reference is not None and len(skipped):
        raise SimInputError(f"--reference: {args.reference!r} lacks the traces {len(skipped)} cases read "
                            f"({skipped.iloc[0].removeprefix('skipped: ')})")
    summaries = {by: summarize(results, by) for by in (*GROUPS, "split")}
    ok = results.loc[results["status"] == "ok", "split"]
    coarse = coarse_versus_fine(results) if {"calibration", "held-out"} <= set(ok) else {}  # (it fits on one, checks on the other)
    if args.format == "json":
        payload = {"cases": results[COLUMNS + ["citation"]].to_dict("records"),
                   "summary": summaries["source"].to_dict("records"),
                   "summary_by": {by: s.rename(columns={"source": by}).to_dict("records") for by, s in summaries.items()},
                   "coarse_vs_fine": coarse}
        write_json(payload, out, default=lambda v: None)
    elif args.format == "csv":
        results[COLUMNS + ["citation"]].to_csv(out, index=False)
    else:
        fmt = {"float_format": lambda v: f"{v:.2f}", "index": False}
        out.write(results[COLUMNS].to_string(**fmt) + "\n")
        out.write("\nerror_pct = (simulated - measured) / measured x 100: positive = predicted too fast; "
                  "bias_pct = median signed error.\n")
        for by, summary in summaries.items():
            held = "" if by == "split" else " (held-out cases)"
            out.write(f"\nby {by}{held}:\n" + summary.rename(columns={"source": by}).to_string(**fmt) + "\n")
        if coarse:
            out.write("\ncoarse-grained predictor (Li et al. 2022) beside this DAG model:\n" + table(coarse) + "\n")
