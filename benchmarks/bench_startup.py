"""Benchmark: the start (issue 24) — what a user's fresh process pays before and at its first call.

    python benchmarks/bench_startup.py                              # the demo (50k passages) and 200k
    python benchmarks/bench_startup.py --sizes 3000,6000 --repeats 3 --wait-idle 0   # a quick look

Every path ("tool") runs in fresh processes, on simulated campaigns
(``qrelkit.simulate.campaign.simulate_campaign``, 30 topics, 8 groups: the demo's shape at 50,000
passages), generated once into ``OUT/startup-N/`` and reused while their parameters match:

* **the command line**: ``qrelkit --help``, ``qrelkit pool depth --help`` and ``qrelkit cal next
  --help`` (the longest help), and ``python -c "import qrelkit"``, each a whole process of the
  installed console script (``--help-runs`` processes: the first, then the others as "warm");
* **first call vs warm calls**, imports apart: read the runs + depth-10 pool; ``evaluate()``
  (nDCG@10, AP, RR@10); near-duplicate clustering (``cluster_corpus``); one CAL iteration
  (``CalRanker.next_batch``: fit, score every passage, select 25, from topic 1001's 200 judged
  passages) — the clustering and the CAL iteration with a cold numba cache (a fresh
  ``NUMBA_CACHE_DIR``: the first call compiles) and with the cache that ``qrelkit warmup`` fills
  (the first call loads the kernels);
* **a fresh install's first campaign run**: ``qrelkit campaign init`` then ``qrelkit campaign run
  --oracle`` (the demo's commands) with a cold numba cache, and after ``qrelkit warmup`` (timed
  too: what ``make install`` adds); "warm" is the same run again on a new campaign folder.

A fresh install is simulated by a fresh ``NUMBA_CACHE_DIR`` (numba then neither reads nor writes
the package's ``__pycache__``); the Python bytecode and the operating system's file cache are as
this checkout has them (notes). Results: ``bench-out/startup.json`` in the shape of
``benchmarks/_results.py``, and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import emit_result, peak_rss_mb, run_child_process, run_process  # noqa: E402
from _procs import tool_from_whole_processes  # noqa: E402
from _results import benchmark_result, call, measure, size_result, target, tool_result, write_result  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOPIC = "1001"
HEAVY = ("pandas", "pyarrow", "numpy", "scipy", "numba", "sklearn", "ir_measures", "matplotlib", "dask")
HELPS = {"qrelkit --help": ["--help"], "qrelkit pool depth --help": ["pool", "depth", "--help"],
         "qrelkit cal next --help": ["cal", "next", "--help"]}
LIMIT_S = 0.3  # the issue's: --help, and a first call's cost above a warm one
CAMPAIGN_LIMIT_S = 10.0  # the first campaign run of the demo after a fresh install


# =========================================================================== children: first call vs warm


def _cal_state(folder: Path) -> tuple[str, list[str], list[int]]:
    """Topic 1001's query and 200 judged passages: its relevant ones (up to 60), then others."""
    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.topics import read_topics

    topics = read_topics(folder / "topics.tsv")
    query = str(topics.loc[topics["qid"] == TOPIC, "text"].iloc[0])
    q = read_qrels(folder / "qrels.txt").to_pandas()
    q = q[q["qid"] == TOPIC]
    rel = sorted(q.loc[q["rel"] >= 2, "docid"])[:60]
    others = sorted(q.loc[q["rel"] < 2, "docid"])
    pids = rel + others[: 200 - len(rel)]
    return query, pids, [1] * len(rel) + [0] * (len(pids) - len(rel))


