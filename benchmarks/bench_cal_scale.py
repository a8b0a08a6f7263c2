"""Benchmark: CAL at scale — the sharded feature build, one CAL iteration on a sharded store in
this process and on a Dask LocalCluster, at several corpus sizes, with hical and TARexp where they
can run; optionally the same 1M run with an earlier qrelkit source tree side by side.

    python benchmarks/bench_cal_scale.py                                  # 1M, 4M, 10M
    python benchmarks/bench_cal_scale.py --sizes 1000000 --compare-with /tmp/qrelkit-before
    python benchmarks/bench_cal_scale.py --sizes 1000000 4000000 --peers tarexp hical

Data and state: as ``benchmarks/bench_cal.py`` (simulated campaigns of N passages, 20 topics, 10%
near-duplicates, in ``OUT/cal-campaign-N/``; topic 1001's query and 200 judged passages in
``OUT/cal-state-N.tsv``); its peers' children are reused as they are.

Every measurement runs in a fresh process that reports its own times (imports excluded), CPU
and peak RSS (``VmHWM``; ``RssAnon``/``RssFile`` at the end separate private memory from the
memory-mapped feature pages, which the page cache shares):

* **features**: ``build_features(corpus.jsonl, OUT/cal-scale-work-N/features, shard_size=S)``.
* **local**: ``CalRanker.next_batch`` on the stored (memory-mapped, sharded) features, scored
  shard by shard in the process (``LocalScorer``); 2 warm-up iterations, then ``--iterations``.
* **dask**: the same iterations with ``DaskScorer`` on a ``LocalCluster`` of ``--workers``
  processes (one thread each; started before the timing, not timed); the batch must equal the
  local one. Memory of the client and of every worker process is sampled every 0.2 s (psutil);
  network bytes are the pickled task arguments and results per iteration.
* **compare** (``--compare-with SRC``): the features and local children run with
  ``PYTHONPATH=SRC`` (e.g. a ``git worktree`` of the commit before shards), interleaved with the
  current code's, so both see the same machine load.
* **peers** (``--peers``): bench_cal's TARexp and hical children at the sizes where their
  estimated peak memory (from their 1M figures in docs/benchmarks.md) fits ``--peer-max-gb``;
  the others are recorded as not run, with the reason.

Every iteration child reports its first iteration (the first call in the fresh process: page
cache, kernels, shards) beside the warm ones, wall and CPU (on Dask the workers' CPU too); a
feature build is one call per process. Results: ``OUT/bench_cal_scale.json`` (``--results``: every
figure of every process) and ``OUT/cal-scale.json`` (``--json-out``; ``benchmarks/_results.py``'s
shape, for ``scripts/gen_benchmarks_doc.py``: the tasks "build_features" and "one CAL
iteration" per size [unit: passage], the targets of docs/benchmarks.md at 10M, the batch checks).
Exit status 1 when a Dask or earlier-tree batch differs from the local one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import ChildFailed, cpu_s, emit_result, peak_rss_mb, run_child_process  # noqa: E402
from _procs import tool_from_processes  # noqa: E402
from _results import benchmark_result, call, size_result, target, write_result  # noqa: E402
from bench_cal import _state, _versions, child_hical, child_tarexp, ensure_campaign, make_state  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOPIC = "1001"
# peak RSS per million passages measured at 1M (docs/benchmarks.md, CAL), and features seconds
PEER_GB_PER_M = {"tarexp": 2.15, "hical": 0.62}


# =========================================================================== children


def _status(*keys: str) -> dict:
    out = {}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                k = line.split(":", 1)[0]
                if k in keys:
                    out[k] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return out


def _median(xs):
    return statistics.median(xs) if xs else None


def child_features(corpus: Path, work: Path, a) -> dict:
    t0 = time.perf_counter()
    import inspect

    from qrelkit.cal.features import build_features

    t1 = time.perf_counter()
    kw = {"shard_size": a.shard_size} if "shard_size" in inspect.signature(build_features).parameters else {}
    c1 = cpu_s()
    f = build_features(corpus, work / a.features_dir, **kw)
    t2 = time.perf_counter()
    disk = sum(p.stat().st_size for p in (work / a.features_dir).rglob("*") if p.is_file())
    c2 = cpu_s()
    return {"import_s": t1 - t0, "first": call(t2 - t1, c2 - c1), "warm": [],  # one build per process
            "features_s": t2 - t1, "features_cpu_s": c2 - c1, "rows": f.n_rows,
            "terms": f.n_terms, "nnz": f.nnz, "shards": len(getattr(f, "shards", [None])), "disk_bytes": disk,
            "stages": {k: round(v, 3) for k, v in f.timings.items()}, "peak_rss_mb": peak_rss_mb()}


def _iterate(rk, rows, rel, iterations: int, cpu=cpu_s) -> dict:
    """The first iteration (the first call: page cache, compiled kernels, the workers' shards), a
    second one untimed in the results (the shards' scoring arrays read into memory), then
    ``iterations`` warm ones; ``cpu()`` the CPU seconds to count (the workers' too, on Dask)."""
    def one(it):
        c0, s = cpu(), time.perf_counter()
        b = rk.next_batch(rows, rel, rows, 25, it)
        return b, call(time.perf_counter() - s, cpu() - c0)

    _, first = one(1000)
    _, second = one(1001)
    warm, stages, batches = [], [], []
    for it in range(1, iterations + 1):
        b, c = one(it)
        warm.append(c)
        stages.append(b.timings)
        batches.append(b.pids)
    times = [c["wall_s"] for c in warm]
    return {"first": first, "second": second, "warm": warm, "iteration_s": times, "median_s": _median(times),
            "cpu_per_iteration_s": _median([c["cpu_s"] for c in warm]),
            "stages": {k: _median([s[k] for s in stages]) for k in stages[0]}, "batch": batches[0],
            "train_rows": int(b.n_train),
            "columns": int(b.n_columns)}


def _opened(work: Path, a):
    """(import seconds, features, query, judged rows, their labels) for an iteration child."""
    t0 = time.perf_counter()
    import numpy as np

    from qrelkit.cal.features import load_features
    from qrelkit.cal.loop import CalRanker  # noqa: F401  (imported here: not timed with the iterations)

    t1 = time.perf_counter()
    query, pids, labels = _state(a.state)
    f = load_features(work / a.features_dir)
    return t1 - t0, f, query, f.rows_of(pids), np.asarray(labels) > 0


def child_local(corpus: Path, work: Path, a) -> dict:
    import_s, f, query, rows, rel = _opened(work, a)  # the imports timed first
    from qrelkit.cal.loop import CalParams, CalRanker

    rk = CalRanker(f, query, topic=TOPIC, thread="all", params=CalParams(seed=0))
    res = _iterate(rk, rows, rel, a.iterations)
    return {"import_s": import_s, **res, "shards": len(getattr(f, "shards", [None])), "peak_rss_mb": peak_rss_mb(),
            **{k.lower(): v for k, v in _status("RssAnon", "RssFile").items()}}


class _Sampler:
    """Peak RSS of this process, of each of its descendants and of their sum (psutil, every 0.2 s)."""

    def __init__(self) -> None:
        import psutil

        self.me = psutil.Process()
        self.peak_total = 0.0
        self.peak: dict[int, float] = {}
        self.cpu: dict[int, float] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            total = 0.0
            for p in [self.me, *self.me.children(recursive=True)]:
                try:
                    rss = p.memory_info().rss / 2**20
                    t = p.cpu_times()
                    self.cpu[p.pid] = t.user + t.system
                except Exception:  # the process ended meanwhile
                    continue
                total += rss
                self.peak[p.pid] = max(self.peak.get(p.pid, 0.0), rss)
            self.peak_total = max(self.peak_total, total)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def _with_workers(pids):
    """CPU seconds of this process and of the worker processes ``pids`` (read at each call)."""
    import psutil  # lazy: the [bench] extra, only for the Dask child

    procs = [psutil.Process(p) for p in set(pids)]

    def cpu() -> float:
        return cpu_s() + sum(t.user + t.system for t in (p.cpu_times() for p in procs))
    return cpu


def child_dask(corpus: Path, work: Path, a) -> dict:
    import_s, f, query, rows, rel = _opened(work, a)  # the imports timed first
    from qrelkit.cal.distributed import DaskScorer
    from qrelkit.cal.loop import CalParams, CalRanker

    sampler = _Sampler()
    s0 = time.perf_counter()
    with DaskScorer(f, n_workers=a.workers) as ds:
        start_s = time.perf_counter() - s0
        worker_pids = ds.client.run(os.getpid)
        rk = CalRanker(f, query, topic=TOPIC, thread="all", params=CalParams(seed=0), scorer=ds)
        res = _iterate(rk, rows, rel, a.iterations, cpu=_with_workers(worker_pids.values()))
        per = ds.stats["per_iteration"][2:]  # the timed iterations
        owners = ds.assignment()
    sampler.close()
    wp = set(worker_pids.values())
    return {"import_s": import_s, "cluster_start_s": start_s, **res, "shards": len(f.shards),
            "bytes_sent_per_iteration": _median([x["sent"] for x in per]),
            "bytes_received_per_iteration": _median([x["received"] for x in per]),
            "tasks_per_iteration": _median([x["tasks"] for x in per]),
            "shards_per_worker": {w: sum(1 for o in owners.values() if o == w) for w in sorted(set(owners.values()))},
            "peak_rss_mb": peak_rss_mb(), "peak_rss_workers_mb": [round(sampler.peak.get(p, 0.0)) for p in sorted(wp)],
            "peak_rss_all_processes_mb": round(sampler.peak_total),
            "workers_cpu_s": round(sum(sampler.cpu.get(p, 0.0) for p in wp), 2)}


def child_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", required=True, choices=["features", "local", "dask", "tarexp", "hical"])
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--state", required=True, type=Path)
    ap.add_argument("--iterations", type=int, default=15)
    ap.add_argument("--shard-size", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--features-dir", default="features")
    a = ap.parse_args(argv)
    fn = {"features": child_features, "local": child_local, "dask": child_dask, "tarexp": child_tarexp,
          "hical": child_hical}[a.child]
    emit_result(fn(a.corpus, a.work, a))
    return 0


# =========================================================================== parent


def run_child(kind: str, corpus: Path, work: Path, state: Path, a, *, src: str | None = None,
              features_dir: str = "features") -> dict:
    here = Path(__file__).resolve()
    cmd = [sys.executable, str(here), "--child", kind, "--corpus", str(corpus), "--work", str(work), "--state",
           str(state), "--iterations", str(a.iterations), "--shard-size", str(a.shard_size), "--workers",
           str(a.workers), "--features-dir", features_dir]
    env = {"PYTHONPATH": src} if src else {"PYTHONPATH": str(ROOT)}
    try:
        res = run_child_process(cmd, idle_wait=a.wait_idle, cwd=ROOT, env=env, stderr_tail=5000)
    except ChildFailed as exc:
        return {"error": f"{kind}: {exc}"}
    res["load_before"] = os.getloadavg()[0]
    return res


def _peer_plan(tool: str, n: int, a) -> str | None:
    """None when the peer runs at this size, else why not."""
    est = PEER_GB_PER_M[tool] * n / 1e6
    if est > a.peer_max_gb:
        return (f"not run: estimated peak {est:.1f} GB ({PEER_GB_PER_M[tool]} GB per million passages at 1M) > "
                f"--peer-max-gb {a.peer_max_gb:g} on a 24 GB machine shared with other jobs")
    if a.peer_sizes and n not in a.peer_sizes:
        return "not run at this size (--peer-sizes)"
    return None


def _say(n: int, what: str, r: dict) -> None:
    if "error" in r:
        print(f"[{n:,}] {what}: {r['error']}", flush=True)
        return
    bits = []
    if "features_s" in r:
        bits.append(f"features {r['features_s']:.1f} s")
    if "median_s" in r:
        bits.append(f"iteration median {r['median_s'] * 1000:.1f} ms ({', '.join(f'{k} {v * 1000:.1f}' for k, v in r['stages'].items())})")
    bits.append(f"peak {r.get('peak_rss_mb', 0):.0f} MB; load {r.get('background_cores', float('nan')):.2f} cores")
    print(f"[{n:,}] {what}: " + "; ".join(bits), flush=True)


def bench_size(n: int, a) -> dict:
    folder = a.out_dir / f"cal-campaign-{n}"
    ensure_campaign(folder, n, a.seed)
    corpus, state = folder / "corpus.jsonl", a.out_dir / f"cal-state-{n}.tsv"
    make_state(folder, state, a.seed)
    work = a.out_dir / f"cal-scale-work-{n}"
    work.mkdir(parents=True, exist_ok=True)
    res: dict = {"features": [], "local": [], "dask": []}
    compare = a.compare_with and n in a.compare_sizes
    if compare:
        res.update({"features_before": [], "local_before": []})
    for r in range(a.repeats):
        for kind, src, fd in (("features", None, "features"), ("features_before", a.compare_with, "features-before")):
            if kind == "features_before" and not compare:
                continue
            if a.reuse_features and (work / fd / "meta.json").is_file():
                print(f"[{n:,}] {kind}: reusing {work / fd}", flush=True)
                continue
            x = run_child("features", corpus, work, state, a, src=src, features_dir=fd)
            res[kind].append(x)
            _say(n, f"{kind} #{r + 1}", x)
        for kind, child, src, fd in (("local", "local", None, "features"), ("local_before", "local", a.compare_with, "features-before"),
                                     ("dask", "dask", None, "features")):
            if (kind == "local_before" and not compare) or child not in a.kinds:
                continue
            x = run_child(child, corpus, work, state, a, src=src, features_dir=fd)
            res[kind].append(x)
            _say(n, f"{kind} #{r + 1}", x)
    for kind in ("dask", "local_before"):
        for x in _ok(res.get(kind, [])) if _ok(res["local"]) else []:
            x["same_batch_as_local"] = bool(_ok(res["local"])) and x["batch"] == _ok(res["local"])[0]["batch"]
            print(f"[{n:,}] {kind}: same batch as local: {x['same_batch_as_local']}", flush=True)
    for tool in a.peers:
        why = _peer_plan(tool, n, a)
        if why:
            res[tool] = [{"error": f"{tool}: {why}"}]
            print(f"[{n:,}] {tool}: {why}", flush=True)
            continue
        res[tool] = [run_child(tool, corpus, work, state, a)]
        _say(n, tool, res[tool][0])
    return res


def _ok(runs: list) -> list:
    return [x for x in runs if "error" not in x]


def _med(runs: list, key: str):
    vals = [x[key] for x in _ok(runs) if x.get(key) is not None]
    return statistics.median(vals) if vals else None


def _its(runs: list) -> list:
    return [t for x in _ok(runs) for t in x.get("iteration_s", [])]


def report_tables(report: dict) -> None:
    ms = lambda x: "—" if x is None else f"{x * 1000:.1f} ms"  # noqa: E731
    print("\n| passages | what | features (one time) | peak RSS | one iteration, median (min-max) | "
          "fit / score / select | other load |")
    print("|---|---|---|---|---|---|---|")
    base = {}
    for n, s in report["sizes"].items():
        for kind, feats in (("local", "features"), ("local_before", "features_before"), ("dask", "features"),
                            ("tarexp", None), ("hical", None)):
            runs = s.get(kind)
            if not runs:
                continue
            if not _ok(runs):
                print(f"| {int(n):,} | {kind} | {runs[0]['error']} | | | | |")
                continue
            its = _its(runs)
            f_s = _med(s.get(feats, []), "features_s") if feats else _med(runs, "features_s")
            f_rss = _med(s.get(feats, []), "peak_rss_mb") if feats else None
            st = _ok(runs)[0].get("stages", {})
            parts = " / ".join(f"{v * 1000:.1f}" for k, v in st.items() if k in ("fit", "score", "select", "retrain",
                                                                                    "get_doc_to_judge"))
            peak = _med(runs, "peak_rss_all_processes_mb") or _med(runs, "peak_rss_mb")
            print(f"| {int(n):,} | {kind} | {'—' if f_s is None else f'{f_s:.1f} s'}"
                  f"{'' if f_rss is None else f' (peak {f_rss:,.0f} MB)'} | {peak:,.0f} MB | "
                  f"**{ms(statistics.median(its))}** ({ms(min(its))}-{ms(max(its))}) | {parts} | "
                  f"{_med(runs, 'background_cores') or 0:.2f} |")
            if kind in ("local", "dask") and f_s is not None:
                base.setdefault(kind, {})[int(n)] = (statistics.median(its), f_s)
    loc, dk = base.get("local", {}), base.get("dask", {})
    for n in sorted(loc):
        line = f"[{n:,}] local iteration {loc[n][0] * 1000:.1f} ms, features {loc[n][1]:.1f} s"
        if n in dk:
            line += f"; dask/local {dk[n][0] / loc[n][0]:.2f}x"
        if 1_000_000 in loc and n != 1_000_000:
            line += (f"; vs 1M: iteration {loc[n][0] / loc[1_000_000][0]:.2f}x, features "
                     f"{loc[n][1] / loc[1_000_000][1]:.2f}x")
        print(line)


ITERATION = "one CAL iteration (fit, score every passage, select 25)"


def _names(a) -> dict:
    return {"local": "qrelkit, local", "dask": f"qrelkit, Dask ({a.workers} workers)",
            "local_before": "qrelkit before (--compare-with), local", "tarexp": "TARexp", "hical": "hical"}


def _iteration_tool(kind: str, runs: list[dict], a) -> dict:
    ok = _ok(runs)
    if kind == "dask":  # the peak of the client and its workers together
        ok = [{**x, "peak_rss_mb": x.get("peak_rss_all_processes_mb") or x["peak_rss_mb"]} for x in ok]
    note = {"local": "the first call is the first iteration of the process, the warm ones follow a second, untimed",
            "dask": f"the LocalCluster started before (not timed, {_med(ok, 'cluster_start_s') or 0:.1f} s); CPU: "
                    "the client's and the workers'; peak RSS: all processes"}.get(kind)
    if kind in ("tarexp", "hical"):
        note = f"its own features, one time, not in the iteration: {_med(ok, 'features_s'):.1f} s"
    return tool_from_processes(_names(a)[kind], ok, stages=ok[0].get("stages"), note=note)


def shared_result(report: dict, a) -> dict:
    """The run in benchmarks/_results.py's shape (for docs/benchmarks.md)."""
    feats, its, checks, notes = [], [], {}, []
    for n_str, s in report["sizes"].items():
        n, label = int(n_str), f"{int(n_str):,} passages"
        tools = [tool_from_processes(name, _ok(s[kind]), stages=_ok(s[kind])[0].get("stages"),
                                     note="one build per process (a first call); the warm columns repeat it")
                 for kind, name in (("features", "qrelkit"), ("features_before", "qrelkit before (--compare-with)"))
                 if _ok(s.get(kind, []))]
        if tools:
            feats.append(size_result(label, n, "passage", tools, task=f"build_features, shards of {a.shard_size:,}"))
        tools = []
        for kind in ("local", "dask", "local_before", "tarexp", "hical"):
            runs = s.get(kind) or []
            if runs and not _ok(runs):
                notes.append(f"{_names(a)[kind]}, {label}: {runs[0]['error']}")
            elif runs:
                tools.append(_iteration_tool(kind, runs, a))
            if kind in ("dask", "local_before") and _ok(runs) and "same_batch_as_local" in _ok(runs)[0]:
                checks[f"{label}: {_names(a)[kind]}'s batch equals the local one"] = all(
                    x["same_batch_as_local"] for x in _ok(runs))
        if tools:
            its.append(size_result(label, n, "passage", tools, task=ITERATION))
    return benchmark_result("cal-scale", "CAL at scale: sharded features, local and Dask iterations", feats + its,
                            peers=("hical", "tarexp", "scikit-learn", "distributed"), targets=_scale_targets(feats, its),
                            checks=checks, notes=notes + [
        "Every tool starts from the same state (topic 1001's query, 200 judged passages) on the same simulated "
        "corpus; qrelkit's features are stored and memory-mapped, TARexp's and hical's built in their process."])


def _scale_targets(feats: list[dict], its: list[dict]) -> list[dict]:
    """docs/benchmarks.md's targets, at 10M passages (and the 10M / 1M growth when both were measured)."""
    def tool(sizes, n, name):
        s = next((x for x in sizes if x["units"] == n), None)
        return next((t for t in s["tools"] if t["tool"].startswith(name)), None) if s else None

    out, big, small = [], 10_000_000, 1_000_000
    f10, f1 = tool(feats, big, "qrelkit"), tool(feats, small, "qrelkit")
    i10, i1, d10 = tool(its, big, "qrelkit, local"), tool(its, small, "qrelkit, local"), tool(its, big, "qrelkit, Dask")
    if f10:
        out += [target("features of 10M passages, wall", f10["warm"]["wall_s"], "<=", 150, "s"),
                target("features of 10M passages, peak RSS", f10["peak_rss_mb"] / 1024, "<=", 4, "GB")]
    if i10:
        out.append(target("one iteration at 10M, local, warm median", i10["warm"]["wall_s"] * 1000, "<=", 400, "ms"))
    if i10 and d10:
        out.append(target("Dask / local at 10M, warm medians", d10["warm"]["wall_s"] / i10["warm"]["wall_s"], "<=", 1.5, "x"))
    if f10 and f1:
        out.append(target("features, 10M / 1M", f10["warm"]["wall_s"] / f1["warm"]["wall_s"], "<=", 11, "x"))
    if i10 and i1:
        out.append(target("one iteration, 10M / 1M", i10["warm"]["wall_s"] / i1["warm"]["wall_s"], "<=", 11, "x"))
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return child_main(argv)
    ap = argparse.ArgumentParser(description="CAL at scale: sharded features, local and Dask iterations.")
    ap.add_argument("--sizes", nargs="+", type=int, default=[1_000_000, 4_000_000, 10_000_000])
    ap.add_argument("--iterations", type=int, default=15, help="timed iterations per process (median reported)")
    ap.add_argument("--repeats", type=int, default=1, help="fresh processes per measurement and size")
    ap.add_argument("--shard-size", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes (one thread each)")
    ap.add_argument("--peers", nargs="*", default=["tarexp", "hical"], choices=["tarexp", "hical"])
    ap.add_argument("--peer-sizes", nargs="*", type=int, default=[], help="only at these sizes (default: all that fit)")
    ap.add_argument("--peer-max-gb", type=float, default=8.0, help="skip a peer whose estimated peak exceeds this")
    ap.add_argument("--compare-with", default=None, help="an earlier qrelkit source tree, run side by side")
    ap.add_argument("--compare-sizes", nargs="*", type=int, default=[1_000_000])
    ap.add_argument("--reuse-features", action="store_true", help="iterations only: keep built features folders")
    ap.add_argument("--kinds", nargs="+", default=["local", "dask"], choices=["local", "dask"],
                    help="iteration measurements to run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--wait-idle", type=float, default=10.0, help="seconds to wait for a quiet machine per process")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "bench-out")
    ap.add_argument("--results", default="bench_cal_scale.json", help="results file name in --out-dir")
    ap.add_argument("--json-out", type=Path, default=None, help="the shared-shape result (default OUT/cal-scale.json)")
    a = ap.parse_args(argv)
    report = {"command": "python benchmarks/bench_cal_scale.py " + " ".join(shlex.quote(x) for x in argv),
              "versions": _versions(), "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "load_at_start": os.getloadavg(), "sizes": {}}
    t0 = time.time()
    for n in a.sizes:
        report["sizes"][str(n)] = bench_size(n, a)
        (a.out_dir / a.results).write_text(json.dumps(report, indent=2) + "\n")
    report["load_at_end"] = os.getloadavg()
    report["wall_s"] = time.time() - t0
    out = a.out_dir / a.results
    out.write_text(json.dumps(report, indent=2) + "\n")
    report_tables(report)
    print(f"\nresults: {out}")
    res = shared_result(report, a)
    write_result(res, a.json_out or a.out_dir / "cal-scale.json", "bench_cal_scale.py", argv)
    return 0 if all(res["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
