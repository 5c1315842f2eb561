"""``python -m sim run``: simulate one configuration."""

from __future__ import annotations

from sim.cli.args import table, write_json
from sim.cli.stragglers import add_straggler_flags, straggler_given, with_stragglers
from sim.cli.workload import (
    add_compression_flag,
    add_workload_flags,
    refuse_compression_with_stragglers,
    run_one,
)

NAME = "run"
HELP = "simulate one configuration"


def add_arguments(parser) -> None:
    add_workload_flags(parser, many=False)
    add_compression_flag(parser)
    parser.add_argument("--format", choices=["json", "table"], default="table")
    add_straggler_flags(parser)


def run(args, out) -> None:
    refuse_compression_with_stragglers(args, straggler_given(args))
    res = run_one(args)
    metrics = with_stragglers(args, [res.metrics], [args.gpus])[0] if straggler_given(args) else res.metrics
    if args.format == "json":
        write_json(metrics, out)
    else:
        out.write(table(metrics) + "\n")
