"""Write docs/commands.md from the Typer app and the configuration schema, so the reference
always matches the code.

Run: python scripts/gen_commands_doc.py [--check]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import typer.main

from qrelkit.cli import app
from qrelkit.cli.common import EXAMPLES

OUT = Path(__file__).resolve().parents[1] / "docs" / "commands.md"


def _plain(text: str | None) -> str:
    """Help text without the escapes that keep rich from reading '[pool]' as markup."""
    return re.sub(r"\\(\[)", r"\1", text or "")


def _help_md(text: str | None) -> list[str]:
    """A command's help as Markdown lines: its paragraphs, and its "Examples:" section (see
    qrelkit.cli.common.examples) as a sh block."""
    out = []
    for para in _plain(text).strip().split("\n\n"):
        if para.startswith(EXAMPLES):
            out += ["Examples:", "", "```sh", *[ln.strip() for ln in para.splitlines()[1:]], "```", ""]
        else:
            out += [para, ""]
    return out


def _walk(cmd: click.Command, path: list[str]):
    if hasattr(cmd, "list_commands"):
        ctx = cmd.make_context("qrelkit", [], resilient_parsing=True)
        for name in cmd.list_commands(ctx):
            yield from _walk(cmd.get_command(ctx, name), path + [name])
    else:
        yield path, cmd


def render() -> str:
    root = typer.main.get_command(app)
    lines = [
        "# Command reference",
        "",
        "Generated from the code by `python scripts/gen_commands_doc.py`; do not edit by hand.",
        "",
        "Every command exits 0 on success and 2 on bad input, printing one line",
        "`qrelkit: error: FILE:LINE: [rule] message` and writing no output.",
        "",
    ]
    for path, cmd in _walk(root, []):
        name = " ".join(["qrelkit", *path])
        lines += [f"## `{name}`", ""]
        lines += _help_md(cmd.help)
        args = [p for p in cmd.params if p.param_type_name == "argument"]
        opts = [p for p in cmd.params if p.param_type_name == "option" and p.name != "help"]
        usage = name + "".join(f" {a.name.upper()}{'...' if a.nargs == -1 else ''}" for a in args) + " [OPTIONS]"
        lines += ["```", usage, "```", ""]
        if args or opts:
            lines += ["| argument / option | meaning |", "|---|---|"]
            for a in args:
                lines.append(f"| `{a.name.upper()}` | {_plain(getattr(a, 'help', '')).replace('|', '/')} |")
            for o in opts:
                flags = ", ".join(f"`{x}`" for x in o.opts + o.secondary_opts)
                req = " (required)" if o.required else ""
                lines.append(f"| {flags} | {_plain(o.help).replace('|', '/')}{req} |")
            lines.append("")
    lines += config_keys()
    return "\n".join(lines).rstrip() + "\n"


def config_keys() -> list[str]:
    """The "Configuration keys" section: every key of qrelkit.config.SCHEMA, the registries' included
    (:func:`qrelkit.config.schema` imports them: the command line no longer does at its start)."""
    from qrelkit.config import format_value, schema

    lines = [
        "## Configuration keys",
        "",
        "Every key a protocol file (`--config FILE`, TOML) may set, with its type, default and meaning;",
        "flags override the file, the file these defaults. An unknown section or key, a value of the wrong",
        "type, out of range or not among the choices is an error (`[unknown-key]`, `[bad-type]`,",
        "`[out-of-range]`, `[bad-choice]`). `qrelkit config show` prints the effective values and their origin.",
        "",
        "| section | key | type | default | meaning |",
        "|---|---|---|---|---|",
    ]
    for section, keys in schema().items():
        for k in keys.values():
            lines.append(f"| `[{section}]` | `{k.name}` | {k.describe_type().replace('|', ' or ')} | `{format_value(k.default).replace('|', '/')}` | {k.help} |")
    lines.append("")
    return lines + cross_rules()


def cross_rules() -> list[str]:
    """The "Rules across keys" section: every rule of qrelkit.config.CROSS_RULES, by section."""
    from qrelkit.config import CROSS_RULES

    lines = [
        "### Rules across keys",
        "",
        "Values that contradict each other, or that a command would silently not honour, are refused when",
        "the configuration is loaded (`qrelkit config show`, `campaign init`, every command with `--config`),",
        "after the file and the `--set` flags are applied: one line `[rule]` naming every key involved, its",
        "value and where it was set (`FILE:LINE`, `--set` or `default`), what is wrong and how to fix it;",
        "exit 2. Each rule is a small function registered under its section (`qrelkit.config.cross_rule`);",
        "only values that certainly contradict each other are refused.",
        "",
        "| section | rule | refused |",
        "|---|---|---|",
    ]
    for section, rules in CROSS_RULES.items():
        for name, func in rules.items():
            doc = " ".join((func.__doc__ or "").split()).replace("``", "`")
            lines.append(f"| `[{section}]` | `{name}` | {doc.replace('|', '/')} |")
    lines.append("")
    return lines


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        sys.exit(0 if OUT.read_text() == text else 1)
    OUT.write_text(text)
    print(f"wrote {OUT}")
