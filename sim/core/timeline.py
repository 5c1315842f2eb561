"""The one timeline schema, and the interval arithmetic every metric uses.

A timeline is a DataFrame with one row per task and the columns in
`TIMELINE_COLUMNS`:

==============  ===========================================================
iteration       iteration number, from 0
worker          the worker that ran the task; -1 for communication, which
                all workers take part in (the aggregate run shows worker 0)
lane            io, h2d, compute or comm; ``push`` and ``pull`` in the
                parameter-server architecture
kind            io, h2d, forward, backward, update or comm
name            unique task name, e.g. ``it0/backward/conv1``; a part of a
                message names its step and partition, e.g.
                ``it0/comm/push:fc#2``; per-worker runs add ``w3/``
layer           the layer (forward, backward, per-layer update) or the
                ``+``-joined layers of a message (comm); empty otherwise
message         the message a layer's gradient travels in; -1 if none
start_s, end_s  start and end time, in seconds from the first task
duration_s      end_s - start_s
bytes           gradient bytes (backward: the layer's; comm: the part's)
group           the same as ``message`` (its name before the one schema)
resource        the same as ``lane`` (likewise)
==============  ===========================================================

Rows are sorted by start, end and iteration, ties kept in task order.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from sim.checks import check_int
from sim.core.intervals import overlap_s

if TYPE_CHECKING:  # pandas is imported when a timeline is built, not with sim
    import pandas as pd

__all__ = [
    "COMPUTE_KINDS", "KEPT_RUN_LAYER_ITERATIONS", "ROW_COLUMNS", "TIMELINE_COLUMNS", "coalesce", "first_iterations",
    "frame", "from_rows", "graph_overlap", "kept_builder",
    "graph_timeline", "interval_overlap_s", "renamed_layers", "to_rows", "with_column",
]

TIMELINE_COLUMNS = (
    "iteration", "worker", "lane", "kind", "name", "layer", "message", "start_s", "end_s", "duration_s", "bytes",
    "group", "resource",
)
COMPUTE_KINDS = ("forward", "backward", "update")
#: The short rows event-driven runs record: ``(worker, iteration, kind, start_s, end_s, duration_s)``.
ROW_COLUMNS = ("worker", "iteration", "kind", "start_s", "end_s", "duration_s")
#: The lane of each kind of short row (any other kind runs on the worker's compute lane).
_LANE_OF_KIND = {"push": "push", "pull": "pull", "comm": "comm", "gossip": "comm", "average": "comm", "queue": "comm"}
_INT_COLUMNS = {"iteration": "int64", "worker": "int64", "message": "int64", "bytes": "int64"}


def frame(columns: dict) -> pd.DataFrame:
    """A timeline from its columns (all but ``duration_s`` and the aliases), sorted
    by start, end and iteration (a stable sort: ties keep the given order).

    Built once from numpy arrays with plain dtypes (int64, float64, and Python
    strings in object columns: no string conversion), and not sorted again
    when the rows already are in order.
    """
    start, end = np.asarray(columns["start_s"], float), np.asarray(columns["end_s"], float)
    iteration = np.asarray(columns["iteration"], np.int64)
    order = None if _in_order(start, end, iteration) else np.lexsort((iteration, end, start))
    data = []
    for key in TIMELINE_COLUMNS[:-2]:
        if key == "duration_s":
            values = end - start
        elif key in ("start_s", "end_s"):
            values = start if key == "start_s" else end
        else:
            values = np.asarray(columns[key], np.int64 if key in _INT_COLUMNS else object)
        data.append(values if order is None else values[order])
    data += [data[TIMELINE_COLUMNS.index("message")], data[TIMELINE_COLUMNS.index("lane")]]  # group, resource
    return _data_frame(data)


@functools.lru_cache(maxsize=1)
def _column_index():
    """The columns' index, built once (not converted again for every timeline)."""
    import pandas as pd

    return pd.Index(list(TIMELINE_COLUMNS))


def _in_order(start: np.ndarray, end: np.ndarray, iteration: np.ndarray) -> bool:
    """True when the rows are already sorted by (start, end, iteration)."""
    if start.size < 2:
        return True
    s0, s1, e0, e1 = start[:-1], start[1:], end[:-1], end[1:]
    ok = (s0 < s1) | ((s0 == s1) & ((e0 < e1) | ((e0 == e1) & (iteration[:-1] <= iteration[1:]))))
    return bool(ok.all())


