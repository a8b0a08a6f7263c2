"""CAL features: BMI-style ``(1 + ln tf) * idf`` vectors, L2-normalized, float32 CSR rows over a
corpus (or over a candidate universe of it), built once and stored as a sharded, memory-mappable
store (:mod:`qrelkit.cal.shards`).

Words come from the shared tokenizer (:func:`qrelkit.dedupe.tokenize.word_hashes`, the same words
as near-duplicate detection). The build streams the corpus once, in chunks: each chunk is
tokenized, every distinct 64-bit word hash gets a column id in first-seen order (an
open-addressing table compiled with numba), the document frequencies are counted, and the rows
(column ids and term frequencies) are written out as soon as a shard of ``shard_size`` passages
is complete. Then columns are renumbered by ``df`` descending (ties by hash: the order does not
depend on corpus order), ``idf = ln(N / df)`` (float32, as BMI), and every shard is finished in
place, one at a time: its rows renumbered and sorted by column, weighted and normalized. Memory
is bounded by one shard, the vocabulary and 8 bytes per passage (the passage-id hashes that find
duplicate ids), not by the corpus.

**Vocabulary memory.** The vocabulary holds, per distinct word, its hash table slot (12 bytes at
a load factor between 1/4 and 1/2: 24-48 bytes), its document frequency, hash and idf (20 bytes)
and, while a chunk is counted, a marker and slot per worker block (16 bytes per block and
thread): about 100-200 bytes per distinct word, e.g. 1-2 GB for 10 million distinct words.
``hashing=N`` bounds it: words are folded into ``N`` buckets (``hash mod N``) before they get a
column, so there are at most ``N`` columns, at the price of merging the words of a bucket.

Nothing is refitted later: a query (or any text) is featurized with the stored vocabulary and
idf (:meth:`Features.featurize`; words that are not in the corpus are dropped).

The rows of one shard are independent of the shard size: a store of one shard and a store of
many hold the same rows, the same columns and the same floats.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from qrelkit.cal.params import FeatureParams
from qrelkit.cal.shards import (
    FORMAT, FORMAT_VERSION, WIDE, ResidentBudget, Shard, duplicate_pid, install_folder, memory_available, narrow,
    open_shard, pid_hashes,
    read_manifest, save_shard, save_shard_ids, shard_dir, single_folder_canonical, temporary_folder, write_manifest,
)
from qrelkit.dedupe.tokenize import Normalization, word_hash, word_hashes, words
from qrelkit.errors import InputError
from qrelkit.io.corpus import iter_corpus
from qrelkit.io.sources import CorpusSource
from qrelkit.jit import twins

_EMPTY = np.int32(-1)
DEFAULT_SHARD_SIZE = FeatureParams.declared_default("shard_size")

__all__ = ["DEFAULT_SHARD_SIZE", "FORMAT", "FORMAT_VERSION", "WIDE", "Features", "SparseRows", "Vocabulary", "build_params",
           "canonical_rows", "checked_chunk", "count_rows", "sort_and_weight",
           "build_features", "chunks_of", "load_features", "row_pairs", "save_features"]


# --------------------------------------------------------------------------- numba kernels


@nb.njit(cache=True)
def _assign_columns(hashes, start, keys, vals, n_used, max_used, out):
    """Column id of every hash from ``start`` on, inserting unseen hashes with the next id.
    Stops early (returning the position reached) when ``max_used`` ids are in use, so the
    caller can grow the table. Returns ``(position, n_used)``."""
    mask = np.uint64(len(keys) - 1)
    n = len(hashes)
    i = start
    while i < n:
        h = hashes[i]
        s = h & mask
        while True:
            v = vals[s]
            if v < 0:
                if n_used >= max_used:
                    return i, n_used
                keys[s] = h
                vals[s] = n_used
                out[i] = n_used
                n_used += 1
                break
            if keys[s] == h:
                out[i] = v
                break
            s = (s + np.uint64(1)) & mask
        i += 1
    return i, n_used


@nb.njit(cache=True)
def _lookup_columns(hashes, keys, vals, out):
    """Column id of every hash, -1 when the hash is not in the table."""
    mask = np.uint64(len(keys) - 1)
    for i in range(len(hashes)):
        h = hashes[i]
        s = h & mask
        out[i] = -1
        while True:
            v = vals[s]
            if v < 0:
                break
            if keys[s] == h:
                out[i] = v
                break
            s = (s + np.uint64(1)) & mask


@nb.njit(cache=True)
def _rehash(old_keys, old_vals, keys, vals):
    mask = np.uint64(len(keys) - 1)
    for i in range(len(old_keys)):
        v = old_vals[i]
        if v < 0:
            continue
        h = old_keys[i]
        s = h & mask
        while vals[s] >= 0:
            s = (s + np.uint64(1)) & mask
        keys[s] = h
        vals[s] = v


def _count_terms_py(offsets, cols, n_terms, n_blocks, out_idx, out_tf):
    """Distinct columns of each row with their counts, in first-occurrence order; returns ``k``
    per row. Rows are split in ``n_blocks`` blocks of ``ceil(rows / n_blocks)`` rows, each with
    its own marker array; a block's rows are written one after the other from the block's first
    word offset (``out_*[offsets[lo]:]``), so that a block is one contiguous run to move."""
    n = len(offsets) - 1
    nuniq = np.zeros(n, np.int64)
    step = (n + n_blocks - 1) // n_blocks
    for blk in nb.prange(n_blocks):
        lo = blk * step
        hi = min(n, lo + step)
        if lo >= hi:
            continue
        mark = np.full(n_terms, -1, np.int64)
        slot = np.empty(n_terms, np.int64)
        k = offsets[lo]
        for p in range(lo, hi):
            a = k
            for j in range(offsets[p], offsets[p + 1]):
                c = cols[j]
                if mark[c] != p:
                    mark[c] = p
                    slot[c] = k
                    out_idx[k] = c
                    out_tf[k] = 1.0
                    k += 1
                else:
                    out_tf[slot[c]] += np.float32(1.0)
            nuniq[p] = k - a
    return nuniq


def _weight_rows_py(indptr, indices, data, idf):
    """tf -> (1 + ln tf) * idf, then unit L2 norm per row, in place."""
    n = len(indptr) - 1
    for r in nb.prange(n):
        a = indptr[r]
        b = indptr[r + 1]
        s = 0.0
        for j in range(a, b):
            w = (np.float32(1.0) + np.log(data[j])) * idf[indices[j]]
            data[j] = w
            s += np.float64(w) * np.float64(w)
        if s > 0.0:
            inv = np.float32(1.0 / np.sqrt(s))
            for j in range(a, b):
                data[j] *= inv


def _remap_sort_py(indptr, indices, data, remap):
    """Renumber the columns of every row (``remap[old] = new``; an empty ``remap`` keeps them)
    and sort the row by column (insertion sort: rows are short), in place."""
    n = len(indptr) - 1
    for r in nb.prange(n):
        a = indptr[r]
        b = indptr[r + 1]
        if len(remap):
            for j in range(a, b):
                indices[j] = remap[indices[j]]
        for j in range(a + 1, b):
            c = indices[j]
            v = data[j]
            i = j - 1
            while i >= a and indices[i] > c:
                indices[i + 1] = indices[i]
                data[i + 1] = data[i]
                i -= 1
            indices[i + 1] = c
            data[i + 1] = v


# parallel kernels for corpora, serial twins for a few rows (queries): a parallel region costs
# milliseconds of thread start-up, more when other processes hold the cores
_count_terms, _count_terms_serial = twins(_count_terms_py)
_weight_rows, _weight_rows_serial = twins(_weight_rows_py)
_remap_sort, _remap_sort_serial = twins(_remap_sort_py)
SMALL = 1 << 16  # words: below this, serial kernels


def _hashes(texts: pa.Array, norm: Normalization) -> tuple[np.ndarray, np.ndarray]:
    """:func:`word_hashes`; for a few short texts through the tokenizer's reference path
    (:func:`~qrelkit.dedupe.tokenize.words` + :func:`~qrelkit.dedupe.tokenize.word_hash`, the
    same words and hashes) to avoid the parallel kernels' start-up."""
    if len(texts) > 16:
        return word_hashes(texts, norm)
    offsets = [0]
    out: list[int] = []
    for t in texts.to_pylist():
        out.extend(word_hash(w.encode("utf-8")) for w in words(t or "", norm))
        offsets.append(len(out))
    return np.asarray(offsets, np.int64), np.asarray(out, np.uint64)


