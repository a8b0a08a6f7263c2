"""Soak benchmark of the assessor web app (issue 21, "How it is checked"): a whole campaign judged
through the HTTP API of a real ``qrelkit serve`` while the server is killed and the runner fails.

    python benchmarks/bench_web_soak.py                      # 10 assessors, 10 and 20 topics, think 0.5 s
    python benchmarks/bench_web_soak.py --think 0.05         # the same campaigns, a quick run

**The campaign.** A simulated collection (``simulate_campaign``: ``--passages`` 8,000 passages,
``--topics`` 20 topics, 6 groups, seed 3) and the protocol :data:`SOAK_CONFIG`: every stage a
topic goes through — screening (the first 10 of the depth-5 pool; a topic is discarded when none
or at least 90% is relevant), the rest of the pool, the fractional pool, CAL in the three
threads of the 2022 track (batches of 10), the density stopping rule (accept below 0.4 with at
least 60 judged and 2 relevant, reject from 100 judged, at most 6 rounds) — then the final qrels.
``--assessors`` names (``a01``...) in ``[campaign] assessors``, one assessor per item, topic *i*
owned by assessor *i* mod n (its screening, pool batches and CAL rounds: ``owner_judges_cal``).

**The assessors.** Each is one thread with its own HTTP connection and session: it opens its
login link **once** (the session cookie is kept through every restart: sessions outlive the
server process) and then, until every topic is decided: ``GET /api/topics`` (its topics and what
it owes on each), ``GET /api/topics/QID`` (the next passage), a think time drawn from an
exponential distribution of mean ``--think`` seconds, ``POST /api/topics/QID/judgments`` with the
hidden qrels' grade; when it owes nothing it polls as a waiting page does (the state of an
undecided topic of its own, every 1.5 s, every 0.2 s while the runner computes, then its topics
again). A request that finds
no server (connection refused or cut) is tried again every 0.2 s; a judgment whose answer never
came is sent again, as it was, once the server answers (``stored``, or ``repeated`` when the kill
came after its commit).

**The faults.** A controller kills the server with SIGKILL ``--kills`` times (5) at random moments
— when a random share (between 5% and 90%) of the judgments the campaign will take has been
acknowledged, plus a random 0-1 s — and starts it again on the same port after a random 0.5-2 s;
and once (``--runner-failures``), at another random moment, makes an input of the runner vanish:
the campaign's manifest file is moved away (as an operator's mistake, a disk unmounted), so the
runner's next advance fails (``[input-missing]``; the assessors are told the campaign is paused);
it is put back ``--fail-hold`` seconds (5) after the organizer's health details show the error,
and the runner's own retry with backoff (``qrelkit.web.worker.Advancer``) must bring the campaign
back without anyone asking. No code in the product exists for this benchmark.

**The checks.**

* *Every acknowledged judgment stored exactly once*: the store's ``web`` rows are exactly the
  acknowledged (topic, passage, assessor, batch) tuples, no duplicate, nothing else
  (``bench_web_load.check_store``); every stored grade is the one sent.
* *The final qrels equal an oracle run's on the same judgments*: the judgments the web app
  stored are written as a qrels file and a fresh campaign with the same protocol and inputs is
  run by the command line without the web app (``qrelkit campaign init`` + ``qrelkit campaign run
  --oracle web-judgments.qrels``; the simulated assessor then answers every batch with those
  grades). A campaign's batches depend only on its judgments and its seeds (docs/campaign.md,
  "CAL rounds per topic"), so equality of the qrels files (passages, expanded, documents), of
  every topic's decision, of the batches issued (id, topic, thread, round, kind, size) and of
  the judgments log (topic, passage, assessor, batch, grade) means the kills, the retries, the
  failed runs and their retries neither lost, doubled, reordered nor invented anything the
  campaign's outcome depends on: a lost judgment, a batch issued twice or a round skipped would
  show as a different batch or decision. And since the simulated assessors answer with the
  hidden qrels, the same equality holds against the oracle run on the hidden qrels done before
  the soak (``reference``; it also gives the number of judgments the campaign takes, to place
  the faults).
* *Latency*: judgment POSTs answered (p50, p95, p99, max; target p95 <= 50 ms at 0.5 s think
  time), next-item GETs, and the same POST figures outside the first 5 s after each restart.

**Sizes.** One soak per ``--topics`` (default 10 and 20 topics; each its own campaign under
``OUT/soak-T``, 20 topics under ``OUT/soak``) [unit: one request: a call is one judgment POST, its
per-unit time the latency; the first is the soak's first POST]. CPU: the server processes' over
the soak (every start; their runners and the clients apart, in ``soak_cpu_s``) per request; the
peak RSS of an instance's processes (``VmHWM``); the cores other processes used meanwhile.

Writes one result, ``bench-out/web-soak.json`` (``--json-out``; ``benchmarks/_results.py``'s shape,
for ``scripts/gen_benchmarks_doc.py``): per size the POST latencies (p95, p99, max, p95 outside
the restarts), the servers' downtime per kill, the runner's recovery, the checks above and the
target (p95 <= 50 ms at 0.5 s think time, 20 topics). Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _machine import busy_cpu_s, hwm_mb, others_cores  # noqa: E402
from _results import benchmark_result, call, size_result, target, tool_result, write_result  # noqa: E402
from bench_web_load import ServerProcess, check_store, free_port, load_avg, percentiles, read_truth  # noqa: E402

import httpx  # noqa: E402

from qrelkit.campaign import open_campaign_store  # noqa: E402
from qrelkit.campaign.accounts import add_account  # noqa: E402
from qrelkit.simulate.campaign import simulate_campaign  # noqa: E402

SOAK_CONFIG = """
[protocol]
name = "web soak"
[pool]
depth = 5
[screen]
first_n = 10
discard_if_relevant_share_at_least = 0.9
discard_if_no_relevant = true
[batch]
assessors_per_item = 1
[campaign]
assessors = [{names}]
owner_judges_cal = true
skip = ["evaluate", "reuse", "report"]
max_rounds = 6
[cal]
batch_size = 10
threads = ["fractional", "local", "all"]
official_thread = "all"
[stopping]
accept_density_below = 0.4
accept_min_judged = 60
accept_min_relevant = 2
reject_min_judged = 100
"""
ORGANIZER = "boss"
QRELS_FILES = ("qrels-passages.txt", "qrels-expanded.txt", "qrels-documents.txt")
AFTER_RESTART_S = 5.0  # POSTs this soon after a restart are reported apart too


def names_of(n: int) -> list[str]:
    return [f"a{i:02d}" for i in range(1, n + 1)]


def _cli(*args: str) -> None:
    """``qrelkit ARGS`` as a separate process (this checkout's), failing loudly."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    code = "import sys; from qrelkit.cli import run; sys.exit(run(sys.argv[1:]))"
    r = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"qrelkit {' '.join(args)} failed ({r.returncode}): {r.stderr[-2000:]}")