def _data_frame(arrays: list) -> pd.DataFrame:
    """A DataFrame of the timeline's columns from arrays, kept as they are (object columns stay object)."""
    import pandas as pd

    names = list(TIMELINE_COLUMNS)
    n = len(arrays[0])
    from_arrays = getattr(pd.DataFrame, "_from_arrays", None)
    if from_arrays is not None:  # pandas' own constructor without inference (stable since pandas 0.23)
        try:
            return from_arrays(arrays, columns=_column_index(), index=pd.RangeIndex(n), verify_integrity=False)
        except TypeError:  # a pandas whose signature differs: the public constructor below
            pass
    return pd.DataFrame({k: pd.Series(v, dtype=v.dtype, copy=False) for k, v in zip(names, arrays, strict=True)})


def with_column(timeline: pd.DataFrame, key: str, values: np.ndarray) -> pd.DataFrame:
    """A new timeline: ``timeline`` with column ``key`` replaced by ``values``, kept with
    their dtype (an object column stays object: no string inference); ``timeline``
    itself is not changed and its other columns are shared, not copied."""
    import pandas as pd

    out = timeline.copy(deep=False)
    out.isetitem(out.columns.get_loc(key), pd.Series(values, dtype=values.dtype, index=out.index, copy=False))
    return out


def renamed_layers(timeline: pd.DataFrame, rename) -> pd.DataFrame:
    """A new timeline: ``timeline`` with each ``layer`` cell replaced by ``rename(cell)``
    (each distinct cell renamed once); ``timeline`` itself is not changed."""
    import pandas as pd

    codes, cells = pd.factorize(timeline["layer"].to_numpy(), use_na_sentinel=False)
    return with_column(timeline, "layer", np.array([rename(c) for c in cells], dtype=object)[codes])


def from_rows(rows) -> pd.DataFrame:
    """A timeline in the one schema from short rows (`ROW_COLUMNS`)."""
    import pandas as pd

    short = pd.DataFrame(list(rows), columns=list(ROW_COLUMNS))
    kinds = short["kind"].astype(object)
    return frame({
        "iteration": short["iteration"].to_numpy(np.int64), "worker": short["worker"].to_numpy(np.int64),
        "lane": [_LANE_OF_KIND.get(k, "compute") for k in kinds], "kind": kinds.to_numpy(),
        "name": [f"it{k}/w{w}/{kind}" for w, k, kind in zip(short["worker"], short["iteration"], kinds, strict=True)],
        "layer": [""] * len(short), "message": np.full(len(short), -1, np.int64),
        "start_s": short["start_s"].to_numpy(float), "end_s": short["end_s"].to_numpy(float),
        "bytes": np.zeros(len(short), np.int64),
    })


def to_rows(timeline: pd.DataFrame) -> list[tuple]:
    """Short rows (`ROW_COLUMNS`) of a timeline."""
    return list(timeline[list(ROW_COLUMNS)].itertuples(index=False, name=None))


def coalesce(timeline: pd.DataFrame) -> pd.DataFrame:
    """One bar per run of back-to-back tasks of one kind on one worker's lane
    (a forward pass instead of its layers), for drawing many workers at once."""
    t = timeline.sort_values(["worker", "lane", "start_s", "end_s"], kind="stable").reset_index(drop=True)
    same = ((t["worker"] == t["worker"].shift()) & (t["lane"] == t["lane"].shift())
            & (t["kind"] == t["kind"].shift()) & (t["iteration"] == t["iteration"].shift())
            & (t["start_s"] == t["end_s"].shift()) & (t["kind"] != "comm"))
    block = (~same).cumsum()
    agg = t.groupby(block, sort=False).agg(
        iteration=("iteration", "first"), worker=("worker", "first"), lane=("lane", "first"),
        kind=("kind", "first"), name=("name", "first"), layer=("layer", "first"), message=("message", "first"),
        start_s=("start_s", "first"), end_s=("end_s", "last"), bytes=("bytes", "sum"))
    return frame({key: agg[key].to_numpy() for key in agg.columns})


