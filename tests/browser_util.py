"""Helpers for the real-browser tests: a Streamlit server and Debian's Chromium.

The server is ``streamlit run app.py`` on a free port, as a subprocess; the
browser is ``/usr/bin/chromium`` driven by Playwright's sync API (never a
downloaded browser). `skip_reason` says why a browser test cannot run here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO / "artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
VIEWPORT = {"width": 1280, "height": 800}
PAGES = {  # url path -> file, in the sidebar's order
    "timeline": "pages/timeline.py",
    "compare": "pages/compare.py",
    "scaling": "pages/scaling.py",
    "model": "pages/model.py",
    "algorithms": "pages/algorithms.py",
    "validation": "pages/validation.py",
    "learn": "pages/learn.py",
}

# What the page shows while a script runs, and an exception box.
RUNNING = '[data-testid="stStatusWidget"]'
EXCEPTION = '[data-testid="stException"]'
PLOT = ".js-plotly-plot"


def skip_reason() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (install Debian's chromium package)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright Python package is missing"
    if shutil.which("streamlit") is None and not (Path(sys.executable).parent / "streamlit").exists():
        return "the streamlit command is missing"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(timeout_s: float = 60.0):
    """Run ``streamlit run app.py`` on a free port; yield its base URL. The suite runs on two workers, so a
    port found free may be taken by the other worker's server before this one binds it: a server that exits
    at once is started again on another port (three tries)."""
    for attempt in range(3):
        port = free_port()
        proc, log = _start_streamlit(port)
        try:
            url = _wait_healthy(proc, log, port, timeout_s)
        except _ExitedEarly:
            _stop(proc, log)
            if attempt == 2:
                raise RuntimeError(f"streamlit exited at once three times; see {log.name}") from None
            continue
        except BaseException:
            _stop(proc, log)
            raise
        try:
            yield url
        finally:
            _stop(proc, log)
        return


class _ExitedEarly(Exception):
    pass


def _start_streamlit(port: int):
    cmd = [
        sys.executable, "-m", "streamlit", "run", str(REPO / "app.py"),
        "--server.headless", "true", "--server.port", str(port), "--server.address", "127.0.0.1",
        "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
    ]
    ARTIFACTS.mkdir(exist_ok=True)
    log = open(ARTIFACTS / f"streamlit-{port}.log", "w")  # noqa: SIM115
    return subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env={**os.environ}), log


def _wait_healthy(proc, log, port: int, timeout_s: float) -> str:
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise _ExitedEarly(f"streamlit exited with {proc.returncode}; see {log.name}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return url
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"streamlit did not answer within {timeout_s} s")
        time.sleep(0.3)


def _stop(proc, log) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()


def launch(playwright):
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)


def wait_idle(page, timeout_ms: float = 60_000) -> None:
    """Wait until the script run is over and at least one chart is drawn."""
    page.wait_for_selector(PLOT, state="attached", timeout=timeout_ms)
    page.wait_for_selector(RUNNING, state="detached", timeout=timeout_ms)
    page.wait_for_function(
        "() => document.querySelectorAll('.js-plotly-plot .main-svg').length > 0", timeout=timeout_ms
    )


def chart_title(page, key: str) -> str:
    """The title text of the plotly chart rendered with Streamlit ``key``."""
    return page.evaluate(
        """(key) => {
            const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
            return el && el.layout && el.layout.title ? String(el.layout.title.text) : '';
        }""",
        key,
    )


def wait_chart_title(page, key: str, needle: str, timeout_ms: float = 30_000) -> None:
    """Wait until the chart's title contains ``needle`` (the chart was redrawn)."""
    page.wait_for_function(
        """([key, needle]) => {
            const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
            return !!(el && el.layout && el.layout.title && String(el.layout.title.text).includes(needle));
        }""",
        arg=[key, needle],
        timeout=timeout_ms,
    )


