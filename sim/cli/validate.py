"""``python -m sim validate``: every published measurement in data/validation against the simulator."""

from __future__ import annotations

from pathlib import Path

from sim.cli.args import table, write_json
from sim.errors import SimInputError

NAME = "validate"
HELP = "simulate every published measurement in data/validation and report the error"
COLUMNS = ["case", "source", "measured", "simulated", "error_pct", "status"]


def add_arguments(parser) -> None:
    parser.add_argument("--format", choices=["json", "table", "csv"], default="table")
    parser.add_argument("--reference", default=None, help="folder of the reference traces (default data/reference, bundled)")
    parser.add_argument("--source", default=None, help="only the cases of this source")


def run(args, out) -> None:
    from sim.validation import coarse_versus_fine, load_cases, run_validation, summarize

    if args.reference is not None and not Path(args.reference).is_dir():
        raise SimInputError(f"--reference: {args.reference!r} is not a folder")
    cases = load_cases()
    if args.source is not None:
        if args.source not in set(cases["source"]):
            raise SimInputError(f"--source: unknown source {args.source!r}; valid: {', '.join(sorted(set(cases['source'])))}")
        cases = cases.loc[cases["source"] == args.source]
    results = run_validation(cases, reference_dir=args.reference)
    summary = summarize(results)
    coarse = coarse_versus_fine(results) if (results["status"] == "ok").sum() >= 2 else {}
    if args.format == "json":
        payload = {"cases": results[COLUMNS + ["citation"]].to_dict("records"), "summary": summary.to_dict("records"),
                   "coarse_vs_fine": coarse}
        write_json(payload, out, default=lambda v: None)
    elif args.format == "csv":
        results[COLUMNS + ["citation"]].to_csv(out, index=False)
    else:
        out.write(results[COLUMNS].to_string(index=False, float_format=lambda v: f"{v:.2f}") + "\n\n")
        out.write(summary.to_string(index=False, float_format=lambda v: f"{v:.2f}") + "\n")
        if coarse:
            out.write("\ncoarse-grained predictor (Li et al. 2022) beside this DAG model:\n" + table(coarse) + "\n")
