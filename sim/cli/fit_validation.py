"""``python -m sim fit-validation``: refit the fitted parameters on the calibration cases."""

from __future__ import annotations

import pandas as pd

from sim.cli.args import write_json

NAME = "fit-validation"
HELP = ("refit the link rates and framework launch costs that data/ holds as fitted, on the calibration cases of "
        "data/validation/cases.csv, and the tensor cores' efficiency on those of data/validation/mixed_precision.csv, "
        "and report the held-out error with them (writes nothing)")


def add_arguments(parser) -> None:
    parser.add_argument("--format", choices=["json", "table"], default="table")


def run(args, out) -> None:
    from sim.calib.fit_validation import ablation, fit_validation, held_out_report
    from sim.calib.tensor_cores import fit_rows, fit_tensor_cores, tensor_core_report

    fit = fit_validation()
    held = held_out_report(fit["values"])
    switched = ablation()
    core_rows = fit_rows(fit_tensor_cores())
    speedups = tensor_core_report()
    if args.format == "json":
        write_json({"parameters": fit["rows"], "held_out": held.to_dict("records"),
                    "ablation": switched.to_dict("records"), "tensor_cores": core_rows,
                    "mixed_precision_speedups": speedups.to_dict("records")}, out, default=lambda v: None)
        return
    fmt = {"float_format": lambda v: f"{v:.2f}", "index": False}
    out.write("fitted on the calibration cases (stored = the value data/ holds now):\n")
    out.write(pd.DataFrame(fit["rows"]).to_string(**fmt) + "\n")
    out.write("\nheld-out cases with the fitted values:\n" + held.to_string(**fmt) + "\n")
    out.write("\nthe stored values, each mechanism switched off in turn (on by default where it lowers the "
              "held-out error; the calibration columns for comparison):\n" + switched.to_string(**fmt) + "\n")
    out.write("\ntensor cores: the share of each family's fp32 efficiency its fp16 kernels reach, fitted on the "
              "calibration rows of data/validation/mixed_precision.csv (stored = data/tensor_cores.csv):\n"
              + pd.DataFrame(core_rows).to_string(index=False, float_format=lambda v: f"{v:.3f}") + "\n")
    held_speedups = speedups[(speedups["split"] == "held-out") & (speedups["base_precision"] == "fp32")]
    out.write("one-GPU speedup from fp32 (tf32 where base_precision says so) to mixed precision, measured and simulated "
              "with the stored scales (held-out median |error| from fp32 "
              f"{held_speedups['error_pct'].abs().median():.1f} %; from tf32 the scales cancel, so those rows check "
              "the ratio of the TF32 and FP16 peaks):\n"
              + speedups.to_string(**fmt) + "\n")
