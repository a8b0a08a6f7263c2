"""Benchmark: read N TREC runs and build a depth-k pool, qrelkit against trectools.

    python benchmarks/bench_pool.py                       # 100 runs x 500 topics x 100 docs
    python benchmarks/bench_pool.py --runs 20 --topics 100 --repeats 5 --skip-peers

The runs are generated once by ``benchmarks/gen_runs.py`` into a cache folder (default
``bench-out/runs-100x500x100``) and reused while their parameters match. Each measured tool runs
in a fresh Python subprocess, so its peak memory (``VmHWM`` of that process, interpreter and
imports included) and its wall time are its own:

* **trectools**: ``TrecRun(file)`` for every run, then
  ``TrecPoolMaker().make_pool(runs, strategy="topX", topX=k)``;
* **qrelkit**: ``read_runs(folder)`` (full validation, canonical order), ``depth_pool(table, k)``
  (provenance: min rank, run count, every (run, rank)) and ``write_table(pool, "pool.parquet")``.

"wall" is the time of that work inside the subprocess (imports excluded, reported apart);
"process wall" is the whole subprocess as seen from the parent. Medians over ``--repeats``
(qrelkit) and ``--peer-repeats`` (trectools) runs. The page cache is warmed before measuring.

Both pools are then checked against two independent reference pools computed here with plain
pyarrow: top k by (score desc, docid desc) -- trec_eval's order, which qrelkit uses -- and by
(score desc, docid asc) -- the order trectools sorts by. Pairs in one pool and not the other
can only come from exact score ties that straddle rank k/k+1; they are counted and explained.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import ChildFailed, cpu_s, emit_result, peak_rss_mb, profile_text, run_child_process  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


# --------------------------------------------------------------------------- children


def _run_files(data: Path) -> list[Path]:
    return sorted(p for p in data.iterdir() if p.is_file() and not p.name.startswith("."))


def child_trectools(data: Path, depth: int, out: Path) -> dict:
    t0 = time.perf_counter()
    from trectools import TrecPoolMaker, TrecRun

    t1 = time.perf_counter()
    rss_imports = peak_rss_mb()
    c1 = cpu_s()
    files = _run_files(data)
    runs = [TrecRun(str(f)) for f in files]
    t2 = time.perf_counter()
    pool = TrecPoolMaker().make_pool(runs, strategy="topX", topX=depth)
    t3 = time.perf_counter()
    cpu = cpu_s() - c1
    rss = peak_rss_mb()
    # not measured: dump the pairs for the parent's comparison
    with open(out, "w") as fh:
        for q, docs in pool.pool.items():
            for d in docs:
                fh.write(f"{q}\t{d}\n")
    return {
        "import_s": t1 - t0,
        "stages": {"read": t2 - t1, "pool": t3 - t2},
        "work_s": t3 - t1,
        "work_cpu_s": cpu,
        "rss_after_imports_mb": rss_imports,
        "peak_rss_mb": rss,
        "pairs": int(sum(len(v) for v in pool.pool.values())),
    }


def child_qrelkit(data: Path, depth: int, out: Path, threads: int | None, profile: bool) -> dict:
    t0 = time.perf_counter()
    from qrelkit.io.runs import read_runs
    from qrelkit.io.tables import write_table
    from qrelkit.pooler.pools import depth_pool

    t1 = time.perf_counter()
    rss_imports = peak_rss_mb()
    c1 = cpu_s()
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    rs = read_runs(data, threads=threads)
    t2 = time.perf_counter()
    pool = depth_pool(rs.table, depth)
    t3 = time.perf_counter()
    write_table(pool, out, kind="pool", params={"depth": depth, "runs": rs.runs})
    t4 = time.perf_counter()
    cpu = cpu_s() - c1
    rss = peak_rss_mb()
    result = {
        "import_s": t1 - t0,
        "stages": {"read": t2 - t1, "pool": t3 - t2, "write": t4 - t3},
        "work_s": t4 - t1,
        "work_cpu_s": cpu,
        "rss_after_imports_mb": rss_imports,
        "peak_rss_mb": rss,
        "pairs": pool.num_rows,
        "issues": {str(k): int(v) for k, v in rs.issues.groupby("rule")["count"].sum().items()},
    }
    if prof is not None:
        result["profile"] = profile_text(prof, 40)
    return result


def child_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--child", required=True, choices=["trectools", "qrelkit"])
    p.add_argument("--data", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--pool-depth", type=int, default=10)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--profile", action="store_true")
    a = p.parse_args(argv)
    if a.child == "trectools":
        res = child_trectools(a.data, a.pool_depth, a.out)
    else:
        res = child_qrelkit(a.data, a.pool_depth, a.out, a.threads, a.profile)
    emit_result(res)
    return 0


# --------------------------------------------------------------------------- parent


def run_child(tool: str, data: Path, out: Path, depth: int, threads: int | None = None,
              profile: bool = False, idle_wait: float = 0.0) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", tool, "--data", str(data),
           "--out", str(out), "--pool-depth", str(depth)]
    if threads:
        cmd += ["--threads", str(threads)]
    if profile:
        cmd.append("--profile")
    try:
        return run_child_process(cmd, idle_wait=idle_wait)
    except ChildFailed as exc:
        raise SystemExit(f"{tool}: {exc}") from None


def ensure_data(data: Path, runs: int, topics: int, depth: int, seed: int) -> dict:
    import gen_runs

    meta = data / ".params.json"
    if meta.exists():
        try:
            stats = json.loads(meta.read_text())
        except ValueError:
            stats = {}
        same = all(stats.get(k) == v for k, v in
                   {"runs": runs, "topics": topics, "depth": depth, "seed": seed,
                    "generator_version": gen_runs.GENERATOR_VERSION}.items())
        if same and all((data / f).exists() for f in stats.get("files", [None])):
            d = stats["distinct_at_pool_depth"]
            print(f"reusing {data} ({stats['lines']:,} lines; {d['mean']:.1f} distinct docs per topic "
                  f"at depth {stats['pool_depth']})")
            return stats
    if data.exists() and any(data.iterdir()):
        if not meta.exists():
            raise SystemExit(f"{data} holds files that gen_runs.py did not write; choose another --data-dir")
        # regenerate: remove only what the generator wrote before
        try:
            old = json.loads(meta.read_text())
        except ValueError:
            old = {}
        for name in old.get("files", []):
            (data / name).unlink(missing_ok=True)
        meta.unlink()
    return gen_runs.generate(data, runs=runs, topics=topics, depth=depth, seed=seed)


def warm_cache(data: Path) -> None:
    for f in _run_files(data):
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass


def reference_pools(data: Path, depth: int):
    """(pairs by score desc/docid desc, pairs by score desc/docid asc, boundary-tie lists)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    tables = []
    for i, f in enumerate(_run_files(data)):
        t = pacsv.read_csv(
            f,
            read_options=pacsv.ReadOptions(column_names=["qid", "q0", "docid", "rank", "score", "tag"]),
            parse_options=pacsv.ParseOptions(delimiter=" "),
            convert_options=pacsv.ConvertOptions(
                include_columns=["qid", "docid", "score"],
                column_types={"qid": pa.string(), "docid": pa.string(), "score": pa.float64()},
            ),
        )
        tables.append(t.append_column("r", pa.array(np.full(t.num_rows, i, np.int32))))
    t = pa.concat_tables(tables).combine_chunks()
    out = []
    boundary = 0
    for docorder in ("descending", "ascending"):
        idx = pc.sort_indices(t, sort_keys=[("r", "ascending"), ("qid", "ascending"),
                                            ("score", "descending"), ("docid", docorder)])
        s = t.take(idx)
        r = s["r"].to_numpy()
        q = pc.dictionary_encode(s["qid"]).combine_chunks().indices.to_numpy()
        n = s.num_rows
        new = np.ones(n, bool)
        new[1:] = (r[1:] != r[:-1]) | (q[1:] != q[:-1])
        starts = np.flatnonzero(new)
        pos = np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n))) + 1
        if docorder == "descending":
            sc = s["score"].to_numpy()
            at_k = np.flatnonzero(pos == depth)
            at_k = at_k[(at_k + 1 < n) & (pos[np.minimum(at_k + 1, n - 1)] == depth + 1)]
            boundary = int((sc[at_k] == sc[at_k + 1]).sum())
        top = s.filter(pa.array(pos <= depth))
        out.append(set(zip(top["qid"].to_pylist(), top["docid"].to_pylist())))
    return out[0], out[1], boundary


