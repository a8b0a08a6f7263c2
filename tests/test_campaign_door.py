"""A campaign's door (issue 19, "silent loss must be impossible"): no command's output replaces
what the campaign depends on, a campaign never writes over a file it did not create, and the
report's twin never replaces a user's file."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from qrelkit.campaign import Campaign, open_campaign_store
from qrelkit.cli import run as cli
from qrelkit.errors import InputError
from qrelkit.io.qrels import read_qrels
from qrelkit.simulate.oracle import judge_batches
from conftest import campaign_init_args

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "configs" / "trec-dl-2022.toml"


@pytest.fixture(scope="module")
def sim(sim3, tmp_path_factory) -> Path:
    """A copy of ``sim3``: these tests try to write over its files."""
    d = tmp_path_factory.mktemp("sim") / "c"
    shutil.copytree(sim3, d)
    return d


def _init(sim: Path, d: Path, *extra: str) -> int:
    return cli(campaign_init_args(sim, d, *extra))


@pytest.fixture(scope="module")
def camp(sim, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("camp") / "c"
    assert _init(sim, d) == 0
    return d


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _err(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("target", ["manifest.csv", "topics.tsv", "corpus.jsonl", "runs/new.csv"])
def test_status_output_never_replaces_a_recorded_input(sim, camp, target, capsys):
    """``campaign status -o simd/manifest.csv`` replaced the campaign's own manifest (exit 0), and
    the campaign was then blocked by [input-changed]; a file inside the folder of runs would join
    the runs of the next command that reads the folder."""
    out = sim / target
    before = _digest(out) if out.exists() else None
    assert cli(["campaign", "status", str(camp), "-o", str(out)]) == 2
    assert "[output-is-input]" in _err(capsys)
    assert (_digest(out) if out.exists() else None) == before
    assert cli(["campaign", "status", str(camp)]) == 0


def test_outputs_never_land_in_a_campaign_folder(sim, camp, tmp_path, capsys):
    """Any command: the campaign folder holds only what the campaign writes."""
    before = {p.name: _digest(p) for p in camp.iterdir() if p.is_file()}
    for args in (["campaign", "status", str(camp), "-o", str(camp / "pool.parquet")],
                 ["campaign", "report", str(camp), "-o", str(camp / "report.html")],
                 ["pool", "depth", str(sim / "runs"), "-o", str(camp / "pool.parquet")],
                 ["campaign", "status", str(camp), "-o", str(camp / "sub" / "status.csv")]):
        assert cli(args) == 2, args
        assert "[output-in-campaign]" in _err(capsys)
    assert {p.name: _digest(p) for p in camp.iterdir() if p.is_file()} == before
    assert not (camp / "sub").exists()


def test_init_refuses_a_folder_with_files_unless_forced(sim, tmp_path, capsys):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "pool.parquet").write_text("my own pool\n")
    (d / "notes.txt").write_text("my notes\n")
    assert _init(sim, d) == 2
    assert "[folder-not-empty]" in _err(capsys)
    assert _init(sim, d, "--force") == 2  # adopted, but a name the campaign writes is there
    assert "[folder-has-campaign-names]" in _err(capsys)
    assert sorted(p.name for p in d.iterdir()) == ["notes.txt", "pool.parquet"]
    (d / "pool.parquet").unlink()
    assert _init(sim, d, "--force") == 0
    assert cli(["campaign", "run", str(d), "--until", "pool"]) == 0
    assert (d / "notes.txt").read_text() == "my notes\n"


def test_a_failed_init_leaves_no_folder_it_made(sim, tmp_path, capsys, monkeypatch):
    """Init fails after the folders are made (here: while the store records the inputs): the
    store's files and every folder init made are gone, a folder that was there stays."""
    from qrelkit.store.state import SqliteCampaignState

    def boom(*a, **k):
        raise InputError("unwritable-output", "simulated failure while recording the inputs")

    monkeypatch.setattr(SqliteCampaignState, "record_inputs", boom)
    d = tmp_path / "new" / "deeper" / "camp"
    assert _init(sim, d) == 2
    assert "simulated failure" in _err(capsys)
    assert not (tmp_path / "new").exists()
    kept = tmp_path / "kept"
    kept.mkdir()
    assert _init(sim, kept) == 2
    capsys.readouterr()
    assert kept.is_dir() and not any(kept.iterdir())


def test_report_twin_never_replaces_a_users_file(camp, tmp_path, capsys):
    """``campaign report -o NOTES.html`` overwrote an existing NOTES.md."""
    notes = tmp_path / "NOTES.md"
    notes.write_text("my notes\n")
    assert cli(["campaign", "report", str(camp), "-o", str(tmp_path / "NOTES.html")]) == 2
    assert "[output-exists]" in _err(capsys) and notes.read_text() == "my notes\n"
    assert not (tmp_path / "NOTES.html").exists()
    assert cli(["campaign", "report", str(camp), "-o", str(tmp_path / "report.html")]) == 0
    assert cli(["campaign", "report", str(camp), "-o", str(tmp_path / "report.html")]) == 0  # its own twin: replaced
    assert cli(["campaign", "report", str(camp), "-o", str(tmp_path / "NOTES.html"), "--force"]) == 0
    assert notes.read_text().startswith("# Campaign report")