def child(name: str, data: Path, work: Path, repeats: int) -> dict:
    """One path in this fresh process: its imports, its first call, ``repeats`` warm calls."""
    t0 = time.perf_counter()
    if name == "pool":
        from qrelkit import depth_pool, read_runs

        fn = lambda: depth_pool(read_runs(data / "runs").table, 10).num_rows  # noqa: E731
    elif name == "evaluate":
        from qrelkit import evaluate, read_qrels, read_runs

        runs, qrels = read_runs(data / "runs").table, read_qrels(data / "qrels.txt")
        fn = lambda: len(evaluate(runs, qrels, ["nDCG@10", "AP", "RR@10"]).per_query)  # noqa: E731
    elif name == "cluster":
        from qrelkit import cluster_corpus

        fn = lambda: cluster_corpus(data / "corpus.jsonl").classes  # noqa: E731
    elif name == "cal":
        import numpy as np

        from qrelkit.cal.features import load_features
        from qrelkit.cal.loop import CalParams, CalRanker

        query, pids, labels = _cal_state(data)
        f = load_features(work / "features")
        rows, rel = f.rows_of(pids), np.asarray(labels) > 0
        rk = CalRanker(f, query, topic=TOPIC, thread="all", params=CalParams(seed=0))
        seeds = iter(range(1, repeats + 2))
        fn = lambda: rk.next_batch(rows, rel, rows, 25, next(seeds)).pids  # noqa: E731
    else:
        raise SystemExit(f"unknown child {name}")
    import_s = time.perf_counter() - t0
    first, warm, value = measure(fn, repeats)
    out = {"import_s": import_s, "first": first, "warm": warm, "peak_rss_mb": peak_rss_mb()}
    if name == "cluster":  # what the cold and the warm cache made, to compare
        out["classes_sha256"] = hashlib.sha256("\n".join(value["class_id"].to_pylist()).encode()).hexdigest()
    if name == "cal":
        out["batch"] = list(value)
    return out


# =========================================================================== the parent


def _env(numba_cache: Path | None) -> dict:
    """The children's environment: Python writes and reads its bytecode (as an installed package
    has it), numba's cache where given."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if numba_cache is not None:
        env["NUMBA_CACHE_DIR"] = str(numba_cache)
    return env


def _process(cmd: list[str], *, env: dict, cwd: Path, idle_wait: float) -> dict:
    """A whole process timed from outside (:func:`_machine.run_process`), its output left out."""
    r = run_process(cmd, idle_wait=idle_wait, cwd=cwd, env=env)
    del r["stdout"]
    return r


def _qrelkit() -> list[str]:
    exe = Path(sys.executable).with_name("qrelkit")
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from qrelkit.cli import main; main()"]


def _whole(tool: str, cmds: list[list[str]], *, env: dict, cwd: Path, idle_wait: float, note: str) -> tuple[dict, list]:
    """A tool measured as whole processes: the first of ``cmds``, the others as the warm ones."""
    runs = [_process(c, env=env, cwd=cwd, idle_wait=idle_wait) for c in cmds]
    return tool_from_whole_processes(tool, runs, note=note), runs


def _in_child(tool: str, name: str, data: Path, work: Path, *, repeats: int, numba_cache: Path | None,
              idle_wait: float, note: str) -> tuple[dict, dict]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", name, "--data", str(data), "--work", str(work),
           "--repeats", str(repeats)]
    r = run_child_process(cmd, idle_wait=idle_wait, cwd=ROOT, env=_env(numba_cache), stderr_tail=5000)
    res = tool_result(tool, first=r["first"], warm=r["warm"], import_s=r["import_s"],
                      peak_rss_mb=r["process_peak_rss_mb"], background_cores=r.get("background_cores"), note=note,
                      process_wall_s=r["process_wall_s"], process_cpu_s=r["process_cpu_s"])
    return res, r


def ensure_campaign(folder: Path, n: int, topics: int, groups: int, seed: int) -> None:
    want = {"n_passages": n, "n_topics": topics, "n_groups": groups, "seed": seed}
    summ = folder / "summary.json"
    if summ.exists() and (folder / "corpus.jsonl").exists():
        try:
            if all(json.loads(summ.read_text())["parameters"].get(k) == v for k, v in want.items()):
                return
        except (ValueError, KeyError):
            pass
    from qrelkit.simulate.campaign import simulate_campaign

    print(f"generating {folder} ({n:,} passages) ...", file=sys.stderr, flush=True)
    simulate_campaign(folder, n_passages=n, n_topics=topics, n_groups=groups, seed=seed)


def _campaign(data: Path, work: Path, tag: str, *, env: dict, idle_wait: float) -> dict:
    """``campaign init`` (untimed) then ``campaign run --oracle`` (timed) on a new folder ``tag``."""
    camp = work / f"campaign-{tag}"
    shutil.rmtree(camp, ignore_errors=True)
    q = _qrelkit()
    subprocess.run([*q, "campaign", "init", str(camp), "-c", str(ROOT / "configs" / "trec-dl-2022.toml"), "--corpus",
                    str(data / "corpus.jsonl"), "-t", str(data / "topics.tsv"), "--runs", str(data / "runs"), "-m",
                    str(data / "manifest.csv")], env=env, check=True, capture_output=True)
    r = _process([*q, "campaign", "run", str(camp), "--oracle", str(data / "qrels.txt"), "--error-rate", "0.05",
                  "--seed", "7", "--json"], env=env, cwd=work, idle_wait=idle_wait)
    r["qrels"] = (camp / "qrels-passages.txt").read_bytes()
    return r


def measure_size(n: int, a, out: Path, warm_cache: Path) -> tuple[dict, dict]:
    """Every path at one size; returns the size's result and what the checks need."""
    data = out / f"startup-{n}"
    ensure_campaign(data, n, a.topics, a.groups, a.seed)
    work = out / f"startup-work-{n}"
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "features").exists():
        subprocess.run([*_qrelkit(), "cal", "features", str(data / "corpus.jsonl"), "-o", str(work / "features")],
                       env=_env(warm_cache), check=True, capture_output=True)
    colds: list[Path] = []
    cold = lambda: colds.append(Path(tempfile.mkdtemp(prefix="numba-cold-", dir=out))) or colds[-1]  # noqa: E731
    tools, extra = [], {}
    kw = dict(repeats=a.repeats, idle_wait=a.wait_idle)
    for label, name, cache, note in (
            ("read runs + depth-10 pool", "pool", warm_cache, "read_runs(folder) + depth_pool(table, 10); no kernel"),
            ("evaluate()", "evaluate", warm_cache, "nDCG@10, AP, RR@10 over every run; the runs read before"),
            ("clustering, cold numba cache", "cluster", cold(), "cluster_corpus(corpus.jsonl): the first call compiles"),
            ("clustering, after qrelkit warmup", "cluster", warm_cache, "the first call loads the cached kernels"),
            ("CAL iteration, cold numba cache", "cal", cold(), "CalRanker.next_batch, features stored, the ranker made before"),
            ("CAL iteration, after qrelkit warmup", "cal", warm_cache, "the first call loads the cached kernels")):
        res, raw = _in_child(label, name, data, work, numba_cache=cache, note=note, **kw)
        tools.append(res)
        extra[label] = raw
        print(f"  {n:,}: {label}: first {res['first']['wall_s']:.3f} s, warm {res['warm']['wall_s']:.3f} s",
              file=sys.stderr, flush=True)
    if not a.skip_campaign:
        tools += _campaigns(data, work, warm_cache, a, extra)
    for d in [*colds, *work.glob("numba-cold-*")]:  # the cold caches were for one measurement each
        shutil.rmtree(d, ignore_errors=True)
    return size_result(f"{n:,} passages", n, "passage", tools, task="first calls and campaign runs", topics=a.topics,
                       groups=a.groups), extra


