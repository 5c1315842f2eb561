"""The command line's output streams: what a subcommand writes to, and the files it writes.

`Output` wraps stdout (or the stream `sim.cli.main` is given) so that text the
terminal's encoding cannot show (a model file named ``modèle_α.csv`` under
``PYTHONIOENCODING=ascii``, a file name with bytes that are not UTF-8) is
written with backslash escapes instead of raising `UnicodeEncodeError`, and a
failed write (a full disk under ``> out.csv``) is an `OutputError`, which
`sim.cli.main` reports in one line. A closed stream (``>&-``) is `os.devnull`.
"""

from __future__ import annotations

import os

from sim.errors import SimInputError

__all__ = ["Output", "OutputError", "check_output_path", "open_stream", "refuse_same_file", "write_file"]


class OutputError(Exception):
    """Writing the output failed (not a broken pipe: the reader leaving is no error)."""


def open_stream(stream):
    """``stream``, or a sink to `os.devnull` where the process has none (``python -m sim ... >&-``)."""
    if stream is not None:
        return stream
    return open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process


class Output:
    """A text stream that escapes what its encoding cannot write and reports a failed write as `OutputError`."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            try:
                return self.stream.write(text)
            except UnicodeEncodeError:
                encoding = getattr(self.stream, "encoding", None) or "utf-8"
                return self.stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(exc.strerror or str(exc)) from None

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputError(exc.strerror or str(exc)) from None

    def __getattr__(self, name):
        return getattr(self.stream, name)


def check_output_path(path: str, flag: str) -> None:
    """Refuse an output path that names no file: empty, or ``-`` (which here would make a file called ``-``,
    not write to stdout: these outputs go to files, and stdout gets the summary)."""
    if path.strip() in ("", "-"):
        raise SimInputError(f"{flag}: give a file path, got {path!r} (this output is written to a file; "
                            "stdout gets the summary)")


def write_file(path: str, flag: str, write) -> None:
    """``write(fh)`` into the text file ``path``; a file that cannot be written is bad input naming ``flag``."""
    check_output_path(path, flag)
    try:
        with open(path, "w", encoding="utf-8", newline="") as fh:
            write(fh)
    except OSError as exc:
        raise SimInputError(f"{flag}: cannot write {path!r}: {exc.strerror or exc}") from None


def refuse_same_file(source: str, outputs: dict[str, str | None]) -> None:
    """Refuse an output flag naming the input file ``source`` (it would be overwritten after being read)
    or the same file as another output flag; ``outputs`` maps each flag to its path (None: not given)."""
    seen: dict[str, str] = {os.path.realpath(source): f"the input file {source!r}"}
    for flag, path in outputs.items():
        if not path:
            continue
        key = os.path.realpath(path)
        if key in seen:
            raise SimInputError(f"{flag}: {path!r} is {seen[key]}, which it would overwrite: give another path")
        seen[key] = f"the file of {flag} ({path!r})"
