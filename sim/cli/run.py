"""``python -m sim run``: simulate one configuration."""

from __future__ import annotations

from sim.cli.args import add_resource_flags, memory_line, table, write_json
from sim.cli.stragglers import add_straggler_flags, straggler_given, with_stragglers
from sim.cli.workload import (
    add_compression_flag,
    add_workload_flags,
    bucket_mb,
    options,
    refuse_compression_with_stragglers,
    run_one,
)
from sim.resources import resource_metrics

NAME = "run"
HELP = "simulate one configuration"


def add_arguments(parser) -> None:
    add_workload_flags(parser, many=False)
    add_compression_flag(parser)
    parser.add_argument("--format", choices=["json", "table"], default="table")
    add_straggler_flags(parser)
    add_resource_flags(parser)


def with_resources(args, res, metrics: dict) -> dict:
    """``metrics`` with the memory, cost and energy figures for the flags (at its iteration time)."""
    return {**metrics, **resource_metrics(
        res.model, gpu=res.cluster.gpu, gpus=res.cluster.gpus, scheduler=res.metrics["scheduler"], groups=res.groups,
        batch_size=args.batch_size, precision=args.precision, iteration_time_s=metrics["iteration_time_s"],
        optimizer=args.optimizer, bucket_mb=bucket_mb(args), options=options(args),
        price_usd_per_hour=args.price_usd_per_hour, power_w=args.power_w,
        compression=getattr(args, "compression", None))}


def run(args, out) -> None:
    refuse_compression_with_stragglers(args, straggler_given(args))
    res = run_one(args)
    metrics = with_stragglers(args, [res.metrics], [args.gpus])[0] if straggler_given(args) else res.metrics
    metrics = with_resources(args, res, metrics)
    if args.format == "json":
        write_json(metrics, out)
    else:
        out.write(table(metrics) + "\n" + memory_line(metrics) + "\n")
