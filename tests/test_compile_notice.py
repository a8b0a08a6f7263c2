"""The first run's compilation is announced (issues 19, 24): the kernels are ``numba.njit(cache=True)``;
with a cold on-disk cache (a fresh ``NUMBA_CACHE_DIR``, as after an install) the first kernel that
compiles makes the command line say so once on stderr, whichever command runs it; with the cache
warm it says nothing. numba is not imported for it (its ``numba_extensions`` entry point installs
the listener). The library tells which kernels are cached (``qrelkit.jit.kernel_cache_state``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from qrelkit import jit

ROOT = Path(__file__).resolve().parents[1]
KERNEL = "qrelkit.dedupe.lsh._table_size"

# two calls of a small kernel (its second call is in memory), inside a notice opened before numba
# is imported: numba itself installs the listener (qrelkit's numba_extensions entry point)
SCRIPT = f"""
import json, sys
from qrelkit import jit
with jit.compile_notice(lambda: print(jit.NOTICE, file=sys.stderr)):
    assert "numba" not in sys.modules
    from qrelkit.dedupe.lsh import _table_size
    before = jit.kernel_cache_state()["{KERNEL}"]
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


def compiling(module: str) -> None:
    """What numba tells its listeners when a kernel of ``module`` starts compiling."""
    from numba.core import event

    fake = type("D", (), {"py_func": type("F", (), {"__module__": module})})()
    with event.trigger_event("numba:compile", data={"dispatcher": fake}):
        pass


def test_campaign_run_announces_a_compile(tmp_path, monkeypatch, capsys):
    """``campaign run`` listens while it works: a qrelkit kernel compiling is said once, another
    library's is not."""
    from qrelkit.campaign import Campaign
    from qrelkit.cli import run as cli

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


def test_every_command_announces_a_compile(tmp_path, monkeypatch, capsys):
    """Not only ``campaign run``: any command whose work compiles says so, once (issue 24: the
    command line listens, whichever command it runs)."""
    import qrelkit.cal.features
    import qrelkit.dedupe.cluster
    from qrelkit.cli import run as cli
    from qrelkit.errors import InputError

    def fake(*a, **kw):
        compiling("qrelkit.dedupe.minhash")
        compiling("qrelkit.cal.features")
        raise InputError("bad-option", "stopped after compiling")

    monkeypatch.setattr(qrelkit.dedupe.cluster, "cluster_corpus", fake)
    monkeypatch.setattr(qrelkit.cal.features, "build_features", fake)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"pid": "p1", "text": "a b c"}\n')
    for argv in (["dedupe", "cluster", str(corpus), "-o", str(tmp_path / "c.parquet")],
                 ["cal", "features", str(corpus), "-o", str(tmp_path / "features")]):
        capsys.readouterr()
        assert cli(argv) == 2
        assert capsys.readouterr().err.count(jit.NOTICE) == 1, argv


def test_a_quiet_block_inside_keeps_the_notice_quiet(capsys):
    import sys

    jit.numba_extension_init()  # what numba does before it first compiles
    with jit.compile_notice(lambda: print(jit.NOTICE, file=sys.stderr)):
        with jit.compile_notice(None):
            compiling("qrelkit.dedupe.lsh")
        assert jit.NOTICE not in capsys.readouterr().err
        compiling("qrelkit.dedupe.lsh")
        compiling("qrelkit.cal.loop")
    assert capsys.readouterr().err.count(jit.NOTICE) == 1


def test_every_cached_kernel_module_is_listed():
    """KERNEL_MODULES covers every module that declares cache=True kernels."""
    declared = {p.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
                for p in (ROOT / "qrelkit").rglob("*.py") if "cache=True" in p.read_text(encoding="utf-8")}
    assert declared - {"qrelkit.jit"} == set(jit.KERNEL_MODULES)
