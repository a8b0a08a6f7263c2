"""The CAL feature build on ``dask.distributed``: :func:`build_features_dask` writes the folder
that :func:`qrelkit.cal.features.build_features` writes, byte for byte, with the tokenizing and
counting spread over the workers and memory per worker bounded by a part of the corpus or a
shard.

1. **Count, a part per task.** The corpus is cut into parts: the independently readable parts of
   a corpus source (:func:`qrelkit.io.sources.open_corpus`; a folder of shards: one per shard
   file, each task reads its own part from the shared path), or else chunks streamed by the
   client (a single file, a table, an iterable of tables) and sent to the workers, a few at a
   time. Each task tokenizes its part chunk by chunk, gives
   its words local column ids (a :class:`~qrelkit.cal.features.Vocabulary` of its own), counts
   their document frequencies and appends its raw rows (local ids, term frequencies), ids and id
   hashes to a folder of its own in the build area (inside the output's temporary folder, on
   storage the client and the workers share). It returns its row and passage counts.
2. **Merge, at the client.** The parts' vocabularies and frequencies are merged (a sorted union
   of the word hashes, the frequencies summed), the columns ordered as the one-process build
   orders them (:func:`~qrelkit.cal.features._columns`: document frequency descending, then
   hash: the order does not depend on who counted what), ``idf`` computed from the row count, and
   every part gets its map from local to final column ids. Duplicate ids are found here, from the
   parts' id hashes (8 bytes per passage, as the one-process build).
3. **Finish, a shard per task.** Output shard ``s`` holds rows ``[s * shard_size, (s + 1) *
   shard_size)`` whatever the parts were: its task reads those rows from the parts that hold them,
   renumbers their columns, sorts, weights and normalizes each row (the one-process kernels: a
   row's floats do not depend on the process or the shard) and writes the shard folder.

The vocabulary arrays and the manifest are written by the client, the build area removed and the
folder renamed into place as the one-process build does. Nothing in the output records the build
mode.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa

from qrelkit.cal.distributed import dask_client
from qrelkit.cal.features import (
    Features, Vocabulary, _columns, _noncanonical, _universe, _write_store, build_params, canonical_rows, checked_chunk,
    chunks_of, count_rows, load_features, sort_and_weight,
)
from qrelkit.cal.params import FeatureParams
from qrelkit.cal.shards import Shard, duplicate_pid, install_folder, pid_hashes, save_shard, shard_dir, temporary_folder
from qrelkit.dedupe.tokenize import Normalization
from qrelkit.errors import InputError
from qrelkit.io.corpus import iter_corpus
from qrelkit.io.sources import CorpusSource, open_corpus

BUILD_AREA = ".build"  # inside the output's temporary folder: the parts' raw rows, removed before it is installed
PART_BYTES = 32 << 20  # bytes of a part when the client streams a single corpus file (Parquet: / 256 rows)
IN_FLIGHT = 2  # chunks sent per worker thread at a time (the client streams a single file)

__all__ = ["build_features_dask"]

_lock = threading.Lock()  # one kernel at a time per worker process: numba's threading layer may not be thread-safe


# --------------------------------------------------------------------------- on the workers


def _part_dir(area: str, k: int) -> Path:
    return Path(area) / f"part-{k:05d}"


def _chunks(source) -> Iterable[pa.Table]:
    """A part's chunks: a table sent by the client, or a part of a corpus source read here."""
    if isinstance(source, pa.Table):
        return [source]
    return source.chunks()


def _count_part(k: int, source, area: str, want: pa.Array | None, norm: Normalization,
                hashing: int | None) -> tuple[int, int, int]:
    """Stage 1 for part ``k``: its raw rows (local column ids, term frequencies), ids, id hashes,
    local vocabulary and document frequencies, written to its folder. Returns ``(k, rows,
    passages read)``."""
    d = _part_dir(area, k)
    d.mkdir(parents=True, exist_ok=True)
    vocab, df = Vocabulary(), np.zeros(1 << 16, np.int64)
    lens: list[np.ndarray] = []
    n_in = 0
    with open(d / "idx.bin", "wb") as fi, open(d / "tf.bin", "wb") as ft, open(d / "pidhash.bin", "wb") as fh, \
            pa.OSFile(str(d / "pids.arrow"), "wb") as sink, \
            pa.ipc.new_file(sink, pa.schema([("pid", pa.string())])) as pw:
        for chunk in _chunks(source):
            n_in += chunk.num_rows
            chunk = checked_chunk(chunk, want)
            if not chunk.num_rows:
                continue
            pids = chunk["pid"].combine_chunks().cast(pa.string())
            with _lock:
                nuniq, idx, tf, df = count_rows(chunk["text"], vocab, df, norm, hashing)
                hashes = pid_hashes(pids)
            fi.write(memoryview(idx))
            ft.write(memoryview(tf))
            fh.write(memoryview(hashes))
            pw.write_table(pa.table({"pid": pids}))
            lens.append(nuniq)
    indptr = np.zeros(sum(len(x) for x in lens) + 1, np.int64)
    if lens:
        np.cumsum(np.concatenate(lens), out=indptr[1:])
    np.save(d / "indptr.npy", indptr)
    np.save(d / "terms.npy", vocab.terms())
    np.save(d / "df.npy", df[: vocab.n])
    return k, len(indptr) - 1, n_in


