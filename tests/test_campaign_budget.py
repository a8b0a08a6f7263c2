"""Budgeted judging in the campaign (issue 23): with ``[adjudicate] strategy`` and ``budget``, the
pool-rest stage judges each kept topic's pool in the strategy's order, ``batch`` documents per
round, a topic's next round issued once its last is judged, until the budget is spent or the pool
exhausted — with the oracle, with imported judgment files, and in the web app; resumable between
rounds and after a kill, byte for byte; said by ``campaign status`` and the report; caught at
``campaign init`` when it cannot be honoured; ``strategy = "none"`` as before.

The campaign is ``sim4`` (four topics; topic 1004's pool is smaller than prior + budget, so it
runs out of pool) with a depth-10 pool, a 10-passage screening that keeps every topic, and CAL,
the fractional pool and the near-duplicates left out.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from qrelkit.campaign import Campaign, open_campaign_store
from qrelkit.campaign import adjudication as adj
from qrelkit.campaign.judging import ORACLE_ASSESSOR_SOURCE, stable_seed
from qrelkit.cli import run as cli
from qrelkit.io.qrels import read_qrels
from qrelkit.io.tables import read_table
from qrelkit.pooler import AdjudicateParams, simulate_order, topic_pools
from qrelkit.simulate.oracle import judge_batches
from qrelkit.store import combine_log

ERR, SEED = 0.1, 7
BUDGET, BATCH = 30, 10
PROTOCOL = """
[pool]
depth = 10
[screen]
first_n = 10
discard_if_relevant_share_at_least = 1.0
discard_if_no_relevant = false
[adjudicate]
strategy = "mm-ns"
budget = 30
batch = 10
[campaign]
skip = ["dedupe", "fractional", "cal", "reuse", "report"]
"""
OUTPUTS = ["qrels-passages.txt", "qrels-expanded.txt", "qrels-documents.txt", "eval-summary.csv",
           "eval-per-query.csv", "leaderboard.csv"]


def _init(sim: Path, d: Path, protocol: str = PROTOCOL) -> Campaign:
    cfg = d.parent / f"{d.name}.toml"
    cfg.write_text(protocol)
    assert cli(["campaign", "init", str(d), "-c", str(cfg), "--corpus", str(sim / "corpus.jsonl"), "-t",
                str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")]) == 0
    return Campaign(d)


@pytest.fixture(scope="module")
def oracle_run(sim4, tmp_path_factory) -> Path:
    """The campaign run through by the oracle (error rate 0.1, seed 7), uninterrupted."""
    d = tmp_path_factory.mktemp("budget") / "c"
    assert _init(sim4, d).run(oracle=sim4 / "qrels.txt", error_rate=ERR, seed=SEED)["state"] == "done"
    return d


def _batches(d: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    """Every batch in issue order: id, topic, items."""
    with open_campaign_store(d) as s:
        items = s.batches.items()
    return [(b, str(g["qid"].iat[0]), tuple(g["docid"])) for b, g in items.groupby("batch_id", sort=False)]


def _answer_as_oracle(d: Path, sim: Path, error_rate: float = ERR) -> int:
    """Import what the campaign's oracle would answer for every item owed (the same seeds per
    batch and assessor); returns how many."""
    truth = read_qrels(sim / "qrels.txt")
    with open_campaign_store(d) as s:
        pend = s.assignments.pending()
        out = []
        for (bid, assessor), g in pend.groupby(["batch_id", "assessor"], sort=False):
            done = judge_batches(g[["qid", "docid"]].reset_index(drop=True), truth, error_rate=error_rate,
                                 scale=(0, 1, 2, 3), seed=stable_seed(SEED, bid, assessor))
            done["assessor"], done["batch_id"] = assessor, bid
            out.append(done)
        if out:
            s.judgments.import_judgments(pd.concat(out, ignore_index=True), source=ORACLE_ASSESSOR_SOURCE)
    return int(len(pend))


def _same_outputs(a: Path, b: Path) -> None:
    for name in OUTPUTS:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert _batches(a) == _batches(b)


def test_the_oracle_judges_each_topic_up_to_its_budget_in_the_strategys_order(oracle_run):
    d = oracle_run
    pools = topic_pools(read_table(d / "pool.parquet"))
    with open_campaign_store(d) as s:
        summary = s.state.stages_done()["pool-rest"]
        labels = adj.outcomes(combine_log(s.judgments.log(None, "all"), combine="median_high"), {2, 3})
        rounds = adj.issued_rounds(s)
        items = s.batches.items()
    screened = {q: set(items.loc[items["batch_id"] == f"{q}/screen", "docid"]) for q in pools}
    assert summary["strategy"] == "mm-ns" and summary["budget"] == BUDGET and summary["batch"] == BATCH
    exhausted = 0
    for q, tp in pools.items():
        prior = np.array([dd in screened[q] for dd in tp.docids])
        made = [dd for r in rounds[q] for dd in r]
        want = min(BUDGET, tp.n_docs - int(prior.sum()))
        exhausted += want < BUDGET
        assert len(made) == want == summary["judged"][q]
        assert [len(r) for r in rounds[q]] == [BATCH] * (want // BATCH) + ([want % BATCH] if want % BATCH else [])
        assert not set(made) & screened[q]  # the prior is never issued again
        # the order the strategy gives, replayed independently with the outcomes the campaign saw
        rel = np.array([bool(labels[q].get(dd)) for dd in tp.docids])
        order = simulate_order("mm-ns", tp, rel, budget=BUDGET, batch=BATCH, prior=prior,
                               params=AdjudicateParams(strategy="mm-ns", budget=BUDGET, batch=BATCH))
        assert made == [tp.docids[i] for i in order]
        assert summary["relevant"][q] == int(rel[order].sum())
    assert exhausted == 1  # topic 1004: its pool runs out before the budget
    assert [b for b, *_ in _batches(d) if b.startswith("1001/")] == ["1001/screen", "1001/adj-0001", "1001/adj-0002",
                                                                       "1001/adj-0003"]


def test_waiting_between_rounds_and_a_kill_resume_to_the_same_bytes(sim4, oracle_run, tmp_path, monkeypatch):
    """Advance until waiting, judge what is out as the oracle would, reopen, again: each topic
    moves round by round; a kill between recording what the strategy saw and issuing its round
    issues that round on resume. The outputs are byte-identical to the uninterrupted run's."""
    d = tmp_path / "c"
    c = _init(sim4, d)
    assert c.run(oracle=sim4 / "qrels.txt", error_rate=ERR, seed=SEED, until="screening")["state"] == "until screening"
    store_cls = type(open_campaign_store(d).assignments)
    real, killed = store_cls.issue, []

    def issue(self, topic, passages, batch_id, assessors, **kw):
        if batch_id == "1002/adj-0002" and not killed:  # killed after the record, before the round
            killed.append(batch_id)
            raise KeyboardInterrupt
        return real(self, topic, passages, batch_id, assessors, **kw)

    monkeypatch.setattr(store_cls, "issue", issue)
    seen_rounds = []
    for _ in range(10):
        try:
            res = c.run()
        except KeyboardInterrupt:
            with open_campaign_store(d) as s:  # what the strategy saw is recorded; the round is not issued
                assert s.state.get("adjudication/1002")["round"] == 2 and not s.batches.exists("1002/adj-0002")
            continue
        if res["state"] == "done":
            break
        assert res["state"] == "waiting for judgments"
        seen_rounds.append(sorted(w["batch_id"] for w in res["waiting"]))
        assert _answer_as_oracle(d, sim4) > 0
    assert killed and res["state"] == "done"
    assert seen_rounds[0] == ["1001/adj-0001", "1002/adj-0001", "1003/adj-0001", "1004/adj-0001"]
    assert seen_rounds[1] == ["1001/adj-0002", "1002/adj-0002", "1003/adj-0002", "1004/adj-0002"]  # 1002's: on resume
    _same_outputs(d, oracle_run)


