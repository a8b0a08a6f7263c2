"""The shape of the command line (issue 12): a command parses, calls one library function, writes,
reports. Two walls, checked on the AST of every ``qrelkit/cli/*.py``:

- every Typer command body is at most 40 lines (from the first statement after the docstring to
  the end of the function; the signature with its option declarations does not count);
- no CLI module imports another CLI module's private (``_name``) helper.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

CLI = Path(__file__).resolve().parents[1] / "qrelkit" / "cli"
MAX_BODY = 40


def _modules() -> list[Path]:
    return sorted(CLI.glob("*.py"))


def _is_command(fn: ast.FunctionDef) -> bool:
    """Decorated ``@<something>.command(...)`` or ``@<something>.callback(...)``: a Typer command."""
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Attribute) and target.attr in ("command", "callback"):
            return True
    return False


def _body_lines(fn: ast.FunctionDef) -> int:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body:
        return 0
    return body[-1].end_lineno - body[0].lineno + 1


def command_bodies() -> dict[str, int]:
    """``module:function`` -> body length in lines, for every Typer command in qrelkit/cli."""
    out = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_command(node):
                out[f"cli/{path.name}:{node.name}"] = _body_lines(node)
    return out


def private_cli_imports() -> list[str]:
    """``cli/FILE:LINE: what`` for every use of another CLI module's ``_private`` name: imported
    (``from qrelkit.cli.pool import _selection``) or reached through the module
    (``from qrelkit.cli import pool`` ... ``pool._selection``)."""
    found = []
    for path in _modules():
        tree = ast.parse(path.read_text(), str(path))
        others = set()  # names bound to another CLI module in this file
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module.startswith("qrelkit.cli.") and node.module != f"qrelkit.cli.{path.stem}":
                    found += [f"cli/{path.name}:{node.lineno}: {a.name} from {node.module}"
                              for a in node.names if a.name.startswith("_")]
                if node.module == "qrelkit.cli":
                    others |= {a.asname or a.name for a in node.names if a.name != path.stem}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in others \
                    and node.attr.startswith("_") and not node.attr.startswith("__"):
                found.append(f"cli/{path.name}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_the_walk_finds_the_commands():
    bodies = command_bodies()
    assert len(bodies) > 30  # every group's commands, not an empty walk
    assert "cli/reuse.py:leave_out_cmd" in bodies and "cli/eval.py:score" in bodies


@pytest.mark.parametrize("name", sorted(command_bodies()))
def test_command_body_at_most_40_lines(name):
    n = command_bodies()[name]
    assert n <= MAX_BODY, f"{name}: body of {n} lines (> {MAX_BODY}): move the policy into the library"


def test_no_cli_module_imports_another_cli_modules_private_helper():
    assert private_cli_imports() == []


def test_the_checks_see_what_they_look_for():
    src = '''
@app.command("x")
def x(a: int = typer.Option(1,
      help="h")) -> None:
    """Doc."""
    one()
    two(
        3)
'''
    fn = ast.parse(src).body[0]
    assert _is_command(fn) and _body_lines(fn) == 3


def test_one_way_to_register_a_group_and_one_module_per_group():
    """Issue 20: every command module of the command line is registered the same way (by name in
    GROUPS or COMMANDS of qrelkit.cli), one module per group; no module attaches itself to another's app."""
    import qrelkit.cli as cli

    modules = {p.stem for p in (Path(cli.__file__).parent).glob("*.py")} - {"__init__", "common", "help"}
    registered = list(cli.GROUPS.values()) + list(cli.COMMANDS.values())
    assert sorted(registered) == sorted(modules)
    for m in modules:
        text = (Path(cli.__file__).parent / f"{m}.py").read_text()
        assert "from qrelkit.cli import app" not in text and not re.search(r"from qrelkit\.cli\.\w+ import .*\bapp\b", text), m
