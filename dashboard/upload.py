"""Reading an uploaded layer CSV, from memory only (nothing is written to disk).

>>> text = read_layer_csv("m.csv", b"name,params,fwd_ms,bwd_ms\\nfc,10,1,2\\n")
>>> model_from_csv_text(text, "m.csv").layer_names
('fc',)
"""

from __future__ import annotations

from pathlib import PurePath

import sim
from sim.csv_table import read_csv_table
from sim.model import hf_model

__all__ = ["MAX_UPLOAD_BYTES", "MAX_UPLOAD_MB", "model_from_csv_text", "read_layer_csv"]

MAX_UPLOAD_MB = 5
MAX_UPLOAD_BYTES = MAX_UPLOAD_MB * 1024 * 1024


def read_layer_csv(filename: str, data: bytes) -> str:
    """The text of an uploaded file, checked for size and encoding.

    Raises
    ------
    sim.SimInputError
        If the file is empty, larger than `MAX_UPLOAD_MB` MiB or not UTF-8 text.
    """
    if len(data) > MAX_UPLOAD_BYTES:
        raise sim.SimInputError(
            f"{filename}: {len(data) / 2**20:.1f} MiB is too large; the limit is {MAX_UPLOAD_MB} MiB"
        )
    if not data.strip():
        raise sim.SimInputError(f"{filename}: empty file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise sim.SimInputError(f"{filename}: not UTF-8 text (byte {exc.start})") from None


#: A comment line that sets a time outside the layers, e.g. ``# update_ms: 3.2``.
_SCALARS = ("io_ms", "h2d_ms", "update_ms")


def _scalars(text: str, filename: str) -> dict[str, float]:
    """The ``# io_ms: ...``, ``# h2d_ms: ...`` and ``# update_ms: ...`` lines of a layer CSV."""
    found = {}
    for number, line in enumerate(text.removeprefix("\ufeff").splitlines(), start=1):
        line = line.lstrip()  # a comment line as the table reader knows one: '#' its first non-blank character
        key, sep, value = line.lstrip("#").partition(":")
        if line.startswith("#") and sep and key.strip() in _SCALARS:
            try:
                found[key.strip()] = float(value)
            except ValueError:
                raise sim.SimInputError(f"{filename} line {number}: {key.strip()} {value.strip()!r} "
                                        "is not a number") from None
    return found


def model_from_csv_text(text: str, filename: str) -> sim.Model:
    """Parse and validate a layer table (``name,params,fwd_ms,bwd_ms``), or a
    Hugging Face ``config.json`` when ``filename`` ends in ``.json``.

    Comment lines ``# update_ms: 3.2`` (and ``io_ms``, ``h2d_ms``) set the time
    of the optimizer update (input read, host-to-device copy) per iteration.
    Errors are `sim.SimInputError` with one line naming the row and column.

    >>> model_from_csv_text("# update_ms: 2.5\\nname,params,fwd_ms,bwd_ms\\nfc,10,1,2\\n", "m.csv").update_s
    0.0025
    """
    if filename.lower().endswith(".json"):  # a Hugging Face config.json (sim.zoo.hf)
        return hf_model(filename, text=text)
    frame = read_csv_table(text, filename)  # as `sim.load_model` reads a layer CSV (its errors name the file)
    stem = PurePath(filename).stem or "uploaded"
    return sim.model_from_frame(frame, stem, where=filename, source=f"uploaded CSV {filename}",
                                **_scalars(text, filename))
