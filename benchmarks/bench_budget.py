"""Judging budgets at TREC's scale: every adjudication strategy orders the whole pool of every topic
of a TREC-8-shaped collection.

    python benchmarks/bench_budget.py [--repeats 3] [--warm 5] [--wait-idle 60] [--seed 0]

Data (made once, deterministic, reused while the parameters match): ``simulate_collection(seed=)``
(qrelkit.simulate.collection: 50 topics, 71 runs of 1,000 documents from 40 groups, all pooled)
written to ``bench-out/budget-trec8/`` (``runs/``, ``qrels.txt``, ``manifest.csv``: what ``qrelkit
simulate collection -o DIR --seed 0`` writes) and kept as canonical Parquet for the children.

Case 1, the library. Measured, each in a fresh subprocess (imports and loading the Parquet runs
and qrels excluded): the pool, ``depth_pool(runs, 100)`` (about 85,000 documents); then for one
strategy ``adjudicate(pool, qrels, strategy, budget=None)``, which replays it over the whole pool of
every topic with the qrels as the oracle, one document per round (a budget b is the first b of that
order, so one call gives every budget). Its first call in the process (numba imported and its
kernel loaded from the on-disk cache, or compiled: ``cold``, a child with an empty
``NUMBA_CACHE_DIR``), then ``--warm`` repeats in the same process (median). Wall (perf_counter) and
CPU (process_time) seconds; the cores other processes used meanwhile. Checks (untimed): every
order holds each pool document of its topic exactly once; ``docid``'s is the pool in docid order.

Case 2, the command (HOOK for ``qrelkit study budget``, issue 23): when the installed qrelkit has
that command, it runs on the same files (:data:`STUDY_BUDGET_ARGV`, every strategy, budgets up to
the whole pool), in a fresh process, ``--repeats`` times; otherwise the case is reported as skipped.

Peers: none. No Python tool adjudicates a pool adaptively: the bandit methods' authors (Losada,
Parapar and Barreiro) published R scripts, and trectools makes static pools only (depth, fusion:
RBP, RRF); the figures are qrelkit's alone, against the issue's target (every strategy over every
budget in <= 60 s). Results: a Markdown table on stdout and ``bench-out/bench_budget.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import ChildFailed, busy_cpu_s, emit_result, others_cores, run_child_process  # noqa: E402

DEPTH = 100
PEERS = ("none: no Python tool adjudicates a pool adaptively (the bandit methods' authors published R "
         "scripts; trectools makes static depth and fusion pools only)")
#: HOOK: the argv of ``qrelkit study budget`` on the collection (DATA: the folder of runs/, qrels.txt,
#: manifest.csv; OUT: a fresh output folder). Adjust here when the command lands.
STUDY_BUDGET_ARGV = ["study", "budget", "{DATA}/runs", "-q", "{DATA}/qrels.txt", "-m", "{DATA}/manifest.csv",
                     "--depth", "100", "--batch", "1", "-o", "{OUT}"]  # every strategy, every 10% up to the pool


def ensure_data(work: Path, seed: int) -> dict:
    """The collection's files and canonical Parquet in ``work`` (made when absent or stale)."""
    info_path = work / "data.json"
    stamp = {"seed": seed, "generator": "simulate_collection", "depth": DEPTH}
    if info_path.exists() and json.loads(info_path.read_text()).get("stamp") == stamp:
        return json.loads(info_path.read_text())
    from qrelkit.io.tables import write_table
    from qrelkit.simulate.collection import simulate_collection, write_collection

    t0 = time.perf_counter()
    c = simulate_collection(seed=seed, depth=DEPTH)
    gen = time.perf_counter() - t0
    summary = write_collection(c, work)
    write_table(c.runs, work / "runs.parquet", kind="runs", params={"seed": seed})
    write_table(c.qrels, work / "qrels.parquet", kind="qrels", params={"seed": seed})
    info = {"stamp": stamp, "generate_s": gen, "summary": summary}
    info_path.write_text(json.dumps(info, indent=1) + "\n")
    return info


