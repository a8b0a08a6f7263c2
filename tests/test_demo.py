"""The README's demo runs end to end (as `make demo` does, with the installed console script)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_demo_script(tmp_path):
    exe = Path(sys.executable).parent / "qrelkit"
    if not exe.exists():
        exe = shutil.which("qrelkit")
        if exe is None:
            pytest.skip("qrelkit console script not installed")
    out = tmp_path / "demo"
    r = subprocess.run(["bash", str(ROOT / "scripts" / "demo.sh"), str(out)], cwd=ROOT,
                       env={**os.environ, "QRELKIT": str(exe)}, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for name in ("pool-depth10.parquet", "pool-top1.parquet", "pool-fractional.parquet", "batches.csv",
                 "judgments.parquet", "qrels-round1.txt", "selection.csv"):
        assert (out / name).exists(), name
    pool = pq.read_table(out / "pool-depth10.parquet")
    judgments = pq.read_table(out / "judgments.parquet")
    assert judgments.num_rows == pool.num_rows  # one assessor per item, every item judged
