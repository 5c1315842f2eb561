"""A plan's messages and their parts as arrays, for the lowering (`sim.core.lower`).

One row per message (its layers, bytes, layer nearest the input, lag) and
one per part of a message (``Plan.partition_bytes``): the message, the part's
number and bytes, and whether it is the whole message. The time of each
step of each part comes from the cost (`sim.core.cost`), asked once per
distinct (message, size) and vectorised for the plain affine and
parameter-server costs, whose `step_time_s` is their ``time_s`` elementwise.
"""

from __future__ import annotations

import itertools
from functools import cached_property

import numpy as np

from sim.core.cost import CommCost, PSCost

__all__ = ["ELIDED", "PART_LABEL_LAYERS", "Messages", "part_count", "parts_of"]

#: A part of a message of more layers than this names the message by its first and last layer.
PART_LABEL_LAYERS = 3
#: What stands for the layers between a long message's first and last in its part names (`Messages.part_labels`).
ELIDED = "+...+"


def parts_of(nbytes: int, partition_bytes: int) -> list[int]:
    """Sizes of the parts of an ``nbytes`` message: full partitions, then the rest.

    >>> parts_of(10, 4)
    [4, 4, 2]
    """
    if partition_bytes <= 0 or nbytes <= partition_bytes:
        return [int(nbytes)]
    full, rest = divmod(int(nbytes), int(partition_bytes))
    return [int(partition_bytes)] * full + ([rest] if rest else [])


