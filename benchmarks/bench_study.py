"""Budget-study benchmark (issue 23): every registered adjudication strategy at ten budgets (10%,
20%, ..., 100% of each topic's pool) on synthetic data shaped like TREC-8 ad hoc.

    python benchmarks/bench_study.py [--repeats 1] [--workers 2] [--batch 10] [--wait-idle 60]

Data (made once, deterministic, reused while the parameters match):

* the collection of ``bench_budget.py``: ``simulate_collection(seed=0)`` (``qrelkit simulate
  collection``) — 71 runs x 50 topics x 1,000 documents (3.55M lines) from 40 groups, their depth-100
  pool judged (1,704 documents and 100 relevant per topic; TREC-8: 1,736 and 94), kept as canonical
  Parquet in ``bench-out/budget-trec8/``.

Measured in a fresh subprocess (imports and data loading excluded; file cache warm):
``budget_study(runs, qrels, depth=100, workers=W, params=AdjudicateParams(batch=B))`` — the
replays, the distinct (topic, judgments) scorings, the leaderboards, tau, tau_AP, rank drops, the
paired t-tests of every two runs at every budget, the tables — and ``write_budget_report``.
Reported: wall and CPU time (the process and its workers), the cores other processes used
meanwhile (the machine is shared), the study's stages and counts. ``--check`` also compares one
strategy's leaderboard at one budget with ``evaluate`` on its qrels found so far, computed here.
Results: a Markdown table on stdout and ``bench-out/bench_study.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import busy_cpu_s, others_cores, peak_rss_mb, wait_idle  # noqa: E402

POOL_DEPTH, SEED = 100, 0


def ensure_data(work: Path) -> dict:
    """The TREC-8-shaped collection of ``bench_budget.py`` (``simulate_collection``, seed 0) in
    ``work``: one generator for both benchmarks (made once, reused while its parameters match)."""
    from bench_budget import ensure_data as collection

    return collection(work, SEED)


def child(work: Path, workers: int, batch: int, out: Path, check: bool) -> None:
    import scipy.stats  # noqa: F401  (imports are not timed)

    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.tables import read_table
    from qrelkit.pooler import AdjudicateParams
    from qrelkit.reuse import budget_study, write_budget_report

    runs, qrels = read_table(work / "runs.parquet"), read_qrels(work / "qrels.parquet")
    params = AdjudicateParams.from_config(None, batch=batch)
    c0, ch0, b0 = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN), busy_cpu_s()
    t0 = time.perf_counter()
    res = budget_study(runs, qrels, depth=POOL_DEPTH, workers=workers, params=params)
    wall = time.perf_counter() - t0
    b1, ch1 = busy_cpu_s(), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - c0 + (ch1.ru_utime - ch0.ru_utime) + (ch1.ru_stime - ch0.ru_stime)
    t1 = time.perf_counter()
    write_budget_report(res, out / "report")
    r = {"wall_s": wall, "cpu_s": cpu, "other_load_cores": others_cores(b0, b1, cpu, wall),
         "report_s": time.perf_counter() - t1, "stages": res.timings, "rss_mb": peak_rss_mb(),
         "rss_workers_mb": ch1.ru_maxrss / 1024.0,
         "summary": res.summary.to_pandas()[["strategy", "budget", "judgments_mean", "relevant_found_mean",
                                             "kendall_tau", "tau_ap", "max_rank_drop",
                                             "significance_changes"]].to_dict(orient="records")}
    if check:
        r["check_leaderboard_equals_evaluate"] = spot_check(runs, qrels, res, params)
    (out / "child.json").write_text(json.dumps(r, default=float))


def spot_check(runs, qrels, res, params) -> bool:
    """mm-ns at 20%: the study's leaderboard against evaluate() on the qrels found so far, made here
    from the adjudication module's own replay."""
    import math

    import pyarrow as pa

    from qrelkit.evaluate import evaluate
    from qrelkit.pooler import depth_pool, simulate_order, topic_pools

    truth = {(q, d): g for q, d, g in zip(qrels["qid"].to_pylist(), qrels["docid"].to_pylist(), qrels["rel"].to_pylist())}
    rows = []
    for qid, tp in topic_pools(depth_pool(runs, POOL_DEPTH)).items():
        rel = np.array([truth.get((qid, d), 0) >= 1 for d in tp.docids])
        order = simulate_order("mm-ns", tp, rel, budget=math.ceil(tp.n_docs / 5), batch=params.batch, params=params)
        rows += [(qid, tp.docids[i], max(truth.get((qid, tp.docids[i]), 0), 0)) for i in order]
    q = pa.table({"qid": [r[0] for r in rows], "docid": [r[1] for r in rows], "rel": pa.array([r[2] for r in rows], pa.int32())})
    want = evaluate(runs, q, ["AP"], rel=1).summary.to_pandas().set_index("run")["value"]
    got = res.runs.to_pandas()
    got = got[(got["strategy"] == "mm-ns") & (got["budget"] == "20%")].set_index("run")["score"]
    return bool(np.allclose(got.sort_index().to_numpy(), want.sort_index().to_numpy(), rtol=0, atol=1e-12))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=10, help="judgments per round ([adjudicate] batch)")
    p.add_argument("--wait-idle", type=float, default=60.0, help="before each measurement, wait up to this many "
                   "seconds for other processes to use < 0.3 cores")
    p.add_argument("--check", action="store_true", help="compare one leaderboard with evaluate() (untimed)")
    p.add_argument("--work-dir", type=Path, default=ROOT / "bench-out" / "budget-trec8")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        child(a.work_dir, a.workers, a.batch, a.work_dir, a.check)
        return 0
    info = ensure_data(a.work_dir)
    runs_ = []
    for i in range(a.repeats):
        before = wait_idle(a.wait_idle, threshold=0.3)
        cmd = [sys.executable, __file__, "--child", "--work-dir", str(a.work_dir), "--workers", str(a.workers),
               "--batch", str(a.batch)] + (["--check"] if a.check and i == 0 else [])
        subprocess.run(cmd, check=True)
        r = json.loads((a.work_dir / "child.json").read_text())
        r["idle_before"] = before
        runs_.append(r)
        print(f"  #{i + 1}: wall {r['wall_s']:.1f} s, cpu {r['cpu_s']:.1f} s, other load before {before:.2f} / "
              f"during {r['other_load_cores']:.2f} cores, report {r['report_s']:.1f} s", file=sys.stderr)
    r = min(runs_, key=lambda x: x["wall_s"])
    st = r["stages"]
    c = info["summary"]
    print(f"\n{c['runs']} runs x {c['topics']} topics x {c['run_length']} documents; depth-{POOL_DEPTH} pool "
          f"{c['pool_per_topic']['mean']:.0f} documents per topic, {c['relevant_per_topic']['mean']:.1f} relevant per topic; "
          f"7 strategies x 10 budgets, batch {a.batch}, {a.workers} workers\n")
    print("| wall (best) | CPU (all processes) | other load | prepare | orders | scoring | leaderboards | tables | "
          "scorings (distinct topic judgments) | of | list lines scored | evaluate() calls | peak RSS main / worker |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(f"| {r['wall_s']:.1f} s | {r['cpu_s']:.1f} s | {r['other_load_cores']:.2f} cores | {st['prepare']:.1f} | "
          f"{st['orders']:.1f} | {st['scoring']:.1f} | {st['leaderboards']:.1f} | {st['tables']:.1f} | {st['scorings']} | "
          f"{st['topic_scorings']} | {st['list_lines_scored']:,} | {st['evaluate_calls']} | {r['rss_mb']:.0f} / "
          f"{r['rss_workers_mb']:.0f} MB |")
    if "check_leaderboard_equals_evaluate" in runs_[0]:
        print(f"\ncheck: leaderboard equals evaluate() = {runs_[0]['check_leaderboard_equals_evaluate']}")
    (ROOT / "bench-out").mkdir(exist_ok=True)
    (ROOT / "bench-out" / "bench_study.json").write_text(json.dumps({"data": info, "runs": runs_}, indent=1,
                                                                     default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
