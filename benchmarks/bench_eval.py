"""Evaluation benchmark: qrelkit vs ir-measures called on the files, side by side in one run.

    python benchmarks/bench_eval.py [--repeats 5] [--peer-repeats 3] [--skip-peers]

Data: 100 runs x 500 topics x 100 documents (``benchmarks/gen_runs.py``, shared with
``bench_pool.py`` and reused while its parameters match) and qrels for 76 of the 500 topics with
300 judged documents each (made here, deterministic: the topics are a seeded sample; each
topic's judged documents are the first 300 of its depth-100 pool in assessor order, i.e. the
documents the runs rank highest; grades 0-3 drawn with a probability of relevance that falls with
the best rank). Measures: nDCG@10, AP and RR@10.

Measured (each a median of repetitions, in this one process, imports excluded, file cache warm):

* **ir-measures on the files**: ``read_trec_qrels`` once, one ``evaluator(measures, qrels)``, then
  for every run file ``evaluator.calc(read_trec_run(file))`` (one evaluator for all runs, as
  ir-measures documents for scoring several runs);
* **qrelkit from the files**: ``read_runs(folder)`` (full validation of the 5M lines) +
  ``read_qrels`` + ``evaluate`` — stages timed separately;
* **qrelkit from canonical Parquet**: the runs as ``qrelkit runs canonicalize`` writes them
  (validated once, untimed), read with ``load_canonical_runs`` (judged topics only, filtered while
  reading) + ``evaluate`` — what ``qrelkit eval score runs.parquet`` does.

Check: every (run, topic, measure) value of qrelkit equals ir-measures' to 1e-9, except RR@10 of
(run, topic) lists whose first 11 documents contain tied scores: ir-measures' msmarco provider
(RR with a cutoff) breaks ties by docid ascending where trec_eval, pytrec_eval and qrelkit use
docid descending. Those are counted; any other difference fails the benchmark (exit 1).
Results: a Markdown table on stdout and ``bench-out/bench_eval.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import busy_cpu_s, others_cores, wait_idle  # noqa: E402

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

MEASURES = ["nDCG@10", "AP", "RR@10"]


def measure(fn, idle_wait: float) -> dict:
    """Run ``fn`` once: wall and CPU time of this process, machine load by others meanwhile."""
    idle = wait_idle(idle_wait, seconds=0.5)
    b0 = busy_cpu_s()
    c0 = time.process_time()
    w0 = time.perf_counter()
    result = fn()
    wall = time.perf_counter() - w0
    cpu = time.process_time() - c0
    other = others_cores(b0, busy_cpu_s(), cpu, wall)
    return {"wall_s": wall, "cpu_s": cpu, "other_load_cores": other, "idle_before": idle, "result": result}


def ensure_runs(data: Path, runs: int, topics: int, depth: int, seed: int) -> None:
    params = data / ".params.json"
    if params.exists():
        p = json.loads(params.read_text())
        if (p.get("runs"), p.get("topics"), p.get("depth"), p.get("seed")) == (runs, topics, depth, seed):
            return
    from gen_runs import generate

    generate(data, runs=runs, topics=topics, depth=depth, seed=seed)


def make_qrels(run_table, path: Path, n_topics: int, n_docs: int, seed: int) -> dict:
    """Qrels for ``n_topics`` sampled topics, ``n_docs`` judged documents each (see the module doc)."""
    import pandas as pd

    from qrelkit.io.qrels import read_qrels, write_qrels
    from qrelkit.io.runs import qid_order
    import pyarrow as pa
    import pyarrow.compute as pc

    rng = np.random.default_rng(seed)
    topics = qid_order(pc.unique(run_table["qid"]).to_pylist())
    chosen = qid_order(rng.choice(topics, size=n_topics, replace=False).tolist())
    t = run_table.filter(pc.is_in(run_table["qid"], value_set=pa.array(chosen)))
    df = pd.DataFrame({"qid": t["qid"].to_numpy(zero_copy_only=False), "docid": t["docid"].to_numpy(zero_copy_only=False),
                       "rank": t["rank"].to_numpy()})
    g = df.groupby(["qid", "docid"]).agg(min_rank=("rank", "min"), n=("rank", "size")).reset_index()
    g = g.sort_values(["qid", "min_rank", "n", "docid"], ascending=[True, True, False, True], kind="mergesort")
    g = g.groupby("qid", sort=False).head(n_docs)
    p_rel = np.clip(0.9 / np.sqrt(g["min_rank"].to_numpy()), 0.02, 0.9)
    rel = rng.random(len(g)) < p_rel
    grade = np.where(rel, rng.integers(1, 4, len(g)), 0)
    q = pa.table({"qid": g["qid"].tolist(), "docid": g["docid"].tolist(), "rel": pa.array(grade.astype(np.int32))})
    from qrelkit.io.qrels import QRELS_SCHEMA

    write_qrels(q.cast(QRELS_SCHEMA), path)
    back = read_qrels(path)
    return {"judged_topics": len(chosen), "judged": back.num_rows,
            "relevant": int(pc.sum(pc.greater_equal(back["rel"], 1)).as_py())}


def run_irmeasures(files: list[Path], qrels_path: Path):
    import ir_measures

    ms = [ir_measures.parse_measure(m) for m in MEASURES]
    qrels = list(ir_measures.read_trec_qrels(str(qrels_path)))
    ev = ir_measures.evaluator(ms, qrels)
    out = {}
    for f in files:
        agg, perq = ev.calc(ir_measures.read_trec_run(str(f)))
        out[f] = (agg, perq)
    return out


def run_qrelkit_files(data: Path, qrels_path: Path):
    from qrelkit.evaluate import evaluate
    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.runs import read_runs

    t0 = time.perf_counter()
    rs = read_runs(data)
    q = read_qrels(qrels_path)
    t1 = time.perf_counter()
    ev = evaluate(rs.table, q, MEASURES, run_names=rs.runs)
    t2 = time.perf_counter()
    return ev, {"read_s": t1 - t0, "evaluate_s": t2 - t1}


def run_qrelkit_parquet(parquet: Path, qrels_path: Path):
    import pyarrow.compute as pc

    from qrelkit.evaluate import evaluate, load_canonical_runs
    from qrelkit.io.qrels import read_qrels

    t0 = time.perf_counter()
    q = read_qrels(qrels_path)
    t, names = load_canonical_runs(parquet, pc.unique(q["qid"]).to_pylist())
    t1 = time.perf_counter()
    ev = evaluate(t, q, MEASURES, run_names=names)
    t2 = time.perf_counter()
    return ev, {"read_s": t1 - t0, "evaluate_s": t2 - t1}


def tied_lists(run_table, qrels_topics: set, k: int = 11) -> set[tuple[str, str]]:
    """(run, qid) lists with two equal scores among their first ``k`` documents."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = run_table.filter(pc.and_(pc.less_equal(run_table["rank"], k),
                                 pc.is_in(run_table["qid"], value_set=pa.array(sorted(qrels_topics)))))
    run = t["run"].to_numpy(zero_copy_only=False)
    qid = t["qid"].to_numpy(zero_copy_only=False)
    score = t["score"].to_numpy()
    same = (run[1:] == run[:-1]) & (qid[1:] == qid[:-1]) & (score[1:] == score[:-1])
    idx = np.flatnonzero(same)
    return set(zip(run[idx].tolist(), qid[idx].tolist()))


