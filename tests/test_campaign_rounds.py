"""CAL rounds per topic (issue 13): a topic whose batches are judged moves on at once, whatever the
other topics' batches; the order topics are judged in does not change the outputs; the
long-lived runner; the store's schema 1 -> 2 migration."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from qrelkit.campaign import CAMPAIGN_SCHEMA_VERSION, Campaign, open_campaign_store
from qrelkit.campaign import stages as campaign_stages
from qrelkit.campaign.judging import ORACLE_ASSESSOR_SOURCE, stable_seed
from qrelkit.cli import run as cli
from qrelkit.errors import InputError
from qrelkit.io.qrels import read_qrels
from qrelkit.simulate.oracle import judge_batches

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "configs" / "trec-dl-2022.toml"
ERR, SEED = 0.1, 7
OUTPUTS = ["qrels-passages.txt", "qrels-expanded.txt", "qrels-documents.txt", "expansion.csv", "eval-summary.csv",
           "eval-per-query.csv", "leaderboard.csv", "reuse-summary.csv"]


@pytest.fixture(scope="module")
def sim(sim6) -> Path:
    return sim6


def _init(sim: Path, d: Path, config: Path = CFG) -> Campaign:
    assert cli(["campaign", "init", str(d), "-c", str(config), "--corpus", str(sim / "corpus.jsonl"), "-t",
                str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")]) == 0
    return Campaign(d)


@pytest.fixture(scope="module")
def oracle_run(sim, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("oracle6") / "c"
    assert _init(sim, d).run(oracle=sim / "qrels.txt", error_rate=ERR, seed=SEED)["state"] == "done"
    return d


def _judge(d: Path, sim: Path, topics: set[str]) -> int:
    """Judge what is owed for ``topics`` exactly as the campaign's oracle would (same seeds per
    batch and assessor); returns the number of judgments imported."""
    rows = _oracle_rows(d, sim, topics)
    with open_campaign_store(d) as s:
        return s.judgments.import_judgments(rows, source=ORACLE_ASSESSOR_SOURCE).imported if len(rows) else 0


def _cal_out(res: dict) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for w in res["waiting"]:
        if w["kind"] == "cal":
            out.setdefault(w["qid"], set()).add(w["batch_id"])
    return out


def test_a_topic_whose_batches_are_judged_moves_on_alone(sim, tmp_path):
    d = tmp_path / "c"
    c = _init(sim, d)
    assert c.run(oracle=sim / "qrels.txt", error_rate=ERR, seed=SEED, until="fractional")["state"] == "until fractional"
    with c.runner() as r:
        res = r.advance()
        assert res["state"] == "waiting for judgments"
        first = _cal_out(res)
        assert set(first) == {"1001", "1003", "1005"}  # round 1 of every kept topic is out
        assert all(b.endswith("/0000") for bs in first.values() for b in bs)
        assert _judge(d, sim, {"1003"}) > 0  # only topic 1003's batches come back
        res = r.advance()
    again = _cal_out(res)
    # 1003 got its stopping rule and its round-2 batches at once; the others still wait on round 1
    assert again["1001"] == first["1001"] and again["1005"] == first["1005"]
    assert again["1003"] and all(b.endswith("/0001") for b in again["1003"])
    with open_campaign_store(d) as s:
        rounds = s.state.cal_rounds()
    assert rounds["1003"] == (2, "judge") and rounds["1001"] == rounds["1005"] == (1, "judge")


def test_topics_judged_one_at_a_time_in_reverse_give_the_oracle_outputs(sim, oracle_run, tmp_path):
    """Every batch judged by the same simulated assessor, but one topic at a time, the last
    topic with batches out first: the same final files as the oracle campaign."""
    d = tmp_path / "c"
    c = _init(sim, d)
    steps = 0
    with c.runner() as r:
        while (res := r.advance())["state"] != "done":
            assert res["state"] == "waiting for judgments" and steps < 200
            last = max({w["qid"] for w in res["waiting"]})
            assert _judge(d, sim, {last}) > 0
            steps += 1
    assert steps > 10
    for f in OUTPUTS:
        assert (d / f).read_bytes() == (oracle_run / f).read_bytes(), f
    with open_campaign_store(d) as s, open_campaign_store(oracle_run) as t:
        assert s.state.topics().equals(t.state.topics())
        assert s.state.cal_rounds() == t.state.cal_rounds()


def test_max_rounds_counts_each_topics_rounds(sim, tmp_path):
    cfg = tmp_path / "one.toml"
    cfg.write_text(CFG.read_text().replace("[campaign]\n", '[campaign]\nmax_rounds = 1\nskip = ["reuse", "report"]\n'))
    d = tmp_path / "c"
    res = _init(sim, d, cfg).run(oracle=sim / "qrels.txt", error_rate=ERR, seed=SEED)
    assert res["state"] == "done"
    with open_campaign_store(d) as s:
        cal = s.batches.all()
        cal = cal[cal["kind"] == "cal"]
        ct = s.state.topics().set_index("qid")
        rounds = s.state.cal_rounds()
    assert len(cal) and (cal["iteration"] == 0).all()  # one CAL batch per thread and topic
    assert {rounds[q][0] for q in ("1001", "1003", "1005")} == {1}
    assert set(ct.loc[["1001", "1003", "1005"], "rule"]) <= {"max-rounds", "density", "exhausted"}
    assert "max-rounds" in set(ct["rule"])


def test_runner_keeps_features_and_checks_inputs_cheaply(sim, tmp_path, monkeypatch):
    src = tmp_path / "s"
    shutil.copytree(sim, src)
    d = tmp_path / "c"
    c = _init(src, d)
    c.run(oracle=src / "qrels.txt", error_rate=ERR, seed=SEED, until="fractional")
    loads, hashes = [], []
    real_load = campaign_stages.load_features
    monkeypatch.setattr(campaign_stages, "load_features", lambda p: loads.append(p) or real_load(p))
    from qrelkit.campaign import store as campaign_store

    real_sha = campaign_store.sha256_file
    monkeypatch.setattr(campaign_store, "sha256_file", lambda p: hashes.append(p) or real_sha(p))
    with c.runner() as r:
        outs = []
        # the runner moves between threads (one at a time), as a web app's background worker does
        for _ in range(3):
            t = threading.Thread(target=lambda: outs.append(r.advance()))
            t.start()
            t.join()
        assert [o["state"] for o in outs] == ["waiting for judgments"] * 3
        assert outs[1]["waiting"] == outs[2]["waiting"] == outs[0]["waiting"]
        assert len(loads) == 1 and hashes == []  # features loaded once; no input read again
        # an input changed on disk (same size, new time, new content): the next call refuses
        t = src / "topics.tsv"
        data = t.read_bytes()
        t.write_bytes(data.replace(b"1001", b"1009", 1))
        with pytest.raises(InputError) as exc:
            r.advance()
        assert exc.value.rule == "input-changed" and len(hashes) == 1
        t.write_bytes(data)  # restored (new mtime, same bytes): hashed once more, then accepted
        assert r.advance()["state"] == "waiting for judgments"
        assert len(hashes) == 2 and r.advance()["state"] == "waiting for judgments" and len(hashes) == 2


def _as_version_1(d: Path, phase: str, round_: int) -> None:
    """Make the store what a version 1 store holds: no campaign_cal table, one CAL round and
    phase for every topic in campaign_state."""
    db = sqlite3.connect(d / "campaign.db")
    with db:
        db.execute("DROP VIEW live_pref_answers")
        for table in ("campaign_cal", "campaign_accounts", "campaign_pref_retractions", "campaign_pref_answers",
                      "campaign_pref_assign", "campaign_pref_tasks", "campaign_claims", "campaign_links",
                      "campaign_sessions"):  # those of versions 2 to 7
            db.execute(f"DROP TABLE {table}")
        db.execute("UPDATE meta SET value = '1' WHERE key = 'campaign_schema_version'")
        db.executemany("INSERT OR REPLACE INTO campaign_state VALUES (?, ?)",
                       [("cal_phase", json.dumps(phase)), ("cal_round", json.dumps(round_))])
    db.close()


def test_a_version_1_store_is_migrated(sim, tmp_path):
    """A schema-1 store (one CAL round and phase for every topic, in campaign_state) opens as
    the current schema: the round and phase become every topic's, and the campaign runs to the end."""
    d = tmp_path / "c"
    c = _init(sim, d)
    c.run(oracle=sim / "qrels.txt", error_rate=ERR, seed=SEED, until="fractional")
    _as_version_1(d, "judge", 0)
    with open_campaign_store(d) as s:
        assert s.state.cal_rounds() == {q: (0, "judge") for q in s.topics.all()["qid"]}
    # a version 1 store in the middle of round 2's issue phase
    _as_version_1(d, "issue", 2)
    with open_campaign_store(d, readonly=True) as s:  # read-only: read as it is, not migrated
        assert set(s.state.cal_rounds().values()) == {(2, "issue")} and s.accounts.all() == [] and len(s.prefs.answers()) == 0
        assert len(s.assignments.claims()) == 0
        assert s.schema_versions()["campaign_schema_version"] == 1 and s.state.get("cal_round") == 2
    with open_campaign_store(d) as s:
        version = s.db.conn.execute("SELECT value FROM meta WHERE key = 'campaign_schema_version'").fetchone()[0]
        assert int(version) == CAMPAIGN_SCHEMA_VERSION == 7
        assert s.accounts.all() == [] and len(s.assignments.claims()) == 0
        assert set(s.state.cal_rounds().values()) == {(2, "issue")}
        assert s.state.get("cal_round") is None and s.state.get("cal_phase") is None
    res = c.run(oracle=sim / "qrels.txt", error_rate=ERR, seed=SEED)
    assert res["state"] == "done" and "open" not in res["topics"]