# --------------------------------------------------------------------------- vocabulary


class Vocabulary:
    """Word hash -> column id, first-seen order; grows by doubling at load factor 1/2."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        size = 1 << max(4, int(capacity - 1).bit_length())
        self.keys = np.zeros(size, np.uint64)
        self.vals = np.full(size, _EMPTY, np.int32)
        self.n = 0

    @classmethod
    def from_terms(cls, terms: np.ndarray) -> "Vocabulary":
        """The vocabulary of stored ``terms`` (distinct word hashes; column i is ``terms[i]``)."""
        v = cls(2 * len(terms) + 16)
        out = np.empty(len(terms), np.int32)
        _, v.n = _assign_columns(np.ascontiguousarray(terms, np.uint64), 0, v.keys, v.vals, 0, len(terms) + 1, out)
        if not np.array_equal(out, np.arange(len(terms), dtype=np.int32)):
            raise ValueError("terms must be distinct")
        return v

    def _grow(self) -> None:
        keys = np.zeros(2 * len(self.keys), np.uint64)
        vals = np.full(2 * len(self.keys), _EMPTY, np.int32)
        _rehash(self.keys, self.vals, keys, vals)
        self.keys, self.vals = keys, vals

    def assign(self, hashes: np.ndarray) -> np.ndarray:
        """Column id of every hash; unseen hashes get the next ids (first-seen order)."""
        out = np.empty(len(hashes), np.int32)
        pos = 0
        while True:
            pos, self.n = _assign_columns(hashes, pos, self.keys, self.vals, self.n, len(self.keys) // 2, out)
            if pos >= len(hashes):
                return out
            self._grow()

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """Column id of every hash (-1 when not in the vocabulary); nothing is added."""
        out = np.empty(len(hashes), np.int32)
        _lookup_columns(hashes, self.keys, self.vals, out)
        return out

    def terms(self) -> np.ndarray:
        """The word hash of each column, by column id."""
        used = self.vals >= 0
        t = np.empty(self.n, np.uint64)
        t[self.vals[used]] = self.keys[used]
        return t


def row_pairs(offsets: np.ndarray, cols: np.ndarray, n_terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row lengths, column ids, term frequencies) of rows given by word offsets and column ids."""
    tmp_idx = np.empty(len(cols), np.int32)
    tmp_tf = np.empty(len(cols), np.float32)
    small = len(cols) < SMALL
    n_blocks = 1 if small else max(1, min(nb.get_num_threads() * 2, len(offsets) - 1))
    nuniq = (_count_terms_serial if small else _count_terms)(offsets, cols, max(n_terms, 1), n_blocks, tmp_idx, tmp_tf)
    starts = np.zeros(len(nuniq) + 1, np.int64)
    np.cumsum(nuniq, out=starts[1:])
    idx = np.empty(int(starts[-1]), np.int32)
    tf = np.empty(int(starts[-1]), np.float32)
    step = (len(nuniq) + n_blocks - 1) // n_blocks
    for lo in range(0, len(nuniq), max(step, 1)):  # each block is one run: from its first word offset
        hi = min(len(nuniq), lo + step)
        a, b, m = int(offsets[lo]), int(starts[lo]), int(starts[hi] - starts[lo])
        idx[b: b + m] = tmp_idx[a: a + m]
        tf[b: b + m] = tmp_tf[a: a + m]
    return nuniq, idx, tf



