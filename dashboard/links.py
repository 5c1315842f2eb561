"""Links: the query string of a view, checked on arrival and written on the way out.

Every control of the dashboard is bound to a query parameter named after its
session key (`dashboard.state.DEFAULTS`, `dashboard.state.PAGE_DEFAULTS`), and
every page has its own path (``/timeline``, ``/compare``, ...), so an address
such as ``/timeline?model=vgg16&gpus=64&net=ib-edr-100`` reproduces a view.

Streamlit drops a value a widget cannot take (an unknown option, a word where a
number belongs) without a word; `check_query` finds those values first, so the
page can say which key was wrong and what it uses instead. `query_for` writes
the query of a set of settings, for ``st.switch_page(..., query_params=...)``.

>>> [(p.key, p.raw) for p in check_query({"gpus": ["lots"], "net": ["10gbe"]})]
[('gpus', 'lots')]
>>> query_for({"gpus": 64, "net": "10gbe", "ab": True, "scale_nets": ["ib-edr-100", "100gbe"]})
{'gpus': '64', 'ab': 'true', 'scale_nets': ['ib-edr-100', '100gbe']}
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from dashboard import state
from sim.model import PRECISIONS

__all__ = ["LISTS", "PAGE_PATHS", "BadParam", "check_query", "number_or_none", "options", "query_for", "query_items"]

#: Page file stem -> URL path; the app serves every page at its own path.
PAGE_PATHS = {
    "timeline": "timeline", "compare": "compare", "scaling": "scaling", "model": "model",
    "algorithms": "algorithms", "validation": "validation", "learn": "learn",
}

# The sidebar's bounds are `dashboard.state.BOUNDS` (one table for the link and the session).
_BOUNDS = {**state.BOUNDS, **{k: v for k, v in state.PAGE_BOUNDS.items() if k != "toy_alpha_us"}}  # α: its stops
_INT_BOUNDS = {key: bounds for key, bounds in _BOUNDS.items() if isinstance(state.default(key), int)}
_FLOAT_BOUNDS = {key: bounds for key, bounds in _BOUNDS.items() if key not in _INT_BOUNDS}
_BOOLS = ("ab", "calib", "strag", "show_messages")


def _choices() -> dict[str, Callable[[], list]]:
    schedulers = state.scheduler_options
    return {
        "model": state.model_options, "precision": lambda: list(PRECISIONS), "gpu": state.gpu_options,
        "net": lambda: state.network_options("inter"), "intra": lambda: state.network_options("intra"),
        "topo": state.topology_options, "coll": state.collective_options,
        "fw": state.framework_options, "strag_dist_sb": lambda: state.STRAGGLER_DISTS,
        "strag_dist": lambda: state.STRAGGLER_DISTS, "strag_scheduler": schedulers,
        "alg_picked": lambda: state.PAGE_DEFAULTS["alg_picked"],
        "scheduler": schedulers, "baseline": schedulers, "scale_timeline_scheduler": schedulers,
        "snap_scheduler": schedulers,
        "method": lambda: ["", *state.method_options()],
        "compare": schedulers, "compare_methods": state.method_options, "scale_schedulers": schedulers,
        "scale_nets": lambda: state.network_options("inter"),
        "toy_alpha_us": lambda: [str(a) for a in state.TOY_ALPHAS_US],
        "compare_compression": lambda: state.COMPRESSIONS, "tune_knob": state.tune_knob_options,
        "parity_by": lambda: state.PARITY_BY, "summary_by": lambda: state.SUMMARY_BY,
        "learn_mech_net": lambda: state.LEARN_MECHANISM_NETS,
    }


_LISTS = ("compare", "compare_methods", "scale_schedulers", "scale_nets", "alg_picked")
#: The keys that take several values (a multiselect's).
LISTS = _LISTS


def options(key: str) -> list[str]:
    """The values the control ``key`` offers (as query text)."""
    return [str(option) for option in _choices()[key]()]


@dataclass(frozen=True)
class BadParam:
    """A query value the dashboard cannot use: its key, the raw text and why."""

    key: str
    raw: str
    reason: str
    #: The key came more than once and its last value is usable (Streamlit takes the last).
    repeated: bool = False


def number_or_none(raw: str) -> float | None:
    """``raw`` as a finite number (``17``, ``17.0`` and ``1e2`` alike), or None."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _check_number(key: str, raw: str) -> str | None:
    """Why ``raw`` is no value for the numeric key ``key`` (None if it is fine)."""
    integer = key in _INT_BOUNDS
    lo, hi = _INT_BOUNDS[key] if integer else _FLOAT_BOUNDS[key]
    try:
        value = float(raw)
    except ValueError:
        return "not a number"
    if not math.isfinite(value):
        return "not a finite number"
    if integer and value != int(value):
        return "not a whole number"
    if not lo <= value <= hi:
        return f"outside {lo:g}..{hi:g}"
    return None


