"""``qrelkit warmup`` (issue 24): every kernel compiled into numba's on-disk cache ahead of the first
run, so that a fresh install's first campaign compiles nothing (and says nothing about it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pytest

from qrelkit import jit

ROOT = Path(__file__).resolve().parents[1]
#: the kernels a warm-up leaves: dedupe cluster --dask's (compiled on the workers)
LEFT = {"qrelkit.dedupe.distributed._bucket_keys", "qrelkit.dedupe.distributed._first_pairs"}


def _doubled(x, out):
    for i in numba.prange(len(x)):
        out[i] = 2 * x[i]


def test_each_twin_gets_the_other_twins_signatures():
    parallel, serial = jit.twins(_doubled)
    x = np.arange(3.0)
    serial(x, np.empty(3))
    assert parallel.signatures == []
    assert jit.compile_twins([(parallel, serial)]) == 1
    assert parallel.signatures == serial.signatures
    assert jit.compile_twins([(parallel, serial)]) == 0


def test_the_command_reports_what_is_cached(monkeypatch, capsys):
    import qrelkit.campaign.warmup
    from qrelkit.cli import run

    def fake(progress=None):
        progress("a step")
        with jit.compile_notice(lambda: print("should not be said", file=sys.stderr)):
            pass
        return {"seconds": 1.0, "kernels": 3, "cached": 2, "not_cached": ["m.k"]}

    monkeypatch.setattr(qrelkit.campaign.warmup, "warm_up", fake)
    assert run(["warmup", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["not_cached"] == ["m.k"] and "a step" in out.err
    assert run(["warmup"]) == 0
    assert "2 of 3 kernels cached" in capsys.readouterr().err


def _qrelkit(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-c", "from qrelkit.cli import main; main()", *args], env=env, cwd=cwd,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr
    return r


@pytest.mark.slow
def test_after_warmup_a_campaign_compiles_nothing(tmp_path):
    """A cold cache (a fresh NUMBA_CACHE_DIR, as a fresh install's): ``qrelkit warmup`` caches every
    kernel but the ones it names; then another campaign than its own runs without compiling."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "PYTHONPATH": str(ROOT)}
    warm = _qrelkit(["warmup", "--json"], env, tmp_path)
    summary = json.loads(warm.stdout)
    assert "compiling" in warm.stderr and jit.NOTICE not in warm.stderr  # said once, by warmup itself
    assert set(summary["not_cached"]) == LEFT and summary["cached"] == summary["kernels"] - len(LEFT)
    state = subprocess.run([sys.executable, "-c", "import json; from qrelkit import jit; "
                            "print(json.dumps(jit.kernel_cache_state()))"], env=env, capture_output=True, text=True)
    assert {k for k, cached in json.loads(state.stdout).items() if not cached} == LEFT
    _qrelkit(["simulate", "campaign", "-o", "sim", "--passages", "3000", "--topics", "4", "--groups", "4",
              "--seed", "2"], env, tmp_path)
    _qrelkit(["campaign", "init", "camp", "--corpus", "sim/corpus.jsonl", "-t", "sim/topics.tsv", "--runs",
              "sim/runs", "-m", "sim/manifest.csv"], env, tmp_path)
    r = _qrelkit(["campaign", "run", "camp", "--oracle", "sim/qrels.txt", "--seed", "3"], env, tmp_path)
    assert jit.NOTICE not in r.stderr


def test_installing_warms_up():
    """``make install`` (and so ``make demo`` and ``make test``) ends with ``qrelkit warmup``."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = lines.index("$(VENV)/.installed: $(BIN)/python pyproject.toml")
    recipe = []
    for ln in lines[start + 1:]:
        if not ln.startswith("\t"):
            break
        recipe.append(ln.strip())
    assert any("pip install" in ln for ln in recipe)
    assert recipe.index("$(BIN)/qrelkit warmup") > next(i for i, ln in enumerate(recipe) if "pip install" in ln)
