"""DeAR's step after a backward pass, on one worker's plain pipeline (`sim.core.pipeline`): its updates
and the next forward pass on the compute lane, its all-gathers on the channel, round by round as the
event loop (`sim.core.engine`) goes, to the bit."""

from __future__ import annotations

import heapq

import numpy as np

from sim.core import replay
from sim.core.replay import by_value

__all__ = ["decoupled_step", "replayed_step", "timed_step"]  # (its ``steps`` and ``ctx`` are `sim.core.pipeline`'s)

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


def timed_step(it, nxt, release: np.ndarray, steps, ctx, channel_free: float, k: int):
    """`decoupled_step` of iteration k, from the orders its lanes ran in before where they hold
    (`replayed_step`); the orders are kept for the next time."""
    got = replayed_step(steps.guesses(k, "decoupled"), it, nxt, release, steps, ctx, channel_free)
    if got is not None:
        steps.orders[k, "decoupled"] = got[0]
        return got[1]
    free = decoupled_step(it, nxt, release.tolist(), steps, ctx, channel_free)
    if free is not None and replay.ENABLED:
        comp = np.concatenate([it["ups"], nxt["fwd"] if nxt is not None else np.zeros(0, np.int64)])
        steps.orders[k, "decoupled"] = tuple(replay.order_of(ctx.start[x], ctx.end[x]) for x in (comp, it["ags"]))
    return free


#: Rounds of timing one lane from the other's ends before a guessed pair of orders is dropped.
_PASSES = 8


def replayed_step(guesses, it, nxt, release: np.ndarray, steps, ctx, channel_free: float):
    """`decoupled_step` from a guessed pair of orders (compute lane: the updates by index, then the
    forwards; the channel: the all-gathers by part), `sim.core.replay`: each lane timed from the other's
    ends until neither moves, then both checked against the rule (`_keys_hold`). Writes the times and
    returns ``(orders, when the channel is free)``, or None."""
    fwd = nxt["fwd"] if nxt is not None else np.zeros(0, np.int64)
    comp, ags = np.concatenate([it["ups"], fwd]), it["ags"]
    dur_c, dur_a = ctx.duration[comp], ctx.duration[ags]
    u_count, n_msg, part_msg = len(it["ups"]), len(steps.msg_sizes), steps.part_msg
    ups_msg, fwd_msg = it["ups_msg"], steps.layer_msg[:len(fwd)]
    if not np.all(dur_c >= 0) or np.any((np.bincount(ups_msg, minlength=n_msg) == 0) & (steps.msg_parts > 0)):
        return None
    t0 = ctx.E[int(it["bwd"][0])]
    first_ready = max(ctx.E[int(nxt["h2d"])], t0) if nxt is not None else _INF
    has = np.flatnonzero(fwd_msg >= 0)
    for guess in guesses:
        if guess is None or len(guess[0]) != len(comp) or len(guess[1]) != len(ags):
            continue
        gc, ga = guess
        if np.any(np.diff(gc[gc >= u_count]) <= 0):
            continue  # the forwards out of order
        ag_done = np.full(n_msg, -_INF)
        for _ in range(_PASSES):
            rel_c = np.concatenate([release, np.full(len(fwd), -_INF)])
            if len(fwd):
                rel_c[u_count] = first_ready
                rel_c[u_count + has] = np.maximum(rel_c[u_count + has], ag_done[fwd_msg[has]])
            lane_c = replay.scan(rel_c[gc], dur_c[gc], t0)
            if lane_c is None:
                break
            end_c = np.empty(len(comp))
            end_c[gc] = lane_c[1]
            up_done = np.full(n_msg, -_INF)
            np.maximum.at(up_done, ups_msg, end_c[:u_count])
            lane_a = replay.scan(up_done[part_msg][ga], dur_a[ga], channel_free)
            if lane_a is None:
                break
            done = np.full(n_msg, -_INF)
            np.maximum.at(done, part_msg[ga], lane_a[1])
            if not np.array_equal(done, ag_done):
                ag_done = done
                continue
            if _keys_hold(guess, lane_c, lane_a, (rel_c, t0, channel_free), (ups_msg, part_msg), ctx.rank[ags],
                          u_count):
                ctx.start[comp[gc]], ctx.end[comp[gc]] = lane_c
                ctx.start[ags[ga]], ctx.end[ags[ga]] = lane_a
                return guess, float(lane_a[1][-1]) if len(ags) else channel_free
            break
    return None


def _keys_hold(orders, lane_c, lane_a, at, msgs, ag_rank: np.ndarray, u_count: int) -> bool:
    """Both lanes' times (in their orders) are the list schedule of `decoupled_step`, an instant split
    into the rounds that tasks of no duration make: a release and a start are keys (time, round); a task
    that ends as it starts ends a round later, and what it releases is released then."""
    (gc, ga), (s_c, e_c), (s_a, e_a), (rel_c, t0, channel_free) = orders, lane_c, lane_a, at
    ups_msg, part_msg = msgs
    if np.any(e_a <= s_a) or np.any(e_c[gc >= u_count] <= s_c[gc >= u_count]):
        return False  # an all-gather or a forward that ends as it starts
    width = len(gc) + 3
    parts = (s_c, e_c, s_a, e_a, rel_c, [t0, channel_free])
    every = np.concatenate(parts)
    by_time = np.argsort(every, kind="stable")  # (runs already in order: mostly a merge)
    ordered = every[by_time]
    dense = np.empty(len(every), dtype=np.int64)  # each time's place among the distinct times
    dense[by_time] = np.cumsum(np.concatenate([[1], ordered[1:] != ordered[:-1]]))
    cuts = np.cumsum([0] + [len(x) for x in parts])
    (ts_c, te_c, ts_a, te_a, t_rel, t_at) = (dense[a:b] * width for a, b in zip(cuts[:-1], cuts[1:], strict=True))
    n = len(gc)
    zero = e_c == s_c
    cut = np.ones(n, bool)  # where the rounds start again: after a task that took time, or an idle lane
    cut[1:] = (s_c[1:] > e_c[:-1]) | ~zero[:-1]
    pos = np.arange(n)
    rnd = pos - np.maximum.accumulate(np.where(cut, pos, 0)) + 1
    k_c, end_c = ts_c + rnd, np.where(zero, ts_c + rnd + 1, te_c + 1)
    end_of = np.empty(n, dtype=np.int64)
    end_of[gc] = end_c
    ready = t_rel + 1  # an update's release; a forward's first_ready and all-gathers, and the forward before
    ready[u_count + 1:] = np.maximum(ready[u_count + 1:], end_of[u_count:-1])
    if np.any(k_c < ready[gc]) or not replay.is_list_schedule(k_c, end_c, ready[gc], gc, int(t_at[0] + 1)):
        return False
    up_key = np.zeros(int(max(ups_msg.max(initial=0), part_msg.max(initial=0))) + 1, dtype=np.int64)
    np.maximum.at(up_key, ups_msg, end_of[:u_count])
    ready_a, end_a, free = up_key[part_msg][ga], te_a + 1, int(t_at[1] + 1)
    k_a = np.maximum(np.concatenate([[free], end_a[:-1]]), ready_a)
    return bool(np.all(k_a // width == ts_a // width)) and replay.is_list_schedule(
        k_a, end_a, ready_a, ag_rank[ga], free)
