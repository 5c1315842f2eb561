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
  Per iteration about 3 Psi bytes move. The very first iteration starts with
  its parameters gathered (as DeAR's first forward waits for no all-gather).

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

    def gather(self, k: int, gi: int, rank: int, order: int, what: str) -> int:
        """One all-gather of message gi's parameters on the channel."""
        b = int(self.msgs.nbytes[gi])
        t = self.cost.step_time_s("all-gather", self.msgs.groups[gi], b, whole=True)
        scale = self.times.comm_scale
        t = t if scale is None else t * float(scale[k, gi])
        return self.g.add(k, _SHARED, "comm", "comm", t, message=gi, nbytes=b, key=shard_key(k, rank, order),
                          tag=TAGS.index(what))

    def units(self) -> list[int]:
        """The messages (units) in forward order: by their layer nearest the input."""
        groups = self.msgs.groups
        return sorted(range(len(groups)), key=lambda gi: min(groups[gi]))

    def gather_parameters(self, k: int, chains) -> None:
        """Stage 3: the all-gathers before each unit's forward (from the second
        iteration on) and before its backward, with their prefetch edges."""
        groups, units, W = self.msgs.groups, self.units(), self.times.workers
        if self.carry is not None:
            for p, gi in enumerate(units):
                ag = self.gather(k, gi, GATHER_FORWARD, p, "all-gather-fwd")
                for w in range(W):
                    _, h2d, fwd = self.forwards[w]
                    if p < 2:  # issued as the iteration starts: the updated shards, the batch on the GPU
                        self.g.edge(self.carry[w].step_done, ag)
                        self.g.edge(h2d, ag)
                    else:  # issued as unit p - 1's forward starts
                        self.g.edge(fwd[max(groups[units[p - 2]])], ag)
                    self.g.edge(ag, fwd[min(groups[gi])])
        last = len(units) - 1
        for p in range(last - 1, -1, -1):
            gi = units[p]
            ag = self.gather(k, gi, GATHER_BACKWARD, last - p, "all-gather-bwd")
            for w in range(W):
                _, _, fwd = self.forwards[w]
                bwd = chains[w]
                # issued as unit p + 1's backward starts: after the forward of the last
                # unit, or after the backward of unit p + 2
                src = fwd[max(groups[units[last]])] if p == last - 1 else bwd[min(groups[units[p + 2]])]
                self.g.edge(src, ag)
                self.g.edge(ag, bwd[max(groups[gi])])

    def gather_updated(self, k: int, single: list[int], chains) -> list:
        """Stages 1 and 2: the all-gathers of the updated parameters after the
        update; the next forward waits for all of them. Returns the carry."""
        gathers = []
        for gi in range(len(self.msgs.groups)):
            ag = self.gather(k, gi, GATHER_UPDATED, gi, "all-gather")
            for u in single:
                self.g.edge(u, ag)
            gathers.append(ag)
        W = self.times.workers
        done = gathers[-1] if gathers else None
        return [Carry(np.asarray([single[w], *gathers], dtype=np.int64), np.zeros(1 + len(gathers), dtype=np.int64),
                      single[w] if done is None else done, chains[w][-1]) for w in range(W)]