# --------------------------------------------------------------------------- the feature matrix


@dataclass
class Features:
    """The feature matrix of a corpus (rows: passages in corpus order; columns: words), held as
    shards of consecutive rows (:class:`~qrelkit.cal.shards.Shard`).

    Use :func:`build_features` or :func:`load_features` to get one.
    """

    shards: list[Shard]
    terms: np.ndarray
    df: np.ndarray
    idf: np.ndarray
    norm: Normalization = field(default_factory=Normalization)
    hashing: int | None = None
    shard_size: int | None = None
    params: dict = field(default_factory=dict)
    path: Path | None = None
    timings: dict = field(default_factory=dict, repr=False)
    _vocab: Vocabulary | None = field(default=None, repr=False)
    _pids: pa.Array | None = field(default=None, repr=False)
    _row_of: dict | None = field(default=None, repr=False)

    @property
    def n_rows(self) -> int:
        return sum(s.n_rows for s in self.shards)

    @property
    def n_terms(self) -> int:
        return len(self.terms)

    @property
    def nnz(self) -> int:
        return sum(s.nnz for s in self.shards)

    @property
    def starts(self) -> np.ndarray:
        """First row of every shard, then the number of rows (int64[shards + 1])."""
        return np.array([s.first_row for s in self.shards] + [self.n_rows], np.int64)

    def shard_of(self, rows: np.ndarray) -> np.ndarray:
        """The shard holding each row."""
        return np.searchsorted(self.starts[1:], np.asarray(rows, np.int64), side="right")

    def _joined(self, name: str) -> np.ndarray:
        parts = [getattr(s, name) if name != "indices16" else s.compact_indices() for s in self.shards]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    @property
    def indptr(self) -> np.ndarray:
        """Row offsets of the whole matrix (a copy when there are several shards)."""
        if len(self.shards) == 1:
            return self.shards[0].indptr
        offs = np.cumsum([0] + [s.nnz for s in self.shards])
        return np.concatenate([np.asarray(s.indptr[:-1]) + o for s, o in zip(self.shards, offs)] + [offs[-1:]])

    @property
    def indices(self) -> np.ndarray:
        """Column ids of the whole matrix (a copy when there are several shards)."""
        return self._joined("indices")

    @property
    def data(self) -> np.ndarray:
        """Weights of the whole matrix (a copy when there are several shards)."""
        return self._joined("data")

    def compact_indices(self) -> np.ndarray:
        """The scoring layout's column ids: uint16, :data:`WIDE` where the column does not fit
        (the int32 ``indices`` then hold it)."""
        return self._joined("indices16")

    @property
    def pids(self) -> pa.Array:
        """The passage id of every row (the shards' ids, read on first use)."""
        if self._pids is None:
            parts = [s.pids for s in self.shards]
            self._pids = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
        return self._pids

    @property
    def canonical(self) -> np.ndarray | None:
        """Whether each row is a canonical passage (built with near-duplicate classes), else None."""
        if any(s.canonical is None for s in self.shards) or not self.shards:
            return None
        return self._joined("canonical")

    @property
    def matrix(self):
        """The whole matrix as ``scipy.sparse.csr_matrix`` (may copy: scipy wants one index type)."""
        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=(self.n_rows, self.n_terms))

    def rows_of(self, pids: Iterable[str] | pa.Array) -> np.ndarray:
        """Row of each pid (int64; -1 when it is not in the matrix).

        Shards with an id index (:meth:`~qrelkit.cal.shards.Shard.lookup`) are searched by the
        ids' hashes, reading only the ids at the rows found. Without one, a few pids (a CAL
        iteration asks for hundreds, many times) are looked up in a pid -> row dict built on
        first use (``pyarrow.compute.index_in`` hashes every pid of the matrix on each call:
        about 150 ms at 1M passages); many are matched with ``index_in``."""
        indexed = bool(self.shards) and all(s.pid_hash is not None for s in self.shards)
        if not indexed and not isinstance(pids, (pa.Array, pa.ChunkedArray)):
            pids = list(pids)
            if len(pids) <= self.n_rows // 64:
                if self._row_of is None:
                    all_pids = self.pids.to_pylist()  # the first row of a pid wins, as with index_in
                    self._row_of = dict(zip(reversed(all_pids), range(len(all_pids) - 1, -1, -1)))
                get = self._row_of.get
                return np.fromiter((get(str(p), -1) for p in pids), np.int64, len(pids))
        arr = pids if isinstance(pids, (pa.Array, pa.ChunkedArray)) else pa.array(list(pids), pa.string())
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if len(arr) == 0:
            return np.zeros(0, np.int64)
        arr = arr.cast(pa.string())
        if not indexed:
            idx = pc.index_in(arr, value_set=self.pids)
            return pc.fill_null(idx, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        hashes, out = pid_hashes(arr), np.full(len(arr), -1, np.int64)
        for s in self.shards:
            todo = np.flatnonzero(out < 0)
            if not len(todo):
                break
            local = s.lookup(hashes[todo], arr.take(pa.array(todo)))
            hit = local >= 0
            out[todo[hit]] = local[hit] + s.first_row
        return out

    def pid_list(self, rows: np.ndarray) -> list[str]:
        """The ids of the given rows (shard by shard: only those ids are read)."""
        rows = np.asarray(rows, np.int64)
        if len(self.shards) == 1:
            return self.shards[0].pids.take(pa.array(rows)).to_pylist()
        out: list = [None] * len(rows)
        sid = self.shard_of(rows)
        for k in np.unique(sid):
            sel = np.flatnonzero(sid == k)
            s = self.shards[int(k)]
            for i, p in zip(sel.tolist(), s.pids.take(pa.array(rows[sel] - s.first_row)).to_pylist()):
                out[i] = p
        return out

    def _vocabulary(self) -> Vocabulary:
        if self._vocab is None:
            self._vocab = Vocabulary.from_terms(np.asarray(self.terms))
        return self._vocab

    def featurize(self, texts: Iterable[str] | pa.Array) -> "SparseRows":
        """Vectors of new texts with the stored vocabulary and idf (unknown words dropped)."""
        arr = texts if isinstance(texts, (pa.Array, pa.ChunkedArray)) else pa.array(list(texts), pa.string())
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        offsets, hashes = _hashes(arr.cast(pa.string()), self.norm)
        cols = self._vocabulary().lookup(_fold(hashes, self.hashing))
        keep = cols >= 0
        if not keep.all():  # drop unknown words, fix the offsets
            row = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
            cols = cols[keep]
            offsets = np.zeros(len(offsets), np.int64)
            np.cumsum(np.bincount(row[keep], minlength=len(offsets) - 1), out=offsets[1:])
        nuniq, idx, tf = row_pairs(offsets, cols, self.n_terms)
        indptr = np.zeros(len(nuniq) + 1, np.int64)
        np.cumsum(nuniq, out=indptr[1:])
        (_remap_sort_serial if len(idx) < SMALL else _remap_sort)(indptr, idx, tf, np.zeros(0, np.int32))
        (_weight_rows_serial if len(idx) < SMALL else _weight_rows)(indptr, idx, tf, np.asarray(self.idf, np.float32))
        return SparseRows(indptr, idx, tf)

    def rows(self, rows: np.ndarray) -> "SparseRows":
        """The given rows (in that order) as a small CSR block."""
        rows = np.asarray(rows, np.int64)
        if len(self.shards) == 1:
            s = self.shards[0]
            return SparseRows(*_gather_rows(s.indptr, s.compact_indices(), s.indices, s.data, rows))
        sid = self.shard_of(rows)
        blocks, where = [], np.empty(len(rows), np.int64)
        done = 0
        for k in np.unique(sid):
            sel = np.flatnonzero(sid == k)
            s = self.shards[int(k)]
            blocks.append(SparseRows(*_gather_rows(s.indptr, s.compact_indices(), s.indices, s.data,
                                                   rows[sel] - s.first_row)))
            where[sel] = done + np.arange(len(sel))
            done += len(sel)
        if not blocks:
            return SparseRows(np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32))
        st = blocks[0]
        for b in blocks[1:]:
            st = st.stack(b)
        return SparseRows(*_gather_rows(st.indptr, st.indices, st.indices, st.data, where))


