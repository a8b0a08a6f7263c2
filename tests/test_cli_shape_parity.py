"""A Python user gets exactly what the command line does (issue 12): for each policy the CLI
moved into the library, the library call and the command on the same input give the same result.

- ``qrelkit.io.runsets.load_runs``          ~ ``qrelkit runs canonicalize``
- ``qrelkit.pooler.protocol.configured_selection`` ~ ``qrelkit pool select`` / pooled runs of ``pool depth``
- ``qrelkit.labels.relevance.relevance_level`` and ``qrelkit.evaluate.protocol.scoring_options``
                                              ~ ``qrelkit eval score``
- ``qrelkit.evaluate.protocol.comparison_options`` ~ ``qrelkit eval compare``
- ``qrelkit.reuse.study`` (options, pool setting, pooled runs, reduced qrels) ~ ``qrelkit reuse leave-out``
- ``qrelkit.cal.study`` (topics, rules, outputs, per-thread summary) ~ ``qrelkit cal simulate``
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from qrelkit.cli import run
from qrelkit.evaluate.params import EvalParams
from qrelkit.io.manifest import read_manifest
from qrelkit.io.qrels import read_qrels
from qrelkit.io.runsets import load_runs
from qrelkit.io.tables import read_metadata, read_table
from qrelkit.reuse.params import ReuseParams


@pytest.fixture(scope="module")
def camp(tmp_path_factory):
    from qrelkit.simulate.campaign import simulate_campaign

    d = tmp_path_factory.mktemp("parity")
    simulate_campaign(d, n_passages=3000, n_topics=4, n_groups=2, depth=20, seed=5)
    return d


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


def _frame(path) -> pd.DataFrame:
    return read_table(path).to_pandas()


def test_load_runs_is_runs_canonicalize(camp, tmp_path):
    assert run(["runs", "canonicalize", str(camp / "runs"), "-m", str(camp / "manifest.csv"),
                "-o", str(tmp_path / "runs.parquet")]) == 0
    rs = load_runs(camp / "runs", manifest=camp / "manifest.csv")
    assert read_table(tmp_path / "runs.parquet").equals(rs.table)


def test_configured_selection_is_pool_select_and_the_pooled_runs_of_a_pool(camp, tmp_path):
    from qrelkit.pooler.protocol import configured_selection

    assert run(["pool", "select", "-m", str(camp / "manifest.csv"), "--per-group", "1",
                "-o", str(tmp_path / "sel.parquet")]) == 0
    lib = configured_selection(read_manifest(camp / "manifest.csv"), select=True, per_group=1)
    cli = _frame(tmp_path / "sel.parquet")
    assert cli["run"].tolist() == lib["run"].tolist() and cli["pooled"].tolist() == lib["pooled"].tolist()
    assert cli["reason"].tolist() == lib["reason"].tolist()
    assert run(["pool", "depth", str(camp / "runs"), "-m", str(camp / "manifest.csv"), "-k", "5",
                "-o", str(tmp_path / "pool.parquet")]) == 0
    sel = configured_selection(read_manifest(camp / "manifest.csv"))
    pooled = sorted(set(sel.loc[sel["pooled"], "run"]))
    assert read_metadata(tmp_path / "pool.parquet")["params"]["pooled_runs"] == pooled


def test_relevance_level_and_scoring_options_are_eval_score(camp, tmp_path):
    from qrelkit.evaluate import evaluate
    from qrelkit.evaluate.protocol import scoring_options
    from qrelkit.labels.relevance import relevance_level

    out = tmp_path / "pq.parquet"
    assert run(["eval", "score", str(camp / "runs"), "-q", str(camp / "qrels.txt"), "-o", str(out),
                "--measure", "AP", "--measure", "P@10", "--relevant", ">=2"]) == 0
    assert read_metadata(out)["params"]["rel"] == relevance_level(">=2") == 2
    assert relevance_level("passage") == relevance_level("2,3")
    rs = load_runs(camp / "runs")
    ev = evaluate(rs.table, read_qrels(camp / "qrels.txt"), run_names=rs.runs,
                  **scoring_options(EvalParams.from_config(None, measures=["AP", "P@10"], relevant=">=2")))
    assert read_table(out).equals(ev.per_query)


def test_comparison_options_are_eval_compare(camp, tmp_path):
    from qrelkit.evaluate import evaluate, significance
    from qrelkit.evaluate.protocol import comparison_options, scoring_options

    out = tmp_path / "sig.parquet"
    assert run(["eval", "compare", str(camp / "runs"), "-q", str(camp / "qrels.txt"), "-o", str(out),
                "--measure", "AP", "--tests", "ttest,randomization", "--randomizations", "200", "--seed", "3",
                "--baseline", "p_bm25"]) == 0
    rs = load_runs(camp / "runs")
    ev = evaluate(rs.table, read_qrels(camp / "qrels.txt"), run_names=rs.runs, **scoring_options(EvalParams.from_config(None, measures=["AP"])))
    co = comparison_options(EvalParams.from_config(None, tests=["ttest", "randomization"], randomizations=200, seed=3))
    co.pop("k")
    sig = significance(ev.per_query, ev.measures, baseline="p_bm25", **co)
    pd.testing.assert_frame_equal(_frame(out), sig.reset_index(drop=True), check_dtype=False)


@pytest.mark.parametrize("with_pool", [False, True])
def test_reuse_study_is_reuse_leave_out(camp, tmp_path, capsys, with_pool):
    from qrelkit.cli.common import records
    from qrelkit.reuse import leave_out
    from qrelkit.reuse.study import leave_out_options, pool_setting, pooled_runs, write_reduced_qrels

    pool = None
    if with_pool:
        pool = tmp_path / "pool.parquet"
        assert run(["pool", "depth", str(camp / "runs"), "-m", str(camp / "manifest.csv"), "-k", "5", "-o", str(pool)]) == 0
        capsys.readouterr()
    args = ["reuse", "leave-out", str(camp / "runs"), "-q", str(camp / "qrels.txt"), "-m", str(camp / "manifest.csv"),
            "--measure", "AP", "--measure", "P@10", "-o", str(tmp_path / "report"), "--qrels-out",
            str(tmp_path / "cli-qrels"), "--json"]
    assert run(args + (["--pool", str(pool)] if pool else ["-k", "5"])) == 0
    cli = _json(capsys)

    q = read_qrels(camp / "qrels.txt")
    man = read_manifest(camp / "manifest.csv")
    opts = leave_out_options(ReuseParams.from_config(None, measures=["AP", "P@10"]))
    ps = pool_setting(pool=pool, depth=None if pool else 5)
    rs = load_runs(camp / "runs", manifest=camp / "manifest.csv", ties=ps.ties)
    pooled, source = pooled_runs(rs.runs, man, ps.params, pool_name=str(pool))
    res = leave_out(rs.table, q, man, pooled=pooled, depth=ps.depth, per_run_depth=ps.per_run_depth, pool=ps.table,
                    **opts)
    assert cli["pooled_source"] == source
    assert source == (f"the pool's parameters ({pool})" if pool else "the config's pool-run selection (as 'qrelkit pool select')")
    assert cli["params"] == json.loads(json.dumps(res.params, default=str))
    assert cli["summary"] == json.loads(json.dumps(records(res.summary.to_pandas()), default=str))
    written = write_reduced_qrels(q, res, tmp_path / "lib-qrels", opts["removal"])
    assert written
    for name in written:
        assert (tmp_path / "lib-qrels" / name).read_bytes() == (tmp_path / "cli-qrels" / name).read_bytes()


def test_cal_study_is_cal_simulate(camp, tmp_path, capsys):
    from qrelkit.cal.features import load_features
    from qrelkit.cal.loop import CalParams
    from qrelkit.cal.simulation import simulate_cal
    from qrelkit.cal.study import read_initial, select_topics, thread_summary, watched_rules
    from qrelkit.config import load_config
    from qrelkit.io.topics import read_topics

    assert run(["cal", "features", str(camp / "corpus.jsonl"), "-o", str(tmp_path / "f")]) == 0
    capsys.readouterr()
    assert run(["cal", "simulate", str(tmp_path / "f"), "-t", str(camp / "topics.tsv"), "-q", str(camp / "qrels.txt"),
                "-o", str(tmp_path / "sim"), "--threads", "local,all", "-r", "knee", "--stop-when", "density",
                "--max-effort", "60", "--initial", str(camp / "qrels.txt"), "--no-plot", "--json"]) == 0
    cli = _json(capsys)

    cfg = load_config(None)
    topics = select_topics(read_topics(camp / "topics.tsv"))
    rules = watched_rules(["knee"], "density", cfg)
    assert list(rules) == ["knee", "density"]
    res = simulate_cal(load_features(tmp_path / "f"), topics, read_qrels(camp / "qrels.txt"), threads=["local", "all"],
                       params=CalParams.from_config(cfg), initial=read_initial(camp / "qrels.txt"), rules=rules,
                       stop_when="density", max_effort=60, until_recall=0.95,
                       scale=tuple(cfg.get_value("labels", "scale")), qrels_file=str(camp / "qrels.txt"))
    assert cli["threads"] == json.loads(json.dumps(thread_summary(res, rules)))
    pd.testing.assert_frame_equal(_frame(tmp_path / "sim" / "summary.csv"), res.summary, check_dtype=False)
    with pytest.raises(Exception, match="unknown-topic"):
        select_topics(topics, ["nope"], file="topics.tsv")
