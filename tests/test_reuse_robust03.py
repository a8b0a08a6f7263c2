"""Leave-one-group-out on real runs: 17 TREC 2003 Robust runs of 16 groups (../shared/data/robust03).

Settings (docs/reuse.md): the 50 new topics 601-650, the only ones TREC 2003 pooled from its own
runs (the 50 older topics kept their TREC 6-8 judgments); pool depth 125, the official depth for
the new topics; all 17 runs count as pooled. These 17 runs are a subset of the 78 submitted, so
"unique" means unique among them, and the judged documents none of them retrieved within depth 125
(contributed by the other 61 runs) are shared (``orphans="shared"``)."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from conftest import shared

DEPTH = 125
NEW_TOPICS = [str(q) for q in range(601, 651)]
GROUP = "uglasgow.ounis"  # the one group with two runs: InexpC2 and Sel50


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from qrelkit.io.manifest import read_manifest
    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.runs import read_runs
    from qrelkit.reuse import leave_out, write_report

    root = shared("robust03")
    runs = read_runs(root / "runs", lenient=True).table  # real defects: ranks from 0, tie order
    qrels = read_qrels(root / "qrels" / "robust03_qrels.txt.gz")
    manifest = read_manifest(root / "trec2003_robust_run_groups.tsv")
    res = leave_out(runs, qrels, manifest, depth=DEPTH, topics=NEW_TOPICS, rel=1)
    out = tmp_path_factory.mktemp("robust03-report")
    write_report(res, out, title="TREC 2003 Robust, new topics: leave-one-group-out")
    return root, runs, qrels, res, out


def _plain_top(root: Path, depth: int) -> dict[str, dict[str, list[str]]]:
    """{run: {qid: top-depth docids}} from the raw files, in trec_eval's order (score descending,
    ties by docid descending), new topics only — plain Python, no qrelkit."""
    out: dict[str, dict[str, list[tuple[float, str]]]] = {}
    topics = set(NEW_TOPICS)
    for f in sorted((root / "runs").iterdir()):
        with gzip.open(f, "rt", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) != 6 or parts[0] not in topics:
                    continue
                out.setdefault(parts[5], {}).setdefault(parts[0], []).append((float(parts[4]), parts[2]))
    return {run: {q: [d for _s, d in sorted(v, reverse=True)[:depth]] for q, v in per.items()} for run, per in out.items()}


def test_one_group_checked_by_hand(study):
    from qrelkit.evaluate import evaluate

    root, runs, qrels, res, _ = study
    with open(root / "trec2003_robust_run_groups.tsv", newline="") as fh:
        group = {r["run"]: r["group"] for r in csv.DictReader(fh, delimiter="\t")}
    top = _plain_top(root, DEPTH)
    assert len(top) == 17 and len({group[r] for r in top}) == 16
    found_by: dict[tuple[str, str], set[str]] = {}
    for run, per in top.items():
        for q, docs in per.items():
            for d in docs:
                found_by.setdefault((q, d), set()).add(group[run])
    judged = {}
    with gzip.open(root / "qrels" / "robust03_qrels.txt.gz", "rt") as fh:
        for line in fh:
            q, _it, d, r = line.split()
            if q in NEW_TOPICS:
                judged[(q, d)] = int(r)
    unique = {k for k in judged if found_by.get(k) == {GROUP}}
    assert len(unique) > 100  # the group's runs found hundreds of documents nobody else did

    rem = res.removed.filter(pc.equal(res.removed["unit"], GROUP))
    assert set(zip(rem["qid"].to_pylist(), rem["docid"].to_pylist())) == unique
    u = res.units.to_pandas().set_index("unit").loc[GROUP]
    assert u["removed_judged"] == len(unique)
    assert u["removed_relevant"] == sum(1 for k in unique if judged[k] >= 1)
    assert u["runs"] == 2 and u["run_names"] == "InexpC2,Sel50"

    # both runs re-scored on the official qrels minus exactly those documents
    keep = [(q, d, r) for (q, d), r in judged.items() if (q, d) not in unique]
    reduced = pa.table({"qid": [x[0] for x in keep], "docid": [x[1] for x in keep],
                        "rel": pa.array([x[2] for x in keep], pa.int32())})
    mine = runs.filter(pc.is_in(runs["run"], value_set=pa.array(["InexpC2", "Sel50"])))
    direct = evaluate(mine, reduced, ["AP", "nDCG@10", "P@10", "Bpref", "Judged@10"], rel=1).summary.to_pandas()
    t = res.runs.to_pandas()
    for row in direct.itertuples():
        got = t[(t["run"] == row.run) & (t["measure"] == row.measure)]["left_out"].iloc[0]
        assert got == pytest.approx(row.value, abs=1e-12), (row.run, row.measure)


def test_full_report(study):
    _, _, _, res, out = study
    p = res.params
    assert (p["runs"], p["units"], p["topics"], p["depth"]) == (17, 16, 50, DEPTH)
    s = res.summary.to_pandas().set_index("measure")
    assert list(s.index) == ["AP", "nDCG@10", "P@10", "Bpref", "Judged@10"]
    # a robust collection: leaving a group out hardly moves AP, and never by more than a rank
    assert s.loc["AP", "kendall_tau"] > 0.95 and s.loc["AP", "max_rank_drop"] <= 1
    assert s.loc["AP", "max_abs_pct_diff"] < 5
    assert s.loc["Judged@10", "mean_diff"] < 0  # removing unique documents only ever unjudges
    t = res.topics.to_pandas()
    assert len(t) == 50 and (t["density"] < 0.4).all() and not t["dl_flag"].any()
    assert res.units.to_pandas()["removed_judged"].min() > 0
    for name in ("report.md", "report.html", "density.png", "scores.png", "ranks.png", "summary.parquet", "runs.csv",
                 "topics.csv", "units.csv", "removed.parquet"):
        assert (out / name).stat().st_size > 0, name
    md = (out / "report.md").read_text()
    assert "TREC 2003 Robust" in md and "uglasgow.ounis" in md and "no run contributed" in md
