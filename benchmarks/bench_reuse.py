"""Leave-one-group-out at two sizes: the first 50 runs (7 groups) and all 100 runs (14 groups) of the
pool benchmark's runs, 500 topics, graded qrels on each size's depth-10 pool, five measures (AP,
nDCG@10, P@10, Bpref, Judged@10; rel=2); qrelkit beside a user's own ir-measures loop.

    python benchmarks/bench_reuse.py [--runs 50 100] [--repeats 3] [--peer-repeats 1] [--wait-idle 60]
    python benchmarks/bench_reuse.py --runs 20 40 --topics 100 --repeats 1 --skip-verify   # minutes -> seconds

Data (made once, deterministic, reused while the parameters match):

* runs: ``benchmarks/gen_runs.py`` seed 0 — 100 runs x 500 topics x 100 documents (5M lines),
  shared with ``bench_pool.py`` and ``bench_eval.py`` (``bench-out/runs-100x500x100``); read once
  with ``read_runs`` (strict) into canonical Parquet (``bench-out/bench-reuse/``);
* groups: the generator's teams of 4 correlated runs are put in 14 groups (team t -> group
  floor(14 t / 25)): 11 groups of 8 runs and 3 of 4. A size of N runs is the first N runs (by
  name) in their groups: 50 runs are the 7 groups g00-g06 (8, 8, 8, 8, 4, 8, 6 runs); every run
  is pooled;
* qrels (one per size): the depth-10 pool of the size's runs, each document graded 0-3 with a
  seeded draw whose chance of relevance grows with the number of runs that pooled it and falls
  with its best rank (``bench-out/bench-reuse/rN/qrels-depth10.txt``; 100 runs: 153,615 judged).

Tools, each in fresh processes (imports timed apart, data loading not timed; the first call in the
process beside ``--repeats`` warm repeats; wall and CPU seconds, CPU including the forked scoring
workers'; peak RSS of the process and of its workers; the cores other processes used meanwhile):

* ``qrelkit``: ``leave_out(runs, qrels, manifest, depth=10, rel=2)`` — attribution, reduced qrels,
  the official scores of every run and the left-out scores of every group's runs, the tables;
  then, untimed by the calls, ``write_report`` (tables, three plots, Markdown, HTML) as a stage;
* ``qrelkit, official given``: the same with the official scores given (``official.parquet``, made
  once by ``evaluate`` with the same settings);
* ``ir-measures loop``: what a user's own script does with ir-measures (its documented way for many
  runs on one qrels: one ``ir_measures.evaluator`` per qrels, ``calc_aggregate`` per run): the
  official scores of every run, each group's unique judged documents (Python sets over the runs'
  top 10 by score descending, ties by docid descending), then per group the reduced qrels (a
  placeholder judgment for an emptied topic, as qrelkit) and its runs' scores. It gets the same
  runs and qrels as Python dicts (its native input, made untimed).

The unit is the run line (R runs x T topics x 100 documents): each run is scored on every topic
twice, officially and left out, so the work grows with runs x topics at a fixed group size; the
per-group part (each group's reduced qrels, groups x judged documents) grows faster than the lines
when runs and groups grow together, and the growth figure includes it.

Checks (untimed, at the largest size unless ``--skip-verify``): the removed documents of every
group equal an independent computation with Python sets; one group's left-out scores equal
``evaluate`` on its reduced qrels; one and two scoring processes give identical tables. At every
size: the ir-measures loop's official and left-out scores against qrelkit's (largest difference
per measure). Any failed check exits 1. Results: a Markdown table on stdout and ``--json-out``
(``bench-out/reuse.json``, the shape of ``benchmarks/_results.py``).
"""

from __future__ import annotations

import argparse
import json
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
from _machine import ChildFailed, emit_result, peak_rss_mb, run_child_process  # noqa: E402
from _results import benchmark_result, call, measure, size_result, target, tool_result, write_result  # noqa: E402

