"""Chrome Trace Event export of a timeline (opens in Perfetto and chrome://tracing).

Complete events (``"ph": "X"``) with microsecond ``ts`` and ``dur``; one named
thread (track) per resource; layer, group, bytes and iteration in ``args``.
Format: the Trace Event Format document of the Chromium project.
"""

from __future__ import annotations

import pandas as pd

from sim.dag import RESOURCES

__all__ = ["chrome_trace"]


def chrome_trace(timeline: pd.DataFrame, title: str = "S-SGD iteration") -> dict:
    """A JSON-ready dict of trace events for ``timeline``."""
    tids = {r: i + 1 for i, r in enumerate(RESOURCES)}
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": title}}]
    for resource, tid in tids.items():
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": resource}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid, "args": {"sort_index": tid}})
    for row in timeline.itertuples(index=False):
        events.append(
            {
                "name": f"{row.kind} {row.layer}".strip(),
                "cat": row.kind,
                "ph": "X",
                "pid": 1,
                "tid": tids[row.resource],
                "ts": row.start_s * 1e6,
                "dur": row.duration_s * 1e6,
                "args": {
                    "iteration": int(row.iteration),
                    "layer": row.layer,
                    "group": int(row.group),
                    "bytes": int(row.bytes),
                },
            }
        )
    return {"traceEvents": events, "displayTimeUnit": "ms"}
