"""Bounded reading of large JSON traces (Chrome Trace Event format).

`read_text` reads a file or bytes, plain or gzip, refusing more than
``max_bytes`` on disk or after decompression (checked while decompressing,
1 MiB at a time, so a small gzip bomb stops at the limit).

`parse_trace_object` decodes the top-level JSON object key by key and its
``traceEvents`` array event by event, keeping only what a ``keep`` function
returns for each event, so that memory holds the text and the kept events
rather than every decoded event. Errors are `SimInputError` with one line:
truncated text, invalid JSON (with the character position), not an object,
no ``traceEvents``.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from collections.abc import Callable
from pathlib import Path

from sim.errors import SimInputError

__all__ = ["CHUNK_BYTES", "parse_trace_object", "read_text"]

#: Decompression step: the size limit is checked after each chunk.
CHUNK_BYTES = 1 << 20
_WS = re.compile(r"[ \t\n\r]*")


def _gunzip(stream, max_bytes: int, where: str) -> bytes:
    data = bytearray()
    try:
        with gzip.GzipFile(fileobj=stream) as gz:
            while chunk := gz.read(CHUNK_BYTES):
                data += chunk
                if len(data) > max_bytes:
                    raise SimInputError(f"{where}: decompresses to over {max_bytes / 1e6:g} MB, the trace limit")
    except EOFError:
        raise SimInputError(f"{where}: the gzip stream ends early (truncated file)") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise SimInputError(f"{where}: not a readable gzip file ({exc})") from None
    return bytes(data)


def read_text(source: str | Path | bytes, max_bytes: int, where: str) -> str:
    """The UTF-8 text of a path or bytes, gunzipped if it starts with the gzip magic."""
    if isinstance(source, (bytes, bytearray)):
        size = len(source)
    else:
        path = Path(source)
        if not path.is_file():
            raise SimInputError(f"trace file {str(path)!r} does not exist")
        size = path.stat().st_size
    if size > max_bytes:
        raise SimInputError(f"{where}: {size / 1e6:.1f} MB is over the {max_bytes / 1e6:g} MB trace limit")
    if isinstance(source, (bytes, bytearray)):
        stream = io.BytesIO(bytes(source))
    else:
        stream = open(Path(source), "rb")  # noqa: SIM115 (closed by the with below)
    with stream:
        gzipped = stream.read(2) == b"\x1f\x8b"
        stream.seek(0)
        raw = _gunzip(stream, max_bytes, where) if gzipped else stream.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SimInputError(f"{where}: not a JSON trace (not UTF-8 text)") from None


def _error(text: str, pos: int, where: str, msg: str = "") -> SimInputError:
    if pos >= len(text.rstrip()) or msg.startswith("Unterminated"):
        return SimInputError(f"{where}: the JSON ends early (truncated trace)")
    return SimInputError(f"{where}: not valid JSON at character {pos}{f' ({msg})' if msg else ''}")


def _value(decoder: json.JSONDecoder, text: str, pos: int, where: str):
    try:
        return decoder.raw_decode(text, _WS.match(text, pos).end())
    except json.JSONDecodeError as exc:
        raise _error(text, exc.pos, where, exc.msg) from None
    except (ValueError, RecursionError) as exc:  # an integer of over 4,300 digits; arrays nested thousands deep
        raise SimInputError(f"{where}: not a usable JSON value after character {pos} ({str(exc).split(':')[0]})") from None


def _expect(text: str, pos: int, chars: str, where: str) -> tuple[str, int]:
    pos = _WS.match(text, pos).end()
    if pos < len(text) and text[pos] in chars:
        return text[pos], pos + 1
    raise _error(text, pos, where, f"expected {' or '.join(repr(c) for c in chars)}")


def _events(decoder, text: str, pos: int, where: str, keep: Callable) -> tuple[list, int]:
    _, pos = _expect(text, pos, "[", where)
    kept: list = []
    if text.startswith("]", _WS.match(text, pos).end()):
        return kept, _WS.match(text, pos).end() + 1
    index = 0
    while True:
        event, pos = _value(decoder, text, pos, where)
        small = keep(event, index)
        if small is not None:
            kept.append(small)
        index += 1
        sep, pos = _expect(text, pos, ",]", where)
        if sep == "]":
            return kept, pos


def parse_trace_object(text: str, where: str, keep: Callable, meta_keys=()) -> tuple[dict, list]:
    """``(meta, events)``: the top-level values named in ``meta_keys`` and
    ``keep(event, index)`` for each event of ``traceEvents`` where it is not None."""
    decoder = json.JSONDecoder()
    pos = _WS.match(text).end()
    if not text.startswith("{", pos):
        raise SimInputError(f"{where}: not a Kineto trace (expected a JSON object with 'traceEvents')")
    meta: dict = {}
    events: list | None = None
    pos += 1
    while not text.startswith("}", _WS.match(text, pos).end()):
        key, pos = _value(decoder, text, pos, where)
        if not isinstance(key, str):
            raise _error(text, pos, where, "expected a key")
        _, pos = _expect(text, pos, ":", where)
        if key == "traceEvents":
            events, pos = _events(decoder, text, pos, where, keep)
        else:
            value, pos = _value(decoder, text, pos, where)
            if key in meta_keys:
                meta[key] = value
        sep, pos = _expect(text, pos, ",}", where)
        if sep == "}":
            break
    if events is None:
        raise SimInputError(f"{where}: JSON without 'traceEvents': not a Kineto trace")
    return meta, events
