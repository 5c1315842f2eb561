"""Snapshots: named sidebar configurations, pinned to compare them side by side.

A snapshot is the sidebar's settings (the keys of `dashboard.state.DEFAULTS`)
under a name. The session keeps them in ``st.session_state["snapshots"]``; a
link carries each as one ``snap`` query value, ``name~key=value~key=value``,
with only the settings that differ from the defaults:

>>> encode("IB", {"net": "ib-edr-100", "gpus": 16})
'IB~net=ib-edr-100'
>>> decode("IB~net=ib-edr-100~gpus=64")
('IB', {'net': 'ib-edr-100', 'gpus': 64})

No Streamlit here: the Compare page draws them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from dashboard import links, state
from dashboard.tables import overlap_pct

__all__ = ["MAX_NAME_CHARS", "MAX_SNAPSHOTS", "capture", "decode", "diff_table", "encode"]

_SEP = "~"
#: A link brings at most this many snapshots (each is one more simulation on the Compare page).
MAX_SNAPSHOTS = 12
#: The longest snapshot name a link may give.
MAX_NAME_CHARS = 80


def capture(session: Mapping) -> dict:
    """The sidebar's settings in ``session`` (defaults for keys not there)."""
    return {key: session.get(key, state.default(key)) for key in state.DEFAULTS}


def _parse(key: str, text: str):
    kind = type(state.DEFAULTS[key])
    if kind is bool:
        return text.lower() == "true"
    if kind is int:
        return int(float(text))  # checked first: a whole number within bounds ("64", "64.0", "1e3")
    return float(text) if kind is float else text


def encode(name: str, settings: Mapping) -> str:
    """One ``snap`` query value: the name, then every setting that is not the default."""
    parts = [name.replace(_SEP, "-")]
    for key, value in settings.items():
        if key in state.DEFAULTS and value != state.default(key):
            parts.append(f"{key}={str(value).lower() if isinstance(value, bool) else value}")
    return _SEP.join(parts)


def decode(text: str) -> tuple[str, dict]:
    """``(name, settings)`` from a ``snap`` query value; unknown keys and unreadable values
    raise ValueError (the page names the value and leaves it out)."""
    name, *parts = text.split(_SEP)
    if not name.strip():
        raise ValueError("a snapshot needs a name")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"its name has {len(name):,} characters; at most {MAX_NAME_CHARS}")
    settings = {}
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or key not in state.DEFAULTS:
            raise ValueError(f"unknown setting {part[:40]!r}")
        if key in settings:
            raise ValueError(f"{key} given twice")
        # the checks a link's own value gets (bounds, options; an upload cannot travel in a link)
        for bad in links.check_query({key: [value]}):
            raise ValueError(f"{key}={value[:40]}: {bad.reason}")
        settings[key] = _parse(key, value)
    return name, settings


def _one_decimal(value: float) -> str:
    """``value`` signed with one decimal, or with three significant digits when one decimal would read 0."""
    return f"{value:+.1f}" if round(value, 1) != 0 else f"{value:+.3g}"


def _change(value: float, first: float, points: bool) -> str:
    """A Δ cell of `diff_table`: "same", a change in points, or a change with its percentage ("—" where either
    figure is not defined: the overlap of a run without communication)."""
    if not (math.isfinite(value) and math.isfinite(first)):
        return "—"
    change = value - first
    if change == 0:
        return "same"
    if points:
        return f"{_one_decimal(change)} pts"
    return f"{change:+,.4g}" + (f" ({_one_decimal((value / first - 1) * 100)} %)" if first else "")


def diff_table(snapshots: Mapping[str, Mapping], metrics: Mapping[str, Mapping]) -> pd.DataFrame:
    """One row per setting that differs between the snapshots and per key figure, one
    column per snapshot, and a change column per snapshot after the first (against it)."""
    names = list(snapshots)
    full = {n: {**capture({}), **snapshots[n]} for n in names}
    rows = [[key, *(str(full[n][key]) for n in names)]
            for key in state.DEFAULTS if len({str(full[n][key]) for n in names}) > 1]
    files = [snapshots[n].get("csv_name") or "" for n in names]  # an uploaded table's file, if any
    if len(set(files)) > 1:
        rows.append(["uploaded file", *files])
    figures = {
        "iteration (ms)": lambda m: m["iteration_time_s"] * 1e3,
        "throughput (samples/s)": lambda m: m["throughput_samples_per_s"],
        "overlap (%)": lambda m: float(overlap_pct(m["comm_hidden_s"], m["comm_s"])),
        "exposed comm (ms)": lambda m: m["comm_exposed_s"] * 1e3,
        "scaling efficiency (%)": lambda m: m["scaling_efficiency"] * 100,
    }
    rows = [row + [""] * (len(names) - 1) for row in rows]  # settings have no change column
    for label, value in figures.items():
        numbers = [value(metrics[n]) for n in names]
        rows.append([label, *(f"{v:,.4g}" if math.isfinite(v) else "—" for v in numbers),
                     *(_change(v, numbers[0], points=label.endswith("(%)")) for v in numbers[1:])])
    # a snapshot may be named "what" or "Δ b": each column keeps its own label, made unique
    return pd.DataFrame(rows, columns=_unique(["what", *names, *(f"Δ {n}" for n in names[1:])]))


def _unique(labels: list[str]) -> list[str]:
    """``labels`` with a repeat numbered ("what", "what (2)"), so that no column hides another."""
    seen: set[str] = set()
    out = []
    for label in labels:
        unique, k = label, 2
        while unique in seen:
            unique, k = f"{label} ({k})", k + 1
        seen.add(unique)
        out.append(unique)
    return out
