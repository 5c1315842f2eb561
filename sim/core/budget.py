"""The work budget's constants: how many tasks one run's graph may hold, read from the environment once.

`sim.core.run` holds the limit itself (``sim.core.run.MAX_TASKS``, which a script may set) and the checks that
refuse a run over it before any work.
"""

from __future__ import annotations

import os

__all__ = ["CELLS_PER_TASK", "MAX_TASKS_DEFAULT", "MAX_TASKS_ENV", "MAX_TASKS_LIMIT", "PS_CELL_WEIGHT",
           "max_tasks_from_env"]

#: Tasks one run's graph may hold (at the limit, about 10 s and 1 GB on one core in the event loop, half that
#: for one worker's plain pipeline, `sim.core.pipeline`; a timeline or interference adds to it); raise it with the
#: environment variable `MAX_TASKS_ENV` or ``sim.core.run.MAX_TASKS``.
MAX_TASKS_DEFAULT = 8_000_000
MAX_TASKS_ENV = "SSGD_MAX_TASKS"
#: Beyond 2^40 tasks a run would take days and terabytes: the environment variable is refused above it.
MAX_TASKS_LIMIT = 2**40
#: Numbers a per-worker run's arrays may hold per task of the budget (16 x 8M: about 1 GB, 10 s).
CELLS_PER_TASK = 16
#: A per-worker run over a parameter server times each worker's pushes and pulls through the servers' links
#: task by task: measured per cell about 14 times the all-reduce run's CPU time and 4-6 times its memory (gpt2,
#: 64 GPUs, one straggler: WFBP-PS 11.6 s and 638 MB, ByteScheduler-PS 15.2 s and 878 MB, wfbp 0.8 s and 149 MB),
#: so its cells count this many times against the budget: at the limit such a run takes about 10 s and 0.6 GB
#: (128 GPUs under BSP-PS took 23 s and 1.1 GB with a weight of 20).
PS_CELL_WEIGHT = 40


def max_tasks_from_env(default: int = MAX_TASKS_DEFAULT) -> tuple[int, str]:
    """The task limit from ``$SSGD_MAX_TASKS`` and, for a bad value, the message every budget check raises (the
    default stands meanwhile, so that commands that time nothing still run)."""
    text = os.environ.get(MAX_TASKS_ENV)
    if text is None:
        return default, ""
    try:
        value = int(text.strip().replace("_", ""))
    except ValueError:
        value = None
    if value is None or not 1 <= value <= MAX_TASKS_LIMIT:
        return default, (f"${MAX_TASKS_ENV} must be a whole number of tasks from 1 to {MAX_TASKS_LIMIT:,}, "
                         f"got {text[:40]!r}")
    return value, ""