MEASURES = ["AP", "nDCG@10", "P@10", "Bpref", "Judged@10"]
REL = 2
GROUPS = 14
TEAM = 4
TOOLS = {"qrelkit": "qrelkit", "qrelkit-official-given": "qrelkit, official given", "ir-measures": "ir-measures loop"}
STAGES = ("prepare", "attribution", "scoring_wait", "tables")
TARGET_S = 5.0
GROWTH = 1.10
#: the placeholder docid qrelkit gives a topic whose every judgment a group contributed alone
PLACEHOLDER = " qrelkit: no judgment left"


def group_of(i: int, teams: int) -> str:
    return f"g{(i // TEAM) * GROUPS // teams:02d}"


# ------------------------------------------------------------------------------------- data

def ensure_runs(data: Path, work: Path, runs: int, topics: int, depth: int, seed: int) -> Path:
    """The generated run files (``data``) and their canonical Parquet (``work``)."""
    import gen_runs  # lazy: the children never need it

    gen_runs.ensure(data, runs, topics, depth, seed)
    want = (runs, topics, depth, seed, gen_runs.GENERATOR_VERSION)
    canon = work / "runs-canonical.parquet"
    stamp = work / "runs-canonical.json"
    if not (canon.exists() and stamp.exists() and json.loads(stamp.read_text()).get("stamp") == list(want)):
        from qrelkit.io.runs import read_runs  # lazy: the parent stays small
        from qrelkit.io.tables import write_table

        work.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        rs = read_runs(data)
        write_table(rs.table, canon, kind="runs", params={"runs": str(data)})
        stamp.write_text(json.dumps({"stamp": list(want), "read_runs_s": time.perf_counter() - t0}))
    return canon


def ensure_size(canon: Path, work: Path, n_runs: int, total_runs: int, seed: int, pool_depth: int) -> dict:
    """``work/rN``: the first ``n_runs`` runs, their manifest, graded depth-``pool_depth`` qrels and
    official scores; returns the size's description (``data.json``)."""
    import pyarrow as pa  # lazy: the parent stays small
    import pyarrow.compute as pc

    from qrelkit.io.qrels import QRELS_SCHEMA, write_qrels
    from qrelkit.io.tables import read_table, write_table
    from qrelkit.pooler import depth_pool

    d = work / f"r{n_runs}"
    info_path = d / "data.json"
    stamp = {"canonical": json.loads((work / "runs-canonical.json").read_text())["stamp"], "runs": n_runs,
             "seed": seed, "pool_depth": pool_depth, "groups": GROUPS}
    if info_path.exists() and json.loads(info_path.read_text()).get("stamp") == stamp:
        return json.loads(info_path.read_text())
    d.mkdir(parents=True, exist_ok=True)
    runs = read_table(canon)
    all_names = sorted(set(pc.unique(runs["run"]).to_pylist()))
    teams = (total_runs + TEAM - 1) // TEAM
    names = all_names[:n_runs]
    if n_runs < len(all_names):
        runs = runs.filter(pc.is_in(runs["run"], value_set=pa.array(names)))
    write_table(runs, d / "runs.parquet", kind="runs", params={"runs": str(canon), "first": n_runs})
    groups = {r: group_of(i, teams) for i, r in enumerate(names)}
    (d / "manifest.csv").write_text("run,group,pooled\n" + "".join(f"{r},{groups[r]},true\n" for r in names))
    pool = depth_pool(runs, pool_depth)
    rng = np.random.default_rng(seed)
    n_pooled = pool["n_runs"].to_numpy().astype(float)
    min_rank = pool["min_rank"].to_numpy().astype(float)
    p_rel = np.clip(0.08 + 0.6 * n_pooled / len(names) + 0.25 / min_rank, 0.0, 0.95)
    relevant = rng.random(pool.num_rows) < p_rel
    grade = np.where(relevant, rng.choice([1, 2, 3], size=pool.num_rows, p=[0.45, 0.35, 0.2]), 0).astype(np.int32)
    q = pa.table({"qid": pool["qid"], "docid": pool["docid"], "rel": grade}).cast(QRELS_SCHEMA)
    write_qrels(q, d / f"qrels-depth{pool_depth}.txt")
    sizes: dict[str, int] = {}
    for g in groups.values():
        sizes[g] = sizes.get(g, 0) + 1
    info = {"stamp": stamp, "runs": n_runs, "groups": len(sizes), "group_sizes": dict(sorted(sizes.items())),
            "topics": len(set(pc.unique(runs["qid"]).to_pylist())), "lines": runs.num_rows, "judged": q.num_rows,
            "relevant_rel2": int((grade >= REL).sum())}
    info_path.write_text(json.dumps(info, indent=1) + "\n")
    (d / "official.parquet").unlink(missing_ok=True)
    return info


