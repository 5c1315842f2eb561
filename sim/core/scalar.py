"""The fast path's recurrences for one row, on Python floats.

`sim.core.fast.evaluate` steps numpy arrays over K rows; with one row (one
`simulate`, one round of interference) numpy's per-call cost dominates, so
this module runs the same recurrences (`sim.core.fast` documents them) on
floats: the same maxima and the same additions in the same order, hence the
same bits, and returns the arrays `sim.core.fast.FastRun` holds.
"""

from __future__ import annotations

import functools
import operator
import struct
from bisect import bisect_left, bisect_right
from itertools import accumulate, repeat
from typing import NamedTuple

import numpy as np

from sim.core.channel import channel_row
from sim.core.overlap import hidden_row_s

__all__ = ["LastRow", "evaluate_row", "row_phase_metrics", "single_gpu_period_s"]

#: The per-iteration scalars `evaluate_row` returns, in the order it records them (the forward
#: pass's start last: it, the forward ends and the backward ends are one run of numbers).
_SCALARS = ("io_start_s", "io_end_s", "h2d_start_s", "h2d_end_s", "update_start_s", "update_end_s", "fwd_start_s")


class LastRow(NamedTuple):
    """The last iteration of a one-row run as `evaluate_row` recorded it, for `row_phase_metrics`:
    ``compute`` (1, 1 + 2n), the forward's start, the forward ends and the backward ends; ``comm``
    (1, 2 messages), the messages' starts then ends; the same starts and ends as Python floats."""

    n: int
    compute: np.ndarray
    comm: np.ndarray
    c_start: list
    c_end: list
    io_s: float
    h2d_s: float
    update_start_s: float
    update_end_s: float
    backward_end_s: float


def running_ends(start: float, durations: list[float]) -> list[float]:
    """Ends of tasks run back to back from ``start``: ``end[i] = end[i-1] + d[i]``, added in order."""
    ends = list(accumulate(durations, initial=start))
    del ends[0]
    return ends


@functools.lru_cache(maxsize=64)
def _packer(count: int) -> struct.Struct:
    """Packs ``count`` floats as doubles (faster than ``array("d", ...)`` or numpy from a list; the same values)."""
    return struct.Struct(f"{count}d")


def evaluate_row(fwd_s: list[float], bwd_rev_s: list[float], io_s: float, h2d_s: float, update_s: float,
                 t_c_s: list[float], lowest_at: list[int], lag_s: list[float] | None, after_backward: bool,
                 iterations: int, prefetch: bool, comm_k1: float = 1.0) -> dict[str, np.ndarray]:
    """Task times of ``iterations`` iterations of one row, as ``FastRun`` fields of shape (1, ...)
    (and ``last``, the `LastRow` of the last iteration, None without layers or messages).

    ``bwd_rev_s`` runs in backward order (layer n-1 first); ``lowest_at`` is each
    message's lowest layer's position in that order, ``lag_s`` its release lag (None: none);
    ``comm_k1``: ``1 + comm_slowdown`` (`sim.core.channel.slowed_end`).
    """
    n, n_b, n_msg = len(fwd_s), len(bwd_rev_s), len(t_c_s)
    flat: list[float] = []  # per iteration: the scalars, forward ends, backward ends, message starts and ends
    io_end = h2d_end = update_end = free = -np.inf
    c_start = c_end = ()
    for k in range(iterations):
        io_start = 0.0 if k == 0 else io_end if prefetch else max(update_end, io_end)
        io_end = io_start + io_s
        h2d_start = io_end if k == 0 else max(io_end, h2d_end)
        h2d_end = h2d_start + h2d_s
        fwd_start = h2d_end if k == 0 else max(h2d_end, update_end)
        fwd_end = running_ends(fwd_start, fwd_s)
        bwd_end = running_ends(fwd_end[-1] if fwd_end else fwd_start, bwd_rev_s)
        done = bwd_end[-1] if bwd_end else fwd_end[-1] if fwd_end else fwd_start
        if n_msg:
            ready = list(map(bwd_end.__getitem__, lowest_at))  # the lowest layer's gradient is ready
            if lag_s is not None:  # released lag_s after (x + 0.0 is x: no lag needs no sum)
                ready = [r + lag for r, lag in zip(ready, lag_s, strict=True)]
            if after_backward:
                ready = [r if r > done else done for r in ready]
            c_start, c_end = channel_row(free, ready, t_c_s, None, None if comm_k1 == 1.0 else (done, comm_k1))
            free = max(c_end)
            update_start = max(done, free)
        else:
            update_start = done
        update_end = update_start + update_s
        flat += (io_start, io_end, h2d_start, h2d_end, update_start, update_end, fwd_start)
        flat += fwd_end
        flat += bwd_end
        flat += c_start
        flat += c_end
    # one conversion (packed as doubles: the same values), into a writable buffer
    per_it = np.frombuffer(bytearray(_packer(len(flat)).pack(*flat)), dtype=np.float64).reshape(1, iterations, -1)
    out = {key: per_it[:, :, i] for i, key in enumerate(_SCALARS)}
    cut = (len(_SCALARS), len(_SCALARS) + n, len(_SCALARS) + n + n_b, len(_SCALARS) + n + n_b + n_msg)
    for key, lo, hi in zip(("fwd_end_s", "bwd_end_s", "comm_start_s"), cut[:-1], cut[1:], strict=True):
        out[key] = per_it[:, :, lo:hi]
    out["comm_end_s"] = per_it[:, :, cut[3]:]
    last = per_it[:, -1]
    out["last"] = LastRow(n, last[:, cut[0] - 1:cut[2]], last[:, cut[2]:], c_start, c_end, io_end - io_start,
                          h2d_end - h2d_start, update_start, update_end, done) if n and n_msg and n == n_b else None
    return out


