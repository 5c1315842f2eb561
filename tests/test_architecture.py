"""The layout rules of the timing core, checked on the source itself.

* no import cycle between `sim` modules (imports inside functions count too);
* no module imports another module's private (``_name``) names;
* no `sim` module over 500 lines, no function over 60 lines (data tables,
  which are one literal, are exempt);
* each registered scheduler's name is a string literal in at most two
  non-test files (its module and `sim.schedulers.names`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

from sim.schedulers.registry import scheduler_names

ROOT = Path(__file__).resolve().parent.parent
SIM = ROOT / "sim"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SIM.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path):
    """(imported module, imported names) of every import in a module."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            yield base, [a.name for a in node.names]


def _target(module: str, name: str | None = None) -> str | None:
    """The sim module an import refers to (a submodule when ``name`` is one)."""
    if name and f"{module}.{name}" in MODULES:
        return f"{module}.{name}"
    return module if module in MODULES else None


def test_no_import_cycles():
    g = nx.DiGraph()
    for name, path in MODULES.items():
        g.add_node(name)
        for module, names in _imports(name, path):
            for imported in names or [None]:
                target = _target(module, imported)
                if target and target != name and not name.startswith(target + "."):
                    g.add_edge(name, target)  # a package's __init__ importing its children is no cycle
    cycles = [c for c in nx.simple_cycles(g) if not any(a.startswith(b + ".") or b.startswith(a + ".")
                                                        for a in c for b in c if a != b)]
    assert cycles == []


def test_no_private_names_across_modules():
    found = []
    for name, path in MODULES.items():
        for module, names in _imports(name, path):
            if module.startswith("sim"):
                found += [f"{name} imports {module}.{n}" for n in names if n.startswith("_") and not n.startswith("__")]
    assert found == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_and_function_sizes(name):
    path = MODULES[name]
    lines = path.read_text().splitlines()
    assert len(lines) <= MAX_MODULE_LINES, f"{path} has {len(lines)} lines"
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            is_table = len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(
                body[0].value, (ast.List, ast.Tuple, ast.Dict))
            length = node.end_lineno - node.lineno + 1
            assert is_table or length <= MAX_FUNCTION_LINES, f"{path}:{node.lineno} {node.name} is {length} lines"


def test_scheduler_names_live_in_two_files():
    files = [p for p in ROOT.rglob("*.py") if "tests" not in p.relative_to(ROOT).parts
             and not any(part.startswith(".") for part in p.relative_to(ROOT).parts)]
    texts = {p: p.read_text() for p in files}
    for scheduler in scheduler_names():
        pattern = re.compile(rf"[\"']{re.escape(scheduler)}[\"']")
        holders = [str(p.relative_to(ROOT)) for p, text in texts.items() if pattern.search(text)]
        assert len(holders) <= 2, f"{scheduler!r} is a literal in {holders}"