def load(d: Path, pool_depth: int):
    import pandas as pd  # lazy: children only

    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.tables import read_table

    return (read_table(d / "runs.parquet"), read_qrels(d / f"qrels-depth{pool_depth}.txt"),
            pd.read_csv(d / "manifest.csv", dtype=str))


# ------------------------------------------------------------------------------------ children

def _workers_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


def child_official(d: Path, pool_depth: int) -> None:
    from qrelkit.evaluate import evaluate
    from qrelkit.io.tables import write_table

    runs, qrels, _ = load(d, pool_depth)
    write_table(evaluate(runs, qrels, MEASURES, rel=REL).summary, d / "official.parquet", kind="eval-summary",
                params={"measures": MEASURES, "rel": REL})


def child_qrelkit(tool: str, d: Path, pool_depth: int, repeats: int, workers: int | None, out: Path) -> dict:
    t0 = time.perf_counter()
    from qrelkit.reuse import leave_out, write_report  # the imports a user's script pays once

    import_s = time.perf_counter() - t0
    runs, qrels, manifest = load(d, pool_depth)
    official = None
    if tool == "qrelkit-official-given":
        from qrelkit.io.tables import read_table

        official = read_table(d / "official.parquet")
    first, warm, res = measure(lambda: leave_out(runs, qrels, manifest, depth=pool_depth, measures=MEASURES,
                                                 rel=REL, official=official, workers=workers), repeats,
                               children=True)
    stages = {k: float(res.timings[k]) for k in STAGES}
    if tool == "qrelkit":
        t1 = time.perf_counter()
        write_report(res, out / f"report-{d.name}")
        stages["write_report"] = time.perf_counter() - t1
    t = res.runs.to_pandas()
    return {"first": first, "warm": warm, "import_s": import_s, "stages": stages, "peak_rss_mb": peak_rss_mb(),
            "workers_peak_rss_mb": _workers_rss_mb(), "workers": int(res.timings["workers"]),
            "evaluate_calls": int(res.timings["evaluate_calls"]),
            "scores": {"run": t["run"].tolist(), "measure": t["measure"].tolist(),
                       "official": t["official"].tolist(), "left_out": t["left_out"].tolist()},
            "summary": res.summary.to_pandas().to_dict(orient="records")}


def _peer_input(d: Path, pool_depth: int):
    """The runs ``{run: {qid: {docid: score}}}``, qrels ``{qid: {docid: grade}}`` and groups
    ``{run: group}`` as a user's script holds them."""
    runs, qrels, manifest = load(d, pool_depth)
    run_d: dict = {}
    for r, q, doc, s in zip(runs["run"].to_pylist(), runs["qid"].to_pylist(), runs["docid"].to_pylist(),
                            runs["score"].to_pylist()):
        run_d.setdefault(r, {}).setdefault(q, {})[doc] = s
    qrels_d: dict = {}
    for q, doc, g in zip(qrels["qid"].to_pylist(), qrels["docid"].to_pylist(), qrels["rel"].to_pylist()):
        qrels_d.setdefault(q, {})[doc] = g
    return run_d, qrels_d, dict(zip(manifest["run"], manifest["group"]))


