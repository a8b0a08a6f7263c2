"""Operating a campaign for weeks (issue 19): correcting judgments from the command line, reading
why a campaign waits, recovering from a failed run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from qrelkit.campaign import Campaign, open_campaign_store
from qrelkit.cli import run as cli
from qrelkit.io.qrels import read_qrels
from conftest import campaign_init_args



@pytest.fixture
def finished(finished3) -> Path:
    return finished3


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_list_set_retract_through_the_change_log(finished, tmp_path, capsys):
    d = tmp_path / "c"
    shutil.copytree(finished, d)
    assert cli(["campaign", "judgments", "list", str(d), "--json"]) == 0
    log = pd.DataFrame(json.loads(capsys.readouterr().out)["judgments"])
    q0 = read_qrels(d / "qrels-passages.txt").to_pandas()
    row = q0[q0["rel"] >= 2].iloc[0]  # a relevant passage of an accepted topic
    mine = log[(log["qid"] == row["qid"]) & (log["docid"] == row["docid"])]
    assert len(mine) >= 1
    assessor = mine["assessor"].iat[0]
    args = ["--topic", row["qid"], "--docid", row["docid"], "--assessor", assessor]
    assert cli(["campaign", "judgments", "set", str(d), *args, "--grade", "0", "--reason", "typo", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["changed"] == len(mine) and res["stages_to_redo"] == ["qrels", "evaluate", "reuse", "report"]
    with open_campaign_store(d, readonly=True) as s:  # the grade in force is what every reader reads
        j = s.judgments.log(row["qid"], "all")
        assert set(j.loc[j["docid"] == row["docid"], "grade"]) == {0}
    assert cli(["campaign", "judgments", "list", str(d), "--topic", row["qid"], "--history", "--json"]) == 0
    hist = pd.DataFrame(json.loads(capsys.readouterr().out)["judgments"])
    h = hist[hist["docid"] == row["docid"]]
    assert (h["change"] == 0).sum() == len(mine)  # the original rows stay
    assert h.loc[h["change"] > 0, "source"].str.startswith("organizer-set: typo").all()
    assert Campaign(d).health()["state"] == "ready"  # the closing stages run again
    assert cli(["campaign", "run", str(d)]) == 0
    q1 = read_qrels(d / "qrels-passages.txt").to_pandas()
    got = q1[(q1["qid"] == row["qid"]) & (q1["docid"] == row["docid"])]["rel"].tolist()
    assert got == [0]
    # setting it again changes nothing and redoes nothing
    assert cli(["campaign", "judgments", "set", str(d), *args, "--grade", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["changed"] == 0
    # retract: the item is owed again by its assessor, and the campaign says so
    assert cli(["campaign", "judgments", "retract", str(d), *args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["changed"] == len(mine)
    h = Campaign(d).health()
    assert h["state"] == "waiting"
    assert any(o["qid"] == row["qid"] and o["assessor"] == assessor and o["owed"] >= 1 for o in h["owed"])
    # the campaign asks for it again before it remakes the qrels
    res = Campaign(d).run()
    assert res["state"] == "waiting for judgments" and "qrels" not in res["stages_done"]
    assert [(w["qid"], w["assessor"]) for w in res["waiting"]] == [(row["qid"], assessor)]
    f = Path(res["waiting"][0]["file"])
    again = pd.read_csv(f, dtype=str, keep_default_na=False)
    again["grade"] = "1"
    again.to_csv(tmp_path / "again.csv", index=False)
    assert cli(["campaign", "import", str(d), str(tmp_path / "again.csv")]) == 0
    assert Campaign(d).run()["state"] == "done" and Campaign(d).health()["state"] == "done"
    q2 = read_qrels(d / "qrels-passages.txt").to_pandas()
    assert q2[(q2["qid"] == row["qid"]) & (q2["docid"] == row["docid"])]["rel"].tolist() == [1]


@pytest.mark.parametrize("argv,rule", [
    (["--topic", "1001", "--docid", "nope", "--assessor", "A01", "--grade", "1"], "unknown-judgment"),
    (["--topic", "1001", "--docid", "x", "--assessor", "A01", "--grade", "7"], "grade-outside-scale"),
    (["--topic", "1001", "--docid", "x"], "bad-option"),
])
def test_bad_corrections_are_one_line_and_change_nothing(finished, argv, rule, tmp_path, capsys):
    d = tmp_path / "c"
    shutil.copytree(finished, d)
    before = (d / "campaign.db").read_bytes()
    assert cli(["campaign", "judgments", "set", str(d), *argv]) == 2
    assert f"[{rule}]" in _one_line(capsys)
    assert (d / "campaign.db").read_bytes() == before


def test_corrections_from_a_file(finished, tmp_path, capsys):
    d = tmp_path / "c"
    shutil.copytree(finished, d)
    out = tmp_path / "j.csv"
    assert cli(["campaign", "judgments", "list", str(d), "--topic", "1001", "-o", str(out)]) == 0
    df = pd.read_csv(out, dtype=str).head(5)
    df["grade"] = "3"
    df.to_csv(tmp_path / "fix.csv", index=False)
    assert cli(["campaign", "judgments", "set", str(d), "--file", str(tmp_path / "fix.csv"), "--json"]) == 0
    capsys.readouterr()
    with open_campaign_store(d, readonly=True) as s:
        j = s.judgments.log("1001", "all")
        assert set(j.loc[j["docid"].isin(set(df["docid"])), "grade"]) == {3}
    bad = df.assign(grade="x")
    bad.to_csv(tmp_path / "bad.csv", index=False)
    assert cli(["campaign", "judgments", "set", str(d), "--file", str(tmp_path / "bad.csv")]) == 2
    assert f"{tmp_path / 'bad.csv'}:2: [grade-outside-scale]" in _one_line(capsys)


FINAL = ["qrels-passages.txt", "qrels-expanded.txt", "qrels-documents.txt", "leaderboard.csv", "eval-per-query.csv",
         "reuse-summary.csv", "report.md"]


def test_a_failed_run_is_said_and_the_next_run_recovers(sim3, finished, tmp_path, capsys, monkeypatch):
    """A disk that fills up in the middle of a stage (here: the CAL features) is one line
    [disk-full], exit 2; ``campaign status`` says what failed, when and what to do; once space is
    free, the next ``campaign run`` continues without any manual step and gives the bytes of an
    uninterrupted run."""
    import errno

    import qrelkit.campaign.stages as stages

    d = tmp_path / "c"
    assert cli(campaign_init_args(sim3, d)) == 0
    capsys.readouterr()
    real = stages.build_features

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(stages, "build_features", full)
    assert cli(["campaign", "run", str(d), "--oracle", str(sim3 / "qrels.txt"), "--seed", "7"]) == 2
    err = _one_line(capsys)
    assert f"{d}: [disk-full] no space left on the device" in err
    h = Campaign(d).health()
    assert h["state"] == "blocked" and h["failure"]["stage"] == "cal" and h["failure"]["rule"] == "disk-full"
    assert "free some space" in h["failure"]["todo"] and h["failure"]["by"] == "a campaign run"
    assert cli(["campaign", "status", str(d)]) == 0
    out = capsys.readouterr().out
    assert "last run failed (a campaign run" in out and "stage cal" in out and "to do: free some space" in out
    monkeypatch.setattr(stages, "build_features", real)
    assert cli(["campaign", "run", str(d), "--oracle", str(sim3 / "qrels.txt"), "--seed", "7"]) == 0
    assert Campaign(d).health()["state"] == "done" and Campaign(d).health()["failure"] is None
    for name in FINAL:
        assert (d / name).read_bytes() == (finished / name).read_bytes(), name


def test_status_says_an_input_blocks_the_campaign(sim3, tmp_path, capsys):
    sim = tmp_path / "s"
    shutil.copytree(sim3, sim)
    d = tmp_path / "c"
    assert cli(campaign_init_args(sim, d)) == 0
    capsys.readouterr()
    topics = (sim / "topics.tsv").read_text()
    (sim / "topics.tsv").write_text(topics + "9999\textra\n")
    assert cli(["campaign", "run", str(d)]) == 2
    assert "[input-changed]" in _one_line(capsys)
    assert cli(["campaign", "status", str(d), "--json"]) == 0  # status still works, and says why
    h = json.loads(capsys.readouterr().out)
    assert h["state"] == "blocked" and h["inputs"][0]["rule"] == "input-changed"
    assert h["inputs"][0]["file"] == str((sim / "topics.tsv").resolve()) and "restore" in h["inputs"][0]["todo"]
    (sim / "topics.tsv").write_text(topics)  # the cause fixed: the campaign goes on by itself
    assert cli(["campaign", "run", str(d), "--until", "pool"]) == 0
    assert Campaign(d).health()["state"] == "ready"


def test_status_flags_batches_no_account_can_judge(sim3, tmp_path, capsys):
    d = tmp_path / "c"
    assert cli(campaign_init_args(sim3, d)) == 0
    assert Campaign(d).run()["state"] == "waiting for judgments"
    assert cli(["campaign", "assessor", "add", str(d), "A01"]) == 0
    assert cli(["campaign", "assessor", "add", str(d), "A02"]) == 0
    assert cli(["campaign", "assessor", "revoke", str(d), "A02"]) == 0
    capsys.readouterr()
    h = Campaign(d).health()
    assert h["state"] == "waiting"
    by = {o["assessor"]: o for o in h["owed"]}
    assert by["A01"]["judgeable"] and not by["A02"]["judgeable"] and not by["A03"]["judgeable"]
    assert "revoked" in by["A02"]["note"] and "has no account" in by["A03"]["note"]
    assert all(o["owed"] == o["items"] > 0 for o in h["owed"])
    assert "2 batch(es) nobody can judge" in h["summary"]


def test_a_real_full_disk_then_space_freed(sim3, finished, tmp_path, capsys):
    """The same on a real file system that fills up (a 700 KiB tmpfs, grown to 64 MiB once the run
    failed): one line, exit 2, and the resumed run's final files are those of a clean run. Needs
    root and mount(8); skipped elsewhere."""
    import os
    import subprocess

    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=700k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs root and mount(8)")
    try:
        d = mnt / "c"
        assert cli(campaign_init_args(sim3, d)) == 0
        capsys.readouterr()
        assert cli(["campaign", "run", str(d), "--oracle", str(sim3 / "qrels.txt"), "--seed", "7"]) == 2
        assert "[disk-full]" in _one_line(capsys)
        assert Campaign(d).health()["state"] == "blocked"
        subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], check=True)
        assert cli(["campaign", "run", str(d), "--oracle", str(sim3 / "qrels.txt"), "--seed", "7"]) == 0
        for name in FINAL:
            assert (d / name).read_bytes() == (finished / name).read_bytes(), name
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_disk_too_full_for_the_store_is_not_a_damaged_store(tmp_path):
    """SQLite's I/O error on a full disk (its WAL index cannot grow) was reported as a damaged
    store, with the advice to restore it from a backup."""
    import sqlite3

    from qrelkit.store import io_error

    err = io_error(sqlite3.OperationalError("database or disk is full"), tmp_path / "campaign.db")
    assert err.rule == "disk-full" and err.file == str(tmp_path / "campaign.db")
    err = io_error(sqlite3.OperationalError("disk I/O error"), tmp_path / "campaign.db")
    assert err.rule == "store-io-error" and "not found damaged" in err.message  # this disk has room
    assert io_error(sqlite3.OperationalError("no such table: x"), tmp_path / "campaign.db") is None
