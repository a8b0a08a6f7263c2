"""The ``10m`` case of ``bench_campaign.py`` (issue #22): a campaign of 10M passages in an MS
MARCO v2-shaped folder of shards, end to end on one machine, every step a command line in its
own process with its wall and CPU and the peak RSS of every process of its tree (Dask workers
included) sampled; at two sizes (``--passages``, default 2M and 10M: the same shape, the corpus
grows) [unit: passage].

Steps, each journaled in ``OUT/10m-steps.json`` (``OUT/pN-steps.json`` for N passages other than
10M; their folders likewise) as it ends (a run stopped half-way goes on from the first step not
journaled, or journaled without its CPU by an earlier version; ``--fresh`` starts again):

1. ``generate``: ``simulate_campaign(n_passages, n_topics=50, n_groups=20, runs_per_group=(5, 5),
   seed=0, layout="msmarco-v2", shards)``: 100 runs of 20 groups + the organizers' 2 baselines,
   depth 100 (skipped when ``OUT/10m-sim`` holds it; ``--sim`` names another folder);
2. ``init``: ``qrelkit campaign init`` on the folder (validated: every shard parsed, ids unique
   across shards; fingerprinted);
3. one ``qrelkit campaign run --oracle qrels.txt --error-rate 0.05 --seed 7 --until STAGE`` per
   stage, the protocol ``configs/trec-dl-2022.toml`` with ``[campaign] workers = W``
   (near-duplicates and the CAL features on a Dask LocalCluster of W workers; ``--workers 0``:
   in one process); the campaign folder after ``pool`` is copied to ``OUT/10m-web`` for step 5;
4. ``report``: ``qrelkit campaign report``;
5. ``serve``: ``qrelkit serve`` on the copy (its runner issues the screening batches: the text
   index of the gzip shards built at start), the assessors of the protocol (A01-A04) judge
   through the JSON API, ``--web-judgments`` each, with the hidden qrels' grades and a think time
   drawn from an exponential distribution of mean ``--web-think`` seconds (0.5, as the soak of
   ``bench_web_soak.py``; 0: as fast as the server answers): the latency of the next-item GET
   (p50/p95/p99) and of the judgment POSTs; the server's peak RSS. ``--serve-again`` measures this
   step again on the same copy (its text index and features then exist: the start is shorter).

Per step: wall seconds, CPU seconds (the command's and its reaped descendants', Dask workers
included; the server's processes sampled for ``serve``), the cores other processes used
meanwhile, the stage's own seconds (the run's summary), and the peak RSS of the main process, of
each other process (workers) and of their sum, sampled every 0.25 s (psutil; each process's own
peak also from its ``VmHWM``, so a server's start is counted); a process over ``--rss-limit-gb``
has its tree killed and the step recorded as failed. :func:`shared_result` makes the result,
``campaign-10m`` (``benchmarks/_results.py``'s shape): init, the run (its stages as stages), the
report — each a command in a fresh process, so a first call with no warm repeat — and the web
app's next-passage GETs (the first after the server's start beside the others).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import busy_cpu_s, hwm_mb, others_cores  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
QRELKIT = [sys.executable, "-c", "import sys; from qrelkit.cli import run; sys.exit(run(sys.argv[1:]))"]
SIM_PARAMS = dict(n_topics=50, n_groups=20, runs_per_group=[5, 5], seed=0, layout="msmarco-v2")


class TreeSampler:
    """Peak RSS (MB) of a process and its descendants, each and summed, every ``every`` s; kills
    the tree when one process passes ``limit_mb``."""

    def __init__(self, pid: int, limit_mb: float, every: float = 0.25) -> None:
        import psutil  # lazy: the [bench] extra, only this case's

        self.root = psutil.Process(pid)
        self.limit_mb, self.every = limit_mb, every
        self.peak: dict[int, dict] = {}
        self.cpu: dict[int, float] = {}  # CPU seconds per process, as last seen
        self.peak_total = 0.0
        self.over: str | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _procs(self):
        try:
            return [self.root, *self.root.children(recursive=True)]
        except Exception:  # noqa: BLE001 - the root ended
            return []

    def _run(self) -> None:
        while not self.stop.wait(self.every):
            total = 0.0
            for p in self._procs():
                try:
                    rss = p.memory_info().rss / 2**20
                    t = p.cpu_times()
                    self.cpu[p.pid] = t.user + t.system
                    hwm = max(rss, hwm_mb(p.pid) or 0.0)  # VmHWM: peaks between samples, or before the sampler began
                    if p.pid not in self.peak:
                        cmd = " ".join(p.cmdline())
                        kind = "main" if p.pid == self.root.pid else (
                            "dask-worker" if "spawn" in cmd or "multiprocessing" in cmd or "distributed" in cmd else "child")
                        self.peak[p.pid] = {"kind": kind, "peak_mb": 0.0}
                except Exception:  # noqa: BLE001 - ended meanwhile
                    continue
                total += rss
                self.peak[p.pid]["peak_mb"] = max(self.peak[p.pid]["peak_mb"], hwm)
                if rss > self.limit_mb and self.over is None:
                    self.over = f"pid {p.pid} ({self.peak[p.pid]['kind']}) at {rss:.0f} MB"
                    for q in reversed(self._procs()):
                        try:
                            q.kill()
                        except Exception:  # noqa: BLE001
                            pass
            self.peak_total = max(self.peak_total, total)

    def close(self) -> dict:
        self.stop.set()
        self.thread.join()
        procs = sorted(self.peak.values(), key=lambda x: -x["peak_mb"])
        main = next((x["peak_mb"] for x in procs if x["kind"] == "main"), 0.0)
        others = [round(x["peak_mb"]) for x in procs if x["kind"] != "main"]
        return {"sampled_cpu_s": round(sum(self.cpu.values()), 2), "peak_rss_main_mb": round(main), "peak_rss_other_mb": others,
                "peak_rss_max_process_mb": round(max([main, *others])), "peak_rss_sum_mb": round(self.peak_total),
                "killed_over_limit": self.over}


def measured(cmd: list[str], log: Path, limit_mb: float, env: dict | None = None) -> dict:
    """Run ``cmd`` (its stdout returned, stderr to ``log``), timed and sampled: wall, CPU (the
    command's and its reaped descendants', Dask workers included), peak RSS, others' load."""
    import resource  # lazy: with the measure

    r0, b0 = resource.getrusage(resource.RUSAGE_CHILDREN), busy_cpu_s()
    t0 = time.perf_counter()
    with open(log, "ab") as err:
        err.write(("\n$ " + " ".join(cmd[3:] if cmd[:3] == QRELKIT else cmd) + "\n").encode())
        err.flush()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, cwd=str(ROOT),
                                env={**os.environ, **(env or {})})
        sampler = TreeSampler(proc.pid, limit_mb)
        out, _ = proc.communicate()
    rss = sampler.close()
    wall, r1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 2), "exit": proc.returncode, **rss,
            "background_cores": others_cores(b0, busy_cpu_s(), cpu, wall),
            "stdout": out.decode(errors="replace"), "load_after": [round(x, 2) for x in os.getloadavg()]}