def _campaigns(data: Path, work: Path, warm_cache: Path, a, extra: dict) -> list[dict]:
    """The first campaign run with a cold cache, and after ``qrelkit warmup``; each then again."""
    env_cold, env_warm = _env(Path(tempfile.mkdtemp(prefix="numba-cold-", dir=work))), _env(warm_cache)
    runs = {"cold": [_campaign(data, work, "cold-1", env=env_cold, idle_wait=a.wait_idle),
                     _campaign(data, work, "cold-2", env=env_cold, idle_wait=a.wait_idle)],
            "warm": [_campaign(data, work, "warm-1", env=env_warm, idle_wait=a.wait_idle),
                     _campaign(data, work, "warm-2", env=env_warm, idle_wait=a.wait_idle)]}
    extra["campaign"] = runs
    out = []
    for key, label, note in (("cold", "campaign run, fresh install without warm-up",
                              "numba compiles what the run needs (said once on stderr); warm: the same run again"),
                             ("warm", "campaign run, fresh install after qrelkit warmup",
                              "the kernels loaded from the cache qrelkit warmup filled; warm: the same run again")):
        first, second = runs[key]
        out.append(tool_result(label, first=call(first["wall_s"], first["cpu_s"]),
                               warm=[call(second["wall_s"], second["cpu_s"])],
                               peak_rss_mb=max(first["peak_rss_mb"], second["peak_rss_mb"]),
                               background_cores=first["background_cores"], note=note))
        print(f"  {label}: first {first['wall_s']:.1f} s, again {second['wall_s']:.1f} s", file=sys.stderr, flush=True)
    return out