def graph_timeline(graph, start: np.ndarray, end: np.ndarray, iterations: int | None = None) -> pd.DataFrame:
    """The timeline of a task graph (`sim.core.taskgraph.TaskGraph`) timed by the engine,
    for its first ``iterations`` iterations (all by default)."""
    graph.finish()
    keep = np.flatnonzero(graph.iteration < iterations) if iterations is not None else np.arange(len(graph))
    return frame({
        "iteration": graph.iteration[keep], "worker": graph.worker[keep], "lane": graph.lane_names[keep],
        "kind": graph.kind[keep], "name": _task_names(graph, keep), "layer": graph.layer_of(keep),
        "message": graph.message[keep], "start_s": start[keep], "end_s": end[keep], "bytes": graph.nbytes[keep],
    })


def graph_overlap(graph, start: np.ndarray, end: np.ndarray, layer_names, iteration: int):
    """`sim.core.interference.timeline_overlap` of the timeline of ``graph`` (the same
    arithmetic on the same intervals, so the same figures) from its arrays, without
    building the timeline: worker 0's compute in ``iteration`` against communication
    on any lane in that iteration and the two beside it (`sim.core.interference.GraphOverlap`
    of one round)."""
    from sim.core.interference import GraphOverlap

    return GraphOverlap(graph, layer_names, iteration)(start, end)


def _task_names(graph, rows: np.ndarray) -> list[str]:
    """``it{k}/[w{w}/]{kind}/{label, layer or 0}`` of each task of ``rows``. Where every iteration
    holds the same tasks as the first (as the lowering builds them), the part after the
    iteration is built once."""
    iteration = graph.iteration[rows]
    many = bool(np.any(graph.worker > 0))
    counts = np.bincount(iteration) if len(rows) else np.zeros(0, np.int64)
    block = int(counts[0]) if len(counts) else 0
    same = (len(counts) > 0 and np.all(counts == block) and np.all(np.diff(iteration) >= 0)
            and all(np.array_equal(c[rows[:block]], c[rows].reshape(-1, block)[k])
                    for c in (graph.worker, graph.kind_id, graph.layer_id, graph.message, graph.tag, graph.part)
                    for k in range(1, len(counts))))
    first = rows[:block] if same else rows
    kinds, workers = graph.kind[first], graph.worker[first].tolist()
    label, layer = graph.label_of(first), graph.layer_of(first)
    tails = [lb or ly or "0" for lb, ly in zip(label.tolist(), layer.tolist(), strict=True)]
    suffixes = [f"/w{w}/{kd}/{tl}" if many and w >= 0 else f"/{kd}/{tl}"
                for w, kd, tl in zip(workers, kinds.tolist(), tails, strict=True)]
    if not same:
        return [f"it{k}{sf}" for k, sf in zip(iteration.tolist(), suffixes, strict=True)]
    names: list[str] = []
    for k in range(len(counts)):
        head = f"it{k}"
        names += [head + sf for sf in suffixes]
    return names


def interval_overlap_s(a_start, a_end, b_start, b_end) -> float:
    """Total length of the intersection of two sets of intervals (`sim.core.intervals.overlap_s`)."""
    return overlap_s(a_start, a_end, b_start, b_end)


#: The largest run (layers x iterations timed) whose arrays a result keeps for `sim.api.SimResult.timeline_of`:
#: about 20 MiB (a 100k-layer DeAR run kept 190 MiB more).
KEPT_RUN_LAYER_ITERATIONS = 50_000


def kept_builder(build, layers, plan, layer_iterations: int):
    """`first_iterations` of ``build`` for a plan that updates per layer (its last messages run beside the next
    forward pass, which a chart draws) whose run timed at most `KEPT_RUN_LAYER_ITERATIONS`; else None."""
    if plan.per_layer_update and layer_iterations <= KEPT_RUN_LAYER_ITERATIONS:
        return functools.partial(first_iterations, build, layers)
    return None


def first_iterations(build, layers, iterations: int):
    """``build``'s timeline (`sim.core.run.Timing.timeline`) of row 0's first ``iterations`` iterations,
    ``layers`` as it takes them (a module function, so that a result holding it pickles)."""
    return build(0, check_int("iterations", iterations, 1), layers)
