"""The campaign runner (issue 13): init, run with an oracle or waiting for assessors, import,
status, report; resumable after SIGKILL with byte-identical final outputs."""

from __future__ import annotations

import base64
import html.parser
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from qrelkit.campaign import CAMPAIGN_SCHEMA_VERSION, Campaign, open_campaign_store
from qrelkit.cli import run as cli
from qrelkit.io.qrels import read_qrels

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "configs" / "trec-dl-2022.toml"
FINAL = ["qrels-passages.txt", "qrels-expanded.txt", "qrels-documents.txt", "expansion.csv", "eval-summary.csv",
         "eval-per-query.csv", "leaderboard.csv", "eval-duplicates.csv", "reuse-summary.csv", "reuse-runs.csv",
         "report.md", "report.html"]


@pytest.fixture(scope="module")
def sim(sim4) -> Path:
    return sim4  # conftest: 3000 passages, 4 topics, 3 groups, seed 1


def _init_args(sim: Path, d: Path, config: Path = CFG) -> list[str]:
    return ["campaign", "init", str(d), "-c", str(config), "--corpus", str(sim / "corpus.jsonl"), "-t",
            str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")]


def _copy_inputs(sim: Path, dst: Path) -> Path:
    shutil.copytree(sim, dst)
    return dst


@pytest.fixture(scope="module")
def oracle(sim, tmp_path_factory) -> Path:
    """The hidden qrels with topic 1002 made too hard: nothing relevant (the simulator's topics
    1001 and 1003 are too easy: most of their pool is relevant)."""
    p = tmp_path_factory.mktemp("oracle") / "qrels.txt"
    lines = (sim / "qrels.txt").read_text().splitlines()
    p.write_text("".join((ln.rsplit(" ", 1)[0] + " 0" if ln.startswith("1002 ") else ln) + "\n" for ln in lines))
    return p


@pytest.fixture(scope="module")
def finished(sim, oracle, tmp_path_factory) -> Path:
    """An uninterrupted campaign judged by the oracle (error rate 0.1, seed 7)."""
    d = tmp_path_factory.mktemp("camp") / "done"
    assert cli(_init_args(sim, d)) == 0
    res = Campaign(d).run(oracle=oracle, error_rate=0.1, seed=7)
    assert res["state"] == "done"
    return d


def test_init_records_inputs_and_effective_config(sim, tmp_path):
    d = tmp_path / "c"
    assert cli(_init_args(sim, d)) == 0
    with open_campaign_store(d) as s:
        inputs = s.state.inputs()
        names = set(inputs["name"])
        assert {"corpus", "topics", "manifest", "run", "config"} <= names
        assert (inputs["name"] == "run").sum() == len(list((sim / "runs").iterdir()))
        import hashlib

        row = inputs[inputs["name"] == "topics"].iloc[0]
        assert row["sha256"] == hashlib.sha256((sim / "topics.tsv").read_bytes()).hexdigest()
        assert row["size"] == (sim / "topics.tsv").stat().st_size
        cfg = s.state.config_rows()
        depth = cfg[(cfg["section"] == "pool") & (cfg["key"] == "depth")].iloc[0]
        assert depth["value"] == 10 and depth["origin"] == "file"
        assert len(cfg[cfg["section"] == "campaign"]) >= 4
        assert s.topics.all()["qid"].tolist() == ["1001", "1002", "1003", "1004"]
        assert s.db.conn.execute("SELECT value FROM meta WHERE key = 'campaign_schema_version'").fetchone()[0] == str(CAMPAIGN_SCHEMA_VERSION)


def test_reinit_refused(sim, tmp_path, capsys):
    d = tmp_path / "c"
    assert cli(_init_args(sim, d)) == 0
    before = (d / "campaign.db").read_bytes()
    capsys.readouterr()
    assert cli(_init_args(sim, d)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[campaign-exists]" in err[0]
    assert (d / "campaign.db").read_bytes() == before


def test_bad_input_creates_nothing(sim, tmp_path, capsys):
    bad = tmp_path / "topics.tsv"
    bad.write_bytes(b"\xff\xfe bad\n")
    d = tmp_path / "c"
    args = _init_args(sim, d)
    args[args.index("-t") + 1] = str(bad)
    assert cli(args) == 2
    assert "[not-utf8]" in capsys.readouterr().err
    assert not (d / "campaign.db").exists()


def test_input_changed_refused(sim, tmp_path, capsys):
    src = _copy_inputs(sim, tmp_path / "sim")
    d = tmp_path / "c"
    assert cli(_init_args(src, d)) == 0
    # same size, new content, new mtime: caught by the hash
    t = src / "topics.tsv"
    data = t.read_bytes()
    t.write_bytes(data.replace(b"1001", b"1009", 1))
    os.utime(t, ns=(time.time_ns(), time.time_ns() + 10_000_000))
    capsys.readouterr()
    for argv in (["campaign", "run", str(d)], ["campaign", "report", str(d), "-o", str(tmp_path / "r.html")]):
        assert cli(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "[input-changed]" in err[0] and "topics.tsv" in err[0]
    assert cli(["campaign", "status", str(d)]) == 0  # status says why the campaign is blocked (issue 19)
    out = capsys.readouterr().out
    assert "[input-changed]" in out and "topics.tsv" in out and out.rstrip().splitlines()[-1].startswith("blocked:")
    t.write_bytes(data)  # restored: accepted again
    assert cli(["campaign", "run", str(d), "--until", "validate"]) == 0


def test_oracle_campaign_end_to_end(sim, oracle, finished):
    c = Campaign(finished)
    st = c.status()
    # every topic reaches a decision; too dense topics go at screening; accepted ones by the density rule
    assert st["decision"].notna().all()
    assert set(st["decision"]) <= {"accept", "reject", "stop", "discarded"}
    assert (st["decision"] == "discarded").any() and (st["decision"] == "accept").any()
    screening = dict(zip(st["qid"], st["screening"]))
    assert screening["1001"] == screening["1003"] == "discard-too-many"  # too easy
    assert set(st.loc[st["decision"] == "discarded", "screening"]) <= {"discard-too-many", "discard-none"}
    assert set(st.loc[st["decision"] == "accept", "rule"]) == {"density"}
    assert (st.loc[st["decision"] == "accept", "density"] < 0.4).all()
    assert st["batches_out"].sum() == 0
    # the judgments agree with the oracle at the simulated error rate (0.1)
    truth = read_qrels(oracle).to_pandas()
    with open_campaign_store(finished) as s:
        log = s.judgments.log(None, "all")
        assert set(log["assessor"]) <= {"A01", "A02", "A03", "A04"}
    log = log.drop_duplicates(["qid", "docid", "assessor"])
    m = log.merge(truth, on=["qid", "docid"], how="left").fillna({"rel": 0})
    agree = float((m["grade"] == m["rel"]).mean())
    assert len(m) > 300 and 0.85 <= agree <= 0.95
    # the final qrels hold the accepted topics only
    q = read_qrels(finished / "qrels-passages.txt").to_pandas()
    assert set(q["qid"]) == set(st.loc[st["decision"] == "accept", "qid"])
    for f in FINAL:
        assert (finished / f).is_file(), f


class _Images(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.srcs, self.links = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.srcs.append(a.get("src", ""))
        if tag in ("link", "script") and (a.get("href") or a.get("src")):
            self.links.append(a)


def test_report_is_self_contained_with_embedded_figures(finished, tmp_path):
    out = tmp_path / "report.html"
    assert cli(["campaign", "report", str(finished), "-o", str(out)]) == 0
    p = _Images()
    p.feed(out.read_text(encoding="utf-8"))
    assert len(p.srcs) >= 3 and not p.links
    for src in p.srcs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    text = out.read_text(encoding="utf-8")
    for section in ("Pool sizes per topic", "Screening outcomes", "Judged per topic by stage and thread",
                    "Relevance density vs. judged", "Stopping decision per topic", "Near-duplicate expansion per grade",
                    "Inter-assessor agreement", "Leaderboard", "Deduplicated runs vs. expanded qrels",
                    "Leave-one-group-out"):
        assert section in text, section
    md = out.with_suffix(".md").read_text(encoding="utf-8")
    assert "## Stopping decision per topic" in md and "| qid |" in md
    # the same store gives the same bytes
    again = tmp_path / "again.html"
    assert cli(["campaign", "report", str(finished), "-o", str(again)]) == 0
    assert again.read_bytes() == out.read_bytes()


def test_too_easy_and_too_hard_topics_discarded_at_screening(sim, oracle, tmp_path):
    d = tmp_path / "c"
    assert cli(_init_args(sim, d)) == 0
    assert Campaign(d).run(oracle=oracle, seed=1, until="screening")["state"] == "until screening"
    st = Campaign(d).status().set_index("qid")
    assert st.loc["1002", "screening"] == "discard-none" and st.loc["1002", "relevant"] == 0  # too hard
    assert st.loc["1001", "screening"] == st.loc["1003", "screening"] == "discard-too-many"  # too easy
    assert st.loc["1004", "screening"] == "discard-none"  # no relevant passage in its 31 pooled ones either
    assert (st.loc[["1001", "1002", "1003"], "decision"] == "discarded").all()
    assert st.loc["1002", "threads"] == "fractional:rejected local:rejected all:rejected"


def test_finished_campaign_runs_no_stage_again(oracle, finished):
    said = []
    res = Campaign(finished).run(oracle=oracle, error_rate=0.1, seed=7, progress=said.append)
    assert res["state"] == "done" and said == []


def test_other_oracle_refused(oracle, finished, capsys):
    assert cli(["campaign", "run", str(finished), "--oracle", str(oracle), "--error-rate", "0.2",
                "--seed", "7"]) == 2
    assert "[oracle-changed]" in capsys.readouterr().err


def _fill(files: list[Path], truth: Path, out: Path) -> Path:
    from qrelkit.simulate.oracle import judge_batches

    df = pd.concat([pd.read_csv(f, dtype=str, keep_default_na=False) for f in files], ignore_index=True)
    done = judge_batches(df, read_qrels(truth))
    done[["batch_id", "qid", "docid", "assessor", "grade"]].to_csv(out, index=False)
    return out


def test_waiting_for_assessors_then_import(sim, tmp_path, capsys):
    d = tmp_path / "c"
    assert cli(_init_args(sim, d)) == 0
    capsys.readouterr()
    assert cli(["campaign", "run", str(d), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["state"] == "waiting for judgments"
    out = res["waiting"]
    assert {w["qid"] for w in out} == {"1001", "1002", "1003", "1004"}
    assert len({w["assessor"] for w in out}) == 4  # topic ownership: one assessor per topic
    files = [Path(w["file"]) for w in out]
    assert all(f.is_file() and f.parent.parent == d / "batches" for f in files)
    done = _fill(files, sim / "qrels.txt", tmp_path / "done.csv")
    assert cli(["campaign", "import", str(d), str(done), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["imported"] == sum(w["items"] for w in out)
    assert cli(["campaign", "import", str(d), str(done), "--json"]) == 0  # idempotent
    assert json.loads(capsys.readouterr().out)["imported"] == 0
    flipped = pd.read_csv(done, dtype=str).head(1).assign(grade=lambda x: (x["grade"].astype(int) + 1) % 4)
    flipped.to_csv(tmp_path / "conflict.csv", index=False)
    assert cli(["campaign", "import", str(d), str(tmp_path / "conflict.csv")]) == 2
    assert "[conflict]" in capsys.readouterr().err
    assert cli(["campaign", "status", str(d), "--json"]) == 0
    st = json.loads(capsys.readouterr().out)["topics"]
    assert all(t["batches_out"] == 0 and t["judged"] > 0 for t in st)
    assert cli(["campaign", "run", str(d), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert "screening" in res["stages_done"]
    assert res["state"] in ("waiting for judgments", "done")


def test_until_and_bad_until(sim, tmp_path, capsys):
    d = tmp_path / "c"
    assert cli(_init_args(sim, d)) == 0
    res = Campaign(d).run(until="select")
    assert res["state"] == "until select" and res["stages_done"] == ["validate", "select"]
    assert (d / "selection.csv").is_file() and not (d / "pool.parquet").exists()
    assert cli(["campaign", "run", str(d), "--until", "nope"]) == 2
    assert "[bad-option]" in capsys.readouterr().err


def test_pool_only_config_judges_the_whole_pool(sim, tmp_path):
    cfg = tmp_path / "pool-only.toml"
    cfg.write_text('[campaign]\nskip = ["screening", "fractional", "cal", "reuse", "report"]\n')
    d = tmp_path / "c"
    assert cli(_init_args(sim, d, cfg)) == 0
    res = Campaign(d).run(oracle=sim / "qrels.txt", seed=3)
    assert res["state"] == "done"
    assert "cal" not in res["stages_done"] and "screening" not in res["stages_done"]
    # with a perfect oracle, the final qrels restricted to the pool equal the hidden qrels there
    pool = pd.read_parquet(d / "pool.parquet")[["qid", "docid"]]
    q = read_qrels(d / "qrels-passages.txt").to_pandas()
    truth = read_qrels(sim / "qrels.txt").to_pandas()
    got = pool.merge(q, on=["qid", "docid"], how="left")
    want = pool.merge(truth, on=["qid", "docid"], how="left").fillna({"rel": 0})
    assert len(got) == len(q) and got["rel"].notna().all()
    assert (got["rel"].astype(int).to_numpy() == want["rel"].astype(int).to_numpy()).all()


def test_kill_and_resume_gives_identical_outputs(sim, oracle, finished, tmp_path):
    """SIGKILL a `campaign run` subprocess at three points, run again: the final files are byte for
    byte those of the uninterrupted run, and every stage completed once."""
    d = tmp_path / "killed"
    assert cli(_init_args(sim, d)) == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-c", "import sys; from qrelkit.cli import run; sys.exit(run(sys.argv[1:]))",
           "campaign", "run", str(d), "--oracle", str(oracle), "--error-rate", "0.1", "--seed", "7"]
    with open_campaign_store(finished) as t:
        total = t.counts()["judgments"]
    killed, seen = 0, []
    rng = random.Random(13)
    # three kill points: once the store holds a random share of the judgments of a whole run
    # (screening, pool, CAL rounds), polled every 10 ms: wherever the runner is at that moment
    for share in (rng.uniform(0.05, 0.3), rng.uniform(0.35, 0.65), rng.uniform(0.7, 0.95)):
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while p.poll() is None and time.time() < deadline:
            db = sqlite3.connect(f"file:{d / 'campaign.db'}?mode=ro", uri=True, timeout=5)
            try:
                n = db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
            except sqlite3.OperationalError:
                n = 0
            finally:
                db.close()
            if n >= share * total:
                p.send_signal(signal.SIGKILL)
                killed += 1
                break
            time.sleep(0.01)
        p.wait()
        with open_campaign_store(d) as s:
            seen.append((round(share, 2), list(s.state.stages_done())[-1:], s.counts()["judgments"]))
    print("kill points (share, last stage done, judgments):", seen, "of", total)
    assert killed >= 1
    assert subprocess.run(cmd, env=env, capture_output=True).returncode == 0
    for f in FINAL:
        assert (d / f).read_bytes() == (finished / f).read_bytes(), f
    with open_campaign_store(d) as s, open_campaign_store(finished) as t:
        assert list(s.state.stages_done()) == list(t.state.stages_done())
        assert s.judgments.export_log().equals(t.judgments.export_log())


def test_several_assessors_per_item_and_topic_ownership(sim, tmp_path):
    cfg = tmp_path / "two.toml"
    cfg.write_text('[batch]\nassessors_per_item = 2\n[campaign]\nassessors = ["ann", "bob", "cy"]\n'
                   'skip = ["reuse", "report"]\n')
    d = tmp_path / "c"
    assert cli(_init_args(sim, d, cfg)) == 0
    assert Campaign(d).run(oracle=sim / "qrels.txt", error_rate=0.2, seed=5)["state"] == "done"
    with open_campaign_store(d) as s:
        log = s.judgments.log(None, "all")
        asg = s.assignments.all()
    own = log[log["assessor"].isin(["ann", "bob", "cy"])]
    # every item judged by exactly two assessors, never one assessor twice
    first = own[own["kind"] == "pool"]
    per_item = first.groupby(["qid", "docid"])["assessor"].agg(["nunique", "size"])
    assert (per_item["nunique"] == 2).all() and (per_item["size"] == 2).all()
    # topic ownership: the owner of a topic's screening batch is on each of its CAL batches
    owner = {q: a for q, a in zip(asg.loc[asg["batch_id"].str.endswith("/screen"), "qid"],
                                  asg.loc[asg["batch_id"].str.endswith("/screen"), "assessor"])}
    cal = asg[asg["kind"] == "cal"]
    assert len(cal) and all(owner[q] in set(g["assessor"]) for q, g in cal.groupby("qid"))
    report = Campaign(d).report(tmp_path / "r.html")
    assert "krippendorff_alpha" in report[0].read_text(encoding="utf-8")


def test_unwritable_outputs_refused_before_the_work(sim, tmp_path, capsys):
    # a read-only folder; root writes into those, so for root the folder is under a regular file
    ro = tmp_path / "ro"
    if os.geteuid() == 0:
        ro.write_text("x")
    else:
        ro.mkdir()
        ro.chmod(0o555)
    try:
        assert cli(_init_args(sim, ro / "c")) == 2
        assert "[unwritable-output]" in capsys.readouterr().err
        assert not (ro / "c").exists()
    finally:
        if ro.is_dir():
            ro.chmod(0o755)


def test_one_advance_at_a_time_across_processes(sim, oracle, tmp_path, capsys, monkeypatch):
    """While another process advances the campaign (it holds DIR/advance.lock), `campaign run`
    waits, then stops with one line ([campaign-busy]) and changes nothing; once the lock is free
    it runs. The lock is the operating system's: a killed holder frees it."""
    import qrelkit.campaign.lock as lock

    d = tmp_path / "c"
    assert cli(_init_args(sim, d)) == 0
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from qrelkit.campaign.lock import advance_lock\n"
        f"with advance_lock({str(d)!r}):\n    print('held', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(lock, "ADVANCE_WAIT_S", 0.3)
        before = sqlite3.connect(d / "campaign.db").execute("SELECT COUNT(*) FROM batches").fetchone()[0]
        capsys.readouterr()
        assert cli(["campaign", "run", str(d), "--oracle", str(oracle)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        # said at once: who holds it, since when, and how long this run waits (issue 19)
        assert len(err) == 2 and err[0].startswith("another process holds the campaign: a campaign run since ")
        assert f"pid {holder.pid}; waiting up to 0.3 s" in err[0]
        assert "[campaign-busy]" in err[1] and str(d) in err[1] and f"pid {holder.pid}" in err[1]
        assert sqlite3.connect(d / "campaign.db").execute("SELECT COUNT(*) FROM batches").fetchone()[0] == before
    finally:
        holder.kill()  # killed while holding it: the lock is free at once
        holder.wait()
    assert Campaign(d).run(oracle=oracle, error_rate=0.1, seed=7, until="pool")["state"] == "until pool"
    # the lock file is created as the umask allows (a group sharing the campaign shares its lock)
    old = os.umask(0o002)
    try:
        (d / "advance.lock").unlink()
        with lock.advance_lock(d, wait=0):
            pass
    finally:
        os.umask(old)
    assert (d / "advance.lock").stat().st_mode & 0o777 == 0o664
