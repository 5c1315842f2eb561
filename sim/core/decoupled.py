"""DeAR's step after a backward pass, on one worker's plain pipeline (`sim.core.pipeline`): its updates
and the next forward pass on the compute lane, its all-gathers on the channel, round by round as the
event loop (`sim.core.engine`) goes, to the bit."""

from __future__ import annotations

import heapq

import numpy as np

from sim.core.replay import by_value

__all__ = ["decoupled_step"]  # (its ``steps`` and ``ctx`` are `sim.core.pipeline`'s)

_INF = float("inf")


def decoupled_step(it, nxt, release: list, steps, ctx, channel_free: float):
    """DeAR after iteration k's backward pass: its updates (released at ``release``, as their reduce-scatters
    end) and iteration k + 1's forward pass on the compute lane, its all-gathers on the channel (free from
    ``channel_free`` on). Round by round as the event loop goes: what ends now releases its successors,
    then each idle lane starts its released task of smallest rank (one of no duration ends in a later
    round of the instant). Returns when the channel is free; None if some task was never released."""
    S, E, D = ctx.S, ctx.E, ctx.D
    push, pop = heapq.heappush, heapq.heappop
    ups, ups_msg, ags, first_part, part_msg, left_ups, left_ags, fwd, fwd_msg = _as_lists(
        it["ups"], it["ups_msg"], it["ags"], steps.first_part, steps.part_msg, steps.msg_sizes, steps.msg_parts,
        nxt["fwd"] if nxt is not None else np.zeros(0, np.int64), steps.layer_msg)
    order, rel = by_value(np.asarray(release))
    ag_key, by_rank = _small_ranks(ctx.rank[it["ags"]])  # the all-gathers' ranks as 0, 1, ...
    now = E[int(it["bwd"][0])]
    first_ready = max(E[int(nxt["h2d"])], now) if nxt is not None else _INF  # the first forward's other predecessors
    count, n_fwd, inf = len(ups), len(fwd), _INF
    c_task, c_u, h_task, c_end, fwd_free, upd, agq, p, i = -1, -1, -1, inf, True, [], [], 0, 0
    while True:
        if c_task >= 0 and c_end == now:  # what ends now releases its successors
            if c_u >= 0:
                g = ups_msg[c_u]
                left_ups[g] -= 1
                if not left_ups[g]:
                    for j in range(first_part[g], first_part[g + 1]):
                        push(agq, ag_key[j])
            else:
                fwd_free = True
            c_task = -1
        if h_task >= 0 and channel_free == now:
            left_ags[part_msg[h_task]] -= 1
            h_task = -1
        while p < count and rel[p] <= now:
            push(upd, order[p])
            p += 1
        if c_task < 0:  # the compute lane: a released update, else the next forward once released
            if upd:
                c_u = pop(upd)
                c_task = ups[c_u]
            elif i < n_fwd and fwd_free and (i or first_ready <= now) and (
                    fwd_msg[i] < 0 or not left_ags[fwd_msg[i]]):
                c_u, c_task, fwd_free = -1, fwd[i], False
                i += 1
            if c_task >= 0:
                S[c_task] = now
                E[c_task] = c_end = now + D[c_task]
        if h_task < 0 and agq and channel_free <= now:  # the channel: the released all-gather of smallest rank
            h_task = by_rank[pop(agq)]
            S[ags[h_task]] = now
            E[ags[h_task]] = channel_free = now + D[ags[h_task]]
        later = c_end if c_task >= 0 else inf  # the next instant something ends or is released
        if (h_task >= 0 or agq) and channel_free < later:  # (waiting all-gathers: the channel is busy until then)
            later = channel_free
        if p < count and rel[p] < later:
            later = rel[p]
        if not i and now < first_ready < later:
            later = first_ready
        if later == inf:
            break
        now = later
    return channel_free if i == n_fwd and p == count and not upd and not agq and not any(left_ags) else None


def _as_lists(*arrays) -> list:
    return [a.tolist() for a in arrays]


def _small_ranks(ranks: np.ndarray) -> tuple[list, list]:
    """Each position's place in increasing ``ranks`` (distinct), and the position at each place."""
    by_rank = np.argsort(ranks, kind="stable")
    key = np.empty(len(ranks), dtype=np.int64)
    key[by_rank] = np.arange(len(ranks))
    return key.tolist(), by_rank.tolist()
