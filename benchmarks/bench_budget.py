"""Judging budgets at TREC's scale: every adjudication strategy orders the whole pool of every topic
of a TREC-8-shaped collection, and the budget study built on those orders (``bench_study.py`` runs
only the latter; both write the one result, ``budget``).

    python benchmarks/bench_budget.py [--topics 25 50] [--repeats 3] [--warm 5] [--wait-idle 60] [--seed 0]
    python benchmarks/bench_budget.py --tasks adjudicate --strategies docid mtf --topics 10 20 --repeats 1

Data (made once per size, deterministic, reused while the parameters match):
``simulate_collection(topics=T, seed=)`` (qrelkit.simulate.collection: T topics, 71 runs of 1,000
documents from 40 groups, all pooled) written to ``bench-out/budget-trec8/`` (50 topics: TREC-8's;
other sizes in ``budget-trec8-tT/``; ``runs/``, ``qrels.txt``, ``manifest.csv``: what ``qrelkit
simulate collection -o DIR --topics T --seed 0`` writes) and kept as canonical Parquet for the
children. The two sizes (``--topics``, default 25 and 50) hold the pool per topic at TREC-8's
(about 1,700 documents): a collection of 25 topics is the first 25 of the 50 (each topic has its
own random stream), so the growth between them says whether the work is linear in the topics.

Tasks (``--tasks``), each in fresh subprocesses (imports and loading the Parquet runs and qrels
excluded), the first call in the process beside ``--warm`` repeats, wall and CPU seconds:

* ``adjudicate``: for each strategy (``--strategies``, default every registered one), in
  ``--repeats`` processes with the normal numba cache and one with an empty ``NUMBA_CACHE_DIR``
  (its kernel compiled: tool "qrelkit, empty numba cache"): ``depth_pool(runs, 100)`` (about
  85,000 documents at 50 topics) [unit: run line], ``topic_pools(pool)`` [pool document], then
  ``adjudicate(pool, qrels, strategy, budget=None)``, which replays the strategy over the whole
  pool of every topic with the qrels as the oracle, one document per round (a budget b is the
  first b of that order, so one call gives every budget) [pool document]. Checks (untimed): every
  order holds each pool document of its topic exactly once; ``docid``'s is the pool in docid order.
* ``study`` (what ``bench_study.py`` measured): ``budget_study(runs, qrels, depth=100,
  workers=W, params=AdjudicateParams(batch=B))`` — the replays, the distinct (topic, judgments)
  scorings, the leaderboards, tau, tau_AP, rank drops, the paired t-tests of every two runs at
  every budget, the tables — and ``write_budget_report``, in ``--study-processes`` processes,
  the first call and ``--study-warm`` repeats; CPU includes the forked workers'; the study's own
  stage seconds [run line: scoring the runs' lists is most of it]. ``--check``: one strategy's
  leaderboard at one budget against ``evaluate`` on its qrels found so far, computed here.
* ``command``: ``qrelkit study budget`` on the same files (:data:`STUDY_BUDGET_ARGV`, every
  strategy, budgets up to the whole pool, one judgment a round), the command run in a fresh
  process (``qrelkit.cli.run``), the first call and ``--study-warm`` repeats [run line].
  ``--skip-study`` skips it.

Peers: none. No Python tool adjudicates a pool adaptively: the bandit methods' authors (Losada,
Parapar and Barreiro) published R scripts, and trectools makes static pools only (depth, fusion:
RBP, RRF); the figures are qrelkit's alone, against the issue's target (every strategy over every
budget in <= 60 s, at 50 topics). Results: ``OUT/budget.json`` (``benchmarks/_results.py``'s shape,
for ``scripts/gen_benchmarks_doc.py``; ``--json-out`` names another file). Exit status 1 when a
check fails.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import ChildFailed, emit_result, peak_rss_mb, run_child_process  # noqa: E402
from _procs import measure_all, median_stages, tool_from_processes  # noqa: E402
from _results import benchmark_result, measure, size_result, target, write_result  # noqa: E402

DEPTH = 100
TREC8_TOPICS = 50
STUDY_STAGES = ("prepare", "orders", "variants", "scoring", "leaderboards", "logo", "tables")  # seconds
PEERS = ("none: no Python tool adjudicates a pool adaptively (the bandit methods' authors published R "
         "scripts; trectools makes static depth and fusion pools only)")
#: HOOK: the argv of ``qrelkit study budget`` on the collection (DATA: the folder of runs/, qrels.txt,
#: manifest.csv; OUT: a fresh output folder). Adjust here when the command changes.
STUDY_BUDGET_ARGV = ["study", "budget", "{DATA}/runs", "-q", "{DATA}/qrels.txt", "-m", "{DATA}/manifest.csv",
                     "--depth", "100", "--batch", "1", "-o", "{OUT}"]  # every strategy, every 10% up to the pool


def data_dir(base: Path, topics: int) -> Path:
    """The folder of the collection of ``topics`` topics (``base`` itself for TREC-8's 50)."""
    return base if topics == TREC8_TOPICS else base.with_name(f"{base.name}-t{topics}")


def ensure_data(work: Path, seed: int, topics: int = TREC8_TOPICS) -> dict:
    """The collection's files and canonical Parquet in ``work`` (made when absent or stale)."""
    info_path = work / "data.json"
    stamp = {"seed": seed, "generator": "simulate_collection", "depth": DEPTH}
    if topics != TREC8_TOPICS:
        stamp["topics"] = topics
    if info_path.exists() and json.loads(info_path.read_text()).get("stamp") == stamp:
        return json.loads(info_path.read_text())
    from qrelkit.io.tables import write_table
    from qrelkit.simulate.collection import simulate_collection, write_collection

    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    c = simulate_collection(topics=topics, seed=seed, depth=DEPTH)
    gen = time.perf_counter() - t0
    summary = write_collection(c, work)
    write_table(c.runs, work / "runs.parquet", kind="runs", params={"seed": seed})
    write_table(c.qrels, work / "qrels.parquet", kind="qrels", params={"seed": seed})
    info = {"stamp": stamp, "generate_s": gen, "summary": summary}
    info_path.write_text(json.dumps(info, indent=1) + "\n")
    return info


# =========================================================================== children


def child(work: Path, strategy: str, warm: int) -> None:
    """One fresh process: the pool, the runs' lists and one strategy's whole order, each its
    first call then ``warm`` repeats; emits the figures and the checks."""
    t0 = time.perf_counter()
    import pyarrow.compute as pc

    from qrelkit.io.tables import read_table
    from qrelkit.pooler import adjudicate, depth_pool, topic_pools

    import_s = time.perf_counter() - t0
    runs, qrels = read_table(work / "runs.parquet"), read_table(work / "qrels.parquet")
    pool_first, pool_warm, pools = measure_all(lambda: depth_pool(runs, DEPTH), warm)
    pool = pools[0]
    lists_first, lists_warm, _ = measure_all(lambda: len(topic_pools(pool)), warm)
    first, again, orders = measure_all(lambda: adjudicate(pool, qrels, strategy), warm)
    order = orders[0]
    per_topic = order.group_by("qid").aggregate([("docid", "count_distinct"), ("docid", "count")]).to_pandas()
    sizes = pool.group_by("qid").aggregate([("docid", "count")]).to_pandas().set_index("qid")["docid_count"]
    whole = bool((per_topic.set_index("qid")["docid_count_distinct"] == sizes).all()
                 and (per_topic["docid_count"] == per_topic["docid_count_distinct"]).all()
                 and len(per_topic) == len(sizes))
    checks = {"whole_pool_once": whole, "same_order_every_call": all(o.equals(order) for o in orders)}
    if strategy == "docid":
        got = order.to_pandas().groupby("qid", sort=False)["docid"].apply(list)
        checks["docid_order"] = all(v == sorted(v) for v in got)
    emit_result({"strategy": strategy, "import_s": import_s, "pool_rows": pool.num_rows, "run_lines": runs.num_rows,
                 "order_rows": order.num_rows, "relevant_found": int(pc.sum(order["relevant"]).as_py()),
                 "pool": {"first": pool_first, "warm": pool_warm}, "lists": {"first": lists_first, "warm": lists_warm},
                 "first": first, "warm": again, "checks": checks, "peak_rss_mb": peak_rss_mb()})


def study_child(work: Path, out: Path, workers: int, batch: int, warm: int, check: bool) -> None:
    """The library's study (``budget_study`` + ``write_budget_report``) in this process."""
    t0 = time.perf_counter()
    import scipy.stats  # noqa: F401  (imports are not timed)

    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.tables import read_table
    from qrelkit.pooler import AdjudicateParams
    from qrelkit.reuse import budget_study, write_budget_report

    import_s = time.perf_counter() - t0
    runs, qrels = read_table(work / "runs.parquet"), read_qrels(work / "qrels.parquet")
    params = AdjudicateParams.from_config(None, batch=batch)
    results, stages = [], []

    def once():
        res = budget_study(runs, qrels, depth=DEPTH, workers=workers, params=params)
        t = time.perf_counter()
        write_budget_report(res, out / f"report-{len(results)}")
        results.append(res)
        stages.append({**{k: res.timings[k] for k in STUDY_STAGES}, "report": time.perf_counter() - t})

    first, warm_calls, _ = measure(once, warm, children=True)
    res = results[0]
    r = {"import_s": import_s, "first": first, "warm": warm_calls, "stages": median_stages(stages[1:] or stages, None),
         "counts": {k: res.timings[k] for k in ("scorings", "topic_scorings", "list_lines_scored", "evaluate_calls")},
         "run_lines": runs.num_rows, "peak_rss_mb": peak_rss_mb(),
         "peak_rss_workers_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0,
         "same_summary_every_call": all(x.summary.equals(res.summary) for x in results),
         "summary": res.summary.to_pandas()[["strategy", "budget", "judgments_mean", "relevant_found_mean",
                                             "kendall_tau", "tau_ap", "max_rank_drop",
                                             "significance_changes"]].to_dict(orient="records")}
    if check:
        r["check_leaderboard_equals_evaluate"] = spot_check(runs, qrels, res, params)
    emit_result(json.loads(json.dumps(r, default=float)))


def command_child(work: Path, out: Path, warm: int) -> None:
    """``qrelkit study budget`` (the command) in this process: its first call and ``warm`` more."""
    t0 = time.perf_counter()
    from qrelkit.cli import run

    import_s = time.perf_counter() - t0
    codes, k = [], iter(range(1 + warm))

    def once():
        o = out / f"call-{next(k)}"
        argv = [x.replace("{DATA}", str(work)).replace("{OUT}", str(o)) for x in STUDY_BUDGET_ARGV]
        codes.append(run(argv))

    first, warm_calls, _ = measure(once, warm, children=True)
    emit_result({"import_s": import_s, "first": first, "warm": warm_calls, "exit_codes": codes,
                 "peak_rss_mb": peak_rss_mb()})


def spot_check(runs, qrels, res, params) -> bool:
    """mm-ns at 20%: the study's leaderboard against evaluate() on the qrels found so far, made here
    from the adjudication module's own replay."""
    import math

    import numpy as np
    import pyarrow as pa

    from qrelkit.evaluate import evaluate
    from qrelkit.pooler import depth_pool, simulate_order, topic_pools

    truth = {(q, d): g for q, d, g in zip(qrels["qid"].to_pylist(), qrels["docid"].to_pylist(), qrels["rel"].to_pylist())}
    rows = []
    for qid, tp in topic_pools(depth_pool(runs, DEPTH)).items():
        rel = np.array([truth.get((qid, d), 0) >= 1 for d in tp.docids])
        order = simulate_order("mm-ns", tp, rel, budget=math.ceil(tp.n_docs / 5), batch=params.batch, params=params)
        rows += [(qid, tp.docids[i], max(truth.get((qid, tp.docids[i]), 0), 0)) for i in order]
    q = pa.table({"qid": [r[0] for r in rows], "docid": [r[1] for r in rows], "rel": pa.array([r[2] for r in rows], pa.int32())})
    want = evaluate(runs, q, ["AP"], rel=1).summary.to_pandas().set_index("run")["value"]
    got = res.runs.to_pandas()
    got = got[(got["strategy"] == "mm-ns") & (got["budget"] == "20%")].set_index("run")["score"]
    return bool(np.allclose(got.sort_index().to_numpy(), want.sort_index().to_numpy(), rtol=0, atol=1e-12))


# =========================================================================== the parent


def study_command_exists() -> bool:
    """Whether the installed qrelkit has ``qrelkit study budget``."""
    from qrelkit.cli import app

    for g in app.registered_groups:
        if g.name == "study":
            return any((c.name or c.callback.__name__) == "budget" for c in g.typer_instance.registered_commands)
    return False


def _run(cmd: list[str], a, env: dict | None = None) -> dict:
    return run_child_process([sys.executable, __file__, *cmd], idle_wait=a.wait_idle, env=env, stderr_tail=3000)


def run_adjudicate(a, work: Path, strategies: list[str]) -> dict:
    """Every strategy in one process with an empty numba cache and ``--repeats`` with the cache."""
    out = {}
    for s in strategies:
        cmd = ["--child", s, "--work-dir", str(work), "--warm", str(a.warm)]
        with tempfile.TemporaryDirectory(prefix="numba-cold-") as cache:
            cold = _run(cmd, a, env={"NUMBA_CACHE_DIR": cache})
        cached = [_run(cmd, a) for _ in range(a.repeats)]
        out[s] = {"cold": cold, "cached": cached}
        w = sorted(x["wall_s"] for r in cached for x in r["warm"])
        print(f"  {work.name} {s}: empty cache first {cold['first']['wall_s']:.2f} s, first "
              f"{cached[0]['first']['wall_s']:.2f} s, warm {w[len(w) // 2]:.2f} s, other load "
              f"{cached[0].get('background_cores', float('nan')):.2f} cores", file=sys.stderr, flush=True)
    return out


def run_study(a, work: Path) -> list[dict]:
    runs = []
    for i in range(a.study_processes):
        out = Path(tempfile.mkdtemp(prefix="bench-budget-study-"))
        cmd = ["--study-child", str(out), "--work-dir", str(work), "--workers", str(a.workers), "--batch",
               str(a.batch), "--study-warm", str(a.study_warm)] + (["--check"] if a.check and i == 0 else [])
        runs.append(_run(cmd, a))
        print(f"  {work.name} study #{i + 1}: first {runs[-1]['first']['wall_s']:.1f} s wall, "
              f"{runs[-1]['first']['cpu_s']:.1f} s CPU (workers included); other load "
              f"{runs[-1].get('background_cores', float('nan')):.2f} cores", file=sys.stderr, flush=True)
    return runs


def run_command(a, work: Path) -> list[dict]:
    out = Path(tempfile.mkdtemp(prefix="bench-budget-command-"))
    r = _run(["--command-child", str(out), "--work-dir", str(work), "--study-warm", str(a.study_warm)], a)
    print(f"  {work.name} qrelkit study budget: first {r['first']['wall_s']:.1f} s wall (process "
          f"{r['process_wall_s']:.1f} s with interpreter start and imports)", file=sys.stderr, flush=True)
    return [r]


def _sub(procs: list[dict], key: str) -> list[dict]:
    """The ``key`` measurement of each process, with the process's figures around it."""
    return [{**p[key], **{k: p.get(k) for k in ("import_s", "peak_rss_mb", "background_cores")}} for p in procs]


def size_results(topics: int, info: dict, lib: dict, study: list, command: list, a) -> tuple[list, dict]:
    """This size's results (one per task) and its checks."""
    s = info["summary"]
    pool_docs = s["pool_per_topic"]["total"]
    run_lines = s["runs"] * s["run_length"] * topics
    label, out, checks = f"{topics} topics", [], {}
    if lib:
        cached = [p for r in lib.values() for p in r["cached"]]
        out.append(size_result(f"{label} ({run_lines:,} run lines)", run_lines, "run line",
                               [tool_from_processes("qrelkit", _sub(cached, "pool"))], task=f"depth_pool(runs, {DEPTH})"))
        out.append(size_result(f"{label} ({pool_docs:,} pool documents)", pool_docs, "pool document",
                               [tool_from_processes("qrelkit", _sub(cached, "lists"))], task="topic_pools(pool)"))
    for name, r in lib.items():
        tools = [tool_from_processes("qrelkit", r["cached"]),
                 tool_from_processes("qrelkit, empty numba cache", [r["cold"]],
                                     note="NUMBA_CACHE_DIR a new folder: the first call compiles the kernels")]
        out.append(size_result(f"{label} ({pool_docs:,} pool documents)", pool_docs, "pool document", tools,
                               task=f"adjudicate(pool, qrels, \"{name}\"), the whole pool"))
        for p in [r["cold"], *r["cached"]]:
            for k, v in p["checks"].items():
                key = f"adjudicate {name}: {k}"
                checks[key] = checks.get(key, True) and v
    if study:
        out.append(size_result(f"{label} ({run_lines:,} run lines)", run_lines, "run line",
                               [tool_from_processes("qrelkit", study, stages=median_stages(study),
                                                    note=f"{a.workers} workers (their CPU included), batch {a.batch}")],
                               task="budget_study + write_budget_report: 7 strategies x 10 budgets"))
        checks[f"budget study, {label}: the same summary at every call"] = all(p["same_summary_every_call"] for p in study)
        if "check_leaderboard_equals_evaluate" in study[0]:
            checks[f"budget study, {label}: mm-ns's leaderboard at 20% equals evaluate() on its qrels"] = \
                study[0]["check_leaderboard_equals_evaluate"]
    if command:
        out.append(size_result(f"{label} ({run_lines:,} run lines)", run_lines, "run line",
                               [tool_from_processes("qrelkit", command, note="the command read from the files: "
                                                    + " ".join(STUDY_BUDGET_ARGV))],
                               task="qrelkit study budget (the command), batch 1"))
        checks[f"qrelkit study budget, {label}: exit status 0"] = all(c == 0 for p in command for c in p["exit_codes"])
    return out, checks


def _targets(topics: int, sizes: list[dict]) -> list[dict]:
    """The issue's target, at TREC-8's 50 topics only."""
    if topics < TREC8_TOPICS:
        return []
    mine = [s for s in sizes if s["label"].startswith(f"{topics} topics")]
    adj = [s for s in mine if s["task"].startswith("adjudicate(")]
    out = []
    if adj:
        cold = sum(next(t for t in s["tools"] if "empty" in t["tool"])["first"]["wall_s"] for s in adj)
        out.append(target(f"every strategy ({len(adj)}) over the whole pool of {topics} topics, first calls with an "
                          "empty numba cache, summed", cold, "<=", 60, "s"))
    for s in mine:
        if s["task"].startswith(("budget_study", "qrelkit study budget")):
            out.append(target(f"{s['task']}, {topics} topics, the first call", s["tools"][0]["first"]["wall_s"],
                              "<=", 60, "s"))
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", nargs="+", choices=["adjudicate", "study", "command"],
                   default=["adjudicate", "study", "command"])
    p.add_argument("--topics", nargs=2, type=int, default=[25, TREC8_TOPICS], help="the two sizes, in topics")
    p.add_argument("--strategies", nargs="+", default=None, help="adjudicate: these strategies (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3, help="adjudicate: fresh processes per strategy with the cache")
    p.add_argument("--warm", type=int, default=5, help="adjudicate: warm repeats in each process")
    p.add_argument("--study-processes", type=int, default=1, help="study: fresh processes")
    p.add_argument("--study-warm", type=int, default=1, help="study, command: warm repeats in each process")
    p.add_argument("--workers", type=int, default=2, help="study: worker processes")
    p.add_argument("--batch", type=int, default=10, help="study: judgments per round ([adjudicate] batch)")
    p.add_argument("--check", action="store_true", help="study: compare one leaderboard with evaluate() (untimed)")
    p.add_argument("--wait-idle", type=float, default=60.0, help="before each process, wait up to this many seconds "
                   "for other processes to use < 0.25 cores")
    p.add_argument("--work-dir", type=Path, default=ROOT / "bench-out" / "budget-trec8",
                   help="the 50-topic collection (other sizes: this name with -tT)")
    p.add_argument("--json-out", type=Path, default=ROOT / "bench-out" / "budget.json")
    p.add_argument("--skip-study", action="store_true", help="skip the command (qrelkit study budget)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--study-child", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--command-child", type=Path, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        child(a.work_dir, a.child, a.warm)
        return 0
    if a.study_child:
        study_child(a.work_dir, a.study_child, a.workers, a.batch, a.study_warm, a.check)
        return 0
    if a.command_child:
        command_child(a.work_dir, a.command_child, a.study_warm)
        return 0
    from qrelkit.pooler import available_strategies

    strategies = a.strategies or list(available_strategies())
    command = "command" in a.tasks and not a.skip_study
    if command and not study_command_exists():
        print("the installed qrelkit has no 'qrelkit study budget' command: skipped", file=sys.stderr)
        command = False
    sizes, checks, targets, data = [], {}, [], {}
    try:
        for topics in sorted(a.topics):
            work = data_dir(a.work_dir, topics)
            info = ensure_data(work, a.seed, topics)
            data[topics] = info["summary"]
            lib = run_adjudicate(a, work, strategies) if "adjudicate" in a.tasks else {}
            study = run_study(a, work) if "study" in a.tasks else []
            cmd = run_command(a, work) if command else []
            s, c = size_results(topics, info, lib, study, cmd, a)
            sizes += s
            checks.update(c)
            targets += _targets(topics, s)
    except ChildFailed as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    order = list(dict.fromkeys(s["task"] for s in sizes))  # each task's two sizes together
    sizes.sort(key=lambda s: order.index(s["task"]))
    res = benchmark_result("budget", "Judging budgets: every adjudication strategy over a TREC-8-shaped pool", sizes,
                           targets=targets, checks=checks, data=data, notes=[
        f"Peers: {PEERS}.",
        f"simulate_collection(topics=T, seed={a.seed}): 71 runs of 1,000 documents from 40 groups, all pooled; the "
        "pool per topic is TREC-8's at both sizes (the 25 topics are the first 25 of the 50).",
        "One document per round: a budget b is the first b of the order, so one adjudicate call gives every budget."])
    write_result(res, a.json_out, "bench_budget.py", argv)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
