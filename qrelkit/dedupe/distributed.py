"""Near-duplicate classes on ``dask.distributed``: the local pipeline, band-wise, with bounded
memory per worker, giving exactly the classes of :func:`qrelkit.dedupe.cluster.cluster_corpus`.

Stages (every intermediate goes to a *spill folder* on storage that the client and all workers
share; tasks exchange only file names and counts through the scheduler):

1. **Sign.** The corpus is cut into parts of about ``params.chunk_rows`` passages (JSONL/TSV:
   byte ranges cut at newlines, each line belonging to the part where it starts; Parquet: row
   groups; an in-memory table is first written to the spill folder as Parquet). Each task reads
   its own part from the shared path, computes MinHash signatures with
   :func:`qrelkit.dedupe.minhash.signatures` and writes ``sig_<k>.npy``, the empty-passage mask
   and the ids (plus texts for exact verification) as Arrow IPC. Row offsets come from the counts.
2. **Band keys, a few bands at a time.** For each group of ``bands_per_task`` bands, a map task
   per part computes the band keys (``lsh.band_key``, the local key function) of its non-empty
   passages and writes them ordered by (key bucket, band, passage); a reduce task per key bucket
   reads its slice of every part's file in corpus order and, per band and key, pairs every
   passage with the *first* passage holding that key — exactly ``lsh.first_with_key``. It writes
   its pairs (``i * n + j``, unique, sorted). Key files of a group are deleted when its reduce
   tasks end, and at most two groups are in flight, so disk and memory hold one or two groups'
   keys, never all bands.
3. **Verify.** A task per range of passages gathers the pairs whose larger index falls in the
   range from all reduce outputs, makes them unique (``lsh.candidate_pairs``), and verifies them
   (``signature``: ``lsh.verify_signatures`` on the signature rows it loads from the spill files;
   ``exact``: exact Jaccard of shingle sets of the texts it loads; ``none``).
4. **Classes at the client.** Canonical linkage over the verified pairs
   (``cluster.link_to_canonicals``, as the local mode: the shingle sets or signature rows of the
   passages in verified pairs are loaded from the spill files), or connected components
   (``lsh.union_components``) with ``linkage="single"``, and the class table. ``mode="greedy"`` gathers the
   ``first`` matrix (bands x passages, int32) and the signatures (memory-mapped) at the client
   and runs ``lsh.greedy_claims`` there: exact parity, but sequential and bounded by the client.

``benchmarks/bench_dedupe_dask.py CORPUS`` times a run and samples the memory of the client and
every worker process (docs/dedupe-dask.md).
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from qrelkit.dedupe import lsh
from qrelkit.dedupe._exact import exact_pairs
from qrelkit.dedupe.cluster import Clustering, DedupeParams, canonicals, class_table, link_to_canonicals
from qrelkit.dedupe.minhash import permutations, shingle_sets, signatures
from qrelkit.errors import InputError
from qrelkit.io.corpus import blocks, corpus_format, jsonl_chunk, normalize_chunk, open_bytes, tsv_chunk
from qrelkit.io.sources import open_corpus
from qrelkit.io.text import is_gzip

PARTS_PER_BUCKET = 4  # key buckets (reduce tasks per band group) = parts / 4
DEFAULT_BANDS_PER_TASK = 8
SPILL_ENV = "QRELKIT_DASK_SPILL"


# ---------------------------------------------------------------------------------------------
# numba kernels


@nb.njit(cache=True)
def _bucket_keys(sig, b0, b1, rows, skip, nbuckets):
    """Band keys of bands ``b0..b1-1`` for the non-skipped rows, ordered by (bucket, band, row).

    Returns ``offs int64[nbuckets * nbands + 1]`` (segment ``bucket * nbands + band``), keys and
    row numbers (uint32, within the part)."""
    m = sig.shape[0]
    nbands = b1 - b0
    keys = np.empty((nbands, m), np.uint64)
    counts = np.zeros(nbuckets * nbands + 1, np.int64)
    nbk = np.uint64(nbuckets)
    for i in range(m):
        if skip[i]:
            continue
        for bi in range(nbands):
            k = lsh.band_key(sig, i, b0 + bi, rows)
            keys[bi, i] = k
            s = np.int64((k >> np.uint64(33)) % nbk) * nbands + bi
            counts[s + 1] += 1
    offs = np.cumsum(counts)
    out_k = np.empty(offs[-1], np.uint64)
    out_i = np.empty(offs[-1], np.uint32)
    fill = offs[:-1].copy()
    for i in range(m):
        if skip[i]:
            continue
        for bi in range(nbands):
            k = keys[bi, i]
            s = np.int64((k >> np.uint64(33)) % nbk) * nbands + bi
            out_k[fill[s]] = k
            out_i[fill[s]] = np.uint32(i)
            fill[s] += 1
    return offs, out_k, out_i


@nb.njit(cache=True)
def _first_pairs(keys, gidx):
    """``gidx`` ascending: every element whose key was seen before is paired with the first
    element holding that key (``lsh.first_with_key`` over one band)."""
    m = len(keys)
    size = 16
    while size < 2 * m:
        size *= 2
    mask = np.uint64(size - 1)
    tk = np.zeros(size, np.uint64)
    tv = np.full(size, -1, np.int64)
    oi = np.empty(m, np.int64)
    oj = np.empty(m, np.int64)
    c = 0
    for q in range(m):
        k = keys[q]
        slot = k & mask
        while True:
            v = tv[slot]
            if v < 0:
                tk[slot] = k
                tv[slot] = gidx[q]
                break
            if tk[slot] == k:
                oi[c] = gidx[q]
                oj[c] = v
                c += 1
                break
            slot = (slot + np.uint64(1)) & mask
    return oi[:c], oj[:c]


_kernel_lock = threading.Lock()


class _numba_guard:
    """One numba thread per task (dask's threads give the parallelism); calls are serialized
    within a worker while numba's threading layer is unknown or not thread-safe (workqueue)."""

    def __enter__(self):
        nb.set_num_threads(1)
        try:
            layer = nb.threading_layer()
        except ValueError:
            layer = None
        self.locked = layer in (None, "workqueue")
        if self.locked:
            _kernel_lock.acquire()
        return self

    def __exit__(self, *exc):
        if self.locked:
            _kernel_lock.release()


# ---------------------------------------------------------------------------------------------
# reading a part of the corpus


def _read_range(path: Path, start: int, end: int) -> tuple[int, bytes]:
    """The lines that *start* in bytes ``[start, end)`` of the (decompressed) file."""
    with open_bytes(path) as fh:
        if start > 0:
            fh.seek(start - 1)
            fh.readline()  # the line holding byte start-1 belongs to the part before
        pos = fh.tell()
        if pos >= end:
            return pos, b""
        data = fh.read(end - pos)
        if data and not data.endswith(b"\n"):
            data += fh.readline()
            if not data.endswith(b"\n"):
                data += b"\n"
    return pos, data


def _lines_before(path: Path, pos: int) -> int:
    n = 0
    with open_bytes(path) as fh:
        left = pos
        for block in blocks(fh, min(pos, 16 << 20), path) if pos > 0 else ():
            n += block[:left].count(b"\n")
            left -= len(block)
            if left <= 0:
                break
    return n


def _read_part(spec: dict) -> pa.Table:
    """One part as a table ``pid, text`` (strings), parsed as the local readers parse it."""
    p = Path(spec["path"])
    if not p.exists():
        raise InputError("unreadable", f"no such file on worker {socket.gethostname()}: the corpus must be on "
                         "storage the workers share", file=str(p))
    if spec["kind"] == "parquet":
        t = pq.ParquetFile(p).read_row_groups(spec["row_groups"])
        if spec.get("raw"):  # an in-memory table, cast as cluster._chunks does
            return pa.table({"pid": pc.cast(t["pid"], pa.string()), "text": pc.cast(t["text"], pa.string())})
        t = normalize_chunk(t, p, None)
        return t.select(["pid", "text"])
    pos, data = _read_range(p, spec["start"], spec["end"])
    body = data.lstrip(b"\r\n")  # a part must not start with a blank line (TSV reads its width there)
    lead = data[: len(data) - len(body)].count(b"\n")
    if not body.strip():
        return pa.table({"pid": pa.array([], pa.string()), "text": pa.array([], pa.string())})
    parse = jsonl_chunk if spec["fmt"] == "jsonl" else tsv_chunk
    try:
        t = parse(body, p, 1)
    except InputError as exc:
        if exc.line is None:
            raise
        raise InputError(exc.rule, exc.message, exc.file, exc.line + _lines_before(p, pos) + lead) from None
    return t.select(["pid", "text"])


# ---------------------------------------------------------------------------------------------
# spill files


def _atomic_tmp(path: Path) -> Path:
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")


def _save_npy(path: Path, arr: np.ndarray) -> None:
    tmp = _atomic_tmp(path)
    with open(tmp, "wb") as fh:
        np.save(fh, arr)
    os.replace(tmp, path)


def _load_npy(path: Path, mmap: bool = True) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r" if mmap else None)
    except ValueError:  # an empty array cannot be memory-mapped
        return np.load(path)


def _save_ipc(path: Path, table: pa.Table) -> None:
    tmp = _atomic_tmp(path)
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    os.replace(tmp, path)


def _load_ipc(path: Path) -> pa.Table:
    return pa.ipc.open_file(pa.memory_map(str(path))).read_all()


def _du(folder: Path) -> int:
    total = 0
    for e in os.scandir(folder):
        if e.is_file():
            try:
                total += e.stat().st_size
            except FileNotFoundError:
                pass
    return total


def _check_spill(spill: str) -> Path:
    p = Path(spill)
    if not p.is_dir():
        raise InputError("bad-option", f"the spill folder {spill} is not visible on worker {socket.gethostname()}: "
                         f"give spill_dir (or {SPILL_ENV}) on storage that the client and all workers share")
    return p


# ---------------------------------------------------------------------------------------------
# tasks (module-level so that workers import them by name)


@dataclass(frozen=True)
class _Ctx:
    spill: str
    params: DedupeParams
    n: int
    parts: tuple  # ((k, first row, rows), ...) of the non-empty parts, in corpus order

    @property
    def starts(self) -> np.ndarray:
        return np.array([s for _, s, _ in self.parts], np.int64)


def _sign_task(k: int, spec: dict, params: DedupeParams, spill: str, keep_text: bool) -> tuple[int, int, int]:
    d = _check_spill(spill)
    t = _read_part(spec)
    m = t.num_rows
    if m == 0:
        return k, 0, 0
    with _numba_guard():
        sig, nw = signatures(t["text"], ngram=params.ngram, norm=params.norm,
                             perms=permutations(params.num_perm, params.seed))
    empty = nw == 0
    _save_npy(d / f"sig_{k}.npy", sig)
    _save_npy(d / f"empty_{k}.npy", empty)
    _save_ipc(d / f"rows_{k}.arrow", t if keep_text else t.select(["pid"]))
    return k, m, int(empty.sum())


def _map_task(g: int, k: int, b0: int, b1: int, nbuckets: int, params: DedupeParams, spill: str) -> int:
    d = Path(spill)
    sig = np.load(d / f"sig_{k}.npy")
    skip = np.load(d / f"empty_{k}.npy")
    with _numba_guard():
        offs, keys, lidx = _bucket_keys(sig, b0, b1, params.rows, skip, nbuckets)
    del sig
    path = d / f"keys_{g}_{k}.bin"
    tmp = _atomic_tmp(path)
    with open(tmp, "wb") as fh:
        fh.write(offs.tobytes())
        fh.write(keys.tobytes())
        fh.write(lidx.tobytes())
    os.replace(tmp, path)
    return len(keys)


def _reduce_task(g: int, p: int, b0: int, b1: int, nbuckets: int, ctx: _Ctx, greedy: bool, _deps) -> int:
    d = Path(ctx.spill)
    nbands = b1 - b0
    hdr = 8 * (nbuckets * nbands + 1)
    keys = [[] for _ in range(nbands)]
    gidx = [[] for _ in range(nbands)]
    for k, start, _ in ctx.parts:  # corpus order: global indices ascend within a band
        with open(d / f"keys_{g}_{k}.bin", "rb") as fh:
            fh.seek(8 * p * nbands)
            offs = np.fromfile(fh, np.int64, nbands + 1)
            fh.seek(hdr - 8)
            total = int(np.fromfile(fh, np.int64, 1)[0])
            for bi in range(nbands):
                s, e = int(offs[bi]), int(offs[bi + 1])
                if e == s:
                    continue
                fh.seek(hdr + 8 * s)
                keys[bi].append(np.fromfile(fh, np.uint64, e - s))
                fh.seek(hdr + 8 * total + 4 * s)
                gidx[bi].append(np.fromfile(fh, np.uint32, e - s).astype(np.int64) + start)
    codes, firsts = [], []
    n = np.int64(ctx.n)
    for bi in range(nbands):
        if not keys[bi]:
            continue
        with _numba_guard():
            i, j = _first_pairs(np.concatenate(keys[bi]), np.concatenate(gidx[bi]))
        keys[bi] = gidx[bi] = None
        if greedy:
            firsts.append(np.stack([np.full(len(i), b0 + bi, np.int64), i, j]))
        else:
            codes.append(i * n + j)
    if greedy:
        out = np.concatenate(firsts, axis=1) if firsts else np.zeros((3, 0), np.int64)
        _save_npy(d / f"first_{g}_{p}.npy", out)
        return out.shape[1]
    out = np.unique(np.concatenate(codes)) if codes else np.zeros(0, np.int64)
    _save_npy(d / f"pairs_{g}_{p}.npy", out)
    return len(out)


def _sig_rows(inv: np.ndarray, ctx: _Ctx) -> np.ndarray:
    """Signature rows of the sorted unique global indices ``inv``, read from the spill files."""
    d = Path(ctx.spill)
    out = np.empty((len(inv), ctx.params.num_perm), np.uint32)
    bounds = list(np.searchsorted(inv, ctx.starts)) + [len(inv)]
    for q, (k, start, _) in enumerate(ctx.parts):
        a, b = bounds[q], bounds[q + 1]
        if b > a:
            out[a:b] = _load_npy(d / f"sig_{k}.npy")[inv[a:b] - start]
    return out


def _shingle_rows(inv: np.ndarray, ctx: _Ctx) -> tuple[np.ndarray, np.ndarray]:
    """Shingle sets (CSR) of the passages ``inv``, from the texts in the spill files."""
    d = Path(ctx.spill)
    bounds = list(np.searchsorted(inv, ctx.starts)) + [len(inv)]
    starts, vals, off = [], [], 0
    for q, (k, start, _) in enumerate(ctx.parts):
        a, b = bounds[q], bounds[q + 1]
        if b == a:
            continue
        texts = _load_ipc(d / f"rows_{k}.arrow")["text"].take(pa.array(inv[a:b] - start))
        with _numba_guard():
            st, v = shingle_sets(texts, np.arange(b - a), ngram=ctx.params.ngram, norm=ctx.params.norm)
        starts.append(st[:-1] + off)
        vals.append(v)
        off += len(v)
    starts.append(np.array([off], np.int64))
    return np.concatenate(starts), (np.concatenate(vals) if vals else np.zeros(0, np.uint32))


def _check_pairs(i: np.ndarray, j: np.ndarray, ctx: _Ctx) -> np.ndarray:
    """The verdicts of ``cluster._verify`` for pairs (i, j), from spilled signatures or texts."""
    params = ctx.params
    if params.verify == "none" or len(i) == 0:
        return np.ones(len(i), bool)
    inv = np.unique(np.concatenate([i, j]))
    pi, pj = np.searchsorted(inv, i), np.searchsorted(inv, j)
    if params.verify == "signature":
        sub = _sig_rows(inv, ctx)
        with _numba_guard():
            return lsh.verify_signatures(sub, pi, pj, params.threshold)
    starts, vals = _shingle_rows(inv, ctx)
    with _numba_guard():
        return exact_pairs(starts, vals, pi, pj, params.threshold)


def _verify_task(r: int, lo: int, hi: int, pair_files: list[str], ctx: _Ctx, _deps) -> tuple[int, int]:
    """Candidate pairs (i, j) with ``lo <= i < hi``: unique, then verified."""
    n = np.int64(ctx.n)
    segs = []
    for f in pair_files:
        codes = _load_npy(Path(f))
        a, b = np.searchsorted(codes, [lo * n, hi * n])
        if b > a:
            segs.append(np.array(codes[a:b]))
    cand = np.unique(np.concatenate(segs)) if segs else np.zeros(0, np.int64)
    ok = _check_pairs(cand // n, cand % n, ctx)
    _save_npy(Path(ctx.spill) / f"verified_{r}.npy", cand[ok])
    return len(cand), int(ok.sum())


def _stream_size(path: str) -> int:
    with open_bytes(Path(path)) as fh:
        return sum(len(block) for block in blocks(fh, 16 << 20, path))


# ---------------------------------------------------------------------------------------------
# the client side


def _plan(corpus, params: DedupeParams, spill: Path, client) -> tuple[list[dict], str | None]:
    """Parts of the corpus (task specs), in corpus order, and its name for error messages: a
    file's byte ranges or row groups, each shard of a folder so, a dataset of ir_datasets spilled
    to Parquet first (:func:`qrelkit.io.sources.open_corpus`)."""
    chunk = max(int(params.chunk_rows), 1)
    if isinstance(corpus, pa.Table) or open_corpus(corpus).kind == "irds":
        path = spill / "input.parquet"
        t = corpus if isinstance(corpus, pa.Table) else None
        with pq.ParquetWriter(path, pa.schema([("pid", pa.string()), ("text", pa.string())]), compression="none") as w:
            for part in [t] if t is not None else open_corpus(corpus).chunks(chunk_rows=chunk):
                w.write_table(pa.table({"pid": part["pid"], "text": part["text"]}), row_group_size=chunk)
        nrg = pq.ParquetFile(path).metadata.num_row_groups
        return ([{"kind": "parquet", "path": str(path), "row_groups": [g], "raw": True} for g in range(nrg)],
                None if t is not None else str(corpus))
    source = open_corpus(corpus)
    specs = [spec for part in source.parts() for spec in _file_plan(Path(part.spec), chunk, client)]
    return specs, source.spec


def _file_plan(p: Path, chunk: int, client) -> list[dict]:
    """The task specs of one corpus file: Parquet row groups of about ``chunk`` rows, or byte
    ranges of a text file (of its uncompressed stream, for a gzip file)."""
    fmt = corpus_format(p)
    if fmt == "parquet":
        try:
            meta = pq.ParquetFile(p).metadata
        except Exception as exc:  # noqa: BLE001
            raise InputError("unreadable", f"not a readable Parquet file: {exc}", file=str(p)) from None
        specs, cur, rows = [], [], 0
        for g in range(meta.num_row_groups):
            cur.append(g)
            rows += meta.row_group(g).num_rows
            if rows >= chunk:
                specs.append({"kind": "parquet", "path": str(p), "row_groups": cur})
                cur, rows = [], 0
        if cur:
            specs.append({"kind": "parquet", "path": str(p), "row_groups": cur})
        return specs
    gz = is_gzip(p)
    with open_bytes(p) as fh:
        sample = fh.read(4 << 20)
    size = client.submit(_stream_size, str(p), pure=False).result() if gz else p.stat().st_size
    per_row = len(sample) / max(sample.count(b"\n"), 1)
    k = max(1, math.ceil(size / max(per_row * chunk, 1 << 16)))
    bounds = [size * q // k for q in range(k + 1)]
    return [{"kind": "text", "fmt": fmt, "path": str(p), "start": bounds[q], "end": bounds[q + 1]} for q in range(k)]


def _gather_in_order(futures: list) -> list:
    """Results in submission order; the first failing task (in corpus order) raises."""
    from distributed import wait  # lazy: dask.distributed takes ~1 s to import, only this backend needs it

    wait(futures)
    return [f.result() for f in futures]


@dataclass
class _Signed:
    """The sign stage's result: the non-empty parts ``(k, first row, rows)``, the passage count,
    the number of empty passages and the passage ids in corpus order."""
    parts: list
    n: int
    empties: int
    pids: pa.Array


@dataclass
class _Banded:
    """The band stage's layout: band groups ``(b0, b1)``, key buckets, bands per task, threads."""
    groups: list
    nbuckets: int
    bpt: int
    threads: int


@dataclass
class _Linked:
    """The classes stage's result: the canonical member per passage and the pair counts."""
    canon: np.ndarray
    n_candidates: int
    n_verified: int
    detached: int = 0
    moved: int = 0


def _sign_stage(client, corpus, params: DedupeParams, spill: Path, token: str) -> _Signed:
    """Stage 1: sign every part on the workers; the parts' row offsets and the (unique) ids."""
    specs, fname = _plan(corpus, params, spill, client)
    keep_text = params.verify == "exact"
    futs = [client.submit(_sign_task, k, s, params, str(spill), keep_text, key=f"qrelkit-sign-{k}-{token}")
            for k, s in enumerate(specs)]
    meta = _gather_in_order(futs)
    del futs
    parts, start, empties = [], 0, 0
    for k, m, e in meta:
        if m:
            parts.append((k, start, m))
            start += m
            empties += e
    n = start
    if n == 0:
        raise InputError("empty-file", "the corpus has no passages", file=fname)
    pids = pa.concat_arrays([_load_ipc(spill / f"rows_{k}.arrow")["pid"].combine_chunks() for k, _, _ in parts])
    if pc.count_distinct(pids).as_py() != len(pids):
        vc = pc.value_counts(pids)
        bad = vc.filter(pc.greater(vc.field("counts"), 1)).field("values")[0].as_py()
        raise InputError("duplicate-id", f"passage id {bad!r} occurs twice in the corpus", file=fname)
    return _Signed(parts=parts, n=n, empties=empties, pids=pids)


def _band_stage(client, ctx: _Ctx, bands_per_task, token: str) -> tuple[_Banded, int]:
    """Stage 2: band keys, a group of bands at a time; at most two groups' key files on disk.
    Returns the layout and the spill folder's peak size seen meanwhile."""
    params, parts, spill = ctx.params, ctx.parts, Path(ctx.spill)
    spill_peak = 0
    threads = max(1, sum(client.nthreads().values()))
    nbuckets = max(min(len(parts), threads), math.ceil(len(parts) / PARTS_PER_BUCKET))
    bpt = max(1, min(int(bands_per_task or DEFAULT_BANDS_PER_TASK), params.bands))
    groups = [(b0, min(b0 + bpt, params.bands)) for b0 in range(0, params.bands, bpt)]
    greedy = params.mode == "greedy"
    inflight: deque = deque()  # (group, reduce futures); released once gathered

    def finish_group():
        g, reds = inflight.popleft()
        _gather_in_order(reds)
        for k, _, _ in parts:
            (spill / f"keys_{g}_{k}.bin").unlink(missing_ok=True)

    for g, (b0, b1) in enumerate(groups):
        if len(inflight) == 2:
            finish_group()
        maps = [client.submit(_map_task, g, k, b0, b1, nbuckets, params, str(spill),
                              key=f"qrelkit-keys-{g}-{k}-{token}") for k, _, _ in parts]
        reds = [client.submit(_reduce_task, g, p, b0, b1, nbuckets, ctx, greedy, maps,
                              key=f"qrelkit-bucket-{g}-{p}-{token}") for p in range(nbuckets)]
        inflight.append((g, reds))
        del reds
        if len(inflight) == 2:
            _gather_in_order(maps)
            spill_peak = max(spill_peak, _du(spill))
    while inflight:
        finish_group()
    spill_peak = max(spill_peak, _du(spill))
    del maps
    return _Banded(groups=groups, nbuckets=nbuckets, bpt=bpt, threads=threads), spill_peak


def _greedy_classes(ctx: _Ctx, banded: _Banded, pri) -> _Linked:
    """Stage 4, ``mode="greedy"``: the ``first`` matrix and the signatures at the client."""
    params, n, spill = ctx.params, ctx.n, Path(ctx.spill)
    first = np.full((params.bands, n), -1, np.int32)
    for g in range(len(banded.groups)):
        for p in range(banded.nbuckets):
            f = _load_npy(spill / f"first_{g}_{p}.npy", mmap=False)
            first[f[0], f[1]] = f[2]
    n_candidates = len(lsh.candidate_pairs(first)[0])
    sig = _concat_signatures(ctx, spill / "sig_all.npy")
    root = lsh.greedy_claims(first, sig, params.threshold, params.verify != "none")
    del first, sig
    n_verified = int((root != np.arange(n)).sum())
    return _Linked(canon=canonicals(root, pri), n_candidates=n_candidates, n_verified=n_verified)


def _verify_stage(client, ctx: _Ctx, banded: _Banded, token: str) -> tuple[int, int]:
    """Stage 3: verify the candidate pairs on the workers, a range of passages per task (each
    writes ``verified_<r>.npy``). Returns the number of ranges and of candidate pairs."""
    parts, spill = ctx.parts, Path(ctx.spill)
    ranges = []
    per = math.ceil(len(parts) / banded.nbuckets)
    for q in range(0, len(parts), per):
        grp = parts[q : q + per]
        ranges.append((grp[0][1], grp[-1][1] + grp[-1][2]))
    pair_files = _pair_files(spill, banded)
    vf = [client.submit(_verify_task, r, lo, hi, pair_files, ctx, None, key=f"qrelkit-verify-{r}-{token}")
          for r, (lo, hi) in enumerate(ranges)]
    counts = _gather_in_order(vf)
    return len(ranges), sum(c for c, _ in counts)


def _pair_files(spill: Path, banded: _Banded) -> list[str]:
    return [str(spill / f"pairs_{g}_{p}.npy") for g in range(len(banded.groups)) for p in range(banded.nbuckets)]


def _verified_pairs(ctx: _Ctx, banded: _Banded, nranges: int) -> tuple[np.ndarray, np.ndarray]:
    """The verified pairs (i, j) of the verify stage; its input pair files are deleted."""
    spill = Path(ctx.spill)
    for f in _pair_files(spill, banded):
        Path(f).unlink(missing_ok=True)
    codes = np.concatenate([_load_npy(spill / f"verified_{r}.npy", mmap=False) for r in range(nranges)])
    return codes // ctx.n, codes % ctx.n


def _link_classes(ctx: _Ctx, i: np.ndarray, j: np.ndarray, n_candidates: int, pri) -> _Linked:
    """Stage 4: canonical linkage over the verified pairs (as the local mode), or connected
    components with ``linkage="single"``."""
    params, n = ctx.params, ctx.n
    if not (params.linkage == "canonical" and params.verify != "none"):
        canon = canonicals(lsh.union_components(n, i, j), pri)
        return _Linked(canon=canon, n_candidates=n_candidates, n_verified=len(i))
    inv = np.unique(np.concatenate([i, j]))
    pos = np.full(n, -1, np.int64)
    pos[inv] = np.arange(len(inv))
    if params.verify == "exact":
        starts, vals = _shingle_rows(inv, ctx)
        sub = None
    else:
        starts, vals, sub = np.zeros(1, np.int64), np.zeros(0, np.uint32), _sig_rows(inv, ctx)
    canon, detached, moved = link_to_canonicals(n, i, j, pri, params, pos, starts, vals, sub)
    return _Linked(canon=canon, n_candidates=n_candidates, n_verified=len(i), detached=detached, moved=moved)


def _run(client, corpus, params: DedupeParams, priority, bands_per_task, spill: Path,
         return_signatures: bool) -> Clustering:
    """Sign, band, verify and link on ``client``; the class table and ``stats["dask"]``."""
    token = uuid.uuid4().hex[:8]
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    signed = _sign_stage(client, corpus, params, spill, token)
    spill_peak = _du(spill)
    timings["sign"] = time.perf_counter() - t0

    t1 = time.perf_counter()
    ctx = _Ctx(spill=str(spill), params=params, n=signed.n, parts=tuple(signed.parts))
    banded, band_peak = _band_stage(client, ctx, bands_per_task, token)
    spill_peak = max(spill_peak, band_peak)
    timings["bands"] = time.perf_counter() - t1

    t2 = time.perf_counter()
    pri = None
    if params.canonical == "priority" and priority is not None:
        pri = pc.is_in(signed.pids, value_set=pa.array(sorted(set(priority)), pa.string())).to_numpy(zero_copy_only=False)
    if params.mode == "greedy":
        linked = _greedy_classes(ctx, banded, pri)
    else:
        nranges, n_candidates = _verify_stage(client, ctx, banded, token)
        timings["verify"] = time.perf_counter() - t2
        i, j = _verified_pairs(ctx, banded, nranges)
        linked = _link_classes(ctx, i, j, n_candidates, pri)
        del i, j
    timings["components"] = time.perf_counter() - t2 - timings.get("verify", 0.0)
    t3 = time.perf_counter()

    table, stats = class_table(signed.pids, linked.canon, params, empty_passages=signed.empties,
                               candidate_pairs=linked.n_candidates, verified_pairs=linked.n_verified,
                               detached_from_canonical=linked.detached, moved_between_classes=linked.moved)
    timings["table"] = time.perf_counter() - t3
    sig = _concat_signatures(ctx, None) if return_signatures else None
    timings["total"] = time.perf_counter() - t0
    stats["dask"] = {
        "parts": len(signed.parts), "band_groups": len(banded.groups), "bands_per_task": banded.bpt,
        "key_buckets": banded.nbuckets, "workers": len(client.nthreads()), "threads": banded.threads,
        "spill_peak_bytes": spill_peak, "seconds": {k: round(v, 3) for k, v in timings.items()},
    }
    return Clustering(classes=table, params=params, stats=stats, sig=sig)


def _concat_signatures(ctx: _Ctx, path: Path | None) -> np.ndarray:
    """All signatures in corpus order: memory-mapped from ``path`` (written here), or in memory."""
    shape = (ctx.n, ctx.params.num_perm)
    if path:
        out = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint32, shape=shape)
    else:
        out = np.empty(shape, np.uint32)
    for k, start, m in ctx.parts:
        out[start : start + m] = _load_npy(Path(ctx.spill) / f"sig_{k}.npy")
    if path:
        out.flush()
        return np.asarray(out)
    return out


def cluster_corpus_dask(
    corpus: str | os.PathLike | pa.Table,
    params: DedupeParams | None = None,
    *,
    priority: Iterable[str] | None = None,
    scheduler: str | None = None,
    n_workers: int = 2,
    threads_per_worker: int = 1,
    bands_per_task: int | None = None,
    spill_dir: str | os.PathLike | None = None,
    return_signatures: bool = False,
) -> Clustering:
    """:func:`qrelkit.dedupe.cluster.cluster_corpus` on ``dask.distributed``: the same classes
    (the same class table), computed band-wise with bounded memory per worker.

    ``scheduler``: address of a running scheduler (``tcp://host:8786``); without it a
    ``LocalCluster(n_workers, threads_per_worker, processes=True)`` is started and closed here
    (``n_workers`` and ``threads_per_worker`` apply only to that LocalCluster).
    ``bands_per_task``: bands whose keys are shuffled together (default 8; fewer = less memory
    and disk at a time). ``spill_dir``: where intermediates go (a fresh sub-folder, removed at
    the end; default ``$QRELKIT_DASK_SPILL`` or the system temp folder) — on a real cluster it
    must be shared by the client and all workers, like the corpus. ``return_signatures``: also
    return the signatures (``Clustering.sig``, in the client's memory) for an incremental index.
    ``stats["dask"]`` holds the parts, groups, spill peak and stage times.
    """
    params = params or DedupeParams()
    if not isinstance(corpus, pa.Table):
        for part in open_corpus(corpus).parts():  # a missing file, a name of no format: before any worker starts
            if part.kind == "file":
                corpus_format(part.spec)
    try:
        from distributed import Client, LocalCluster  # lazy: dask.distributed takes ~1 s to import
    except ImportError:  # pragma: no cover - a core dependency
        raise InputError("bad-option", "the Dask mode needs dask[distributed]: pip install 'dask[distributed]'") from None
    base = spill_dir or os.environ.get(SPILL_ENV) or None
    if base:
        Path(base).mkdir(parents=True, exist_ok=True)
    spill = Path(tempfile.mkdtemp(prefix="qrelkit-dask-", dir=base)).resolve()
    cluster = client = None
    try:
        if scheduler is None:
            cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker, processes=True,
                                   dashboard_address=":0", silence_logs=logging.CRITICAL)
            client = Client(cluster)
        else:
            try:
                client = Client(scheduler, timeout="20s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise InputError("bad-option", f"cannot reach the Dask scheduler {scheduler}: {exc}") from None
        return _run(client, corpus, params, priority, bands_per_task, spill, return_signatures)
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        shutil.rmtree(spill, ignore_errors=True)


__all__ = ["cluster_corpus_dask"]

