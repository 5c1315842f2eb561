"""``python -m sim trace``: write the timeline as Chrome Trace Event JSON."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile

from sim.cli.streams import check_output_path, refuse_same_file
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
    check_output_path(args.output, "-o")  # before the run
    if os.path.isfile(args.model):
        refuse_same_file(args.model, {"-o": args.output})
    res = run_one(args)
    # at least a forward and a backward task per layer and iteration: refused before the timeline is built
    rows = args.iterations * 2 * res.model.num_layers
    rows = len(res.timeline) if rows <= MAX_TRACE_EVENTS else rows
    if rows > MAX_TRACE_EVENTS:
        raise SimInputError(f"--iterations: the trace would hold {rows:,} events or more; at most {MAX_TRACE_EVENTS:,} "
                            "(sim.cli.trace.MAX_TRACE_EVENTS): use fewer iterations, GPUs or partitions")
    trace = chrome_trace(res.timeline, title=f"{res.metrics['model']} {res.metrics['scheduler']} P={res.metrics['gpus']}",
                         metrics=res.metrics)
    write_whole(args.output, trace)
    out.write(f"wrote {len(trace['traceEvents'])} events to {args.output}\n")


def write_whole(output: str, trace: dict) -> None:
    """Write ``trace`` as JSON to ``output``: into a new file beside it, then renamed over it, so that no
    half-written trace is left. A link is written through to its target; a target that is not a regular file
    (a device, a pipe, a directory) is refused rather than replaced."""
    check_output_path(output, "-o")
    target = os.path.realpath(output)
    if os.path.exists(target) and not os.path.isfile(target):
        raise SimInputError(f"-o: {output!r} is not a regular file (a directory, device or pipe); give a file path")
    try:
        # the name's first 200 bytes: mkstemp adds 17 characters, and a name may be 255 bytes long
        # (os.fsencode: a name with bytes that are not UTF-8 holds surrogates, which str.encode refuses)
        stem = os.fsencode(os.path.basename(target))[:200].decode(errors="ignore")
        fd, partial = tempfile.mkstemp(prefix=stem + ".", suffix=".partial", dir=os.path.dirname(target))
    except OSError as exc:
        raise SimInputError(f"-o: cannot write {output!r}: {exc.strerror}") from None
    try:
        umask = os.umask(0)  # mkstemp makes the file private: give it what open() would (or the file's own mode)
        os.umask(umask)
        os.chmod(partial, os.stat(target).st_mode & 0o777 if os.path.exists(target) else 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(trace, fh)
        os.replace(partial, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.remove(partial)
        raise SimInputError(f"-o: cannot write {output!r}: {exc.strerror}") from None