def _fill_batch_files(d: Path, sim: Path) -> list[Path]:
    """Fill in every batch file the campaign wrote and that is still empty with the hidden qrels'
    grades (0 for a passage they lack), as an assessor would; returns the files filled."""
    truth = {(q, dd): g for q, dd, g in zip(*(read_qrels(sim / "qrels.txt")[c].to_pylist()
                                              for c in ("qid", "docid", "rel")))}
    filled = []
    for f in sorted((d / "batches").glob("*/*.csv")):
        df = pd.read_csv(f, dtype=str, keep_default_na=False)
        if (df["grade"] == "").any():
            df["grade"] = [str(truth.get((q, dd), 0)) for q, dd in zip(df["qid"], df["docid"])]
            df.to_csv(f, index=False)
            filled.append(f)
    return filled


def test_imported_judgment_files_drive_the_rounds(sim4, tmp_path):
    d = tmp_path / "c"
    c = _init(sim4, d)
    waited = []
    for _ in range(8):
        res = c.run()
        if res["state"] == "done":
            break
        waited.append({w["batch_id"].split("/", 1)[1] for w in res["waiting"]})
        files = _fill_batch_files(d, sim4)
        assert files and cli(["campaign", "import", str(d), *map(str, files)]) == 0
    assert res["state"] == "done"
    assert waited == [{"screen"}, {"adj-0001"}, {"adj-0002"}, {"adj-0003"}]
    # the same judgments as an oracle without errors gives, so the same outputs
    ref = tmp_path / "ref"
    assert _init(sim4, ref).run(oracle=sim4 / "qrels.txt", seed=SEED)["state"] == "done"
    for name in OUTPUTS:
        assert (d / name).read_bytes() == (ref / name).read_bytes(), name
    assert _batches(d) == _batches(ref)