def _init_args(camp: Path, cfg: Path, sim: Path) -> list[str]:
    return ["campaign", "init", str(camp), "-c", str(cfg), "--corpus", str(sim / "corpus.jsonl"), "-t",
            str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")]


def build(out: Path, *, assessors: int, topics: int, passages: int, seed: int = 3) -> dict:
    """The simulation, the protocol file, the web campaign (initialized, accounts not yet made)
    and the reference: the same campaign run by the command line with the hidden qrels as oracle."""
    sim = out / "sim"
    if not (sim / "summary.json").exists():
        simulate_campaign(sim, n_passages=passages, n_topics=topics, n_groups=6, seed=seed)
    cfg = out / "soak.toml"
    cfg.write_text(SOAK_CONFIG.format(names=", ".join(f'"{a}"' for a in names_of(assessors))))
    for d in ("camp", "reference", "replay"):
        shutil.rmtree(out / d, ignore_errors=True)
    _cli(*_init_args(out / "camp", cfg, sim))
    _cli(*_init_args(out / "reference", cfg, sim))
    _cli("campaign", "run", str(out / "reference"), "--oracle", str(sim / "qrels.txt"))
    return {"sim": sim, "cfg": cfg, "camp": out / "camp", "reference": out / "reference"}


# -- a simulated assessor, through restarts ----------------------------------------------------------


class Down(Exception):
    """The server did not answer within the deadline."""


class SoakAssessor:
    """One simulated assessor: logged in once, judging its topics with the hidden qrels' grades
    until ``done`` is set (see the module documentation)."""

    def __init__(self, url: str, link: str, name: str, truth: dict, *, deadline: float) -> None:
        self.name, self.truth, self.end = name, truth, time.monotonic() + deadline
        self.c = httpx.Client(base_url=url, timeout=60)
        r = self.c.post("/login/" + link.rsplit("/login/", 1)[1], follow_redirects=False)
        if r.status_code not in (302, 303):
            raise RuntimeError(f"login of {name} failed: {r.status_code} {r.text[:200]}")
        self.c.headers["X-CSRF-Token"] = self.c.get("/api/session").json()["csrf"]
        self.acked: list[tuple[str, str, str, str]] = []
        self.sent_grade: dict[tuple[str, str, str, str], int] = {}
        self.post: list[tuple[float, float]] = []  # (monotonic time sent, seconds to the answer)
        self.get_s: list[float] = []
        self.retried = {"stored": 0, "repeated": 0}
        self.refused = 0  # requests that found no server
        self.errors: list[tuple[int, str]] = []
        self.waits = 0

    def _request(self, method: str, path: str, **kw) -> httpx.Response:
        """One request; while the server is down (killed, restarting), tried again every 0.2 s."""
        while True:
            if time.monotonic() > self.end:
                raise Down(path)
            try:
                return self.c.request(method, path, **kw)
            except httpx.TransportError:
                self.refused += 1
                time.sleep(0.2)

    def judge(self, qid: str, item: dict) -> None:
        body = {"batch_id": item["batch_id"], "docid": item["docid"], "grade": self.truth.get((qid, item["docid"]), 0)}
        key = (qid, item["docid"], self.name, item["batch_id"])
        t0 = time.perf_counter()
        sent = time.monotonic()
        try:
            r = self.c.post(f"/api/topics/{qid}/judgments", json=body)
            self.post.append((sent, time.perf_counter() - t0))
        except httpx.TransportError:  # no answer: sent again as it was once the server is back
            self.refused += 1
            r = self._request("POST", f"/api/topics/{qid}/judgments", json=body)
            if r.status_code == 200:
                self.retried[r.json().get("status", "stored")] = self.retried.get(r.json().get("status", "stored"), 0) + 1
        if r.status_code == 200:
            self.acked.append(key)
            self.sent_grade[key] = body["grade"]
        else:
            self.errors.append((r.status_code, r.text[:200]))

    def run(self, rng: random.Random, think: float, done: threading.Event) -> None:
        current = None
        while not done.is_set():
            if current is None:
                r = self._request("GET", "/api/topics")
                if r.status_code != 200:
                    self.errors.append((r.status_code, r.text[:200]))
                    time.sleep(0.3)
                    continue
                topics = r.json()["topics"]
                owed = [t["qid"] for t in topics if t["owed"] > 0]
                if not owed:  # waiting (for the others, the runner, the end) as a waiting page does
                    self.waits += 1
                    time.sleep(self._waiting_poll([t["qid"] for t in topics if not t["decision"]]))
                    continue
                current = owed[0]
            t0, refused = time.perf_counter(), self.refused
            r = self._request("GET", f"/api/topics/{current}")
            if r.status_code != 200:
                self.errors.append((r.status_code, r.text[:200]))
                current = None
                continue
            if self.refused == refused:  # answered at the first try (not across a restart)
                self.get_s.append(time.perf_counter() - t0)
            item = r.json().get("item")
            if item is None:
                current = None
                continue
            if think:
                time.sleep(rng.expovariate(1.0 / think))
            self.judge(current, item)

    def _waiting_poll(self, undecided: list[str]) -> float:
        """One poll of a waiting page (``/api/topics/QID/state`` of an undecided topic); the
        seconds until the next, as the page waits: 0.2 while the runner computes, else 1.5."""
        if not undecided:
            return 1.5
        r = self._request("GET", f"/api/topics/{undecided[0]}/state")
        return 0.2 if r.status_code == 200 and r.json().get("state") == "computing" else 1.5

    def close(self) -> None:
        self.c.close()


# -- the organizer: health details, with a session ---------------------------------------------------


class Organizer:
    """The organizer's session (its link opened once): the health details are for organizers."""

    def __init__(self, url: str, link: str) -> None:
        self.c = httpx.Client(base_url=url, timeout=30)
        r = self.c.post("/login/" + link.rsplit("/login/", 1)[1], follow_redirects=False)
        if r.status_code not in (302, 303):
            raise RuntimeError(f"login of the organizer failed: {r.status_code} {r.text[:200]}")

    def health(self, wait: float = 120.0) -> dict:
        """``/healthz`` with the organizer's cookie, waiting (up to ``wait`` s) for the server."""
        end = time.monotonic() + wait
        while True:
            try:
                r = self.c.get("/healthz")
                if r.status_code == 200:
                    return r.json()
            except httpx.TransportError:
                pass
            if time.monotonic() > end:
                raise Down("/healthz")
            time.sleep(0.1)

    def wait_for(self, pred, what: str, wait: float = 300.0) -> dict:
        end = time.monotonic() + wait
        while True:
            h = self.health()
            if pred(h):
                return h
            if time.monotonic() > end:
                raise RuntimeError(f"waited {wait} s for {what}; last health: {h}")
            time.sleep(0.1)


def _tree_usage(pid: int) -> dict:
    """CPU seconds of a server process and of its tree (its runner), and their peak RSS (VmHWM)."""
    import psutil  # lazy: the [bench] extra, only where a server is measured

    out = {"server_process": 0.0, "server_tree": 0.0, "peak_mb": 0.0}
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return out
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        out["server_tree"] += t.user + t.system
        if p.pid == pid:
            out["server_process"] = t.user + t.system
        out["peak_mb"] += hwm_mb(p.pid) or 0.0
    return out


def finished(h: dict) -> bool:
    return "qrels" in h.get("stages_done", []) and h.get("topics_decided") == h.get("topics") and h.get("runner") == "idle"


# -- the faults --------------------------------------------------------------------------------------


class Controller:
    """Kills and restarts the server at the planned shares of acknowledged judgments, and makes
    the runner fail once (see the module documentation)."""

    def __init__(self, camp: Path, out: Path, port: int, org_link: str, rng: random.Random, hold: float) -> None:
        self.camp, self.out, self.port, self.rng, self.hold = camp, out, port, rng, hold
        self.n = 0
        self.cpu = {"server_process": 0.0, "server_tree": 0.0}  # of the instances gone (the live one: usage())
        self.peak_mb = 0.0
        self.srv = self._start()
        self.org = Organizer(self.srv.url, org_link)
        self.org.wait_for(lambda h: h.get("runner") == "idle" and h.get("batches_out", 0) > 0, "the first batches")
        self.restarts: list[dict] = []
        self.failures: list[dict] = []

    def _start(self) -> ServerProcess:
        self.n += 1
        return ServerProcess(self.camp, self.out / f"server-{self.n}.log", port=self.port).start(ready=False, timeout=300)

    def usage(self) -> dict:
        """CPU seconds of the server processes so far (the instances gone and the live one's) and
        the largest peak RSS of an instance's processes."""
        live = _tree_usage(self.srv.proc.pid)
        self.peak_mb = max(self.peak_mb, live["peak_mb"])
        return {"server_process": self.cpu["server_process"] + live["server_process"],
                "server_tree": self.cpu["server_tree"] + live["server_tree"], "peak_mb": self.peak_mb}

    def kill_and_restart(self) -> None:
        h = self.org.health()
        gone = self.usage()  # the instance's figures, just before it dies
        self.cpu = {k: gone[k] for k in self.cpu}
        t0 = time.monotonic()
        self.srv.kill()
        time.sleep(self.rng.uniform(0.5, 2.0))
        self.srv = self._start()
        self.org.health()
        self.restarts.append({"at_s": round(t0, 3), "down_s": round(time.monotonic() - t0, 2),
                              "runner_before": h.get("runner"), "topics_decided_before": h.get("topics_decided"),
                              "stages_done_before": len(h.get("stages_done", []))})

    def runner_failure(self) -> None:
        """The manifest moved away until the runner failed on it (plus ``hold`` s), then back;
        records how long the campaign took to go on by itself."""
        with open_campaign_store(self.camp) as s:
            inp = s.state.inputs()
        manifest = Path(inp.loc[inp["name"] == "manifest", "path"].iat[0])
        aside = manifest.with_name(manifest.name + ".away")
        runs0 = self.org.health().get("runner_runs", 0)
        t0 = time.monotonic()
        manifest.rename(aside)
        try:
            h = self.org.wait_for(lambda h: bool(h.get("runner_error")), "the runner's failure", wait=600)
            failed_at = time.monotonic()
            time.sleep(self.hold)
        finally:
            aside.rename(manifest)  # a rename keeps size and time: the input is as init recorded it
        restored = time.monotonic()
        h2 = self.org.wait_for(lambda h: not h.get("runner_error"), "the runner's recovery", wait=600)
        self.failures.append({"input": "manifest", "error": h.get("runner_error"), "failed_after_s": round(failed_at - t0, 2),
                              "failing_for_s": round(restored - failed_at, 2),
                              "recovered_after_restore_s": round(time.monotonic() - restored, 2),
                              "runner_runs_meanwhile": h2.get("runner_runs", 0) - runs0})


def plan(rng: random.Random, kills: int, failures: int) -> list[tuple[float, str]]:
    """Shares of the expected judgments at which each fault comes, in order (at least 3% apart)."""
    while True:
        shares = sorted(rng.uniform(0.05, 0.9) for _ in range(kills + failures))
        if all(b - a >= 0.03 for a, b in zip(shares, shares[1:])):
            break
    kinds = ["kill"] * kills + ["runner"] * failures
    rng.shuffle(kinds)
    return list(zip(shares, kinds))


# -- the soak ----------------------------------------------------------------------------------------


def soak(out: Path, *, assessors: int, topics: int, passages: int, think: float, kills: int, failures: int,
         seed: int, hold: float, deadline: float) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    t_build = time.perf_counter()
    b = build(out, assessors=assessors, topics=topics, passages=passages)
    truth = read_truth(b["sim"])
    with open_campaign_store(b["reference"]) as s:
        expected = len(s.judgments.log(None, "all"))
    res: dict = {"benchmark": "web-soak", "assessors": assessors, "topics": topics, "passages": passages,
                 "think_s": think, "seed": seed, "expected_judgments": expected,
                 "setup_s": round(time.perf_counter() - t_build, 1), "load_before": load_avg()}
    camp = b["camp"]
    links = {n: add_account(camp, n)["link"] for n in names_of(assessors)}
    org_link = add_account(camp, ORGANIZER, organizer=True)["link"]
    rng = random.Random(seed)
    faults = plan(rng, kills, failures)
    res["faults_planned"] = [{"share": round(s, 3), "kind": k} for s, k in faults]
    b0, c0, w0 = busy_cpu_s(), time.process_time(), time.monotonic()  # the window of the others' load
    ctl = Controller(camp, out, free_port(), org_link, rng, hold)
    done = threading.Event()
    people = [SoakAssessor(ctl.srv.url, links[n], n, truth, deadline=deadline) for n in names_of(assessors)]
    threads = [threading.Thread(target=_guarded, args=(p, random.Random(seed * 1000 + i), think, done), daemon=True)
               for i, p in enumerate(people)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    try:
        for share, kind in faults:
            while sum(len(p.acked) for p in people) < share * expected:
                if time.monotonic() - t0 > deadline:
                    raise RuntimeError("the soak did not reach its next fault before the deadline")
                time.sleep(0.05)
            if kind == "kill":
                time.sleep(rng.uniform(0.0, 1.0))
                ctl.kill_and_restart()
            else:
                ctl.runner_failure()
        final = ctl.org.wait_for(finished, "every topic's decision and the qrels", wait=max(60.0, deadline - (time.monotonic() - t0)))
    finally:
        done.set()
        for t in threads:
            t.join(120)
    wall = time.monotonic() - t0
    health = final
    use = ctl.usage()
    client = time.process_time() - c0
    res["soak_cpu_s"] = {"server_process": round(use["server_process"], 2), "server_tree": round(use["server_tree"], 2),
                         "client": round(client, 2)}
    res["server_peak_rss_mb"] = round(use["peak_mb"], 1)
    res["background_cores"] = others_cores(b0, busy_cpu_s(), use["server_tree"] + client, time.monotonic() - w0)
    ctl.srv.stop()
    ctl.org.c.close()
    for p in people:
        p.close()
    res.update(_figures(people, ctl, wall, health))
    res["load_after"] = load_avg()
    acked = [a for p in people for a in p.acked]
    res["store"] = check_store(camp, acked)
    res["grades"] = _grades_check(camp, {k: g for p in people for k, g in p.sent_grade.items()})
    res["oracle"] = compare_with_oracle(out, b)
    res["target"] = {"post_p95_ms_max": 50, "at_think_s": 0.5}
    res["ok"] = bool(res["store"]["exactly_once"] and res["grades"]["all_as_sent"] and res["oracle"]["equal"]
                     and res["oracle"]["equal_to_reference"] and not res["errors_5xx"])
    return res


def _guarded(p: SoakAssessor, rng: random.Random, think: float, done: threading.Event) -> None:
    try:
        p.run(rng, think, done)
    except Down:
        p.errors.append((0, "the server did not come back before the deadline"))


def _figures(people: list[SoakAssessor], ctl: Controller, wall: float, health: dict) -> dict:
    posts = sorted((t, s) for p in people for t, s in p.post)
    restarts = [r["at_s"] + r["down_s"] for r in ctl.restarts]
    steady = [s for t, s in posts if not any(0 <= t - r < AFTER_RESTART_S for r in restarts)]
    errors = [e for p in people for e in p.errors]
    return {"wall_s": round(wall, 1), "judged": {p.name: len(p.acked) for p in people},
            "acknowledged": sum(len(p.acked) for p in people),
            "post_ms": percentiles([s for _, s in posts]), "post_ms_outside_restarts": percentiles(steady),
            "posts_raw": posts, "gets_count": sum(len(p.get_s) for p in people),
            "get_next_ms": percentiles([x for p in people for x in p.get_s]),
            "throughput_per_s": round(len(posts) / wall, 2) if wall else None,
            "retried_after_kill": {k: sum(p.retried.get(k, 0) for p in people) for k in ("stored", "repeated")},
            "requests_without_server": sum(p.refused for p in people), "waiting_polls": sum(p.waits for p in people),
            "errors": len(errors), "errors_5xx": sum(1 for c, _ in errors if c >= 500), "error_samples": errors[:5],
            "restarts": [{k: v for k, v in r.items() if k != "at_s"} for r in ctl.restarts],
            "runner_failures": ctl.failures,
            "health_after": {k: health.get(k) for k in ("topics", "topics_decided", "stages_done", "runner_runs")}}


def _grades_check(camp: Path, sent: dict) -> dict:
    """Every acknowledged judgment is stored with the grade sent (the log also holds the copies of
    a passage judged in one CAL thread into another thread's batch: not sent, not counted)."""
    with open_campaign_store(camp) as s:
        log = s.judgments.log(None, "all")
    got = {(str(q), str(d), str(a), str(b)): int(g) for q, d, a, b, g in
           zip(log["qid"], log["docid"], log["assessor"], log["batch_id"], log["grade"])}
    wrong = [k for k, g in sent.items() if got.get(k) != g]
    return {"checked": len(sent), "wrong": len(wrong), "all_as_sent": not wrong}


def _outcome(camp: Path) -> dict:
    """What a campaign's outcome is made of: qrels files, decisions, batches, judgments."""
    with open_campaign_store(camp) as s:
        b = s.batches.all()
        log = s.judgments.log(None, "all")
        dec = s.state.topics()
    return {"qrels": {f: (camp / f).read_bytes() if (camp / f).exists() else None for f in QRELS_FILES},
            "decisions": {str(q): (str(d), str(r)) for q, d, r in zip(dec["qid"], dec["decision"], dec["rule"])},
            "batches": sorted(tuple(str(x) for x in row) for row in
                              b[["batch_id", "qid", "thread", "iteration", "kind", "items"]].itertuples(index=False)),
            "judgments": sorted(tuple(str(x) for x in row) for row in
                                log[["qid", "docid", "assessor", "batch_id", "grade"]].itertuples(index=False))}


def compare_with_oracle(out: Path, b: dict) -> dict:
    """The replay (the web judgments as the oracle of a fresh campaign run by the command line)
    against the web campaign, and both against the reference (the hidden qrels as oracle)."""
    web = _outcome(b["camp"])
    qrels = out / "web-judgments.qrels"
    grades = {(q, d): g for q, d, _, _, g in web["judgments"]}  # a passage's copies into other threads' batches
    qrels.write_text("".join(f"{q} 0 {d} {g}\n" for (q, d), g in grades.items()))  # carry its grade: once
    _cli(*_init_args(out / "replay", b["cfg"], b["sim"]))
    _cli("campaign", "run", str(out / "replay"), "--oracle", str(qrels))
    replay, ref = _outcome(out / "replay"), _outcome(b["reference"])

    def diff(a: dict, c: dict) -> dict:
        return {"qrels_files_equal": {f: a["qrels"][f] == c["qrels"][f] for f in QRELS_FILES},
                "decisions_equal": a["decisions"] == c["decisions"], "batches_equal": a["batches"] == c["batches"],
                "judgments_equal": a["judgments"] == c["judgments"],
                "batches_only_one_side": len(set(a["batches"]) ^ set(c["batches"])),
                "judgments_only_one_side": len(set(a["judgments"]) ^ set(c["judgments"]))}

    d_replay, d_ref = diff(web, replay), diff(web, ref)
    decisions: dict[str, int] = {}
    for d, _ in web["decisions"].values():
        decisions[d] = decisions.get(d, 0) + 1

    def same(d: dict) -> bool:
        return all(d["qrels_files_equal"].values()) and d["decisions_equal"] and d["batches_equal"] and d["judgments_equal"]

    return {"replay": d_replay, "reference": d_ref, "equal": same(d_replay), "equal_to_reference": same(d_ref),
            "decisions": decisions, "batches": len(web["batches"]), "judgments": len(web["judgments"]),
            "qrels_lines": {f: (web["qrels"][f] or b"").count(b"\n") for f in QRELS_FILES}}


def shared_result(runs: list[dict], think: float) -> dict:
    """The soaks in benchmarks/_results.py's shape: a size per number of topics."""
    sizes, checks, targets = [], {}, []
    for r in runs:
        label = f"{r['topics']} topics, {r['assessors']} assessors ({r['acknowledged']:,} judgments)"
        each = r["soak_cpu_s"]["server_process"] / max(len(r["posts_raw"]) + r["gets_count"], 1)
        calls = [call(dt, each) for _, dt in r["posts_raw"]]
        down = [x["down_s"] for x in r["restarts"]]
        back = [x["recovered_after_restore_s"] for x in r["runner_failures"]]
        stages = {**{f"POST {q}": r["post_ms"][q] / 1000 for q in ("p95", "p99", "max") if q in r["post_ms"]},
                  "POST p95 outside the 5 s after each restart": r["post_ms_outside_restarts"].get("p95", 0) / 1000,
                  "next-passage GET p50": r["get_next_ms"].get("p50", 0) / 1000,
                  "server down per kill, median": statistics.median(down) if down else None,
                  "runner back after its input, median": statistics.median(back) if back else None,
                  "the whole soak": r["wall_s"]}
        tool = tool_result("qrelkit serve", first=calls[0], warm=calls[1:], peak_rss_mb=r["server_peak_rss_mb"],
                           background_cores=r["background_cores"], stages={k: v for k, v in stages.items() if v is not None},
                           note="a call is one judgment POST, the first the soak's first; CPU: the server processes' "
                                "(every start) over the soak per request, POST and GET alike (their runners and the "
                                "clients apart: soak_cpu_s)", soak_cpu_s=r["soak_cpu_s"], kills=len(r["restarts"]),
                           runner_failures=len(r["runner_failures"]), retried_after_kill=r["retried_after_kill"])
        sizes.append(size_result(label, 1, "request", [tool],
                                 task=f"a judgment POST through a soak with kills, {think:g} s think time"))
        checks[f"{label}: every acknowledged judgment stored exactly once, with the grade sent"] = \
            bool(r["store"]["exactly_once"] and r["grades"]["all_as_sent"])
        checks[f"{label}: the qrels, decisions, batches and log equal the oracle run's on the same judgments"] = \
            bool(r["oracle"]["equal"] and r["oracle"]["equal_to_reference"])
        checks[f"{label}: no 5xx answer"] = r["errors_5xx"] == 0
        if think == 0.5 and r["topics"] >= 20:
            targets.append(target(f"judgment POST p95, {label}, 0.5 s think time", r["post_ms"]["p95"], "<=", 50, "ms"))
    return benchmark_result("web-soak", "The web app's soak: a whole campaign through the API, kills and a runner "
                            "failure", sizes, peers=("uvicorn", "httpx"), targets=targets, checks=checks, notes=[
        "The unit is one request: the per-unit time is a judgment POST's latency; the growth says how it grows from "
        "the smaller campaign to the larger."])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "web", help="the campaigns and servers' logs")
    ap.add_argument("--json-out", type=Path, default=ROOT / "bench-out" / "web-soak.json")
    ap.add_argument("--assessors", type=int, default=10)
    ap.add_argument("--topics", nargs="+", type=int, default=[10, 20], help="the sizes: topics of each soak's campaign")
    ap.add_argument("--passages", type=int, default=8000)
    ap.add_argument("--think", type=float, default=0.5, help="mean seconds an assessor thinks per passage (0.05: a quick run)")
    ap.add_argument("--kills", type=int, default=5, help="SIGKILLs of the server (each followed by a restart)")
    ap.add_argument("--runner-failures", type=int, default=1)
    ap.add_argument("--fail-hold", type=float, default=5.0, help="seconds the runner's input stays away after it failed")
    ap.add_argument("--seed", type=int, default=21, help="where the faults fall, the think times")
    ap.add_argument("--deadline", type=float, default=3600.0, help="seconds a soak may take (a bound)")
    args = ap.parse_args(argv)
    runs = []
    for topics in args.topics:
        runs.append(soak(args.out / ("soak" if topics == 20 else f"soak-{topics}"), assessors=args.assessors,
                         topics=topics, passages=args.passages, think=args.think, kills=args.kills,
                         failures=args.runner_failures, seed=args.seed, hold=args.fail_hold, deadline=args.deadline))
        r = runs[-1]
        print(f"soak, {topics} topics: {r['acknowledged']} judgments in {r['wall_s']} s, POST p95 {r['post_ms'].get('p95')} "
              f"ms, ok {r['ok']}; others {r['background_cores']:.2f} cores", file=sys.stderr, flush=True)
    res = shared_result(runs, args.think)
    write_result(res, args.json_out, "bench_web_soak.py", argv)
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