class Journal:
    """The steps measured so far (``OUT/10m-steps.json``), written after each."""

    def __init__(self, path: Path, fresh: bool) -> None:
        self.path = path
        self.steps: dict = {} if fresh or not path.exists() else json.loads(path.read_text())

    def done(self, name: str) -> bool:
        """Measured, and with its CPU (a step journaled by an earlier version is measured again)."""
        step = self.steps.get(name, {})
        return step.get("exit") == 0 and "cpu_s" in step

    def put(self, name: str, rec: dict) -> dict:
        self.steps[name] = rec
        self.path.write_text(json.dumps(self.steps, indent=1))
        print(f"10m: {name}: {rec.get('wall_s')} s, peak {rec.get('peak_rss_max_process_mb')} MB "
              f"(sum {rec.get('peak_rss_sum_mb')} MB), exit {rec.get('exit')}", file=sys.stderr, flush=True)
        return rec


def generate(sim: Path, passages: int, shards: int, journal: Journal, log: Path, limit_mb: float) -> None:
    params = {**SIM_PARAMS, "n_passages": passages, "shards": shards}
    summary = sim / "summary.json"
    if summary.exists():
        made = json.loads(summary.read_text())["parameters"]
        if all(made.get(k) == v for k, v in params.items()):
            return
    code = ("import json, sys; from qrelkit.simulate.campaign import simulate_campaign; "
            "p = json.loads(sys.argv[2]); p['runs_per_group'] = tuple(p['runs_per_group']); "
            "simulate_campaign(sys.argv[1], **p)")
    rec = measured([sys.executable, "-c", code, str(sim), json.dumps(params)], log, limit_mb)
    rec.pop("stdout")
    journal.put("generate", rec)
    if rec["exit"]:
        raise SystemExit(f"generation failed; see {log}")