def compare(ev, peer, run_of_file: dict, tied: set) -> dict:
    """Per (run, topic, measure) comparison; see the module documentation."""
    pq = ev.per_query.to_pandas()
    ours = {(r, q, m): v for r, q, m, v in zip(pq["run"], pq["qid"], pq["measure"], pq["value"])}
    n = 0
    max_diff = {m: 0.0 for m in MEASURES}
    tie_diffs = 0
    unexplained = []
    for f, (agg, perq) in peer.items():
        r = run_of_file[f]
        for metric in perq:
            m = str(metric.measure)
            key = (r, metric.query_id, m)
            d = abs(ours[key] - metric.value)
            n += 1
            if d > 1e-9:
                if m == "RR@10" and (r, metric.query_id) in tied:
                    tie_diffs += 1
                    continue
                unexplained.append((r, metric.query_id, m, ours[key], metric.value))
            max_diff[m] = max(max_diff[m], d)
        sm = ev.summary.to_pandas()
        for meas, val in agg.items():
            mine = float(sm[(sm["run"] == r) & (sm["measure"] == str(meas))]["value"].iloc[0])
            if str(meas) != "RR@10" and abs(mine - val) > 1e-9:
                unexplained.append((r, "all", str(meas), mine, val))
    return {"values_compared": n, "max_abs_diff_outside_ties": max_diff, "rr10_tie_differences": tie_diffs,
            "unexplained": unexplained[:20], "n_unexplained": len(unexplained)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=ROOT / "bench-out" / "runs-100x500x100")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "bench-out" / "bench-eval")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--topics", type=int, default=500)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--judged-topics", type=int, default=76)
    ap.add_argument("--judged-docs", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--peer-repeats", type=int, default=3)
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--wait-idle", type=float, default=30.0, help="seconds to wait for a quiet machine before each measurement")
    ap.add_argument("--json-out", type=Path, default=ROOT / "bench-out" / "bench_eval.json")
    a = ap.parse_args(argv)

    from qrelkit.io.runs import read_runs
    from qrelkit.io.tables import write_table

    ensure_runs(a.data_dir, a.runs, a.topics, a.depth, a.seed)
    a.out_dir.mkdir(parents=True, exist_ok=True)
    rs = read_runs(a.data_dir)  # untimed: qrels, canonical Parquet, tie lists, warm file cache
    qrels_path = a.out_dir / f"qrels-{a.judged_topics}x{a.judged_docs}.txt"
    qinfo = make_qrels(rs.table, qrels_path, a.judged_topics, a.judged_docs, a.seed)
    parquet = a.out_dir / "runs-canonical.parquet"
    write_table(rs.table, parquet, kind="runs", params={"runs": str(a.data_dir)})
    files = sorted(p for p in a.data_dir.iterdir() if p.is_file() and not p.name.startswith("."))
    run_of_file = {Path(rs.files[r]): r for r in rs.runs}
    from qrelkit.io.qrels import read_qrels

    qtopics = set(read_qrels(qrels_path)["qid"].to_pylist())
    tied = tied_lists(rs.table, qtopics)
    del rs

    results = {"qrelkit_files": [], "qrelkit_parquet": [], "ir_measures_files": []}
    last = {}
    for i in range(max(a.repeats, a.peer_repeats if not a.skip_peers else 0)):
        if i < a.repeats:
            m = measure(lambda: run_qrelkit_files(a.data_dir, qrels_path), a.wait_idle)
            ev, stages = m.pop("result")
            m.update(stages)
            results["qrelkit_files"].append(m)
            last["files"] = ev
            m = measure(lambda: run_qrelkit_parquet(parquet, qrels_path), a.wait_idle)
            ev2, stages = m.pop("result")
            m.update(stages)
            results["qrelkit_parquet"].append(m)
            last["parquet"] = ev2
        if not a.skip_peers and i < a.peer_repeats:
            m = measure(lambda: run_irmeasures(files, qrels_path), a.wait_idle)
            last["peer"] = m.pop("result")
            results["ir_measures_files"].append(m)
        print(f"repetition {i + 1} done", file=sys.stderr)

    def med(tool, key):
        xs = [r[key] for r in results[tool]]
        return statistics.median(xs) if xs else float("nan")

    checks = {}
    same_parquet = last["files"].per_query.equals(last["parquet"].per_query)
    checks["parquet_equals_files"] = bool(same_parquet)
    if "peer" in last:
        checks["vs_ir_measures"] = compare(last["files"], last["peer"], run_of_file, tied)
    report = {
        "command": "python benchmarks/bench_eval.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "data": {"runs": a.runs, "topics": a.topics, "depth": a.depth, "lines": a.runs * a.topics * a.depth, **qinfo},
        "measures": MEASURES, "results": results, "checks": checks,
    }
    import ir_measures
    import pyarrow

    report["versions"] = {"ir_measures": ir_measures.__version__, "pyarrow": pyarrow.__version__}
    a.json_out.parent.mkdir(parents=True, exist_ok=True)
    a.json_out.write_text(json.dumps(report, indent=2, default=str) + "\n")

    rows = [("ir-measures on the files", "ir_measures_files"), ("qrelkit from the files", "qrelkit_files"),
            ("qrelkit from canonical Parquet", "qrelkit_parquet")]
    peer_wall = med("ir_measures_files", "wall_s")
    print(f"\n{a.runs} runs x {a.topics} topics x {a.depth} docs; qrels {qinfo['judged_topics']} topics x "
          f"{a.judged_docs} docs ({qinfo['judged']} judgments); measures {', '.join(MEASURES)}\n")
    print("| tool | wall s (median) | CPU s | read s | evaluate s | speed-up vs ir-measures | other load (cores) | reps |")
    print("|---|---|---|---|---|---|---|---|")
    for label, key in rows:
        if not results[key]:
            continue
        w = med(key, "wall_s")
        rd = med(key, "read_s") if "read_s" in results[key][0] else float("nan")
        evs = med(key, "evaluate_s") if "evaluate_s" in results[key][0] else float("nan")
        sp = peer_wall / w if peer_wall == peer_wall else float("nan")
        print(f"| {label} | {w:.2f} | {med(key, 'cpu_s'):.2f} | {rd:.2f} | {evs:.2f} | {sp:.1f}x | "
              f"{med(key, 'other_load_cores'):.2f} | {len(results[key])} |")
    ok = True
    if "vs_ir_measures" in checks:
        c = checks["vs_ir_measures"]
        print(f"\nvalues compared: {c['values_compared']:,}; max |diff| outside tie-affected RR@10: "
              + ", ".join(f"{k} {v:.1e}" for k, v in c["max_abs_diff_outside_ties"].items())
              + f"; RR@10 differences in lists with tied scores (msmarco provider ties docid ascending): "
              f"{c['rr10_tie_differences']}; unexplained differences: {c['n_unexplained']}")
        ok = c["n_unexplained"] == 0
    print(f"qrelkit from Parquet gives the same per-query table as from the files: {checks['parquet_equals_files']}")
    ok = ok and checks["parquet_equals_files"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
