"""Every command block of README.md runs as written (issue 19).

The ```sh blocks are read from README.md and each line is run in a folder that holds the
generated data under the names the README uses: the README's own "Try it on generated data"
block makes it (``simulate campaign``, the hidden qrels renamed), next to a copy of this
repository's ``configs/``. Nothing is substituted but the executable: a plain ``qrelkit ...``
line runs in this process (``qrelkit.cli.run``, the console script's body), any other line
(``mv``, a shell loop) runs in ``bash`` with ``qrelkit`` on PATH being this checkout's. The
five-command web flow is run by tests/test_web_flow.py (its server and browser sessions), not
here; the Quickstart and Development blocks call ``make``, not qrelkit.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qrelkit.cli import run as cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DATA = "Try it on generated data"
WEB = "Judging in the browser in five commands"  # tests/test_web_flow.py runs it
NOT_QRELKIT = {"Quickstart", "Development"}  # `make demo`, `make test`, ...: not qrelkit blocks


def blocks(lang: str = "sh") -> dict[str, list[str]]:
    """Section heading -> the lines of its ```lang block (one block per section)."""
    out: dict[str, list[str]] = {}
    heading = None
    lines = README.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("## "):
            heading = lines[i][3:].strip()
        elif lines[i].strip() == f"```{lang}":
            j = lines.index("```", i + 1)
            assert heading not in out, f"two {lang} blocks under {heading!r}"
            out[heading] = lines[i + 1:j]
            i = j
        i += 1
    return out


def commands(lines: list[str]) -> list[str]:
    """The block's command lines, trailing comments dropped."""
    return [re.split(r"\s+#\s", ln)[0].strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def _bash_env(tmp: Path) -> dict:
    bin_ = tmp / "bin"
    bin_.mkdir(exist_ok=True)
    shim = bin_ / "qrelkit"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "from qrelkit.cli import main; main()" "$@"\n')
    shim.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def run_line(line: str, folder: Path, env: dict) -> None:
    """Run one README line in ``folder``: a plain qrelkit command in this process, else in bash."""
    argv = shlex.split(line)
    plain = argv[0] == "qrelkit" and not set(argv) & {"&&", "||", ";", "|", ">", "<"}
    if not plain:
        r = subprocess.run(["bash", "-c", line], cwd=folder, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-2000:])
        return
    here = os.getcwd()
    os.chdir(folder)
    try:
        rc = cli(argv[1:])
    finally:
        os.chdir(here)
    assert rc == 0, line


def run_block(heading: str, folder: Path, env: dict) -> None:
    for line in commands(blocks()[heading]):
        run_line(line, folder, env)


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, dict]:
    """The folder the README's blocks run in, made by its "Try it on generated data" block."""
    tmp = tmp_path_factory.mktemp("readme")
    folder = tmp / "demo"
    folder.mkdir()
    shutil.copytree(ROOT / "configs", folder / "configs")
    env = _bash_env(tmp)
    run_block(DATA, folder, env)
    return folder, env


def _copy(demo, tmp_path: Path) -> Path:
    return Path(shutil.copytree(demo[0], tmp_path / "work", symlinks=True))


def test_every_sh_block_is_run_somewhere():
    sh = blocks()
    qrelkit_blocks = {h for h, lines in sh.items() if any(c.split()[0] in ("qrelkit", "for", "mv") for c in commands(lines))}
    assert set(sh) - qrelkit_blocks == NOT_QRELKIT
    assert qrelkit_blocks == {DATA, "A whole campaign in four commands", WEB, "Use"}
    assert f"## {WEB}" in (ROOT / "tests" / "test_web_flow.py").read_text(encoding="utf-8")


def test_generated_data_has_the_names_the_readme_uses(demo):
    folder, _ = demo
    for name in ("corpus.jsonl", "topics.tsv", "runs", "manifest.csv", "hidden-qrels.txt", "configs/trec-dl-2022.toml"):
        assert (folder / name).exists(), name


def test_use_block_runs_as_written(demo, tmp_path):
    folder = _copy(demo, tmp_path)
    run_block("Use", folder, demo[1])
    qrels = (folder / "qrels.txt").read_text().splitlines()
    topics = {ln.split("\t")[0] for ln in (folder / "topics.tsv").read_text().splitlines() if ln.strip()}
    assert qrels and {ln.split()[0] for ln in qrels} == topics  # every topic has its 3 assessors: included
    for out in ("qrels-expanded.txt", "doc-qrels.txt", "per-query.parquet", "tests.csv", "reuse-report",
                "pairs.parquet"):
        assert (folder / out).exists(), out
    # the Python example below the block, on the same files
    (code,) = ["\n".join(blocks("python")["Use"])]
    here = os.getcwd()
    os.chdir(folder)
    try:
        exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(here)


def test_campaign_block_runs_as_written(demo, tmp_path):
    folder = _copy(demo, tmp_path)
    run_block("A whole campaign in four commands", folder, demo[1])
    assert (folder / "report.html").stat().st_size > 0
    assert (folder / "camp" / "qrels-passages.txt").exists()