def _check_one(key: str, values: list[str], choices: dict[str, Callable[[], list]]) -> BadParam | None:
    raw = values[-1] if values else ""
    if len(values) > 1 and key not in _LISTS and (key in choices or key in _BOOLS or key in _INT_BOUNDS
                                                    or key in _FLOAT_BOUNDS):
        # Streamlit takes the last of a repeated key without a word: say so (or why the last is no good)
        last = _check_one(key, values[-1:], choices)
        reason = f"given {len(values)} times" + (f", and the last is {last.reason}" if last else "; the last counts")
        return BadParam(key, ",".join(values), reason, repeated=last is None)
    if key in _INT_BOUNDS or key in _FLOAT_BOUNDS:
        reason = _check_number(key, raw)
    elif key in _BOOLS:
        reason = None if raw.lower() in ("true", "false") else "not true or false"
    elif key == "model" and raw in (state.UPLOAD, state.UPLOAD_LABEL):
        reason = "an uploaded layer CSV cannot travel in a link: upload the file in the sidebar"
    elif key in _LISTS and values == [""]:  # an emptied multiselect, as its binding writes it: none chosen
        reason = None
    elif key in _LISTS:
        allowed = set(choices[key]())
        unknown = [v for v in values if v not in allowed]
        raw = ",".join(values)
        twice = [v for v in dict.fromkeys(values) if values.count(v) > 1 and v in allowed]
        reasons = ([f"unknown {', '.join(v or '(an empty value)' for v in unknown)}"] if unknown else []) + \
                  [f"{v} given {values.count(v)} times" for v in twice]
        reason = "; ".join(reasons) or None
    elif key in choices:
        reason = None if raw in choices[key]() else "not one of the options"
    else:
        return None  # a key no control owns (Streamlit's own, or a page's private one)
    return BadParam(key, raw, reason) if reason else None


def check_query(params: Mapping[str, list[str]]) -> list[BadParam]:
    """The values of known keys in ``params`` (key -> every value given) that the
    dashboard cannot use, in the order given."""
    choices = _choices()
    found = (_check_one(key, list(values), choices) for key, values in params.items())
    return [bad for bad in found if bad is not None]


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value == int(value) and abs(value) < 1e15:
        return f"{value:.1f}"
    return str(value)


def query_for(settings: Mapping[str, object]) -> dict[str, str | list[str]]:
    """The query parameters of ``settings`` (session keys -> values): known keys
    whose value differs from its default, as text; lists stay lists."""
    out: dict[str, str | list[str]] = {}
    for key, value in settings.items():
        if key not in state.DEFAULTS and key not in state.PAGE_DEFAULTS:
            continue
        if value == state.default(key):
            continue
        out[key] = [str(v) for v in value] if isinstance(value, list | tuple) else _text(value)
    return out


def query_items(params) -> dict[str, list[str]]:
    """``st.query_params`` (or a plain mapping) as key -> every value given."""
    getter = getattr(params, "get_all", None)
    if getter is not None:
        return {key: list(getter(key)) for key in params}
    return {key: [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]
            for key, value in params.items()}
