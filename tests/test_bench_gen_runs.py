"""The benchmarks' generated runs (benchmarks/gen_runs.py) are shared by bench_pool, bench_eval and
bench_reuse through one function, :func:`gen_runs.ensure`: runs of other parameters or of another
version of the generator are made again (only bench_pool used to check the version, so the others
could time stale runs), and a folder of files the generator did not write is refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import gen_runs  # noqa: E402


def test_ensure_reuses_regenerates_and_refuses(tmp_path, monkeypatch):
    data = tmp_path / "runs"
    first = gen_runs.ensure(data, 3, 4, 5, 0)
    assert sorted(p.name for p in data.iterdir() if not p.name.startswith(".")) == first["files"]
    made = []
    real = gen_runs.generate
    monkeypatch.setattr(gen_runs, "generate", lambda *a, **k: made.append(1) or real(*a, **k))
    assert gen_runs.ensure(data, 3, 4, 5, 0) == first and not made  # same parameters, same version: reused
    meta = data / ".params.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "generator_version": 0}))
    gen_runs.ensure(data, 3, 4, 5, 0)
    assert made == [1]  # another generator's runs: made again
    gen_runs.ensure(data, 2, 4, 5, 0)
    assert made == [1, 1] and len([p for p in data.iterdir() if not p.name.startswith(".")]) == 2  # old files gone
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "my-run.txt").write_text("1 Q0 d 1 1.0 r\n")
    with pytest.raises(SystemExit, match="did not write"):
        gen_runs.ensure(foreign, 3, 4, 5, 0)
    assert (foreign / "my-run.txt").exists()


def test_the_run_benchmarks_share_ensure():
    root = Path(__file__).resolve().parent.parent / "benchmarks"
    for name in ("bench_pool.py", "bench_eval.py", "bench_reuse.py"):
        text = (root / name).read_text()
        assert "gen_runs.ensure(" in text and "generate(data" not in text, name
