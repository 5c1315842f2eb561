"""Command line: ``python -m sim run|sweep|trace|list|...``.

Each subcommand is one module of this package exposing ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args, out)``, listed in `COMMANDS`.
The subcommands only parse, call the library and print.

Bad input (an unknown name, a malformed CSV, an absurd value, a flag that
makes no sense) prints one line ``error: ...`` to stderr and exits with 2. A
flag that is valid but does nothing for the run (`sim.errors.SimInputWarning`)
prints one line ``warning: ...`` to stderr, and the run goes on. An output that
cannot be written (a full disk under ``> out.csv``) is one line ``error: ...``
and exit code 2 too; Ctrl-C is one line ``interrupted`` and exit code 130; a
reader that leaves (``| head``) ends the run quietly with 0 (`sim.cli.streams`).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings

from sim.cli import (
    algorithms,
    fit_network,
    fit_validation,
    gap,
    import_bcaffe,
    import_trace,
    listing,
    run,
    sweep,
    trace,
    tune,
    validate,
)
from sim.cli.streams import Output, OutputError, open_stream
from sim.errors import SimInputError, SimInputWarning

__all__ = ["COMMANDS", "EXIT_BAD_INPUT", "EXIT_INTERRUPTED", "build_parser", "main"]

EXIT_BAD_INPUT = 2
#: The exit code after Ctrl-C (128 + SIGINT, as a shell reports a command it interrupted).
EXIT_INTERRUPTED = 130

#: The subcommands, in the order ``--help`` lists them.
COMMANDS = (run, sweep, algorithms, trace, fit_network, import_bcaffe, import_trace, validate, fit_validation, gap, listing, tune)


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise SimInputError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="python -m sim", description="Simulate distributed synchronous SGD iterations.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        command.add_arguments(sub.add_parser(command.NAME, help=command.HELP))
    return parser


def main(argv: list[str] | None = None, out=None, err=None) -> int:
    stdout = open_stream(out or sys.stdout)
    err = Output(open_stream(err or sys.stderr))
    out = Output(stdout)
    try:
        with warnings.catch_warnings():  # (restores the filters and `warnings.showwarning` on leaving)
            warnings.simplefilter("always", SimInputWarning)
            warnings.showwarning = warning_writer(err, warnings.showwarning)
            args = build_parser().parse_args(argv)
            check_environment()
            next(c for c in COMMANDS if args.command == c.NAME).run(args, out)
        out.flush()
    except SimInputError as exc:
        return report(err, f"error: {exc}", EXIT_BAD_INPUT)
    except OutputError as exc:  # a full disk under ``> out.csv``: one line, and no second try at exit
        quiet_stdout(stdout)
        return report(err, f"error: cannot write the output: {exc}", EXIT_BAD_INPUT)
    except KeyboardInterrupt:  # Ctrl-C: one line, no traceback
        return report(err, "interrupted", EXIT_INTERRUPTED)
    except BrokenPipeError:  # the reader left (``... | head``): stop quietly
        quiet_stdout(stdout)
    return 0


def report(err, line: str, code: int) -> int:
    """Write ``line`` on ``err`` (if it can) and return ``code``."""
    with contextlib.suppress(OSError, OutputError):
        err.write(line + "\n")
    return code


def check_environment() -> None:
    """Refuse a bad ``$SSGD_MAX_TASKS`` before any command runs (`sim.core.run` keeps its default meanwhile)."""
    from sim.core.run import MAX_TASKS_ENV_ERROR

    if MAX_TASKS_ENV_ERROR:
        raise SimInputError(MAX_TASKS_ENV_ERROR)


def warning_writer(err, other):
    """A `warnings.showwarning` that writes each `SimInputWarning` once as a ``warning:`` line on
    ``err`` (as soon as the check that raised it ran, before the run's output); ``other`` shows the rest."""
    seen: set = set()

    def show(message, category, *rest, **kwargs):
        if not issubclass(category, SimInputWarning):
            other(message, category, *rest, **kwargs)
        elif str(message) not in seen:
            seen.add(str(message))
            with contextlib.suppress(OutputError):  # a stderr that cannot be written does not stop the run
                err.write(f"warning: {message}\n")

    return show


def quiet_stdout(out) -> None:
    """Point stdout at /dev/null so that the interpreter's last flush to a closed pipe says nothing."""
    if out is sys.stdout:
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
