"""The all-gathers of sharded data parallelism, as a part of the lowering.

ZeRO (Rajbhandari, Rasley, Ruwase and He, "ZeRO: Memory Optimizations
Toward Training Trillion Parameter Models", SC 2020, Sec. 5 and 7) and
PyTorch FSDP (Zhao et al., VLDB 2023) replace the all-reduce of plain data
parallelism by its two halves (`sim.core.cost`: each takes T(M) / 2):

* stages 1 and 2 (``Plan.shard`` ``"optimizer"``, ``"gradients"``): a
  reduce-scatter of each message as its gradients are ready (on the channel,
  overlapping backward), the update of each GPU's shard once every
  reduce-scatter is done, then an all-gather of each message's updated
  parameters; the next forward waits for all of them (DeepSpeed gathers the
  updated partitions in its ``step``). Per iteration 2 Psi bytes move, as
  with an all-reduce.
* stage 3 (``"parameters"``, FSDP full-shard): each message is a unit whose
  parameters live sharded. Before a unit's forward its parameters are
  all-gathered; the gather of unit u is issued when the forward of unit
  u - 1 starts (one unit of prefetch, FSDP's ``forward_prefetch`` and
  ``limit_all_gathers``): in the graph it waits for the end of unit u - 2's
  forward, the first two units' for the iteration's start (the previous
  update and the batch on the GPU). Before a unit's backward its parameters
  are gathered again, issued when the backward of the unit after it starts
  (``BACKWARD_PRE`` prefetch), except the last unit's, which stay gathered
  from its forward into its backward (DeepSpeed keeps parameters reused
  within ``stage3_max_reuse_distance``; FSDP does not reshard the root).
  Gradients are reduce-scattered unit by unit as backward produces them.
  Per iteration about 3 Psi bytes move. The very first iteration gathers its
  parameters too (they live sharded from the start), so every iteration has
  the steady state's steps and two iterations time its period.

On the channel, among released tasks: forward all-gathers, then backward
all-gathers (the GPU waits for them), then reduce-scatters, then the
all-gathers after the update, each in unit order; earlier iterations first.

Simplification: the optimizer step keeps the model's ``update_s`` (the
schedulers do not know P, so the 1/P share of the update is not timed).
"""

from __future__ import annotations

import numpy as np

from sim.core.plan import SHARD_GRADIENTS, SHARD_OPTIMIZER, SHARD_PARAMETERS
from sim.core.taskgraph import TAGS, Carry

__all__ = ["GATHER_BACKWARD", "GATHER_FORWARD", "GATHER_UPDATED", "REDUCE_SCATTER", "ShardedSteps", "shard_key"]

#: Channel ranks of a sharded plan's steps within one iteration (smaller goes first).
GATHER_FORWARD, GATHER_BACKWARD, REDUCE_SCATTER, GATHER_UPDATED = 0, 1, 2, 3
#: The worker of a shared (communication) task, as in `sim.core.lower`.
_SHARED = -1


def shard_key(k: int, rank: int, order: int, part: int = 0) -> tuple:
    """A sharded plan's channel key: iteration, step rank, unit order, part."""
    return (k, rank, order, part)


class ShardedSteps:
    """The lowering's steps for sharded plans (a mixin of `sim.core.lower`'s lowering).

    Reads the lowering's ``g`` (the graph), ``msgs``, ``plan``, ``times``,
    ``carry``, ``forwards`` (per worker: its h2d task and forward tasks of
    the iteration being built) and ``comm_s``.
    """

    def gathers_after_update(self) -> bool:
        return self.plan.shard in (SHARD_OPTIMIZER, SHARD_GRADIENTS)

    def gathers_parameters(self) -> bool:
        return self.plan.shard == SHARD_PARAMETERS

    def gather_times_s(self, k: int) -> np.ndarray:
        """The time of an all-gather of each whole message in iteration k."""
        if getattr(self, "_gather_s", None) is None:
            self._gather_s = self.msgs.message_step_times_s(self.cost, "all-gather")
        scale = self.times.comm_scale
        return self._gather_s if scale is None else self._gather_s * np.asarray(scale[k], dtype=float)

    def gathers(self, k: int, units: np.ndarray, rank: int, orders, what: str) -> np.ndarray:
        """All-gathers of messages ``units`` (in this order) on the channel, with unit orders ``orders``."""
        return self.g.add_block(len(units), k, _SHARED, "comm", "comm", self.gather_times_s(k)[units],
                                message=units, nbytes=self.msgs.nbytes[units], key=shard_key(k, rank, orders),
                                tag=TAGS.index(what))

    def units(self) -> np.ndarray:
        """The messages (units) in forward order: by their layer nearest the input."""
        return np.argsort(self.msgs.low, kind="stable")

    def gather_parameters(self, k: int, chains) -> None:
        """Stage 3: the all-gathers before each unit's forward and before its
        backward, with their prefetch edges."""
        m, units, W = self.msgs, self.units(), self.times.workers
        low, high = m.low[units], m.high[units]  # each unit's first and last layer, in forward order
        count = len(units)
        g = self.g
        ags = self.gathers(k, units, GATHER_FORWARD, np.arange(count), "all-gather-fwd")
        for w in range(W):
            _, h2d, fwd = self.forwards[w]
            # the first two issued as the iteration starts (the updated shards, the batch on the GPU; the
            # first iteration's shards as initialised), unit p's as unit p - 1's forward starts
            first = ags[:2]
            starts = [h2d] if self.carry is None else [self.carry[w].step_done, h2d]
            g.edges(np.repeat(starts, len(first)), np.tile(first, len(starts)))
            g.edges(fwd[high[:-2]], ags[2:])
            g.edges(ags, fwd[low])
        last = count - 1
        if last < 1:
            return
        p = np.arange(last - 1, -1, -1)
        ags = self.gathers(k, units[p], GATHER_BACKWARD, last - p, "all-gather-bwd")
        for w in range(W):
            _, _, fwd = self.forwards[w]
            bwd = chains[w]
            # issued as unit p + 1's backward starts: after the forward of the last
            # unit, or after the backward of unit p + 2
            g.edges(np.append(fwd[high[last]], bwd[low[p[1:] + 2]]), ags)
            g.edges(ags, bwd[high[p]])

    def gather_updated(self, k: int, single: list[int], chains) -> list:
        """Stages 1 and 2: the all-gathers of the updated parameters after the
        update; the next forward waits for all of them. Returns the carry."""
        count = len(self.msgs)
        every = np.arange(count, dtype=np.int64)
        gathers = self.gathers(k, every, GATHER_UPDATED, every, "all-gather")
        self.g.edges(np.tile(np.asarray(single, dtype=np.int64), count), np.repeat(gathers, len(single)))
        W = self.times.workers
        done = int(gathers[-1]) if count else None
        return [Carry(np.concatenate([[single[w]], gathers]).astype(np.int64), np.zeros(1 + count, dtype=np.int64),
                      single[w] if done is None else done, chains[w][-1]) for w in range(W)]
