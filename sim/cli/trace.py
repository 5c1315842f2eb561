"""``python -m sim trace``: write the timeline as Chrome Trace Event JSON."""

from __future__ import annotations

import json
import os

from sim.cli.workload import add_compression_flag, add_workload_flags, run_one
from sim.errors import SimInputError
from sim.trace import chrome_trace

NAME = "trace"
HELP = "write the timeline as Chrome Trace Event JSON"
#: Timeline rows a trace takes at most (each is an event of about 240 bytes of JSON, and a dict while
#: it is built): a bigger trace is refused before it is written (Chrome's viewer slows past about a million).
MAX_TRACE_EVENTS = 1_000_000


def add_arguments(parser) -> None:
    add_workload_flags(parser, many=False)
    add_compression_flag(parser)
    parser.add_argument("-o", "--output", required=True, help="output file (.json)")


def run(args, out) -> None:
    res = run_one(args)
    # at least a forward and a backward task per layer and iteration: refused before the timeline is built
    rows = args.iterations * 2 * res.model.num_layers
    rows = len(res.timeline) if rows <= MAX_TRACE_EVENTS else rows
    if rows > MAX_TRACE_EVENTS:
        raise SimInputError(f"--iterations: the trace would hold {rows:,} events or more; at most {MAX_TRACE_EVENTS:,} "
                            "(sim.cli.trace.MAX_TRACE_EVENTS): use fewer iterations, GPUs or partitions")
    trace = chrome_trace(res.timeline, title=f"{res.metrics['model']} {res.metrics['scheduler']} P={res.metrics['gpus']}",
                         metrics=res.metrics)
    partial = f"{args.output}.partial"  # written whole, then renamed: no half-written trace is left
    try:
        with open(partial, "w", encoding="utf-8") as fh:
            json.dump(trace, fh)
        os.replace(partial, args.output)
    except OSError as exc:
        if os.path.exists(partial):
            os.remove(partial)
        raise SimInputError(f"-o: cannot write {args.output!r}: {exc.strerror}") from None
    out.write(f"wrote {len(trace['traceEvents'])} events to {args.output}\n")
