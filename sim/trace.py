"""Chrome Trace Event export of a timeline (opens in Perfetto and chrome://tracing).

Complete events (``"ph": "X"``) with microsecond ``ts`` and ``dur``; one
named thread (track) per worker and lane, in `sim.core.lower.LANES` order,
the shared communication lanes first; layer, message, bytes and iteration in
``args``. With ``metrics`` (a `sim.core.metrics.METRIC_KEYS` dict) the trace
carries them under ``otherData``, with the same keys as the API and the CLI.
Format: the Trace Event Format document of the Chromium project.
"""

from __future__ import annotations

import math

import pandas as pd

from sim.core.lower import LANES

__all__ = ["chrome_trace"]


def _json_value(value):
    """A value strict JSON accepts: non-finite floats become None."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return value


def _tracks(timeline: pd.DataFrame) -> dict[tuple[int, str], int]:
    order = {lane: i for i, lane in enumerate(LANES)}
    pairs = {(int(w), str(lane)) for w, lane in zip(timeline["worker"], timeline["lane"], strict=True)}
    ranked = sorted(pairs, key=lambda p: (p[0] >= 0, p[0], order.get(p[1], len(order)), p[1]))
    return {pair: i + 1 for i, pair in enumerate(ranked)}


def chrome_trace(timeline: pd.DataFrame, title: str = "S-SGD iteration", metrics: dict | None = None) -> dict:
    """A JSON-ready dict of trace events for ``timeline`` (`sim.core.timeline` schema)."""
    tids = _tracks(timeline)
    many = len({w for w, _ in tids if w >= 0}) > 1
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": title}}]
    for (worker, lane), tid in tids.items():
        name = lane if worker < 0 or not many else f"worker {worker} {lane}"
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid, "args": {"sort_index": tid}})
    for row in timeline.itertuples(index=False):
        events.append({
            "name": f"{row.kind} {row.layer}".strip(), "cat": row.kind, "ph": "X", "pid": 1,
            "tid": tids[(int(row.worker), str(row.lane))], "ts": row.start_s * 1e6, "dur": row.duration_s * 1e6,
            "args": {"iteration": int(row.iteration), "worker": int(row.worker), "layer": row.layer,
                     "message": int(row.message), "group": int(row.message), "bytes": int(row.bytes)},
        })
    trace = {"traceEvents": events, "displayTimeUnit": "ms"}
    if metrics is not None:
        trace["otherData"] = {key: _json_value(value) for key, value in metrics.items()}
    return trace
