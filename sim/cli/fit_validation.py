"""``python -m sim fit-validation``: refit the fitted parameters on the calibration cases."""

from __future__ import annotations

import pandas as pd

from sim.cli.args import write_json

NAME = "fit-validation"
HELP = ("refit the link rates and framework launch costs that data/ holds as fitted, on the calibration cases of "
        "data/validation/cases.csv, and report the held-out error with them (writes nothing)")


def add_arguments(parser) -> None:
    parser.add_argument("--format", choices=["json", "table"], default="table")


def run(args, out) -> None:
    from sim.calib.fit_validation import ablation, fit_validation, held_out_report

    fit = fit_validation()
    held = held_out_report(fit["values"])
    switched = ablation()
    if args.format == "json":
        write_json({"parameters": fit["rows"], "held_out": held.to_dict("records"),
                    "ablation": switched.to_dict("records")}, out, default=lambda v: None)
        return
    fmt = {"float_format": lambda v: f"{v:.2f}", "index": False}
    out.write("fitted on the calibration cases (stored = the value data/ holds now):\n")
    out.write(pd.DataFrame(fit["rows"]).to_string(**fmt) + "\n")
    out.write("\nheld-out cases with the fitted values:\n" + held.to_string(**fmt) + "\n")
    out.write("\nthe stored values, each mechanism switched off in turn (on by default where it lowers the "
              "held-out error; the calibration columns for comparison):\n" + switched.to_string(**fmt) + "\n")
