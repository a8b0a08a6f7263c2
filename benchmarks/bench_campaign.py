"""Benchmark: whole campaigns (`qrelkit campaign init` + `run --oracle`), stage by stage.

    python benchmarks/bench_campaign.py                          # (a) and (b), two sizes each: one result
    python benchmarks/bench_campaign.py demo  [--repeat 3]      # (a) the demo campaign
    python benchmarks/bench_campaign.py large                   # (b) 250k and 1M passages, 50 topics, 100 runs
    python benchmarks/bench_campaign.py 10m [--workers 2]       # (c) 2M and 10M passages in 10 gzip shards, end to end

(a) **demo**: the campaign of `make demo` (`simulate campaign --passages 50000 --topics 30 --groups 8
--seed 1`, `configs/trec-dl-2022.toml`, the oracle at error rate 0.05, seed 7) end to end:
`campaign init`, then `Campaign.run` (every stage, the report included), ``--repeat`` fresh
campaign folders on the same generated data in one fresh process: the first is what a user's first
`campaign run` pays (numba's kernels loaded from its cache), the others the warm repeats; the
seconds of each stage (the run's own summary) and outside the stages. Two sizes
(``--demo-passages``, default 50,000: make demo's, and 100,000 of the same shape) [unit: passage].

(b) **large**: `simulate_campaign(n_passages=N, n_topics=50, n_groups=49, runs_per_group=(2, 2),
seed=0)` — 98 group runs and 2 baselines, 100 runs of depth 100 — at two sizes (``--passages``,
default 250,000 and 1,000,000) [passage: the topics and runs are fixed, the corpus grows], run as
two campaigns, each in its own fresh process:

* ``protocol``: `configs/trec-dl-2022.toml` as it is (the oracle at error rate 0.05, seed 7):
  init + run, the stage times and the **orchestration overhead** = seconds of `Campaign.run`
  outside its stages / the sum of the stage seconds (target <= 5% at 1M); and, inside the CAL
  stage, the seconds spent neither computing batches (`cal.loop.issue_next_batches`), nor in the
  simulated assessor, nor loading features, nor in the stopping rule (the campaign's own
  bookkeeping);
* ``forced``: the same plus ``[campaign] skip = ["screening"]`` and stopping thresholds out of
  reach with ``max_rounds = 3``, so that every one of the 50 topics runs three CAL rounds in its 3
  threads (the protocol as written discards or accepts most simulated topics before or early in
  CAL: there is no round of 50 x 3 to time): **one CAL round** for 50 topics x 3 threads = the
  issue phase (150 batches computed and written, the features loading subtracted) plus the
  stopping rule afterwards (target <= 10 s at 1M), wall and CPU seconds: round 1 is the first
  call (the first CAL work of the process), rounds 2 and 3 the warm repeats; the simulated
  assessor's answering time is listed apart (a real round waits for people instead).

(c) **10m**: a campaign of 10M passages (and 2M: ``--passages``) in an MS MARCO v2-shaped folder
of 10 gzip shards, 50 topics, 100 runs of 20 groups, every step a command line in its own process,
time, CPU and peak RSS of every process (Dask workers included): see ``benchmarks/_campaign10m.py``.

(a) and (b) write one result, ``bench-out/campaign.json`` (``--json-out``; ``benchmarks/_results.py``'s
shape, for ``scripts/gen_benchmarks_doc.py``; ``demo`` or ``large`` alone write only their tasks
into it); (c) writes ``bench-out/campaign-10m.json``. Every measurement runs in a fresh child process, which reports
its wall and CPU seconds and peak RSS; the parent records the cores other processes used
meanwhile. The generated data is kept under ``OUT`` and reused while its parameters match.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _machine import ChildFailed, emit_result, peak_rss_mb, run_child_process  # noqa: E402
from _procs import tool_from_processes  # noqa: E402
from _results import benchmark_result, call, size_result, target, write_result  # noqa: E402

CFG = ROOT / "configs" / "trec-dl-2022.toml"
DEMO = dict(n_topics=30, n_groups=8, seed=1)
LARGE = dict(n_groups=49, runs_per_group=(2, 2), seed=0)


def _simulated(out: Path, **params) -> Path:
    """A generated campaign under ``out`` (reused while its parameters match)."""
    from qrelkit.simulate.campaign import simulate_campaign

    summary = out / "summary.json"
    if summary.exists() and json.loads(summary.read_text()).get("bench_params") == json.loads(json.dumps(params)):
        return out
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    s = simulate_campaign(out, **params)
    s["bench_params"] = params
    s["bench_seconds"] = round(time.perf_counter() - t0, 1)
    summary.write_text(json.dumps(s, default=str))
    return out


def _cpu() -> float:
    return time.process_time()


class Timers:
    """Wall seconds of the CAL stage's parts, by wrapping the functions the stage calls."""

    def __init__(self) -> None:
        self.rounds: list[dict] = []
        self.total = {"issue_next_batches": 0.0, "oracle": 0.0, "features": 0.0, "stopping": 0.0}
        self._patched: list[tuple[object, str, object]] = []

    def _wrap(self, owner, name: str, key: str) -> None:
        real = getattr(owner, name)

        def timed(*a, **kw):
            t0, c0 = time.perf_counter(), _cpu()
            try:
                return real(*a, **kw)
            finally:
                dt, dc = time.perf_counter() - t0, _cpu() - c0
                if key != "oracle" or self.rounds:  # the simulated assessor also answers the pool stages
                    self.total[key] += dt
                if self.rounds:
                    self.rounds[-1][key] = self.rounds[-1].get(key, 0.0) + dt
                    self.rounds[-1][key + "_cpu"] = self.rounds[-1].get(key + "_cpu", 0.0) + dc

        self._patched.append((owner, name, real))
        setattr(owner, name, timed)

    def __enter__(self) -> "Timers":
        from qrelkit.campaign import judging, rounds  # lazy: the child's timed imports come first

        self._wrap(rounds, "issue_next_batches", "issue_next_batches")
        self._wrap(rounds, "features", "features")
        self._wrap(judging, "judge_batches", "oracle")  # the simulated assessor
        self._wrap(rounds, "apply_stopping", "stopping")
        real_issue = rounds._issue

        def issue(ctx, rnds, topics):
            self.rounds.append({"round": max(rnds[q][0] for q in topics), "topics": len(topics),
                                "threads_active": int(len(rounds._active(ctx, set(topics))))})
            t0, c0 = time.perf_counter(), _cpu()
            real_issue(ctx, rnds, topics)
            self.rounds[-1]["issue"] = time.perf_counter() - t0
            self.rounds[-1]["issue_cpu"] = _cpu() - c0

        self._patched.append((rounds, "_issue", real_issue))
        rounds._issue = issue
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, real in reversed(self._patched):
            setattr(owner, name, real)