def peer_logo(runs: dict, qrels: dict, group: dict, measures: list, depth: int) -> tuple[dict, dict]:
    """Leave-one-group-out with ir-measures in a loop: ``(official, left_out)``, each
    ``{(run, measure name): value}``."""
    import ir_measures  # lazy: the peer's child only

    ev = ir_measures.evaluator(measures, qrels)
    official = {(r, str(m)): v for r in runs for m, v in ev.calc_aggregate(runs[r]).items()}
    groups_of: dict = {}
    for r, per in runs.items():
        for q, docs in per.items():
            for doc in sorted(docs, key=lambda x: (docs[x], x), reverse=True)[:depth]:  # score desc, docid desc
                groups_of.setdefault((q, doc), set()).add(group[r])
    unique: dict = {}
    for q, docs in qrels.items():
        for doc in docs:
            gs = groups_of.get((q, doc), ())
            if len(gs) == 1:
                unique.setdefault(next(iter(gs)), set()).add((q, doc))
    left_out = dict(official)
    for g, gone in unique.items():
        reduced = {}
        for q, docs in qrels.items():
            kept = {doc: rel for doc, rel in docs.items() if (q, doc) not in gone}
            reduced[q] = kept or {PLACEHOLDER: 0}
        ev_g = ir_measures.evaluator(measures, reduced)
        for r in (r for r in runs if group[r] == g):
            left_out.update({(r, str(m)): v for m, v in ev_g.calc_aggregate(runs[r]).items()})
    return official, left_out


def child_peer(d: Path, pool_depth: int, repeats: int) -> dict:
    t0 = time.perf_counter()
    import ir_measures

    from qrelkit.evaluate import parse_measures, with_relevance  # the same measure objects as qrelkit's

    import_s = time.perf_counter() - t0
    measures = with_relevance(parse_measures(MEASURES), REL)
    runs, qrels, group = _peer_input(d, pool_depth)
    first, warm, (official, left_out) = measure(lambda: peer_logo(runs, qrels, group, measures, pool_depth), repeats)
    keys = sorted(official)
    return {"first": first, "warm": warm, "import_s": import_s, "peak_rss_mb": peak_rss_mb(),
            "ir_measures": ir_measures.__version__,
            "scores": {"run": [k[0] for k in keys], "measure": [k[1] for k in keys],
                       "official": [official[k] for k in keys], "left_out": [left_out[k] for k in keys]}}


def child(a) -> None:
    d = a.size_dir
    if a.child == "official":
        child_official(d, a.pool_depth)
        return
    if a.child == "ir-measures":
        emit_result(child_peer(d, a.pool_depth, a.peer_repeats))
        return
    emit_result(child_qrelkit(a.child, d, a.pool_depth, a.repeats, a.workers, a.work_dir))


# ----------------------------------------------------------------------------------- checks

