"""Benchmark: near-duplicate clustering in the local and the Dask mode, side by side at two sizes,
with the wall and CPU time and the peak resident memory of the client and of every process it
started (docs/dedupe-dask.md).

    python benchmarks/bench_dedupe_dask.py CORPUS [--workers 2] [--threads 1] [--sizes N N] [-o classes.parquet]
    python benchmarks/bench_dedupe_dask.py CORPUS --local          # the local mode only

Modes (``--modes``, default both; ``--local``: the local mode only): ``local``,
``cluster_corpus`` in one process; ``dask``, ``cluster_corpus_dask`` on a LocalCluster of
``--workers`` processes with ``--threads`` threads each, started and closed inside the call (or a
running ``--scheduler``, whose workers are not measured). Sizes (``--sizes``, default half of
CORPUS and all of it): the first N passages of CORPUS, copied once into ``OUT`` (the same text
distribution at both sizes) [unit: passage: the clustering reads, signs and bands every passage].

Each mode and size runs in a fresh process: the first call (imports apart), then ``--repeats``
warm repeats. CPU is the client's plus its reaped children's (the LocalCluster's worker processes,
joined when the call closes its cluster); memory is sampled every 0.2 s with psutil (``pip install
qrelkit[bench]``): the client's peak, each worker's and their sum. Check: the local and the Dask
class tables are equal at each size (the first call's of each mode). ``-o`` writes the class table
of the larger size. Writes ``OUT/dedupe-dask.json`` (``--json-out``; ``benchmarks/_results.py``'s
shape, for ``scripts/gen_benchmarks_doc.py``) and prints it as a line per mode and size.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import emit_result, run_child_process  # noqa: E402
from _procs import median_stages, tool_from_processes  # noqa: E402
from _results import benchmark_result, measure, size_result, write_result  # noqa: E402
from bench_corpus_check import prefix  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class MemorySampler(threading.Thread):
    """Peak resident memory of this process and of every process it started (LocalCluster
    workers), sampled every ``interval`` seconds with psutil."""

    def __init__(self, interval: float = 0.2):
        import psutil  # lazy: the [bench] extra, only where memory is sampled

        super().__init__(daemon=True)
        self.me = psutil.Process()
        self.interval = interval
        self.peaks: dict[int, int] = {}
        self.names: dict[int, str] = {}
        self.total = 0
        self.stop = threading.Event()

    def run(self) -> None:
        import psutil  # lazy: as above

        while not self.stop.is_set():
            total = 0
            for proc in [self.me, *self.me.children(recursive=True)]:
                try:
                    rss = proc.memory_info().rss
                    if proc.pid not in self.names:
                        cmd = " ".join(proc.cmdline())
                        self.names[proc.pid] = ("client" if proc.pid == self.me.pid else
                                                "helper" if "resource_tracker" in cmd or "forkserver" in cmd else "worker")
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                total += rss
                self.peaks[proc.pid] = max(self.peaks.get(proc.pid, 0), rss)
            self.total = max(self.total, total)
            self.stop.wait(self.interval)

    def report(self) -> dict:
        mb = lambda b: round(b / 2**20, 1)  # noqa: E731
        return {"client_mb": mb(self.peaks.get(self.me.pid, 0)),
                "workers_mb": [mb(v) for p, v in sorted(self.peaks.items()) if self.names.get(p) == "worker"],
                "total_mb": mb(self.total)}


def child(a) -> dict:
    t0 = time.perf_counter()
    from qrelkit.dedupe.cluster import DedupeParams, cluster_corpus
    from qrelkit.dedupe.distributed import cluster_corpus_dask
    from qrelkit.io.tables import write_table

    import_s = time.perf_counter() - t0
    params = DedupeParams(chunk_rows=a.chunk_rows)
    runs = []

    def once():
        sampler = MemorySampler()
        sampler.start()
        if a.child == "local":
            res = cluster_corpus(a.corpus, params)
        else:
            res = cluster_corpus_dask(a.corpus, params, scheduler=a.scheduler, n_workers=a.workers,
                                      threads_per_worker=a.threads, bands_per_task=a.bands_per_task,
                                      spill_dir=a.spill_dir)
        sampler.stop.set()
        sampler.join()
        runs.append((res, sampler.report()))

    first, warm, _ = measure(once, a.repeats, children=True)
    res = runs[0][0]
    write_table(res.classes, a.classes_out, kind="dedupe-classes", params=params.as_dict())
    return {"import_s": import_s, "first": first, "warm": warm, "passages": res.stats["passages"],
            "peak_rss_mb": max(m["total_mb"] for _, m in runs), "memory": [m for _, m in runs],
            "stages": _dask_seconds(runs[-1][0]), "first_stages": _dask_seconds(res),  # a warm call's, the first's
            "stats": {k: v for k, v in res.stats.items() if k not in ("s_curve", "dask")}}


def _dask_seconds(res) -> dict:
    """The Dask mode's stage seconds (none for the local mode)."""
    d = res.stats.get("dask")
    return {k: v for k, v in d.get("seconds", {}).items() if isinstance(v, (int, float))} if isinstance(d, dict) else {}