def _read_rows(area: str, k: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, pa.Array]:
    """Rows ``[lo, hi)`` of part ``k``: row lengths, final column ids, term frequencies, ids."""
    d = _part_dir(area, k)
    ptr = np.load(d / "indptr.npy", mmap_mode="r")
    a, b = int(ptr[lo]), int(ptr[hi])
    idx = np.fromfile(d / "idx.bin", np.int32, count=b - a, offset=4 * a)
    tf = np.fromfile(d / "tf.bin", np.float32, count=b - a, offset=4 * a)
    remap = np.load(d / "remap.npy", mmap_mode="r") if b > a else np.zeros(0, np.int32)
    pids = pa.ipc.open_file(pa.memory_map(str(d / "pids.arrow"))).read_all()["pid"].slice(lo, hi - lo)
    return np.diff(np.asarray(ptr[lo: hi + 1])), np.asarray(remap[idx], np.int32), tf, pids.combine_chunks()


def _finish_shard_task(s: int, first_row: int, pieces: list[tuple[int, int, int]], area: str, store: str,
                       noncanonical: pa.Array | None) -> tuple[int, int, int]:
    """Stage 3 for output shard ``s``: its rows gathered from the parts' ``(k, lo, hi)`` pieces,
    renumbered, sorted, weighted, normalized and written. Returns ``(s, rows, nnz)``."""
    got = [_read_rows(area, k, lo, hi) for k, lo, hi in pieces]
    lens, idxs, tfs, pid_parts = zip(*got) if got else ((), (), (), ())
    n = sum(len(x) for x in lens)
    indptr = np.zeros(n + 1, np.int64)
    if n:
        np.cumsum(np.concatenate(lens), out=indptr[1:])
    indices = np.concatenate(idxs) if idxs else np.zeros(0, np.int32)
    data = np.concatenate(tfs) if tfs else np.zeros(0, np.float32)
    del got, idxs, tfs
    idf = np.load(Path(store) / "idf.npy", mmap_mode="r")
    with _lock:  # the columns are final already (renumbered as read): an empty remap
        sort_and_weight(indptr, indices, data, np.zeros(0, np.int32), np.asarray(idf))
    pids = pa.concat_arrays(list(pid_parts)).cast(pa.string()) if pid_parts else pa.array([], pa.string())
    sh = Shard(indptr=indptr, indices=indices, data=data, first_row=first_row, pid_array=pids,
               canonical=canonical_rows(pids, noncanonical))
    with _lock:  # its 2-byte ids and id hashes are numba kernels too
        save_shard(sh, Path(store) / shard_dir(s))
    return s, n, int(indptr[-1])


# --------------------------------------------------------------------------- at the client


def _in_order(client, futures: list) -> list:
    """The tasks' results once all are done; the first failing task (in corpus order) raises its
    error (a reader's error names the file and line, as in one process)."""
    from distributed import wait  # lazy: dask.distributed takes ~1 s to import, only this backend needs it

    wait(futures)
    for f in futures:
        if f.status != "finished":
            f.result()
    return client.gather(futures)


def _source_parts(corpus) -> list | None:
    """The parts of a corpus source that the workers read themselves (a folder of shards: its
    shard files), else None (the client streams it)."""
    if not isinstance(corpus, (str, os.PathLike, CorpusSource)):
        return None
    parts = open_corpus(corpus).parts()
    return parts if len(parts) > 1 else None