def _timed(fn):
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def child(work: Path, strategy: str, warm: int) -> None:
    """One fresh process: the pool (first call, then ``warm`` repeats) and one strategy's whole
    order (likewise); emits the figures and the checks."""
    import pyarrow.compute as pc

    from qrelkit.io.tables import read_table
    from qrelkit.pooler import adjudicate, depth_pool, topic_pools

    runs, qrels = read_table(work / "runs.parquet"), read_table(work / "qrels.parquet")
    b0 = busy_cpu_s()
    t_all = time.perf_counter()
    pool, pool_first, pool_first_cpu = _timed(lambda: depth_pool(runs, DEPTH))
    pool_warm = [_timed(lambda: depth_pool(runs, DEPTH))[1:] for _ in range(warm)]
    lists = [_timed(lambda: topic_pools(pool))[1:] for _ in range(warm)]
    order, first, first_cpu = _timed(lambda: adjudicate(pool, qrels, strategy))
    again = [_timed(lambda: adjudicate(pool, qrels, strategy))[1:] for _ in range(warm)]
    wall = time.perf_counter() - t_all
    cpu = pool_first_cpu + first_cpu + sum(c for _, c in pool_warm + lists + again)
    per_topic = order.group_by("qid").aggregate([("docid", "count_distinct"), ("docid", "count")]).to_pandas()
    sizes = pool.group_by("qid").aggregate([("docid", "count")]).to_pandas().set_index("qid")["docid_count"]
    whole = bool((per_topic.set_index("qid")["docid_count_distinct"] == sizes).all()
                 and (per_topic["docid_count"] == per_topic["docid_count_distinct"]).all()
                 and len(per_topic) == len(sizes))
    checks = {"whole_pool_once": whole}
    if strategy == "docid":
        got = order.to_pandas().groupby("qid", sort=False)["docid"].apply(list)
        checks["docid_order"] = all(v == sorted(v) for v in got)
    emit_result({"strategy": strategy, "pool_rows": pool.num_rows, "order_rows": order.num_rows,
                 "relevant_found": int(pc.sum(order["relevant"]).as_py()),
                 "pool_first": [pool_first, pool_first_cpu], "pool_warm": pool_warm, "topic_pools_warm": lists,
                 "first": [first, first_cpu], "warm": again, "checks": checks,
                 "others_cores": others_cores(b0, busy_cpu_s(), cpu, wall)})


def study_child(work: Path, out: Path) -> None:
    """The ``qrelkit study budget`` command in this process (case 2): its wall and CPU."""
    from qrelkit.cli import run

    argv = [a.replace("{DATA}", str(work)).replace("{OUT}", str(out)) for a in STUDY_BUDGET_ARGV]
    _, wall, cpu = _timed(lambda: run(argv))
    emit_result({"argv": argv, "wall": wall, "cpu": cpu})


def study_command_exists() -> bool:
    """Whether the installed qrelkit has ``qrelkit study budget``."""
    from qrelkit.cli import app

    for g in app.registered_groups:
        if g.name == "study":
            return any((c.name or c.callback.__name__) == "budget" for c in g.typer_instance.registered_commands)
    return False


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def run_library_case(a, work: Path) -> dict:
    from qrelkit.pooler import available_strategies

    results: dict[str, dict] = {}
    for s in available_strategies():
        cmd = [sys.executable, __file__, "--child", s, "--work-dir", str(work), "--warm", str(a.warm)]
        with tempfile.TemporaryDirectory(prefix="numba-cold-") as cache:
            cold = run_child_process(cmd, idle_wait=a.wait_idle, env={"NUMBA_CACHE_DIR": cache}, stderr_tail=3000)
        cached = [run_child_process(cmd, idle_wait=a.wait_idle, stderr_tail=3000) for _ in range(a.repeats)]
        results[s] = {"cold": cold, "cached": cached}
        w = [x for r in cached for x in r["warm"]]
        print(f"  {s}: cold first {cold['first'][0]:.2f} s, first {med([r['first'][0] for r in cached]):.2f} s, "
              f"warm {med([x[0] for x in w]):.2f} s, other load {med([r['others_cores'] for r in cached]):.2f} cores",
              file=sys.stderr)
    return results


def run_study_case(a, work: Path) -> dict:
    if not study_command_exists():
        return {"skipped": "the installed qrelkit has no 'qrelkit study budget' command"}
    runs = []
    for i in range(a.repeats):
        out = Path(tempfile.mkdtemp(prefix="bench-budget-study-"))
        runs.append(run_child_process([sys.executable, __file__, "--study-child", str(out), "--work-dir", str(work)],
                                      idle_wait=a.wait_idle, stderr_tail=3000))
    return {"runs": runs, "wall_s": med([r["wall"] for r in runs]), "cpu_s": med([r["cpu"] for r in runs]),
            "process_wall_s": med([r["process_wall_s"] for r in runs])}


