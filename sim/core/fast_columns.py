"""The fast path's timeline columns (`sim.core.fast.FastRun.timeline`), from its arrays.

What every iteration's rows share (names, kinds, lanes, layers, messages) depends
only on the model's layer names, the plan's messages, the layers' bytes and how
layer cells are shown (a tensor view's layer names, `sim.tensors.layer_renamer`);
it is built once per such key and kept (`static_columns`, read-only arrays and
tuples), so a timeline costs the per-run arrays and one frame.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["KEPT_CELLS", "comm_columns", "forget_static_columns", "kept_cells", "row_columns", "static_columns", "task_names", "worker_columns", "worker_times"]

#: Static columns kept, the oldest dropped first.
_STATIC_KEPT = 64
_STATIC: dict = {}
_STATIC_LOCK = threading.Lock()
#: Task-name arrays kept per static entry (one per iteration and worker shown).
_NAMES_KEPT = 64
#: Cells (array and tuple elements) kept in all, static columns and what is derived from them
#: together: a count of 64 entries alone let 100k-layer models' columns and their task names hold
#: 407 MiB after every result was dropped, and ResNet-50 timelines of 62 iteration counts 1.5 GiB.
#: Oldest entries go first; what would not fit is built for its run and not kept.
KEPT_CELLS = 4_000_000
_kept = {"cells": 0}


def static_columns(layer_names: tuple, groups: tuple, layer_bytes: np.ndarray, rename=None) -> dict:
    """What every iteration's rows share, for these layers, messages and bytes; ``rename``
    (a function of a layer cell, or None) gives the ``layer`` column's text. Kept (read-only)
    within `KEPT_CELLS` and `_STATIC_KEPT` entries."""
    key = (layer_names, groups, layer_bytes.dtype.str, layer_bytes.tobytes(), rename)
    try:
        with _STATIC_LOCK:
            got = _STATIC.get(key)
    except TypeError:  # an unhashable name or member: built, not kept
        got, key = None, None
    if got is not None:
        return got
    got = _build_static(list(layer_names), groups, layer_bytes, rename)
    if key is not None:
        _keep_static(key, got)
    return got


def _keep_static(key, static: dict) -> None:
    """Keep ``static`` under ``key``, dropping the oldest entries to stay within the bounds."""
    with _STATIC_LOCK:
        if key in _STATIC or static["cells"] > KEPT_CELLS:
            return
        while _STATIC and (len(_STATIC) >= _STATIC_KEPT or _kept["cells"] + static["cells"] > KEPT_CELLS):
            _drop(_STATIC.pop(next(iter(_STATIC))))
        static["kept"] = True
        _STATIC[key] = static
        _kept["cells"] += static["cells"]


def _drop(static: dict) -> None:
    """No longer count ``static`` (a run that still holds it may add to it: that is not kept)."""
    static["kept"] = False
    _kept["cells"] -= static["cells"]


def _keep_derived(static: dict, where: str, key, value, cells: int) -> None:
    """Keep ``value`` (``cells`` cells) in ``static[where]`` if ``static`` is kept and the bounds allow;
    else it serves its run only."""
    with _STATIC_LOCK:
        kept = static[where]
        if not static["kept"] or key in kept or len(kept) >= _NAMES_KEPT or _kept["cells"] + cells > KEPT_CELLS:
            return
        kept[key] = value
        static["cells"] += cells
        _kept["cells"] += cells


def kept_cells() -> int:
    """Cells kept by `static_columns` in all (within `KEPT_CELLS`)."""
    return _kept["cells"]


def forget_static_columns() -> None:
    """Drop every kept entry of `static_columns` (the next timelines build theirs again)."""
    with _STATIC_LOCK:
        for static in _STATIC.values():
            _drop(static)
        _STATIC.clear()


def _build_static(names: list, groups: tuple, layer_bytes: np.ndarray, rename) -> dict:
    n = len(names)
    group_of = {i: gi for gi, members in enumerate(groups) for i in members}
    layer_group = [group_of.get(i, -1) for i in range(n)]
    kinds = ["io", "h2d"] + ["forward"] * n + ["backward"] * n + ["update"]
    tails = ["0", "0"] + names + names[::-1] + ["0"]
    labels = tuple("+".join(names[i] for i in members) for members in groups)
    layer = ["", ""] + names + names[::-1] + [""]
    comm_layer = list(labels)
    if rename is not None:
        layer, comm_layer = [rename(c) for c in layer], [rename(c) for c in comm_layer]
    static = {
        "kind_tail": tuple(f"{kind}/{tail}" for kind, tail in zip(kinds, tails, strict=True)),
        "lane": np.array(["io", "h2d"] + ["compute"] * (2 * n + 1), dtype=object),
        "kind": np.array(kinds, dtype=object),
        "layer": np.array(layer, dtype=object),
        "message": np.asarray([-1, -1] + layer_group + layer_group[::-1] + [-1], np.int64),
        "bytes": np.concatenate([np.zeros(2 + n, np.int64), layer_bytes[::-1], np.zeros(1, np.int64)]),
        "comm_labels": labels,
        "comm_layer": np.array(comm_layer, dtype=object),
        "names": {},  # task names per iteration and worker (`task_names`), filled as asked
        "rows": {},  # one row's columns but the times, per number of iterations (`row_columns`)
    }
    for value in static.values():
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    static["cells"] = sum(len(v) for v in static.values() if isinstance(v, (np.ndarray, tuple)))
    static["kept"] = False  # (`_keep_static`)
    return static


def task_names(static: dict, tails: str, head: str) -> np.ndarray:
    """``head`` + each of ``static[tails]``, as a read-only object array (kept in ``static`` per
    head: a timeline names the same tasks every run; the columns concatenate copies of it)."""
    kept = static["names"]
    got = kept.get((tails, head))
    if got is None:
        got = np.array([head + tail for tail in static[tails]], dtype=object)
        got.flags.writeable = False
        _keep_derived(static, "names", (tails, head), got, got.size)
    return got


def row_columns(run, static: dict, r: int, n_it: int, comm_row: int) -> dict:
    """One worker's tasks (``r``, shown as worker 0), then the messages (``comm_row``), of ``run``:
    `worker_columns` then `comm_columns`, the columns other than the times kept in ``static``
    per number of iterations (read-only: the frame copies them)."""
    shared = static["rows"].get(n_it)
    if shared is None:
        parts = [worker_columns(run, static, r, n_it, False), comm_columns(run, static, comm_row, n_it, -1)]
        shared = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
        del shared["start_s"], shared["end_s"]
        for value in shared.values():
            value.flags.writeable = False
        _keep_derived(static, "rows", n_it, shared, sum(v.size for v in shared.values()))
    start, end = worker_times(run, r, n_it)
    return {**shared, "start_s": np.concatenate([start, run.comm_start_s[comm_row, :n_it].ravel()]),
            "end_s": np.concatenate([end, run.comm_end_s[comm_row, :n_it].ravel()])}


def worker_times(run, r: int, n_it: int) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of worker ``r``'s io, h2d, forward, backward and update, iteration by iteration."""
    fwd_end, bwd_end = run.fwd_end_s[r, :n_it], run.bwd_end_s[r, :n_it]
    start = np.concatenate([run.io_start_s[r, :n_it, None], run.h2d_start_s[r, :n_it, None],
                            run.fwd_start_s[r, :n_it, None], fwd_end[:, :-1], fwd_end[:, -1:], bwd_end[:, :-1],
                            run.update_start_s[r, :n_it, None]], axis=1).ravel()
    end = np.concatenate([run.io_end_s[r, :n_it, None], run.h2d_end_s[r, :n_it, None], fwd_end, bwd_end,
                          run.update_end_s[r, :n_it, None]], axis=1).ravel()
    return start, end