@pytest.fixture(scope="module")
def waiting(sim, tmp_path_factory) -> tuple[Path, Path]:
    """A campaign waiting for its screening batches, and their files filled in by the hidden qrels."""
    d = tmp_path_factory.mktemp("wait") / "c"
    assert _init(sim, d) == 0
    res = Campaign(d).run()
    assert res["state"] == "waiting for judgments"
    df = pd.concat([pd.read_csv(w["file"], dtype=str, keep_default_na=False) for w in res["waiting"]], ignore_index=True)
    done = judge_batches(df, read_qrels(sim / "qrels.txt"))[["batch_id", "qid", "docid", "assessor", "grade"]]
    out = d.parent / "done.csv"
    done.to_csv(out, index=False)
    return d, out


def _judged(d: Path) -> int:
    with open_campaign_store(d, readonly=True) as s:
        return len(s.judgments.log(None, "all"))


@pytest.mark.parametrize("change,rule", [
    ("typo", "not-assigned"), ("stranger", "not-assigned"), ("other", "not-assigned"), ("batch", "unknown-batch")])
def test_import_refuses_rows_of_assessors_a_batch_was_not_issued_to(waiting, change, rule, tmp_path, capsys):
    """A row from an assessor the batch was never issued to (a typo 'Ann' for 'ann', a stranger,
    the other topic's assessor) was counted in the vote; a row of an unknown batch was imported and
    the campaign then waited with no explanation."""
    d, done = waiting
    df = pd.read_csv(done, dtype=str)
    owner = df["assessor"].iat[0]
    bad = df.head(3).copy()
    if change == "typo":
        bad["assessor"] = owner.lower() if owner != owner.lower() else owner.upper()
    elif change == "stranger":
        bad["assessor"] = "mallory"
    elif change == "other":
        bad["assessor"] = next(a for a in df["assessor"] if a != owner)
    else:
        bad["batch_id"] = "1001/scren"
    f = tmp_path / "bad.csv"
    pd.concat([df.tail(2), bad]).to_csv(f, index=False)
    n0 = _judged(d)
    assert cli(["campaign", "import", str(d), str(f)]) == 2
    err = _err(capsys)
    assert f"[{rule}]" in err and f"{f}:4:" in err, err  # the first bad row: line 4 (header, two good rows)
    if change == "typo":
        assert f"did you mean {owner!r}" in err
    assert _judged(d) == n0  # nothing imported
    assert cli(["campaign", "import", str(d), str(f), "--lenient", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["counts"][rule] == 3 and rep["imported"] <= 2



def test_a_batch_file_filled_in_place_is_never_overwritten(sim, tmp_path, capsys):
    """An assessor fills in her batch file where the campaign wrote it (DIR/batches/...); a
    ``campaign run`` before it is imported rewrote it blank (the answers lost). It is left as it is,
    and the run says to import it."""
    d = tmp_path / "c"
    assert _init(sim, d) == 0
    res = Campaign(d).run()
    f = Path(res["waiting"][0]["file"])
    df = pd.read_csv(f, dtype=str, keep_default_na=False)
    df["grade"] = "1"
    df.to_csv(f, index=False)
    before = f.read_bytes()
    res = Campaign(d).run()
    assert f.read_bytes() == before
    row = next(w for w in res["waiting"] if w["file"] == str(f))
    assert f"the file holds {len(df)} grade(s): import it" in row["note"]
    f.write_text("not a table\x00")
    Campaign(d).run()
    assert f.read_text() == "not a table\x00"
    df.to_csv(f, index=False)
    assert cli(["campaign", "import", str(d), str(f)]) == 0
    assert all(w["file"] != str(f) for w in Campaign(d).run()["waiting"])


def test_export_never_replaces_a_recorded_input(sim, camp, capsys):
    before = (sim / "topics.tsv").read_bytes()
    assert cli(["campaign", "export", str(camp), "-o", str(sim / "topics.tsv")]) == 2
    assert "[output-is-input]" in _err(capsys)
    assert (sim / "topics.tsv").read_bytes() == before


def test_a_markdown_report_alone(camp, tmp_path, capsys):
    """``-o r.md`` writes the Markdown report only (it was refused as two outputs, the same file)."""
    assert cli(["campaign", "report", str(camp), "-o", str(tmp_path / "r.md")]) == 0
    assert (tmp_path / "r.md").read_text().startswith("# Campaign report") and not (tmp_path / "r.html").exists()