def part_count(groups, layer_bytes, partition_bytes: int) -> int:
    """How many parts the messages ``groups`` are cut into, from their sizes alone (no part is built)."""
    layer_bytes = np.asarray(layer_bytes).astype(np.int64)
    sizes = np.fromiter(map(len, groups), dtype=np.int64, count=len(groups))
    flat = np.fromiter(itertools.chain.from_iterable(groups), dtype=np.int64, count=int(sizes.sum()))
    nbytes = np.zeros(len(groups), dtype=np.int64)
    nonempty = sizes > 0
    if nonempty.any():
        nbytes[nonempty] = np.add.reduceat(layer_bytes[flat], (np.cumsum(sizes) - sizes)[nonempty])
    p = int(partition_bytes)
    if p <= 0:
        return len(groups)
    return int(np.where(nbytes > p, -(-nbytes // p), 1).sum())


class Messages:
    """The plan's messages (``groups``) and their parts, as arrays.

    Per message g: ``nbytes[g]``, ``low[g]`` and ``high[g]`` (its layers nearest and farthest from the input),
    ``lag_s[g]``, ``count[g]`` parts starting at row ``first_part[g]``. Per part
    p: ``part_msg[p]``, ``part_j[p]`` (its number), ``part_bytes[p]`` and
    ``part_whole[p]``; ``part_suffix[p]`` is its number or -1 for a whole message.
    """

    def __init__(self, groups, layer_bytes, names, partition_bytes: int, lag_s=()) -> None:
        self.groups, self.names = tuple(groups), names
        m = len(self.groups)
        self.sizes = np.fromiter((len(g) for g in self.groups), dtype=np.int64, count=m)
        self.member_first = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        flat = [i for g in self.groups for i in g]
        self.members = np.asarray(flat, dtype=np.int64)
        layer_bytes = np.asarray(layer_bytes).astype(np.int64)
        nonempty = self.sizes > 0
        self.nbytes = np.zeros(m, dtype=np.int64)
        self.low = np.zeros(m, dtype=np.int64)
        self.high = np.zeros(m, dtype=np.int64)
        if nonempty.any():
            starts = self.member_first[:-1][nonempty]
            self.nbytes[nonempty] = np.add.reduceat(layer_bytes[self.members], starts)
            self.low[nonempty] = np.minimum.reduceat(self.members, starts)
            self.high[nonempty] = np.maximum.reduceat(self.members, starts)
        self.lag_s = np.asarray(lag_s if lag_s else np.zeros(m), dtype=float)
        p = int(partition_bytes)
        split = (p > 0) & (self.nbytes > p)
        full, rest = (np.divmod(self.nbytes, p) if p > 0 else (np.ones(m, np.int64), np.zeros(m, np.int64)))
        self.count = np.where(split, full + (rest > 0), 1).astype(np.int64)
        self.first_part = np.concatenate([[0], np.cumsum(self.count)]).astype(np.int64)
        total = int(self.first_part[-1])
        self.part_msg = np.repeat(np.arange(m, dtype=np.int64), self.count)
        self.part_j = np.arange(total, dtype=np.int64) - self.first_part[:-1][self.part_msg]
        self.part_whole = ~split[self.part_msg]
        last = self.part_j == self.count[self.part_msg] - 1
        self.part_bytes = np.where(self.part_whole, self.nbytes[self.part_msg],
                                   np.where(last & (rest[self.part_msg] > 0), rest[self.part_msg], p))
        self.part_suffix = np.where(self.part_whole, -1, self.part_j)

    def __len__(self) -> int:
        return len(self.groups)

    @property
    def parts(self) -> int:
        return len(self.part_msg)

    @cached_property
    def labels(self) -> list[str]:
        """Each message's name: its layers' names joined by ``+``."""
        return ["+".join(self.names[i] for i in g) for g in self.groups]

    @cached_property
    def part_labels(self) -> list[str]:
        """Each message's name in the names of its parts: its label, or for a message of more than
        `PART_LABEL_LAYERS` layers its first and last layer (``"l0+...+l99"``), so that a timeline of
        many parts of one large message does not repeat its whole label in every part's name."""
        return [label if len(g) <= PART_LABEL_LAYERS else f"{self.names[g[0]]}{ELIDED}{self.names[g[-1]]}"
                for g, label in zip(self.groups, self.labels, strict=True)]

    def step_times_s(self, cost, step: str) -> np.ndarray:
        """The time of ``step`` for every part (`sim.core.cost` ``step_time_s``, to the bit)."""
        b = self.part_bytes
        if step == "launch":
            return np.full(len(b), float(cost.launch_s))
        if step == "transfer":  # the all-reduce less its launch, whatever times the all-reduce
            return self.step_times_s(cost, "allreduce") - cost.launch_s
        if type(cost) is PSCost and step in ("push", "pull"):
            return np.asarray(cost.push_time_s(b) if step == "push" else cost.pull_time_s(b), dtype=float)
        if type(cost) is CommCost and step in ("reduce-scatter", "all-gather"):
            return 0.5 * np.asarray(cost.time_s(b), dtype=float)
        if type(cost) is CommCost and step == "allreduce":
            return np.asarray(cost.time_s(b), dtype=float)
        out = np.empty(len(b))
        seen: dict = {}
        for p, (g, nbytes, whole) in enumerate(zip(self.part_msg.tolist(), b.tolist(), self.part_whole.tolist(),
                                                   strict=True)):
            t = seen.get((g, nbytes, whole))
            if t is None:
                t = seen[(g, nbytes, whole)] = cost.step_time_s(step, self.groups[g], nbytes, whole=whole)
            out[p] = t
        return out

    def message_step_times_s(self, cost, step: str) -> np.ndarray:
        """The time of ``step`` of every whole message (`sim.core.cost` ``step_time_s``, to the bit)."""
        if type(cost) is CommCost and step in ("reduce-scatter", "all-gather"):
            return 0.5 * np.asarray(cost.time_s(self.nbytes), dtype=float)
        return np.array([cost.step_time_s(step, g, nbytes, whole=True)
                         for g, nbytes in zip(self.groups, self.nbytes.tolist(), strict=True)], dtype=float)

    def gradient_sources(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The layers whose backward releases each part: (layer, part, lag) per edge.

        A message's first part waits for every layer of the message (the lag on
        the edge from its layer nearest the input, whose backward ends last);
        its further parts, released at the same instant, wait for that layer only.
        """
        m = len(self.groups)
        msg_of_member = np.repeat(np.arange(m, dtype=np.int64), self.sizes)
        first_layers = self.members
        first_parts = self.first_part[:-1][msg_of_member]
        first_lag = np.where(self.members == self.low[msg_of_member], self.lag_s[msg_of_member], 0.0)
        rest = np.flatnonzero(self.part_j > 0)
        rest_msg = self.part_msg[rest]
        return (np.concatenate([first_layers, self.low[rest_msg]]), np.concatenate([first_parts, rest]),
                np.concatenate([first_lag, self.lag_s[rest_msg]]))