def campaign_once(sim: Path, folder: Path, config: Path, *, error_rate: float, seed: int) -> dict:
    """``Campaign.init`` + ``Campaign.run`` on a new folder: the figures of the run (wall and CPU
    of init + run in ``call``)."""
    from qrelkit.campaign import Campaign, open_campaign_store

    shutil.rmtree(folder, ignore_errors=True)
    t0, c0 = time.perf_counter(), _cpu()
    c = Campaign.init(folder, config=config, corpus=sim / "corpus.jsonl", topics=sim / "topics.tsv",
                      runs=sim / "runs", manifest=sim / "manifest.csv")
    t_init = time.perf_counter() - t0
    with Timers() as tm:
        t1 = time.perf_counter()
        res = c.run(oracle=sim / "qrels.txt", error_rate=error_rate, seed=seed)
        wall = time.perf_counter() - t1
    one = call(time.perf_counter() - t0, _cpu() - c0)
    with open_campaign_store(folder) as s:
        cal_batches = int((s.batches.all()["kind"] == "cal").sum())
        judgments = s.counts()["judgments"]
    stage_sum = sum(res["seconds"].values())
    return {"call": one, "state": res["state"], "topics": res["topics"], "init_s": round(t_init, 3),
            "run_wall_s": round(wall, 3), "stages_s": res["seconds"], "stage_sum_s": round(stage_sum, 3),
            "outside_stages_s": res["seconds_outside_stages"],
            "overhead_share": round(res["seconds_outside_stages"] / stage_sum, 5) if stage_sum else None,
            "cal_parts_s": {k: round(v, 3) for k, v in tm.total.items()},
            "cal_rounds": [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()} for r in tm.rounds],
            "cal_batches": cal_batches, "judgments": judgments, "warnings": res["warnings"]}


