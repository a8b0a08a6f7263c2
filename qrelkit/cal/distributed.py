"""CAL scoring on ``dask.distributed``: the shards of a feature store are assigned to workers and
stay there; every iteration sends the fitted model and gets back each shard's best candidates.

* **Assignment.** Shard ``i`` goes to the ``i``-th worker in address order, round robin, and
  stays there: each worker memory-maps its shards from the store's path (shared storage, the same
  path on every machine, as the corpus in :mod:`qrelkit.dedupe.distributed`), so its page cache
  holds them from one iteration to the next. Tasks are pinned to their worker
  (``client.submit(..., workers=[addr], allow_other_workers=False)``).
* **One iteration.** The client fits the model (it reads the few training rows from the store
  itself), then sends each worker one task: the model as a sparse vector (the columns the model
  uses as int32 and their float32 weights, the intercept: 8 bytes per column), its shards, the rows never to select in each of
  them, ``k`` and how to find the candidates (every row, the canonical rows, or an explicit set
  written once to the spill folder). Each worker scores its shards with the local kernels
  (:func:`qrelkit.cal.scoring.shard_top`) and returns every shard's first ``k`` (global rows,
  scores, passage ids); the client merges them (:func:`qrelkit.cal.scoring.merge_tops`). The
  batch is that of :class:`~qrelkit.cal.scoring.LocalScorer`, byte for byte: the scores of a row
  do not depend on the process that computes them, and the merge is a total order.
* **Several models.** ``top_many`` (a CAL round: every topic's model of one thread) sends each
  worker one task for up to :data:`~qrelkit.cal.scoring.SCORE_GROUP` models (their sparse
  vectors, each one's rows to skip per shard and ``k``); the worker scores them in one pass over
  each shard's rows (:func:`qrelkit.cal.scoring.shard_top_many`) and returns each model's first
  ``k`` per shard: one round trip for the group.
* **Worker loss.** The client watches the workers while it waits: when a worker holding shards
  leaves (its process died, its machine is gone), its pending task is cancelled and its shards are
  given to the remaining workers (the least loaded first), which read them from the shared store;
  the iteration goes on and gives the same batch. Without any worker left it waits
  ``worker_timeout`` seconds for one, then fails (``dask-no-workers``).

``DaskScorer.stats`` counts iterations, retries and the bytes sent and received (pickled task
arguments and results), per iteration as well: the network cost of CAL on a cluster. In the
iteration's timings, ``score`` is the busiest worker's time (scoring and selecting its shards)
and ``select`` everything else after the fit (sending, waiting, gathering, merging).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pickle
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from qrelkit.cal.features import Features, load_features, resident_default
from qrelkit.cal.loop import candidate_rows
from qrelkit.cal.scoring import (
    SCORE_GROUP, Candidates, LocalScorer, TopRows, merge_tops, shard_top, shard_top_many, split_rows,
)
from qrelkit.errors import InputError

SPILL_ENV = "QRELKIT_DASK_SPILL"
POLL_S = 0.25  # how often the client looks for lost workers while it waits
MAX_RETRIES = 3  # lost workers an iteration recovers from before it fails

__all__ = ["DaskScorer", "check_dask_choice", "dask_client", "scorer_for"]


# --------------------------------------------------------------------------- on the workers

_cache: dict = {}  # per worker process: store -> Features, (digest, shard) -> candidate rows, weight buffer
_lock = threading.Lock()


def _store_visible(path: str) -> str | None:
    """None when the store can be read here, else why not."""
    if not (Path(path) / "meta.json").is_file():
        import socket  # lazy: only to name the machine in an error

        return f"the features folder {path} is not visible on worker {socket.gethostname()}"
    return None


def _worker_features(path: str) -> Features:
    """The store, once per worker process; its shards read into memory within a quarter of the
    worker's memory limit (Dask's nanny restarts a worker beyond it), else of what is free."""
    f = _cache.get(("features", path))
    if f is None:
        budget = resident_default()
        try:
            from distributed import get_worker  # lazy: only inside a Dask worker

            limit = getattr(get_worker(), "memory_limit", None)
            if limit:
                budget = min(budget, int(limit) // 4)
        except (ImportError, ValueError):  # not in a worker (a test calling the task directly)
            pass
        f = _cache[("features", path)] = load_features(path, resident=budget)
    return f


def _worker_candidates(f: Features, s: int, spec: tuple) -> np.ndarray | None:
    """Local candidate rows of shard ``s`` (None: all its rows)."""
    if spec[0] == "all":
        return None
    key = (spec[0], spec[-1], f.path, s)
    rows = _cache.get(key)
    if rows is None:
        sh = f.shards[s]
        if spec[0] == "canonical":
            rows = sh.canonical_rows()
        else:  # ("file", path, digest): every candidate row, ascending
            allrows = np.load(spec[1], mmap_mode="r")
            lo, hi = np.searchsorted(allrows, [sh.first_row, sh.end_row])
            rows = np.array(allrows[lo:hi]) - sh.first_row
        _cache[key] = rows
    return rows


def _worker_buffers(f: Features, shards: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The worker's zero weight vector and a score buffer for the largest of ``shards``."""
    w = _cache.get(("w", f.n_terms))
    if w is None:
        w = _cache[("w", f.n_terms)] = np.zeros(f.n_terms, np.float32)
    need = max(f.shards[s].n_rows for s in shards) if shards else 0
    buf = _cache.get("buf")
    if buf is None or len(buf) < need:
        buf = _cache["buf"] = np.empty(need, np.float32)
    return w, buf


