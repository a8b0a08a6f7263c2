"""``kill -9`` of the web server mid-load (issue 14, "Security and reliability"): ``qrelkit serve``
runs as a subprocess, three simulated assessors judge through the JSON API as fast as it answers,
the server is killed with SIGKILL while they do (twice), and started again:

* every judgment whose acknowledgment (a 2xx) was received is in the store, exactly once;
* nothing was stored that was not sent (a judgment in flight at the kill may or may not be);
* the client's retry of a judgment whose answer never came is answered 200 (``stored``, or
  ``repeated`` when the kill came after its commit) and leaves it stored once; a retry of an
  acknowledged one is ``repeated``;
* the killed server leaves no runner process behind, and the campaign goes on (CAL batches).

Bounded: every wait has a deadline; the loads stop on their own.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
httpx = pytest.importorskip("httpx")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_web_load import Assessor, ServerProcess, build_campaign, check_store, names_of, read_truth  # noqa: E402

from qrelkit.campaign import open_campaign_store  # noqa: E402
from qrelkit.campaign.accounts import add_account  # noqa: E402

DEADLINE = 180.0  # seconds any phase may take (a bound, not a measurement)


def _runner_children(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (the server's runner process)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "stat").read_text().split(") ", 1)[1].split()[1] == str(pid):
                    out.append(int(p.name))
            except (OSError, IndexError):
                pass
    return out


def _load_then_kill(srv: ServerProcess, people: list[Assessor], acks_before_kill: int) -> None:
    """The assessors judge (one thread each) until ``acks_before_kill`` more judgments are
    acknowledged, then the server is killed with SIGKILL; returns when every thread stopped."""
    start = sum(len(p.acked) for p in people)
    threads = [threading.Thread(target=p.run, args=(10_000,), kwargs={"deadline": DEADLINE}) for p in people]
    for t in threads:
        t.start()
    end = time.monotonic() + DEADLINE
    while sum(len(p.acked) for p in people) - start < acks_before_kill:
        assert time.monotonic() < end, "the load did not reach the kill point"
        time.sleep(0.005)
    children = _runner_children(srv.proc.pid)
    assert children  # the runner process exists: "it outlived its server" below is a real check
    srv.kill()
    for t in threads:
        t.join(DEADLINE)
        assert not t.is_alive()
    gone = time.monotonic() + 30
    while any(Path(f"/proc/{c}").exists() and "zombie" not in Path(f"/proc/{c}/status").read_text().lower()
              for c in children) and time.monotonic() < gone:
        time.sleep(0.05)
    assert not [c for c in children if Path(f"/proc/{c}").exists()
                and "zombie" not in Path(f"/proc/{c}/status").read_text().lower()], "a runner outlived its server"


def test_kill_9_mid_load_keeps_every_acknowledged_judgment(tmp_path):
    camp, sim = build_campaign(tmp_path / "k", assessors=3, passages=2000, depth=1, batch=10)
    truth = read_truth(sim)
    with open_campaign_store(camp) as s:
        qids = s.topics.all()["qid"].astype(str).tolist()
    links = {n: add_account(camp, n)["link"] for n in names_of(3)}
    acked: list[tuple] = []
    unacked: list[tuple[str, dict]] = []
    sessions: dict = {}  # a link opens one session: each assessor logs in once, her session outlives the kills
    for round_, kill_after in enumerate((25, 40)):
        srv = ServerProcess(camp, tmp_path / f"server{round_}.log").start(timeout=DEADLINE)
        people = [Assessor(srv.url, links[n], n, qids[i], truth, cookies=sessions.get(n))
                  for i, n in enumerate(names_of(3))]
        sessions.update({p.name: p.cookies for p in people})
        _load_then_kill(srv, people, kill_after)
        for p in people:
            acked += p.acked
            unacked += [(p.name, b) for b in p.unacked]
            p.close()
        # after a restart, every acknowledged judgment is there, exactly once
        store = check_store(camp, acked)
        assert store["lost"] == 0 and store["duplicates"] == 0, store
        sent = set(acked) | {(qids[names_of(3).index(n)], b["docid"], n, b["batch_id"]) for n, b in unacked}
        assert store["stored_rows"] == len(set(acked)) + store["unacknowledged_stored"]
        with open_campaign_store(camp) as s:
            rows = s.db.conn.execute("SELECT topic, passage, assessor, batch FROM judgments WHERE source = 'web'").fetchall()
        assert {tuple(r) for r in rows} <= sent  # nothing stored that was not sent
    # the retries, on a server started again
    srv = ServerProcess(camp, tmp_path / "server-last.log").start(timeout=DEADLINE)
    try:
        people = {n: Assessor(srv.url, links[n], n, qids[i], truth, cookies=sessions[n])
                  for i, n in enumerate(names_of(3))}
        for name, body in unacked:
            p = people[name]
            r = p.c.post(f"/api/topics/{p.qid}/judgments", json=body)
            assert r.status_code == 200 and r.json()["status"] in ("stored", "repeated"), r.text
            item = (p.qid, body["docid"], name, body["batch_id"])
            if item not in acked:  # (sent again and acknowledged before the next kill, it is there already)
                acked.append(item)
        q, d, name, b = acked[0]
        r = people[name].c.post(f"/api/topics/{q}/judgments", json={"batch_id": b, "docid": d, "grade": truth.get((q, d), 0)})
        assert r.status_code == 200 and r.json()["status"] == "repeated", r.text
        # the campaign goes on: the assessors judge on, CAL batches come
        for p in people.values():
            p.run(len(p.acked) + 15, deadline=DEADLINE)
            assert not p.errors, p.errors[:3]
            acked += p.acked
        for p in people.values():
            p.close()
    finally:
        srv.stop()
    store = check_store(camp, acked)
    assert store["exactly_once"], store
    with open_campaign_store(camp) as s:
        assert (s.batches.all(counts=False)["kind"] == "cal").any()