def test_status_and_report_say_which_rounds_are_out(sim4, tmp_path, capsys):
    d = tmp_path / "c"
    c = _init(sim4, d)
    assert c.run(oracle=sim4 / "qrels.txt", error_rate=ERR, seed=SEED, until="screening")["state"] == "until screening"
    assert c.run()["state"] == "waiting for judgments"
    _answer_as_oracle(d, sim4)
    assert c.run()["state"] == "waiting for judgments"  # round 2 out
    h = c.health()
    rows = {r["qid"]: r for r in h["adjudication"]}
    assert rows["1001"]["rounds"] == 2 and rows["1001"]["judged"] == 10 and rows["1001"]["budget"] == BUDGET
    assert rows["1001"]["state"] == "round 2 out: 10 item(s) owed" and rows["1004"]["prior"] == 10
    assert h["state"] == "waiting" and "pool-rest judges in mm-ns order (budget 30 per topic, rounds of 10): a " \
        "round out on topics 1001 (round 2, 10 of 30 judged)" in h["summary"]
    capsys.readouterr()
    assert cli(["campaign", "status", str(d)]) == 0
    out = capsys.readouterr().out
    assert "Judging in the adjudication order" in out and "round 2 out" in out and "a round out on topics" in out
    _answer_as_oracle(d, sim4)
    assert c.run()["state"] == "waiting for judgments"
    _answer_as_oracle(d, sim4)
    assert c.run()["state"] == "done"
    rows = {r["qid"]: r for r in c.health()["adjudication"]}
    assert rows["1001"]["state"] == "done: budget spent" and rows["1004"]["state"] == "done: pool exhausted"
    md = c.report(tmp_path / "report.html")[-1].read_text()
    sec = md[md.index("## Judging in the adjudication order"):]
    assert "Strategy mm-ns" in sec and "10 documents per round" in sec and "30 judgments per topic" in sec
    assert "| 1001 | 67 | 10 | 3 | 30 | 30 |" in sec
    stages = md[md.index("## Stages"):md.index("## Judging in the adjudication order")]
    assert "strategy=mm-ns" in stages and "budget=30" in stages and "batch=10" in stages and "'1001': 30" in stages


