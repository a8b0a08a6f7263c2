"""Benchmark: the assessor web app under load, and the wait for the next CAL batch at 1M passages.

    python benchmarks/bench_web_load.py                     # (a) and (b), two sizes each: one result
    python benchmarks/bench_web_load.py load  [--assessors 10 20 --judgments 200 --think 0.5 0]
    python benchmarks/bench_web_load.py large [--passages 250000 1000000]

(a) **load**: ``--assessors`` simulated assessors (default 20) judge ``--judgments`` passages
each (default 200: 4,000 judgments) through the JSON API of a real uvicorn server — ``qrelkit
serve`` started as a separate process, so that the clients and the server do not share a GIL —
over loopback, while the server's background runner computes the CAL rounds. The campaign
(:func:`build_campaign`): a simulated collection of ``--passages`` passages (default 20,000) with
one topic per assessor; the protocol's ``[campaign] assessors`` are the simulated assessors'
names, one assessor per item, topic *i* owned by assessor *i* (``owner_judges_cal``), no
screening, the depth-10 pool of the pooled runs as each topic's first batch, then CAL batches of
25 in one thread (``all``) with the stopping thresholds out of reach: each assessor judges the pool
of their topic, then CAL batch after CAL batch, computed in the background as soon as the
previous one is judged (an assessor who finishes a batch before the next one is there polls
``/api/topics/QID/state``, as a waiting page does; those waits are counted).

Each simulated assessor is one thread with its own HTTP connection: ``GET /api/topics/QID`` (the
next passage and its text), ``--think`` seconds (default 0.5; 0: a stress test, every assessor
as fast as the server answers; people take seconds per passage; several values: a task each), then ``POST
/api/topics/QID/judgments`` with the hidden qrels' grade. Printed: the latency of the judgment
POSTs (p50, p95, p99, max, ms) and of the next-item GETs, throughput (judgments/s), errors (non-2xx
answers, 5xx apart), the waits for a next batch, and **the store check**: every acknowledged
judgment is in the store exactly once, nothing else was stored (source ``web``), no duplicate
(topic, passage, assessor, batch) row. The machine's load average is recorded before and after.

(b) **large**: a campaign of 1M passages (``bench_campaign.py large``'s generator and seed,
``[campaign] skip = ["screening"]``, stopping out of reach), judged by the simulated oracle up to
its first CAL batches (3 threads per topic, 50 topics: 150 batches out), then served by ``qrelkit
serve`` (one long-lived runner, features loaded once at its start). For ``--rounds`` topics one
after the other, the topic's owner judges its three CAL batches through the API; measured: the
time from sending the POST that completes the topic's round to the first ``GET /api/topics/QID``
that shows a passage of the next batch (``/api/topics/QID/state`` polled every 20 ms, then the
page's API; target <= 1 s), the next-item GET latency meanwhile, and the runner's own seconds
for the runs in between (``/healthz``, as an organizer sees it).

A login link opens one session: each simulated assessor logs in once and keeps its cookie
(across server restarts too: the sessions are in the campaign store); the server's details come
from an organizer's session (:meth:`ServerProcess.health`).

Sizes: (a) at ``--assessors`` (default 10 and 20) [unit: one request: a call is one judgment POST
or next-passage GET, its per-unit time its latency; the first call is the run's first request,
the server just started; the growth says how the latency grows with the assessors]; (b) at
``--passages`` (default 250,000 and 1,000,000) [passage: the wait is mostly scoring every
passage; a call is one topic's wait, the first the first topic's after the server's start].
CPU: (a) the server process's over the run per request (the runner's and the clients' apart, in
``run_cpu_s``); (b) the server's processes and the polling client's during each wait. The peak
RSS of the server's processes (``VmHWM``), the cores other processes used meanwhile.

Writes one result, ``bench-out/web-load.json`` (``--json-out``; ``benchmarks/_results.py``'s shape,
for ``scripts/gen_benchmarks_doc.py``): tasks "judgment POST under load", "next-passage GET under
load", "the next CAL batch"; checks (the store check and no 5xx, per size; every timed topic got
its next batch); targets: POST p95 <= 50 ms with 20 assessors at 0.5 s of think time, the next
batch's median <= 1 s at 1M. Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _machine import busy_cpu_s, hwm_mb, others_cores  # noqa: E402
from _results import benchmark_result, call, size_result, target, tool_result, write_result  # noqa: E402

import httpx  # noqa: E402

from qrelkit.campaign import Campaign, open_campaign_store  # noqa: E402
from qrelkit.campaign.accounts import add_account, revoke_account  # noqa: E402
from qrelkit.simulate.campaign import simulate_campaign  # noqa: E402

LOAD_CONFIG = """
[pool]
depth = {depth}
[batch]
assessors_per_item = 1
[campaign]
assessors = [{names}]
owner_judges_cal = true
skip = ["screening", "dedupe", "fractional", "evaluate", "reuse", "report"]
max_rounds = 40
[cal]
batch_size = {batch}
threads = ["all"]
official_thread = "all"
[stopping]
accept_min_judged = 1000000
reject_min_judged = 1000000
"""


def load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def percentiles(xs: list[float]) -> dict:
    """p50, p95, p99, max and mean of ``xs`` (seconds) in milliseconds."""
    if not xs:
        return {"n": 0}
    s = sorted(xs)

    def q(p: float) -> float:
        return round(1000 * s[min(len(s) - 1, max(0, int(round(p * len(s) + 0.5)) - 1))], 2)
    return {"n": len(s), "p50": q(0.50), "p95": q(0.95), "p99": q(0.99), "max": round(1000 * s[-1], 2),
            "mean": round(1000 * statistics.fmean(s), 2)}


# -- the campaign ------------------------------------------------------------------------------------


def names_of(n: int) -> list[str]:
    return [f"a{i:02d}" for i in range(1, n + 1)]


def build_campaign(out: Path, *, assessors: int, passages: int, seed: int = 3, depth: int = 10,
                   batch: int = 25) -> tuple[Path, Path]:
    """A simulated collection (one topic per assessor) and an initialized campaign over it
    (see the module documentation); returns (campaign folder, simulation folder)."""
    sim = out / "sim"
    if not (sim / "summary.json").exists():
        simulate_campaign(sim, n_passages=passages, n_topics=assessors, n_groups=6, seed=seed)
    camp = out / "camp"
    cfg = out / "load.toml"
    cfg.write_text(LOAD_CONFIG.format(depth=depth, batch=batch, names=", ".join(f'"{a}"' for a in names_of(assessors))))
    Campaign.init(camp, config=cfg, corpus=sim / "corpus.jsonl", topics=sim / "topics.tsv", runs=sim / "runs",
                  manifest=sim / "manifest.csv")
    return camp, sim


def read_truth(sim: Path) -> dict[tuple[str, str], int]:
    rows = [ln.split() for ln in (sim / "qrels.txt").read_text().splitlines() if ln.strip()]
    return {(q, d): int(g) for q, _, d, g in rows}


# -- the server, as a separate process ---------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: the organizer account whose session reads the server's details (``/healthz``)
ORGANIZER = "bench-organizer"


class ServerProcess:
    """``qrelkit serve DIR`` in a child process on a free loopback port (its log in ``log``).
    :meth:`start` waits for ``/healthz`` (and, with ``ready``, for the runner to be idle with
    batches out, as :meth:`health` tells); :meth:`kill` sends SIGKILL, :meth:`stop` SIGTERM
    (uvicorn's graceful stop)."""

    def __init__(self, camp: Path, log: Path, port: int | None = None) -> None:
        self.camp, self.log_path = Path(camp), Path(log)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.org: httpx.Client | None = None

    def health(self) -> dict:
        """``/healthz``'s details, read with an organizer's session (the account
        :data:`ORGANIZER`: added at the first need, given a new link at the next server's)."""
        if self.org is None:
            with open_campaign_store(self.camp) as s:
                known = s.accounts.get(ORGANIZER)
            renew = known is not None and known["revoked"] is None
            link = add_account(self.camp, ORGANIZER, renew=renew, organizer=not renew)["link"]
            org = httpx.Client(base_url=self.url, timeout=60)
            r = org.post("/login/" + link.rsplit("/login/", 1)[1], follow_redirects=False)
            if r.status_code != 303:
                raise RuntimeError(f"the organizer's login failed: {r.status_code} {r.text}")
            self.org = org
        return self.org.get("/healthz").json()

    def start(self, *, ready: bool = True, timeout: float = 600.0) -> "ServerProcess":
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        code = "import sys; from qrelkit.cli import run; sys.exit(run(sys.argv[1:]))"
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-c", code, "serve", str(self.camp), "--port", str(self.port)],
                                     stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))
        end = time.monotonic() + timeout
        with httpx.Client(base_url=self.url, timeout=10) as c:
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"the server exited ({self.proc.returncode}); see {self.log_path}")
                if time.monotonic() > end:
                    self.kill()
                    raise RuntimeError(f"the server was not ready in {timeout} s; see {self.log_path}")
                try:
                    if c.get("/healthz").json()["status"] == "ok":
                        h = self.health() if ready else {}
                        if not ready or (h["runner"] == "idle" and h["batches_out"] > 0):
                            self.health_at_start = h
                            return self
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
        self._close_log()

    def stop(self, timeout: float = 60.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_log()

    def _close_log(self) -> None:
        if self.org is not None:
            self.org.close()
            self.org = None
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


# -- a simulated assessor ----------------------------------------------------------------------------


class Assessor:
    """One simulated assessor: an HTTP client logged in with the account's link (once: a link
    opens one session; ``cookies``, an earlier client's :attr:`cookies`, go on with its session
    instead), judging the topic ``qid`` with the hidden qrels' grades through the JSON API."""

    def __init__(self, url: str, link: str, name: str, qid: str, truth: dict, *, timeout: float = 60.0,
                 cookies: httpx.Cookies | None = None) -> None:
        self.name, self.qid, self.truth = name, qid, truth
        self.c = httpx.Client(base_url=url, timeout=timeout, cookies=cookies)
        if cookies is None:
            r = self.c.post("/login/" + link.rsplit("/login/", 1)[1], follow_redirects=False)
            if r.status_code != 303:
                raise RuntimeError(f"login of {name} failed: {r.status_code} {r.text}")
        r = self.c.get("/api/session")
        if r.status_code != 200:
            raise RuntimeError(f"no session for {name}: {r.status_code} {r.text}")
        self.c.headers["X-CSRF-Token"] = r.json()["csrf"]
        self.cookies = self.c.cookies
        self.acked: list[tuple[str, str, str, str]] = []  # (qid, docid, assessor, batch_id) acknowledged
        self.unacked: list[dict] = []  # judgments sent whose answer never came (the server died)
        self.post_s: list[float] = []
        self.post_at: list[float] = []  # perf_counter when each answered POST was sent
        self.get_s: list[float] = []
        self.get_at: list[float] = []
        self.waits: list[tuple[str, float]] = []  # (state when the wait began: computing | waiting, seconds)
        self.errors: list[tuple[int, str]] = []

    def next_item(self) -> dict:
        t0 = time.perf_counter()
        r = self.c.get(f"/api/topics/{self.qid}")
        self.get_s.append(time.perf_counter() - t0)
        self.get_at.append(t0)
        if r.status_code != 200:
            self.errors.append((r.status_code, r.text[:200]))
            return {}
        return r.json()

    def judge(self, item: dict) -> httpx.Response:
        body = {"batch_id": item["batch_id"], "docid": item["docid"],
                "grade": self.truth.get((self.qid, item["docid"]), 0)}
        t0 = time.perf_counter()
        try:
            r = self.c.post(f"/api/topics/{self.qid}/judgments", json=body)
        except httpx.TransportError:
            self.unacked.append(body)
            raise
        self.post_s.append(time.perf_counter() - t0)
        self.post_at.append(t0)
        if r.status_code == 200:
            self.acked.append((self.qid, item["docid"], self.name, item["batch_id"]))
        else:
            self.errors.append((r.status_code, r.text[:200]))
        return r

    def run(self, n: int, *, think: float = 0.0, seed: int = 0, deadline: float = 3600.0,
            alone: Callable[[], bool] = lambda: False) -> None:
        """Judge ``n`` passages (waiting for the next batch when there is none yet), or stop at
        ``deadline`` seconds (a bound: the run never hangs), when the server is gone, or when
        waiting while ``alone()`` (every other assessor has stopped: nobody will finish the
        batches this one waits for)."""
        self.alone = alone
        try:
            self._run(n, think, seed, deadline)
        except httpx.TransportError:
            self.gone = True

    def _run(self, n: int, think: float, seed: int, deadline: float) -> None:
        rng = random.Random(seed)
        end = time.monotonic() + deadline
        while len(self.acked) < n and time.monotonic() < end:
            v = self.next_item()
            if not v:
                time.sleep(0.1)
                continue
            if v.get("item") is None:
                if v.get("state") == "decided":
                    break
                state, t0 = str(v.get("state")), time.perf_counter()
                seen, now = {state}, state
                while time.monotonic() < end:
                    if now == "waiting" and self.alone():  # for others, and there are none
                        return
                    time.sleep(0.02)
                    s = self.c.get(f"/api/topics/{self.qid}/state")
                    if s.status_code == 200:
                        now = str(s.json()["state"])
                        seen.add(now)
                        if now in ("judging", "decided"):
                            break
                # waiting for others (the pool stages end when every topic's pool is judged) or
                # only for the runner's computation
                self.waits.append(("waiting" if "waiting" in seen else "computing", time.perf_counter() - t0))
                continue
            if think:
                time.sleep(rng.expovariate(1.0 / think))
            self.judge(v["item"])

    def close(self) -> None:
        self.c.close()


def check_store(camp: Path, acked: list[tuple[str, str, str, str]], source: str = "web") -> dict:
    """Every acknowledged judgment stored exactly once, nothing else of ``source`` stored."""
    with open_campaign_store(camp) as s:
        rows = s.db.conn.execute("SELECT topic, passage, assessor, batch FROM judgments WHERE source = ?",
                                 (source,)).fetchall()
    stored = [tuple(map(str, r)) for r in rows]
    ack = set(acked)
    counts: dict[tuple, int] = {}
    for r in stored:
        counts[r] = counts.get(r, 0) + 1
    return {"acknowledged": len(acked), "acknowledged_distinct": len(ack), "stored_rows": len(stored),
            "duplicates": sum(c - 1 for c in counts.values() if c > 1),
            "lost": len(ack - set(counts)), "unacknowledged_stored": len(set(counts) - ack),
            "exactly_once": len(stored) == len(ack) == len(acked) and set(counts) == ack}


# -- (a) the load ------------------------------------------------------------------------------------


def run_load(camp: Path, truth: dict, url: str, *, assessors: int, judgments: int, think: float = 0.0,
             deadline: float = 1800.0) -> dict:
    """The simulated assessors (one thread each) against the server at ``url``; returns their
    figures (see the module documentation) without the store check."""
    names = names_of(assessors)
    with open_campaign_store(camp) as s:
        qids = s.topics.all()["qid"].astype(str).tolist()
    people = [Assessor(url, add_account(camp, n)["link"], n, qids[i], truth) for i, n in enumerate(names)]
    start = threading.Barrier(len(people))
    running = [len(people)]
    lock = threading.Lock()

    def one(p: Assessor, i: int) -> None:
        start.wait()
        try:
            p.run(judgments, think=think, seed=i, deadline=deadline, alone=lambda: running[0] <= 1)
        finally:
            with lock:
                running[0] -= 1

    threads = [threading.Thread(target=one, args=(p, i)) for i, p in enumerate(people)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    for p in people:
        p.close()
    posts = [x for p in people for x in p.post_s]
    errors = [e for p in people for e in p.errors]
    waits = [x for p in people for x in p.waits]
    computing = [x for st, x in waits if st == "computing"]
    others = [x for st, x in waits if st != "computing"]
    return {"assessors": assessors, "judgments_each": judgments, "think_s": think, "wall_s": round(wall, 2),
            "judged": {p.name: len(p.acked) for p in people}, "post_ms": percentiles(posts),
            "get_next_ms": percentiles([x for p in people for x in p.get_s]),
            "throughput_per_s": round(len(posts) / wall, 1) if wall else None,
            "errors": len(errors), "errors_5xx": sum(1 for c, _ in errors if c >= 500), "error_samples": errors[:5],
            "waits_computing": _wait_figures(computing), "waits_for_others": _wait_figures(others),
            "acked": [a for p in people for a in p.acked],
            "posts_raw": sorted(x for p in people for x in zip(p.post_at, p.post_s)),
            "gets_raw": sorted(x for p in people for x in zip(p.get_at, p.get_s))}


def bench_load(out: Path, *, assessors: int, judgments: int, passages: int, think: float) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    camp = out / "camp"
    if camp.exists():
        import shutil  # lazy: only a re-run clears the old campaign

        shutil.rmtree(camp)
    camp, sim = build_campaign(out, assessors=assessors, passages=passages)
    truth = read_truth(sim)
    res: dict = {"benchmark": "web-load", "passages": passages, "load_before": load_avg()}
    with ServerProcess(camp, out / "server.log") as srv:
        srv.start()
        res["load_at_start"] = load_avg()
        with Usage(srv.proc.pid) as use:
            r = run_load(camp, truth, srv.url, assessors=assessors, judgments=judgments, think=think)
        res["load_after"] = load_avg()
        res["health_after"] = srv.health()
    res.update(use.figures())
    acked = r.pop("acked")
    res.update(r)
    res["store"] = check_store(camp, acked)
    with open_campaign_store(camp) as s:
        b = s.batches.all(counts=False)
        res["batches_issued"] = {k: int(v) for k, v in b["kind"].value_counts().items()}
    res["target"] = {"post_p95_ms_max": 50}
    return res


class Usage:
    """The CPU seconds of this process and of a server's process tree (its runner included) over a
    ``with`` block, the cores other processes used meanwhile, and the tree's peak RSS."""

    def __init__(self, pid: int) -> None:
        import psutil  # lazy: the [bench] extra, only where a server is measured

        self.root = psutil.Process(pid)

    def tree_cpu(self, root_only: bool = False) -> float:
        total = 0.0
        for p in [self.root] + ([] if root_only else self.root.children(recursive=True)):
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except Exception:  # noqa: BLE001 - ended meanwhile
                pass
        return total

    def __enter__(self) -> "Usage":
        self.t0, self.c0, self.s0, self.b0 = time.perf_counter(), time.process_time(), self.tree_cpu(), busy_cpu_s()
        self.r0 = self.tree_cpu(root_only=True)
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.t0
        self.client_cpu = time.process_time() - self.c0
        self.server_cpu = self.tree_cpu() - self.s0
        self.root_cpu = self.tree_cpu(root_only=True) - self.r0
        self.others = others_cores(self.b0, busy_cpu_s(), self.client_cpu + self.server_cpu, self.wall)
        self.peak = sum(hwm_mb(p.pid) or 0.0 for p in [self.root, *self.root.children(recursive=True)])

    def figures(self) -> dict:
        return {"run_cpu_s": {"server": round(self.server_cpu, 2), "server_process": round(self.root_cpu, 2),
                              "client": round(self.client_cpu, 2)},
                "background_cores": self.others, "server_peak_rss_mb": round(self.peak, 1)}


def _wait_figures(xs: list[float]) -> dict:
    """Count, median and max seconds of waits for a next batch."""
    return {"n": len(xs), **({"median_s": round(statistics.median(xs), 3), "max_s": round(max(xs), 3)} if xs else {})}


# -- (b) 1M passages: the wait for the next batch ------------------------------------------------------


def bench_large(out: Path, *, passages: int, rounds: int) -> dict:
    """(b) of the module documentation: the wait for the next CAL batch at ``passages`` passages."""
    import bench_campaign  # lazy: its generator and protocol settings, only for this benchmark

    sim = bench_campaign._simulated(out / f"large-sim-{passages}", n_passages=passages, n_topics=50, n_groups=49,
                                    runs_per_group=(2, 2), seed=0)
    camp = out / ("large-camp" if passages == 1_000_000 else f"large-camp-{passages}")
    cfg = out / "large-web.toml"
    # the 'forced' protocol of bench_campaign.py (no screening, stopping out of reach), rounds without end
    cfg.write_text(bench_campaign._large_config(bench_campaign.CFG.read_text()).replace("max_rounds = 3", "max_rounds = 40"))
    res: dict = {"benchmark": "web-large", "passages": passages, "load_before": load_avg()}
    if not (camp / "campaign.db").exists():
        t0 = time.perf_counter()
        Campaign.init(camp, config=cfg, corpus=sim / "corpus.jsonl", topics=sim / "topics.tsv", runs=sim / "runs",
                      manifest=sim / "manifest.csv")
        Campaign(camp).run(oracle=sim / "qrels.txt", error_rate=0.05, seed=7, until="fractional")
        res["setup_s"] = round(time.perf_counter() - t0, 1)
    truth = read_truth(sim)
    with ServerProcess(camp, out / "large-server.log") as srv:
        t0 = time.perf_counter()
        srv.start(timeout=1800)  # features loaded, text index built, first CAL round of every topic issued
        res["server_ready_s"] = round(time.perf_counter() - t0, 1)
        res["load_at_start"] = load_avg()
        with open_campaign_store(camp) as s:
            qids = s.topics.all()["qid"].astype(str).tolist()
            names = {a["name"] for a in s.accounts.all() if a["revoked"] is None}
            owners = {q: _owner(s, q) for q in qids}
        for n in names & set(owners.values()):  # a run before: a new link (only a token's hash is kept)
            revoke_account(camp, n)
        links = {n: add_account(camp, n)["link"] for n in sorted(set(owners.values()) - {""})}
        sessions: dict[str, httpx.Cookies] = {}  # one login per assessor: an owner of several topics goes on
        with Usage(srv.proc.pid) as use:
            cpu = lambda: use.tree_cpu() + time.process_time()  # noqa: E731 - the server's and this process's
            res["topics"] = [_time_next_batch(srv, links, owners, q, truth, sessions, cpu)
                             for q in _measured(camp, qids, owners, rounds)]
        res["load_after"] = load_avg()
    res.update(use.figures())
    waits = [t["next_batch_s"] for t in res["topics"] if t["next_batch_s"] is not None]
    gets = [x for t in res["topics"] for x in t.pop("get_s")]
    res["next_batch_s"] = {"n": len(waits), **({"median": round(statistics.median(waits), 3), "max": round(max(waits), 3)}
                                               if waits else {})}
    res["get_next_ms"] = percentiles(gets)
    res["target"] = {"next_batch_s_max": 1.0}
    return res


def _owner(store, qid: str) -> str:
    """The assessor assigned to the topic's open CAL batches (its owner: one assessor per item)."""
    pend = store.assignments.pending(None, qid)
    return str(pend["assessor"].iat[0]) if len(pend) else ""


def _measured(camp: Path, qids: list[str], owners: dict, rounds: int) -> list[str]:
    """The first ``rounds`` topics with CAL batches out."""
    return [q for q in qids if owners.get(q)][:rounds]


def _time_next_batch(srv: ServerProcess, links: dict, owners: dict, qid: str, truth: dict,
                     sessions: dict, cpu: Callable[[], float]) -> dict:
    """The topic's owner judges its open batches; then the seconds from sending the POST that
    completed them to the first GET that shows a passage of the next batch (the state polled
    every 20 ms), and the CPU seconds ``cpu()`` counted meanwhile."""
    name = owners[qid]
    p = Assessor(srv.url, links[name], name, qid, truth, cookies=sessions.get(name))
    sessions[name] = p.cookies
    runs_before = srv.health()["runner_runs"]
    judged, last_post = 0, None
    while (v := p.next_item()).get("item"):
        cpu0 = cpu()
        last_post = time.perf_counter()
        r = p.judge(v["item"])
        if r.status_code != 200:
            raise RuntimeError(f"judging {qid}: {r.status_code} {r.text}")
        judged += 1
    first_state = v.get("state")
    seen = None
    end = time.monotonic() + 600
    while time.monotonic() < end and v.get("state") != "decided":
        time.sleep(0.02)  # the state poll (one cheap read, as the page's, which polls every 0.2 s)
        if p.c.get(f"/api/topics/{qid}/state").json()["state"] in ("judging", "decided"):
            v = p.next_item()
            if v.get("item"):
                seen = time.perf_counter()
                cpu1 = cpu()
                break
    time.sleep(0.5)
    health = srv.health()
    p.close()
    runs = health["runner_recent"][-(health["runner_runs"] - runs_before):] if health["runner_runs"] > runs_before else []
    return {"qid": qid, "assessor": name, "judged": judged, "state_after_last_post": first_state, "runs": runs,
            "next_batch_s": None if seen is None or last_post is None else round(seen - last_post, 3),
            "next_batch_cpu_s": None if seen is None or last_post is None else round(cpu1 - cpu0, 3),
            "next_batch": None if not v.get("item") else v["item"]["batch_id"], "get_s": p.get_s,
            "post_ms": percentiles(p.post_s)}


def _requests(raw: list, cpu_each: float) -> tuple[dict, list[dict]]:
    """The first request of a run (the server fresh) and the others, as calls; their CPU is the
    run's CPU per request (``cpu_each``: not measured per request)."""
    calls = [call(dt, cpu_each) for _, dt in raw]
    return calls[0], calls[1:]


def load_sizes(runs: list[dict], think: float) -> tuple[list[dict], dict, list[dict]]:
    """(a)'s results: a task for the judgment POST and one for the next-passage GET, a size per
    number of assessors; the store checks; the POST target (stated at 0.5 s of think time)."""
    posts, gets, checks, targets = [], [], {}, []
    for r in runs:
        label = f"{r['assessors']} assessors x {r['judgments_each']} judgments"
        n_req = len(r["posts_raw"]) + len(r["gets_raw"])
        each = r["run_cpu_s"]["server_process"] / max(n_req, 1)
        common = {"import_s": None, "peak_rss_mb": r["server_peak_rss_mb"], "background_cores": r["background_cores"]}
        note = ("a call is one request; the first is the run's first (the server just started); CPU: the server "
                "process's over the run per request (POST and GET alike; its runner's CAL rounds and the clients "
                "not counted: run_cpu_s has them)")
        for kind, raw, pct, out in (("POST", r["posts_raw"], r["post_ms"], posts), ("GET", r["gets_raw"], r["get_next_ms"], gets)):
            first, warm = _requests(raw, each)
            tool = tool_result("qrelkit serve", first=first, warm=warm, note=note, **common,
                               stages={q: pct[q] / 1000 for q in ("p95", "p99", "max") if q in pct},
                               throughput_per_s=r["throughput_per_s"], wall_s=r["wall_s"], errors=r["errors"],
                               errors_5xx=r["errors_5xx"], waits_computing=r["waits_computing"],
                               waits_for_others=r["waits_for_others"])
            out.append(size_result(label, 1, "request", [tool], task=f"{'judgment POST' if kind == 'POST' else 'next-passage GET'}"
                                   f" under load, {think:g} s think time"))
        checks[f"{label}: every acknowledged judgment stored exactly once"] = r["store"]["exactly_once"]
        checks[f"{label}: no 5xx answer"] = r["errors_5xx"] == 0
        if think == 0.5 and r["assessors"] >= 20:
            targets.append(target(f"judgment POST p95, {label}, 0.5 s think time", r["post_ms"]["p95"], "<=", 50, "ms"))
    return posts + gets, checks, targets


def large_sizes(runs: list[dict]) -> tuple[list[dict], dict, list[dict]]:
    """(b)'s results: the wait for the next CAL batch, a size per corpus."""
    sizes, checks, targets = [], {}, []
    for r in runs:
        t = [x for x in r["topics"] if x["next_batch_s"] is not None]
        label = f"{r['passages']:,} passages"
        checks[f"{label}: every timed topic got its next batch"] = len(t) == len(r["topics"]) and bool(t)
        if not t:
            continue
        calls = [call(x["next_batch_s"], x["next_batch_cpu_s"]) for x in t]
        tool = tool_result("qrelkit serve", first=calls[0], warm=calls[1:] or [calls[0]], peak_rss_mb=r["server_peak_rss_mb"],
                           background_cores=r["background_cores"], server_ready_s=r.get("server_ready_s"),
                           note="a call is one topic's wait, from the POST completing its CAL round to a GET showing "
                                "the next batch; the first is the first topic's after the server's start; CPU: the "
                                "server's processes and the polling client's meanwhile",
                           stages={"next-passage GET p50": r["get_next_ms"].get("p50", 0) / 1000,
                                   "next-passage GET p95": r["get_next_ms"].get("p95", 0) / 1000})
        sizes.append(size_result(label, r["passages"], "passage", [tool],
                                 task="the next CAL batch after a round's last judgment"))
        if r["passages"] >= 1_000_000:
            targets.append(target(f"the next CAL batch, {label}, median", tool["warm"]["wall_s"], "<=", 1, "s"))
    return sizes, checks, targets


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", nargs="?", choices=("all", "load", "large"), default="all",
                    help="all (default): (a) and (b) into one result")
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "web", help="the campaigns and servers' logs")
    ap.add_argument("--json-out", type=Path, default=ROOT / "bench-out" / "web-load.json")
    ap.add_argument("--assessors", nargs="+", type=int, default=[10, 20], help="load: the sizes, in assessors")
    ap.add_argument("--judgments", type=int, default=200, help="load: judgments per assessor")
    ap.add_argument("--passages", nargs="+", type=int, default=None,
                    help="large: the sizes (250,000 1,000,000); with 'load' alone: its corpus (20,000)")
    ap.add_argument("--load-passages", type=int, default=20_000, help="load: the corpus size")
    ap.add_argument("--think", nargs="+", type=float, default=[0.5],
                    help="load: mean seconds an assessor thinks per passage (several: a task each, e.g. 0.5 0)")
    ap.add_argument("--rounds", type=int, default=5, help="large: topics whose next CAL batch is timed")
    args = ap.parse_args(argv)
    sizes, checks, targets = [], {}, []
    if args.which in ("all", "load"):
        corpus = args.passages[0] if args.which == "load" and args.passages else args.load_passages
        for think in args.think:
            runs = [bench_load(args.out / f"load-{n}", assessors=n, judgments=args.judgments, passages=corpus,
                               think=think) for n in args.assessors]
            for r in runs:
                print(f"load, {r['assessors']} assessors, think {think:g} s: POST p50 {r['post_ms'].get('p50')} / p95 "
                      f"{r['post_ms'].get('p95')} ms, {r['throughput_per_s']} judgments/s, store exactly once: "
                      f"{r['store']['exactly_once']}; others {r['background_cores']:.2f} cores", file=sys.stderr, flush=True)
            s, c, t = load_sizes(runs, think)
            sizes, checks = sizes + s, {**checks, **{f"think {think:g} s, {k}": v for k, v in c.items()}}
            targets += t
    if args.which in ("all", "large"):
        runs = [bench_large(args.out, passages=n, rounds=args.rounds) for n in (args.passages or [250_000, 1_000_000])]
        for r in runs:
            print(f"large, {r['passages']:,} passages: next batch {r['next_batch_s']}; others "
                  f"{r['background_cores']:.2f} cores", file=sys.stderr, flush=True)
        s, c, t = large_sizes(runs)
        sizes, checks, targets = sizes + s, {**checks, **c}, targets + t
    res = benchmark_result("web-load", "The assessor web app under load, and the next CAL batch", sizes,
                           peers=("uvicorn", "httptools", "httpx"), targets=targets, checks=checks, notes=[
        "qrelkit serve runs as a separate process on a loopback port; the simulated assessors are threads of the "
        "benchmark, one HTTP connection each.",
        "The unit of (a) is one request (the per-unit time is its latency); of (b) the passage (the wait is mostly "
        "scoring every passage)."])
    write_result(res, args.json_out, "bench_web_load.py", argv)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
