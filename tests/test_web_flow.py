"""Issue 14, "Done when": an organizer creates a campaign, adds three assessors, serves it, and
three assessors judge a topic in three sessions from screening through CAL to its stopping
decision; the final qrels come out of the organizer's page, the same as the qrels stage wrote and
as ``campaign status`` / ``campaign report`` tell.

The commands are the README's five ("Judging in the browser in five commands"), run as written by
``bash`` in a folder holding what they name (a simulated ``corpus.jsonl``, ``topics.tsv``,
``runs``, ``manifest.csv`` and a ``protocol.toml``), ``qrelkit`` being this checkout's command
line: ``serve`` as a real server process (on a free port: ``--port`` added), the assessors and
the organizer as three + one HTTP sessions with their login links.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
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

from bench_web_load import Assessor, free_port, read_truth  # noqa: E402

from qrelkit.campaign import open_campaign_store  # noqa: E402
from qrelkit.cli import run as cli  # noqa: E402
from test_web import CONFIG  # noqa: E402

# the web tests' protocol (a 4-passage screening, a depth-3 pool, CAL batches of 4 in one thread),
# every passage judged by all three, stopping needing at least one CAL round
PROTOCOL = (CONFIG.replace("assessors_per_item = 2", "assessors_per_item = 3").replace("max_rounds = 2", "max_rounds = 3")
            .replace("accept_min_judged = 10", "accept_min_judged = 14").replace("reject_min_judged = 12", "reject_min_judged = 30"))
DEADLINE = 300.0  # seconds a phase may take (a bound, never a measurement)


def readme_commands() -> list[str]:
    """The command lines of the README's five-command flow (comments dropped)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    sec = text[text.index("## Judging in the browser in five commands"):]
    block = sec[sec.index("```sh\n") + 6:]
    block = block[:block.index("```")]
    return [re.split(r"\s+#", ln)[0].strip() for ln in block.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def test_the_readme_shows_the_flow_in_five_commands():
    cmds = readme_commands()
    assert len(cmds) == 5
    assert [c.split()[1] if c.startswith("qrelkit") else c.split()[0] for c in cmds] == \
        ["campaign", "for", "campaign", "serve", "campaign"]


@pytest.fixture
def shell(tmp_path) -> tuple[Path, dict]:
    """A folder with the flow's inputs, and an environment whose ``qrelkit`` is this checkout's."""
    work = tmp_path / "work"
    assert cli(["simulate", "campaign", "-o", str(work), "--passages", "1500", "--topics", "1", "--groups", "2",
                "--seed", "1"]) == 0
    (work / "protocol.toml").write_text(PROTOCOL)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "qrelkit").write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "from qrelkit.cli import main; main()" "$@"\n')
    (bin_ / "qrelkit").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return work, env


def _sh(line: str, work: Path, env: dict) -> str:
    r = subprocess.run(["bash", "-c", line], cwd=work, env=env, capture_output=True, text=True, timeout=DEADLINE)
    assert r.returncode == 0, (line, r.stdout, r.stderr)
    return r.stdout


def _tokens(out: str) -> list[str]:
    return re.findall(r"^http://127\.0\.0\.1:8765/login/([A-Za-z0-9_-]{43})$", out, flags=re.M)


