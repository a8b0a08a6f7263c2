"""Benchmark: whole campaigns (`qrelkit campaign init` + `run --oracle`), stage by stage.

    python benchmarks/bench_campaign.py demo  [--repeat 3]      # (a) the demo campaign
    python benchmarks/bench_campaign.py large                   # (b) 1M passages, 50 topics, 100 runs
    python benchmarks/bench_campaign.py 10m [--workers 2]       # (c) 10M passages in 10 gzip shards, end to end

(a) **demo**: the campaign of `make demo` (`simulate campaign --passages 50000 --topics 30 --groups 8
--seed 1`, `configs/trec-dl-2022.toml`, the oracle at error rate 0.05, seed 7) end to end:
`campaign init`, then `Campaign.run` (every stage, the report included); the seconds of each
stage (the run's own summary), the seconds outside the stages and the CAL rounds. Medians over
``--repeat`` fresh campaign folders on the same generated data.

(b) **large**: `simulate_campaign(n_passages=1_000_000, n_topics=50, n_groups=49,
runs_per_group=(2, 2), seed=0)` — 98 group runs and 2 baselines, 100 runs of depth 100 — run as
two campaigns:

* ``protocol``: `configs/trec-dl-2022.toml` as it is (the oracle at error rate 0.05, seed 7):
  the stage times and the **orchestration overhead** = seconds of `Campaign.run` outside its
  stages / the sum of the stage seconds (target <= 5%); and, inside the CAL stage, the seconds
  spent neither computing batches (`cal.loop.issue_next_batches`), nor in the simulated
  assessor, nor loading features, nor in the stopping rule (the campaign's own bookkeeping);
* ``forced``: the same plus ``[campaign] skip = ["screening"]`` and stopping thresholds out of
  reach with ``max_rounds = 3``, so that every one of the 50 topics runs three CAL rounds in its 3
  threads (the protocol as written discards or accepts most simulated topics before or early in
  CAL: there is no round of 50 x 3 to time): **one CAL round** for 50 topics x 3 threads = the
  issue phase (150 batches computed and written, the features already loaded) plus the stopping
  rule afterwards (target <= 10 s), wall and CPU seconds; the simulated assessor's answering
  time is listed apart (a real round waits for people instead).

(c) **10m**: a campaign of 10M passages in an MS MARCO v2-shaped folder of 10 gzip shards, 50
topics, 100 runs of 20 groups, every step a command line in its own process, time and peak RSS
of every process (Dask workers included): see ``benchmarks/_campaign10m.py``.

Each writes ``OUT/bench-campaign-{demo,large,10m}.json`` and prints it; the generated data is kept under
``OUT`` and reused while its parameters match. The machine's load average is recorded before and
after (the machine may be shared).
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

from _machine import record_result  # noqa: E402

from qrelkit.campaign import Campaign, open_campaign_store  # noqa: E402
from qrelkit.campaign import rounds, stages  # noqa: E402
from qrelkit.simulate.campaign import simulate_campaign  # noqa: E402

CFG = ROOT / "configs" / "trec-dl-2022.toml"


def _simulated(out: Path, **params) -> Path:
    """A generated campaign under ``out`` (reused while its parameters match)."""
    summary = out / "summary.json"
    if summary.exists() and json.loads(summary.read_text()).get("bench_params") == params:
        return out
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    s = simulate_campaign(out, **params)
    s["bench_params"] = params
    s["bench_seconds"] = round(time.perf_counter() - t0, 1)
    summary.write_text(json.dumps(s, default=str))
    return out


class Timers:
    """Wall seconds of the CAL stage's parts, by wrapping the functions the stage calls."""

    def __init__(self) -> None:
        self.rounds: list[dict] = []
        self.total = {"issue_next_batches": 0.0, "oracle": 0.0, "features": 0.0, "stopping": 0.0}
        self._patched: list[tuple[object, str, object]] = []

    def _wrap(self, owner, name: str, key: str) -> None:
        real = getattr(owner, name)

        def timed(*a, **kw):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return real(*a, **kw)
            finally:
                dt, dc = time.perf_counter() - t0, time.process_time() - c0
                self.total[key] += dt
                if self.rounds:
                    self.rounds[-1][key] = self.rounds[-1].get(key, 0.0) + dt
                    self.rounds[-1][key + "_cpu"] = self.rounds[-1].get(key + "_cpu", 0.0) + dc

        self._patched.append((owner, name, real))
        setattr(owner, name, timed)

    def __enter__(self) -> "Timers":
        self._wrap(rounds, "issue_next_batches", "issue_next_batches")
        self._wrap(rounds, "features", "features")
        self._wrap(stages, "judge_batches", "oracle")
        self._wrap(rounds, "apply_stopping", "stopping")
        real_issue = rounds._issue

        def issue(ctx, rnds, topics):
            self.rounds.append({"round": max(rnds[q][0] for q in topics), "topics": len(topics),
                                "threads_active": int(len(rounds._active(ctx, set(topics))))})
            t0, c0 = time.perf_counter(), time.process_time()
            real_issue(ctx, rnds, topics)
            self.rounds[-1]["issue"] = time.perf_counter() - t0
            self.rounds[-1]["issue_cpu"] = time.process_time() - c0

        self._patched.append((rounds, "_issue", real_issue))
        rounds._issue = issue
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, real in reversed(self._patched):
            setattr(owner, name, real)


