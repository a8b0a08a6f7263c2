"""The CAL feature store on disk: a folder of shards, each a block of consecutive rows stored as a
float32 CSR matrix that is memory-mapped when read, with one manifest.

Layout (format version 3)::

    meta.json                 the manifest: format, version, counts, normalization, hashing,
                              shard size, build parameters and the list of shards (folder names
                              relative to the store, rows, non-zeros, first row)
    terms.npy  uint64[T]      word hash (or hashing bucket) of each column: columns by document
                              frequency descending, then hash
    df.npy     int64[T]       document frequency of each column
    idf.npy    float32[T]     ln(N / df)
    shard-00000/              rows [0, shard_size)
        indptr.npy   int64[rows + 1]   row offsets within the shard
        indices.npy  int32[nnz]        column ids, ascending within a row
        indices16.npy uint16[nnz]      the same ids for scoring (0xFFFF: read indices.npy)
        data.npy     float32[nnz]      weights; every row has unit L2 norm (empty rows stay empty)
        pids.arrow                     the passage id of each row (Arrow IPC: memory-mapped, read
                                       where needed)
        pid_hash.npy uint64[rows]      a 64-bit hash of every id, ascending, and
        pid_hash_rows.npy int32[rows]  the row of each: ids are found by binary search, without
                                       reading every id or building a hash table of them
        canonical.npy bool[rows]       with near-duplicate classes: is the row a canonical passage
    shard-00001/ ...

Shard folders are named relative to the store, so a store can be moved or renamed (the campaign
builds one in a temporary folder and renames it into place) and read from the same path on every
machine of a cluster. The folder written by qrelkit before shards existed (format version 2: the
arrays of one matrix at the top of the folder, ``classes.npy`` holding each row's canonical row)
is read as a store of one shard.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from qrelkit.errors import InputError
from qrelkit.io.atomic import current_umask
from qrelkit.io.idhash import pid_hashes

FORMAT = "qrelkit-cal-features"
FORMAT_VERSION = 3
SINGLE_FOLDER_VERSION = 2  # one matrix at the top of the folder: read as one shard
WIDE = np.uint16(0xFFFF)  # in indices16: "the column is >= 65535, read the int32 indices"
MANIFEST = "meta.json"


@nb.njit(parallel=True, cache=True)
def _narrow_kernel(indices, out):
    for j in nb.prange(len(indices)):
        c = indices[j]
        out[j] = np.uint16(c) if c < 0xFFFF else np.uint16(0xFFFF)


def narrow(indices: np.ndarray) -> np.ndarray:
    """The 2-byte column ids of the scoring layout (:data:`WIDE` where a column does not fit)."""
    out = np.empty(len(indices), np.uint16)
    if len(indices):
        _narrow_kernel(np.asarray(indices), out)
    return out


# --------------------------------------------------------------------------- passage-id hashes


def duplicate_pid(hashes: np.ndarray, pids_of_rows) -> str | None:
    """The id that occurs more than once (the one whose first occurrence comes first), or None.

    ``hashes``: :func:`pid_hashes` of every row in corpus order; ``pids_of_rows(rows)``: the ids of
    the given rows (ascending), read only when two hashes are equal."""
    if len(hashes) < 2:
        return None
    s = np.sort(hashes)
    same = s[1:][s[1:] == s[:-1]]
    if not len(same):
        return None
    rows = np.flatnonzero(np.isin(hashes, np.unique(same)))
    ids = pa.array(pids_of_rows(rows), pa.string())
    vc = pc.value_counts(ids)  # in order of first occurrence
    dup = vc.filter(pc.greater(vc.field("counts"), 1))
    return dup[0]["values"].as_py() if len(dup) else None


def _ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every ``(i, j)`` with ``lo[i] <= j < hi[i]``, as two arrays."""
    n = hi - lo
    owner = np.repeat(np.arange(len(lo)), n)
    start = np.repeat(lo - (np.cumsum(n) - n), n)
    return owner, start + np.arange(len(owner))


# --------------------------------------------------------------------------- one shard