def _oracle_rows(d: Path, sim: Path, topics: set[str]) -> pd.DataFrame:
    """What the campaign's oracle would answer for the items owed for ``topics`` (not imported)."""
    truth = read_qrels(sim / "qrels.txt")
    with open_campaign_store(d) as s:
        pend = s.assignments.pending()
    out = []
    for (bid, assessor), g in pend[pend["qid"].isin(topics)].groupby(["batch_id", "assessor"], sort=False):
        done = judge_batches(g[["qid", "docid"]].reset_index(drop=True), truth, error_rate=ERR, scale=(0, 1, 2, 3),
                             seed=stable_seed(SEED, bid, assessor))
        done["assessor"], done["batch_id"] = assessor, bid
        out.append(done[["batch_id", "qid", "docid", "assessor", "grade"]])
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=["batch_id", "qid", "docid", "assessor",
                                                                                "grade"])


def _timed_runner(d: str, issuing, started, times) -> None:
    """A `campaign run` whose CAL issue phase, once entered, waits until the eight importers have
    started, then computes the round while they write; records when the phase ran."""
    from qrelkit.campaign import rounds

    real = rounds._issue

    def issue(ctx, rnds, topics):
        first = "issue_start" not in times  # the first issue phase: 1003's round 2
        if first:
            times["issue_start"], times["issue_topics"] = time.time(), list(topics)
            issuing.set()
            assert started.wait(60)
        real(ctx, rnds, topics)
        if first:
            times["issue_end"] = time.time()

    rounds._issue = issue
    sys.exit(cli(["campaign", "run", d]))