def campaign_once(sim: Path, folder: Path, config: Path, *, error_rate: float, seed: int) -> dict:
    shutil.rmtree(folder, ignore_errors=True)
    t0 = time.perf_counter()
    c = Campaign.init(folder, config=config, corpus=sim / "corpus.jsonl", topics=sim / "topics.tsv",
                      runs=sim / "runs", manifest=sim / "manifest.csv")
    t_init = time.perf_counter() - t0
    with Timers() as tm:
        t0 = time.perf_counter()
        res = c.run(oracle=sim / "qrels.txt", error_rate=error_rate, seed=seed)
        wall = time.perf_counter() - t0
    with open_campaign_store(folder) as s:
        cal_batches = int((s.batches.all()["kind"] == "cal").sum())
        judgments = s.counts()["judgments"]
    stage_sum = sum(res["seconds"].values())
    return {"state": res["state"], "topics": res["topics"], "init_s": round(t_init, 3), "run_wall_s": round(wall, 3),
            "stages_s": res["seconds"], "stage_sum_s": round(stage_sum, 3),
            "outside_stages_s": res["seconds_outside_stages"],
            "overhead_share": round(res["seconds_outside_stages"] / stage_sum, 5) if stage_sum else None,
            "cal_parts_s": {k: round(v, 3) for k, v in tm.total.items()},
            "cal_rounds": [{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()} for r in tm.rounds],
            "cal_batches": cal_batches, "judgments": judgments, "warnings": res["warnings"]}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def bench_demo(out: Path, repeat: int) -> dict:
    sim = _simulated(out / "demo-sim", n_passages=50000, n_topics=30, n_groups=8, seed=1)
    load0, reps = _load(), []
    for i in range(repeat):
        reps.append(campaign_once(sim, out / f"demo-campaign-{i}", CFG, error_rate=0.05, seed=7))
        print(f"demo repetition {i + 1}: run {reps[-1]['run_wall_s']} s, stages {reps[-1]['stage_sum_s']} s",
              file=sys.stderr)
    stage_names = list(reps[0]["stages_s"])
    med = {n: round(statistics.median(r["stages_s"][n] for r in reps), 3) for n in stage_names}
    return {"benchmark": "demo", "repeat": repeat, "load_before": load0, "load_after": _load(),
            "median_stage_s": med, "median_stage_sum_s": round(statistics.median(r["stage_sum_s"] for r in reps), 3),
            "median_outside_stages_s": statistics.median(r["outside_stages_s"] for r in reps),
            "median_init_s": statistics.median(r["init_s"] for r in reps), "repetitions": reps}


