"""Command line: ``python -m sim run|sweep|trace|list|...``.

Each subcommand is one module of this package exposing ``NAME``, ``HELP``,
``add_arguments(parser)`` and ``run(args, out)``, listed in `COMMANDS`.
The subcommands only parse, call the library and print.

Bad input (an unknown name, a malformed CSV, an absurd value, a flag that
makes no sense) prints one line ``error: ...`` to stderr and exits with 2. A
flag that is valid but does nothing for the run (`sim.errors.SimInputWarning`)
prints one line ``warning: ...`` to stderr, and the run goes on.
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
from sim.errors import SimInputError, SimInputWarning

__all__ = ["COMMANDS", "EXIT_BAD_INPUT", "build_parser", "main"]

EXIT_BAD_INPUT = 2

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
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        with warnings.catch_warnings():  # (restores the filters and `warnings.showwarning` on leaving)
            warnings.simplefilter("always", SimInputWarning)
            warnings.showwarning = warning_writer(err, warnings.showwarning)
            args = build_parser().parse_args(argv)
            check_environment()
            next(c for c in COMMANDS if args.command == c.NAME).run(args, out)
    except SimInputError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # the reader left (``... | head``): stop quietly
        quiet_stdout(out)
        return 0
    try:
        out.flush()
    except BrokenPipeError:
        quiet_stdout(out)
    return 0


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
            err.write(f"warning: {message}\n")

    return show


def quiet_stdout(out) -> None:
    """Point stdout at /dev/null so that the interpreter's last flush to a closed pipe says nothing."""
    if out is sys.stdout:
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
