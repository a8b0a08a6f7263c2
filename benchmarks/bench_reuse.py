"""Leave-one-group-out benchmark: 100 runs in 14 groups over 500 topics, depth-10 pooled qrels,
five measures (AP, nDCG@10, P@10, Bpref, Judged@10).

    python benchmarks/bench_reuse.py [--repeats 3] [--wait-idle 120] [--workers N]

Data (made once, deterministic, reused while the parameters match):

* runs: ``benchmarks/gen_runs.py`` seed 0 — 100 runs x 500 topics x 100 documents (5M lines),
  shared with ``bench_pool.py`` and ``bench_eval.py`` (``bench-out/runs-100x500x100``); read once
  with ``read_runs`` (strict) and kept as canonical Parquet in ``bench-out/bench-reuse/``;
* groups: the generator's teams of 4 correlated runs are put in 14 groups (team t -> group
  floor(14 t / 25)): 11 groups of 8 runs and 3 groups of 4; every run is pooled;
* qrels: the depth-10 pool of the 100 runs (153,615 documents), each document graded 0-3 with a
  seeded random draw whose chance of relevance grows with the number of runs that pooled it and
  falls with its best rank; written to ``bench-out/bench-reuse/qrels-depth10.txt``.

Measured, each repetition in a fresh subprocess (imports — qrelkit, ir-measures, scipy — and data
loading excluded; file cache warm): ``leave_out(runs, qrels, manifest, depth=10, rel=2)`` —
attribution, reduced qrels, official scores of the 100 runs and the left-out scores of every
group's runs, tables — ("logo"); the same with the official scores given ("logo, official
given", read from ``official.parquet``, made once by ``evaluate`` with the same settings); and
``write_report`` (tables, three plots, Markdown, HTML). Reported: wall and CPU time (the process
and its scoring workers), the cores other processes used meanwhile (the machine is shared: the
table gives the median of all repetitions and of the quiet ones, where others used < 0.25
cores), peak RSS (VmHWM of the main process; a worker's includes the pages it shares with the
main process), and stages.

Checks (once, untimed): the removed documents of every group equal an independent computation
with Python sets; one group's left-out scores equal ``evaluate`` called on its reduced qrels;
one and two scoring processes give identical tables. Any failure exits 1.
Results: a Markdown table on stdout and ``bench-out/bench_reuse.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import busy_cpu_s, others_cores, peak_rss_mb, wait_idle  # noqa: E402

MEASURES = ["AP", "nDCG@10", "P@10", "Bpref", "Judged@10"]
GROUPS = 14
QUIET = 0.25  # cores other processes may use during a repetition for it to count as quiet


def group_of(i: int, team_size: int = 4, teams: int = 25) -> str:
    return f"g{(i // team_size) * GROUPS // teams:02d}"


def ensure_data(data: Path, work: Path, runs: int, topics: int, depth: int, seed: int, pool_depth: int) -> dict:
    import pyarrow as pa

    params = data / ".params.json"
    if not (params.exists() and (lambda p: (p.get("runs"), p.get("topics"), p.get("depth"), p.get("seed")))(
            json.loads(params.read_text())) == (runs, topics, depth, seed)):
        from gen_runs import generate

        generate(data, runs=runs, topics=topics, depth=depth, seed=seed)
    work.mkdir(parents=True, exist_ok=True)
    canon = work / "runs-canonical.parquet"
    qrels_path = work / f"qrels-depth{pool_depth}.txt"
    manifest_path = work / "manifest.csv"
    info_path = work / "data.json"
    stamp = {"runs": runs, "topics": topics, "depth": depth, "seed": seed, "pool_depth": pool_depth, "groups": GROUPS}
    if info_path.exists() and canon.exists() and qrels_path.exists() and manifest_path.exists():
        info = json.loads(info_path.read_text())
        if info.get("stamp") == stamp:
            return info
    from qrelkit.io.qrels import QRELS_SCHEMA, write_qrels
    from qrelkit.io.runs import read_runs
    from qrelkit.io.tables import write_table
    from qrelkit.pooler import depth_pool

    t0 = time.perf_counter()
    rs = read_runs(data)
    read_s = time.perf_counter() - t0
    write_table(rs.table, canon, kind="runs", params={"runs": str(data)})
    names = rs.runs
    team_size = 4
    teams = (len(names) + team_size - 1) // team_size
    manifest_path.write_text("run,group,pooled\n" + "".join(
        f"{r},{group_of(i, team_size, teams)},true\n" for i, r in enumerate(names)))
    pool = depth_pool(rs.table, pool_depth)
    rng = np.random.default_rng(seed)
    n_runs = pool["n_runs"].to_numpy().astype(float)
    min_rank = pool["min_rank"].to_numpy().astype(float)
    p_rel = np.clip(0.08 + 0.6 * n_runs / len(names) + 0.25 / min_rank, 0.0, 0.95)
    relevant = rng.random(pool.num_rows) < p_rel
    grade = np.where(relevant, rng.choice([1, 2, 3], size=pool.num_rows, p=[0.45, 0.35, 0.2]), 0).astype(np.int32)
    q = pa.table({"qid": pool["qid"], "docid": pool["docid"], "rel": grade}).cast(QRELS_SCHEMA)
    write_qrels(q, qrels_path)
    info = {"stamp": stamp, "lines": rs.table.num_rows, "read_runs_s": read_s, "judged": q.num_rows,
            "relevant_rel2": int((grade >= 2).sum()), "relevant_rel1": int((grade >= 1).sum()),
            "group_sizes": {g: sum(1 for i in range(len(names)) if group_of(i, team_size, teams) == g)
                            for g in sorted({group_of(i, team_size, teams) for i in range(len(names))})}}
    info_path.write_text(json.dumps(info, indent=1) + "\n")
    return info


def load(work: Path, pool_depth: int):
    import pandas as pd

    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.tables import read_table

    runs = read_table(work / "runs-canonical.parquet")
    qrels = read_qrels(work / f"qrels-depth{pool_depth}.txt")
    manifest = pd.read_csv(work / "manifest.csv", dtype=str)
    return runs, qrels, manifest


# ------------------------------------------------------------------------------------ child

def child(mode: str, work: Path, pool_depth: int, workers: int | None, out: Path) -> None:
    import scipy.stats  # noqa: F401  (imports are not timed)

    if mode == "official":
        from qrelkit.evaluate import evaluate
        from qrelkit.io.tables import write_table

        runs, qrels, _ = load(work, pool_depth)
        write_table(evaluate(runs, qrels, MEASURES, rel=2).summary, work / "official.parquet", kind="eval-summary",
                    params={"measures": MEASURES, "rel": 2})
        return

    from qrelkit.reuse import leave_out, write_report

    runs, qrels, manifest = load(work, pool_depth)
    official = None
    if mode == "logo-official-given":
        from qrelkit.io.tables import read_table

        official = read_table(work / "official.parquet")
    c0 = time.process_time()
    ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    b0 = busy_cpu_s()
    t0 = time.perf_counter()
    res = leave_out(runs, qrels, manifest, depth=pool_depth, measures=MEASURES, rel=2, official=official,
                    workers=workers)
    wall = time.perf_counter() - t0
    b1 = busy_cpu_s()
    ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - c0 + (ch1.ru_utime - ch0.ru_utime) + (ch1.ru_stime - ch0.ru_stime)
    r = {"mode": mode, "wall_s": wall, "cpu_s": cpu, "other_load_cores": others_cores(b0, b1, cpu, wall),
         "stages": {k: v for k, v in res.timings.items()},
         "rss_mb": peak_rss_mb(), "rss_workers_mb": ch1.ru_maxrss / 1024.0}
    if mode == "logo":
        t1 = time.perf_counter()
        write_report(res, out / "report")
        r["report_s"] = time.perf_counter() - t1
        s = res.summary.to_pandas()
        r["summary"] = s.to_dict(orient="records")
        r["units"] = res.units.to_pandas().drop(columns=["run_names"]).to_dict(orient="records")
    (out / f"child-{mode}.json").write_text(json.dumps(r, default=float))


def run_child(mode: str, a, out: Path) -> dict:
    cmd = [sys.executable, __file__, "--child", mode, "--work-dir", str(a.work_dir), "--pool-depth", str(a.pool_depth),
           "--out-dir", str(out)] + (["--workers", str(a.workers)] if a.workers else [])
    load = wait_idle(a.wait_idle, threshold=0.3)
    b0 = busy_cpu_s()
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    b1 = busy_cpu_s()
    if p.returncode:
        raise SystemExit(f"child {mode} failed:\n{p.stdout}\n{p.stderr}")
    r = json.loads((out / f"child-{mode}.json").read_text())
    r["idle_before"] = load  # cores other processes used just before the child started
    r["machine_cores_during"] = others_cores(b0, b1, 0.0, wall)  # every process, the child's included
    return r


# ----------------------------------------------------------------------------------- checks

def verify(work: Path, pool_depth: int) -> dict:
    import pyarrow.compute as pc

    from qrelkit.evaluate import evaluate
    from qrelkit.reuse import leave_out, reduced_qrels

    runs, qrels, manifest = load(work, pool_depth)
    group = dict(zip(manifest["run"], manifest["group"]))
    # independent reference with Python sets: (qid, docid) -> groups that pooled it within depth
    top = runs.filter(pc.less_equal(runs["rank"], pool_depth))
    by_doc: dict[tuple[str, str], set] = {}
    for r, q, d in zip(top["run"].to_pylist(), top["qid"].to_pylist(), top["docid"].to_pylist()):
        by_doc.setdefault((q, d), set()).add(group[r])
    judged = {(q, d): g for q, d, g in zip(qrels["qid"].to_pylist(), qrels["docid"].to_pylist(), qrels["rel"].to_pylist())}
    expected: dict[str, set] = {}
    for key in judged:
        gs = by_doc.get(key, set())
        if len(gs) == 1:
            expected.setdefault(next(iter(gs)), set()).add(key)
    res2 = leave_out(runs, qrels, manifest, depth=pool_depth, measures=MEASURES, rel=2, workers=2)
    res1 = leave_out(runs, qrels, manifest, depth=pool_depth, measures=MEASURES, rel=2, workers=1)
    rem = res2.removed.to_pandas()
    got = {g: set(zip(d["qid"], d["docid"])) for g, d in rem.groupby("unit")}
    removed_ok = got == expected
    # one group's left-out scores against a direct evaluate() on its reduced qrels
    g0 = sorted(expected)[0]
    g_runs = [r for r in sorted(group) if group[r] == g0]
    sub = runs.filter(pc.is_in(runs["run"], value_set=__import__("pyarrow").array(g_runs)))
    ev = evaluate(sub, reduced_qrels(qrels, res2.removed, g0), MEASURES, rel=2).summary.to_pandas()
    t = res2.runs.to_pandas()
    mine = t[t["run"].isin(g_runs)].set_index(["run", "measure"])["left_out"]
    direct = ev.set_index(["run", "measure"])["value"]
    scores_ok = bool(np.allclose(mine.sort_index().to_numpy(), direct.sort_index().to_numpy(), rtol=0, atol=1e-12))
    same = all(res1.tables()[k].to_pandas().equals(res2.tables()[k].to_pandas()) for k in res1.tables())
    return {"removed_equal_reference": removed_ok, "removed_documents": int(sum(len(v) for v in expected.values())),
            "group_checked": g0, "group_scores_equal_evaluate": scores_ok, "workers_1_equals_2": same}


# ------------------------------------------------------------------------------------- main

def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--topics", type=int, default=500)
    p.add_argument("--depth", type=int, default=100, help="documents per topic per run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pool-depth", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, default=None, help="scoring processes (default: leave_out's choice, 2)")
    p.add_argument("--wait-idle", type=float, default=60.0, help="before each measurement, wait up to this many "
                   "seconds for other processes to use < 0.3 cores")
    p.add_argument("--skip-verify", action="store_true")
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--work-dir", type=Path, default=ROOT / "bench-out" / "bench-reuse")
    p.add_argument("--out-dir", type=Path, default=None)
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        child(a.child, a.work_dir, a.pool_depth, a.workers, a.out_dir)
        return 0
    data = a.data_dir or ROOT / "bench-out" / f"runs-{a.runs}x{a.topics}x{a.depth}"
    out = a.out_dir or a.work_dir
    info = ensure_data(data, a.work_dir, a.runs, a.topics, a.depth, a.seed, a.pool_depth)
    if not (a.work_dir / "official.parquet").exists() or (a.work_dir / "official.parquet").stat().st_mtime < (
            a.work_dir / "data.json").stat().st_mtime:
        # in a subprocess: this process stays small (a child's peak RSS starts at its parent's)
        subprocess.run([sys.executable, __file__, "--child", "official", "--work-dir", str(a.work_dir),
                        "--pool-depth", str(a.pool_depth), "--out-dir", str(out)], check=True)
    results: dict[str, list] = {"logo": [], "logo-official-given": []}
    for i in range(a.repeats):
        for mode in results:
            r = run_child(mode, a, out)
            results[mode].append(r)
            print(f"  {mode} #{i + 1}: wall {r['wall_s']:.2f} s, cpu {r['cpu_s']:.2f} s, other load before "
                  f"{r['idle_before']:.2f} / during {r['other_load_cores']:.2f} cores" + (f", report {r['report_s']:.2f} s" if "report_s" in r else ""),
                  file=sys.stderr)
    checks = {} if a.skip_verify else verify(a.work_dir, a.pool_depth)
    rows = []
    for mode, rs in results.items():
        walls = [r["wall_s"] for r in rs]
        st = {k: med([r["stages"][k] for r in rs]) for k in ("prepare", "attribution", "scoring_wait", "tables")}
        quiet = [r["wall_s"] for r in rs if r["other_load_cores"] < QUIET]
        rows.append((mode, med(walls), min(walls), max(walls), med([r["cpu_s"] for r in rs]),
                     med([r["other_load_cores"] for r in rs]), (med(quiet), len(quiet)),
                     max(r["rss_mb"] for r in rs), max(r["rss_workers_mb"] for r in rs), st,
                     rs[0]["stages"]["evaluate_calls"], rs[0]["stages"]["workers"],
                     med([r["report_s"] for r in rs if "report_s" in r]) if mode == "logo" else None))
    print(f"\n{a.runs} runs in {GROUPS} groups x {a.topics} topics x {a.depth} docs ({info['lines']:,} lines); "
          f"depth-{a.pool_depth} qrels: {info['judged']:,} judged, {info['relevant_rel2']:,} with grade >= 2; "
          f"measures {', '.join(MEASURES)} (rel=2)\n")
    print(f"| work | wall, median (min-max) | wall, median of quiet repetitions (other load < {QUIET} cores) "
          "| CPU (all processes) | other load | peak RSS (main / worker) | stages, wall (median) | evaluate() calls "
          "| workers |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode, w, lo, hi, cpu, other, (qw, nq), rss, rssw, st, calls, wk, rep in rows:
        label = {"logo": "LOGO (official scores computed)", "logo-official-given": "LOGO (official scores given)"}[mode]
        stages = ", ".join(f"{k} {v:.2f}" for k, v in st.items())
        print(f"| {label} | {w:.2f} s ({lo:.2f}-{hi:.2f}) | **{qw:.2f} s** ({nq} of {len(results[mode])}) | "
              f"{cpu:.2f} s | {other:.2f} cores | {rss:.0f} / {rssw:.0f} MB | {stages} | {calls} | {wk} |")
    rep = rows[0][12]
    print(f"\nwrite_report (5 tables x Parquet+CSV, 3 plots, Markdown, HTML): {rep:.2f} s (median)")
    if checks:
        print("checks: " + ", ".join(f"{k}={v}" for k, v in checks.items()))
    s = results["logo"][0].get("summary", [])
    if s:
        print("\n| measure | mean abs change | max abs change | mean abs % | max rank drop | runs rank changed | "
              "Kendall tau_b | tau_ap |")
        print("|---|---|---|---|---|---|---|---|")
        for x in s:
            print(f"| {x['measure']} | {x['mean_abs_diff']:.4f} | {x['max_abs_diff']:.4f} | "
                  f"{x['mean_abs_pct_diff']:.2f} | {x['max_rank_drop']} | {x['runs_rank_changed']} | "
                  f"{x['kendall_tau']:.4f} | {x['tau_ap']:.4f} |")
    import ir_measures
    import pyarrow

    doc = {"command": "python benchmarks/bench_reuse.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
           "data": info, "measures": MEASURES, "results": results, "checks": checks,
           "versions": {"ir_measures": ir_measures.__version__, "pyarrow": pyarrow.__version__, "numpy": np.__version__}}
    (ROOT / "bench-out").mkdir(exist_ok=True)
    (ROOT / "bench-out" / "bench_reuse.json").write_text(json.dumps(doc, indent=1, default=float) + "\n")
    bad = [k for k, v in checks.items() if v is False]
    if bad:
        print(f"FAILED checks: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
