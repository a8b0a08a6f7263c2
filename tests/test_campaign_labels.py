"""Several assessors per item (issue 13): their grades are aggregated by the configured rule —
``[campaign] combine = "vote"``, the labels' majority vote (``qrelkit labels aggregate``'s
function) — before screening, CAL and stopping; the vote and median_high give other decisions."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from qrelkit.cal.loop import CalParams, issue_next_batches
from qrelkit.cal.stopping import get_rule, thread_states
from qrelkit.store import combine_log
from qrelkit.campaign import Campaign, open_campaign_store
from qrelkit.campaign.settings import combine_rule
from qrelkit.cal.features import load_features
from qrelkit.cli import run as cli
from qrelkit.config import load_config
from qrelkit.labels.params import LabelsParams
from qrelkit.labels import VoteRule, aggregate_judgments, aggregation_options

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "configs" / "trec-dl-2022.toml"


@pytest.fixture(scope="module")
def sim(sim6) -> Path:
    return sim6


def _config(tmp: Path, combine: str) -> Path:
    text = CFG.read_text().replace('combine = "vote"', f'combine = "{combine}"')
    p = tmp / f"{combine}.toml"
    p.write_text(text.replace("assessors_per_item = 1", "assessors_per_item = 2"))
    return p


@pytest.fixture(scope="module")
def both(sim, tmp_path_factory) -> dict[str, Path]:
    """The same campaign with two assessors per item (oracle error rate 0.3, seed 7), aggregated
    by median_high and by the vote, run through the CAL stage."""
    tmp = tmp_path_factory.mktemp("vote")
    out = {}
    for combine in ("median_high", "vote"):
        d = tmp / combine
        assert cli(["campaign", "init", str(d), "-c", str(_config(tmp, combine)), "--corpus", str(sim / "corpus.jsonl"),
                    "-t", str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")]) == 0
        res = Campaign(d).run(oracle=sim / "qrels.txt", error_rate=0.3, seed=7, until="cal")
        assert res["state"] == "until cal"
        out[combine] = d
    return out


def test_dl2022_config_aggregates_by_the_vote():
    cfg = load_config(CFG)
    assert cfg.get_value("campaign", "combine") == "vote"
    rule = combine_rule(cfg)
    assert rule == VoteRule(threshold=2, graded="ceil_median", fallback=("original", "lowest"))
    assert aggregation_options(LabelsParams.from_config(cfg))["threshold"] == rule.threshold


def test_vote_and_median_high_decide_differently(both):
    tables = {}
    for combine, d in both.items():
        with open_campaign_store(d) as s:
            tables[combine] = s.state.topics().set_index("qid")
    m, v = tables["median_high"], tables["vote"]
    # ties of two assessors (e.g. grades 1 and 3): median_high says 3, the vote's fallback (lowest) 1
    assert (v["screened_relevant"] < m["screened_relevant"]).any()
    assert (v["screening"] != m["screening"]).any() or (v["decision"] != m["decision"]).any()


def _log(d: Path) -> pd.DataFrame:
    with open_campaign_store(d) as s:
        return s.judgments.log(None, "all")


def test_screening_and_stopping_see_the_voted_grade(both):
    d = both["vote"]
    cfg = load_config(d.parent / "vote.toml")
    rule = VoteRule.from_config(cfg)
    log = _log(d)
    assert log.groupby(["qid", "docid", "batch_id"])["assessor"].nunique().max() == 2
    labels = combine_log(log, combine=rule)
    # the voted grade, binarized at the threshold, is aggregate_judgments' vote on every item
    agg = aggregate_judgments(log.drop_duplicates(["qid", "docid", "assessor"]), threshold=2,
                              fallback=["original", "lowest"]).labels
    vote = dict(zip(zip(agg["qid"], agg["docid"]), agg["relevant"].fillna(False).astype(bool)))
    assert all(vote[(q, p)] == (g >= 2) for q, p, g in zip(labels["qid"], labels["docid"], labels["grade"]))
    with open_campaign_store(d) as s:
        ct = s.state.topics().set_index("qid")
        screens = s.batches.all()
        th = s.topics.threads()
    # screening counted the voted grades of each topic's screening batch
    items = log[log["batch_id"].str.endswith("/screen")][["qid", "docid"]].drop_duplicates()
    lab = items.merge(labels, on=["qid", "docid"])
    for q, g in lab.groupby("qid"):
        assert int((g["grade"] >= 2).sum()) == int(ct.loc[q, "screened_relevant"]), q
    # the stopping decision of every accepted topic is the density rule's on the voted grades
    density = get_rule("density", cfg)
    acc = th[(th["thread"] == "all") & th["qid"].isin(ct.index[ct["decision"] == "accept"])]
    assert len(acc) and len(screens)
    for t, st in zip(acc.itertuples(index=False), thread_states(acc, log, relevant=[2, 3], combine=rule)):
        d_ = density.decide(st)
        assert d_.action == "accept" and d_.reason == ct.loc[t.qid, "reason"], t.qid


def test_cal_trains_on_the_voted_grade(both, tmp_path):
    rule = VoteRule.from_config(load_config(both["vote"].parent / "vote.toml"))
    d = tmp_path / "c"
    shutil.copytree(both["vote"], d)
    feats = load_features(d / "features")
    log = _log(d)
    with open_campaign_store(d) as s:
        topic = s.state.topics().query("decision == 'accept'")["qid"].iloc[0]
        s.topics.set_thread_state(topic, "all", "active")  # (a copy) its next batch, as if it went on
        seen = {}
        for name, combine in (("vote", rule), ("median_high", "median_high")):
            batches, _ = issue_next_batches(s, feats, topics=[topic], threads=["all"], params=CalParams(),
                                            combine=combine, allow_open=True, dry_run=True)
            seen[name] = batches[0].n_relevant  # relevant training rows (the query counts as one)
    lab = {n: combine_log(log[log["qid"] == topic], combine=c) for n, c in (("vote", rule), ("median_high", "median_high"))}
    for name in seen:
        assert seen[name] == int((lab[name]["grade"] >= 2).sum()) + 1, name
    assert seen["vote"] != seen["median_high"]


def test_a_vote_that_contradicts_passage_relevant_is_refused(sim, tmp_path, capsys):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[campaign]\ncombine = "vote"\n[labels]\nvote_threshold = 3\n')
    assert cli(["campaign", "init", str(tmp_path / "c"), "-c", str(cfg), "--corpus", str(sim / "corpus.jsonl"),
                "-t", str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")]) == 2
    err = capsys.readouterr().err
    assert "[vote-vs-passage-relevant]" in err and "passage_relevant" in err
    assert not (tmp_path / "c" / "campaign.db").exists()


def test_the_campaigns_cal_batches_follow_the_aggregation(both):
    """Topic 1003 is kept under both rules with the very same pool judgments; its first CAL
    batches differ: the campaign's CAL trained on the aggregated grades."""
    logs, items = {}, {}
    for combine, d in both.items():
        with open_campaign_store(d) as s:
            logs[combine] = s.judgments.log("1003", "all")
            items[combine] = s.batches.items()
    pool = {c: g[g["kind"] == "pool"][["docid", "assessor", "grade", "batch_id"]].reset_index(drop=True)
            for c, g in logs.items()}
    assert pool["vote"].equals(pool["median_high"])
    for thread in ("fractional", "local", "all"):
        first = {c: set(it.loc[it["batch_id"] == f"1003/{thread}/0000", "docid"]) for c, it in items.items()}
        assert first["vote"] and first["vote"] != first["median_high"], thread