class ResidentBudget:
    """Bytes of a store's scoring arrays that its shards may still read into memory (see
    :meth:`Shard.hot`): shared by the shards of one :class:`~qrelkit.cal.features.Features`."""

    def __init__(self, nbytes: int) -> None:
        self.left = int(nbytes)
        self._lock = threading.Lock()

    def take(self, nbytes: int) -> bool:
        """Take ``nbytes`` if that many are left."""
        with self._lock:
            if nbytes > self.left:
                return False
            self.left -= nbytes
            return True

    def __getstate__(self) -> dict:  # a lock does not pickle: features loaded by default still do
        return {"left": self.left}

    def __setstate__(self, state: dict) -> None:
        self.left, self._lock = int(state["left"]), threading.Lock()


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            text = f.read().strip()
        return int(text) if text.isdigit() else None
    except (OSError, ValueError):
        return None


def memory_available() -> int | None:
    """Bytes of memory this process may still use: ``MemAvailable`` of /proc/meminfo, or less
    when a cgroup (a container, a pod) limits it (v2 ``memory.max`` - ``memory.current``, v1
    ``memory.limit_in_bytes`` - ``memory.usage_in_bytes``); None where unknown."""
    avail = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    for limit, used in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        cap, cur = _read_int(limit), _read_int(used)
        if cap is not None and cur is not None and cap < (1 << 60):  # "max" or a huge number: no limit
            left = max(cap - cur, 0)
            avail = left if avail is None else min(avail, left)
            break
    return avail