def campaign_steps(sim: Path, camp: Path, web: Path, workers: int, journal: Journal, log: Path,
                   limit_mb: float) -> None:
    from qrelkit.config import CAMPAIGN_STAGES  # lazy: the package only once the data exists

    if not journal.done("init"):
        shutil.rmtree(camp, ignore_errors=True)
        cfg = camp.parent / "10m.toml"
        cfg.write_text(protocol_with_workers((ROOT / "configs" / "trec-dl-2022.toml").read_text(), workers))
        rec = measured([*QRELKIT, "campaign", "init", str(camp), "-c", str(cfg),
                        "--corpus", str(sim / "msmarco_v2_passage"), "-t", str(sim / "topics.tsv"),
                        "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv"), "--json"], log, limit_mb)
        rec.pop("stdout")
        journal.put("init", rec)
        if rec["exit"]:
            raise SystemExit(f"campaign init failed; see {log}")
    spill = {"QRELKIT_DASK_SPILL": str(camp.parent / "10m-spill")}
    for stage in CAMPAIGN_STAGES:
        if journal.done(f"stage {stage}"):
            continue
        rec = measured([*QRELKIT, "campaign", "run", str(camp), "--oracle", str(sim / "qrels.txt"), "--error-rate",
                        "0.05", "--seed", "7", "--until", stage, "--json"], log, limit_mb, env=spill)
        out = rec.pop("stdout")
        if rec["exit"] == 0:
            res = json.loads(out)
            rec["stage_s"] = res.get("seconds", {}).get(stage)
            rec["state"] = res.get("state")
            rec["topics"] = res.get("topics")
        journal.put(f"stage {stage}", rec)
        if rec["exit"]:
            raise SystemExit(f"stage {stage} failed; see {log}")
        if stage == "pool":
            shutil.rmtree(web, ignore_errors=True)
            shutil.copytree(camp, web)
    if not journal.done("report"):
        rec = measured([*QRELKIT, "campaign", "report", str(camp), "-o", str(camp.parent / "10m-report.html")],
                       log, limit_mb)
        rec.pop("stdout")
        journal.put("report", rec)


def protocol_with_workers(protocol: str, workers: int) -> str:
    """The protocol file with ``workers = N`` in its ``[campaign]`` section (none for 0)."""
    if not workers:
        return protocol
    if "\n[campaign]\n" not in protocol:
        return protocol + f"\n[campaign]\nworkers = {workers}\n"
    return protocol.replace("\n[campaign]\n", f"\n[campaign]\nworkers = {workers}\n", 1)