def row_phase_metrics(last: LastRow) -> dict[str, np.ndarray] | None:
    """`sim.core.fast.FastRun.phase_metrics` of a one-row run from its `LastRow`: the same
    differences, sums (numpy's, over the same arrays), maxima and additions in the same order,
    so the same bits; None when its messages did not run in plan order (the arrays' way then)."""
    c_start, c_end, n = last.c_start, last.c_end, last.n
    if not (all(map(operator.le, c_start, c_start[1:])) and all(map(operator.le, c_end, c_end[1:]))):
        return None
    compute, m = last.compute, len(c_start)
    forward = np.subtract(compute[:, 1:n + 1], compute[:, :n]).sum(axis=1)
    backward = np.subtract(compute[:, n + 1:], compute[:, n:-1]).sum(axis=1)
    comm = np.subtract(last.comm[:, m:], last.comm[:, :m]).sum(axis=1)
    after, until = last.backward_end_s, last.update_start_s
    span = until - after
    wait = (span if span >= 0.0 else 0.0) - _covered_s(c_start, c_end, after, until)
    wait = wait if wait >= 0.0 else 0.0
    comm = comm + wait
    hidden = np.minimum(hidden_row_s(c_start, c_end, after), comm)
    update = last.update_end_s - last.update_start_s
    return {
        "compute_s": forward + backward + update, "forward_s": forward, "backward_s": backward,
        "update_s": np.array([update]), "io_s": np.array([last.io_s]), "h2d_s": np.array([last.h2d_s]),
        "comm_s": comm, "comm_hidden_s": hidden, "comm_exposed_s": np.maximum(comm - hidden, 0.0),
        "comm_wait_s": np.array([wait]),
    }


def _piece(start: float, end: float, after: float, until: float) -> float:
    lo = start if start >= after else after
    hi = end if end <= until else until
    return hi - lo if hi > lo else 0.0


def _covered_s(c_start: list, c_end: list, after: float, until: float) -> float:
    """`sim.core.overlap.wait_s`'s time on the wire within [after, until] of one row's messages (in
    time order): its pieces summed in order, those outside the span (0.0) skipped; a message inside
    the span whole (all but the first and the last, when the second starts after ``after`` and the
    last but one ends by ``until``) adds its end - start."""
    i0, i1 = bisect_right(c_end, after), bisect_left(c_start, until)
    if i1 - i0 > 2 and c_start[i0 + 1] >= after and c_end[i1 - 2] <= until:
        inner = list(map(operator.sub, c_end[i0 + 1:i1 - 1], c_start[i0 + 1:i1 - 1]))
        if min(inner) >= 0.0:
            first = _piece(c_start[i0], c_end[i0], after, until)
            return functools.reduce(operator.add, inner, first) + _piece(c_start[i1 - 1], c_end[i1 - 1], after, until)
    return functools.reduce(operator.add, map(_piece, c_start[i0:i1], c_end[i0:i1], repeat(after), repeat(until)), 0.0)


def single_gpu_period_s(io_s: float, h2d_s: float, update_s: float, fwd_s: list, bwd_rev_s: list,
                        prefetch: bool, update_overlaps_io: bool = False) -> float:
    """Two iterations on one GPU, as `sim.core.fast.evaluate` times them (the same maxima and the
    same additions in the same order, so the same bits), on Python floats: the period between
    the two updates' ends.

    ``update_overlaps_io``: the framework's step returns once backward has ended and the next
    batch is read while the GPU updates (the per-layer-update plans of ByteScheduler and DeAR,
    `sim.core.lower`); without prefetch the next read starts at the end of backward, not of the
    update. The one-GPU reference of such a plan, so that its speedup compares like with like."""
    io_end = h2d_end = update_end = backward_end = 0.0
    ends = []
    for k in range(2):
        step_end = backward_end if update_overlaps_io else update_end
        io_start = 0.0 if k == 0 else io_end if prefetch else max(step_end, io_end)
        io_end = io_start + io_s
        h2d_end = (io_end if k == 0 else max(io_end, h2d_end)) + h2d_s
        t = h2d_end if k == 0 else max(h2d_end, update_end)
        for d in fwd_s:
            t += d
        for d in bwd_rev_s:
            t += d
        backward_end = t
        update_end = t + update_s
        ends.append(update_end)
    return ends[1] - ends[0]
