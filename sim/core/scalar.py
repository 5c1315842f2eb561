"""The fast path's recurrences for one row, on Python floats.

`sim.core.fast.evaluate` steps numpy arrays over K rows; with one row (one
`simulate`, one round of interference) numpy's per-call cost dominates, so
this module runs the same recurrences (`sim.core.fast` documents them) on
floats: the same maxima and the same additions in the same order, hence the
same bits, and returns the arrays `sim.core.fast.FastRun` holds.
"""

from __future__ import annotations

from array import array
from itertools import accumulate

import numpy as np

from sim.core.channel import channel_row

__all__ = ["evaluate_row"]

#: The per-iteration scalars `evaluate_row` returns, in the order it records them.
_SCALARS = ("io_start_s", "io_end_s", "h2d_start_s", "h2d_end_s", "fwd_start_s", "update_start_s", "update_end_s")


def running_ends(start: float, durations: list[float]) -> list[float]:
    """Ends of tasks run back to back from ``start``: ``end[i] = end[i-1] + d[i]``, added in order."""
    ends = list(accumulate(durations, initial=start))
    del ends[0]
    return ends


def evaluate_row(fwd_s: list[float], bwd_rev_s: list[float], io_s: float, h2d_s: float, update_s: float,
                 t_c_s: list[float], lowest_at: list[int], lag_s: list[float] | None, after_backward: bool,
                 iterations: int, prefetch: bool, comm_k1: float = 1.0) -> dict[str, np.ndarray]:
    """Task times of ``iterations`` iterations of one row, as ``FastRun`` fields of shape (1, ...).

    ``bwd_rev_s`` runs in backward order (layer n-1 first); ``lowest_at`` is each
    message's lowest layer's position in that order, ``lag_s`` its release lag (None: none);
    ``comm_k1``: ``1 + comm_slowdown`` (`sim.core.channel.slowed_end`).
    """
    n, n_b, n_msg = len(fwd_s), len(bwd_rev_s), len(t_c_s)
    flat: list[float] = []  # per iteration: the scalars, forward ends, backward ends, message starts and ends
    io_end = h2d_end = update_end = free = -np.inf
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
            c_start = c_end = ()
            update_start = done
        update_end = update_start + update_s
        flat += (io_start, io_end, h2d_start, h2d_end, fwd_start, update_start, update_end)
        flat += fwd_end
        flat += bwd_end
        flat += c_start
        flat += c_end
    # one conversion (through a C array of doubles: the same values, faster than numpy's from a list)
    per_it = np.frombuffer(array("d", flat), dtype=np.float64).reshape(1, iterations, -1)
    out = {key: per_it[:, :, i] for i, key in enumerate(_SCALARS)}
    cut = np.cumsum([len(_SCALARS), n, n_b, n_msg, n_msg])
    for key, lo, hi in zip(("fwd_end_s", "bwd_end_s", "comm_start_s", "comm_end_s"), cut[:-1], cut[1:], strict=True):
        out[key] = per_it[:, :, lo:hi]
    return out