def verify(d: Path, pool_depth: int) -> dict:
    """The removed documents against Python sets, one group's scores against evaluate() on its
    reduced qrels, one scoring process against two."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from qrelkit.evaluate import evaluate
    from qrelkit.reuse import leave_out, reduced_qrels

    runs, qrels, manifest = load(d, pool_depth)
    group = dict(zip(manifest["run"], manifest["group"]))
    top = runs.filter(pc.less_equal(runs["rank"], pool_depth))
    by_doc: dict[tuple[str, str], set] = {}
    for r, q, doc in zip(top["run"].to_pylist(), top["qid"].to_pylist(), top["docid"].to_pylist()):
        by_doc.setdefault((q, doc), set()).add(group[r])
    expected: dict[str, set] = {}
    for key in zip(qrels["qid"].to_pylist(), qrels["docid"].to_pylist()):
        gs = by_doc.get(key, set())
        if len(gs) == 1:
            expected.setdefault(next(iter(gs)), set()).add(key)
    res2 = leave_out(runs, qrels, manifest, depth=pool_depth, measures=MEASURES, rel=REL, workers=2)
    res1 = leave_out(runs, qrels, manifest, depth=pool_depth, measures=MEASURES, rel=REL, workers=1)
    rem = res2.removed.to_pandas()
    got = {g: set(zip(x["qid"], x["docid"])) for g, x in rem.groupby("unit")}
    g0 = sorted(expected)[0]
    g_runs = [r for r in sorted(group) if group[r] == g0]
    sub = runs.filter(pc.is_in(runs["run"], value_set=pa.array(g_runs)))
    ev = evaluate(sub, reduced_qrels(qrels, res2.removed, g0), MEASURES, rel=REL).summary.to_pandas()
    t = res2.runs.to_pandas()
    mine = t[t["run"].isin(g_runs)].set_index(["run", "measure"])["left_out"].sort_index().to_numpy()
    direct = ev.set_index(["run", "measure"])["value"].sort_index().to_numpy()
    return {"removed_equal_reference": got == expected,
            "removed_documents": int(sum(len(v) for v in expected.values())),
            "group_checked": g0, "group_scores_equal_evaluate": bool(np.array_equal(mine, direct)),
            "workers_1_equals_2": all(res1.tables()[k].equals(res2.tables()[k]) for k in res1.tables())}


def peer_agreement(mine: dict, peer: dict) -> dict:
    """Largest |qrelkit - ir-measures loop| per measure, official and left out."""
    a = {(r, m): (o, lo) for r, m, o, lo in zip(mine["run"], mine["measure"], mine["official"], mine["left_out"])}
    out: dict[str, dict] = {}
    for r, m, o, lo in zip(peer["run"], peer["measure"], peer["official"], peer["left_out"]):
        mo, mlo = a[(r, m)]
        x = out.setdefault(m, {"official": 0.0, "left_out": 0.0})
        x["official"] = max(x["official"], abs(mo - o))
        x["left_out"] = max(x["left_out"], abs(mlo - lo))
    return out


# ------------------------------------------------------------------------------------- main

def run_tool(tool: str, d: Path, a) -> dict:
    """``--processes`` fresh processes of one tool at one size, merged: the median first call,
    every warm repeat."""
    cmd = [sys.executable, __file__, "--child", tool, "--size-dir", str(d), "--work-dir", str(a.work_dir),
           "--pool-depth", str(a.pool_depth), "--repeats", str(a.repeats), "--peer-repeats", str(a.peer_repeats)]
    cmd += ["--workers", str(a.workers)] if a.workers else []
    procs = []
    for i in range(a.processes):
        r = run_child_process(cmd, idle_wait=a.wait_idle, stderr_tail=4000)
        procs.append(r)
        print(f"  {d.name} {tool} #{i + 1}: first {r['first']['wall_s']:.2f} s (cpu {r['first']['cpu_s']:.2f}), warm "
              + ", ".join(f"{w['wall_s']:.2f}" for w in r["warm"]) + f" s; others {r.get('background_cores', 0):.2f} "
              "cores", file=sys.stderr)
    firsts = sorted((p["first"] for p in procs), key=lambda c: c["wall_s"])
    out = dict(procs[0])
    out["first"] = firsts[len(firsts) // 2]
    out["warm"] = [w for p in procs for w in p["warm"]]
    out["background_cores"] = statistics.median(p.get("background_cores", float("nan")) for p in procs)
    out["peak_rss_mb"] = max(p["peak_rss_mb"] for p in procs)
    return out


def tool_entry(tool: str, r: dict) -> dict:
    notes = {
        "qrelkit": "leave_out(): attribution, official and left-out scores (forked scoring workers), tables",
        "qrelkit-official-given": "leave_out() with the official scores given: only the groups' runs are scored",
        "ir-measures": "a user's loop: ir_measures.evaluator per qrels, calc_aggregate per run; unique documents "
                       "with Python sets; runs and qrels as Python dicts (made untimed)",
    }
    extra = {k: r[k] for k in ("workers", "evaluate_calls", "workers_peak_rss_mb") if k in r}
    return tool_result(TOOLS[tool], first=call(**r["first"]), warm=[call(**w) for w in r["warm"]],
                       import_s=r.get("import_s"), peak_rss_mb=r.get("peak_rss_mb"),
                       background_cores=r.get("background_cores"), stages=r.get("stages"), note=notes[tool], **extra)


def print_table(sizes: list[dict], targets: list[dict], checks: dict) -> None:
    print("\n| size | tool | first call, wall (CPU) | warm, wall median (min-max) | warm CPU | cores | peak RSS "
          "(workers) | other load | stages (warm) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in sizes:
        for t in s["tools"]:
            f, w = t["first"], t["warm"]
            st = ", ".join(f"{k} {v:.2f}" for k, v in (t.get("stages") or {}).items())
            rss = f"{t['peak_rss_mb']:.0f}" + (f" ({t['workers_peak_rss_mb']:.0f})" if t.get("workers_peak_rss_mb") else "")
            print(f"| {s['label']} | {t['tool']} | {f['wall_s']:.2f} s ({f['cpu_s']:.2f}) | {w['wall_s']:.2f} s "
                  f"({w['wall_min_s']:.2f}-{w['wall_max_s']:.2f}) | {w['cpu_s']:.2f} s | {t['cores']:.2f} | {rss} MB | "
                  f"{t['background_cores'] or 0:.2f} | {st} |")
    print("\n| size | measure | mean abs change | max abs change | mean abs % | max rank drop | runs rank changed | "
          "Kendall tau_b | tau_ap |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in sizes:
        for x in s["leave_out_summary"]:
            print(f"| {s['label']} | {x['measure']} | {x['mean_abs_diff']:.4f} | {x['max_abs_diff']:.4f} | "
                  f"{x['mean_abs_pct_diff']:.2f} | {x['max_rank_drop']} | {x['runs_rank_changed']} | "
                  f"{x['kendall_tau']:.4f} | {x['tau_ap']:.4f} |")
    print()
    for t in targets:
        print(f"target: {t['what']}: {t['value']:.3f} {t['unit']} {t['op']} {t['limit']:g} -> "
              f"{'met' if t['met'] else 'NOT met'}")
    print("checks: " + json.dumps(checks, default=float))


def per_unit(s: dict, tool: str, key: str) -> float:
    t = next(t for t in s["tools"] if t["tool"] == TOOLS[tool])
    return t["warm"][key] / s["units"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, nargs="+", default=[50, 100], help="the sizes: the first N runs (two sizes)")
    p.add_argument("--topics", type=int, default=500)
    p.add_argument("--depth", type=int, default=100, help="documents per topic per run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pool-depth", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3, help="warm repeats of qrelkit in each process")
    p.add_argument("--peer-repeats", type=int, default=1, help="warm repeats of the ir-measures loop in its process")
    p.add_argument("--processes", type=int, default=1, help="fresh processes per tool and size")
    p.add_argument("--workers", type=int, default=None, help="scoring processes (default: leave_out's choice, 2)")
    p.add_argument("--wait-idle", type=float, default=60.0, help="before each process, wait up to this many seconds "
                   "for other processes to use < 0.25 cores")
    p.add_argument("--skip-peer", action="store_true", help="measure qrelkit only")
    p.add_argument("--skip-verify", action="store_true")
    p.add_argument("--data-dir", type=Path, default=None)
    p.add_argument("--work-dir", type=Path, default=None)
    p.add_argument("--json-out", type=Path, default=ROOT / "bench-out" / "reuse.json")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--size-dir", type=Path, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    suffix = "" if (a.topics, a.depth, a.seed) == (500, 100, 0) else f"-t{a.topics}x{a.depth}s{a.seed}"
    a.work_dir = a.work_dir or ROOT / "bench-out" / f"bench-reuse{suffix}"
    if a.child:
        child(a)
        return 0
    total = max(max(a.runs), 100)
    data = a.data_dir or ROOT / "bench-out" / f"runs-{total}x{a.topics}x{a.depth}"
    canon = ensure_runs(data, a.work_dir, total, a.topics, a.depth, a.seed)
    infos = {}
    for n in sorted(set(a.runs)):
        infos[n] = ensure_size(canon, a.work_dir, n, total, a.seed, a.pool_depth)
        d = a.work_dir / f"r{n}"
        if not (d / "official.parquet").exists():  # in a subprocess: this process stays small
            subprocess.run([sys.executable, __file__, "--child", "official", "--size-dir", str(d), "--work-dir",
                            str(a.work_dir), "--pool-depth", str(a.pool_depth)], check=True)
    tools = [t for t in TOOLS if not (a.skip_peer and t == "ir-measures")]
    sizes, checks = [], {}
    try:
        for n in sorted(infos):
            info, d = infos[n], a.work_dir / f"r{n}"
            got = {t: run_tool(t, d, a) for t in tools}
            if "ir-measures" in got:
                agree = peer_agreement(got["qrelkit"]["scores"], got["ir-measures"]["scores"])
                checks[f"ir-measures loop vs qrelkit, largest difference, {n} runs"] = agree
            sizes.append(size_result(f"{n} runs / {info['groups']} groups", info["lines"], "run line",
                                     [tool_entry(t, got[t]) for t in tools], runs=n, groups=info["groups"],
                                     topics=info["topics"], judged=info["judged"],
                                     leave_out_summary=got["qrelkit"]["summary"]))
    except ChildFailed as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    if not a.skip_verify:
        checks.update(verify(a.work_dir / f"r{max(infos)}", a.pool_depth))
    small, large = sizes[0], sizes[-1]
    big = next(t for t in large["tools"] if t["tool"] == TOOLS["qrelkit"])
    targets = [
        target(f"leave-one-group-out, {large['label']}, {len(MEASURES)} measures: warm wall", big["warm"]["wall_s"],
               "<=", TARGET_S, "s"),
        target(f"leave-one-group-out, {large['label']}: first call in a fresh process, wall", big["first"]["wall_s"],
               "<=", TARGET_S, "s"),
    ]
    if len(sizes) > 1:
        for key, what in (("wall_s", "wall"), ("cpu_s", "CPU")):
            targets.append(target(f"qrelkit {what} per run line, {large['label']} / {small['label']}",
                                  per_unit(large, "qrelkit", key) / per_unit(small, "qrelkit", key), "<=", GROWTH))
    notes = [
        "Each size is the first N runs of the same 100 generated runs (500 topics x 100 documents) in their "
        "groups, every run pooled; the qrels are the size's depth-10 pool, graded with a seeded draw.",
        "The unit is the run line: every run is scored on every topic twice (officially and left out); the "
        "per-group reduced qrels (groups x judged documents) grow faster than the lines and are included.",
        "qrelkit scores in 2 forked processes by default (its CPU includes theirs); the ir-measures loop runs "
        "in one process.",
        "The ir-measures loop ranks by score with ties broken by each provider (pytrec_eval: docid descending; "
        "its Judged@k provider: docid ascending); qrelkit ranks ties by docid descending for every measure, so "
        "Judged@10 may differ on lists tied across rank 10.",
    ]
    res = benchmark_result("reuse", "Leave-one-group-out", sizes, peers=("ir-measures", "pytrec-eval-terrier"),
                           targets=targets, checks=checks, notes=notes, measures=MEASURES,
                           data={str(n): infos[n] for n in infos})
    write_result(res, a.json_out, "bench_reuse.py", argv)
    print_table(sizes, targets, checks)
    bad = [k for k, v in checks.items() if v is False]
    if bad:
        print(f"FAILED checks: {bad}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
