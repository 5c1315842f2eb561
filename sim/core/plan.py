"""A plan: what a scheduler decides, before anything is timed.

`GradientLayers` is what a scheduler sees (the gradient-bearing layers with
their ready times and sizes); `Plan` is what it returns (messages, their
order and the further decisions of the survey's methods). The lowering
(`sim.core.lower`) turns a plan into a task graph for the engine.
"""

from __future__ import annotations

import functools
import itertools
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = ["NO_GRADIENTS", "SHARD_LEVELS", "SHARD_NONE", "SHARD_OPTIMIZER", "SHARD_GRADIENTS", "SHARD_PARAMETERS",
           "GradientLayers", "MessageLayers", "Plan", "gradient_layers", "kept_for"]

#: What a sharded data-parallel plan keeps 1/P of on each GPU (ZeRO, Rajbhandari et al., SC 2020):
#: nothing (plain data parallelism), the optimizer states (stage 1), also the gradients (stage 2),
#: also the parameters (stage 3, FSDP full-shard). `sim.memory` reads the same names.
SHARD_NONE = "none"
SHARD_OPTIMIZER = "optimizer"
SHARD_GRADIENTS = "gradients"
SHARD_PARAMETERS = "parameters"
SHARD_LEVELS = (SHARD_NONE, SHARD_OPTIMIZER, SHARD_GRADIENTS, SHARD_PARAMETERS)


@dataclass(frozen=True, eq=False)
class GradientLayers:
    """The layers that have parameters, in model order (input to output).

    ``index`` maps back to the model's layer numbers. ``ready_s`` is when each
    gradient is ready, measured from the start of backward; it decreases with
    the index, since backward runs from the output down.
    """

    index: np.ndarray
    ready_s: np.ndarray
    nbytes: np.ndarray

    @property
    def n(self) -> int:
        return len(self.index)

    @property
    def backward_end_s(self) -> float:
        return float(self.ready_s[0]) if self.n else 0.0


class MessageLayers(NamedTuple):
    """A plan's messages as flat arrays (read-only): every message's layers in plan order
    (``flat``), where each message starts in it (``offsets``) and its lowest layer
    (``lowest``, None when a message is empty); whether a message is empty and whether a layer is sent twice."""

    flat: np.ndarray
    offsets: np.ndarray
    lowest: np.ndarray | None
    has_empty: bool
    repeats: bool


@dataclass(frozen=True)
class Plan:
    """Messages in sending order, each a tuple of model layer indices.

    ``after_backward`` holds every message until the whole backward pass has
    ended (no overlap of communication with backward).

    The remaining fields are the survey's further scheduling decisions; their
    defaults give the plain plan above.

    * ``lag_s[g]``: message g is released this long after its last gradient
      is ready (Horovod's cycle: it waits for the next tick).
    * ``partition_bytes``: messages are cut into partitions of at most this
      many bytes, each sent on its own (0: whole messages).
    * ``priority``: ``"fifo"`` serves the channel in plan order;
      ``"input_first"`` sends the ready partition of the layer nearest the
      input first (ByteScheduler, P3).
    * ``credit``: ByteScheduler's credit (0: not set). On a parameter server it
      bounds the servers busy at once; on all-reduce, from 2 on each part's
      host-side launch runs ahead of the transfers, how far ahead not bounded
      further (`sim.core.lower.launches_ahead`).
    * ``per_layer_update``: each layer is updated as soon as its gradient has
      been communicated, and the next iteration's forward of layer l waits
      only for layer l's update (ByteScheduler, DeAR), instead of one update
      after all messages.
    * ``decoupled``: each message is a reduce-scatter after backward and an
      all-gather before the next forward (DeAR).
    * ``shard``: sharded data parallelism (`SHARD_LEVELS`). ``"optimizer"``
      and ``"gradients"`` (ZeRO stages 1 and 2): each message is a
      reduce-scatter as its gradients are ready, then the one update, then an
      all-gather of each message's updated parameters before the next
      forward. ``"parameters"`` (ZeRO stage 3, FSDP full-shard): each message
      (a unit) is a reduce-scatter as its gradients are ready, and its
      parameters are all-gathered before its forward (prefetched one unit
      ahead) and again before its backward (`sim.core.shard`).
    """

    scheduler: str
    groups: tuple[tuple[int, ...], ...]
    after_backward: bool = False
    lag_s: tuple[float, ...] = ()
    partition_bytes: int = 0
    priority: str = "fifo"
    credit: int = 0
    per_layer_update: bool = False
    decoupled: bool = False
    shard: str = SHARD_NONE

    @property
    def is_plain(self) -> bool:
        """True when only groups, their order and ``after_backward`` matter
        (the structure `sim.dag.build_dag` and `sim.fast` time)."""
        return not (self.partition_bytes or self.per_layer_update or self.decoupled or self.priority != "fifo"
                    or self.shard != SHARD_NONE)

    @functools.cached_property
    def message_layers(self) -> MessageLayers:
        """The messages as flat arrays (`MessageLayers`), worked out once per plan (a plan is immutable)."""
        sizes = np.fromiter(map(len, self.groups), dtype=np.int64, count=len(self.groups))
        flat = np.fromiter(itertools.chain.from_iterable(self.groups), dtype=np.int64, count=int(sizes.sum()))
        offsets = np.zeros(len(sizes), np.int64)
        np.cumsum(sizes[:-1], out=offsets[1:])
        has_empty = bool(sizes.size) and int(sizes.min()) == 0
        lowest = np.minimum.reduceat(flat, offsets) if sizes.size and not has_empty else None
        repeats = bool(flat.size) and (flat.min() < 0 or len(set(flat.tolist())) < flat.size)
        for arr in (flat, offsets, lowest):
            if arr is not None:
                arr.flags.writeable = False
        return MessageLayers(flat, offsets, lowest, has_empty, repeats)


#: No gradients at all: what a scheduler sees on one GPU (used to check its name and arguments).
NO_GRADIENTS = GradientLayers(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64))


def gradient_layers(model, precision: str) -> GradientLayers:
    """Gradient-bearing layers of a timed model with their ready times from backward start
    (read-only arrays of their own: what the schedulers work out of them is kept, `kept_for`)."""
    ready_all = np.cumsum(model.bwd_s[::-1])[::-1]  # r[l] = sum of t_b over layers l..n-1
    has = np.flatnonzero(model.params > 0).copy()
    arrays = (has, ready_all[has], model.gradient_bytes(precision)[has])
    for arr in arrays:
        arr.flags.writeable = False
    return GradientLayers(*arrays)


#: Per `GradientLayers` whose arrays cannot change, what the schedulers worked out of them (by key),
#: while it lives: a sweep plans the same layers under many costs.
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_KEPT_LOCK = threading.Lock()


def kept_for(grads: GradientLayers, key: str, make: Callable):
    """``make(grads)``, worked out once per ``grads`` and ``key`` when its arrays are read-only and own
    their data (as `gradient_layers` makes them), else each time. The value is shared: not to be changed."""
    kept = _KEPT.get(grads)
    if kept is not None and key in kept:
        return kept[key]
    value = make(grads)
    if all(isinstance(a, np.ndarray) and a.base is None and not a.flags.writeable
           for a in (grads.index, grads.ready_s, grads.nbytes)):
        with _KEPT_LOCK:
            _KEPT.setdefault(grads, {})[key] = value
    return value
