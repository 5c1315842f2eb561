"""Importers: measured per-layer traces into layer tables.

An importer reads one trace format and returns a layer table with the
columns `sim.model.load_model` reads (``name,params,fwd_ms,bwd_ms``) plus
``comm_ms``, the measured all-reduce time of that layer's gradient alone.
Each format is one function in `IMPORTERS`; adding a format means adding one.

B-Caffe per-blob dumps (Shi, Chu and Li, INFOCOM 2019; repository
shyhuai/B-Caffe, ``logdata/tmp*comm.log``). Each line ends in
``[blob index, parameter count, backward time of the blob's layer (us),
all-reduce time of the blob alone (us), merged all-reduce time (us)]``.
A layer's weight and bias are two consecutive blobs that both carry the
layer's backward time; the bias blob's own all-reduce time is mostly 0. The importer
joins them into one layer (parameters added, backward time once, all-reduce
times added), so the backward pass is not counted twice. The log has no
forward times: forward is taken as half the backward, as the authors' own
speedup script does (``scripts/gmwfbp.py``: ``tf = 0.5 * sum(computes)``).
Blobs are listed from the input (blob 0 is conv1's weight) to the output.
"""

from __future__ import annotations

import math
import re

import pandas as pd

from sim.checks import MAX_TIME_S
from sim.errors import SimInputError
from sim.model import MAX_LAYERS, MAX_PARAMS

#: A blob's backward or all-reduce time above a day (`sim.checks.MAX_TIME_S`, in the log's microseconds).
MAX_TIME_US = MAX_TIME_S * 1e6

__all__ = ["IMPORTERS", "FORWARD_OVER_BACKWARD", "MAX_DUMPS", "MAX_LINES", "parse_bcaffe_blobs", "bcaffe_layers"]

FORWARD_OVER_BACKWARD = 0.5
_BLOB = re.compile(r"\[([^\[\]]*)\]\s*$")
BLOB_COLUMNS = ("blob", "params", "bwd_us", "comm_us", "merged_comm_us")
#: Lines and dumps of a log at most: a dump is a model's blobs (two a layer, `sim.model.MAX_LAYERS` layers at
#: most); real logs hold one or two dumps of a few hundred blobs. The bounds keep the parse to seconds.
MAX_LINES = 500_000
MAX_DUMPS = 1_000


def parse_bcaffe_blobs(text: str, where: str = "log") -> list[pd.DataFrame]:
    """Every dump in a B-Caffe ``tmp*comm.log``, one DataFrame of blobs each.

    A new dump starts where the blob index returns to 0. A log of over
    `MAX_LINES` lines or `MAX_DUMPS` dumps is refused.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # CR-only or CRLF files: one line per record
    count = text.count("\n") + (not text.endswith("\n"))
    if count > MAX_LINES:
        raise SimInputError(f"{where}: {count:,} lines; a B-Caffe log has at most {MAX_LINES:,} "
                            "(sim.calib.importers.MAX_LINES)")
    dumps: list[list[tuple]] = []
    for line_no, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        match = _BLOB.search(line)
        if not match:
            raise SimInputError(f"{where} line {line_no}: no [blob, params, backward, comm, merged] list")
        found = match.group(1).count(",") + 1  # (counted before splitting: a list of millions is no blob)
        if found != 5:
            raise SimInputError(f"{where} line {line_no}: expected 5 numbers in the list, got {found:,}")
        parts = [p.strip() for p in match.group(1).split(",")]
        try:
            values = [float(p) for p in parts]
        except ValueError:
            raise SimInputError(f"{where} line {line_no}: the list holds a non-number") from None
        if not all(math.isfinite(v) for v in values):
            raise SimInputError(f"{where} line {line_no}: the list holds a non-finite number (nan or inf)")
        if any(v < 0 for v in values) or values[1] != int(values[1]):
            raise SimInputError(f"{where} line {line_no}: negative value or fractional parameter count")
        if max(values[2:]) > MAX_TIME_US:
            raise SimInputError(f"{where} line {line_no}: a time of {max(values[2:]):.3g} us is over a day")
        if values[1] > MAX_PARAMS:
            raise SimInputError(f"{where} line {line_no}: {values[1]:.3g} parameters exceed the limit of "
                                f"{MAX_PARAMS:.0e} (sim.model.MAX_PARAMS)")
        blob = int(values[0])
        if blob >= 2 * MAX_LAYERS:  # two blobs a layer at most
            raise SimInputError(f"{where} line {line_no}: blob {blob:,}: a model of more than {MAX_LAYERS:,} layers "
                                "(sim.model.MAX_LAYERS)")
        if blob == 0 or not dumps:
            if len(dumps) == MAX_DUMPS:
                raise SimInputError(f"{where} line {line_no}: dump {MAX_DUMPS + 1:,} starts here; a B-Caffe log has "
                                    f"at most {MAX_DUMPS:,} (sim.calib.importers.MAX_DUMPS)")
            dumps.append([])
        elif blob != dumps[-1][-1][0] + 1:
            raise SimInputError(f"{where} line {line_no}: blob {blob} follows blob {dumps[-1][-1][0]}")
        dumps[-1].append((blob, int(values[1]), *values[2:]))
    if not dumps:
        raise SimInputError(f"{where}: no blob lines")
    return [pd.DataFrame(rows, columns=list(BLOB_COLUMNS)) for rows in dumps]


def bcaffe_layers(text: str, where: str = "log", dump: int = 0) -> pd.DataFrame:
    """A layer table from one dump of a B-Caffe per-blob log.

    Consecutive blobs with the same backward time form one layer (weight,
    then bias). Returns columns ``name,params,fwd_ms,bwd_ms,comm_ms,blobs``.
    """
    dumps = parse_bcaffe_blobs(text, where)
    if not -len(dumps) <= dump < len(dumps):
        raise SimInputError(f"{where}: dump {dump} does not exist; the log has {len(dumps)}")
    blobs = dumps[dump]
    if (blobs["bwd_us"] == 0).all():
        raise SimInputError(f"{where}: dump {dump} carries no backward times (all zero)")
    layers: list[dict] = []
    for row in blobs.itertuples(index=False):
        if layers and row.bwd_us == layers[-1]["bwd_us"] and layers[-1]["nblobs"] < 2:
            layers[-1]["params"] += row.params
            layers[-1]["comm_us"] += row.comm_us
            layers[-1]["nblobs"] += 1
            layers[-1]["blobs"] += f"+{row.blob}"
        else:
            layers.append({"params": row.params, "bwd_us": row.bwd_us, "comm_us": row.comm_us,
                           "nblobs": 1, "blobs": str(row.blob)})
    frame = pd.DataFrame(layers)
    return pd.DataFrame(
        {
            "name": [f"layer{i}" for i in range(len(frame))],
            "params": frame["params"].astype("int64"),
            "fwd_ms": frame["bwd_us"] * 1e-3 * FORWARD_OVER_BACKWARD,
            "bwd_ms": frame["bwd_us"] * 1e-3,
            "comm_ms": frame["comm_us"] * 1e-3,
            "blobs": frame["blobs"],
        }
    )


IMPORTERS = {"bcaffe": bcaffe_layers}