def serve_step(sim: Path, web: Path, judgments: int, think: float, journal: Journal, log: Path,
               limit_mb: float) -> None:
    """``qrelkit serve`` on the campaign copied after its pool stage; the assessors judge."""
    import bench_web_load as bw  # lazy imports: the web client only for this step
    from qrelkit.campaign import open_campaign_store
    from qrelkit.campaign.accounts import add_account

    if journal.done("serve"):
        return
    truth = bw.read_truth(sim)
    rec: dict = {}
    with bw.ServerProcess(web, log) as srv:
        t0 = time.perf_counter()
        srv.start(timeout=3600)
        sampler = TreeSampler(srv.proc.pid, limit_mb)
        rec["server_ready_s"] = round(time.perf_counter() - t0, 1)
        with open_campaign_store(web) as s:
            pend = s.assignments.pending(None, None)
            owners = pend.groupby("assessor")["qid"].agg(lambda x: list(dict.fromkeys(x.astype(str)))).to_dict()
            known = {a: s.accounts.get(a) for a in owners}
        # a measure again: a new link for an account made before (only a token's hash is kept)
        links = {a: add_account(web, a, renew=known[a] is not None and known[a]["revoked"] is None)["link"]
                 for a in sorted(owners)}
        gets, posts, errors = [], [], []

        def assess(name: str) -> None:
            left, cookies, rng = judgments, None, random.Random(name)
            for qid in owners[name]:
                p = bw.Assessor(srv.url, links[name], name, qid, truth, cookies=cookies)
                cookies = p.cookies
                while left > 0 and (v := p.next_item()).get("item"):
                    if think:
                        time.sleep(rng.expovariate(1.0 / think))
                    p.judge(v["item"])
                    left -= 1
                gets.extend(zip(p.get_at, p.get_s))
                posts.extend(zip(p.post_at, p.post_s))
                errors.extend(p.errors)
                p.close()
                if left <= 0:
                    break

        threads = [threading.Thread(target=assess, args=(a,)) for a in sorted(owners)]
        with bw.Usage(srv.proc.pid) as use:  # the server's CPU and the others' load while the assessors judge
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        rec["judging_wall_s"] = round(use.wall, 1)
        rec.update(sampler.close())
        rec["cpu_s"] = round(use.server_cpu, 2)  # the server's processes (its runner too) while judging
        rec["server_process_cpu_s"] = round(use.root_cpu, 2)
        rec["background_cores"] = use.others
        rec["wall_s"] = round(time.perf_counter() - t0, 1)
    rec.update({"exit": 0 if not errors else 1, "assessors": sorted(owners), "think_s": think, "get_next_ms": bw.percentiles([x for _, x in gets]),
                "post_judgment_ms": bw.percentiles([x for _, x in posts]), "errors": errors[:5],
                "gets_raw": sorted(gets), "posts_raw": sorted(posts),
                "load_after": [round(x, 2) for x in os.getloadavg()], "target_get_next_p95_ms": 50})
    journal.put("serve", rec)


def tag_of(passages: int) -> str:
    """The name of a size's folders and journal: ``10m`` for 10M passages (as before), else ``pN``."""
    return "10m" if passages == 10_000_000 else f"p{passages}"


def bench_10m(out: Path, *, passages: int, shards: int, workers: int, judgments: int, think: float,
              sim: Path | None, fresh: bool, limit_gb: float, serve_again: bool = False) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    tag = tag_of(passages)
    journal = Journal(out / f"{tag}-steps.json", fresh)
    log, limit_mb = out / f"{tag}.log", limit_gb * 1024
    sim = sim or out / f"{tag}-sim"
    camp, web = out / f"{tag}-campaign", out / f"{tag}-web"
    res = {"benchmark": "10m", "passages": passages, "shards": shards, "workers": workers,
           "load_before": [round(x, 2) for x in os.getloadavg()]}
    generate(sim, passages, shards, journal, log, limit_mb)
    campaign_steps(sim, camp, web, workers, journal, log, limit_mb)
    if serve_again and journal.done("serve"):
        before = journal.steps.pop("serve")
        journal.steps[f"serve (before, think {before.get('think_s', 0)} s)"] = before
    serve_step(sim, web, judgments, think, journal, log, limit_mb)
    res["steps"] = journal.steps
    res["peak_rss_any_process_mb"] = max(s.get("peak_rss_max_process_mb", 0) for s in journal.steps.values())
    res["targets"] = {"peak_rss_any_process_mb_max": 8192, "get_next_p95_ms_max": 50}
    res["sim_summary_counts"] = json.loads((sim / "summary.json").read_text())["counts"]
    return res


ONE_COMMAND = ("one command in a fresh process, timed whole (interpreter start and imports included): no warm "
               "repeat, the warm columns repeat it; CPU: the command's and its reaped workers'")


