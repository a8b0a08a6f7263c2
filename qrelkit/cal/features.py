"""CAL features: BMI-style ``(1 + ln tf) * idf`` vectors, L2-normalized, one float32 CSR matrix
over a corpus (or over a candidate universe of it), built once and stored memory-mappable.

Words come from the shared tokenizer (:func:`qrelkit.dedupe.tokenize.word_hashes`, the same words
as near-duplicate detection). The vocabulary is built in the same single pass over the corpus:
every distinct 64-bit word hash gets an id in first-seen order, through an open-addressing table
compiled with numba. Then ``df`` is counted from the matrix, columns are renumbered by ``df``
descending (ties by hash: the order does not depend on corpus order), rows are sorted by column,
``idf = ln(N / df)`` (float32, as BMI), and every row is weighted and normalized in place.

Nothing is refitted later: a query (or any text) is featurized with the stored vocabulary and
idf (:meth:`Features.featurize`; words that are not in the corpus are dropped).

On disk (a folder, written to a temporary folder and renamed into place)::

    indptr.npy   int64[n_rows + 1]     row offsets
    indices.npy  int32[nnz]            column ids, ascending within a row
    indices16.npy uint16[nnz]          the same ids for scoring, 2 bytes each (65535: the column is
                                       65535 or more, read indices.npy); columns are numbered by
                                       df, so nearly every non-zero fits
    data.npy     float32[nnz]          weights (rows have unit L2 norm; empty rows stay empty)
    terms.npy    uint64[n_terms]       the word hash of each column (columns by df descending,
                                       then hash)
    df.npy       int64[n_terms]        document frequency of each column
    idf.npy      float32[n_terms]
    pids.parquet                       pid (string) of each row, in corpus order, with the
                                       build parameters in its qrelkit metadata
    classes.npy  int64[n_rows]         optional: row of each passage's canonical passage
                                       (itself when canonical; -1 when the canonical is absent)
    meta.json                          format version, counts, normalization, parameters

:func:`load_features` opens the arrays with ``numpy.load(mmap_mode="r")``: several processes
share one copy in the page cache, and opening is instant.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp

from qrelkit.dedupe.tokenize import Normalization, word_hash, word_hashes, words
from qrelkit.errors import InputError
from qrelkit.io.atomic import current_umask
from qrelkit.io.classes import map_to_classes
from qrelkit.io.corpus import iter_corpus
from qrelkit.io.tables import write_table
from qrelkit.jit import twins

FORMAT = "qrelkit-cal-features"
FORMAT_VERSION = 2
_EMPTY = np.int32(-1)


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
    """Distinct columns of each row with their counts, in first-occurrence order, written at the
    row's word offset (``out_*[offsets[p]:offsets[p] + k]``); returns ``k`` per row. Rows are
    split in ``n_blocks`` blocks, each with its own marker array."""
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
        for p in range(lo, hi):
            a = offsets[p]
            k = a
            for j in range(a, offsets[p + 1]):
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


def _compact_py(offsets, starts, src_idx, src_tf, out_idx, out_tf):
    n = len(offsets) - 1
    for p in nb.prange(n):
        a = offsets[p]
        k = starts[p]
        for j in range(starts[p + 1] - k):
            out_idx[k + j] = src_idx[a + j]
            out_tf[k + j] = src_tf[a + j]


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
_compact, _compact_serial = twins(_compact_py)
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


WIDE = np.uint16(0xFFFF)  # in indices16: "the column is >= 65535, read the int32 indices"


@nb.njit(parallel=True, cache=True)
def _narrow_kernel(indices, out):
    for j in nb.prange(len(indices)):
        c = indices[j]
        out[j] = np.uint16(c) if c < 0xFFFF else np.uint16(0xFFFF)


def _narrow(indices: np.ndarray) -> np.ndarray:
    out = np.empty(len(indices), np.uint16)
    if len(indices):
        _narrow_kernel(np.asarray(indices), out)
    return out


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
    (_compact_serial if small else _compact)(offsets, starts, tmp_idx, tmp_tf, idx, tf)
    return nuniq, idx, tf


# --------------------------------------------------------------------------- the feature matrix


@dataclass
class Features:
    """The feature matrix of a corpus (rows: passages in corpus order; columns: words).

    Use :func:`build_features` or :func:`load_features` to get one.
    """

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    pids: pa.Array
    terms: np.ndarray
    df: np.ndarray
    idf: np.ndarray
    norm: Normalization = field(default_factory=Normalization)
    classes: np.ndarray | None = None
    indices16: np.ndarray | None = None
    params: dict = field(default_factory=dict)
    path: Path | None = None
    timings: dict = field(default_factory=dict, repr=False)
    _vocab: Vocabulary | None = field(default=None, repr=False)
    _row_of: dict | None = field(default=None, repr=False)

    @property
    def n_rows(self) -> int:
        return len(self.indptr) - 1

    @property
    def n_terms(self) -> int:
        return len(self.terms)

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    def compact_indices(self) -> np.ndarray:
        """The scoring layout's column ids: uint16, :data:`WIDE` where the column does not fit
        (the int32 ``indices`` then hold it). Built on first use when not stored."""
        if self.indices16 is None:
            self.indices16 = _narrow(self.indices)
        return self.indices16

    @property
    def matrix(self):
        """The whole matrix as ``scipy.sparse.csr_matrix`` (may copy: scipy wants one index type)."""
        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=(self.n_rows, self.n_terms))

    def rows_of(self, pids: Iterable[str] | pa.Array) -> np.ndarray:
        """Row of each pid (int64; -1 when it is not in the matrix).

        A few pids (a CAL iteration asks for hundreds, many times) are looked up in a pid -> row
        dict built on first use (``pyarrow.compute.index_in`` hashes every pid of the matrix on
        each call: about 150 ms at 1M passages, at a load average of 2); many are matched with
        ``index_in``."""
        if not isinstance(pids, (pa.Array, pa.ChunkedArray)):
            pids = list(pids)
            if len(pids) <= self.n_rows // 64:
                if self._row_of is None:
                    all_pids = self.pids.to_pylist()  # the first row of a pid wins, as with index_in
                    self._row_of = dict(zip(reversed(all_pids), range(len(all_pids) - 1, -1, -1)))
                get = self._row_of.get
                return np.fromiter((get(str(p), -1) for p in pids), np.int64, len(pids))
        arr = pids if isinstance(pids, (pa.Array, pa.ChunkedArray)) else pa.array(pids, pa.string())
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        if len(arr) == 0:
            return np.zeros(0, np.int64)
        idx = pc.index_in(arr.cast(pa.string()), value_set=self.pids)
        return pc.fill_null(idx, -1).to_numpy(zero_copy_only=False).astype(np.int64)

    def pid_list(self, rows: np.ndarray) -> list[str]:
        return self.pids.take(pa.array(np.asarray(rows, np.int64))).to_pylist()

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
        cols = self._vocabulary().lookup(hashes)
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
        indptr, idx, dat = _gather_rows(self.indptr, self.indices, self.data, rows)
        return SparseRows(indptr, idx, dat)


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
def _gather_rows(indptr, indices, data, rows):
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
            out_idx[k + j] = indices[a + j]
            out_dat[k + j] = data[a + j]
    return out_ptr, out_idx, out_dat


# --------------------------------------------------------------------------- building


def chunks_of(corpus) -> Callable[[], Iterator[pa.Table]]:
    """A function that streams ``corpus`` (a corpus file, a table, or an iterable of tables) as
    chunk tables, each time it is called."""
    if isinstance(corpus, (str, os.PathLike)):
        return lambda: iter_corpus(corpus)
    if isinstance(corpus, pa.Table):
        return lambda: iter([corpus])
    return lambda: iter(corpus)


def build_features(
    corpus: str | os.PathLike | pa.Table | Iterable[pa.Table],
    output: str | os.PathLike | None = None,
    *,
    norm: Normalization = Normalization(),
    universe: Iterable[str] | pa.Array | None = None,
    classes: pa.Table | None = None,
    progress: Callable[[int], None] | None = None,
    params: dict | None = None,
) -> Features:
    """Build the feature matrix of ``corpus`` in one streamed pass.

    Parameters
    ----------
    corpus:
        A corpus file (JSONL/TSV/Parquet, see :mod:`qrelkit.io.corpus`), a table with ``pid`` and
        ``text`` columns, or an iterable of such tables (chunks).
    output:
        Folder to store the features in (see the module docs); ``None`` keeps them in memory.
    norm:
        Tokenizer normalization (lower-casing, HTML stripping, digits).
    universe:
        Only these passage ids become rows (a candidate universe); ``idf`` is then that of the
        universe. ``None``: every passage.
    classes:
        Near-duplicate classes (``docid -> class_id``): stores each row's canonical row, so that
        the CAL loop can skip non-canonical members.
    progress:
        Called with the number of passages of each chunk done.

    Duplicate passage ids are an error (rule ``duplicate-pid``).
    """
    t0 = time.perf_counter()
    want = None
    if universe is not None:
        want = universe if isinstance(universe, (pa.Array, pa.ChunkedArray)) else pa.array(list(universe), pa.string())
        if isinstance(want, pa.ChunkedArray):
            want = want.combine_chunks()
        want = want.cast(pa.string())
    vocab = Vocabulary()
    lens, idxs, tfs, pid_parts = [], [], [], []
    for chunk in chunks_of(corpus)():
        if "pid" not in chunk.column_names or "text" not in chunk.column_names:
            raise InputError("missing-column", "corpus chunks need pid and text columns")
        if want is not None:
            chunk = chunk.filter(pc.is_in(chunk["pid"], value_set=want))
        if chunk.num_rows == 0:
            continue
        offsets, hashes = word_hashes(chunk["text"], norm)
        cols = vocab.assign(hashes)
        del hashes
        nuniq, idx, tf = row_pairs(offsets, cols, vocab.n)
        del cols
        lens.append(nuniq)
        idxs.append(idx)
        tfs.append(tf)
        p = chunk["pid"]
        pid_parts.append(p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p)
        if progress is not None:
            progress(chunk.num_rows)
    t_read = time.perf_counter() - t0
    n = int(sum(len(x) for x in lens))
    indptr = np.zeros(n + 1, np.int64)
    if n:
        np.cumsum(np.concatenate(lens), out=indptr[1:])
    indices = np.concatenate(idxs) if idxs else np.zeros(0, np.int32)
    del idxs
    data = np.concatenate(tfs) if tfs else np.zeros(0, np.float32)
    del tfs
    pids = pa.concat_arrays(pid_parts).cast(pa.string()) if pid_parts else pa.array([], pa.string())
    if len(pids) and pc.count_distinct(pids).as_py() != len(pids):
        vc = pc.value_counts(pids)
        dup = vc.filter(pc.greater(vc.field("counts"), 1))[0]["values"].as_py()
        raise InputError("duplicate-pid", f"passage id {dup} occurs more than once in the corpus")
    terms = vocab.terms()
    df = np.bincount(indices, minlength=len(terms)).astype(np.int64)
    # columns by document frequency (descending), then word hash: frequent words get small ids
    # (the weights they gather stay in cache); every row sorted by column
    order = np.lexsort((terms, -df))
    remap = np.empty(len(terms), np.int32)
    remap[order] = np.arange(len(terms), dtype=np.int32)
    terms, df = terms[order], df[order]
    small = len(indices) < SMALL
    (_remap_sort_serial if small else _remap_sort)(indptr, indices, data, remap)
    idf = np.log(np.float64(max(n, 1)) / np.maximum(df, 1)).astype(np.float32)
    (_weight_rows_serial if small else _weight_rows)(indptr, indices, data, idf)
    cls_rows = _class_rows(pids, classes) if classes is not None else None
    feats = Features(indptr=indptr, indices=indices, data=data, pids=pids, terms=terms, df=df, idf=idf,
                     norm=norm, classes=cls_rows)
    feats.params = {
        **(params or {}),
        "normalization": norm.as_dict(),
        "universe": None if want is None else len(want),
        "classes": classes is not None,
        "weighting": "(1 + ln tf) * ln(N / df), L2-normalized rows",
    }
    feats.timings = {"read_tokenize_count": t_read, "total": time.perf_counter() - t0}
    if output is not None:
        save_features(feats, output)
    return feats


def _class_rows(pids: pa.Array, classes: pa.Table) -> np.ndarray:
    """Row of the canonical passage of every row (itself when canonical or unclassed; -1 when the
    canonical passage is not in the matrix)."""
    canon = map_to_classes(pids, classes)
    idx = pc.index_in(canon, value_set=pids)
    return pc.fill_null(idx, -1).to_numpy(zero_copy_only=False).astype(np.int64)


# --------------------------------------------------------------------------- storage


def save_features(feats: Features, output: str | os.PathLike) -> Path:
    """Write ``feats`` into the folder ``output`` (atomically: a temporary folder renamed into
    place; an existing folder of features is replaced)."""
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists() and not (out / "meta.json").exists():
        raise InputError("not-features", "exists and is not a features folder; not overwritten", file=str(out))
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        for name in ("indptr", "indices", "data", "terms", "df", "idf"):
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(getattr(feats, name)))
        np.save(tmp / "indices16.npy", feats.compact_indices())
        if feats.classes is not None:
            np.save(tmp / "classes.npy", np.ascontiguousarray(feats.classes))
        meta = {
            "format": FORMAT, "version": FORMAT_VERSION, "rows": feats.n_rows, "terms": feats.n_terms,
            "nnz": feats.nnz, "normalization": feats.norm.as_dict(), "params": feats.params,
        }
        write_table(pa.table({"pid": feats.pids}), tmp / "pids.parquet", kind="cal-features-pids", params=meta)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
        os.chmod(tmp, 0o777 & ~current_umask())
        old = None
        if out.exists():
            old = out.parent / f".{out.name}.old.{os.getpid()}"
            os.replace(out, old)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    feats.path = out
    return out


def load_features(path: str | os.PathLike, *, mmap: bool = True) -> Features:
    """Open stored features (memory-mapped by default)."""
    p = Path(path)
    meta_path = p / "meta.json"
    if not meta_path.exists():
        raise InputError("not-features", "not a CAL features folder (no meta.json); build one with 'qrelkit cal features'",
                         file=str(p))
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError("not-features", f"unreadable meta.json: {exc}", file=str(meta_path)) from None
    if meta.get("format") != FORMAT or int(meta.get("version", 0)) != FORMAT_VERSION:
        raise InputError("not-features", f"features format {meta.get('format')} v{meta.get('version')} is not "
                         f"v{FORMAT_VERSION}; rebuild them with 'qrelkit cal features'", file=str(meta_path))
    mode = "r" if mmap else None

    def arr(name: str) -> np.ndarray:
        return np.load(p / f"{name}.npy", mmap_mode=mode)

    pids = pq.read_table(p / "pids.parquet")["pid"].combine_chunks()
    feats = Features(
        indptr=arr("indptr"), indices=arr("indices"), data=arr("data"), pids=pids, terms=np.asarray(arr("terms")),
        df=arr("df"), idf=np.asarray(arr("idf")), norm=Normalization(**meta["normalization"]),
        classes=arr("classes") if (p / "classes.npy").exists() else None,
        indices16=arr("indices16") if (p / "indices16.npy").exists() else None, params=meta.get("params", {}), path=p,
    )
    if len(feats.pids) != feats.n_rows:
        raise InputError("not-features", "pids.parquet and indptr.npy disagree on the number of rows", file=str(p))
    return feats