def test_organizer_and_three_assessors_judge_a_topic_to_its_decision(shell):
    work, env = shell
    assert all(k in PROTOCOL for k in ("assessors_per_item = 3", "max_rounds = 3", "accept_min_judged = 14"))
    init, add3, add_boss, serve, report = readme_commands()
    _sh(init, work, env)
    tokens = dict(zip(["ann", "bob", "cat"], _tokens(_sh(add3, work, env))))
    boss = _tokens(_sh(add_boss, work, env))
    assert len(tokens) == 3 and len(boss) == 1
    port = free_port()
    log = open(work / "serve.log", "wb")
    srv = subprocess.Popen(["bash", "-c", f"exec {serve} --port {port}"], cwd=work, env=env, stdout=log,
                           stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    org = httpx.Client(base_url=url, timeout=120)
    try:
        _wait_ready(url, srv, org, boss[0])
        truth = read_truth(work)
        people = [Assessor(url, f"{url}/login/{tokens[n]}", n, "1001", truth, timeout=120) for n in tokens]
        threads = [threading.Thread(target=p.run, args=(10_000,), kwargs={"deadline": DEADLINE}) for p in people]
        for t in threads:
            t.start()
        for t in threads:
            t.join(DEADLINE + 30)
        for p in people:
            assert not p.errors, p.errors[:3]
        end = time.monotonic() + DEADLINE  # the qrels stage follows the decision in the same run
        while "qrels" not in org.get("/healthz").json()["stages_done"]:
            assert time.monotonic() < end, "the qrels stage did not come"
            time.sleep(0.1)
        status = org.get("/api/organizer").json()["status"]
        qrels = {k: org.get("/organizer/qrels", params={"kind": k}) for k in ("passages", "expanded", "documents")}
    finally:
        org.close()
        srv.send_signal(signal.SIGTERM)
        srv.wait(60)
        log.close()
    # every assessor judged every item of every batch: screening, the rest of the pool, CAL rounds
    with open_campaign_store(work / "camp") as s:
        b = s.batches.all()
        log_ = s.judgments.log("1001", "all")
    assert {"1001/screen", "1001/pool-rest"} <= set(b["batch_id"]) and (b["kind"] == "cal").any()
    assert (b["status"] == "complete").all()
    per_item = log_.groupby(["docid", "batch_id"])["assessor"].apply(frozenset)
    assert all(v == {"ann", "bob", "cat"} for v in per_item)
    assert sum(len(p.acked) for p in people) == len(log_)
    # the decision, as the organizer's page and `campaign status` say
    assert len(status) == 1 and status[0]["decision"] in ("accept", "reject", "stop") and status[0]["rule"]
    capsys_out = subprocess.run([sys.executable, "-c", "from qrelkit.cli import main; main()", "campaign", "status",
                                 str(work / "camp"), "--json"], env=env, capture_output=True, text=True, timeout=DEADLINE)
    cli_status = json.loads(capsys_out.stdout)
    rows = cli_status["topics"]
    assert [(r["qid"], r["decision"], r["rule"], r["judged"]) for r in rows] == \
        [(r["qid"], r["decision"], r["rule"], r["judged"]) for r in status]
    # the final qrels exported by the organizer's page are the qrels stage's files
    for kind, r in qrels.items():
        assert r.status_code == 200 and f'filename="qrels-{kind}.txt"' in r.headers["content-disposition"]
        assert r.content == (work / "camp" / f"qrels-{kind}.txt").read_bytes()
    # an accepted topic has passage qrels; a rejected or stopped one none
    assert bool(qrels["passages"].text.strip()) == (status[0]["decision"] == "accept")
    # the fifth command: the report, with the topic's decision
    _sh(report, work, env)
    md = (work / "report.md").read_text(encoding="utf-8")
    assert (work / "report.html").is_file() and "1001" in md and status[0]["decision"] in md


def _wait_ready(url: str, srv: subprocess.Popen, org: httpx.Client, token: str) -> None:
    """Up (``/healthz`` ok), the organizer logged in once (``org`` keeps the session: a link
    opens one), and, as the organizer's ``/healthz`` tells, the runner idle with batches out."""
    end = time.monotonic() + DEADLINE
    logged_in = False
    while True:
        assert srv.poll() is None, "qrelkit serve exited"
        assert time.monotonic() < end, "qrelkit serve was not ready"
        try:
            if not logged_in and org.get("/healthz").json()["status"] == "ok":
                assert org.post(f"/login/{token}", follow_redirects=False).status_code == 303
                logged_in = True
            h = org.get("/healthz").json() if logged_in else {}
            if h.get("runner") == "idle" and h.get("batches_out", 0) > 0:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
