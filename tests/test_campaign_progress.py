"""Progress and honesty (issue 13): a rich progress bar with the stage names and CAL rounds on a
terminal only; every warning met — the rooms' too — is recorded and counted in the report."""

from __future__ import annotations

import io
import json
import shutil
import warnings
from pathlib import Path

from rich.console import Console

from qrelkit.campaign import Campaign, open_campaign_store
from qrelkit.campaign import runner as campaign_runner
from qrelkit.cli import run as cli
from qrelkit.cli.campaign import stage_progress

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "configs" / "trec-dl-2022.toml"


def _init(sim: Path, d: Path, *extra: str) -> Campaign:
    assert cli(["campaign", "init", str(d), "-c", str(CFG), "--corpus", str(sim / "corpus.jsonl"), "-t",
                str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv"), *extra]) == 0
    return Campaign(d)


def test_progress_names_the_stages_and_cal_rounds_on_a_terminal(sim6, tmp_path):
    said: list[str] = []
    res = _init(sim6, tmp_path / "c").run(oracle=sim6 / "qrels.txt", seed=7, until="cal", progress=said.append)
    assert res["state"] == "until cal"
    stages = [m for m in said if m.startswith("stage ")]
    assert stages[0] == "stage validate (1/8)" and stages[-1] == "stage cal (8/8)"
    assert any(m.startswith("CAL round 1: ") for m in said)
    out = io.StringIO()
    term = Console(file=out, force_terminal=True, width=100)
    with stage_progress(term) as say:
        for m in said:
            say(m)
    text = out.getvalue()
    assert "stage cal" in text and "CAL round" in text
    with stage_progress(Console(file=io.StringIO(), force_terminal=False)) as say:
        assert say is None  # not a terminal: no progress at all


def test_non_terminal_output_stays_clean(sim6, tmp_path, capsys):
    _init(sim6, tmp_path / "c")
    capsys.readouterr()
    assert cli(["campaign", "run", str(tmp_path / "c"), "--until", "select", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["state"] == "until select" and out.err == ""


def test_every_warning_is_counted_in_the_report(sim6, tmp_path, monkeypatch):
    src = tmp_path / "s"
    shutil.copytree(sim6, src)
    run = sorted((src / "runs").iterdir())[0]
    first = run.read_text().splitlines()[0]
    run.write_text(run.read_text() + first.replace(" 1 ", " 1001 ") + "\n")  # the same docid twice: repaired
    c = _init(src, tmp_path / "c", "--lenient")
    real = campaign_runner._FUNCS["select"]

    def select_with_warnings(ctx):  # a room's function that warns (a data warning and a deprecation)
        warnings.warn("the selection met something odd", RuntimeWarning)
        warnings.warn("an old keyword", DeprecationWarning)
        return real(ctx)

    monkeypatch.setitem(campaign_runner._FUNCS, "select", select_with_warnings)
    res = c.run(until="select")
    with open_campaign_store(c.dir) as s:
        w = s.state.warnings()
    msgs = dict(zip(w["message"], w["stage"]))
    repaired = [m for m in msgs if "[duplicate-docid]" in m]
    assert repaired and "repaired: first occurrence in the file kept" in repaired[0]  # run validation's repair
    assert msgs["RuntimeWarning: the selection met something odd"] == "select"
    assert not any("old keyword" in m for m in msgs)  # deprecations are not about the data
    assert res["warnings"] == len(w) >= 2
    report = c.report(tmp_path / "r.html")
    md = report[-1].read_text(encoding="utf-8")
    assert f"{len(w)} warning(s)." in md and "selection met something odd" in md