def test_a_judgment_changed_after_its_round_leaves_the_rounds_chosen(sim4, oracle_run, tmp_path):
    """The strategy's order depends on the outcomes it saw: a grade of round 1 changed once round
    2 is out (an assessor's change, an organizer's correction) goes to the qrels and does not
    make the rounds chosen wrong (no [adjudication-changed]): they stay the uninterrupted run's."""
    d = tmp_path / "c"
    c = _init(sim4, d)
    assert c.run(oracle=sim4 / "qrels.txt", error_rate=ERR, seed=SEED, until="screening")["state"] == "until screening"
    c.run()
    _answer_as_oracle(d, sim4)
    assert c.run()["state"] == "waiting for judgments"  # round 2 out
    with open_campaign_store(d) as s:
        log = s.judgments.log("1001", "all")
    flips = log[log["batch_id"] == "1001/adj-0001"].head(3)
    rows = pd.DataFrame({"qid": flips["qid"], "docid": flips["docid"], "assessor": flips["assessor"],
                         "grade": [0 if g >= 2 else 3 for g in flips["grade"]]})
    from qrelkit.campaign.corrections import correct_judgments  # lazy: only this test corrects

    assert correct_judgments(d, rows, reason="test")["changed"] == 3
    for _ in range(4):
        _answer_as_oracle(d, sim4)
        if c.run()["state"] == "done":
            break
    assert _batches(d) == _batches(oracle_run)
    with open_campaign_store(d) as s:
        grades = dict(zip(s.judgments.log("1001", "all")["docid"], s.judgments.log("1001", "all")["grade"]))
    assert [grades[x] for x in rows["docid"]] == rows["grade"].tolist()  # the qrels take the change


def test_strategy_none_issues_the_rest_of_the_pool_as_before(sim4, tmp_path):
    d = tmp_path / "c"
    protocol = PROTOCOL.replace('strategy = "mm-ns"\nbudget = 30\n', "")
    c = _init(sim4, d, protocol)
    assert c.run(oracle=sim4 / "qrels.txt", error_rate=ERR, seed=SEED)["state"] == "done"
    pool = read_table(d / "pool.parquet").to_pandas().sort_values("position", kind="stable")
    batches = _batches(d)
    assert [b for b, *_ in batches] == [f"{q}/screen" for q in ("1001", "1002", "1003", "1004")] + \
        [f"{q}/pool-rest" for q in ("1001", "1002", "1003", "1004")]
    for b, q, items in batches:
        mine = pool.loc[pool["qid"] == q, "docid"].tolist()
        assert list(items) == (mine[:10] if b.endswith("/screen") else mine[10:])  # the whole rest, pool order
    with open_campaign_store(d) as s:
        assert s.state.stages_done()["pool-rest"] == {"topics": 4, "items": sum(len(i) for b, _, i in batches[4:])}
    assert c.health()["adjudication"] == []
    md = c.report(tmp_path / "report.html")[-1].read_text()
    assert "adjudication" not in md.lower()


