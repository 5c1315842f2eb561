"""No test asserts a time (DEVELOPERS.md: speed is measured in bench/, never asserted; the README says so).

A hostile review of the session that moved the suite to two workers (2f91ee6..26933b9) found eight wall-clock
assertions left in tests/test_bad_input.py, tests/test_bad_files.py and tests/test_bad_logs.py after the README
had said there were none. They are gone: each of those refusals is shown to come from its up-front check by the
message that check alone writes (and by a lowering that fails the test, or a memory bound, where that says more).
This keeps new ones out."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: ``assert <a clock reading or a duration> <`` in any of its spellings here
TIMED = re.compile(r"assert\s+(?:\w+\s*=\s*)?\(?\s*(time\.(?:perf_counter|monotonic|time|process_time)\(\)\s*-\s*\w+"
                   r"|elapsed\w*|seconds|\w+_s)\s*<")


def test_the_readme_says_no_test_asserts_a_time():
    readme = " ".join(ROOT.joinpath("README.md").read_text(encoding="utf-8").split())
    assert "No test asserts a time" in readme


def test_no_test_asserts_a_time():
    offenders = []
    for path in sorted((ROOT / "tests").glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if TIMED.search(line):
                offenders.append(f"{path.name}:{n}: {line.strip()}")
    assert not offenders, "timed assertions:\n" + "\n".join(offenders)


def test_the_pattern_finds_the_spellings_it_is_for():
    for line in ("assert elapsed < 10, report", "assert elapsed_s < REFUSAL_S", "assert seconds < REFUSAL_S",
                 "assert time.perf_counter() - start < 2.0", "assert time.monotonic() - t0 < 5"):
        assert TIMED.search(line), line
    for line in ("assert chart_bytes < 5 * 2**20, report", "assert peak < 150e6", "assert len(out) < 3 * 10**6"):
        assert not TIMED.search(line), line
