"""Once per server process: import every page's modules, then move what they made out of the
cyclic garbage collector's way (``gc.freeze``).

Streamlit runs a full collection (``gc.collect(2)``) after every script run
(``runner.postScriptGC``). It visits every container object of the process:
Streamlit, Plotly, pandas and the simulator make about 140,000 at import, and
a full collection over them took 100-150 ms of the server's CPU per rerun on
the 2-core test machine (py-spy, 2026-11-24), more than the page's own work.
The objects made at import live as long as the process, so they are frozen
(never collected, never visited); what the sessions make afterwards (results,
figures, session state) is still collected as before.
"""

from __future__ import annotations

import gc
import importlib
import pkgutil
import threading

import dashboard

__all__ = ["freeze_imports"]

_DONE = threading.Event()
_LOCK = threading.Lock()


def freeze_imports() -> bool:
    """Import every ``dashboard`` module (and so what the pages use), collect, and freeze the
    survivors; the first call of the process does it, later calls return False at once."""
    if _DONE.is_set():
        return False
    with _LOCK:
        if _DONE.is_set():
            return False
        for module in pkgutil.iter_modules(dashboard.__path__):
            importlib.import_module(f"dashboard.{module.name}")
        gc.collect()
        gc.freeze()
        _DONE.set()
    return True