def _timed_importer(d: str, f: str, issuing, started, times, i: int) -> None:
    assert issuing.wait(60)  # the runner is in its issue phase
    times[f"import_start{i}"] = time.time()
    with times["_lock"]:
        times["importers"] = times.get("importers", 0) + 1
        if times["importers"] == 8:
            started.set()
    code = cli(["campaign", "import", d, f])
    times[f"import_end{i}"] = time.time()
    sys.exit(code)


def test_eight_importers_while_the_runner_computes_a_cal_round(sim, tmp_path, capfd):
    """Eight importer processes write the judgments of topics 1001 and 1005 while a runner
    process computes topic 1003's next CAL round (it entered its issue phase before they began,
    and computes while they write): every row stored exactly once, every process exits 0, no
    "database is locked" — the store's writers take BEGIN IMMEDIATE with a busy timeout, so
    they queue instead of failing."""
    d = tmp_path / "c"
    c = _init(sim, d)
    c.run(oracle=sim / "qrels.txt", error_rate=ERR, seed=SEED, until="fractional")
    assert set(_cal_out(c.run())) == {"1001", "1003", "1005"}  # round 1 out for every kept topic
    assert _judge(d, sim, {"1003"}) > 0  # 1003 is ready for round 2: the runner will compute it
    rows = _oracle_rows(d, sim, {"1001", "1005"})
    parts = []
    for i in range(8):  # overlapping slices: every row in at least one file, many in two
        part = pd.concat([rows.iloc[i::8], rows.iloc[(i + 1) % 8::8].head(5)])
        parts.append(tmp_path / f"part{i}.csv")
        part.to_csv(parts[-1], index=False)
    mp = multiprocessing.get_context("fork")
    with mp.Manager() as m:
        issuing, started, times = m.Event(), m.Event(), m.dict()
        times["_lock"] = m.Lock()
        procs = [mp.Process(target=_timed_runner, args=(str(d), issuing, started, times))]
        procs += [mp.Process(target=_timed_importer, args=(str(d), str(f), issuing, started, times, i))
                  for i, f in enumerate(parts)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=180)
        codes = [p.exitcode for p in procs]
        t = dict(times)
    err = capfd.readouterr().err
    assert codes == [0] * 9, (codes, err[-2000:])
    assert "locked" not in err
    # the overlap was real: every importer started inside the runner's issue phase, and the
    # phase ended after the first import did
    starts = [t[f"import_start{i}"] for i in range(8)]
    ends = [t[f"import_end{i}"] for i in range(8)]
    print({k: round(v - t["issue_start"], 3) for k, v in t.items() if isinstance(v, float)})
    assert t["issue_topics"] == ["1003"]
    assert t["issue_start"] <= min(starts) and max(starts) <= t["issue_end"]
    assert min(ends) > t["issue_start"]
    with open_campaign_store(d) as s:
        log = s.judgments.log(None, "all")
        assert s.db.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rounds = s.state.cal_rounds()
    got = log[log["qid"].isin({"1001", "1005"}) & log["batch_id"].isin(set(rows["batch_id"]))]
    assert len(got) == len(rows) == len(got.drop_duplicates(["qid", "docid", "assessor", "batch_id"]))
    assert rounds["1003"][0] == 2  # the runner computed 1003's round 2