def _client_chunks(corpus, part_bytes: int) -> Iterable[pa.Table]:
    """The chunks the client streams and sends: a file in parts of about ``part_bytes``."""
    if isinstance(corpus, (str, os.PathLike, CorpusSource)):
        return iter_corpus(corpus, chunk_bytes=part_bytes, chunk_rows=max(1, part_bytes // 256))
    return chunks_of(corpus)()


def _count_stage(client, corpus, area: str, want, norm, hashing, progress, part_bytes: int) -> list[tuple[int, int, int]]:
    """Stage 1: every part counted on the workers; ``(k, rows, passages read)`` in corpus order."""
    files = _source_parts(corpus)
    if files is not None:
        wf = client.scatter(want, broadcast=True, hash=False) if want is not None else None
        futs = [client.submit(_count_part, k, part, area, wf, norm, hashing, pure=False) for k, part in enumerate(files)]
        if progress is not None:
            from distributed import as_completed  # lazy: dask.distributed, only this backend needs it

            for fut in as_completed(futs):
                if fut.status == "finished":
                    progress(fut.result()[2])
        return _in_order(client, futs)
    from distributed import wait  # lazy: dask.distributed, only this backend needs it

    limit = IN_FLIGHT * max(1, sum(client.nthreads().values()))
    futs: list = []
    for k, chunk in enumerate(_client_chunks(corpus, part_bytes)):
        n_in = chunk.num_rows
        chunk = checked_chunk(chunk, want)
        pending = [f for f in futs if not f.done()]
        if len(pending) >= limit:  # the client's memory: a few chunks in flight
            wait(pending, return_when="FIRST_COMPLETED")
        data = client.scatter(chunk.select(["pid", "text"]), hash=False)  # as data, not in the task graph; a key of its own
        futs.append(client.submit(_count_part, k, data, area, None, norm, hashing, pure=False))
        del data
        del chunk
        if progress is not None and n_in:
            progress(n_in)
    return _in_order(client, futs)


def _merge_stage(area: str, counts: list, store: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Stage 2: the parts' vocabularies merged, the final columns, ``idf``, each part's map from
    local to final ids (``remap.npy``); ``idf.npy`` written to ``store``. Returns
    ``(terms, df, idf, rows)``."""
    n = sum(rows for _, rows, _ in counts)
    terms, df = np.zeros(0, np.uint64), np.zeros(0, np.int64)
    for k, _, _ in counts:
        d = _part_dir(area, k)
        t, f = np.load(d / "terms.npy"), np.load(d / "df.npy")
        if not len(t):
            continue
        terms, inv = np.unique(np.concatenate([terms, t]), return_inverse=True)
        df = np.bincount(inv.ravel(), weights=np.concatenate([df, f]), minlength=len(terms)).astype(np.int64)
    final_terms, final_df, idf, remap = _columns(terms, df, n)  # terms sorted: remap is by hash order
    for k, _, _ in counts:
        d = _part_dir(area, k)
        np.save(d / "remap.npy", remap[np.searchsorted(terms, np.load(d / "terms.npy"))])
    np.save(store / "idf.npy", idf)  # for the finishing tasks (the vocabulary arrays are written with the manifest)
    return final_terms, final_df, idf, n


def _check_duplicates(area: str, counts: list) -> None:
    """The one-process build's ``duplicate-id`` error, from the parts' id hashes."""
    parts = [(k, rows) for k, rows, _ in counts if rows]
    hashes = [np.fromfile(_part_dir(area, k) / "pidhash.bin", np.uint64) for k, _ in parts]
    starts = np.cumsum([0] + [rows for _, rows in parts])

    def pids_of_rows(rows: np.ndarray) -> list[str]:
        out: list[str] = []
        sid = np.searchsorted(starts[1:], rows, side="right")
        for q in np.unique(sid):
            k = parts[int(q)][0]
            ids = pa.ipc.open_file(pa.memory_map(str(_part_dir(area, k) / "pids.arrow"))).read_all()["pid"]
            out += ids.take(pa.array(rows[sid == q] - starts[q])).to_pylist()
        return out

    dup = duplicate_pid(np.concatenate(hashes) if hashes else np.zeros(0, np.uint64), pids_of_rows)
    if dup is not None:
        raise InputError("duplicate-id", f"passage id {dup} occurs more than once in the corpus")


def _shard_pieces(counts: list, shard_size: int) -> list[tuple[int, list[tuple[int, int, int]]]]:
    """Output shards as ``(first row, [(part, lo, hi)])``: rows ``[s * shard_size, ...)`` cut
    from the parts whatever their sizes."""
    out: list = []
    cur: list = []
    room, first = shard_size, 0
    for k, rows, _ in counts:
        lo = 0
        while lo < rows:
            take = min(room, rows - lo)
            cur.append((k, lo, lo + take))
            lo += take
            room -= take
            if room == 0:
                out.append((first, cur))
                first += shard_size
                cur, room = [], shard_size
    if cur:
        out.append((first, cur))
    return out


def build_features_dask(
    corpus: str | os.PathLike | pa.Table | Iterable[pa.Table],
    output: str | os.PathLike,
    *,
    scheduler: str | None = None,
    n_workers: int = 2,
    threads_per_worker: int = 1,
    part_bytes: int = PART_BYTES,
    norm: Normalization = Normalization(),
    universe: Iterable[str] | pa.Array | None = None,
    classes: pa.Table | None = None,
    progress: Callable[[int], None] | None = None,
    params: dict | None = None,
    shard_size: int | None = None,
    hashing: int | None = None,
) -> Features:
    """:func:`~qrelkit.cal.features.build_features` on ``dask.distributed``: the same folder,
    byte for byte (see the module docs), built by the workers.

    ``scheduler``: address of a running scheduler (``tcp://host:8786``); without it a
    ``LocalCluster(n_workers, threads_per_worker, processes=True)`` is started and closed here.
    ``output`` is required, on storage that the client and every worker share at the same path
    (the parts' raw rows are written inside its temporary folder, then removed); so is the corpus
    when it is a source of several parts (a folder of shards), which the workers read themselves.
    ``part_bytes``: the size of a part when the client streams a corpus file (a task's chunk; a
    Parquet file's parts are ``part_bytes / 256`` rows).
    The other arguments (``norm``, ``universe``, ``classes``, ``progress``, ``params``,
    ``shard_size``, ``hashing``) are those of
    :func:`~qrelkit.cal.features.build_features`. Memory per
    worker is about one chunk of the corpus and its part's vocabulary while counting, one shard
    while finishing; at the client the merged vocabulary and 8 bytes per passage.
    """
    t0 = time.perf_counter()
    fp = FeatureParams(hashing=hashing) if shard_size is None else FeatureParams(shard_size=shard_size, hashing=hashing)
    shard_size, hashing = fp.shard_size, fp.hashing
    want = _universe(universe)
    out = Path(output)
    tmp = temporary_folder(out)
    area = str((tmp / BUILD_AREA).resolve())
    cluster = client = None
    try:
        cluster, client = dask_client(scheduler, n_workers, threads_per_worker)
        _check_visible(client, tmp)
        counts = _count_stage(client, corpus, area, want, norm, hashing, progress, part_bytes)
        t_read = time.perf_counter() - t0
        terms, df, idf, n = _merge_stage(area, counts, tmp)
        _check_duplicates(area, counts)
        t_merge = time.perf_counter() - t0 - t_read
        noncanon = _noncanonical(classes) if classes is not None else None
        nc = client.scatter(noncanon, broadcast=True, hash=False) if noncanon is not None else None
        plan = _shard_pieces(counts, shard_size)
        futs = [client.submit(_finish_shard_task, s, first, pieces, area, str(tmp.resolve()), nc, pure=False)
                for s, (first, pieces) in enumerate(plan)]
        done = _in_order(client, futs)
        entries = [{"rows": rows, "nnz": nnz, "first_row": first} for (_, rows, nnz), (first, _) in zip(done, plan)]
        shutil.rmtree(area)
        feats = Features(shards=[], terms=terms, df=df, idf=idf, norm=norm, hashing=hashing, shard_size=shard_size)
        feats.params = build_params(params, norm, want, classes is not None)
        _write_store(feats, tmp, entries)
        install_folder(tmp, out)
        tmp = None
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    feats = load_features(out, mmap=True)
    total = time.perf_counter() - t0
    feats.timings = {"read_tokenize_count": t_read, "merge": t_merge, "finish": total - t_read - t_merge, "total": total}
    return feats


def _check_visible(client, tmp: Path) -> None:
    """The output's temporary folder must be visible on every worker (shared storage)."""
    for addr, seen in sorted(client.run(os.path.isdir, str(tmp.resolve())).items()):
        if not seen:
            raise InputError("bad-option", f"the features folder's parent {tmp.parent} is not visible on the Dask "
                             f"worker {addr}: the output must be on storage that the client and all workers share, "
                             "at the same path", file=str(tmp.parent))
