"""The pools' tie rule: equal scores at the depth cut ordered by docid descending (trec_eval, the
default), docid ascending, or file order; a config choice and a flag, stored in the pool."""

from __future__ import annotations

import json

import pytest

from qrelkit.cli import run
from qrelkit.errors import InputError
from qrelkit.io.runs import read_runs
from qrelkit.io.tables import read_metadata, read_table
from qrelkit.pooler import depth_pool, fused_pool, top1_pool

# topic 1: "top" first, then b, c, a tied (file order b, c, a); depth 2 cuts inside the tie
RUN = ("1 Q0 top 1 9 r\n"
       "1 Q0 b 2 5 r\n"
       "1 Q0 c 3 5 r\n"
       "1 Q0 a 4 5 r\n"
       "1 Q0 low 5 1 r\n")
# the second document at depth 2 under each rule
EXPECTED = {"docid-desc": "c", "docid-asc": "a", "file-order": "b"}


@pytest.fixture
def run_file(tmp_path):
    p = tmp_path / "r.run"
    p.write_text(RUN)
    return p


@pytest.mark.parametrize("rule", sorted(EXPECTED))
def test_depth_pool_membership_per_rule(run_file, rule):
    rs = read_runs(run_file, ties=rule)
    pool = depth_pool(rs.table, 2)
    assert sorted(pool["docid"].to_pylist()) == sorted(["top", EXPECTED[rule]])
    # ranks follow the rule: the tied documents get ranks 2..4 in the rule's order
    order = rs.table["docid"].to_pylist()
    assert order[0] == "top" and order[-1] == "low"
    assert order[1:4] == {"docid-desc": ["c", "b", "a"], "docid-asc": ["a", "b", "c"],
                          "file-order": ["b", "c", "a"]}[rule]


def test_top1_and_fused_follow_the_rule(tmp_path):
    p = tmp_path / "t.run"
    p.write_text("1 Q0 m 1 5 r\n1 Q0 z 2 5 r\n1 Q0 a 3 5 r\n")  # all tied at rank 1
    for rule, first in (("docid-desc", "z"), ("docid-asc", "a"), ("file-order", "m")):
        t = read_runs(p, ties=rule).table
        assert top1_pool(t)["docid"].to_pylist() == [first]
        assert fused_pool(t, 1)["docid"].to_pylist() == [first]


def test_bad_tie_rule(run_file):
    with pytest.raises(InputError, match="tie rule"):
        read_runs(run_file, ties="random")


@pytest.mark.parametrize("rule", sorted(EXPECTED))
def test_cli_flag_and_metadata(run_file, tmp_path, capsys, rule):
    out = tmp_path / f"pool-{rule}.parquet"
    code = run(["pool", "depth", str(run_file), "-o", str(out), "-k", "2", "--ties", rule, "--json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["ties"] == rule
    assert sorted(read_table(out)["docid"].to_pylist()) == sorted(["top", EXPECTED[rule]])
    assert read_metadata(out)["params"]["ties"] == rule


def test_cli_default_is_docid_desc_and_config_choice(run_file, tmp_path, capsys):
    out = tmp_path / "pool.parquet"
    assert run(["pool", "depth", str(run_file), "-o", str(out), "-k", "2"]) == 0
    assert read_metadata(out)["params"]["ties"] == "docid-desc"
    assert "c" in read_table(out)["docid"].to_pylist()
    cfg = tmp_path / "c.toml"
    cfg.write_text('[pool]\nties = "docid-asc"\n')
    for cmd, extra in (("depth", ["-k", "2"]), ("top1", []), ("fused", ["-n", "2"])):
        out = tmp_path / f"{cmd}.parquet"
        assert run(["pool", cmd, str(run_file), "-o", str(out), "-c", str(cfg), *extra]) == 0, capsys.readouterr().err
        assert read_metadata(out)["params"]["ties"] == "docid-asc"
    assert "a" in read_table(tmp_path / "depth.parquet")["docid"].to_pylist()
    # the flag wins over the config
    out = tmp_path / "flag.parquet"
    assert run(["pool", "depth", str(run_file), "-o", str(out), "-k", "2", "-c", str(cfg), "--ties", "file-order"]) == 0
    assert sorted(read_table(out)["docid"].to_pylist()) == ["b", "top"]


def test_cli_bad_rule_is_one_line(run_file, tmp_path, capsys):
    out = tmp_path / "pool.parquet"
    assert run(["pool", "depth", str(run_file), "-o", str(out), "--ties", "random"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "[bad-choice]" in err and not out.exists()


def test_reuse_recomputed_provenance_follows_the_rule(tmp_path, capsys):
    # r1 ties a and b at its rank 1; r2 has a first. At depth 1, docid-desc gives r1 b (unique to
    # it, and a unique to r2); docid-asc gives r1 a (shared): nothing unique
    (tmp_path / "r1.run").write_text("1 Q0 a 1 5 r1\n1 Q0 b 2 5 r1\n")
    (tmp_path / "r2.run").write_text("1 Q0 a 1 9 r2\n1 Q0 c 2 1 r2\n")
    (tmp_path / "q.txt").write_text("1 0 a 1\n1 0 b 1\n1 0 c 0\n")
    cfg = tmp_path / "asc.toml"
    cfg.write_text('[pool]\nties = "docid-asc"\n')
    removed = {}
    for name, extra in (("docid-desc", []), ("docid-asc", ["-c", str(cfg)])):
        code = run(["reuse", "leave-out", str(tmp_path / "r1.run"), str(tmp_path / "r2.run"), "-q", str(tmp_path / "q.txt"),
                    "-o", str(tmp_path / name), "-k", "1", "--measure", "P@1", "--json", *extra])
        assert code == 0
        units = json.loads(capsys.readouterr().out)["units"]
        removed[name] = {u["unit"]: u["removed_judged"] for u in units}
    assert removed == {"docid-desc": {"r1": 1, "r2": 1}, "docid-asc": {"r1": 0, "r2": 0}}
