"""The work budget's constants: how many tasks one run's graph may hold, read from the environment once.

`sim.core.run` holds the limit itself (``sim.core.run.MAX_TASKS``, which a script may set) and the checks that
refuse a run over it before any work.
"""

from __future__ import annotations

import os

__all__ = ["CELLS_PER_TASK", "CHANNEL_STEPS_PER_TASK", "MAX_TASKS_DEFAULT", "MAX_TASKS_ENV", "MAX_TASKS_LIMIT", "PS_CELL_WEIGHT",
           "WORK_CELLS_PER_TASK", "cell_budget_error", "max_tasks_from_env"]

#: Tasks one run's graph may hold (at the limit, about 10 s and 1 GB on one core in the event loop, half that
#: for one worker's plain pipeline, `sim.core.pipeline`; a timeline or interference adds to it); raise it with the
#: environment variable `MAX_TASKS_ENV` or ``sim.core.run.MAX_TASKS``.
MAX_TASKS_DEFAULT = 8_000_000
MAX_TASKS_ENV = "SSGD_MAX_TASKS"
#: Beyond 2^40 tasks a run would take days and terabytes: the environment variable is refused above it.
MAX_TASKS_LIMIT = 2**40
#: Numbers a per-worker run's arrays may hold per task of the budget (16 x 8M: about 1 GB).
CELLS_PER_TASK = 16
#: Task times a per-worker run may work out per task of the budget, whether it holds them or not (a run that
#: keeps the per-layer times of its first iterations only: `sim.core.fast.evaluate`'s keep_iterations). At
#: 128 x 8M, about 5 s on one core of this machine: 8,192 workers x 100 iterations of resnet50 (531 M) took
#: 2.2 s and 243 MiB keeping one iteration (`python bench/scale.py --only workers`, 2026-11-26).
WORK_CELLS_PER_TASK = 128
#: Messages a per-worker run's shared channel may step through (iterations x messages, one by one in Python,
#: about 0.2 us each) per task of the budget: 2 x 8M. 2 workers x 100,000 messages, one iteration kept (the
#: run, its no-noise reference and its one-GPU reference each step them): 100 iterations (10 M steps) took
#: 5.9 s and 209 MiB on this machine, 160 iterations (16 M, the bound) 9.6 s and 209 MiB (2026-11-26).
CHANNEL_STEPS_PER_TASK = 2
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


def cell_budget_error(rows: str, n: int, messages: int, iterations: int, workers: int, weight: int, kept: int | None,
                      max_tasks: int) -> str:
    """Why a per-worker run is too big, or "". It works out a start and an end per worker, iteration and
    row (``rows``: e.g. "163 gradient tensors", n of them) and message, each counted ``weight`` times
    (`PS_CELL_WEIGHT` over a parameter server): at most `WORK_CELLS_PER_TASK` x ``max_tasks``. It holds them
    all, or (``kept``) those of its first ``kept`` iterations and one more, about eight numbers per worker
    and iteration, and one per iteration and message (the link's draws): at most `CELLS_PER_TASK` x
    ``max_tasks``. Its channel steps through every message of every iteration one by one: at most
    `CHANNEL_STEPS_PER_TASK` x ``max_tasks`` steps (the review's run of 2 workers, 25,000 messages and 5,000
    iterations was admitted without this bound, when the channel kept every iteration, and took 44 s and 3 GiB)."""
    work = 2 * workers * iterations * (n + messages) * weight
    cut = kept is not None and kept < iterations
    held = 2 * workers * ((kept + 1) * (n + messages) + 8 * iterations) + iterations * messages if cut else work
    per = f" x {weight}, a parameter server timed push by push" if weight > 1 else ""
    what = (f"{workers:,} worker{'s' if workers != 1 else ''} x {iterations:,} iterations x ({rows} + "
            f"{messages:,} messages){per}")
    limit = f"${MAX_TASKS_ENV} or sim.core.run.MAX_TASKS): use fewer workers, iterations or layers"
    if held > CELLS_PER_TASK * max_tasks:
        return (f"this run would hold about {held:,} task times (a start and an end for {what}); the limit is "
                f"{CELLS_PER_TASK * max_tasks:,} ({CELLS_PER_TASK} x {limit}")
    if work > WORK_CELLS_PER_TASK * max_tasks:
        return (f"this run would work out about {work:,} task times (a start and an end for {what}); the limit is "
                f"{WORK_CELLS_PER_TASK * max_tasks:,} ({WORK_CELLS_PER_TASK} x {limit}")
    if iterations * messages > CHANNEL_STEPS_PER_TASK * max_tasks:
        return (f"this run would step its channel through {iterations * messages:,} messages ({iterations:,} "
                f"iterations x {messages:,}); the limit is {CHANNEL_STEPS_PER_TASK * max_tasks:,} "
                f"({CHANNEL_STEPS_PER_TASK} x {limit}")
    return ""
