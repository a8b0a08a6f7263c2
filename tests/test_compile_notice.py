"""The first run's compilation is announced (issue 19): the kernels are ``numba.njit(cache=True)``;
with a cold on-disk cache (a fresh ``NUMBA_CACHE_DIR``, as after an install) the first kernel that
compiles makes the command line say so once on stderr; with the cache warm it says nothing. The
library tells which kernels are cached (``qrelkit.jit.kernel_cache_state``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from qrelkit import jit

ROOT = Path(__file__).resolve().parents[1]
KERNEL = "qrelkit.dedupe.lsh._table_size"

# two calls of a small kernel (its second call is in memory), inside the CLI's notice
SCRIPT = f"""
import json, sys
from qrelkit import jit
from qrelkit.cli import common
from qrelkit.dedupe.lsh import _table_size
before = jit.kernel_cache_state()["{KERNEL}"]
with common.compile_notice():
    _table_size(10)
    _table_size(1000)
print(json.dumps({{"before": before, "after": jit.kernel_cache_state()["{KERNEL}"]}}))
"""


def _run(cache: Path) -> tuple[dict, str]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_cold_cache_announced_once_warm_cache_never(tmp_path):
    cache = tmp_path / "numba-cache"
    state, err = _run(cache)
    assert err.count(jit.NOTICE) == 1 and state == {"before": False, "after": True}
    state, err = _run(cache)
    assert jit.NOTICE not in err and state == {"before": True, "after": True}


def test_kernel_cache_state_names_the_kernels():
    state = jit.kernel_cache_state()
    assert KERNEL in state and "qrelkit.cal.loop._local_columns" in state
    assert not any(k.endswith(("tokenize.mix64", "scoring._row_score")) for k in state)  # inlined only: never cached alone


def test_campaign_run_announces_a_compile(tmp_path, monkeypatch, capsys):
    """``campaign run`` listens while it works: a qrelkit kernel compiling is said once, another
    library's is not."""
    from numba.core import event

    from qrelkit.campaign import Campaign
    from qrelkit.cli import run as cli

    def compiling(module: str) -> None:
        fake = type("D", (), {"py_func": type("F", (), {"__module__": module})})()
        with event.trigger_event("numba:compile", data={"dispatcher": fake}):
            pass

    def fake_run(self, **kw):
        compiling("someone.else")
        assert jit.NOTICE not in capsys.readouterr().err
        compiling("qrelkit.cal.scoring")
        compiling("qrelkit.dedupe.lsh")
        return {"state": "done", "stages_done": [], "topics": {}, "waiting": []}

    monkeypatch.setattr(Campaign, "run", fake_run)
    (tmp_path / "campaign.db").touch()
    assert cli(["campaign", "run", str(tmp_path)]) == 0
    assert capsys.readouterr().err.count(jit.NOTICE) == 1


def test_every_cached_kernel_module_is_listed():
    """KERNEL_MODULES covers every module that declares cache=True kernels."""
    declared = {p.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
                for p in (ROOT / "qrelkit").rglob("*.py") if "cache=True" in p.read_text(encoding="utf-8")}
    assert declared - {"qrelkit.jit"} == set(jit.KERNEL_MODULES)
