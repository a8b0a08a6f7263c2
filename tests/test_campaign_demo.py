"""`make demo` is the campaign (scripts/campaign-demo.sh: campaign init, run --oracle, report) and
runs end to end, small; the README's Quickstart says so."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _recipe(target: str) -> list[str]:
    """The command lines of a Makefile target."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if re.match(rf"^{re.escape(target)}:", ln))
    out = []
    for ln in lines[start + 1:]:
        if not ln.startswith("\t"):
            break
        out.append(ln.strip())
    return out


def test_make_demo_is_the_campaign_and_pipeline_demo_the_single_commands():
    demo = _recipe("demo")
    assert len(demo) == 1 and "scripts/campaign-demo.sh $(DEMO)" in demo[0]
    assert re.search(r"^DEMO\s*\?=\s*demo-out$", (ROOT / "Makefile").read_text(), re.M)
    assert any("scripts/demo.sh" in ln for ln in _recipe("pipeline-demo"))
    script = (ROOT / "scripts" / "campaign-demo.sh").read_text()
    for cmd in ("campaign init", "campaign run", "--oracle", "campaign report"):
        assert cmd in script, cmd
    readme = (ROOT / "README.md").read_text()
    quick = readme[readme.index("## Quickstart"):readme.index("\n## ", readme.index("## Quickstart") + 3)]
    assert "make demo" in quick and "make test" in quick and "demo-out/campaign" in quick


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
    assert (out / "campaign" / "campaign.db").is_file() and (out / "campaign" / "qrels-passages.txt").is_file()
    assert (out / "report.html").is_file() and (out / "report.md").is_file() and (out / "status.csv").is_file()
    # it ends with how to start the web app on the campaign, and an organizer's and an assessor's login link
    tail = r.stdout[r.stdout.rindex("5. the web app"):]
    assert f"serve {out}/campaign" in tail
    links = re.findall(r"http://127\.0\.0\.1:8765/login/\S+", tail)
    assert len(links) == 2
    assert "note:" not in r.stderr  # the organizer is not warned about assignments, and A01 is a protocol assessor