@dataclass
class Shard:
    """Rows ``[first_row, first_row + n_rows)`` of a feature matrix as CSR arrays (memory-mapped
    when read from a store), with the passage ids (read on first use) and, with near-duplicate
    classes, which rows are canonical passages."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    first_row: int = 0
    pid_array: pa.Array | None = None
    canonical: np.ndarray | None = None
    indices16: np.ndarray | None = None
    folder: Path | None = None
    pid_file: str = "pids.arrow"
    pid_hash: np.ndarray | None = None
    pid_hash_rows: np.ndarray | None = None
    budget: ResidentBudget | None = field(default=None, repr=False)

    @property
    def n_rows(self) -> int:
        return len(self.indptr) - 1

    @property
    def end_row(self) -> int:
        return self.first_row + self.n_rows

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1]) if len(self.indptr) else 0

    @property
    def pids(self) -> pa.Array:
        """The passage id of each row (read from the shard's ``pids.parquet`` on first use)."""
        if self.pid_array is None:
            if self.folder is None:
                raise ValueError("a shard without ids")
            pids = read_pids(self.folder / self.pid_file)
            if len(pids) != self.n_rows:
                raise InputError("not-features", f"{self.pid_file} holds {len(pids)} ids for {self.n_rows} rows",
                                 file=str(self.folder))
            self.pid_array = pids
        return self.pid_array

    def hot(self) -> "Shard":
        """Before scoring: read the arrays scoring reads (``indptr``, ``indices16``, ``data``)
        from their mapped files into memory, once, when the store's :class:`ResidentBudget`
        still holds their size (numpy gives large arrays huge pages: a scoring pass is about
        20% faster than over the 4 KB pages of a mapped file). Returns the shard."""
        b = self.budget
        if b is None:
            return self
        self.budget = None  # decided once
        arrays = (self.indptr, self.indices16, self.data)
        mapped = sum(a.nbytes for a in arrays if isinstance(a, np.memmap))
        if mapped and b.take(mapped):
            self.indptr, self.data = np.array(self.indptr), np.array(self.data)
            if self.indices16 is not None:
                self.indices16 = np.array(self.indices16)
        return self

    def compact_indices(self) -> np.ndarray:
        """The scoring layout's column ids (uint16; built on first use when not stored)."""
        if self.indices16 is None:
            self.indices16 = narrow(self.indices)
        return self.indices16

    def index_pids(self, hashes: np.ndarray) -> None:
        """Keep the ids' hashes (:func:`pid_hashes` of the rows) sorted, for :meth:`lookup`."""
        order = np.argsort(hashes, kind="stable")
        self.pid_hash, self.pid_hash_rows = hashes[order], order.astype(np.int32)

    def lookup(self, hashes: np.ndarray, pids: pa.Array) -> np.ndarray:
        """Local row of each id (-1 when not in the shard): the ids' hashes are matched with
        the sorted hashes of the shard (binary search of the smaller side in the larger), then
        the ids at the rows found are compared (equal hashes of different ids are not matches)."""
        out = np.full(len(hashes), -1, np.int64)
        if self.pid_hash is None or not len(hashes) or not self.n_rows:
            return out
        if len(hashes) <= len(self.pid_hash):  # few ids: each searched among the shard's
            owner, pos = _ranges(np.searchsorted(self.pid_hash, hashes, "left"),
                                 np.searchsorted(self.pid_hash, hashes, "right"))
            q, rows = owner, np.asarray(self.pid_hash_rows[pos], np.int64)
        else:  # more ids than rows (a fractional collection): each row searched among the ids
            order = np.argsort(hashes, kind="stable")
            sq = hashes[order]
            h = np.asarray(self.pid_hash)
            owner, pos = _ranges(np.searchsorted(sq, h, "left"), np.searchsorted(sq, h, "right"))
            q, rows = order[pos], np.asarray(self.pid_hash_rows[owner], np.int64)
        if len(q):
            same = pc.equal(self.pids.take(pa.array(rows)), pids.take(pa.array(q))).to_numpy(zero_copy_only=False)
            out[q[same]] = rows[same]
        return out

    def canonical_rows(self) -> np.ndarray | None:
        """Local rows of the canonical passages (None: no classes, every row)."""
        return None if self.canonical is None else np.flatnonzero(np.asarray(self.canonical))


def save_shard(shard: Shard, folder: Path) -> None:
    """Write ``shard``'s arrays, ids and canonical flags into ``folder`` (created)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("indptr", "indices", "data"):
        np.save(folder / f"{name}.npy", np.ascontiguousarray(getattr(shard, name)))
    np.save(folder / "indices16.npy", shard.compact_indices())
    save_shard_ids(shard, folder)


def save_shard_ids(shard: Shard, folder: Path) -> None:
    """The ids of a shard (Arrow IPC), their sorted hashes and the canonical flags."""
    if shard.canonical is not None:
        np.save(folder / "canonical.npy", np.ascontiguousarray(shard.canonical, bool))
    pids = shard.pids
    if shard.pid_hash is None:
        shard.index_pids(pid_hashes(pids))
    np.save(folder / "pid_hash.npy", shard.pid_hash)
    np.save(folder / "pid_hash_rows.npy", shard.pid_hash_rows)
    table = pa.table({"pid": pids})
    with pa.OSFile(str(folder / "pids.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)


def read_pids(path: Path) -> pa.Array:
    """The ids of a shard: memory-mapped from ``pids.arrow`` (or read from a format-2
    ``pids.parquet``)."""
    if path.suffix == ".arrow":
        col = pa.ipc.open_file(pa.memory_map(str(path))).read_all()["pid"]
    else:
        col = pq.read_table(path)["pid"]
    arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return arr if arr.type == pa.string() else arr.cast(pa.string())


def _load(path: Path, mmap: bool) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r" if mmap else None)
    except ValueError:  # an empty array cannot be memory-mapped
        return np.load(path)


def open_shard(store: Path, entry: dict, *, mmap: bool = True, budget: ResidentBudget | None = None) -> Shard:
    """The shard described by a manifest ``entry`` (``dir``, ``rows``, ``nnz``, ``first_row``):
    its arrays memory-mapped (``mmap``); with a ``budget``, the ones scoring reads are read into
    memory at the first scoring (:meth:`Shard.hot`) if the budget holds them."""
    folder = store / entry["dir"]
    if not (folder / "indptr.npy").exists():
        raise InputError("not-features", f"shard {entry['dir']} listed in {MANIFEST} is missing", file=str(folder))
    sh = Shard(indptr=_load(folder / "indptr.npy", mmap), indices=_load(folder / "indices.npy", mmap),
               data=_load(folder / "data.npy", mmap), first_row=int(entry["first_row"]), folder=folder,
               indices16=_load(folder / "indices16.npy", mmap) if (folder / "indices16.npy").exists() else None,
               budget=budget if mmap else None)
    if (folder / "canonical.npy").exists():
        sh.canonical = _load(folder / "canonical.npy", mmap)
    if (folder / "pid_hash.npy").exists():
        sh.pid_hash = _load(folder / "pid_hash.npy", mmap)
        sh.pid_hash_rows = _load(folder / "pid_hash_rows.npy", mmap)
    if not (folder / "pids.arrow").exists():
        sh.pid_file = "pids.parquet"  # format 2
    if sh.n_rows != int(entry["rows"]) or sh.nnz != int(entry["nnz"]) or len(sh.indices) != sh.nnz:
        raise InputError("not-features", f"shard {entry['dir']} does not match {MANIFEST} "
                         f"({sh.n_rows} rows, {sh.nnz} non-zeros)", file=str(folder))
    return sh


# --------------------------------------------------------------------------- the manifest


def read_manifest(store: Path) -> dict:
    """The manifest of a store, checked; a format-2 folder is described as one shard (``dir``
    ``.``, canonical flags from ``classes.npy``)."""
    path = store / MANIFEST
    if not path.exists():
        raise InputError("not-features", "not a CAL features folder (no meta.json); build one with 'qrelkit cal features'",
                         file=str(store))
    try:
        meta = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError("not-features", f"unreadable meta.json: {exc}", file=str(path)) from None
    version = meta.get("version", 0)
    if meta.get("format") != FORMAT or version not in (SINGLE_FOLDER_VERSION, FORMAT_VERSION):
        raise InputError("not-features", f"features format {meta.get('format')} v{version} is not v{FORMAT_VERSION} "
                         f"(or v{SINGLE_FOLDER_VERSION}); rebuild them with 'qrelkit cal features'", file=str(path))
    if version == SINGLE_FOLDER_VERSION:
        meta["shards"] = [{"dir": ".", "rows": meta["rows"], "nnz": meta["nnz"], "first_row": 0}]
        meta.setdefault("hashing", None)
    first = 0
    for e in meta.get("shards", []):
        if int(e["first_row"]) != first:
            raise InputError("not-features", f"shard {e['dir']} starts at row {e['first_row']}, expected {first}",
                             file=str(path))
        first += int(e["rows"])
    if first != int(meta["rows"]):
        raise InputError("not-features", f"the shards hold {first} rows, the manifest says {meta['rows']}", file=str(path))
    return meta


def single_folder_canonical(store: Path, mmap: bool) -> np.ndarray | None:
    """Canonical flags of a format-2 folder (its ``classes.npy``: each row's canonical row)."""
    if not (store / "classes.npy").exists():
        return None
    cls = _load(store / "classes.npy", mmap)
    return np.asarray(cls) == np.arange(len(cls))


def write_manifest(folder: Path, meta: dict) -> None:
    """Write the manifest (sorted keys, no time stamps: the same store gives the same bytes)."""
    (folder / MANIFEST).write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")


def shard_dir(i: int) -> str:
    """The folder name of shard ``i``, relative to the store."""
    return f"shard-{i:05d}"


# --------------------------------------------------------------------------- folders


def temporary_folder(out: Path) -> Path:
    """A fresh temporary folder next to ``out`` (checked: ``out`` must not be something else)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists() and not (out / MANIFEST).exists():
        raise InputError("not-features", "exists and is not a features folder; not overwritten", file=str(out))
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))


def install_folder(tmp: Path, out: Path) -> None:
    """Rename the finished ``tmp`` into place (an existing features folder is replaced)."""
    os.chmod(tmp, 0o777 & ~current_umask())
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old.{os.getpid()}"
        os.replace(out, old)
    os.replace(tmp, out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


__all__ = ["FORMAT", "FORMAT_VERSION", "WIDE", "Shard", "duplicate_pid", "install_folder", "narrow", "open_shard",
           "pid_hashes", "read_manifest", "read_pids", "save_shard", "save_shard_ids", "shard_dir", "single_folder_canonical", "temporary_folder",
           "write_manifest"]
