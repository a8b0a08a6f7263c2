"""The command line: error contract (one line, exit 2, no output), --json, determinism."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from qrelkit.cli import run
from qrelkit.io.tables import read_metadata

from conftest import write_three_runs


@pytest.fixture
def campaign(tmp_path):
    write_three_runs(tmp_path / "runs", (0, 1, 2))
    (tmp_path / "manifest.csv").write_text(
        "run,group,priority,baseline,subtask,file\n"
        "alpha,G1,1,false,fullrank,alpha.run\nbeta,G1,2,false,fullrank,beta.run\ngamma,G2,1,true,fullrank,gamma.run\n"
    )
    (tmp_path / "qrels.txt").write_text("1 0 D0 2\n1 0 D1 0\n2 0 D3 1\n")
    (tmp_path / "corpus.jsonl").write_text("".join(f'{{"pid": "D{i}", "passage": "text {i}", "docid": "doc{i // 3}"}}\n' for i in range(12)))
    (tmp_path / "topics.tsv").write_text("1\tfirst\n2\tsecond\n3\tthird\n")
    return tmp_path


def test_validate_ok_json(campaign, capsys):
    code = run(["runs", "validate", str(campaign / "runs"), "--manifest", str(campaign / "manifest.csv"), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["runs"] == 3 and out["errors"] == 0 and out["documents"] == 108


def test_error_is_one_line_exit_2_and_no_output(campaign, capsys):
    bad = campaign / "runs" / "beta.run"
    lines = bad.read_text().splitlines()
    lines[4] = lines[4].replace(" Q0", "")
    bad.write_text("\n".join(lines) + "\n")
    out = campaign / "pool.parquet"
    code = run(["pool", "depth", str(campaign / "runs"), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert f"{bad}:5: [missing-column]" in err
    assert not out.exists()
    assert list(campaign.glob(".pool.parquet*")) == []
    # lenient mode repairs and writes
    assert run(["pool", "depth", str(campaign / "runs"), "-o", str(out), "--lenient"]) == 0
    assert out.exists()


def test_missing_file_is_input_error(tmp_path, capsys):
    assert run(["runs", "validate", str(tmp_path / "nope.run")]) == 2
    assert "[unreadable]" in capsys.readouterr().err


def test_pool_depth_with_selection_and_metadata(campaign, capsys):
    out = campaign / "pool.parquet"
    code = run(["pool", "depth", str(campaign / "runs"), "-m", str(campaign / "manifest.csv"), "--depth", "2",
                "--qrels", str(campaign / "qrels.txt"), "-o", str(out), "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["runs_pooled"] == 3 and summary["depth"] == 2
    meta = read_metadata(out)
    assert meta["kind"] == "pool-depth" and meta["params"]["depth"] == 2
    t = pq.read_table(out)
    assert {"qid", "docid", "position", "min_rank", "n_runs", "runs", "judged", "rel"} <= set(t.column_names)
    # per-group quota 1 drops beta; gamma is a baseline
    assert run(["pool", "depth", str(campaign / "runs"), "-m", str(campaign / "manifest.csv"), "-o", str(out),
                "--json", "--config", str(_config(campaign, per_group=1))]) == 0
    assert json.loads(capsys.readouterr().out)["runs_pooled"] == 2


def _config(d: Path, **selection) -> Path:
    p = d / "proto.toml"
    p.write_text("[selection]\n" + "".join(f"{k} = {v}\n" for k, v in selection.items()) + "[pool]\ndepth = 3\n")
    return p


def test_config_and_flag_override(campaign, capsys):
    cfg = _config(campaign, per_group=3)
    out = campaign / "p.parquet"
    assert run(["pool", "depth", str(campaign / "runs"), "-o", str(out), "-c", str(cfg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["depth"] == 3
    assert run(["pool", "depth", str(campaign / "runs"), "-o", str(out), "-c", str(cfg), "-k", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["depth"] == 1


def test_byte_identical_outputs(campaign):
    outs = []
    for i in range(2):
        d = campaign / f"o{i}"
        assert run(["pool", "depth", str(campaign / "runs"), "-o", str(d / "pool.parquet"), "-k", "5"]) == 0
        assert run(["pool", "top1", str(campaign / "runs"), "-q", str(campaign / "qrels.txt"), "-o", str(d / "top1.parquet")]) == 0
        assert run(["pool", "fused", str(campaign / "runs"), "-n", "4", "-o", str(d / "fused.tsv")]) == 0
        assert run(["pool", "fractional", str(campaign / "runs"), "--corpus", str(campaign / "corpus.jsonl"),
                    "--fraction", "0.5", "--seed", "3", "-o", str(d / "frac.parquet"), "--ids-out", str(d / "ids.tsv")]) == 0
        assert run(["batch", "make", str(d / "pool.parquet"), "--corpus", str(campaign / "corpus.jsonl"),
                    "--topics", str(campaign / "topics.tsv"), "--assessors", "3", "--per-item", "2", "--seed", "9",
                    "--first-n", "4", "-o", str(d / "batches.csv")]) == 0
        outs.append(d)
    for name in ("pool.parquet", "top1.parquet", "fused.tsv", "frac.parquet", "ids.tsv", "batches.csv"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes(), name


def test_batch_roundtrip_and_stats(campaign, capsys):
    pool = campaign / "pool.parquet"
    assert run(["pool", "depth", str(campaign / "runs"), "-o", str(pool)]) == 0
    batches = campaign / "batches.csv"
    assert run(["batch", "make", str(pool), "--corpus", str(campaign / "corpus.jsonl"), "-o", str(batches),
                "--per-assessor-dir", str(campaign / "per")]) == 0
    assert (campaign / "per" / "A01.csv").exists()
    rows = list(csv.DictReader(batches.open()))
    for r in rows:
        r["grade"] = "2"
    done = campaign / "done.csv"
    _write_csv(done, rows)
    capsys.readouterr()
    assert run(["batch", "import", str(done), "--issued", str(batches), "-o", str(campaign / "j.parquet"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["imported"] == len(rows)
    rows[1]["grade"] = "7"
    bad = campaign / "bad.csv"
    _write_csv(bad, rows)
    assert run(["batch", "import", str(bad), "-o", str(campaign / "j2.parquet")]) == 2
    assert "bad.csv:3: [grade-outside-scale]" in capsys.readouterr().err
    assert not (campaign / "j2.parquet").exists()
    assert run(["pool", "stats", str(pool), "-m", str(campaign / "manifest.csv"), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert {g["group"] for g in stats["groups"]} == {"G1", "G2"}


def test_select_command(campaign, capsys):
    assert run(["pool", "select", "-m", str(campaign / "manifest.csv"), "--per-group", "1", "--json"]) == 0
    sel = json.loads(capsys.readouterr().out)
    assert sel["pooled"] == 2


def _write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_outputs_follow_umask(campaign):
    import os
    import stat

    out = campaign / "pool.tsv"
    assert run(["pool", "depth", str(campaign / "runs"), "-o", str(out)]) == 0
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~mask
