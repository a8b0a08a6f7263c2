"""`make demo`'s campaign part (scripts/campaign-demo.sh) runs end to end, small."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_campaign_demo_script(tmp_path):
    exe = tmp_path / "qrelkit"  # this checkout's command line, whatever is installed
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "from qrelkit.cli import main; main()" "$@"\n')
    exe.chmod(0o755)
    out = tmp_path / "demo"
    env = {**os.environ, "QRELKIT": str(exe), "PASSAGES": "3000", "TOPICS": "4", "PYTHONPATH": str(ROOT)}
    r = subprocess.run(["bash", str(ROOT / "scripts" / "campaign-demo.sh"), str(out)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert json.loads((out / "run.json").read_text())["state"] == "done"
    assert (out / "report.html").is_file() and (out / "report.md").is_file() and (out / "status.csv").is_file()
