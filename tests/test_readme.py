"""The README's quickstart is what CI runs."""

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent


def quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line for b in blocks for line in b.splitlines() if line.strip() and not line.startswith("#")]


def test_quickstart_has_exactly_two_commands():
    commands = quickstart_commands()
    assert len(commands) == 2
    assert "streamlit run app.py" in commands[0]
    assert "pytest" in commands[1] and "ruff check" in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert quickstart_commands()[1] in ci.splitlines()
