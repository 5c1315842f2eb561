"""Reading a file the user gives: a CSV table (a layer table, a presets file) checked for its size and shape before
pandas reads it, every error one line naming the file, line or column.

A comment line starts with ``#`` (such as ``# update_ms: 2.8`` in a layer CSV); a ``#`` anywhere else is text.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator
from pathlib import Path

from sim.errors import SimInputError

__all__ = ["MAX_COLUMNS", "MAX_CSV_BYTES", "MAX_CSV_LINES", "MAX_LAYERS", "MAX_LINE_COMMAS", "check_csv_shape", "csv_rows",
           "check_layer_names", "read_csv_table", "read_text_file", "stat_path", "table_lines"]

#: Layers per model; raise it here (each layer costs tasks, memory and time in every run).
MAX_LAYERS = 100_000
#: Columns of a CSV table (a layer table reads 7; more is not a table the user meant to give), and commas on
#: one line, quoted ones too (a bound on what one line may cost before it is split into fields).
MAX_COLUMNS = 1_000
MAX_LINE_COMMAS = 100_000
#: Bytes of a CSV file read at most: 335 bytes for each of `MAX_LAYERS` layers (a layer is about 100).
MAX_CSV_BYTES = 32 * 2**20
#: Lines of a CSV table: a header and `MAX_LAYERS` rows, with as many comment and blank lines again.
MAX_CSV_LINES = 2 * MAX_LAYERS + 1


def stat_path(path: Path, what: str) -> os.stat_result | None:
    """The status of ``path``, None when nothing is there; a path the system refuses (a part of over 255 bytes,
    a NUL, a loop of links) is a `SimInputError` naming ``what`` and the path."""
    try:
        return path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError) as exc:
        raise SimInputError(f"{what} {str(path)[:80]!r}: {getattr(exc, 'strerror', None) or exc}") from None


def read_text_file(path: Path, where: str, max_bytes: int = MAX_CSV_BYTES, kind: str = "CSV") -> str:
    """The text of the file at ``path`` (a byte-order mark dropped), refused unread beyond ``max_bytes``; errors
    name ``where`` and call the file a ``kind``."""
    try:
        with path.open("rb") as handle:
            data = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise SimInputError(f"{where}: file not found") from None
    except OSError as exc:
        raise SimInputError(f"{where}: not a readable {kind} (cannot read: {exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise SimInputError(f"{where}: more than {max_bytes:,} bytes, the most this file may have")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SimInputError(f"{where}: not a UTF-8 text file (byte {exc.start})") from None


def table_lines(text: str, where: str, *, comments: bool = True) -> list[tuple[int, str]]:
    """``(line number, line)`` of every line of ``text`` that is not blank (nor a comment, with ``comments``),
    counted as the CSV reader counts them (``\\r\\n``, ``\\r`` or ``\\n`` ends a line); at most `MAX_CSV_LINES`."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    count = text.count("\n") + (not text.endswith("\n"))
    if count > MAX_CSV_LINES:
        raise SimInputError(f"{where}: {count:,} lines; at most {MAX_CSV_LINES:,} are read (sim.csv_table."
                            f"MAX_CSV_LINES: a header, up to {MAX_LAYERS:,} layers and as many comment lines)")
    return [(i, line) for i, line in enumerate(text.split("\n"), 1)
            if line.strip() and not (comments and line.lstrip().startswith("#"))]


def csv_rows(lines: list[tuple[int, str]], where: str) -> Iterator[tuple[int, list[str]]]:
    """``(line number, fields)`` of the header (stripped) and then each row of ``lines`` (`table_lines`), one at a
    time: a line of `MAX_COLUMNS` commas or more, a duplicate column, a quote left open at the end of its line and a
    row with more fields than the header are refused naming the line or column."""
    def checked():
        for lineno, line in lines:  # a cheap bound before the csv module splits a line (commas in quotes count)
            if line.count(",") >= MAX_LINE_COMMAS:
                raise SimInputError(f"{where} line {lineno}: {line.count(','):,} commas; a line of a CSV table here "
                                    f"has fewer than {MAX_LINE_COMMAS:,} (sim.csv_table.MAX_LINE_COMMAS)")
            yield line
        yield ""  # a quote left open on the last line runs on into this, as into any next line

    reader = csv.reader(checked(), skipinitialspace=True)
    header: list[str] = []
    for k, (lineno, _) in enumerate(lines):
        try:
            fields = next(reader)
        except csv.Error as exc:  # e.g. a field over the csv module's size limit
            raise SimInputError(f"{where}: not a readable CSV (line {lineno}: {exc})") from None
        if reader.line_num != k + 1:  # a quoted field ran on into the next lines
            raise SimInputError(f"{where} line {lineno}: a quote is opened and never closed on its line, not a "
                                "readable CSV (a field in quotes must end on the line it starts)")
        if k == 0:
            header = fields = [c.strip() for c in fields]
            if len(header) > MAX_COLUMNS:
                raise SimInputError(f"{where}: {len(header):,} columns; a CSV table here has at most {MAX_COLUMNS:,} "
                                    "(sim.csv_table.MAX_COLUMNS)")
            first: dict[str, int] = {}
            for j, column in enumerate(header):
                if column in first:
                    raise SimInputError(f"{where}: duplicate column {column!r} (columns {first[column] + 1} and {j + 1})")
                first[column] = j
        elif len(fields) > len(header):
            raise SimInputError(f"{where} line {lineno}: {len(fields)} fields but the header has {len(header)} "
                                f"({', '.join(header)})")
        yield lineno, fields


def check_csv_shape(text: str, where: str) -> list[tuple[int, str]]:
    """The table's lines (`table_lines`), its shape checked (`csv_rows`) and at most `MAX_LAYERS` rows."""
    lines = table_lines(text, where)
    if len(lines) - 1 > MAX_LAYERS:
        raise SimInputError(f"{where} has {len(lines) - 1} layers; at most {MAX_LAYERS} are allowed "
                            "(sim.model.MAX_LAYERS)")
    for _ in csv_rows(lines, where):
        pass
    return lines


def read_csv_table(text_or_path: str | Path, where: str):
    """The table in ``text_or_path`` (a path, or the CSV text), comment lines (``#`` first) skipped."""
    import pandas as pd

    text = read_text_file(text_or_path, where) if isinstance(text_or_path, Path) else text_or_path
    lines = check_csv_shape(text, where)
    try:
        return pd.read_csv(io.StringIO("\n".join(line for _, line in lines)), skipinitialspace=True)
    except pd.errors.EmptyDataError:
        raise SimInputError(f"{where}: empty file") from None
    except pd.errors.ParserError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SimInputError(f"{where}: not a readable CSV ({first})") from None


def check_layer_names(values, where: str) -> list[str]:
    """The layer names in ``values`` (a layer table's ``name`` column), stripped; an empty or repeated name is
    refused naming its row (the header is line 1)."""
    names = [str(v).strip() for v in values]
    seen: dict[str, int] = {}
    for row, layer in enumerate(names, 2):
        if not layer or layer.lower() == "nan":
            raise SimInputError(f"{where} row {row}, column 'name': empty layer name")
        if layer in seen:
            raise SimInputError(f"{where} row {row}, column 'name': duplicate layer name {layer!r} (first at row {seen[layer]})")
        seen[layer] = row
    return names