def _score_shards(path: str, shards: list[int], spec: tuple, k: int, model: tuple,
                  skips: list[np.ndarray]) -> list[tuple]:
    """Every given shard's first ``k`` under one model ``(cols, vals, b)``:
    ``(shard, rows, scores, pids, timings)``."""
    f = _worker_features(path)
    w, buf = _worker_buffers(f, shards)
    cols, vals, b = model
    w[cols] = vals
    try:
        out = []
        for s, skip in zip(shards, skips):
            top = shard_top(f.shards[s], w, b, _worker_candidates(f, s, spec), skip, k, buf)
            out.append((s, top.rows, top.scores, top.pids, top.timings))
        return out
    finally:
        w[cols] = 0.0


def _score_shards_many(path: str, shards: list[int], spec: tuple, ks: list[int], models: list[tuple],
                       skips: list[list[np.ndarray]]) -> list[tuple]:
    """Every given shard's first ``ks[t]`` under each model ``(cols, vals, b)``, the models
    scored in one pass over each shard's rows: ``(shard, [(rows, scores, pids, timings)] per model)``."""
    f = _worker_features(path)
    W = np.zeros((f.n_terms, len(models)), np.float32)
    for t, (cols, vals, _b) in enumerate(models):
        W[cols, t] = vals
    b = np.array([m[2] for m in models], np.float32)
    out = []
    for s, sk in zip(shards, skips):
        tops = shard_top_many(f.shards[s], W, b, _worker_candidates(f, s, spec), sk, ks)
        out.append((s, [(t.rows, t.scores, t.pids, t.timings) for t in tops]))
    return out


def _score_task(path: str, shards: list[int], spec: tuple, k, model, skips: list) -> list[tuple]:
    """One worker's task: its shards under one model (``k`` an int) or several (``k`` a list)."""
    with _lock:  # one scoring at a time per worker process: its buffers, and numba's threads
        if isinstance(k, list):
            return _score_shards_many(path, shards, spec, k, model, skips)
        return _score_shards(path, shards, spec, k, model, skips)


# --------------------------------------------------------------------------- at the client


def check_dask_choice(workers: int | None, scheduler: str | None) -> None:
    """``workers`` (a LocalCluster) or ``scheduler`` (a running cluster), not both; at least one worker."""
    if workers is not None and scheduler is not None:
        raise InputError("bad-option", "give --workers (a LocalCluster) or --scheduler (a running cluster), not both")
    if workers is not None and workers < 1:
        raise InputError("bad-option", "--workers must be at least 1")


