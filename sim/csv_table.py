"""Reading a CSV table the user gives (a layer table): its shape checked before pandas reads it, every error
one line naming the file, line or column."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from sim.errors import SimInputError

__all__ = ["check_csv_shape", "read_csv_table"]


def check_csv_shape(text: str, where: str) -> None:
    """Refuse duplicate column names and a row with more fields than the header
    (pandas would silently shift it), naming the column or line."""
    lines = [(i, line.split("#", 1)[0]) for i, line in enumerate(text.splitlines(), 1)]
    lines = [(i, line) for i, line in lines if line.strip()]
    if not lines:
        return
    header_line, *rows = csv.reader([line for _, line in lines], skipinitialspace=True)
    header = [c.strip() for c in header_line]
    for j, column in enumerate(header):
        if column in header[:j]:
            raise SimInputError(f"{where}: duplicate column {column!r} (columns {header.index(column) + 1} and {j + 1})")
    if len(rows) != len(lines) - 1:  # a quoted field ran on into the next lines
        raise SimInputError(f"{where} line {_open_quote_line(lines)}: a quote is opened and never closed on its line "
                            "(a field in quotes must end on the line it starts)")
    for (lineno, _), row in zip(lines[1:], rows, strict=True):
        if len(row) > len(header):
            raise SimInputError(f"{where} line {lineno}: {len(row)} fields but the header has {len(header)} "
                                f"({', '.join(header)})")


def _open_quote_line(lines: list[tuple[int, str]]) -> int:
    """The number of the first of ``lines`` (number, text) whose quote is left open at its end."""
    for lineno, line in lines:
        try:
            next(csv.reader([line], skipinitialspace=True, strict=True))
        except csv.Error as exc:
            if "unexpected end of data" in str(exc):
                return lineno
    return lines[0][0]


def read_csv_table(text_or_path: str | Path, where: str):
    """The table in ``text_or_path`` (a path, or the CSV text), comment lines (``#``) skipped."""
    import pandas as pd

    try:
        text = text_or_path.read_text(encoding="utf-8") if isinstance(text_or_path, Path) else text_or_path
        check_csv_shape(text, where)
    except (UnicodeDecodeError, csv.Error, OSError) as exc:
        raise SimInputError(f"{where}: not a readable CSV ({str(exc).splitlines()[0] if str(exc) else exc!r})") from None
    try:
        if isinstance(text_or_path, Path):
            return pd.read_csv(text_or_path, comment="#", skipinitialspace=True)
        return pd.read_csv(io.StringIO(text_or_path), comment="#", skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise SimInputError(f"{where}: empty file") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SimInputError(f"{where}: not a readable CSV ({first})") from None