#: An in-page wait for ``predicate(arg)`` (a JS function's source) to hold, then for the next frame.
#: Playwright's ``wait_for_function`` and ``wait_for_selector`` poll on every animation frame: each
#: waiting page then renders 60 frames a second (66 ms of Chromium CPU per second measured here, a
#: third of a core for ten waiting sessions), load that the app under test would be blamed for. This
#: waits on DOM mutations instead (and every 100 ms, for a change no mutation announces), and
#: resolves at the next animation frame after the predicate holds: when the change is drawn.
_WAIT_QUIETLY_JS = """async ([arg, timeoutMs]) => {
    const predicate = (PREDICATE);
    return await new Promise((resolve, reject) => {
        let finished = false, observer = null, timer = null, deadline = null;
        const finish = (ok) => {
            if (finished) return;
            finished = true;
            if (observer) observer.disconnect();
            clearInterval(timer);
            clearTimeout(deadline);
            if (ok) requestAnimationFrame(() => resolve(true));
            else reject(new Error(`wait_quietly: timed out after ${timeoutMs} ms`));
        };
        const check = () => { try { if (predicate(arg)) finish(true); } catch (e) { /* not yet */ } };
        observer = new MutationObserver(check);
        observer.observe(document, {childList: true, subtree: true, attributes: true, characterData: true});
        timer = setInterval(check, 100);
        deadline = setTimeout(() => finish(false), timeoutMs);
        check();
    });
}"""


def wait_quietly(page, predicate: str, arg=None, timeout_ms: float = 30_000):
    """Wait until the JS function ``predicate`` (source) returns true for ``arg``, without polling on
    every animation frame (`_WAIT_QUIETLY_JS`); returns what ``page.evaluate`` returns (an awaitable
    on Playwright's async API)."""
    return page.evaluate(_WAIT_QUIETLY_JS.replace("PREDICATE", predicate), [arg, timeout_ms])


#: `wait_quietly` predicates: a selector is in the page (``attached``) or is not (``detached``).
SELECTOR_ATTACHED = "(selector) => document.querySelector(selector) !== null"
SELECTOR_DETACHED = "(selector) => document.querySelector(selector) === null"


def wait_input_value(page, key: str, value: str, timeout_ms: float = 30_000) -> None:
    """Wait until the input with Streamlit ``key`` shows ``value`` (a rerun's widget update lands after its charts)."""
    page.wait_for_function(
        """([key, value]) => {
            const el = document.querySelector(`.st-key-${key} input`);
            return !!el && el.value === value;
        }""",
        arg=[key, value],
        timeout=timeout_ms,
    )


def set_number(page, key: str, value: float) -> None:
    """Type ``value`` into the number input with Streamlit ``key`` and commit it."""
    box = page.locator(f".st-key-{key} input")
    box.fill(str(value))
    box.press("Enter")


def choose(page, key: str, option: str) -> None:
    """Pick ``option`` in the selectbox with Streamlit ``key`` (typed, so long lists work)."""
    page.locator(f".st-key-{key}").click()
    page.keyboard.type(option)
    page.get_by_role("option", name=option, exact=True).click()


_SIGNATURE_JS = """(key) => {
    const el = document.querySelector(`.st-key-${key} .js-plotly-plot`);
    if (!el || !el.layout) return '';
    const title = el.layout.title ? String(el.layout.title.text) : '';
    const notes = (el.layout.annotations || []).map(a => a.text).join('|');
    const shapes = JSON.stringify(el.layout.shapes || []);
    const data = JSON.stringify((el.data || []).map(d => [d.name, d.x, d.y, d.base]));
    return [title, notes, shapes, data.length, data.slice(0, 4000)].join('#');
}"""


def chart_signature(page, key: str) -> str:
    """A string that changes whenever the chart with ``key`` is redrawn with new data."""
    return page.evaluate(_SIGNATURE_JS, key)


def wait_chart_changed(page, key: str, before: str, timeout_ms: float = 30_000) -> None:
    """Wait until the chart's signature differs from ``before``."""
    page.wait_for_function(
        f"([key, before]) => {{ const s = ({_SIGNATURE_JS})(key); return s !== '' && s !== before; }}",
        arg=[key, before],
        timeout=timeout_ms,
    )


def assert_no_exception(page) -> None:
    boxes = page.locator(EXCEPTION)
    if boxes.count():
        raise AssertionError(f"Streamlit exception on {page.url}: {boxes.first.inner_text()[:500]}")


def open_first_validation_case(page) -> None:
    """On the Validation page, click the first case's row and wait until it has opened."""
    grid = page.locator('[data-testid="stDataFrame"]').nth(1)
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 15, box["y"] + 35 + 17)  # the first case's row marker
    page.get_by_text("Opened validation case ddl-resnet50-BSP-A2A-4gpu").wait_for()
    wait_idle(page)
    assert_no_exception(page)