# =========================================================================== children


def _import_s() -> float:
    t0 = time.perf_counter()
    import qrelkit.campaign  # noqa: F401  (timed apart from the work: the first call is the work's)
    import qrelkit.simulate.campaign  # noqa: F401

    return time.perf_counter() - t0


def child_demo(a) -> dict:
    """``--repeat`` demo campaigns in this fresh process."""
    import_s = _import_s()
    sim = demo_sim(a.out, a.passages)
    reps = [campaign_once(sim, a.out / f"demo-campaign-{a.passages}-{i}", CFG, error_rate=0.05, seed=7)
            for i in range(a.repeat)]
    for r in reps:
        print(f"demo {a.passages:,}: run {r['run_wall_s']} s, stages {r['stage_sum_s']} s", file=sys.stderr, flush=True)
    return {"import_s": import_s, "first": reps[0]["call"], "warm": [r["call"] for r in reps[1:]],
            "repetitions": reps, "peak_rss_mb": peak_rss_mb()}


def child_large(a) -> dict:
    """One campaign of the large data in this fresh process: the protocol as written, or forced."""
    import_s = _import_s()
    sim = large_sim(a.out, a.passages, a.topics)
    cfg = CFG
    if a.child == "forced":
        cfg = a.out / "large.toml"
        cfg.write_text(_large_config(CFG.read_text()))
    r = campaign_once(sim, a.out / f"large-{a.child}-{a.passages}", cfg, error_rate=0.05, seed=7)
    print(f"large {a.child} {a.passages:,}: run {r['run_wall_s']} s, stages {r['stage_sum_s']} s, outside "
          f"{r['outside_stages_s']} s", file=sys.stderr, flush=True)
    return {"import_s": import_s, **r, "peak_rss_mb": peak_rss_mb()}


def demo_sim(out: Path, passages: int) -> Path:
    return _simulated(out / ("demo-sim" if passages == 50_000 else f"demo-sim-{passages}"), n_passages=passages, **DEMO)


def large_sim(out: Path, passages: int, topics: int) -> Path:
    return _simulated(out / f"large-sim-{passages}", n_passages=passages, n_topics=topics, **LARGE)


def _large_config(protocol: str) -> str:
    """The protocol file with its [campaign] and [stopping] keys overridden by the benchmark's."""
    out, skip = [], False
    for line in protocol.splitlines():
        if line.startswith("["):
            skip = line.strip() == "[campaign]"
        if skip:
            continue
        if line.startswith(("accept_min_judged", "reject_min_judged")):
            continue
        out.append(line)
    text = "\n".join(out) + "\n"
    return text.replace("[stopping]\n", "[stopping]\n# out of reach: every topic runs max_rounds CAL rounds\n"
                        "accept_min_judged = 1000000\nreject_min_judged = 1000000\n") + \
        '\n[campaign]\ncombine = "vote"\nskip = ["screening"]\nmax_rounds = 3\n'


# =========================================================================== the parent