def command_line(a, out: Path, warm_cache: Path) -> tuple[list[dict], dict]:
    """The help of the command line and ``import qrelkit``, whole processes."""
    env = _env(warm_cache)
    tools, raw = [], {}
    for tool, argv in HELPS.items():
        res, raw[tool] = _whole(tool, [[*_qrelkit(), *argv]] * a.help_runs, env=env, cwd=out, idle_wait=a.wait_idle,
                                note="the installed console script, a whole process (Python's start included)")
        tools.append(res)
    res, raw["import qrelkit"] = _whole("import qrelkit", [[sys.executable, "-c", "import qrelkit"]] * a.help_runs,
                                        env=env, cwd=out, idle_wait=a.wait_idle, note="a whole process")
    tools.append(res)
    code = ("import contextlib, io, json, sys\nfrom qrelkit.cli import run\n"
            "for argv in json.loads(sys.argv[1]):\n    with contextlib.redirect_stdout(io.StringIO()): run(argv)\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(json.loads(sys.argv[2])))))")
    r = subprocess.run([sys.executable, "-c", code, json.dumps(list(HELPS.values())), json.dumps(HEAVY)], env=env,
                       capture_output=True, text=True, check=True)
    for t in tools:
        print(f"  {t['tool']}: first {t['first']['wall_s']:.3f} s, median {t['warm']['wall_s']:.3f} s wall, "
              f"{t['warm']['cpu_s']:.3f} s CPU", file=sys.stderr, flush=True)
    return tools, {"help_loads": json.loads(r.stdout)}


def warm_up(cache: Path, a, out: Path) -> dict:
    """``qrelkit warmup`` into an empty cache (what ``make install`` adds), then again (all cached)."""
    shutil.rmtree(cache, ignore_errors=True)
    env = _env(cache)
    runs = [_process([*_qrelkit(), "warmup", "--json"], env=env, cwd=out, idle_wait=a.wait_idle) for _ in range(2)]
    print(f"  qrelkit warmup: {runs[0]['wall_s']:.1f} s, again {runs[1]['wall_s']:.1f} s", file=sys.stderr, flush=True)
    return tool_result("qrelkit warmup", first=call(runs[0]["wall_s"], runs[0]["cpu_s"]),
                       warm=[call(runs[1]["wall_s"], runs[1]["cpu_s"])], peak_rss_mb=runs[0]["peak_rss_mb"],
                       background_cores=runs[0]["background_cores"],
                       note="into an empty NUMBA_CACHE_DIR (make install's step); warm: run again, all cached")


def _targets(sizes: list[dict], demo: int) -> list[dict]:
    out = []
    for s in sizes:
        for t in s["tools"]:
            w, f = t["warm"], t["first"]
            if t["tool"].startswith("qrelkit") and t["tool"].endswith("--help"):
                out.append(target(f"{t['tool']}: wall of a fresh process (median)", w["wall_s"], "<=", LIMIT_S, "s"))
            elif s["unit"] == "passage" and not t["tool"].startswith(("campaign", "clustering, cold", "CAL iteration, cold")):
                out.append(target(f"{t['tool']} at {s['label']}: first call above the warm median (wall)",
                                  f["wall_s"] - w["wall_s"], "<=", LIMIT_S, "s"))
            elif t["tool"] == "campaign run, fresh install after qrelkit warmup" and s["units"] == demo:
                out.append(target(f"the demo's first campaign run after a fresh install ({s['label']}), wall",
                                  f["wall_s"], "<=", CAMPAIGN_LIMIT_S, "s"))
    return out


def _checks(cli: dict, extra: dict) -> dict:
    from qrelkit.jit import NOTICE

    checks = {"help loads none of " + ", ".join(HEAVY): cli["help_loads"] == []}
    for n, e in extra.items():
        checks[f"{n:,}: clustering the same with a cold and a warm numba cache"] = (
            e["clustering, cold numba cache"]["classes_sha256"] == e["clustering, after qrelkit warmup"]["classes_sha256"])
        checks[f"{n:,}: CAL batch the same with a cold and a warm numba cache"] = (
            e["CAL iteration, cold numba cache"]["batch"] == e["CAL iteration, after qrelkit warmup"]["batch"])
        runs = e.get("campaign")
        if runs:
            checks[f"{n:,}: campaign qrels byte-identical, cold cache or after warm-up"] = len(
                {r["qrels"] for r in runs["cold"] + runs["warm"]}) == 1
            checks[f"{n:,}: a cold cache's first campaign run says once that it compiles"] = (
                runs["cold"][0]["stderr"].count(NOTICE) == 1)
            checks[f"{n:,}: after qrelkit warmup, the campaign runs compile nothing"] = all(
                NOTICE not in r["stderr"] for r in runs["warm"])
    return checks


