"""Benchmark: near-duplicate clustering in the local or the Dask mode, with the wall time and the
peak resident memory of the client and of every process it started (docs/dedupe-dask.md).

    python benchmarks/bench_dedupe_dask.py CORPUS [--local] [--workers 2] [--threads 1] [-o classes.parquet]

Memory is sampled every 0.2 s with psutil (``pip install qrelkit[bench]``); with ``--scheduler``
only the local processes are sampled. The result (wall time, CPU seconds, peaks and the run's
statistics, ``dask.seconds`` per stage included) is printed as JSON.
"""

from __future__ import annotations

import argparse
import json
import threading
import time

import psutil

from qrelkit.dedupe.cluster import DedupeParams, cluster_corpus
from qrelkit.dedupe.distributed import cluster_corpus_dask
from qrelkit.io.tables import write_table


class MemorySampler(threading.Thread):
    """Peak resident memory of this process and of every process it started (LocalCluster
    workers), sampled every ``interval`` seconds with psutil."""

    def __init__(self, interval: float = 0.2):
        super().__init__(daemon=True)
        self.me = psutil.Process()
        self.interval = interval
        self.peaks: dict[int, int] = {}
        self.cpu: dict[int, float] = {}
        self.names: dict[int, str] = {}
        self.total = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            total = 0
            for proc in [self.me, *self.me.children(recursive=True)]:
                try:
                    rss = proc.memory_info().rss
                    cpu = proc.cpu_times()
                    self.cpu[proc.pid] = cpu.user + cpu.system
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
        cpu = self.me.cpu_times()
        self.cpu[self.me.pid] = cpu.user + cpu.system

    def report(self) -> dict:
        mb = lambda b: round(b / 2**20, 1)  # noqa: E731
        return {
            "client_mb": mb(self.peaks.get(self.me.pid, 0)),
            "workers_mb": [mb(v) for p, v in sorted(self.peaks.items()) if self.names.get(p) == "worker"],
            "total_mb": mb(self.total),
            "cpu_s": round(sum(self.cpu.values()), 1),  # user + system, client and workers
            "client_cpu_s": round(self.cpu.get(self.me.pid, 0.0), 1),
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python benchmarks/bench_dedupe_dask.py",
                                 description="Cluster a corpus in the local or the Dask mode; print wall time and peak memory.")
    ap.add_argument("corpus")
    ap.add_argument("--local", action="store_true", help="the local mode (cluster_corpus) instead of Dask")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="threads per LocalCluster worker")
    ap.add_argument("--scheduler", default=None, help="a running scheduler (memory is sampled for local processes only)")
    ap.add_argument("--chunk-rows", type=int, default=DedupeParams.chunk_rows)
    ap.add_argument("--bands-per-task", type=int, default=None)
    ap.add_argument("--spill-dir", default=None)
    ap.add_argument("-o", "--output", default=None, help="write the class table (.parquet)")
    a = ap.parse_args(argv)
    params = DedupeParams(chunk_rows=a.chunk_rows)
    sampler = MemorySampler()
    sampler.start()
    t = time.perf_counter()
    if a.local:
        res = cluster_corpus(a.corpus, params)
    else:
        res = cluster_corpus_dask(a.corpus, params, scheduler=a.scheduler, n_workers=a.workers,
                                  threads_per_worker=a.threads, bands_per_task=a.bands_per_task,
                                  spill_dir=a.spill_dir)
    wall = time.perf_counter() - t
    sampler.stop.set()
    sampler.join()
    if a.output:
        write_table(res.classes, a.output, kind="dedupe-classes", params=params.as_dict())
    n = res.stats["passages"]
    mem = sampler.report()
    print(json.dumps({"mode": "local" if a.local else "dask", "passages": n, "wall_s": round(wall, 2),
                      "s_per_million": round(wall * 1e6 / max(n, 1), 2), "cpu_s": mem.pop("cpu_s"),
                      "client_cpu_s": mem.pop("client_cpu_s"), "peak_rss": mem,
                      **{k: v for k, v in res.stats.items() if k != "s_curve"}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