@pytest.mark.parametrize("extra, rule", [
    ('[adjudicate]\nbudget = 300\n', "budget-without-strategy"),
    ('[adjudicate]\nstrategy = "mm-ns"\n[campaign]\nskip = ["pool-rest"]\n', "strategy-without-pool-rest"),
    ('[adjudicate]\nstrategy = "mmns"\n', "bad-choice"),
])
def test_init_refuses_a_budget_it_cannot_honour(sim4, tmp_path, capsys, extra, rule):
    cfg = tmp_path / "p.toml"
    cfg.write_text(extra)
    d = tmp_path / "c"
    capsys.readouterr()
    assert cli(["campaign", "init", str(d), "-c", str(cfg), "--corpus", str(sim4 / "corpus.jsonl"), "-t",
                str(sim4 / "topics.tsv"), "--runs", str(sim4 / "runs"), "-m", str(sim4 / "manifest.csv")]) == 2
    err = capsys.readouterr().err
    assert f"[{rule}]" in err and len(err.strip().splitlines()) == 1 and not d.exists()


WEB_PROTOCOL = """
[pool]
depth = 5
[adjudicate]
strategy = "mm-ns"
budget = 8
batch = 4
[campaign]
assessors = ["ann", "bob"]
skip = ["dedupe", "screening", "fractional", "cal", "evaluate", "reuse", "report"]
"""