def _child(kind: str, passages: int, a) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--passages", str(passages), "--out",
           str(a.out), "--repeat", str(a.repeat), "--topics", str(a.topics)]
    r = run_child_process(cmd, idle_wait=a.wait_idle, cwd=ROOT, stderr_tail=5000)
    r["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return r


def demo_size(passages: int, a) -> tuple[dict, dict]:
    demo_sim(a.out, passages)  # generated here, untimed, so that the child's peak RSS is the campaign's
    r = _child("demo", passages, a)
    reps = r["repetitions"]
    warm = reps[1:] or reps  # the stages of the warm repeats (the first call's are in the JSON)
    stages = {n: statistics.median(x["stages_s"][n] for x in warm) for n in reps[0]["stages_s"]}
    stages["outside the stages"] = statistics.median(x["outside_stages_s"] for x in warm)
    stages["init"] = statistics.median(x["init_s"] for x in warm)
    same = all((x["state"], x["judgments"], x["cal_batches"]) == (reps[0]["state"], reps[0]["judgments"],
                                                                   reps[0]["cal_batches"]) for x in reps)
    tool = tool_from_processes("qrelkit", [r], stages=stages, judgments=reps[0]["judgments"],
                               cal_batches=reps[0]["cal_batches"], repetitions=reps)
    label = f"{passages:,} passages" + (" (make demo's)" if passages == 50_000 else "")
    return (size_result(label, passages, "passage", [tool], task="demo campaign (30 topics, 8 groups): init + run"),
            {f"demo campaign, {passages:,} passages: every repetition the same state, judgments and CAL batches": same})


def large_size(passages: int, a) -> tuple[list[dict], dict, list[dict]]:
    large_sim(a.out, passages, a.topics)
    prot = _child("protocol", passages, a)
    forced = _child("forced", passages, a)
    label = f"{passages:,} passages"
    stages = {**prot["stages_s"], "outside the stages": prot["outside_stages_s"], "init": prot["init_s"],
              "CAL: the campaign's own bookkeeping": _bookkeeping(prot)}
    p_tool = tool_from_processes("qrelkit", [{**prot, "first": prot["call"]}], stages=stages,
                                 note="one campaign per size in its own process: "
                                      "no warm repeat, the warm columns repeat the first call",
                                 overhead_share=prot["overhead_share"], judgments=prot["judgments"],
                                 cal_rounds=prot["cal_rounds"])
    full = [x for x in forced["cal_rounds"] if x["threads_active"] >= 3 * a.topics]
    rounds = [call(x["issue"] - x.get("features", 0.0) + x.get("stopping", 0.0),
                   x["issue_cpu"] - x.get("features_cpu", 0.0) + x.get("stopping_cpu", 0.0)) for x in full]
    r_tool = tool_from_processes(
        "qrelkit", [{**forced, "first": rounds[0] if rounds else None, "warm": rounds[1:]}],
        stages={"features (round 1, subtracted)": sum(x.get("features", 0.0) for x in full[:1]),
                "simulated assessor per round (not counted)": statistics.median(x.get("oracle", 0.0) for x in full)
                if full else None},
        note="round 1 is the campaign's first CAL work in its process (the features build subtracted); "
             "rounds 2 and 3 the warm repeats", rounds=forced["cal_rounds"])
    sizes = [size_result(label, passages, "passage", [p_tool],
                         task=f"campaign init + run, the protocol as written ({a.topics} topics, 100 runs)")]
    if rounds:
        sizes.append(size_result(label, passages, "passage", [r_tool],
                                 task=f"one CAL round, {a.topics} topics x 3 threads (forced protocol)"))
    checks = {f"forced campaign, {label}: 3 rounds with every topic's 3 threads": len(full) == 3}
    targets = []
    if passages >= 1_000_000:
        targets.append(target(f"orchestration overhead (outside the stages / in them), {label}",
                              100 * prot["overhead_share"], "<=", 5, "%"))
        if rounds:
            targets.append(target(f"one CAL round of {a.topics} topics x 3 threads, {label}, warm median",
                                  r_tool["warm"]["wall_s"], "<=", 10, "s"))
    return sizes, checks, targets


def _bookkeeping(r: dict) -> float:
    p = r["cal_parts_s"]
    return round(r["stages_s"].get("cal", 0.0) - p["issue_next_batches"] - p["oracle"] - p["features"] - p["stopping"], 3)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", nargs="?", choices=("all", "demo", "large", "10m"), default="all",
                    help="all (default): demo and large into one result")
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "campaign", help="the generated data and campaigns")
    ap.add_argument("--json-out", type=Path, default=None,
                    help="the result (default bench-out/campaign.json; 10m: bench-out/campaign-10m.json)")
    ap.add_argument("--repeat", type=int, default=3, help="demo: campaigns per process (the first, then warm)")
    ap.add_argument("--demo-passages", nargs="+", type=int, default=[50_000, 100_000], help="demo: the sizes")
    ap.add_argument("--passages", nargs="+", type=int, default=None,
                    help="large: the sizes (250k 1M); 10m: the sizes (2M 10M)")
    ap.add_argument("--topics", type=int, default=50, help="large: topics")
    ap.add_argument("--wait-idle", type=float, default=30.0, help="before each process, wait up to this long for "
                    "a quiet machine")
    ap.add_argument("--shards", type=int, default=10, help="10m: corpus files")
    ap.add_argument("--workers", type=int, default=2, help="10m: [campaign] workers (Dask; 0: one process)")
    ap.add_argument("--web-judgments", type=int, default=100, help="10m: judgments per assessor through the web app")
    ap.add_argument("--web-think", type=float, default=0.5, help="10m: the assessors' mean think time (s)")
    ap.add_argument("--serve-again", action="store_true", help="10m: measure the web step again")
    ap.add_argument("--sim", type=Path, default=None, help="10m: the generated 10M data (default OUT/10m-sim)")
    ap.add_argument("--fresh", action="store_true", help="10m: measure every step again (default: go on)")
    ap.add_argument("--rss-limit-gb", type=float, default=12.0, help="10m: kill a step whose process passes this")
    ap.add_argument("--child", choices=("demo", "protocol", "forced"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.out = args.out.resolve()  # the children run in the repository's root
    args.out.mkdir(parents=True, exist_ok=True)
    if args.child:
        args.passages = args.passages[0]
        emit_result(child_demo(args) if args.child == "demo" else child_large(args))
        return 0
    if args.which == "10m":
        from _campaign10m import bench_10m, shared_result  # lazy: psutil (the [bench] extra) only for this case

        runs = [bench_10m(args.out, passages=n, shards=args.shards, workers=args.workers, judgments=args.web_judgments,
                          think=args.web_think, sim=args.sim if n == 10_000_000 else None, fresh=args.fresh,
                          limit_gb=args.rss_limit_gb, serve_again=args.serve_again)
                for n in (args.passages or [2_000_000, 10_000_000])]
        res = shared_result(runs)
        write_result(res, args.json_out or ROOT / "bench-out" / "campaign-10m.json", "bench_campaign.py", argv)
        return 0 if all(res["checks"].values()) else 1
    sizes, checks, targets = [], {}, []
    try:
        if args.which in ("all", "demo"):
            for n in args.demo_passages:
                s, c = demo_size(n, args)
                sizes.append(s)
                checks.update(c)
        if args.which in ("all", "large"):
            large = [large_size(n, args) for n in (args.passages or [250_000, 1_000_000])]
            for i in range(2):  # the protocol's sizes together, then the rounds'
                sizes += [x[0][i] for x in large if len(x[0]) > i]
            for _, c, t in large:
                checks.update(c)
                targets += t
    except ChildFailed as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    res = benchmark_result("campaign", "Campaigns: whole runs, orchestration overhead, one CAL round", sizes,
                           targets=targets, checks=checks, notes=[
        "Campaign.init + Campaign.run(oracle=qrels, error_rate=0.05, seed=7), configs/trec-dl-2022.toml; the "
        "stages are the run's own seconds, 'outside the stages' the orchestration.",
        "A CAL round = the issue phase (every active thread's batch computed and written) + the stopping rule "
        "after it; the simulated assessor's answers are not counted (a real round waits for people)."])
    write_result(res, args.json_out or ROOT / "bench-out" / "campaign.json", "bench_campaign.py", argv)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
