"""A campaign without CAL (pool-only config) on real runs: 17 TREC 2003 Robust runs
(../shared/data/robust03), the official qrels as the oracle. The final qrels restricted to the
pool equal the official qrels restricted to the same pool.

The collection's text is licensed and absent: the corpus given to the campaign is the retrieved
document ids with placeholder text (a pool-only campaign reads no text)."""

from __future__ import annotations

import gzip
import json

import pandas as pd

from qrelkit.campaign import Campaign
from qrelkit.io.qrels import read_qrels
from tests.conftest import shared

NEW_TOPICS = [str(q) for q in range(601, 651)]


def test_pool_only_campaign_reproduces_official_qrels_on_the_pool(tmp_path):
    root = shared("robust03")
    runs = sorted((root / "runs").iterdir())
    docids: set[str] = set()
    names = []
    for f in runs:
        with gzip.open(f, "rt", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) == 6 and parts[0] in NEW_TOPICS:
                    docids.add(parts[2])
        names.append(f.name.removeprefix("input.").removesuffix(".gz"))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"pid": d, "passage": d}) + "\n" for d in sorted(docids)))
    topics = tmp_path / "topics.tsv"
    topics.write_text("".join(f"{q}\ttopic {q}\n" for q in NEW_TOPICS))
    groups = pd.read_csv(root / "trec2003_robust_run_groups.tsv", sep="\t", dtype=str)
    man = groups[groups["run"].isin(names)].assign(priority=1, baseline="false", pooled="true",
                                                   file=lambda x: "input." + x["run"] + ".gz")
    man[["run", "group", "priority", "baseline", "pooled", "file"]].to_csv(tmp_path / "manifest.csv", index=False)
    cfg = tmp_path / "pool-only.toml"
    cfg.write_text('[pool]\ndepth = 20\n[labels]\nscale = [0, 1, 2]\npassage_relevant = [1, 2]\ndocument_relevant = [1, 2]\n'
                   '[campaign]\nskip = ["dedupe", "screening", "fractional", "cal", "reuse", "report"]\n')
    d = tmp_path / "camp"
    Campaign.init(d, config=cfg, corpus=corpus, topics=topics, runs=root / "runs", manifest=tmp_path / "manifest.csv",
                  lenient=True)  # real defects: ranks from 0, tie order, other topics
    res = Campaign(d).run(oracle=root / "qrels" / "robust03_qrels.txt.gz", seed=1)
    assert res["state"] == "done" and "cal" not in res["stages_done"]
    pool = pd.read_parquet(d / "pool.parquet")[["qid", "docid"]]
    assert set(pool["qid"]) == set(NEW_TOPICS) and len(pool) > 2000
    got = read_qrels(d / "qrels-passages.txt").to_pandas()
    official = read_qrels(root / "qrels" / "robust03_qrels.txt.gz").to_pandas()
    assert len(got) == len(pool)  # every pooled document judged, nothing else
    want = pool.merge(official, on=["qid", "docid"])  # the official qrels restricted to the pool
    both = want.merge(got, on=["qid", "docid"], suffixes=("_official", "_campaign"))
    assert len(both) == len(want)
    assert (both["rel_official"] == both["rel_campaign"]).all()
    # pooled documents the official qrels never judged are the only others (the oracle grades them 0)
    extra = got.merge(want[["qid", "docid"]], on=["qid", "docid"], how="left", indicator=True)
    assert (extra.loc[extra["_merge"] == "left_only", "rel"] == 0).all()
    assert (d / "eval-summary.csv").is_file()
