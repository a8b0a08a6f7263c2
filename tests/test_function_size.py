"""No library function over 120 lines (issue 12, "no giants").

Walks every module of ``qrelkit/`` except ``qrelkit/cli/`` (command bodies have their own, tighter
limit) with :mod:`ast` and measures every function and method, nested ones included. A function's
length is counted from its ``def`` line to the last line of its body, both included: the
docstring and comments count, decorators do not. A giant is split into named stages (private
helpers in the same module, small dataclasses carrying the state between them), not squeezed.
"""

from __future__ import annotations

import ast
from pathlib import Path

MAX_LINES = 120
PACKAGE = Path(__file__).resolve().parent.parent / "qrelkit"

#: functions allowed over the limit for now, by "module path relative to qrelkit/::qualified name"
ALLOWED: set[str] = set()


def _functions(tree: ast.AST, prefix: str = ""):
    """(qualified name, node) of every function in ``tree``, methods as ``Class.method`` and
    nested functions as ``outer.inner``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            yield name, node
            yield from _functions(node, name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, prefix + node.name + ".")
        else:
            yield from _functions(node, prefix)


def _lengths() -> dict[str, int]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("cli/"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name, node in _functions(tree):
            out[f"{rel}::{name}"] = node.end_lineno - node.lineno + 1
    return out


def test_no_library_function_over_the_limit():
    giants = {k: n for k, n in _lengths().items() if n > MAX_LINES and k not in ALLOWED}
    assert not giants, (f"functions over {MAX_LINES} lines (split them into named stages): "
                        + ", ".join(f"{k} ({n})" for k, n in sorted(giants.items())))


def test_allow_list_is_not_stale():
    lengths = _lengths()
    stale = sorted(k for k in ALLOWED if lengths.get(k, 0) <= MAX_LINES)
    assert not stale, f"no longer over {MAX_LINES} lines (or gone): remove from ALLOWED: {', '.join(stale)}"


def test_the_walk_sees_methods_and_nested_functions():
    tree = ast.parse("class A:\n    def m(self):\n        def inner():\n            pass\n\n\ndef f():\n    pass\n")
    assert [name for name, _ in _functions(tree)] == ["A.m", "A.m.inner", "f"]