def _cmd(mode: str, corpus: Path, classes: Path, a) -> list[str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), str(corpus), "--child", mode, "--classes-out", str(classes),
           "--workers", str(a.workers), "--threads", str(a.threads), "--chunk-rows", str(a.chunk_rows),
           "--repeats", str(a.repeats)]
    for flag, v in (("--scheduler", a.scheduler), ("--bands-per-task", a.bands_per_task), ("--spill-dir", a.spill_dir)):
        if v is not None:
            cmd += [flag, str(v)]
    return cmd


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from qrelkit.dedupe.cluster import DedupeParams

    ap = argparse.ArgumentParser(prog="python benchmarks/bench_dedupe_dask.py",
                                 description="Cluster a corpus in the local and the Dask mode at two sizes; wall and "
                                             "CPU time, peak memory.")
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--modes", nargs="+", choices=["local", "dask"], default=["local", "dask"])
    ap.add_argument("--local", action="store_true", help="the local mode (cluster_corpus) only")
    ap.add_argument("--sizes", nargs=2, type=int, default=None, metavar="N",
                    help="the first N passages of CORPUS (default: half of it and all of it)")
    ap.add_argument("--repeats", type=int, default=1, help="warm repeats after the first call, in each process")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="threads per LocalCluster worker")
    ap.add_argument("--scheduler", default=None, help="a running scheduler (memory is sampled for local processes only)")
    ap.add_argument("--chunk-rows", type=int, default=DedupeParams.chunk_rows)
    ap.add_argument("--bands-per-task", type=int, default=None)
    ap.add_argument("--spill-dir", default=None)
    ap.add_argument("--wait-idle", type=float, default=20.0, help="before each process, wait up to this long for a "
                    "quiet machine")
    ap.add_argument("-o", "--output", default=None, help="write the class table of the larger size (.parquet)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out", help="the prefixes and class tables")
    ap.add_argument("--json-out", type=Path, default=ROOT / "bench-out" / "dedupe-dask.json")
    ap.add_argument("--child", choices=["local", "dask"], help=argparse.SUPPRESS)
    ap.add_argument("--classes-out", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        emit_result(child(a))
        return 0
    import pyarrow.parquet as pq  # lazy: the parent's check only

    from qrelkit.io.corpus import count_passages

    modes = ["local"] if a.local else a.modes
    a.out.mkdir(parents=True, exist_ok=True)
    total = count_passages(a.corpus)
    sizes, checks, tables = [], {}, {}
    for n in sorted(min(x, total) for x in (a.sizes or (total // 2, total))):
        corpus = prefix(a.corpus.resolve(), n, a.out)
        tools = []
        for mode in modes:
            classes = a.out / f"dedupe-dask-classes-{mode}-{n}.parquet"
            r = run_child_process(_cmd(mode, corpus, classes, a), idle_wait=a.wait_idle, cwd=ROOT, stderr_tail=5000)
            tables[(mode, n)] = classes
            name = "qrelkit, local" if mode == "local" else (f"qrelkit, Dask ({a.workers} workers x {a.threads} thread)"
                                                             if a.scheduler is None else "qrelkit, Dask (--scheduler)")
            tools.append(tool_from_processes(name, [r], stages=median_stages([r]), first_stages=r["first_stages"],
                                             memory=r["memory"], stats=r["stats"]))
            w = tools[-1]["warm"]
            print(f"{mode} {n:,}: first {r['first']['wall_s']:.2f} s wall / {r['first']['cpu_s']:.2f} s CPU, warm "
                  f"{w['wall_s']:.2f} s / {w['cpu_s']:.2f} s; peak {r['peak_rss_mb']:.0f} MB (all processes); "
                  f"others {r.get('background_cores', float('nan')):.2f} cores", file=sys.stderr, flush=True)
            checks.setdefault("every call clustered the size's passages", True)
            checks["every call clustered the size's passages"] &= r["passages"] == n
        if len(modes) == 2:
            checks[f"{n:,} passages: the Dask class table equals the local one"] = \
                pq.read_table(tables[("local", n)]).equals(pq.read_table(tables[("dask", n)]))
        sizes.append(size_result(f"{n:,} passages", n, "passage", tools))
    if a.output:
        shutil.copyfile(tables[(modes[-1], n)], a.output)
    res = benchmark_result("dedupe-dask", "Near-duplicate clustering, local and on Dask", sizes, peers=("dask", "distributed"),
                           checks=checks, notes=[
        "The Dask mode's call starts and closes its LocalCluster: the cluster's start is in every call.",
        "CPU: the client's and its reaped worker processes'; peak RSS: the sum over the client and its workers, "
        "sampled every 0.2 s.", f"Sizes: the first N passages of {a.corpus.name} ({a.corpus.parent.name})."])
    write_result(res, a.json_out, "bench_dedupe_dask.py", argv)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
