"""Reusability studies (qrelkit.reuse): the semantics of leave-one-group-out on hand-built cases,
the report, the command line."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from scipy import stats

from qrelkit.cli import run as cli_run
from qrelkit.errors import InputError
from qrelkit.evaluate import evaluate, parse_measures
from qrelkit.io.qrels import QRELS_SCHEMA
from qrelkit.io.runs import canonicalize
from qrelkit.pooler import depth_pool
from qrelkit.reuse import (
    DEFAULT_MEASURES, attribution_table, build_attribution, leave_out, reduced_qrels, write_report,
)


def make_runs(spec: dict[str, dict[str, list[str]]]) -> pa.Table:
    """{run: {qid: [docids best first]}} -> a canonical run table (distinct descending scores)."""
    rows = []
    for run, per in spec.items():
        for q, docs in per.items():
            for i, d in enumerate(docs):
                rows.append((run, q, d, i + 1, float(1000 - i)))
    df = pd.DataFrame(rows, columns=["run", "qid", "docid", "rank", "score"])
    return canonicalize(pa.Table.from_pandas(df, preserve_index=False))


def make_qrels(rows: list[tuple[str, str, int]]) -> pa.Table:
    return pa.table({"qid": [r[0] for r in rows], "docid": [r[1] for r in rows],
                     "rel": pa.array([r[2] for r in rows], pa.int32())}).cast(QRELS_SCHEMA)


def qset(table: pa.Table) -> set[tuple[str, str, int]]:
    return set(zip(table["qid"].to_pylist(), table["docid"].to_pylist(), table["rel"].to_pylist()))


def removed_of(res, unit: str) -> set[str]:
    r = res.removed.to_pandas()
    return set(r.loc[r["unit"] == unit, "docid"])


def scores(res, measure: str) -> pd.DataFrame:
    t = res.runs.to_pandas()
    return t[t["measure"] == measure].set_index("run")


# Three groups. Depth 2. a2 is group A's run that was not pooled.
#   shared : a1 and b1 (two groups)           -> stays whoever is left out
#   a_rel  : only a1, relevant                -> goes when A is left out
#   a_non  : only a1 (rank 2 in topic 2), non-relevant -> goes when A is left out
#   b_only : only b1                          -> goes when B is left out
SPEC = {
    "a1": {"1": ["shared", "a_rel", "x1"], "2": ["c_rel", "a_non", "x2"]},
    "a2": {"1": ["a_rel", "shared", "a2_only"], "2": ["a_non", "c_rel"]},
    "b1": {"1": ["shared", "b_only", "a2_only"], "2": ["b2", "c_rel"]},
    "c1": {"1": ["b_only", "c1_only"], "2": ["c_rel", "b2"]},
}
QRELS = [("1", "shared", 1), ("1", "a_rel", 2), ("1", "b_only", 1), ("1", "c1_only", 0), ("1", "a2_only", 1),
         ("2", "c_rel", 1), ("2", "a_non", 0), ("2", "b2", 0), ("2", "x2", 1)]
MANIFEST = pd.DataFrame({"run": ["a1", "a2", "b1", "c1"], "group": ["A", "A", "B", "C"],
                         "pooled": ["true", "false", "yes", "1"], "type": ["neural", "neural", "bm25", "bm25"]})


@pytest.fixture(scope="module")
def tiny():
    return make_runs(SPEC), make_qrels(QRELS)


def test_default_measures_parse_including_judged_at_10():
    assert [str(m) for m in parse_measures(DEFAULT_MEASURES)] == ["AP", "nDCG@10", "P@10", "Bpref", "Judged@10"]


def test_two_groups_stay_one_group_goes_relevant_or_not(tiny):
    runs, qrels = tiny
    res = leave_out(runs, qrels, MANIFEST, depth=2, measures=["P@2", "AP"])
    assert removed_of(res, "A") == {"a_rel", "a_non"}  # relevant and non-relevant alike
    assert removed_of(res, "B") == set()  # b_only: b1 (rank 2) and c1 (rank 1) -> two groups -> stays
    assert removed_of(res, "C") == {"c1_only"}
    # a2_only: only runs that were not pooled (a2) or beyond the depth (b1, rank 3): no contributor
    everything = removed_of(res, "A") | removed_of(res, "B") | removed_of(res, "C")
    assert "shared" not in everything and "a2_only" not in everything


def test_reference_sets_by_hand(tiny):
    """Independent computation with plain sets over SPEC, depth 2, pooled runs a1, b1, c1."""
    runs, qrels = tiny
    group = dict(zip(MANIFEST["run"], MANIFEST["group"]))
    contrib: dict[tuple[str, str], set[str]] = {}
    for run in ("a1", "b1", "c1"):
        for q, docs in SPEC[run].items():
            for d in docs[:2]:
                contrib.setdefault((q, d), set()).add(group[run])
    expected = {g: {d for (q, d, _r) in QRELS if contrib.get((q, d)) == {g}} for g in "ABC"}
    res = leave_out(runs, qrels, MANIFEST, depth=2, measures=["P@2"])
    for g in "ABC":
        assert removed_of(res, g) == expected[g], g
    assert expected["A"] == {"a_rel", "a_non"} and expected["B"] == set() and expected["C"] == {"c1_only"}


def test_removed_and_reduced_qrels(tiny):
    runs, qrels = tiny
    res = leave_out(runs, qrels, MANIFEST, depth=2, measures=["P@2"])
    red = reduced_qrels(qrels, res.removed, "A")
    assert qset(red) == qset(qrels) - {("1", "a_rel", 2), ("2", "a_non", 0)}
    marked = reduced_qrels(qrels, res.removed, "A", "unjudged")
    assert qset(marked) == (qset(qrels) - {("1", "a_rel", 2), ("2", "a_non", 0)}) | {("1", "a_rel", -1), ("2", "a_non", -1)}
    u = res.units.to_pandas().set_index("unit")
    assert u.loc["A", "removed_judged"] == 2 and u.loc["A", "removed_relevant"] == 1
    assert u.loc["A", "topics_affected"] == 2 and u.loc["B", "removed_judged"] == 0
    assert not u.loc["B", "rescored"]


def test_every_run_of_the_group_is_rescored_pooled_or_not(tiny):
    runs, qrels = tiny
    res = leave_out(runs, qrels, MANIFEST, depth=2, measures=["P@1", "AP"])
    p1 = scores(res, "P@1")
    # a2 was not pooled but is group A's: its rank-1 document a_rel is gone
    assert not p1.loc["a2", "pooled"]
    assert p1.loc["a2", "official"] == 0.5 and p1.loc["a2", "left_out"] == 0.0
    # the left-out scores are evaluate() on the reduced qrels, for every run of A
    red = reduced_qrels(qrels, res.removed, "A")
    direct = evaluate(runs.filter(pc.is_in(runs["run"], value_set=pa.array(["a1", "a2"]))), red, ["P@1", "AP"])
    d = direct.summary.to_pandas().set_index(["run", "measure"])["value"]
    for run in ("a1", "a2"):
        for m in ("P@1", "AP"):
            assert scores(res, m).loc[run, "left_out"] == pytest.approx(d[(run, m)], abs=1e-12)
    # other groups keep their official scores when nothing of theirs is unique (B)
    assert p1.loc["b1", "left_out"] == p1.loc["b1", "official"]


def test_both_uniqueness_definitions_give_the_expected_qrels():
    # depth 2. x: a1 (pooled) and b2 (group B, NOT pooled) retrieve it; y: only a2 (A, not pooled);
    # s: a1, a2 and b1.
    runs = make_runs({"a1": {"1": ["x", "s"]}, "a2": {"1": ["y", "s"]}, "b1": {"1": ["s", "z"]},
                      "b2": {"1": ["x", "w"]}})
    qrels = make_qrels([("1", "x", 1), ("1", "y", 1), ("1", "s", 0)])
    man = pd.DataFrame({"run": ["a1", "a2", "b1", "b2"], "group": ["A", "A", "B", "B"],
                        "pooled": [True, False, True, False]})
    pooled = leave_out(runs, qrels, man, depth=2, measures=["P@1"], uniqueness="pooled")
    submitted = leave_out(runs, qrels, man, depth=2, measures=["P@1"], uniqueness="submitted")
    # pooled runs only: x was found by A alone (b2 does not count); y by no pooled run (orphan -> shared)
    assert qset(reduced_qrels(qrels, pooled.removed, "A")) == {("1", "y", 1), ("1", "s", 0)}
    # all submitted runs: x was found by A and B (b2) -> stays; y only by A (a2) -> goes
    assert qset(reduced_qrels(qrels, submitted.removed, "A")) == {("1", "x", 1), ("1", "s", 0)}
    assert qset(reduced_qrels(qrels, pooled.removed, "B")) == qset(qrels) == qset(reduced_qrels(qrels, submitted.removed, "B"))
    assert "uniqueness ('pooled')" in " ".join(pooled.notes).lower()
    assert "all submitted" not in " ".join(pooled.notes) and "every submitted run" in " ".join(submitted.notes)


def test_documents_without_a_contributing_run_are_attributed_by_the_stated_option():
    # depth 1 (only s is pooled); o1: a1 at rank 3 only; o2: a1 and b1 at rank 2; o3: nobody.
    runs = make_runs({"a1": {"1": ["s", "o2", "o1"]}, "b1": {"1": ["s", "o2"]}})
    qrels = make_qrels([("1", "s", 1), ("1", "o1", 1), ("1", "o2", 1), ("1", "o3", 1)])
    man = pd.DataFrame({"run": ["a1", "b1"], "group": ["A", "B"]})
    shared = leave_out(runs, qrels, man, depth=1, measures=["P@1"], orphans="shared")
    assert shared.removed.num_rows == 0
    assert int(shared.topics["orphans"][0].as_py()) == 3
    assert any("shared by all units" in n for n in shared.notes)
    ret = leave_out(runs, qrels, man, depth=1, measures=["P@1"], orphans="retrieved", orphan_depth=3)
    r = ret.removed.to_pandas()
    assert r.to_dict(orient="records") == [{"unit": "A", "qid": "1", "docid": "o1", "rel": 1, "origin": "orphan-retrieved"}]
    assert any("within depth 3" in n for n in ret.notes)
    # below the orphan depth nobody retrieved anything: everything stays
    assert leave_out(runs, qrels, man, depth=1, measures=["P@1"], orphans="retrieved", orphan_depth=2).removed.num_rows == 0


def test_removal_modes_give_the_same_scores(tiny):
    runs, qrels = tiny
    a = leave_out(runs, qrels, MANIFEST, depth=2, measures=["AP", "Bpref", "Judged@10"], removal="remove")
    b = leave_out(runs, qrels, MANIFEST, depth=2, measures=["AP", "Bpref", "Judged@10"], removal="unjudged")
    assert a.runs.equals(b.runs)
    assert a.params["removal"] == "remove" and b.params["removal"] == "unjudged"


def test_ranks_drops_and_taus_equal_scipy():
    # 12 runs in 4 groups over 3 topics: enough spread for non-trivial rankings
    rng = np.random.default_rng(3)
    spec, groups = {}, {}
    docs = [f"d{i:02d}" for i in range(30)]
    for r in range(12):
        name = f"r{r:02d}"
        groups[name] = f"G{r % 4}"
        spec[name] = {q: list(rng.permutation(docs)[:8]) for q in ("1", "2", "3")}
    runs = make_runs(spec)
    qrels = make_qrels([(q, d, int(rng.integers(0, 3))) for q in ("1", "2", "3") for d in docs])
    man = pd.DataFrame({"run": list(groups), "group": list(groups.values())})
    res = leave_out(runs, qrels, man, depth=3, measures=["AP", "P@5"])
    t = res.runs.to_pandas()
    for row in res.summary.to_pylist():
        d = t[t["measure"] == row["measure"]].sort_values("run")
        o, lo = d["official"].to_numpy(), d["left_out"].to_numpy()
        ref = stats.kendalltau(o, lo)
        assert row["kendall_tau"] == pytest.approx(ref.statistic, abs=1e-12)
        assert row["kendall_p"] == pytest.approx(ref.pvalue, abs=1e-12)
        # tau_ap from its definition (Yilmaz et al. 2008), official ranking as reference; ties by run name
        names = d["run"].tolist()
        order = sorted(range(len(names)), key=lambda i: (-lo[i], names[i]))
        ref_pos = {i: p for p, i in enumerate(sorted(range(len(names)), key=lambda i: (-o[i], names[i])))}
        n = len(names)
        acc = sum(sum(1 for j in order[:k] if ref_pos[j] < ref_pos[order[k]]) / k for k in range(1, n))
        assert row["tau_ap"] == pytest.approx(2.0 / (n - 1) * acc - 1.0, abs=1e-12)
        # competition ranks and the summary figures from the per-run rows
        for _, x in d.iterrows():
            assert x["official_rank"] == 1 + int((o > x["official"]).sum())
            assert x["left_out_rank"] == 1 + int((lo > x["left_out"]).sum())
            others = d[d["run"] != x["run"]]["official"].to_numpy()
            assert x["left_out_rank_alone"] == 1 + int((others > x["left_out"]).sum())
        assert row["max_rank_drop"] == max(0, int((d["left_out_rank"] - d["official_rank"]).max()))
        assert row["runs_rank_changed"] == int((d["left_out_rank"] != d["official_rank"]).sum())
        assert row["mean_abs_diff"] == pytest.approx(np.abs(lo - o).mean())
        assert row["max_abs_diff"] == pytest.approx(np.abs(lo - o).max())
        pct = np.abs(lo - o)[o != 0] / o[o != 0] * 100
        assert row["mean_abs_pct_diff"] == pytest.approx(pct.mean())
        assert row["max_abs_pct_diff"] == pytest.approx(pct.max())


def test_per_topic_density_flags_and_one_group_share(tiny):
    runs, qrels = tiny
    res = leave_out(runs, qrels, MANIFEST, depth=2, measures=["P@2"], density_threshold=0.5, voorhees_share=0.4)
    t = res.topics.to_pandas().set_index("qid")
    # topic 1: 5 judged, 4 relevant (grade >= 1) -> 0.8; topic 2: 4 judged, 2 relevant -> 0.5
    assert t.loc["1", "judged"] == 5 and t.loc["1", "relevant"] == 4 and t.loc["1", "density"] == pytest.approx(0.8)
    assert t.loc["2", "density"] == pytest.approx(0.5)
    assert bool(t.loc["1", "dl_flag"]) and not bool(t.loc["2", "dl_flag"])  # > 0.5 only
    assert bool(t.loc["1", "voorhees_flag"]) and bool(t.loc["2", "voorhees_flag"])  # > 0.4
    # relevant found by one group only: topic 1: a_rel (A); shared (A,B), b_only (B,C), a2_only (orphan)
    assert t.loc["1", "relevant_one_group"] == 1 and t.loc["1", "share_relevant_one_group"] == pytest.approx(0.25)
    # rel=2 changes what counts as relevant
    t2 = leave_out(runs, qrels, MANIFEST, depth=2, measures=["P@2"], rel=2).topics.to_pandas().set_index("qid")
    assert t2.loc["1", "relevant"] == 1 and t2.loc["2", "relevant"] == 0
    assert pd.isna(t2.loc["2", "share_relevant_one_group"])


def test_leave_one_run_out_and_one_type_out(tiny):
    runs, qrels = tiny
    lor = leave_out(runs, qrels, MANIFEST, depth=2, measures=["P@2"], procedure="run")
    assert lor.units["unit"].to_pylist() == ["a1", "a2", "b1", "c1"]
    assert removed_of(lor, "a1") == {"a_rel", "a_non"} and removed_of(lor, "a2") == set()
    lot = leave_out(runs, qrels, MANIFEST, depth=2, measures=["P@2"], procedure="type")
    assert lot.units["unit"].to_pylist() == ["bm25", "neural"]
    assert removed_of(lot, "neural") == {"a_rel", "a_non"}
    assert removed_of(lot, "bm25") == {"b_only", "c1_only", "b2"}  # B and C are both bm25
    with pytest.raises(InputError) as e:
        leave_out(runs, qrels, MANIFEST.drop(columns=["type"]), depth=2, measures=["P@2"], procedure="type")
    assert e.value.rule == "missing-value"


def test_a_topic_left_without_judgments_still_counts(tiny):
    # topic 3 is judged only through a1's unique documents
    runs = make_runs({"a1": {"1": ["s"], "3": ["z1", "z2"]}, "b1": {"1": ["s"], "3": ["q9"]}})
    qrels = make_qrels([("1", "s", 1), ("3", "z1", 1), ("3", "z2", 0)])
    man = pd.DataFrame({"run": ["a1", "b1"], "group": ["A", "B"]})
    res = leave_out(runs, qrels, man, depth=2, measures=["P@1"])
    p = scores(res, "P@1")
    assert p.loc["a1", "official"] == pytest.approx(1.0)
    assert p.loc["a1", "left_out"] == pytest.approx(0.5)  # topic 1 scores 1, topic 3 (emptied) scores 0
    assert res.units.to_pandas().set_index("unit").loc["A", "topics_emptied"] == 1
    assert any("placeholder" in n for n in res.notes)


def test_pool_table_and_recomputed_provenance_agree(tiny):
    runs, qrels = tiny
    pooled_runs = runs.filter(pc.is_in(runs["run"], value_set=pa.array(["a1", "b1", "c1"])))
    pool = depth_pool(pooled_runs, 2)
    a = leave_out(runs, qrels, MANIFEST, depth=2, measures=["P@2"])
    b = leave_out(runs, qrels, MANIFEST, depth=2, measures=["P@2"], pool=pool)
    assert a.removed.equals(b.removed) and a.runs.equals(b.runs)
    assert b.params["pool_provenance"] == "pool table"


def test_classes_remove_every_member_of_a_unique_class():
    runs = make_runs({"a1": {"1": ["m1", "s"]}, "b1": {"1": ["s", "t"]}})
    qrels = make_qrels([("1", "c", 1), ("1", "m1", 1), ("1", "m2", 0), ("1", "s", 1), ("1", "t", 0)])
    classes = pa.table({"docid": ["m1", "m2", "c"], "class_id": ["c", "c", "c"]})
    res = leave_out(runs, qrels, pd.DataFrame({"run": ["a1", "b1"], "group": ["A", "B"]}), depth=2,
                    measures=["P@2"], classes=classes)
    assert removed_of(res, "A") == {"c", "m1", "m2"} and removed_of(res, "B") == {"t"}
    att = build_attribution(runs, qrels, depth=2, classes=classes)
    tab = attribution_table(att, np.array([0, 1]), ["A", "B"])
    assert set(tab.filter(pc.equal(tab["docid"], "m2"))["key"].to_pylist()) == {"c"}


def test_official_scores_given_or_computed_agree_and_workers_do_not_matter(tiny):
    runs, qrels = tiny
    ms = ["AP", "P@2"]
    a = leave_out(runs, qrels, MANIFEST, depth=2, measures=ms, workers=1)
    b = leave_out(runs, qrels, MANIFEST, depth=2, measures=ms, workers=2)
    b3 = leave_out(runs, qrels, MANIFEST, depth=2, measures=ms, workers=3)
    off = evaluate(runs, qrels, ms).summary
    c = leave_out(runs, qrels, MANIFEST, depth=2, measures=ms, official=off)
    for k in a.tables():
        assert a.tables()[k].to_pandas().equals(b.tables()[k].to_pandas()), k
        assert a.tables()[k].to_pandas().equals(b3.tables()[k].to_pandas()), k
        assert a.tables()[k].to_pandas().equals(c.tables()[k].to_pandas()), k
    # one scoring per unit, official and left-out scores together; with the official scores given,
    # one per unit that has left-out scores
    rescored = int(a.units["rescored"].to_numpy(zero_copy_only=False).sum())
    assert [r.timings["evaluate_calls"] for r in (a, b, b3, c)] == [a.units.num_rows] * 3 + [rescored]
    with pytest.raises(InputError) as e:
        leave_out(runs, qrels, MANIFEST, depth=2, measures=["nDCG@10"], official=off)
    assert e.value.rule == "missing-official"


def test_bad_input_is_named():
    runs = make_runs({"a1": {"1": ["s"]}, "zz": {"1": ["s"]}})
    qrels = make_qrels([("1", "s", 1)])
    with pytest.raises(InputError) as e:
        leave_out(runs, qrels, pd.DataFrame({"run": ["a1"], "group": ["A"]}), measures=["P@1"])
    assert e.value.rule == "not-in-manifest"
    for kw in ({"procedure": "x"}, {"uniqueness": "x"}, {"orphans": "x"}, {"removal": "x"}):
        with pytest.raises(InputError) as e:
            leave_out(runs, qrels, None, measures=["P@1"], **kw)
        assert e.value.rule == "bad-option"
    with pytest.raises(InputError) as e:
        leave_out(runs, make_qrels([("1", "s", -1)]), None, measures=["P@1"])
    assert e.value.rule == "no-judgments"


def test_report_files_are_complete_and_byte_identical(tiny, tmp_path):
    runs, qrels = tiny
    outs = []
    for i in range(2):
        res = leave_out(runs, qrels, MANIFEST, depth=2, measures=["AP", "P@2"])
        out = tmp_path / f"r{i}"
        write_report(res, out)
        outs.append(out)
    names = sorted(p.name for p in outs[0].iterdir())
    assert names == sorted(["density.png", "ranks.png", "scores.png", "report.md", "report.html"]
                           + [f"{t}.{e}" for t in ("summary", "runs", "units", "topics", "removed") for e in ("parquet", "csv")])
    for n in names:
        assert (outs[0] / n).read_bytes() == (outs[1] / n).read_bytes(), n
    md = (outs[0] / "report.md").read_text()
    assert "![relevance density per topic](density.png)" in md and "Kendall tau_b" in md
    assert "shared by all units" in md and "NIST practice" in md
    html = (outs[0] / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3
    assert (outs[0] / "density.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from qrelkit.io.tables import read_metadata

    meta = read_metadata(outs[0] / "summary.parquet")
    assert meta["kind"] == "reuse-summary" and meta["params"]["procedure"] == "group"


# ------------------------------------------------------------------------------ command line

def _write_inputs(tmp_path):
    d = tmp_path / "runs"
    d.mkdir()
    for run, per in SPEC.items():
        lines = [f"{q} Q0 {doc} {i + 1} {1000 - i} {run}\n" for q, docs in per.items() for i, doc in enumerate(docs)]
        (d / f"{run}.txt").write_text("".join(lines))
    (tmp_path / "qrels.txt").write_text("".join(f"{q} 0 {doc} {r}\n" for q, doc, r in QRELS))
    MANIFEST.to_csv(tmp_path / "manifest.csv", index=False)
    return d


def test_cli_leave_out_json_and_determinism(tmp_path, capsys):
    d = _write_inputs(tmp_path)
    args = [str(d), "-q", str(tmp_path / "qrels.txt"), "-m", str(tmp_path / "manifest.csv"), "-k", "2",
            "--measure", "P@2", "--measure", "AP"]
    assert cli_run(["reuse", "leave-out", *args, "-o", str(tmp_path / "o1"), "--json",
                    "--qrels-out", str(tmp_path / "q")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"]["procedure"] == "group" and out["pooled_source"] == "the manifest's pooled column"
    assert {u["unit"]: u["removed_judged"] for u in out["units"]} == {"A": 2, "B": 0, "C": 1}
    assert (tmp_path / "q" / "qrels-A.txt").read_text().count("\n") == len(QRELS) - 2
    assert cli_run(["reuse", "leave-out", *args, "-o", str(tmp_path / "o2")]) == 0
    for p in sorted((tmp_path / "o1").iterdir()):
        assert p.read_bytes() == (tmp_path / "o2" / p.name).read_bytes(), p.name


def test_cli_errors_are_one_line(tmp_path, capsys):
    d = _write_inputs(tmp_path)
    rc = cli_run(["reuse", "leave-out", str(d), "-q", str(tmp_path / "qrels.txt"), "-o", str(tmp_path / "o"),
                  "--procedure", "type"])
    err = capsys.readouterr().err
    assert rc == 2 and "[missing-value]" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_row_order_of_the_run_table_does_not_matter(tiny):
    runs, qrels = tiny
    shuffled = runs.take(pa.array(np.random.default_rng(0).permutation(runs.num_rows)))
    a = leave_out(runs, qrels, MANIFEST, depth=2, measures=["AP", "P@2"])
    b = leave_out(shuffled, qrels, MANIFEST, depth=2, measures=["AP", "P@2"], workers=2)
    for k in a.tables():
        assert a.tables()[k].to_pandas().equals(b.tables()[k].to_pandas()), k


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("given", [False, True])
def test_missing_error_names_the_first_run_by_name_as_evaluate_does(workers, given):
    """Review of issue 24's scoring per unit: under ``missing="error"`` the study stops before any
    scoring with evaluate()'s error for the first run by name that misses a judged topic (here
    ``a``, in the smaller group; the larger group's ``c`` also misses it), whatever the workers,
    official scores given or not."""
    runs = make_runs({"a": {"1": ["x", "y"]}, "b": {"1": ["y"], "2": ["z"]}, "c": {"1": ["x", "y", "w"]},
                      "d": {"1": ["w", "x"], "2": ["z"]}})  # group G1 (c, d) is the larger: scored first
    qrels = make_qrels([("1", "x", 1), ("1", "y", 0), ("2", "z", 1)])
    manifest = pd.DataFrame({"run": ["a", "b", "c", "d"], "group": ["G2", "G2", "G1", "G1"]})
    with pytest.raises(InputError) as alone:
        evaluate(runs, qrels, ["P@1"], missing="error")
    off = evaluate(runs, qrels, ["P@1"]).summary if given else None
    with pytest.raises(InputError) as e:
        leave_out(runs, qrels, manifest, depth=1, measures=["P@1"], missing="error", workers=workers, official=off)
    assert e.value.rule == "missing-topic" and str(e.value) == str(alone.value) and "'a'" in str(e.value)