def bench_large(out: Path, passages: int, topics: int) -> dict:
    """Two campaigns on the same generated data: the protocol as written (stage times and the
    orchestration overhead), then every topic forced through three CAL rounds (their times)."""
    sim = _simulated(out / f"large-sim-{passages}", n_passages=passages, n_topics=topics, n_groups=49,
                     runs_per_group=(2, 2), seed=0)
    cfg = out / "large.toml"
    cfg.write_text(_large_config(CFG.read_text()))
    res = {"benchmark": "large", "passages": passages, "topics": topics,
           "runs": len(list((sim / "runs").iterdir())), "load_before": _load()}
    res["protocol"] = campaign_once(sim, out / "large-protocol", CFG, error_rate=0.05, seed=7)
    res["load_between"] = _load()
    forced = campaign_once(sim, out / "large-forced", cfg, error_rate=0.05, seed=7)
    res["load_after"] = _load()
    full = [x for x in forced["cal_rounds"] if x["threads_active"] >= 3 * topics]
    wall = [x["issue"] - x.get("features", 0.0) + x.get("stopping", 0.0) for x in full]
    cpu = [x["issue_cpu"] - x.get("features_cpu", 0.0) + x.get("stopping_cpu", 0.0) for x in full]
    cal, p = forced["stages_s"].get("cal", 0.0), forced["cal_parts_s"]
    res["forced"] = {**forced, "rounds_with_all_threads": len(full), "cal_round_s": [round(x, 3) for x in wall],
                     "cal_round_cpu_s": [round(x, 3) for x in cpu],
                     "median_cal_round_s": round(statistics.median(wall), 3) if wall else None,
                     "median_cal_round_cpu_s": round(statistics.median(cpu), 3) if cpu else None,
                     "cal_bookkeeping_s": round(cal - p["issue_next_batches"] - p["oracle"] - p["features"]
                                                - p["stopping"], 3)}
    res["targets"] = {"overhead_share_max": 0.05, "cal_round_max_s": 10.0}
    return res


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", choices=("demo", "large", "10m"))
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "campaign")
    ap.add_argument("--repeat", type=int, default=3, help="demo: campaigns to run (medians)")
    ap.add_argument("--passages", type=int, default=None, help="large, 10m: corpus size (1M, 10M)")
    ap.add_argument("--topics", type=int, default=50, help="large: topics")
    ap.add_argument("--shards", type=int, default=10, help="10m: corpus files")
    ap.add_argument("--workers", type=int, default=2, help="10m: [campaign] workers (Dask; 0: one process)")
    ap.add_argument("--web-judgments", type=int, default=100, help="10m: judgments per assessor through the web app")
    ap.add_argument("--web-think", type=float, default=0.5, help="10m: the assessors' mean think time (s)")
    ap.add_argument("--serve-again", action="store_true", help="10m: measure the web step again")
    ap.add_argument("--sim", type=Path, default=None, help="10m: the generated data (default OUT/10m-sim)")
    ap.add_argument("--fresh", action="store_true", help="10m: measure every step again (default: go on)")
    ap.add_argument("--rss-limit-gb", type=float, default=12.0, help="10m: kill a step whose process passes this")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.which == "10m":
        from _campaign10m import bench_10m  # lazy: psutil (the [bench] extra) only for this case

        res = bench_10m(args.out, passages=args.passages or 10_000_000, shards=args.shards, workers=args.workers,
                        judgments=args.web_judgments, think=args.web_think, sim=args.sim, fresh=args.fresh,
                        limit_gb=args.rss_limit_gb, serve_again=args.serve_again)
    elif args.which == "demo":
        res = bench_demo(args.out, args.repeat)
    else:
        res = bench_large(args.out, args.passages or 1_000_000, args.topics)
    return record_result(res, args.out / f"bench-campaign-{args.which}.json", "bench_campaign.py", argv)


if __name__ == "__main__":
    sys.exit(main())