def _fold(hashes: np.ndarray, hashing: int | None) -> np.ndarray:
    """Word hashes folded into ``hashing`` buckets (unchanged without hashing)."""
    return hashes if not hashing else np.remainder(hashes, np.uint64(hashing))


@dataclass
class SparseRows:
    """A few rows of CSR data (row offsets, column ids, weights)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray

    @property
    def n_rows(self) -> int:
        return len(self.indptr) - 1

    def stack(self, other: "SparseRows") -> "SparseRows":
        return SparseRows(np.concatenate([self.indptr, other.indptr[1:] + self.indptr[-1]]),
                          np.concatenate([self.indices, other.indices]), np.concatenate([self.data, other.data]))


@nb.njit(cache=True)
def _gather_rows(indptr, ids, indices, data, rows):
    """The given rows as CSR arrays. Column ids are read from ``ids`` — the 2-byte ids that
    scoring keeps in the page cache — and from the int32 ``indices`` only where ``ids`` holds
    0xFFFF (a column too wide for 2 bytes); give ``indices`` twice for int32 ids alone."""
    n = len(rows)
    out_ptr = np.zeros(n + 1, np.int64)
    for i in range(n):
        r = rows[i]
        out_ptr[i + 1] = out_ptr[i] + indptr[r + 1] - indptr[r]
    out_idx = np.empty(out_ptr[n], np.int32)
    out_dat = np.empty(out_ptr[n], np.float32)
    for i in range(n):
        r = rows[i]
        a = indptr[r]
        k = out_ptr[i]
        for j in range(indptr[r + 1] - a):
            c = np.int32(ids[a + j])
            out_idx[k + j] = c if c != 0xFFFF else indices[a + j]
            out_dat[k + j] = data[a + j]
    return out_ptr, out_idx, out_dat


@nb.njit(cache=True)
def _add_counts(counts, idx):
    for j in range(len(idx)):
        counts[idx[j]] += 1


# --------------------------------------------------------------------------- building


def chunks_of(corpus) -> Callable[[], Iterator[pa.Table]]:
    """A function that streams ``corpus`` (a corpus file, a table, or an iterable of tables) as
    chunk tables, each time it is called."""
    if isinstance(corpus, (str, os.PathLike, CorpusSource)):
        return lambda: iter_corpus(corpus)
    if isinstance(corpus, pa.Table):
        return lambda: iter([corpus])
    return lambda: iter(corpus)


class _ShardBuilder:
    """The first pass's rows, cut into shards of ``shard_size`` passages: each full shard is
    written to ``folder`` (raw: first-seen column ids and term frequencies, finished later in
    place) or kept in memory (``folder`` None)."""

    def __init__(self, folder: Path | None, shard_size: int, noncanonical: pa.Array | None) -> None:
        self.folder, self.shard_size, self.noncanonical = folder, shard_size, noncanonical
        self.shards: list[Shard] = []
        self.entries: list[dict] = []  # rows, nnz, first row of each shard
        self.hashes: list[np.ndarray] = []
        self._parts: list[tuple] = []
        self._rows = 0
        self.n_rows = 0

    @property
    def room(self) -> int:
        return self.shard_size - self._rows

    def add(self, nuniq: np.ndarray, idx: np.ndarray, tf: np.ndarray, pids: pa.Array) -> None:
        self._parts.append((nuniq, idx, tf, pids))
        self._rows += len(nuniq)
        if self._rows >= self.shard_size:
            self.flush()

    def flush(self) -> None:
        if not self._rows:
            return
        lens, idxs, tfs, pid_parts = zip(*self._parts)
        self._parts = []
        indptr = np.zeros(self._rows + 1, np.int64)
        np.cumsum(np.concatenate(lens), out=indptr[1:])
        if self.folder is None:  # in memory: one array each
            indices, data = np.concatenate(idxs), np.concatenate(tfs)
        else:  # on disk: the pieces are written one after the other, never joined in memory
            indices, data = idxs, tfs
        del idxs, tfs
        pids = pa.concat_arrays([p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p
                                 for p in pid_parts]).cast(pa.string())
        canonical = canonical_rows(pids, self.noncanonical)
        self.hashes.append(pid_hashes(pids))
        sh = Shard(indptr=indptr, indices=indices, data=data, first_row=self.n_rows, pid_array=pids, canonical=canonical)
        sh.index_pids(self.hashes[-1])
        self.entries.append({"rows": self._rows, "nnz": int(indptr[-1]), "first_row": self.n_rows})
        if self.folder is not None:
            sh.folder = self.folder / shard_dir(len(self.shards))
            save_raw_shard(sh)
        self.shards.append(sh)
        self.n_rows += self._rows
        self._rows = 0

    def pids_of_rows(self, rows: np.ndarray) -> list[str]:
        """Ids of the given rows (ascending), read back from the shards."""
        starts = np.array([e["first_row"] for e in self.entries] + [self.n_rows])
        sid = np.searchsorted(starts[1:], rows, side="right")
        out: list[str] = []
        for k in np.unique(sid):
            s = self.shards[int(k)]
            out += s.pids.take(pa.array(rows[sid == k] - s.first_row)).to_pylist()
        return out


def save_raw_shard(sh: Shard) -> None:
    """Write a shard of the first pass (raw rows; no indices16 yet) and drop its arrays from
    memory (its ids are read back only to name a duplicate id)."""
    sh.folder.mkdir(parents=True)
    np.save(sh.folder / "indptr.npy", sh.indptr)
    for name, dtype in (("indices", np.int32), ("data", np.float32)):
        pieces = getattr(sh, name)  # the first pass's pieces, in order: the bytes np.save writes
        header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
                  "shape": (sum(len(x) for x in pieces),)}
        with open(sh.folder / f"{name}.npy", "wb") as fh:
            np.lib.format.write_array_header_1_0(fh, header)
            for x in pieces:
                fh.write(memoryview(np.ascontiguousarray(x, dtype)))
        setattr(sh, name, None)
    save_shard_ids(sh, sh.folder)
    # mapped, not read: the process keeps no page of the shard
    sh.indptr, sh.indices, sh.data = np.load(sh.folder / "indptr.npy", mmap_mode="r"), None, None
    sh.pid_array, sh.canonical, sh.pid_hash, sh.pid_hash_rows = None, None, None, None


def _first_pass(corpus, builder: _ShardBuilder, want: pa.Array | None, norm: Normalization, hashing: int | None,
                progress) -> tuple[Vocabulary, np.ndarray]:
    """Stream the corpus: tokenize, assign columns, count document frequencies, cut shards."""
    vocab = Vocabulary()
    df = np.zeros(1 << 16, np.int64)
    for chunk in chunks_of(corpus)():
        n_in = chunk.num_rows
        chunk = checked_chunk(chunk, want)
        start = 0
        while start < chunk.num_rows:
            piece = chunk.slice(start, min(builder.room, chunk.num_rows - start))
            start += piece.num_rows
            nuniq, idx, tf, df = count_rows(piece["text"], vocab, df, norm, hashing)
            builder.add(nuniq, idx, tf, piece["pid"])
        if progress is not None and n_in:
            progress(n_in)
    builder.flush()
    return vocab, df[: vocab.n]


def checked_chunk(chunk: pa.Table, want: pa.Array | None) -> pa.Table:
    """A corpus chunk checked for its columns, restricted to the ids ``want`` (None: all)."""
    if "pid" not in chunk.column_names or "text" not in chunk.column_names:
        raise InputError("missing-column", "corpus chunks need pid and text columns")
    return chunk if want is None else chunk.filter(pc.is_in(chunk["pid"], value_set=want))


def count_rows(texts, vocab: Vocabulary, df: np.ndarray, norm: Normalization, hashing: int | None) -> tuple:
    """The raw rows of ``texts`` (:func:`row_pairs`: lengths, first-seen column ids of ``vocab``,
    term frequencies), their words added to ``vocab`` and counted in ``df`` (grown as needed).
    Returns ``(lengths, ids, tf, df)``."""
    offsets, hashes = word_hashes(texts, norm)
    cols = vocab.assign(_fold(hashes, hashing))
    del hashes
    nuniq, idx, tf = row_pairs(offsets, cols, vocab.n)
    del cols
    if len(df) < vocab.n:
        df = np.concatenate([df, np.zeros(max(vocab.n, 2 * len(df)) - len(df), np.int64)])
    _add_counts(df, idx)
    return nuniq, idx, tf, df


def sort_and_weight(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, remap: np.ndarray,
                    idf: np.ndarray) -> None:
    """Renumber the columns of raw rows by ``remap`` (empty: already final), sort each row's
    columns, weight it by ``idf`` and L2-normalize it, in place (serial kernels for a small shard)."""
    small = len(indices) < SMALL
    (_remap_sort_serial if small else _remap_sort)(indptr, indices, data, remap)
    (_weight_rows_serial if small else _weight_rows)(indptr, indices, data, idf)


def canonical_rows(pids: pa.Array, noncanonical: pa.Array | None) -> np.ndarray | None:
    """Whether each of ``pids`` is canonical (not in ``noncanonical``), or None without classes."""
    if noncanonical is None:
        return None
    return ~pc.is_in(pids, value_set=noncanonical).to_numpy(zero_copy_only=False)


def _finish_shard(sh: Shard, remap: np.ndarray, idf: np.ndarray) -> None:
    """Renumber the columns of a raw shard, sort its rows, weight and normalize them (in place:
    memory-mapped files for a shard on disk), and add the 2-byte column ids."""
    if sh.folder is not None:
        sh.indptr = np.load(sh.folder / "indptr.npy")
        nnz = sh.nnz
        sh.indices = np.load(sh.folder / "indices.npy", mmap_mode="r+") if nnz else np.zeros(0, np.int32)
        sh.data = np.load(sh.folder / "data.npy", mmap_mode="r+") if nnz else np.zeros(0, np.float32)
    sort_and_weight(sh.indptr, sh.indices, sh.data, remap, idf)
    if sh.folder is None:
        sh.compact_indices()
        return
    np.save(sh.folder / "indices16.npy", narrow(sh.indices))
    for a in (sh.indices, sh.data):
        if isinstance(a, np.memmap):
            a.flush()
    # unmapped: the process keeps no page of the shard, memory stays about one shard
    sh.indptr, sh.indices, sh.data = np.load(sh.folder / "indptr.npy", mmap_mode="r"), None, None


def _noncanonical(classes: pa.Table) -> pa.Array:
    """Passages whose class id is another passage (the first row of a docid decides, as
    :func:`qrelkit.io.classes.map_to_classes` reads it): the rows that are not canonical."""
    docid = classes["docid"].combine_chunks().cast(pa.string())
    cid = classes["class_id"].combine_chunks().cast(pa.string())
    member = pc.fill_null(pc.not_equal(cid, docid), True).to_numpy(zero_copy_only=False)
    if pc.count_distinct(docid).as_py() != len(docid):  # a docid twice: its first row decides
        first = pc.index_in(docid, value_set=docid).to_numpy(zero_copy_only=False)
        member &= first == np.arange(len(docid))
    return docid.filter(pa.array(member))


def _universe(universe) -> pa.Array | None:
    if universe is None:
        return None
    want = universe if isinstance(universe, (pa.Array, pa.ChunkedArray)) else pa.array(list(universe), pa.string())
    if isinstance(want, pa.ChunkedArray):
        want = want.combine_chunks()
    return want.cast(pa.string())


def build_features(
    corpus: str | os.PathLike | pa.Table | Iterable[pa.Table],
    output: str | os.PathLike | None = None,
    *,
    norm: Normalization = Normalization(),
    universe: Iterable[str] | pa.Array | None = None,
    classes: pa.Table | None = None,
    progress: Callable[[int], None] | None = None,
    params: dict | None = None,
    shard_size: int | None = None,
    hashing: int | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
) -> Features:
    """Build the features of ``corpus`` in one streamed pass (then each shard is finished in place),
    or on Dask with ``workers`` or ``scheduler`` (the same folder, byte for byte).

    Parameters
    ----------
    corpus:
        A corpus file (JSONL/TSV/Parquet, see :mod:`qrelkit.io.corpus`), a table with ``pid`` and
        ``text`` columns, or an iterable of such tables (chunks).
    output:
        Folder to store the features in (see :mod:`qrelkit.cal.shards`; written to a temporary
        folder renamed into place); the result is then read back memory-mapped. ``None`` keeps
        them in memory.
    norm:
        Tokenizer normalization (lower-casing, HTML stripping, digits).
    universe:
        Only these passage ids become rows (a candidate universe); ``idf`` is then that of the
        universe. ``None``: every passage.
    classes:
        Near-duplicate classes (``docid -> class_id``): stores whether each row is a canonical
        passage, so that the CAL loop can skip non-canonical members.
    progress:
        Called with the number of passages of each chunk done.
    shard_size:
        Passages per shard (``None``: the declared default, ``[cal] shard_size``). Memory while
        building is about one shard's rows; the rows do not depend on it.
    hashing:
        Fold words into this many buckets (``hash mod N``): at most N columns, bounded vocabulary
        memory; ``None`` keeps every distinct word. Both are checked against their keys
        (:class:`~qrelkit.cal.params.FeatureParams`).

    workers, scheduler:
        Build on a Dask ``LocalCluster`` of ``workers`` processes, or on the workers of the
        scheduler at ``scheduler`` (``tcp://host:8786``), not both:
        :func:`qrelkit.cal.features_dask.build_features_dask` (``output`` required, on storage the
        workers share).

    Duplicate passage ids are an error (rule ``duplicate-id``).
    """
    if workers is not None or scheduler is not None:
        from qrelkit.cal.distributed import check_dask_choice  # lazy: it imports this module
        from qrelkit.cal.features_dask import build_features_dask  # lazy: it imports this module, and dask.distributed

        check_dask_choice(workers, scheduler)
        if output is None:
            raise InputError("bad-option", "the Dask build writes a features folder: give an output")

        return build_features_dask(corpus, output, scheduler=scheduler, n_workers=workers or 2, norm=norm,
                                   universe=universe, classes=classes, progress=progress, params=params,
                                   shard_size=shard_size, hashing=hashing)
    t0 = time.perf_counter()
    fp = FeatureParams(hashing=hashing) if shard_size is None else FeatureParams(shard_size=shard_size, hashing=hashing)
    shard_size, hashing = fp.shard_size, fp.hashing
    want = _universe(universe)
    out = Path(output) if output is not None else None
    tmp = temporary_folder(out) if out is not None else None
    try:
        builder = _ShardBuilder(tmp, shard_size, _noncanonical(classes) if classes is not None else None)
        vocab, df = _first_pass(corpus, builder, want, norm, hashing, progress)
        t_read = time.perf_counter() - t0
        terms, df, idf, remap = _columns(vocab.terms(), df, builder.n_rows)
        for sh in builder.shards:
            _finish_shard(sh, remap, idf)
        dup = duplicate_pid(np.concatenate(builder.hashes) if builder.hashes else np.zeros(0, np.uint64),
                            builder.pids_of_rows)
        if dup is not None:
            raise InputError("duplicate-id", f"passage id {dup} occurs more than once in the corpus")
        feats = Features(shards=builder.shards, terms=terms, df=df, idf=idf, norm=norm, hashing=hashing,
                         shard_size=shard_size)
        feats.params = build_params(params, norm, want, classes is not None)
        if tmp is not None:
            _write_store(feats, tmp, builder.entries)
            install_folder(tmp, out)
            tmp = None
            feats = load_features(out, mmap=True)  # mapped: the build's memory stays its own
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    feats.timings = {"read_tokenize_count": t_read, "total": time.perf_counter() - t0}
    return feats


def build_params(params: dict | None, norm: Normalization, want: pa.Array | None, classes: bool) -> dict:
    """The build parameters a store records (the caller's ``params`` and how it was built)."""
    return {**(params or {}), "normalization": norm.as_dict(), "universe": None if want is None else len(want),
            "classes": classes, "weighting": "(1 + ln tf) * ln(N / df), L2-normalized rows"}


def _columns(terms: np.ndarray, df: np.ndarray, n: int):
    """Columns by document frequency (descending), then word hash: frequent words get small ids
    (the weights they gather stay in cache). Returns (terms, df, idf, remap old -> new)."""
    order = np.lexsort((terms, -df))
    remap = np.empty(len(terms), np.int32)
    remap[order] = np.arange(len(terms), dtype=np.int32)
    terms, df = terms[order], df[order]
    idf = np.log(np.float64(max(n, 1)) / np.maximum(df, 1)).astype(np.float32)
    return terms, df, idf, remap


# --------------------------------------------------------------------------- storage


def _manifest(feats: Features, entries: list[dict] | None = None) -> dict:
    """The manifest of ``feats`` (``entries``: the shards' rows and non-zeros when their arrays
    are no longer in memory)."""
    if entries is None:
        entries = [{"rows": s.n_rows, "nnz": s.nnz, "first_row": s.first_row} for s in feats.shards]
    return {
        "format": FORMAT, "version": FORMAT_VERSION, "rows": sum(e["rows"] for e in entries), "terms": feats.n_terms,
        "nnz": sum(e["nnz"] for e in entries), "normalization": feats.norm.as_dict(), "hashing": feats.hashing,
        "shard_size": feats.shard_size, "canonical": bool(feats.params.get("classes", feats.canonical is not None)),
        "params": feats.params, "shards": [{"dir": shard_dir(i), **e} for i, e in enumerate(entries)],
    }


def _write_store(feats: Features, folder: Path, entries: list[dict] | None = None) -> None:
    """The vocabulary arrays and the manifest (the shards are already in ``folder``)."""
    for name in ("terms", "df", "idf"):
        np.save(folder / f"{name}.npy", np.ascontiguousarray(getattr(feats, name)))
    write_manifest(folder, _manifest(feats, entries))


def save_features(feats: Features, output: str | os.PathLike) -> Path:
    """Write ``feats`` into the folder ``output`` (atomically: a temporary folder renamed into
    place; an existing folder of features is replaced)."""
    out = Path(output)
    tmp = temporary_folder(out)
    try:
        for i, s in enumerate(feats.shards):
            save_shard(s, tmp / shard_dir(i))
        _write_store(feats, tmp)
        install_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    feats.path = out
    return out


#: what :func:`load_features` lets a store's shards read into memory by default where the memory
#: available is unknown (1 GiB: about 3.5M passages of 55 words)
RESIDENT_BYTES = 1 << 30


def resident_default() -> int:
    """The default :class:`~qrelkit.cal.shards.ResidentBudget` of a loaded store: a quarter of
    the memory this process may still use (:func:`~qrelkit.cal.shards.memory_available`: a
    container's limit counts), or :data:`RESIDENT_BYTES` where that is unknown."""
    avail = memory_available()
    return RESIDENT_BYTES if avail is None else avail // 4


def load_features(path: str | os.PathLike, *, mmap: bool | None = None, resident: int | None = None) -> Features:
    """Open stored features (passage ids are read on first use).

    ``mmap``: True maps every array (memory bounded by the page cache, which processes share);
    False reads every array into memory now; None (the default) maps them, and each shard reads
    the arrays scoring reads (row pointers, 2-byte column ids, weights) into memory when it is
    first scored, while their sizes fit ``resident`` bytes in all (default
    :func:`resident_default`): numpy gives large arrays huge pages, which a scoring pass reads
    about 20% faster than the 4 KB pages of a mapped file (30 vs 38 ms at 1M,
    docs/benchmarks.md); shards never scored (a Dask client's, other workers') stay mapped. A
    folder written before stores were sharded (format version 2) is read as one shard."""
    p = Path(path)
    meta = read_manifest(p)
    budget = None if mmap is not None else ResidentBudget(resident_default() if resident is None else resident)
    shards = [open_shard(p, e, mmap=mmap is not False, budget=budget) for e in meta["shards"]]
    if meta["version"] != FORMAT_VERSION and shards:
        shards[0].canonical = single_folder_canonical(p, mmap is not False)
    feats = Features(shards=shards, terms=np.asarray(np.load(p / "terms.npy")), df=np.load(p / "df.npy"),
                     idf=np.asarray(np.load(p / "idf.npy")), norm=Normalization(**meta["normalization"]),
                     hashing=meta.get("hashing"), shard_size=meta.get("shard_size"), params=meta.get("params", {}),
                     path=p)
    if feats.n_terms != int(meta["terms"]):
        raise InputError("not-features", f"terms.npy holds {feats.n_terms} columns, meta.json says {meta['terms']}",
                         file=str(p))
    return feats
