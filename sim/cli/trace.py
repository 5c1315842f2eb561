"""``python -m sim trace``: write the timeline as Chrome Trace Event JSON."""

from __future__ import annotations

import json

from sim.cli.workload import add_compression_flag, add_workload_flags, run_one
from sim.errors import SimInputError
from sim.trace import chrome_trace

NAME = "trace"
HELP = "write the timeline as Chrome Trace Event JSON"


def add_arguments(parser) -> None:
    add_workload_flags(parser, many=False)
    add_compression_flag(parser)
    parser.add_argument("-o", "--output", required=True, help="output file (.json)")


def run(args, out) -> None:
    res = run_one(args)
    trace = chrome_trace(res.timeline, title=f"{res.metrics['model']} {res.metrics['scheduler']} P={res.metrics['gpus']}",
                         metrics=res.metrics)
    try:
        with open(args.output, "w", encoding="utf-8") as fh:
            json.dump(trace, fh)
    except OSError as exc:
        raise SimInputError(f"-o: cannot write {args.output!r}: {exc.strerror}") from None
    out.write(f"wrote {len(trace['traceEvents'])} events to {args.output}\n")