def report(info: dict, lib: dict, study: dict) -> list[str]:
    """The Markdown table and the lines around it."""
    s = info["summary"]
    L = [f"TREC-8-shaped collection (simulate_collection, seed {info['stamp']['seed']}): {s['topics']} topics, "
         f"{s['runs']} runs of {s['run_length']} from {s['groups']} groups; depth-{DEPTH} pool "
         f"{s['pool_per_topic']['total']:,} documents ({s['pool_per_topic']['mean']:,.0f} per topic), "
         f"{s['relevant_per_topic']['total']:,} relevant", f"Peers: {PEERS}.", "",
         "| work | cold first call (empty numba cache): wall / CPU | first call, fresh process: wall / CPU "
         "| warm, median (min-max): wall / CPU | other load |", "|---|---|---|---|---|"]
    any_res = next(iter(lib.values()))["cached"]
    pw = [x for r in any_res for x in r["pool_warm"]]
    L.append(f"| `depth_pool(runs, {DEPTH})` | | {med([r['pool_first'][0] for r in any_res]):.2f} / "
             f"{med([r['pool_first'][1] for r in any_res]):.2f} s | {med([x[0] for x in pw]):.2f} "
             f"({min(x[0] for x in pw):.2f}-{max(x[0] for x in pw):.2f}) / {med([x[1] for x in pw]):.2f} s | |")
    tw = [x for r in any_res for x in r["topic_pools_warm"]]
    L.append(f"| `topic_pools(pool)`: the runs' lists (the first step of every `adjudicate` call) | | | "
             f"{med([x[0] for x in tw]):.2f} ({min(x[0] for x in tw):.2f}-{max(x[0] for x in tw):.2f}) / "
             f"{med([x[1] for x in tw]):.2f} s | |")
    tot = {"cold": [0.0, 0.0], "first": [0.0, 0.0], "warm": [0.0, 0.0]}
    for name, r in lib.items():
        c, ca = r["cold"], r["cached"]
        w = [x for q in ca for x in q["warm"]]
        row = {"cold": c["first"], "first": [med([q["first"][0] for q in ca]), med([q["first"][1] for q in ca])],
               "warm": [med([x[0] for x in w]), med([x[1] for x in w])]}
        for k in tot:
            tot[k] = [tot[k][0] + row[k][0], tot[k][1] + row[k][1]]
        L.append(f"| `adjudicate(..., \"{name}\")`, whole pool | {row['cold'][0]:.2f} / {row['cold'][1]:.2f} s | "
                 f"{row['first'][0]:.2f} / {row['first'][1]:.2f} s | {row['warm'][0]:.2f} "
                 f"({min(x[0] for x in w):.2f}-{max(x[0] for x in w):.2f}) / {row['warm'][1]:.2f} s | "
                 f"{med([q['others_cores'] for q in ca]):.2f} cores |")
    L.append(f"| all {len(lib)} strategies (sum) | **{tot['cold'][0]:.2f}** / {tot['cold'][1]:.2f} s | "
             f"**{tot['first'][0]:.2f}** / {tot['first'][1]:.2f} s | **{tot['warm'][0]:.2f}** / {tot['warm'][1]:.2f} s | |")
    L.append("")
    L.append("Target (issue 23): every strategy over every budget up to the whole pool in <= 60 s: "
             + ("met" if tot["cold"][0] <= 60 else "NOT met") + f" ({tot['cold'][0]:.1f} s with compilation).")
    if "skipped" in study:
        L.append(f"`qrelkit study budget`: skipped ({study['skipped']}).")
    else:
        L.append(f"`qrelkit study budget` (`{' '.join(STUDY_BUDGET_ARGV)}`): {study['wall_s']:.2f} s wall, "
                 f"{study['cpu_s']:.2f} s CPU in the process (median of {len(study['runs'])}); "
                 f"{study['process_wall_s']:.2f} s with interpreter start and imports.")
    return L


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per strategy (first calls, median)")
    p.add_argument("--warm", type=int, default=5, help="warm repeats in each process (median)")
    p.add_argument("--wait-idle", type=float, default=60.0, help="before each process, wait up to this many seconds "
                   "for other processes to use < 0.25 cores")
    p.add_argument("--work-dir", type=Path, default=ROOT / "bench-out" / "budget-trec8")
    p.add_argument("--json-out", type=Path, default=ROOT / "bench-out" / "bench_budget.json")
    p.add_argument("--skip-study", action="store_true", help="skip case 2 (qrelkit study budget)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--study-child", type=Path, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        child(a.work_dir, a.child, a.warm)
        return 0
    if a.study_child:
        study_child(a.work_dir, a.study_child)
        return 0
    a.work_dir.mkdir(parents=True, exist_ok=True)
    info = ensure_data(a.work_dir, a.seed)
    try:
        lib = run_library_case(a, a.work_dir)
        study = {"skipped": "--skip-study"} if a.skip_study else run_study_case(a, a.work_dir)
    except ChildFailed as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    print("\n".join(report(info, lib, study)))
    checks = {s: r["cached"][0]["checks"] for s, r in lib.items()}
    print("checks: " + ", ".join(f"{s} {'ok' if all(c.values()) else 'FAILED ' + str(c)}" for s, c in checks.items()))
    import numba
    import numpy

    a.json_out.parent.mkdir(parents=True, exist_ok=True)
    a.json_out.write_text(json.dumps({
        "command": "python benchmarks/bench_budget.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "versions": {"numba": numba.__version__, "numpy": numpy.__version__}, "data": info, "peers": PEERS,
        "library": lib, "study_budget": study, "checks": checks}, indent=1, default=float) + "\n")
    return 0 if all(all(c.values()) for c in checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
