"""A task graph as arrays: what the lowering builds and the engine times.

Tasks are rows of parallel numpy columns (int32 and float64, no Python object
per task); edges are arrays too, turned into successor lists in compressed
form (`TaskGraph.finish`). Tasks come one at a time (`TaskGraph.add`) or a
block at a time (`TaskGraph.add_block`, `TaskGraph.edges`); the strings a
timeline shows (a task's layer and label) are built from small tables only
when asked for.

``resource[t]`` indexes ``resources``, a list of ``(worker, lane)``;
``priority[t]`` is the task's rank among its resource's tasks by ``key``
(four integers; by default the task's index, so insertion order), ties by
index.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["KINDS", "TAGS", "Carry", "TaskGraph"]

#: A task's kind (the ``kind`` column holds the index).
KINDS = ("io", "h2d", "forward", "backward", "update", "comm")
#: What a task's label says before its message's name: none (the label is
#: empty), ``"0"`` (io, h2d), the message alone (an all-reduce), or a step.
TAGS = ("", "0", "message", "push", "pull", "reduce-scatter", "all-gather", "all-gather-fwd", "all-gather-bwd",
        "launch")
#: The characters a partitioned message's name may take in the `layer` column over all its parts, repeated
#: whole on each part; beyond it the parts name it as their labels do (`TaskGraph.layer_of`).
MAX_PART_NAME_CHARS = 2_000_000
_INT_COLUMNS = ("resource", "iteration", "worker", "kind_id", "layer_id", "message", "tag", "part")
_SMALL_COLUMNS = ("kind_id", "tag")  # a few values each (`KINDS` and what callers add, `TAGS`): int8
_COLUMNS = (("duration_s", np.float64), ("nbytes", np.int64), ("key0", np.int64), ("key1", np.int32),
            ("key2", np.int32), ("key3", np.int32)) + tuple(
                (c, np.int8 if c in _SMALL_COLUMNS else np.int32) for c in _INT_COLUMNS)
_EDGE_COLUMNS = (("eu", np.int32), ("ev", np.int32), ("elag", np.float64))
_LAZY_COLUMNS = ("nbytes", "message", "tag", "part")  # read by timelines only


class Carry(NamedTuple):
    """What a worker's next iteration waits for: the forward of layer ``layers[i]``
    waits for task ``sources[i]``, its first forward for ``backward_done``, and
    (without prefetch) its io for ``step_done``."""

    sources: np.ndarray
    layers: np.ndarray
    step_done: int
    backward_done: int


def _chunk(value, dtype, count: int) -> tuple:
    """``count`` values of a column: a scalar stays one value, an array is kept as given (the lowering
    does not change an array it has passed) until `_join` fills the column."""
    value = np.asarray(value)
    return (count, value.astype(dtype)[()] if value.ndim == 0 else np.broadcast_to(value, (count,)))


def _join(chunks: list, dtype) -> np.ndarray:
    """A column from its chunks (`_chunk`), filled in place."""
    out = np.empty(sum(count for count, _ in chunks), dtype=dtype)
    at = 0
    for count, value in chunks:
        out[at:at + count] = value
        at += count
    return out


def _narrow(chunks: list):
    """int32 for a column of byte counts that all fit in it (every message part under 2 GiB), else int64."""
    top = max((int(np.max(v)) if np.ndim(v) else int(v) for count, v in chunks if count), default=0)
    low = min((int(np.min(v)) if np.ndim(v) else int(v) for count, v in chunks if count), default=0)
    return np.int32 if low >= -2**31 and top < 2**31 else np.int64


def _bounds(chunks: list) -> tuple[int, int]:
    """The smallest and largest value of a column from its chunks ((0, 0) for none)."""
    if not chunks:
        return 0, 0
    return (min(int(np.min(v)) for _, v in chunks), max(int(np.max(v)) for _, v in chunks))


def _as_held(value, dtype):
    """A chunk's values as its column of ``dtype`` holds them: signed integers that all fit are kept as
    given (the same integers, no copy), anything else is cast."""
    value = np.asarray(value)
    if value.dtype == dtype or value.ndim == 0 or not np.issubdtype(value.dtype, np.signedinteger):
        return value.astype(dtype, copy=False)
    info = np.iinfo(dtype)
    fits = value.size == 0 or (info.min <= int(np.min(value)) and int(np.max(value)) <= info.max)
    return value if fits else value.astype(dtype)


def _combined(n: int, keys: list, bounds: list) -> np.ndarray:
    """The keys as one integer per task, key by key: times the key's span, plus the key less its
    smallest value (the same integers as from the joined columns, without joining them)."""
    combined = np.zeros(n, dtype=np.int64)
    for (parts, _), (lo, hi) in zip(keys, bounds, strict=True):
        if hi > lo:  # in place, chunk by chunk: no column of the key, no temporary
            combined *= hi - lo + 1
            at = 0
            for count, value in parts:
                seg = combined[at:at + count]
                np.add(seg, value, out=seg, casting="unsafe")
                at += count
            if lo:
                combined -= lo
    return combined


class TaskGraph:
    """Tasks as parallel arrays; edges as arrays with optional lags (see the module doc).

    ``layer_names`` and ``message_labels`` name a task's layer (``layer_id``)
    and message (``message``) in `layer` and `label`; ``part_labels`` name the
    message in the label of a part of it (default: ``message_labels``).
    """

    def __init__(self, layer_names=(), message_labels=(), part_labels=None) -> None:
        self.layer_names, self.message_labels = tuple(layer_names), message_labels
        self.part_labels = message_labels if part_labels is None else part_labels
        self.resources: list = []
        self._resource_id: dict = {}
        self._chunks = {name: [] for name, _ in _COLUMNS + _EDGE_COLUMNS}
        self._pending = {name: [] for name, _ in _COLUMNS + _EDGE_COLUMNS}
        self._n = 0
        self._final = False
        self._priority = None
        self.kinds = list(KINDS)  # `KINDS`, then any other kind a caller adds
        self.pipeline = None  # the lowering's steps when `sim.core.pipeline` can time the graph
        self.memo: dict = {}  # what the engine keeps from one run to the next (a copy shares it)

    def __len__(self) -> int:
        return self._n

    def forget(self) -> None:
        """Drop what the engine kept to time the graph again (`memo`, the pipeline's lane orders)."""
        self.memo.clear()
        if self.pipeline is not None:
            self.pipeline.forget()

    def resource_id(self, worker: int, lane: str) -> int:
        r = self._resource_id.get((worker, lane))
        if r is None:
            r = self._resource_id[(worker, lane)] = len(self.resources)
            self.resources.append((worker, lane))
        return r

    def add(self, k, worker, lane, kind, duration, *, layer=-1, message=-1, nbytes=0, key=None, tag=0, part=-1):
        """Add one task; return its index. ``key`` orders it on its lane (default: insertion order)."""
        t = self._n
        key = (t, 0, 0, 0) if key is None else tuple(key) + (0,) * (4 - len(key))
        row = (float(duration), int(nbytes), *key, self.resource_id(worker, lane), k, worker, self.kind_index(kind),
               layer, message, tag, part)
        for (name, _), value in zip(_COLUMNS, row, strict=True):
            self._pending[name].append(value)
        self._n += 1
        return t

    def add_block(self, count: int, k, worker, lane, kind, duration, *, layer=-1, message=-1, nbytes=0, key=None,
                  tag=0, part=-1) -> np.ndarray:
        """Add ``count`` tasks at once (each argument a scalar or an array of ``count``; ``lane`` a lane
        name or an array of resource ids, ``kind`` a kind or an array of indices into `KINDS`); their indices."""
        self._flush("task")
        first = self._n
        idx = np.arange(first, first + count, dtype=np.int64)
        key = (idx, 0, 0, 0) if key is None else tuple(key) + (0,) * (4 - len(key))
        resource = self.resource_id(worker, lane) if isinstance(lane, str) else lane
        kind = self.kind_index(kind) if isinstance(kind, str) else kind
        values = (duration, nbytes, *key, resource, k, worker, kind, layer, message, tag, part)
        for (name, dtype), value in zip(_COLUMNS, values, strict=True):
            self._chunks[name].append(_chunk(value, dtype, count))
        self._n += count
        return idx

    def kind_index(self, kind: str) -> int:
        if kind not in self.kinds:
            self.kinds.append(kind)
        return self.kinds.index(kind)

    def edge(self, u: int, v: int, lag_s: float = 0.0) -> None:
        self._pending["eu"].append(u)
        self._pending["ev"].append(v)
        self._pending["elag"].append(float(lag_s) if lag_s > 0 else 0.0)

    def edges(self, u, v, lag_s=0.0) -> None:
        """Edges ``u[i] -> v[i]`` (either may be a scalar), with optional lags."""
        self._flush("edge")
        u, v, lag = np.asarray(u), np.asarray(v), np.asarray(lag_s, dtype=np.float64)
        shape = np.broadcast_shapes(u.shape, v.shape, lag.shape)
        if len(shape) > 1:
            u, v, lag = (np.broadcast_to(x, shape).ravel() for x in (u, v, lag))
        count = int(np.prod(shape))
        lagged = lag > 0
        lag = np.where(lagged, lag, 0.0) if lagged.any() else 0.0  # no lag: one zero, not a column of them
        # the ends as int32 copies (what `_successors` joins them into): the lowering's int64 arrays, and
        # the blocks of task indices they are views of, are not kept alive until then
        u, v = (x.astype(np.int32) if x.ndim and x.dtype != np.int32 else x for x in (u, v))
        for name, values in (("eu", u), ("ev", v), ("elag", lag)):
            self._chunks[name].append(_chunk(values, self._dtype(name), count))

    @staticmethod
    def _dtype(name: str):
        return dict(_COLUMNS + _EDGE_COLUMNS)[name]

    def _flush(self, which: str) -> None:
        names = [c for c, _ in (_EDGE_COLUMNS if which == "edge" else _COLUMNS)]
        if self._pending[names[0]]:
            for name in names:
                values = np.asarray(self._pending[name], dtype=self._dtype(name))
                lagless = name == "elag" and not np.any(values > 0)  # no lag: one zero, not a column of them
                self._chunks[name].append((len(values), np.float64(0.0) if lagless else values))
                self._pending[name] = []

    def finish(self) -> TaskGraph:
        """Join the columns, build the successor lists and rank the priorities (once)."""
        if self._final:
            return self
        self._flush("task")
        self._flush("edge")
        chunks, self._chunks, self._pending = self._chunks, {}, {}
        self.has_lags = any(not (np.isscalar(v) and v == 0) for _, v in chunks["elag"])
        # the successor lists are built on first use (a plain pipeline, `sim.core.pipeline`, needs none);
        # a copy (`sim.core.lower.retimed`) shares them
        self._edges = {"chunks": {name: chunks.pop(name) for name, _ in _EDGE_COLUMNS}}
        # the keys, ranked from their chunks and dropped, before the other columns are joined (less memory at once)
        keys = [(chunks.pop(name), dtype) for name, dtype in _COLUMNS[2:6]]
        self.resource = _join(chunks.pop("resource"), np.int32)
        self._rank([([(self._n, self.resource)], np.int32), *keys])
        self._columns = {}  # the columns only a timeline reads, joined on first use (a copy shares them)
        for name, dtype in _COLUMNS:
            if name in chunks:
                parts = chunks.pop(name)
                if name in _LAZY_COLUMNS:
                    self._columns[name] = (parts, dtype)
                else:
                    setattr(self, name, _join(parts, dtype))
        self._final = True
        return self

    def __getattr__(self, name: str):
        columns = self.__dict__.get("_columns")
        if columns is None or name not in columns:
            raise AttributeError(name)
        if isinstance(columns[name], tuple):
            parts, dtype = columns[name]
            columns[name] = _join(parts, _narrow(parts) if name == "nbytes" else dtype)
        return columns[name]

    def rows_of(self, name: str, rows: np.ndarray) -> np.ndarray:
        """``getattr(self, name)[rows]`` for increasing ``rows``: a column not joined yet is read from its
        chunks (the rows alone, not a column of every task)."""
        got = self.finish()._columns.get(name)
        if not isinstance(got, tuple) or np.any(rows[1:] <= rows[:-1]):
            return getattr(self, name)[rows]
        parts, dtype = got
        out = np.empty(len(rows), dtype=_narrow(parts) if name == "nbytes" else dtype)
        at = np.cumsum([0] + [count for count, _ in parts])
        cut = np.searchsorted(rows, at)
        for (_, value), first, lo, hi in zip(parts, at[:-1].tolist(), cut[:-1].tolist(), cut[1:].tolist(), strict=True):
            if hi > lo:
                out[lo:hi] = value if np.ndim(value) == 0 else value[rows[lo:hi] - first]
        return out

    @property
    def succ_index(self) -> np.ndarray:
        """Each task's successors, by source (``succ_index[succ_ptr[t]:succ_ptr[t + 1]]``)."""
        return self._successors()[0]

    @property
    def succ_ptr(self) -> np.ndarray:
        return self._successors()[1]

    @property
    def succ_lag_s(self) -> np.ndarray:
        """The lag of each edge of `succ_index` (one zero when the graph has none)."""
        return self._successors()[2]

    @succ_lag_s.setter
    def succ_lag_s(self, values) -> None:
        """Other lags for this graph alone (a copy keeps the lags of the graph it was copied from)."""
        index, ptr, _ = self._successors()
        self._edges = {"built": (index, ptr, np.asarray(values, dtype=np.float64))}

    def _successors(self) -> tuple:
        """The edges in compressed form: each task's successors (and their lags) by source."""
        edges = self.finish()._edges
        if "built" not in edges:
            chunks = edges.pop("chunks")
            eu, ev = _join(chunks.pop("eu"), np.int32), _join(chunks.pop("ev"), np.int32)
            order = np.argsort(eu, kind="stable")
            lag = _join(chunks.pop("elag"), np.float64)[order] if self.has_lags else np.zeros(1)
            ptr = np.zeros(self._n + 1, dtype=np.int32 if len(eu) < 2**31 else np.int64)
            np.cumsum(np.bincount(eu, minlength=self._n), out=ptr[1:])
            edges["built"] = (ev[order], ptr, lag)
        return edges["built"]

    @property
    def indegree(self) -> np.ndarray:
        """Each task's number of predecessors (for the event loop; not kept)."""
        return np.bincount(self.finish().succ_index, minlength=self._n).astype(np.int32)

    @property
    def order(self) -> np.ndarray:
        """The tasks sorted by (resource, key, index): the task of each rank (for the event loop; not kept)."""
        out = np.empty(self._n, dtype=np.int32)
        out[self.finish().rank] = np.arange(self._n, dtype=np.int32)
        return out

    def rank_priorities(self) -> TaskGraph:
        """Each task's rank among its resource's tasks, by key (then index): `finish`."""
        return self.finish()

    def _rank(self, keys: list | None = None) -> None:
        """``order``: the tasks sorted by (resource, key, index); ``rank[t]``: t's place in it;
        ``priority[t]``: t's rank among its resource's tasks. ``keys``: per column (resource, key0 ..
        key3), its chunks (`_chunk`) and dtype; default the columns set as attributes."""
        if keys is None:
            keys = [([(self._n, getattr(self, name))], dtype) for name, dtype in (("resource", np.int32),) + _COLUMNS[2:6]]
        keys = [([(count, _as_held(v, dtype)) for count, v in parts if count], dtype)
                for parts, dtype in keys]  # (each chunk as its column holds it)
        bounds = [_bounds(parts) for parts, _ in keys]
        if np.prod([float(hi - lo + 1) for lo, hi in bounds]) < 2.0**62:  # one integer: one stable sort, ties by index
            order = np.argsort(_combined(self._n, keys, bounds), kind="stable")
        else:
            order = np.lexsort((np.arange(self._n), *(_join(parts, dtype) for parts, dtype in reversed(keys))))
        self.rank = np.empty(self._n, dtype=np.int32)
        self.rank[order] = np.arange(self._n, dtype=np.int32)

    @property
    def priority(self) -> np.ndarray:
        """Each task's rank among its resource's tasks."""
        self.finish()
        first = np.zeros(len(self.resources) + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.resource, minlength=len(self.resources)), out=first[1:])
        return self.rank - first[self.resource] if self._n else np.zeros(0, np.int64)

    @priority.setter
    def priority(self, values) -> None:
        """Set the ranks directly (a graph read from networkx): the given values become the keys."""
        self.finish()
        self._rank([([(self._n, self.resource)], np.int32), ([(self._n, np.asarray(values, dtype=np.int64))], np.int64),
                    *[([(self._n, np.int32(0))], np.int32)] * 3])

    # ------------------------------------------------------------------ views for timelines and drawings
    @property
    def kind(self) -> np.ndarray:
        """Each task's kind as a string (an object array of the shared names in `KINDS`)."""
        return np.array(self.kinds, dtype=object)[self.finish().kind_id]

    @property
    def lane_names(self) -> np.ndarray:
        """Each task's lane as a string."""
        lanes = np.array([lane for _, lane in self.resources] or [""], dtype=object)
        return lanes[self.finish().resource]

    def lane(self, t: int) -> str:
        return self.resources[int(self.finish().resource[t])][1]

    def message_strings(self, parts: bool = False) -> np.ndarray:
        """Per message, its label (``parts``: its name in its parts' labels); one more entry (index -1) for none."""
        return np.array(list(self.part_labels if parts else self.message_labels) + [""], dtype=object)

    @property
    def layer(self) -> np.ndarray:
        """Each task's layer: its layer's name, or its message's label (communication), or ''."""
        return self.layer_of(np.arange(len(self)))

    def layer_of(self, rows: np.ndarray) -> np.ndarray:
        """`layer` of the tasks ``rows``: a message's whole name (its layers, ``+``-joined). Where a
        partitioned message's parts would repeat it over `MAX_PART_NAME_CHARS` characters in all,
        they name it as their labels do (``part_labels``: its first and last layer), so that the
        column does not grow with layers x parts (a 100k-layer message in 4 MB parts)."""
        self.finish()
        names = np.array(list(self.layer_names) + [""], dtype=object)
        layer_id, message, tag, part = self.layer_id[rows], self.message[rows], self.tag[rows], self.part[rows]
        out = names[layer_id]
        comm = (layer_id < 0) & (message >= 0) & (tag >= TAGS.index("message"))
        whole = self.message_strings()
        out[comm] = whole[message[comm]]
        parts = comm & (part >= 0)
        if parts.any():
            repeats = np.bincount(message[parts], minlength=len(whole))
            chars = repeats * np.fromiter(map(len, whole), dtype=np.int64, count=len(whole))
            long = parts & np.isin(message, np.flatnonzero(chars > MAX_PART_NAME_CHARS))
            out[long] = self.message_strings(parts=True)[message[long]]
        return out

    @property
    def label(self) -> np.ndarray:
        """Each task's label: ``"0"`` (io, h2d), ``"push:fc#2"`` (a step and part of a message), ''."""
        return self.label_of(np.arange(len(self)))

    def label_of(self, rows: np.ndarray) -> np.ndarray:
        """`label` of the tasks ``rows``."""
        self.finish()
        tag, message, part = self.tag[rows], self.message[rows], self.part[rows]
        out = np.full(len(rows), "", dtype=object)
        out[tag == TAGS.index("0")] = "0"
        named = np.flatnonzero(tag >= TAGS.index("message"))
        if len(named):
            whole, parts = self.message_strings(), self.message_strings(parts=True)
            prefixes = [t + ":" if t != "message" else "" for t in TAGS]
            out[named] = [f"{prefixes[t]}{parts[m]}#{j}" if j >= 0 else prefixes[t] + whole[m] for t, m, j in
                          zip(tag[named].tolist(), message[named].tolist(), part[named].tolist(), strict=True)]
        return out

    def edge_list(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every edge as (source, target, lag) arrays, by source."""
        self.finish()
        u = np.repeat(np.arange(self._n, dtype=np.int64), np.diff(self.succ_ptr))
        lag = self.succ_lag_s if self.has_lags else np.zeros(len(u))
        return u, self.succ_index.astype(np.int64), lag