def test_judging_a_round_in_the_web_app_issues_the_topics_next_round(sim4, tmp_path):
    """Through the ASGI test client: ann judges the round the app serves her on topic 1001; the
    app's runner then issues 1001's next round (the one next_round chooses), and she is served
    it, while the other topics' rounds, not judged, stay out."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient  # lazy: the web extra

    from qrelkit.campaign.accounts import add_account
    from qrelkit.pooler import next_round
    from qrelkit.web import Advancer, RunnerAdvance, create_app

    d = tmp_path / "c"
    _init(sim4, d, WEB_PROTOCOL)
    token = add_account(d, "ann")["link"].rsplit("/", 1)[1]
    truth = {(q, dd): g for q, dd, g in zip(*(read_qrels(sim4 / "qrels.txt")[c].to_pylist()
                                              for c in ("qid", "docid", "rel")))}
    app = create_app(d, advancer=Advancer(d, RunnerAdvance()))
    with TestClient(app) as main:
        runner = app.state.service.advancer
        assert runner.wait_idle(300) and main.get("/healthz").status_code == 200
        ann = TestClient(app)
        assert ann.post(f"/login/{token}", follow_redirects=False).status_code == 303
        csrf = ann.get("/api/session").json()["csrf"]
        judged = []
        while (it := ann.get("/api/topics/1001").json()["item"]) and it["batch_id"] == "1001/adj-0001":
            r = ann.post("/api/topics/1001/judgments", headers={"X-CSRF-Token": csrf},
                         json={"batch_id": it["batch_id"], "docid": it["docid"],
                               "grade": truth.get(("1001", it["docid"]), 0)})
            assert r.status_code == 200 and r.json()["status"] == "stored", r.text
            judged.append(it["docid"])
        assert runner.wait_idle(300)
        it = ann.get("/api/topics/1001").json()["item"]
        assert it is not None and it["batch_id"] == "1001/adj-0002"
        boss = TestClient(app)  # the organizer's page says in which order, and how far, the pool is judged
        org = add_account(d, "boss", organizer=True)["link"].rsplit("/", 1)[1]
        assert boss.post(f"/login/{org}", follow_redirects=False).status_code == 303
        assert boss.get("/api/organizer").json()["protocol"]["adjudication"] == {"strategy": "mm-ns", "budget": 8,
                                                                                "batch": 4}
        assert 'id="adjudication" data-strategy="mm-ns"' in boss.get("/organizer").text
    with open_campaign_store(d) as s:
        rounds = adj.issued_rounds(s)
        out = set(s.assignments.pending()["batch_id"])
    assert sorted(judged) == sorted(rounds["1001"][0]) and len(rounds["1001"]) == 2
    tp = topic_pools(read_table(d / "pool.parquet"))["1001"]
    known = {dd: truth.get(("1001", dd), 0) >= 2 for dd in rounds["1001"][0]}
    assert rounds["1001"][1] == next_round("mm-ns", tp, rounds["1001"][:1], known, size=4, budget=8)
    assert out == {"1001/adj-0002", "1002/adj-0001", "1003/adj-0001", "1004/adj-0001"}


def test_the_common_core_2017_protocol_judges_in_mm_ns_order_up_to_its_budget(sim4, tmp_path):
    """configs/common-core-2017.toml as shipped (its budget lowered to 20, the simulator's grades
    put on its 0-2 scale): no screening, the whole budget made in mm-ns order on every topic."""
    from qrelkit.config import load_config  # lazy: only this test reads the shipped file

    path = Path(__file__).resolve().parents[1] / "configs" / "common-core-2017.toml"
    cfg = load_config(path)
    assert (cfg.get_value("adjudicate", "strategy"), cfg.get_value("adjudicate", "budget")) == ("mm-ns", 600)
    assert "pool-rest" not in cfg.get_value("campaign", "skip") and "screening" in cfg.get_value("campaign", "skip")
    text = path.read_text()
    assert "budget = 600 " in text
    qrels = tmp_path / "qrels02.txt"
    qrels.write_text("".join(f"{q} 0 {dd} {min(int(g), 2)}\n" for q, _, dd, g in
                             (ln.split() for ln in (sim4 / "qrels.txt").read_text().splitlines())))
    d = tmp_path / "c"
    c = _init(sim4, d, text.replace("budget = 600 ", "budget = 20 "))
    assert c.run(oracle=qrels, seed=SEED)["state"] == "done"
    with open_campaign_store(d) as s:
        summary = s.state.stages_done()["pool-rest"]
        assert set(s.batches.all()["batch_id"].str.split("/").str[1]) == {"adj-0001", "adj-0002"}
    assert summary["strategy"] == "mm-ns" and summary["judged"] == {q: 20 for q in ("1001", "1002", "1003", "1004")}
    assert set(c.status()["threads"]) == {""}  # CAL is skipped: no thread state is shown as if it ran


def test_the_budget_cannot_change_once_a_round_is_out(sim4, tmp_path, capsys):
    d = tmp_path / "c"
    c = _init(sim4, d)
    assert c.run(oracle=sim4 / "qrels.txt", error_rate=ERR, seed=SEED, until="screening")["state"] == "until screening"
    protocol = d.parent / f"{d.name}.toml"
    protocol.write_text(PROTOCOL.replace("budget = 30", "budget = 40"))
    assert cli(["campaign", "adopt-config", str(d), "--dry-run"]) == 0  # pool-rest not started: adoptable
    protocol.write_text(PROTOCOL)
    assert c.run()["state"] == "waiting for judgments"  # round 1 out
    protocol.write_text(PROTOCOL.replace("budget = 30", "budget = 40"))
    capsys.readouterr()
    assert cli(["campaign", "adopt-config", str(d)]) == 2
    err = capsys.readouterr().err
    assert "[adopt-refused]" in err and "[adjudicate] budget" in err and "pool-rest" in err


def test_an_oracle_off_the_campaign_scale_is_refused_before_any_work(sim4, tmp_path, capsys):
    """The Common Core protocol's scale is 0-2; the simulator's qrels grade 0-3. Given as the oracle,
    they are refused at the door of 'campaign run' (one line, exit 2), not after a round is out."""
    path = Path(__file__).resolve().parents[1] / "configs" / "common-core-2017.toml"
    d = tmp_path / "c"
    _init(sim4, d, path.read_text().replace("budget = 600 ", "budget = 20 "))
    capsys.readouterr()
    assert cli(["campaign", "run", str(d), "--oracle", str(sim4 / "qrels.txt"), "--seed", str(SEED)]) == 2
    err = capsys.readouterr().err
    assert "[grade-outside-scale]" in err and "qrels.txt" in err and len(err.strip().splitlines()) == 1
    with open_campaign_store(d) as s:
        assert len(s.batches.all()) == 0 and not s.state.stages_done()