def verify(data: Path, depth: int, qrelkit_pool: Path, trectools_pairs: Path | None) -> dict:
    import pyarrow.parquet as pq

    ref_desc, ref_asc, boundary = reference_pools(data, depth)
    qp = pq.read_table(qrelkit_pool, columns=["qid", "docid"])
    q = set(zip(qp["qid"].to_pylist(), qp["docid"].to_pylist()))
    res = {
        "qrelkit_pairs": len(q),
        "qrelkit_equals_reference_desc": q == ref_desc,
        "tie_lists_at_boundary": boundary,
        "reference_desc_vs_asc_differ": len(ref_desc ^ ref_asc),
    }
    if trectools_pairs is not None:
        tt = set()
        with open(trectools_pairs) as fh:
            for ln in fh:
                a, b = ln.rstrip("\n").split("\t")
                tt.add((a, b))
        res.update(
            trectools_pairs=len(tt),
            common=len(q & tt),
            only_qrelkit=len(q - tt),
            only_trectools=len(tt - q),
            trectools_equals_reference_asc=tt == ref_asc,
            # every difference is explained when each tool matches the reference for its order
            differences_explained_by_ties=(q == ref_desc and tt == ref_asc),
        )
    return res


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def fmt_range(xs, nd=2):
    if len(xs) <= 1:
        return ""
    return f" ({min(xs):.{nd}f}-{max(xs):.{nd}f})"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--child" in argv:
        return child_main(argv)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--topics", type=int, default=500)
    p.add_argument("--depth", type=int, default=100, help="documents per topic in each run")
    p.add_argument("--pool-depth", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3, help="qrelkit repetitions")
    p.add_argument("--peer-repeats", type=int, default=3, help="trectools repetitions")
    p.add_argument("--skip-peers", action="store_true", help="measure qrelkit only")
    p.add_argument("--threads", type=int, default=None, help="qrelkit reader threads (default: library's)")
    p.add_argument("--data-dir", type=Path, default=None,
                   help="run cache (default bench-out/runs-RUNSxTOPICSxDEPTH[-sSEED])")
    p.add_argument("--out-dir", type=Path, default=Path("bench-out"))
    p.add_argument("--profile", action="store_true", help="also run qrelkit once under cProfile")
    p.add_argument("--skip-verify", action="store_true")
    p.add_argument("--wait-idle", type=float, default=60.0, metavar="SECONDS",
                   help="before each measurement wait up to SECONDS for other processes to use < 0.25 "
                        "cores (Linux; 0 = don't wait)")
    a = p.parse_args(argv)

    data = a.data_dir or a.out_dir / (f"runs-{a.runs}x{a.topics}x{a.depth}" + (f"-s{a.seed}" if a.seed else ""))
    a.out_dir.mkdir(parents=True, exist_ok=True)
    stats = ensure_data(data, a.runs, a.topics, a.depth, a.seed)
    warm_cache(data)
    work = a.out_dir / "bench-pool-work"
    work.mkdir(exist_ok=True)

    results: dict[str, list[dict]] = {"qrelkit": [], "trectools": []}

    def show(tool: str, i: int, r: dict) -> None:
        st = ", ".join(f"{k} {v:.2f}" for k, v in r["stages"].items())
        bg = r.get("background_cores")
        print(f"{tool:9s} #{i + 1}: {r['work_s']:.2f} s wall, {r['work_cpu_s']:.2f} s CPU ({st}), "
              f"peak {r['peak_rss_mb']:.0f} MB" + ("" if bg is None else f", other load {bg:.2f} cores"),
              flush=True)

    # interleaved, so that a change in background load hits both tools alike
    peer_repeats = 0 if a.skip_peers else a.peer_repeats
    for i in range(max(a.repeats, peer_repeats)):
        if i < a.repeats:
            r = run_child("qrelkit", data, work / "pool-qrelkit.parquet", a.pool_depth, a.threads,
                          idle_wait=a.wait_idle)
            results["qrelkit"].append(r)
            show("qrelkit", i, r)
        if i < peer_repeats:
            r = run_child("trectools", data, work / "pool-trectools.tsv", a.pool_depth, idle_wait=a.wait_idle)
            results["trectools"].append(r)
            show("trectools", i, r)
    profile = None
    if a.profile:
        profile = run_child("qrelkit", data, work / "pool-qrelkit-prof.parquet", a.pool_depth, a.threads,
                            profile=True)["profile"]

    check = None
    if not a.skip_verify:
        check = verify(data, a.pool_depth, work / "pool-qrelkit.parquet",
                       None if a.skip_peers else work / "pool-trectools.tsv")

    # ---------------------------------------------------------------- report
    summary = {}
    for tool, rs in results.items():
        if not rs:
            continue
        summary[tool] = {
            "work_s": [r["work_s"] for r in rs],
            "work_cpu_s": [r["work_cpu_s"] for r in rs],
            "background_cores": [r.get("background_cores", float("nan")) for r in rs],
            "process_wall_s": [r["process_wall_s"] for r in rs],
            "import_s": [r["import_s"] for r in rs],
            "peak_rss_mb": [r["peak_rss_mb"] for r in rs],
            "rss_after_imports_mb": [r["rss_after_imports_mb"] for r in rs],
            "stages": {k: median([r["stages"][k] for r in rs]) for k in rs[0]["stages"]},
            "pairs": rs[-1]["pairs"],
        }
    try:
        import importlib.metadata as md

        versions = {pkg: md.version(pkg) for pkg in ("qrelkit", "trectools", "pyarrow", "pandas", "numpy")
                    if _has_dist(md, pkg)}
    except Exception:  # noqa: BLE001
        versions = {}
    cmd = "python benchmarks/bench_pool.py" + ("" if not argv else " " + shlex.join(argv))
    lines = []
    lines.append(f"Command: `{cmd}`  ")
    lines.append(
        f"Data: {a.runs} runs x {a.topics} topics x {a.depth} docs ({stats['lines']:,} lines, seed {a.seed}), "
        f"{stats['distinct_at_pool_depth']['mean']:.0f} distinct docs per topic at depth {stats['pool_depth']}; "
        f"pool depth {a.pool_depth}  "
    )
    lines.append(
        f"Machine: {os.cpu_count()} cores, {platform.machine()}, Linux {platform.release()}, Python "
        f"{platform.python_version()}; " + ", ".join(f"{k} {v}" for k, v in versions.items())
    )
    lines.append("")
    lines.append("| tool | repeats | wall, median (min-max) | CPU | process wall | peak RSS | stages, wall (median) "
                 "| pool pairs | other load |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for tool in ("qrelkit", "trectools"):
        if tool not in summary:
            continue
        s = summary[tool]
        stages = ", ".join(f"{k} {v:.2f}" for k, v in s["stages"].items())
        lines.append(
            f"| {tool} | {len(s['work_s'])} | {median(s['work_s']):.2f} s{fmt_range(s['work_s'])} | "
            f"{median(s['work_cpu_s']):.2f} s | {median(s['process_wall_s']):.2f} s | "
            f"{median(s['peak_rss_mb']):.0f} MB | {stages} | {s['pairs']:,} | "
            f"{max(s['background_cores']):.2f} cores |"
        )
    lines.append("")
    if "trectools" in summary:
        q, t = summary["qrelkit"], summary["trectools"]
        speed = median(t["work_s"]) / median(q["work_s"])
        mem = median(q["peak_rss_mb"]) / median(t["peak_rss_mb"])
        lines.append(f"- speed: qrelkit is **{speed:.1f}x** faster than trectools (median wall); "
                     f"process wall {median(t['process_wall_s']) / median(q['process_wall_s']):.1f}x")
        cpu = median(t["work_cpu_s"]) / median(q["work_cpu_s"])
        lines.append(f"- CPU time: trectools uses {cpu:.1f}x qrelkit's")
        lines.append(f"- memory: qrelkit peak RSS is **{mem:.2f}x** trectools'")
        qw = median(q["work_s"])
        lines.append(
            "- targets: >= 20x faster: " + ("met" if speed >= 20 else "**missed**")
            + "; under 2 s: " + ("met" if qw < 2 else f"**missed** ({qw:.2f} s)")
            + "; peak memory <= trectools: " + ("met" if mem <= 1 else "**missed**")
        )
        summary["speed_ratio"] = speed
        summary["cpu_ratio"] = cpu
        summary["memory_ratio"] = mem
    if check is not None:
        if "trectools_pairs" in check:
            lines.append(
                f"- pools: {check['common']:,} pairs in both; {check['only_qrelkit']:,} only in qrelkit, "
                f"{check['only_trectools']:,} only in trectools. "
                f"{check['tie_lists_at_boundary']:,} (run, topic) lists have an exact score tie across ranks "
                f"{a.pool_depth}/{a.pool_depth + 1}; qrelkit breaks it by docid descending (trec_eval), "
                f"trectools by docid ascending. qrelkit = reference (score desc, docid desc): "
                f"{check['qrelkit_equals_reference_desc']}; trectools = reference (score desc, docid asc): "
                f"{check['trectools_equals_reference_asc']}; so every difference is explained by tie order: "
                f"{check['differences_explained_by_ties']}."
            )
        else:
            lines.append(f"- pool: {check['qrelkit_pairs']:,} pairs; equals the reference (score desc, docid desc): "
                         f"{check['qrelkit_equals_reference_desc']}")
    report = "\n".join(lines)
    print()
    print(report)
    if profile:
        print("\ncProfile of one qrelkit run (cumulative):\n")
        print(profile)
    out_json = a.out_dir / "bench_pool.json"
    out_json.write_text(json.dumps({"command": cmd, "data": stats | {"files": len(stats.get("files", []))},
                                    "summary": summary, "runs": results, "check": check,
                                    "versions": versions, "markdown": report}, indent=2, default=str) + "\n")
    print(f"\n(results also in {out_json})")
    ok = check is None or (check["qrelkit_equals_reference_desc"]
                           and check.get("differences_explained_by_ties", True))
    return 0 if ok else 1


def _has_dist(md, name: str) -> bool:
    try:
        md.version(name)
        return True
    except md.PackageNotFoundError:
        return False


if __name__ == "__main__":
    sys.exit(main())
