"""A flag's help takes its default from the declaration (issue 20): a default is written once.

Two checks: every help text that names a configuration key with a value (``config [cal]
batch_size, 25``) shows the key's declared default; and no help literal in qrelkit/cli states a
default without naming its key (``default: config, 10``, ``default 0.95``), except the flags
whose default is no configuration key's (:data:`NOT_CONFIG`).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import typer.main

from qrelkit.cli import app, common
from qrelkit.config import default, load_plugins

CLI = Path(__file__).resolve().parents[1] / "qrelkit" / "cli"
NAMED = re.compile(r"config \\?\[([\w.]+)\] (\w+), ([^):;]+?)(?:[:;][^)]*)?\)")  # Typer escapes [ as \[
UNNAMED = re.compile(r"default: config, |\(default \d|default [\d.]+\)")
#: help literals whose number is a default of the command itself, not a configuration key's
NOT_CONFIG: set[str] = set()


def _options(cmd, path: str = "qrelkit"):
    """(command, flag, help) of every option (Typer's commands: a group has ``commands``)."""
    if hasattr(cmd, "commands"):
        for name, sub in cmd.commands.items():
            yield from _options(sub, f"{path} {name}")
    else:
        for p in cmd.params:
            if getattr(p, "param_type_name", "") == "option" and getattr(p, "help", None):
                yield path, p.opts[0], p.help


def test_help_texts_show_the_declared_defaults():
    load_plugins()
    seen = 0
    for path, opt, text in _options(typer.main.get_command(app)):
        for sec, key, shown in NAMED.findall(text):
            seen += 1
            assert shown == common.shown(default(sec, key)), f"{path} {opt}: {text}"
    assert seen >= 20


def _help_literals(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.keyword) and node.arg == "help":
            parts = [node.value] if isinstance(node.value, ast.Constant) else \
                [v for v in getattr(node.value, "values", []) if isinstance(v, ast.Constant)]
            for c in parts:
                if isinstance(c.value, str):
                    yield node.value.lineno, c.value


def test_no_help_states_a_default_without_its_key():
    found = [f"cli/{p.name}:{line}: {text}" for p in sorted(CLI.glob("*.py")) for line, text in _help_literals(p)
             if UNNAMED.search(text) and text not in NOT_CONFIG]
    assert not found, "a default written in a help text instead of common.default_of(section, key):\n" + "\n".join(found)


def test_shown_formats_as_the_help_texts_did():
    assert [common.shown(v) for v in (None, False, [2, 3], 1_000_000, 25, 0.05, "RR@10")] == \
        ["none", "false", "2,3", "1,000,000", "25", "0.05", "RR@10"]
