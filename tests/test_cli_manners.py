"""The command line's manners (issue 19): ``--version``; ``-h`` wherever ``--help`` is; help
that wraps at words (no docstring line break mid-sentence, no word split at 80 or 60 columns);
``campaign run --until`` naming the stages; an example in the help of every ``campaign``
command, the ones added later included."""

from __future__ import annotations

import re
from importlib.metadata import version

import pytest
import typer.main

from qrelkit.cli import app, run as cli
from qrelkit.cli.common import EXAMPLES
from qrelkit.config import CAMPAIGN_STAGES

ROOT_CMD = typer.main.get_command(app)
BOX = re.compile(r"[│╭╮╰╯─┃┏┓┗┛━┡┩╇┳┻╋┣┫]")


def _is_group(cmd) -> bool:
    return hasattr(cmd, "list_commands")


def walk(cmd=ROOT_CMD, path: tuple[str, ...] = (), parent=None):
    """(path, command) of the root, every group and every command (each context made under its
    parent's, as a real call makes it: click caches a command's help option on first use)."""
    yield path, cmd
    if _is_group(cmd):
        ctx = cmd.make_context(path[-1] if path else "qrelkit", [], parent=parent, resilient_parsing=True)
        for name in cmd.list_commands(ctx):
            yield from walk(cmd.get_command(ctx, name), path + (name,), ctx)


ALL = list(walk())
COMMANDS = [(p, c) for p, c in ALL if not _is_group(c)]


def _help(path: tuple[str, ...], flag: str, capsys) -> str:
    """The help of ``qrelkit PATH`` as ``flag`` prints it (the command tree built once, as
    ``qrelkit.cli.run`` builds it on every call)."""
    capsys.readouterr()
    try:
        ROOT_CMD.main([*path, flag], prog_name="qrelkit", standalone_mode=False)
    except SystemExit as exc:
        assert not exc.code, path
    return capsys.readouterr().out


def test_version(capsys):
    assert cli(["--version"]) == 0
    assert capsys.readouterr().out == f"qrelkit {version('qrelkit')}\n"


def test_dash_h_everywhere(capsys):
    assert len(COMMANDS) > 50
    for path, _ in ALL:
        assert _help(path, "-h", capsys).lstrip().startswith(f"Usage: qrelkit {' '.join(path)}".rstrip()), path
    for path in [(), ("batch",), ("campaign", "assessor"), ("campaign", "assessor", "add"), ("labels", "aggregate")]:
        assert cli([*path, "-h"]) == 0
        short = capsys.readouterr().out
        assert cli([*path, "--help"]) == 0
        assert short == capsys.readouterr().out, path


def _paragraphs(text: str) -> list[str]:
    return [p for p in text.split("\n\n") if not p.startswith(EXAMPLES)]


def test_help_strings_have_no_line_break_mid_paragraph():
    for path, cmd in ALL:
        texts = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
        for t in texts:
            for para in _paragraphs(t):
                assert "\n" not in para, (path, para)


def _words(cmd) -> set[str]:
    text = " ".join(_paragraphs(cmd.help or "") + [getattr(p, "help", None) or "" for p in cmd.params])
    return set(text.replace("\\[", "[").split())


@pytest.mark.parametrize("columns", [80, 60])
def test_help_wraps_at_words(columns, monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.delenv("TERMINAL_WIDTH", raising=False)
    for path, cmd in ALL:
        out = _help(path, "--help", capsys)
        assert max(len(ln) for ln in out.splitlines()) <= columns, path
        tokens = set(BOX.sub(" ", out).split())
        split = sorted(w for w in _words(cmd) if w not in tokens)
        assert not split, (path, columns, split[:5])


def test_until_names_the_stages(tmp_path, capsys):
    out = _help(("campaign", "run"), "--help", capsys)
    flat = " ".join(BOX.sub(" ", out).split())
    assert "Stop after this stage: " + ", ".join(CAMPAIGN_STAGES) + "." in flat
    (tmp_path / "campaign.db").touch()
    assert cli(["campaign", "run", str(tmp_path), "--until", "nope"]) == 2
    err = capsys.readouterr().err
    assert "[bad-option]" in err and ", ".join(CAMPAIGN_STAGES) in err


def test_every_campaign_command_has_an_example(capsys):
    campaign = [(p, c) for p, c in COMMANDS if p[0] == "campaign"]
    assert {p[1] for p, _ in campaign} >= {"init", "run", "import", "status", "report", "assessor", "prefs"}
    for path, cmd in campaign:
        ex = [p for p in (cmd.help or "").split("\n\n") if p.startswith(EXAMPLES)]
        assert ex, f"'qrelkit {' '.join(path)}' has no example: add @common.examples(...) under its @app.command"
        lines = [ln.strip() for ln in ex[0].splitlines()[1:]]
        assert lines and all(ln.startswith(f"qrelkit {' '.join(path)}") for ln in lines), (path, lines)
        out = _help(path, "-h", capsys)
        assert EXAMPLES in out and lines[0].split()[-1] in out
