"""``python -m sim import-trace TRACE.json[.gz]``: a PyTorch profiler trace in.

Prints the measured report (iteration time, communication total, hidden and
exposed, overlap %, as medians over the profiled steps, and per step);
``-o`` writes the per-DDP-bucket layer CSV with ``comm_ms`` that
``run --model`` reads (trace-driven mode); ``--report`` writes the report as
JSON. The work is in `sim.calib.kineto`.
"""

from __future__ import annotations

import argparse
import json
import shlex

import pandas as pd

from sim.calib.kineto import REPORT_KEYS, layer_table, measured_report, read_trace
from sim.cli.streams import check_output_path, refuse_same_file, write_file

NAME = "import-trace"
HELP = "read a PyTorch profiler (Kineto) trace: measured iteration and overlap, layer CSV with comm_ms"
STEP_COLUMNS = ("step", "iteration_time_s", "comm_s", "comm_hidden_s", "comm_exposed_s", "overlap_pct",
                "compute_s", "collectives")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", metavar="TRACE", help="Kineto trace of one rank (.json or .json.gz)")
    parser.add_argument("-o", "--output", default=None, metavar="LAYERS.csv",
                        help="write one layer row per DDP bucket (name,params,fwd_ms,bwd_ms,comm_ms)")
    parser.add_argument("--report", default=None, metavar="REPORT.json", help="write the measured report as JSON")
    parser.add_argument("--format", choices=["json", "table"], default="table")


def _report_table(report: dict) -> str:
    width = max(len(k) for k in REPORT_KEYS)
    lines = [f"{report['trace']['source']}: {report['steps_profiled']} steps, "
             f"{report['trace'].get('world_size')} ranks, {report['trace'].get('gpu')}, "
             f"NCCL {report['trace'].get('nccl_version')}; medians over steps:"]
    for key in REPORT_KEYS:
        value = report[key]
        lines.append(f"  {key.ljust(width)}  {'-' if value is None else f'{value:.6g}'}")
    steps = pd.DataFrame(report["steps"])[list(STEP_COLUMNS)]
    lines.append(steps.to_string(index=False, float_format=lambda v: f"{v:.6g}"))
    return "\n".join(lines)


def simulate_command(layers_csv: str, report: dict) -> str:
    """The ``run`` command line that simulates the trace's run from its layer CSV: the trace's ranks (with
    the default one GPU, nothing is all-reduced), DDP's scheduler and the update time measured."""
    ranks = report["trace"].get("world_size")
    gpus = f" --gpus {ranks}" if isinstance(ranks, int) and ranks > 1 else ""
    return (f"run --model {shlex.quote(layers_csv)}{gpus} --scheduler ddp "
            f"--update-ms {report['layer_csv']['update_ms']:.3f}")


def run(args: argparse.Namespace, out) -> None:
    for flag, path in (("-o", args.output), ("--report", args.report)):
        if path is not None:
            check_output_path(path, flag)
    refuse_same_file(args.trace, {"-o": args.output, "--report": args.report})
    trace = read_trace(args.trace)
    report = measured_report(trace)
    if args.output is not None:
        table = layer_table(trace)
        write_file(args.output, "-o", lambda fh: table.to_csv(fh, index=False))
        update_ms = ((report["optimizer_gpu_s"] or 0.0) + (report["backward_tail_s"] or 0.0)) * 1e3
        report["layer_csv"] = {"path": args.output, "rows": len(table), "params": int(table["params"].sum()),
                               "update_ms": update_ms}
    if args.report is not None:
        write_file(args.report, "--report", lambda fh: (json.dump(report, fh, indent=2), fh.write("\n")))
    if args.format == "json":
        json.dump(report, out, indent=2)
        out.write("\n")
        return
    out.write(_report_table(report) + "\n")
    if args.output is not None:
        csv = report["layer_csv"]
        out.write(f"wrote {csv['rows']} DDP buckets ({csv['params']:,} params) to {args.output}; "
                  f"simulate with: {simulate_command(args.output, report)}\n")
    if args.report is not None:
        out.write(f"wrote the report to {args.report}\n")