def worker_columns(run, static: dict, r: int, n_it: int, named: bool) -> dict:
    """One worker's io, h2d, forward, backward and update of ``run`` (a `FastRun`), iteration by iteration."""
    per_it = len(static["kind"])
    who = f"w{r}/" if named and r > 0 else ""
    start, end = worker_times(run, r, n_it)
    names = [task_names(static, "kind_tail", f"it{k}/{who}") for k in range(n_it)]
    return {
        "iteration": np.repeat(np.arange(n_it, dtype=np.int64), per_it),
        "worker": np.full(per_it * n_it, r if named else 0, dtype=np.int64),
        "lane": np.tile(static["lane"], n_it), "kind": np.tile(static["kind"], n_it),
        "name": np.concatenate(names), "layer": np.tile(static["layer"], n_it),
        "message": np.tile(static["message"], n_it), "start_s": start, "end_s": end,
        "bytes": np.tile(static["bytes"], n_it),
    }


def comm_columns(run, static: dict, r: int, n_it: int, worker: int) -> dict:
    """The messages of row ``r`` of ``run``, iteration by iteration (shared by all workers)."""
    n_msg = len(run.groups)
    return {
        "iteration": np.repeat(np.arange(n_it, dtype=np.int64), n_msg),
        "worker": np.full(n_msg * n_it, worker, dtype=np.int64),
        "lane": np.full(n_msg * n_it, "comm", dtype=object),
        "kind": np.full(n_msg * n_it, "comm", dtype=object),
        "name": np.concatenate([task_names(static, "comm_labels", f"it{k}/comm/") for k in range(n_it)]),
        "layer": np.tile(static["comm_layer"], n_it),
        "message": np.tile(np.arange(n_msg, dtype=np.int64), n_it),
        "start_s": run.comm_start_s[r, :n_it].ravel(), "end_s": run.comm_end_s[r, :n_it].ravel(),
        "bytes": np.tile(np.asarray(run.group_bytes, np.int64), n_it),
    }