def _step_tool(steps: list[dict], stages: dict | None = None, note: str = ONE_COMMAND) -> dict:
    """Commands run one after the other as one call: their summed wall and CPU, the largest peak RSS
    of a process, the median of the others' load."""
    import statistics

    from _results import call, tool_result  # lazy: the shared shape, only for the result

    bg = [x["background_cores"] for x in steps if x.get("background_cores") is not None]
    return tool_result("qrelkit (commands)", first=call(sum(x["wall_s"] for x in steps), sum(x["cpu_s"] for x in steps)),
                       warm=[], peak_rss_mb=max(x.get("peak_rss_max_process_mb", 0) for x in steps),
                       background_cores=statistics.median(bg) if bg else None, stages=stages, note=note,
                       peak_rss_sum_mb=max(x.get("peak_rss_sum_mb", 0) for x in steps))


def shared_result(runs: list[dict]) -> dict:
    """The campaigns in benchmarks/_results.py's shape: a size per corpus, the steps as tasks."""
    from _results import benchmark_result, call, size_result, target, tool_result

    init, run, report, serve, checks, targets = [], [], [], [], {}, []
    for r in runs:
        n, st = r["passages"], r["steps"]
        label = f"{n:,} passages, {r['shards']} shards"
        stages = {k[len("stage "):]: v for k, v in st.items() if k.startswith("stage ")}
        checks[f"{label}: every step exited 0"] = all(v.get("exit") == 0 for k, v in st.items() if k != "generate")
        init.append(size_result(label, n, "passage", [_step_tool([st["init"]])], task="campaign init (every shard parsed)"))
        run.append(size_result(label, n, "passage", [_step_tool(list(stages.values()),
                                                                {k: v["wall_s"] for k, v in stages.items()},
                                                                note=f"one `campaign run --until STAGE` command per stage, "
                                                                     f"[campaign] workers = {r['workers']}; the call is "
                                                                     "their sum, the stages each command's wall")],
                               task="campaign run --oracle, stage by stage"))
        if "report" in st:
            report.append(size_result(label, n, "passage", [_step_tool([st["report"]])], task="campaign report"))
        sv = st.get("serve")
        if sv and sv.get("gets_raw"):
            each = sv["server_process_cpu_s"] / max(len(sv["gets_raw"]) + len(sv["posts_raw"]), 1)
            calls = [call(dt, each) for _, dt in sv["gets_raw"]]
            serve.append(size_result(label, 1, "request", [tool_result(
                "qrelkit serve", first=calls[0], warm=calls[1:], peak_rss_mb=sv.get("peak_rss_max_process_mb"),
                background_cores=sv.get("background_cores"),
                stages={"GET p95": sv["get_next_ms"]["p95"] / 1000, "POST p50": sv["post_judgment_ms"]["p50"] / 1000,
                        "POST p95": sv["post_judgment_ms"]["p95"] / 1000, "server ready": sv["server_ready_s"]},
                note=f"a call is one next-passage GET of {len(sv['assessors'])} assessors judging at {sv['think_s']:g} s "
                     "think time, the first the first after the server's start; CPU: the server process's while "
                     "they judge, per request (GET and POST alike; its runner's apart)")],
                task="qrelkit serve on the campaign after its pool stage"))
            checks[f"{label}: no error through the web app"] = sv.get("exit") == 0
        if n >= 10_000_000:
            targets.append(target(f"peak RSS of any process, {label}", r["peak_rss_any_process_mb"] / 1024, "<=", 8, "GB"))
            if sv:
                targets.append(target(f"next-passage GET p95 through the web app, {label}", sv["get_next_ms"]["p95"],
                                      "<=", 50, "ms"))
    return benchmark_result("campaign-10m", "A campaign of 10M passages end to end: MS MARCO v2's layout, one machine",
                            init + run + report + serve, peers=("distributed", "uvicorn"), targets=targets, checks=checks,
                            notes=["simulate_campaign(n_passages, n_topics=50, n_groups=20, runs_per_group=(5, 5), seed=0, "
                                   "layout='msmarco-v2', shards): 100 runs of 20 groups + 2 baselines; the oracle at error "
                                   "rate 0.05, seed 7; configs/trec-dl-2022.toml with [campaign] workers.",
                                   "Peak RSS: the largest process of a step's tree (Dask workers included); the sum over "
                                   "its processes is in peak_rss_sum_mb."],
                            runs=[{k: v for k, v in r.items() if k != "steps"} for r in runs])