def _table(sizes: list[dict]) -> str:
    lines = ["| size | path | first call wall / CPU | warm wall / CPU (median) | first - warm | imports | peak RSS | others' cores |",
             "|---|---|---|---|---|---|---|---|"]
    for s in sizes:
        for t in s["tools"]:
            f, w = t["first"], t["warm"]
            imp = f"{t['import_s']:.2f} s" if t.get("import_s") is not None else ""
            bg = f"{t['background_cores']:.2f}" if t.get("background_cores") is not None else ""
            lines.append(f"| {s['label']} | {t['tool']} | {f['wall_s']:.3f} / {f['cpu_s']:.3f} s | "
                         f"{w['wall_s']:.3f} / {w['cpu_s']:.3f} s | {f['wall_s'] - w['wall_s']:+.3f} s | {imp} | "
                         f"{t['peak_rss_mb']:.0f} MB | {bg} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="50000,200000", help="passages of the simulated campaigns (the first: the demo's)")
    ap.add_argument("--topics", type=int, default=30)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5, help="warm calls after the first, in each process")
    ap.add_argument("--help-runs", type=int, default=7, help="fresh processes per command-line path")
    ap.add_argument("--skip-campaign", action="store_true", help="no campaign runs (minutes with a cold cache)")
    ap.add_argument("--wait-idle", type=float, default=30.0,
                    help="before each measurement, wait up to this many seconds for others to use < 0.25 cores")
    ap.add_argument("--reuse-warm-cache", action="store_true",
                    help="while developing: keep OUT/startup-numba-warm from an earlier run, no warm-up timed")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "bench-out")
    ap.add_argument("--json-out", type=Path, default=None, help="default: OUT/startup.json")
    a = ap.parse_args(argv)
    out = a.out_dir.resolve()
    out.mkdir(parents=True, exist_ok=True)
    sizes_n = [int(x) for x in a.sizes.split(",")]
    warm_cache = out / "startup-numba-warm"
    if a.reuse_warm_cache and warm_cache.is_dir():
        warm_tool = []
    else:
        print("qrelkit warmup (into an empty numba cache) ...", file=sys.stderr, flush=True)
        warm_tool = [warm_up(warm_cache, a, out)]
    print("the command line ...", file=sys.stderr, flush=True)
    cli_tools, cli = command_line(a, out, warm_cache)
    sizes, extra = [size_result("the command line and the install step", 1, "process", [*cli_tools, *warm_tool],
                                    task="the command line and the install step")], {}
    for n in sizes_n:
        print(f"{n:,} passages ...", file=sys.stderr, flush=True)
        s, extra[n] = measure_size(n, a, out, warm_cache)
        sizes.append(s)
    res = benchmark_result(
        "startup", "The start: the command line's help, a first call vs warm ones, a fresh install's first campaign",
        sizes, targets=_targets(sizes, sizes_n[0]), checks=_checks(cli, extra), ratios=False, notes=[
            "Each path runs in fresh processes; 'first' is a fresh process's first call (imports apart, in 'imports'), "
            "'warm' the median of the calls after it in the same process. For the command line, every run is a whole "
            "fresh process of the installed console script: the first one, then the median of the others.",
            "A fresh install is simulated by an empty NUMBA_CACHE_DIR (cold) or the one 'qrelkit warmup' filled; Python's "
            "bytecode and the operating system's file cache are warm (an install compiles the bytecode; a first run "
            "after a reboot also reads the files from disk).",
            "The clustering's and the CAL iteration's imports load numba: it is in 'imports', not in the "
            "first call; the command line's help and 'import qrelkit' load no numba, pandas or pyarrow.",
            "The campaign: 'qrelkit campaign init' (untimed), then 'qrelkit campaign run --oracle' timed as a whole "
            "process, on the demo's protocol (configs/trec-dl-2022.toml); 'warm' runs it again on a new folder."])
    print(_table(sizes))
    for t in res["targets"]:
        print(f"target {'met' if t['met'] else 'MISSED'}: {t['what']}: {t['value']:.3f} {t['unit']} {t['op']} {t['limit']}")
    for k, v in res["checks"].items():
        print(f"check {'ok' if v else 'FAILED'}: {k}")
    write_result(res, a.json_out or out / "startup.json", "bench_startup.py", argv)
    return 0 if all(res["checks"].values()) else 1


if __name__ == "__main__":
    if "--child" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("--child", required=True)
        ap.add_argument("--data", type=Path, required=True)
        ap.add_argument("--work", type=Path, required=True)
        ap.add_argument("--repeats", type=int, default=5)
        c = ap.parse_args()
        emit_result(child(c.child, c.data, c.work, c.repeats))
        sys.exit(0)
    sys.exit(main())
