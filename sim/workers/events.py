"""A discrete-event engine for the algorithm runs: a clock and a queue of timed actions."""

from __future__ import annotations

import heapq
from collections.abc import Callable

__all__ = ["Engine"]


class Engine:
    """A discrete-event engine: a clock and a queue of timed actions.

    Actions run in order of ``(time, priority, sequence)``. The sequence
    number is owned by the engine and grows with every scheduled action, so
    ties resolve the same way on every run and two engines never share state.

    >>> log = []
    >>> env = Engine()
    >>> env.at(2.0, log.append, "b")
    >>> env.at(1.0, log.append, "a")
    >>> env.at(2.0, log.append, "first", priority=-1)
    >>> env.run()
    >>> log
    ['a', 'first', 'b']
    """

    def __init__(self) -> None:
        self.now_s = 0.0
        self._queue: list[tuple[float, int, int, Callable, tuple]] = []
        self._seq = 0

    def at(self, time_s: float, action: Callable, *args, priority: int = 0) -> None:
        """Run ``action(*args)`` at ``time_s`` (not before now)."""
        if not time_s >= self.now_s:  # also catches NaN
            raise ValueError(f"cannot schedule at {time_s} s, before now ({self.now_s} s)")
        heapq.heappush(self._queue, (float(time_s), priority, self._seq, action, args))
        self._seq += 1

    def run(self) -> None:
        """Run every action, advancing the clock, until the queue is empty."""
        while self._queue:
            time_s, _, _, action, args = heapq.heappop(self._queue)
            self.now_s = time_s
            action(*args)

    @property
    def events_run(self) -> int:
        """Actions scheduled so far (a measure of work, for the curious)."""
        return self._seq