def dask_client(scheduler: str | None, n_workers: int = 2, threads_per_worker: int = 1) -> tuple:
    """``(cluster, client)``: a client of the scheduler at ``scheduler`` (cluster None), or of a
    ``LocalCluster(n_workers, threads_per_worker, processes=True)`` started here, its workers'
    numba kernels sharing the machine's cores. Close the client, then the cluster."""
    try:
        from distributed import Client, LocalCluster  # lazy: dask.distributed takes ~1 s to import
    except ImportError:  # pragma: no cover - a core dependency
        raise InputError("bad-option", "the Dask mode needs dask[distributed]: pip install 'dask[distributed]'") from None
    if scheduler is not None:
        try:
            return None, Client(scheduler, timeout="20s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise InputError("bad-option", f"cannot reach the Dask scheduler {scheduler}: {exc}") from None
    if n_workers < 1 or threads_per_worker < 1:
        raise InputError("bad-option", "--workers must be at least 1")
    cores = max(1, (os.cpu_count() or 1) // n_workers)
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                           dashboard_address=":0", silence_logs=logging.CRITICAL,
                           env={"NUMBA_NUM_THREADS": str(cores)})
    try:
        return cluster, Client(cluster)
    except BaseException:
        cluster.close()
        raise


class DaskScorer:
    """Scores the shards of stored features on Dask workers (see the module docs).

    ``scheduler``: address of a running scheduler (``tcp://host:8786``); without it a
    ``LocalCluster(n_workers, threads_per_worker, processes=True)`` is started here and closed by
    :meth:`close` (its workers' numba kernels share the machine's cores). ``spill_dir``: where
    explicit candidate sets (the fractional thread's) are written for the workers (default
    ``$QRELKIT_DASK_SPILL`` or the system temp folder): on a cluster, shared storage.
    ``worker_timeout``: seconds to wait for a worker when none is left.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, features: Features, *, scheduler: str | None = None, n_workers: int = 2,
                 threads_per_worker: int = 1, spill_dir: str | os.PathLike | None = None,
                 worker_timeout: float = 60.0) -> None:
        if features.path is None:
            raise InputError("bad-option", "Dask scoring needs stored features: build them with 'qrelkit cal features -o DIR'")
        self.features = features
        self.path = str(Path(features.path).resolve())
        self.worker_timeout = float(worker_timeout)
        self.stats: dict = {"iterations": 0, "retries": 0, "bytes_sent": 0, "bytes_received": 0, "per_iteration": []}
        self._owner: dict[int, str] = {}
        self._specs: dict[int, tuple] = {}
        self._canonical: np.ndarray | None = None
        self._spill_base = spill_dir or os.environ.get(SPILL_ENV) or None
        self._spill: Path | None = None
        self.cluster = self.client = None
        try:
            self._connect(scheduler, n_workers, threads_per_worker)
            self._check_visible()
        except BaseException:
            self.close()
            raise

    def _connect(self, scheduler: str | None, n_workers: int, threads_per_worker: int) -> None:
        self.cluster, self.client = dask_client(scheduler, n_workers, threads_per_worker)

    def _check_visible(self) -> None:
        self._live(wait=True)
        for addr, why in sorted(self.client.run(_store_visible, self.path).items()):
            if why:
                raise InputError("bad-option", f"{why}: the store must be on storage that the client and all "
                                 "workers share, at the same path", file=self.path)

    # ----------------------------------------------------------------- workers and shards

    def _live(self, wait: bool = False) -> list[str]:
        live = sorted(self.client.nthreads())
        if not live and wait:
            try:
                self.client.wait_for_workers(1, timeout=self.worker_timeout)
            except (TimeoutError, OSError):
                raise InputError("dask-no-workers", f"no Dask worker left after waiting {self.worker_timeout:g} s") from None
            live = sorted(self.client.nthreads())
        return live

    def _assign(self, shards: list[int], live: list[str]) -> None:
        """Owners for shards that have none alive: round robin at first, then the least loaded."""
        for s in list(self._owner):
            if self._owner[s] not in live:
                del self._owner[s]
        fresh = not self._owner
        load = {a: 0 for a in live}
        for a in self._owner.values():
            load[a] += 1
        for i, s in enumerate(sorted(shards)):
            if s in self._owner:
                continue
            a = live[i % len(live)] if fresh else min(live, key=lambda x: (load[x], x))
            self._owner[s] = a
            load[a] += 1

    def assignment(self) -> dict[int, str]:
        """Shard -> the worker address that holds it (after the first iteration)."""
        return dict(self._owner)

    def _spec(self, cands: Candidates) -> tuple:
        """How the workers find the candidates: every row, the canonical rows, or a file."""
        if cands.rows is None:
            return ("all",)
        hit = self._specs.get(id(cands.rows))
        if hit is not None and hit[0] is cands.rows:
            return hit[1]
        if self._canonical is None:
            canon = candidate_rows(self.features)
            self._canonical = np.zeros(0, np.int64) if canon is None else canon
        rows = np.sort(cands.rows)
        if np.array_equal(rows, self._canonical) and self.features.canonical is not None:
            spec = ("canonical", "canonical")
        else:
            digest = hashlib.blake2b(rows.tobytes(), digest_size=16).hexdigest()
            path = self._spill_folder() / f"candidates-{digest}.npy"
            if not path.exists():
                np.save(path, rows)
            spec = ("file", str(path), digest)
        self._specs[id(cands.rows)] = (cands.rows, spec)
        return spec

    def _spill_folder(self) -> Path:
        if self._spill is None:
            if self._spill_base:
                Path(self._spill_base).mkdir(parents=True, exist_ok=True)
            self._spill = Path(tempfile.mkdtemp(prefix="qrelkit-cal-", dir=self._spill_base)).resolve()
        return self._spill

    # ----------------------------------------------------------------- one iteration

    @staticmethod
    def _sparse(w: np.ndarray, b: float, cols: np.ndarray) -> tuple:
        cols = np.ascontiguousarray(cols, np.int32)  # column ids are int32 in the store
        return cols, np.ascontiguousarray(np.asarray(w)[cols], np.float32), float(b)

    def top(self, w: np.ndarray, b: float, cols: np.ndarray, cands: Candidates, skip_rows: np.ndarray,
            k: int) -> TopRows:
        """As :meth:`qrelkit.cal.scoring.LocalScorer.top`, on the workers."""
        t0 = time.perf_counter()
        skips = split_rows(self.features, np.asarray(skip_rows, np.int64))
        it = {"sent": 0, "received": 0, "retries": 0, "tasks": 0}
        results = self._run((self._spec(cands), int(k), self._sparse(w, b, cols)), skips, it)
        parts = [TopRows(r, sc, p) for _, r, sc, p, _ in sorted(results, key=lambda x: x[0])]
        out = merge_tops(parts, k)
        t_score = self._busiest([(s, sum(t.values())) for s, *_, t in results])
        out.timings = {"score": t_score, "select": time.perf_counter() - t0 - t_score}
        self._count(it, t0, 1)
        return out

    def top_many(self, models: list[tuple], cands: Candidates, skips: list[np.ndarray], ks: list[int]) -> list[TopRows]:
        """As :meth:`qrelkit.cal.scoring.LocalScorer.top_many`, on the workers: one task per
        worker for :data:`~qrelkit.cal.scoring.SCORE_GROUP` models (a round trip for them all),
        each shard's rows read once for the group."""
        out: list[TopRows] = []
        for g in range(0, len(models), SCORE_GROUP):
            t0 = time.perf_counter()
            group, gks = models[g: g + SCORE_GROUP], [int(k) for k in ks[g: g + SCORE_GROUP]]
            split = [split_rows(self.features, np.asarray(sk, np.int64)) for sk in skips[g: g + SCORE_GROUP]]
            per_shard = [[sp[s] for sp in split] for s in range(len(self.features.shards))]
            it = {"sent": 0, "received": 0, "retries": 0, "tasks": 0, "models": len(group)}
            results = sorted(self._run((self._spec(cands), gks, [self._sparse(*m) for m in group]), per_shard, it),
                             key=lambda x: x[0])
            t_score = self._busiest([(s, sum(sum(r[3].values()) for r in res)) for s, res in results]) / len(group)
            for t, k in enumerate(gks):
                top = merge_tops([TopRows(*res[t][:3]) for _, res in results], k)
                top.timings = {"score": t_score, "select": (time.perf_counter() - t0) / len(group) - t_score}
                out.append(top)
            self._count(it, t0, len(group))
        return out

    def _busiest(self, seconds: list[tuple[int, float]]) -> float:
        """The seconds of the busiest worker, from (shard, seconds) pairs."""
        busy: dict[str, float] = {}
        for s, sec in seconds:
            busy[self._owner.get(s, "")] = busy.get(self._owner.get(s, ""), 0.0) + sec
        return max(busy.values(), default=0.0)

    def _count(self, it: dict, t0: float, models: int) -> None:
        it["seconds"] = time.perf_counter() - t0
        self.stats["iterations"] += models
        self.stats["per_iteration"].append(it)
        for a, b_ in (("bytes_sent", "sent"), ("bytes_received", "received"), ("retries", "retries")):
            self.stats[a] += it[b_]

    def _submit(self, pending: dict, shards: list[int], common: tuple, per_shard: list, it: dict) -> None:
        by_owner: dict[str, list[int]] = {}
        for s in sorted(shards):
            by_owner.setdefault(self._owner[s], []).append(s)
        for addr, mine in sorted(by_owner.items()):
            args = (self.path, mine, *common, [per_shard[s] for s in mine])
            it["sent"] += len(pickle.dumps(args, protocol=5))
            it["tasks"] += 1
            fut = self.client.submit(_score_task, *args, workers=[addr], allow_other_workers=False, pure=False)
            pending[fut] = (addr, mine)

    def _run(self, common: tuple, per_shard: list, it: dict) -> list[tuple]:
        from distributed import wait  # lazy: dask.distributed is imported by the constructor already

        shards = list(range(len(self.features.shards)))
        if len(self._owner) < len(shards):
            self._assign(shards, self._live(wait=True))
        pending: dict = {}
        self._submit(pending, shards, common, per_shard, it)
        results: list[tuple] = []
        while pending:
            try:  # every task at once: one round trip per iteration when nothing goes wrong
                wait(list(pending), timeout=POLL_S)
                waited_out = False
            except TimeoutError:  # not all finished yet: look at the workers
                waited_out = True
            finished = [f for f in pending if f.status == "finished"]
            if finished:
                for fut, res in zip(finished, self.client.gather(finished)):
                    pending.pop(fut)
                    it["received"] += len(pickle.dumps(res, protocol=5))
                    results += res
            # a task may finish between the scans: a finished one is gathered on the next pass,
            # never taken for lost (that would cancel a good result and count a false retry)
            failed = [f for f in pending if f.done() and f.status != "finished"]
            if not failed and not waited_out:
                continue
            live = set(self._live())
            orphans: list[int] = []
            for fut, (addr, mine) in list(pending.items()):
                status = fut.status
                if status == "finished":
                    continue
                if addr in live and status == "error":
                    fut.result()  # the task itself failed, not its worker: raise its error
                if addr not in live or status in ("error", "cancelled", "lost"):  # run it elsewhere
                    fut.cancel()
                    del pending[fut]
                    orphans += mine
            if orphans:
                it["retries"] += 1
                if it["retries"] > MAX_RETRIES:  # workers that die on every attempt: stop, not loop
                    raise InputError("dask-worker-lost", f"the workers scoring shards {sorted(set(orphans))} were lost "
                                     f"{it['retries']} times in one iteration (out of memory?)")
                self._assign(orphans, self._live(wait=True))
                self._submit(pending, orphans, common, per_shard, it)
        return results

    # ----------------------------------------------------------------- lifetime

    def close(self) -> None:
        """Close the client (and the LocalCluster started here); remove the spill folder."""
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        self.client = self.cluster = None
        if self._spill is not None:
            shutil.rmtree(self._spill, ignore_errors=True)
            self._spill = None

    def __enter__(self) -> "DaskScorer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def scorer_for(features: Features, *, scheduler: str | None = None, workers: int | None = None, **kw):
    """A context manager giving the scorer of a command: a :class:`DaskScorer` with
    ``scheduler`` (a running cluster) or ``workers`` (a LocalCluster of that many processes), else
    a :class:`~qrelkit.cal.scoring.LocalScorer`. Both, or fewer than one worker, are refused."""
    check_dask_choice(workers, scheduler)
    if scheduler is None and workers is None:
        return contextlib.nullcontext(LocalScorer(features))
    return DaskScorer(features, scheduler=scheduler, n_workers=int(workers or 2), **kw)
