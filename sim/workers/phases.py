"""The phase figures of a per-worker run that varies, measured on the run itself.

With identical workers the per-worker run's phases are the aggregate run's (`sim.simulate`). When
workers differ (compute noise, stragglers, mixed GPUs, link jitter) the iteration is the mean period
of the run, and its phases are measured on the same iterations (those `SyncRun.periods_s` covers).
In iteration k, with E_k the end of its last step, B_k the end of its slowest backward pass and U_k
the workers' mean update time:

* ``comm_exposed_s``: E_k - B_k - U_k, the network's tail after the last gradient is ready (at most
  the iteration's communication);
* ``straggler_wait_s``: the mean over workers of B_k minus the worker's own backward end, the wait
  for the slowest worker;
* ``compute_s``: the rest of the period, so that compute + straggler wait + exposed = the iteration;
* ``comm_s``: the communication time of identical workers (`sim.simulate`'s, the time some message
  is on the wire) times the iteration's link jitter, its draws' mean weighted by each message's time
  in identical workers (1 without jitter); ``comm_hidden_s`` = ``comm_s`` - ``comm_exposed_s``.

Before, these were the figures of identical workers beside the run's mean period: with link jitter
(cv 2, one message) the exposed time of identical workers, 476 ms, stood beside a mean iteration
of 139 ms.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["message_times_s", "run_phases"]


def message_times_s(timeline: pd.DataFrame, messages: int) -> np.ndarray:
    """Each message's communication time in one iteration of identical workers (its comm rows summed)."""
    comm = timeline.loc[(timeline["kind"] == "comm") & (timeline["iteration"] == 0)]
    out = np.zeros(messages)
    np.add.at(out, comm["message"].to_numpy(np.int64), comm["duration_s"].to_numpy(float))
    return out


def run_phases(ends_s: np.ndarray, backward_end_s: np.ndarray, update_s: np.ndarray, periods: int,
               jitter: np.ndarray | None, message_s: np.ndarray | None, comm_s: float) -> dict:
    """The phases (module docstring) of a run with step ends ``ends_s``, backward ends ``backward_end_s`` and
    update times ``update_s`` (iterations x workers), over its first ``periods`` periods from the second
    iteration on; ``jitter`` (iterations x messages) the link factors and ``message_s`` the messages' times
    (both None without link jitter), ``comm_s`` the communication time of identical workers."""
    steps = slice(1, 1 + periods)
    last_end = ends_s.max(axis=1)
    period = np.diff(last_end)[:periods]
    slowest = backward_end_s[steps].max(axis=1)
    weight = message_s.sum() if message_s is not None else 0.0
    jittered = jitter is not None and weight > 0 and bool((jitter[steps] != 1.0).any())
    comm = comm_s * (jitter[steps] @ message_s) / weight if jittered else np.full(periods, comm_s)
    exposed = np.clip(last_end[steps] - slowest - update_s[steps].mean(axis=1), 0.0, np.minimum(period, comm))
    straggler = np.clip((slowest[:, None] - backward_end_s[steps]).mean(axis=1), 0.0, period - exposed)
    comm_mean = float(comm.mean() if jittered else comm_s)  # (a mean of equal values may round)
    exposed_mean = float(exposed.mean())
    return {"compute_s": float((period - exposed - straggler).mean()), "comm_s": comm_mean,
            "comm_exposed_s": exposed_mean, "comm_hidden_s": max(comm_mean - exposed_mean, 0.0),
            "straggler_wait_s": float(straggler.mean())}
