"""The TREC-8-shaped collection generator (qrelkit.simulate.collection) and ``qrelkit simulate
collection``: the shape figures of TREC-8 within ranges, determinism, the qrels as the pooled runs'
depth pool, the command's files and failures."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from qrelkit.cli import run
from qrelkit.errors import InputError
from qrelkit.simulate.collection import SimulatedCollection, collection_summary, simulate_collection

SMALL = dict(topics=4, runs=9, groups=4, depth=20, run_length=60, universe=3000, seed=3)


@pytest.fixture(scope="module")
def trec8() -> SimulatedCollection:
    return simulate_collection(seed=0)  # the defaults: TREC-8's shape (about 3 s)


def _pool(c: SimulatedCollection, depth: int) -> pa.Table:
    from qrelkit.pooler import depth_pool

    pooled = c.manifest.loc[c.manifest["pooled"], "run"].tolist()
    return depth_pool(c.runs.filter(pc.is_in(c.runs["run"], value_set=pa.array(pooled))), depth)


def _pairs(t: pa.Table) -> set[tuple[str, str]]:
    return set(zip(t["qid"].to_pylist(), t["docid"].to_pylist()))


def test_trec8_shape(trec8):
    s = collection_summary(trec8)
    assert (s["topics"], s["runs"], s["groups"], s["pooled_runs"], s["run_length"]) == (50, 71, 40, 71, 1000)
    assert trec8.runs.num_rows == 50 * 71 * 1000
    assert sorted(set(trec8.runs["qid"].to_pylist())) == [str(q) for q in range(401, 451)]
    pool, rel = s["pool_per_topic"], s["relevant_per_topic"]
    assert 1500 <= pool["mean"] <= 1900 and pool["min"] >= 700 and pool["max"] <= 2600  # TREC-8: 1,736
    assert 4000 <= rel["total"] <= 5600 and 80 <= rel["mean"] <= 112  # TREC-8: 4,728 (94.6 per topic)
    assert rel["min"] <= 30 and rel["max"] >= 200 and rel["median"] < rel["mean"]  # a wide, skewed spread
    sizes = trec8.manifest.groupby("group").size()
    assert sizes.min() >= 1 and sizes.max() <= 6
    for _, g in trec8.manifest.groupby("group"):
        assert sorted(g["priority"]) == list(range(1, len(g) + 1))


def test_qrels_are_the_depth_pool_judged(trec8):
    pool = _pool(trec8, 100)
    assert _pairs(pool) == _pairs(trec8.qrels) and trec8.qrels.num_rows == pool.num_rows
    assert set(trec8.qrels["rel"].to_pylist()) == {0, 1}
    # strictly descending scores: a reader's tie rule cannot reorder a list
    r = trec8.runs.slice(0, 1000)["score"].to_numpy()
    assert (np.diff(r) < 0).all()


def test_runs_of_varied_quality_with_relevant_at_the_top_and_shared(trec8):
    from qrelkit.evaluate import evaluate

    top = trec8.runs.filter(pc.less_equal(trec8.runs["rank"], 100))  # the judged part: fast
    ev = evaluate(top, trec8.qrels, ["P@10", "P@100", "AP"], rel=1).summary.to_pandas()
    by = ev.pivot(index="run", columns="measure", values="value")
    assert by["P@10"].min() < 0.35 and by["P@10"].max() > 0.5  # weak and strong runs
    assert by["AP"].max() > 2 * by["AP"].min()
    assert (by["P@10"] > by["P@100"]).mean() > 0.9  # relevant documents concentrate at the top
    pool = _pool(trec8, 100).to_pandas().merge(trec8.qrels.to_pandas(), on=["qid", "docid"])
    shared = pool.groupby("rel")["n_runs"].mean()
    assert shared[1] > 2 * shared[0] and shared[1] > 8  # relevant ones found by many runs
    assert (pool[pool["rel"] == 1]["n_runs"] == 1).sum() > 0  # and some by one run only


def test_deterministic_for_a_seed():
    a, b = simulate_collection(**SMALL), simulate_collection(**SMALL)
    runs, qrels, manifest = a  # unpacks
    assert runs is a.runs and qrels is a.qrels and manifest is a.manifest
    assert a.runs.equals(b.runs) and a.qrels.equals(b.qrels) and a.manifest.equals(b.manifest)
    other = simulate_collection(**{**SMALL, "seed": 4})
    assert not other.runs.equals(a.runs) and not other.qrels.equals(a.qrels)


def test_pooled_runs_by_priority():
    c = simulate_collection(**{**SMALL, "pooled": 4})
    m = c.manifest
    assert m["pooled"].sum() == 4 and (m.loc[m["pooled"], "priority"] == 1).all()  # every group's first run
    assert _pairs(_pool(c, SMALL["depth"])) == _pairs(c.qrels)
    assert set(c.runs["run"].to_pylist()) == set(m["run"])  # unpooled runs are in the collection


@pytest.mark.parametrize("bad", [dict(topics=0), dict(runs=3, groups=4), dict(depth=0), dict(run_length=0),
                                 dict(pooled=0), dict(pooled=10), dict(universe=50), dict(universe=10**7)])
def test_bad_sizes_are_refused(bad):
    with pytest.raises(InputError, match=r"\[bad-option\]"):
        simulate_collection(**{**SMALL, **bad})


def test_cli_writes_a_collection_the_readers_accept(tmp_path, capsys):
    from qrelkit.io.manifest import read_manifest
    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.runs import read_runs

    out = tmp_path / "coll"
    (out / "runs").mkdir(parents=True)
    (out / "runs" / "mine.run").write_text("1 Q0 d 1 1 mine\n")  # someone's run: never removed
    argv = ["simulate", "collection", "-o", str(out), "--topics", "3", "--runs", "6", "--groups", "3", "--depth", "10",
            "--run-length", "50", "--pooled", "5", "--seed", "2", "--json"]
    capsys.readouterr()
    assert run(argv) == 2
    assert "[output-not-empty]" in capsys.readouterr().err
    assert [p.name for p in (out / "runs").iterdir()] == ["mine.run"] and not (out / "qrels.txt").exists()
    (out / "runs" / "mine.run").unlink()
    assert run(argv) == 0
    capsys.readouterr()
    assert run(argv) == 0  # written again over its own files
    summary = json.loads(capsys.readouterr().out)
    assert (summary["topics"], summary["runs"], summary["groups"], summary["pooled_runs"]) == (3, 6, 3, 5)
    manifest = read_manifest(out / "manifest.csv")
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(manifest["file"])
    rs = read_runs(out / "runs", manifest=manifest)  # strict: no defect
    lib = simulate_collection(topics=3, runs=6, groups=3, depth=10, run_length=50, pooled=5, seed=2)
    assert rs.errors().empty and rs.table.equals(lib.runs)
    assert read_qrels(out / "qrels.txt").equals(lib.qrels)
    assert manifest["pooled"].tolist() == ["true" if x else "false" for x in lib.manifest["pooled"]]
    assert summary["relevant_per_topic"]["total"] == int(pc.sum(lib.qrels["rel"]).as_py())


@pytest.mark.parametrize("args, rule", [(["--groups", "9", "--runs", "4"], "bad-option"),
                                        (["--run-length", "0"], "bad-option"),
                                        (["--pooled", "100"], "bad-option")])
def test_cli_bad_option_is_one_line_and_writes_nothing(tmp_path, capsys, args, rule):
    out = tmp_path / "coll"
    capsys.readouterr()
    assert run(["simulate", "collection", "-o", str(out), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"[{rule}]" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("command", [["simulate", "collection", "--topics", "2", "--runs", "3", "--groups", "2"],
                                     ["simulate", "campaign", "--passages", "200", "--topics", "2"]])
def test_a_negative_seed_is_one_line_and_writes_nothing(tmp_path, capsys, command):
    from qrelkit.cli import run as cli  # lazy: as the other command tests

    out = tmp_path / "out"
    assert cli([*command, "-o", str(out), "--seed", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[bad-option]" in err[0] and not out.exists()
