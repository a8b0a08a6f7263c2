"""The protocol file after ``campaign init`` (issue 19): a comment edit does not block the
campaign; a value edit is ``[input-changed]`` naming the key; ``campaign adopt-config`` takes a
change for the stages not run yet and refuses one a stage done reads; a new campaign takes an old
one's judgments (``campaign export`` then ``init --qrels``) and does not ask for them again. And
run files vs the manifest at init (``[missing-run]``, ``[not-in-manifest]``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from qrelkit.campaign import Campaign, open_campaign_store
from qrelkit.campaign.store import campaign_config
from qrelkit.cli import run as cli
from qrelkit.io.qrels import read_qrels

#: a fast protocol: no near-duplicates, no CAL; the pool judged whole (screening, then the rest)
FAST = """# a fast protocol for tests
[pool]
depth = 5

[screen]
first_n = 10
discard_if_no_relevant = false
discard_if_relevant_share_at_least = 1.0

[campaign]
assessors = ["ann", "bob"]
skip = ["dedupe", "fractional", "cal", "reuse", "report"]
"""
FINAL = ["qrels-passages.txt", "qrels-expanded.txt", "qrels-documents.txt", "eval-summary.csv", "eval-per-query.csv",
         "leaderboard.csv"]


@pytest.fixture(scope="module")
def sim(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sim") / "s"
    assert cli(["simulate", "campaign", "-o", str(d), "--passages", "1500", "--topics", "3", "--groups", "3",
                "--seed", "4"]) == 0
    return d


def _init(sim: Path, d: Path, cfg: Path, *extra: str, runs: Path | None = None, manifest: Path | None = None) -> int:
    return cli(["campaign", "init", str(d), "-c", str(cfg), "--corpus", str(sim / "corpus.jsonl"), "-t",
                str(sim / "topics.tsv"), "--runs", str(runs or sim / "runs"), "-m", str(manifest or sim / "manifest.csv"),
                *extra])


def _protocol(tmp_path: Path, text: str = FAST) -> Path:
    p = tmp_path / "protocol.toml"
    p.write_text(text)
    return p


@pytest.fixture(scope="module")
def reference(sim, tmp_path_factory) -> Path:
    """The fast protocol run uninterrupted (oracle seed 3)."""
    base = tmp_path_factory.mktemp("ref")
    d = base / "c"
    assert _init(sim, d, _protocol(base)) == 0
    assert Campaign(d).run(oracle=sim / "qrels.txt", error_rate=0.1, seed=3)["state"] == "done"
    return d


def test_a_comment_edit_does_not_block_the_campaign(sim, reference, tmp_path, capsys):
    cfg = _protocol(tmp_path)
    d = tmp_path / "c"
    assert _init(sim, d, cfg) == 0
    assert Campaign(d).run(oracle=sim / "qrels.txt", error_rate=0.1, seed=3, until="pool")["state"] == "until pool"
    cfg.write_text("# edited: a comment, blank lines, a key moved, one set to its value, a set reordered\n\n"
                   + FAST.replace("depth = 5\n", "depth = 5   # the pool depth\n")
                   .replace('skip = ["dedupe", "fractional", "cal", "reuse", "report"]',
                            'skip = ["report", "reuse", "cal", "fractional", "dedupe"]')
                   + "\n[batch]\nassessors_per_item = 1\n")
    capsys.readouterr()
    assert cli(["campaign", "status", str(d)]) == 0
    assert Campaign(d).run(oracle=sim / "qrels.txt", error_rate=0.1, seed=3)["state"] == "done"
    for name in FINAL:
        assert (d / name).read_bytes() == (reference / name).read_bytes(), name


def test_a_value_edit_is_refused_naming_the_key(sim, tmp_path, capsys):
    cfg = _protocol(tmp_path)
    d = tmp_path / "c"
    assert _init(sim, d, cfg) == 0
    cfg.write_text(FAST.replace("depth = 5", "depth = 8").replace("first_n = 10", "first_n = 12"))
    capsys.readouterr()
    assert cli(["campaign", "run", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"{cfg}:3: [input-changed]" in err[0] and "[pool] depth 5 -> 8 (and 1 other key)" in err[0]
    assert "adopt-config" in err[0] and "campaign export" in err[0]
    assert cli(["campaign", "status", str(d)]) == 0  # status says so, and what to do
    out = capsys.readouterr().out
    assert f"{cfg}:3: [input-changed]" in out and "[pool] depth 5 -> 8 (and 1 other key)" in out
    assert out.rstrip().splitlines()[-1].startswith("blocked:") and "adopt-config" in out


def test_adopt_a_change_for_a_stage_not_run_yet(sim, tmp_path, capsys):
    cfg = _protocol(tmp_path)
    d = tmp_path / "c"
    assert _init(sim, d, cfg) == 0
    assert Campaign(d).run(until="select")["state"] == "until select"
    cfg.write_text(FAST.replace("depth = 5", "depth = 8"))
    assert cli(["campaign", "run", str(d), "--until", "pool"]) == 2
    capsys.readouterr()
    assert cli(["campaign", "adopt-config", str(d), "--dry-run"]) == 0
    out = capsys.readouterr()
    assert "[pool] depth" in out.out and "nothing adopted (--dry-run)" in out.err
    with open_campaign_store(d) as s:
        assert campaign_config(s).get_value("pool", "depth") == 5          # a dry run changes nothing
    assert cli(["campaign", "adopt-config", str(d), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["adopted"] and [(c["section"], c["key"], c["old"], c["new"]) for c in res["changes"]] == [
        ("pool", "depth", 5, 8)]
    res = Campaign(d).run(oracle=sim / "qrels.txt", seed=3, until="pool")
    assert res["state"] == "until pool"
    with open_campaign_store(d) as s:
        assert s.state.stages_done()["pool"]["depth"] == 8
        assert campaign_config(s).get_value("pool", "depth") == 8
        assert any("adopted [pool] depth 5 -> 8" in m for m in s.state.warnings()["message"])
    assert pd.read_parquet(d / "pool.parquet").groupby("qid").size().max() > 5


def test_a_long_lived_runner_takes_an_adopted_configuration(sim, tmp_path):
    cfg = _protocol(tmp_path)
    d = tmp_path / "c"
    assert _init(sim, d, cfg) == 0
    with Campaign(d).runner(oracle=sim / "qrels.txt", seed=3) as r:
        assert r.advance(until="select")["state"] == "until select"
        cfg.write_text(FAST.replace("depth = 5", "depth = 8"))
        assert Campaign(d).adopt_config()["adopted"]
        assert r.advance(until="pool")["state"] == "until pool"
    with open_campaign_store(d) as s:
        assert s.state.stages_done()["pool"]["depth"] == 8


def test_adopt_refused_for_a_stage_done(sim, tmp_path, capsys):
    cfg = _protocol(tmp_path)
    d = tmp_path / "c"
    assert _init(sim, d, cfg) == 0
    assert Campaign(d).run(until="pool")["state"] == "until pool"
    cfg.write_text(FAST.replace("depth = 5", "depth = 8").replace("first_n = 10", "first_n = 12"))
    capsys.readouterr()
    assert cli(["campaign", "adopt-config", str(d)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{cfg}:3: [adopt-refused] [pool] depth 5 -> 8 is read by stage pool, which is done" in err[0]
    assert "1 other change" not in err[0]            # [screen] first_n: screening has not started
    with open_campaign_store(d) as s:
        assert campaign_config(s).get_value("pool", "depth") == 5
    assert cli(["campaign", "adopt-config", str(d), "--dry-run", "--json"]) == 0
    rows = {(c["section"], c["key"]): c["refused"] for c in json.loads(capsys.readouterr().out)["changes"]}
    assert rows == {("pool", "depth"): "read by stage pool, which is done", ("screen", "first_n"): None}


def test_adopt_refused_once_a_judging_stage_has_issued_batches(sim, tmp_path, capsys):
    cfg = _protocol(tmp_path)
    d = tmp_path / "c"
    assert _init(sim, d, cfg) == 0
    assert Campaign(d).run()["state"] == "waiting for judgments"      # screening batches are out
    cfg.write_text(FAST.replace('assessors = ["ann", "bob"]', 'assessors = ["ann", "bob", "cy"]'))
    capsys.readouterr()
    assert cli(["campaign", "adopt-config", str(d)]) == 2
    assert "is read by stage screening, which is started: batches issued" in capsys.readouterr().err


def test_a_new_campaign_from_the_judgments_of_another(sim, reference, tmp_path, capsys):
    judged = tmp_path / "judged.txt"
    assert cli(["campaign", "export", str(reference), "-o", str(judged)]) == 0
    old = read_qrels(judged).to_pandas()
    with open_campaign_store(reference) as s:
        assert len(old) == len(s.judgments.log(None, "all").drop_duplicates(["qid", "docid"]))
    deeper = _protocol(tmp_path, FAST.replace("depth = 5", "depth = 8"))
    d = tmp_path / "new"
    assert _init(sim, d, deeper, "--qrels", str(judged)) == 0
    assert Campaign(d).run(oracle=sim / "qrels.txt", error_rate=0.1, seed=3)["state"] == "done"
    with open_campaign_store(d) as s:
        asked = s.judgments.log(None, "all")
    asked = asked[asked["assessor"] != "qrels"]
    assert len(asked) > 0                                          # the deeper pool's new passages
    again = asked.merge(old, on=["qid", "docid"])
    assert again.empty, again.head()                               # nothing judged before is asked again


def test_export_works_when_an_input_changed(sim, reference, tmp_path, capsys):
    src = tmp_path / "s"
    shutil.copytree(sim, src)
    cfg = _protocol(tmp_path)
    d = tmp_path / "c"
    assert _init(src, d, cfg) == 0
    cfg.write_text(FAST.replace("depth = 5", "depth = 8"))
    assert cli(["campaign", "export", str(d), "-o", str(tmp_path / "q.txt")]) == 0


# -- run files vs the manifest at init ----------------------------------------------------------


def test_a_manifest_run_without_a_file_is_refused_at_init(sim, tmp_path, capsys):
    man = pd.read_csv(sim / "manifest.csv", dtype=str)
    extra = man.iloc[:1].assign(run="ghost", file="ghost.run")
    pd.concat([man, extra]).to_csv(tmp_path / "m.csv", index=False)
    d = tmp_path / "c"
    capsys.readouterr()
    assert _init(sim, d, _protocol(tmp_path), manifest=tmp_path / "m.csv") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{tmp_path / 'm.csv'}:{len(man) + 2}: [missing-run]" in err[0] and "'ghost'" in err[0]
    assert not (d / "campaign.db").exists()
    # lenient: the campaign is made, the run left out and the warning recorded
    assert _init(sim, d, _protocol(tmp_path), "--lenient", manifest=tmp_path / "m.csv") == 0
    Campaign(d).run(until="validate")
    with open_campaign_store(d) as s:
        assert any("[missing-run]" in m and "ghost" in m for m in s.state.warnings()["message"])


def test_a_run_file_the_manifest_does_not_name_is_refused_at_init(sim, tmp_path, capsys):
    runs = tmp_path / "runs"
    shutil.copytree(sim / "runs", runs)
    first = sorted(runs.iterdir())[0]
    (runs / "stray.run").write_text(first.read_text().replace(first.read_text().split()[5], "stray"))
    d = tmp_path / "c"
    capsys.readouterr()
    assert _init(sim, d, _protocol(tmp_path), runs=runs) == 2
    err = capsys.readouterr().err
    assert "[not-in-manifest]" in err and "stray" in err and not (d / "campaign.db").exists()
    assert _init(sim, d, _protocol(tmp_path), "--lenient", runs=runs) == 0
    Campaign(d).run(until="validate")
    with open_campaign_store(d) as s:
        assert any("[not-in-manifest]" in m and "stray" in m for m in s.state.warnings()["message"])


def test_the_map_of_keys_to_stages_names_real_keys_and_stages():
    from qrelkit.campaign.adopt import CONFIG_STAGES, INIT, stages_using
    from qrelkit.config import CAMPAIGN_STAGES, SCHEMA

    for name, used in CONFIG_STAGES.items():
        sec, _, key = name.rpartition(".") if name not in SCHEMA else (name, "", "")
        assert sec in SCHEMA and (not key or key in SCHEMA[sec]), name
        assert set(used) <= {INIT, *CAMPAIGN_STAGES}, name
    assert stages_using("pool", "depth") == ("pool", "fractional")
    assert stages_using("labels", "min_assessors") == (INIT, *CAMPAIGN_STAGES)   # not declared: every stage
