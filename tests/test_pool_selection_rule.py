"""One rule for "which runs are pooled": a manifest with a ``pooled`` column (as 'pool select'
writes it) is taken as it is by every command; without one, the selection rule applies."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from qrelkit.cli import run
from qrelkit.errors import InputError
from qrelkit.io.manifest import read_manifest
from qrelkit.io.tables import read_metadata, read_table
from qrelkit.pooler import pool_selection

from conftest import write_run

RUNS = {"a1": ("G1", 1), "a2": ("G1", 2), "a3": ("G1", 3), "b1": ("G2", 1)}


@pytest.fixture
def campaign(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    for i, r in enumerate(RUNS):
        # each run retrieves its own document first, so the pool shows which runs fed it
        rows = [(q, d, 10 - j) for q in ("1", "2") for j, d in enumerate([f"own-{r}", "shared", f"x{i}"])]
        write_run(runs / f"{r}.run", rows, tag=r)
    (tmp_path / "manifest.csv").write_text(
        "run,group,priority\n" + "".join(f"{r},{g},{p}\n" for r, (g, p) in RUNS.items()))
    (tmp_path / "qrels.txt").write_text("1 0 own-a1 1\n1 0 own-a3 1\n1 0 shared 1\n2 0 own-b1 2\n2 0 shared 0\n")
    return tmp_path


def _select(campaign, capsys, *extra):
    sel = campaign / "selection.csv"
    assert run(["pool", "select", "-m", str(campaign / "manifest.csv"), "-o", str(sel), "--per-group", "1", *extra]) == 0
    capsys.readouterr()
    df = pd.read_csv(sel, dtype={"run": str})
    return sel, dict(zip(df["run"], df["pooled"]))


def _pooled_runs(pool_path):
    runs = set()
    for prov in read_table(pool_path)["runs"].to_pylist():
        runs.update(x["run"] for x in prov)
    return runs


def test_pool_depth_honours_the_selection(campaign, capsys):
    sel, pooled = _select(campaign, capsys)
    assert pooled == {"a1": True, "a2": False, "a3": False, "b1": True}
    out = campaign / "pool.parquet"
    assert run(["pool", "depth", str(campaign / "runs"), "-m", str(sel), "-o", str(out), "-k", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs_pooled"] == 2
    assert _pooled_runs(out) == {"a1", "b1"}
    assert read_metadata(out)["params"]["pooled_runs"] == ["a1", "b1"]


def test_hand_edited_pooled_column_taken_as_is(campaign, capsys):
    # a pooled column that no selection rule would give: the lowest-priority run of G1 only
    man = campaign / "hand.csv"
    man.write_text("run,group,priority,pooled\na1,G1,1,false\na2,G1,2,no\na3,G1,3,true\nb1,G2,1,0\n")
    for cmd, extra in (("depth", ["-k", "1"]), ("top1", []), ("fused", ["-n", "1"])):
        out = campaign / f"{cmd}.parquet"
        assert run(["pool", cmd, str(campaign / "runs"), "-m", str(man), "-o", str(out), *extra]) == 0
        assert _pooled_runs(out) == {"a3"}, cmd
    capsys.readouterr()
    # --all-runs still pools every run
    out = campaign / "all.parquet"
    assert run(["pool", "depth", str(campaign / "runs"), "-m", str(man), "-o", str(out), "-k", "1", "--all-runs"]) == 0
    assert _pooled_runs(out) == set(RUNS)


def test_manifest_without_pooled_column_gets_the_rule(campaign, capsys):
    out = campaign / "pool.parquet"
    cfg = campaign / "c.toml"
    cfg.write_text("[selection]\nper_group = 1\n")
    assert run(["pool", "depth", str(campaign / "runs"), "-m", str(campaign / "manifest.csv"), "-o", str(out),
                "-k", "1", "-c", str(cfg)]) == 0
    assert _pooled_runs(out) == {"a1", "b1"}


def test_reuse_uses_the_same_selection(campaign, capsys):
    sel, _ = _select(campaign, capsys)
    out = campaign / "report"
    code = run(["reuse", "leave-out", str(campaign / "runs"), "-q", str(campaign / "qrels.txt"), "-m", str(sel),
                "-o", str(out), "--measure", "P@1", "-k", "1", "--json"])
    assert code == 0, capsys.readouterr().err
    res = json.loads(capsys.readouterr().out)
    assert res["params"]["pooled_runs"] == 2
    assert "pooled column" in res["pooled_source"]


def test_library_rule():
    man = pd.DataFrame({"run": ["a", "b", "c"], "group": ["G", "G", "G"], "priority": [1, 2, 3],
                        "baseline": [False] * 3, "subtask": [""] * 3})
    # no pooled column: the selection rule
    assert pool_selection(man, per_group=1)["pooled"].tolist() == [True, False, False]
    # a pooled column: as is, whatever the rule's arguments say
    man["pooled"] = ["false", "true", "yes"]
    got = pool_selection(man, per_group=1)
    assert got["pooled"].tolist() == [False, True, True] and set(got["reason"]) == {"manifest"}
    man["pooled"] = ["maybe", "true", "true"]
    with pytest.raises(InputError, match="bad-pooled|not true/false"):
        pool_selection(man)


def test_selection_round_trips_through_read_manifest(campaign, capsys):
    sel, pooled = _select(campaign, capsys)
    got = pool_selection(read_manifest(sel), per_group=3)
    assert dict(zip(got["run"], got["pooled"])) == pooled


@pytest.mark.parametrize("column", ["pooled", "Pooled", " POOLED "])
def test_the_reuse_study_finds_the_pooled_column_as_the_pool_does(column):
    """``reuse.study.pooled_runs`` and ``pooler.pool_selection`` find a manifest's pooled column
    the same way, whatever its case (pooled_runs used to miss ``Pooled`` and fall back to the
    config's selection, so the study and the pool disagreed on which runs were pooled)."""
    from qrelkit.reuse.study import pooled_runs

    man = pd.DataFrame({"run": list(RUNS), "group": [g for g, _ in RUNS.values()],
                        "priority": [p for _, p in RUNS.values()], column: ["yes", "no", "no", "no"]})
    sel = pool_selection(man, per_group=1)
    runs, why = pooled_runs(list(RUNS), man)
    assert runs == sel.loc[sel["pooled"], "run"].tolist() == ["a1"]
    assert why == "the manifest's pooled column"
