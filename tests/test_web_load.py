"""The web app under concurrent load (issue 14, "Security and reliability"): simulated assessors
judge through the JSON API of a real ``qrelkit serve`` in its own process, over loopback, while
its runner computes CAL rounds in the background — every judgment acknowledged is stored exactly
once, nothing else is, no answer is a 5xx. The small version of ``benchmarks/bench_web_load.py
load`` (5 assessors x 40 judgments instead of 20 x 200; no timing assertion: the figures are in
docs/benchmarks.md).

Also: a store written by another process is seen by a process that has connections open to it
(a regression: a Python ``open()`` of the store file dropped the process's SQLite locks, and the
other process's last close then deleted the WAL under the open connections — the server saw no
account added after its first login).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_web_load import ServerProcess, build_campaign, check_store, read_truth, run_load  # noqa: E402

from qrelkit.campaign import open_campaign_store  # noqa: E402


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[Path, Path]:
    """5 topics, one per assessor a01..a05: a depth-1 pool (a dozen passages), then CAL batches of 10."""
    return build_campaign(tmp_path_factory.mktemp("webload"), assessors=5, passages=3000, depth=1, batch=10)


def test_concurrent_assessors_every_judgment_stored_exactly_once(small, tmp_path):
    camp, sim = small
    with ServerProcess(camp, tmp_path / "server.log") as srv:
        srv.start(timeout=300)
        res = run_load(camp, read_truth(sim), srv.url, assessors=5, judgments=40, deadline=600)
    assert res["errors_5xx"] == 0 and res["errors"] == 0, res["error_samples"]
    assert res["judged"] == {f"a0{i}": 40 for i in range(1, 6)}
    store = check_store(camp, res["acked"])
    assert store["exactly_once"] and store["stored_rows"] == 200 and store["duplicates"] == 0, store
    with open_campaign_store(camp) as s:
        kinds = s.batches.all(counts=False)["kind"].value_counts().to_dict()
        log = s.judgments.log(None, "all")
    assert kinds.get("cal", 0) >= 5  # CAL batches were computed while the others judged
    assert not log.duplicated(["qid", "docid", "assessor", "batch_id"]).any()


def test_a_process_with_open_connections_sees_another_process_writes(small, tmp_path):
    camp, _ = small
    held = open_campaign_store(camp)  # a connection kept open, as a server's threads keep theirs
    try:
        before = {a["name"] for a in held.accounts.all()}
        open_campaign_store(camp).close()  # a second open in this process (it used to read the file's header)
        code = ("import sys; from qrelkit.campaign.accounts import add_account; "
                "add_account(sys.argv[1], 'late1'); add_account(sys.argv[1], 'late2')")
        subprocess.run([sys.executable, "-c", code, str(camp)], check=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
        assert {a["name"] for a in held.accounts.all()} - before == {"late1", "late2"}
    finally:
        held.close()


def test_the_runner_process_reports_a_failed_run_and_is_started_again(small, tmp_path):
    """ProcessAdvance: the child's error comes back as the library's exception (the server
    records it); a child that died is started again at the next call."""
    import shutil

    from qrelkit.errors import InputError
    from qrelkit.web import ProcessAdvance

    camp = tmp_path / "camp"
    shutil.copytree(small[0], camp)
    adv = ProcessAdvance()
    try:
        assert adv(camp)["state"] == "waiting for judgments"
        first = adv._proc.pid
        adv._proc.kill()
        adv._proc.join(30)
        assert adv(camp)["state"] == "waiting for judgments" and adv._proc.pid != first
        with open_campaign_store(camp) as s:
            corpus = Path(s.state.get("paths")["corpus"])
        saved = corpus.read_bytes()
        try:
            corpus.write_bytes(saved + b'{"pid": "extra", "text": "changed"}\n')
            with pytest.raises(InputError) as err:
                adv(camp)
            assert err.value.rule == "input-changed"
        finally:
            corpus.write_bytes(saved)
    finally:
        adv.close()
    assert adv._proc is None
