"""What a new user reads: help text with its bracketed words, error messages without numpy
reprs, the README's example run names, defaults stated as they are recorded."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from qrelkit.cli import app, run
from qrelkit.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


def _help(capsys, monkeypatch, *argv: str) -> str:
    monkeypatch.setenv("COLUMNS", "250")
    capsys.readouterr()
    assert run([*argv, "--help"]) == 0
    return capsys.readouterr().out


def test_bracketed_words_survive_in_help(capsys, monkeypatch):
    """rich read '[pool]' and '[rule]' as markup and dropped them ("default: config  depth")."""
    assert "default: config [cal] budget" in _help(capsys, monkeypatch, "cal", "status")
    assert "FILE:LINE: [rule]" in _help(capsys, monkeypatch, "runs", "validate")
    assert "[dedupe] seed" in _help(capsys, monkeypatch, "dedupe", "cluster")


def test_every_bracketed_word_of_every_help_string_is_shown(capsys, monkeypatch):
    checked = 0
    for group in app.registered_groups:
        for cmd in group.typer_instance.registered_commands:
            texts = [cmd.help or ""] + [getattr(p.default, "help", None) or ""
                                        for p in inspect.signature(cmd.callback).parameters.values()]
            words = {m for t in texts for m in re.findall(r"\[[a-z][a-z_ -]*\]", t.replace("\\[", "["))}
            if not words:
                continue
            shown = _help(capsys, monkeypatch, group.name, cmd.name or cmd.callback.__name__)
            for w in words:
                assert w in shown, (group.name, cmd.name, w)
                checked += 1
    assert checked >= 10


def test_no_numpy_repr_in_error_messages(tmp_path, capsys):
    """'grade np.float64(1.5) is not an integer' became 'grade 1.5 ...'."""
    from qrelkit.io.qrels import read_qrels

    q = tmp_path / "q.txt"
    q.write_text("1 0 d1 1.5\n")
    with pytest.raises(InputError) as e:
        read_qrels(q)
    assert "np." not in str(e.value) and "grade 1.5 " in str(e.value)
    j = tmp_path / "j.csv"
    j.write_text("qid,docid,assessor,grade\n1,d1,A01,1.5\n")
    capsys.readouterr()
    assert run(["labels", "aggregate", str(j), "-o", str(tmp_path / "l.parquet")]) == 2
    err = capsys.readouterr().err
    assert "np." not in err and "grade 1.5 " in err, err


def test_readme_baseline_is_a_run_of_the_demo(tmp_path):
    """The README's --baseline names a run that the demo's simulated campaign has."""
    names = set(re.findall(r"--baseline\s+(\S+)", (ROOT / "README.md").read_text()))
    assert names
    assert run(["simulate", "campaign", "-o", str(tmp_path / "c"), "--passages", "500", "--topics", "2"]) == 0
    runs = {p.stem for p in (tmp_path / "c" / "runs").iterdir()}
    assert names <= runs, (names, sorted(runs))
    demo = set(re.findall(r"--baseline\s+(\S+)", (ROOT / "scripts" / "demo.sh").read_text()))
    assert demo <= runs


def test_dedupe_seed_help_states_the_recorded_default(tmp_path, capsys, monkeypatch):
    from qrelkit.dedupe import DedupeParams
    from qrelkit.io.tables import read_metadata

    default = DedupeParams().seed
    assert f"[dedupe] seed, {default})" in _help(capsys, monkeypatch, "dedupe", "cluster")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(f'{{"id": "p{i}", "contents": "passage number {i} about things"}}\n' for i in range(20)))
    assert run(["dedupe", "cluster", str(corpus), "-o", str(tmp_path / "k.parquet")]) == 0
    assert read_metadata(tmp_path / "k.parquet")["params"]["seed"] == default
