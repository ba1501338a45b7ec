"""Size limits in src/partita: a module past 500 lines or a class past 400 has more than one job.

The limits are the ones `docs/architecture.md` states; a change that crosses
one splits the module or class along its seams instead of raising the limit.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "partita"
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 400
MAX_FUNCTION_LINES = 60
SOURCES = sorted(path for path in PACKAGE.rglob("*.py") if "migrations" not in path.parts)


def _name(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parent))


@pytest.mark.parametrize("path", SOURCES, ids=_name)
def test_no_module_class_or_function_is_past_its_limit(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    too_long = []
    lines = len(text.splitlines())
    if lines > MAX_MODULE_LINES:
        too_long.append(f"module: {lines} lines (limit {MAX_MODULE_LINES})")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            kind, limit = ("class", MAX_CLASS_LINES) if isinstance(node, ast.ClassDef) else ("function", MAX_FUNCTION_LINES)
            if size > limit:
                too_long.append(f"{kind} {node.name}: {size} lines (limit {limit})")
    assert not too_long, f"{_name(path)}: " + "; ".join(too_long)


def test_the_limits_see_every_module() -> None:
    assert len(SOURCES) > 50
