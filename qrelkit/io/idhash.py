"""64-bit hashes of ids (FNV-1a of their UTF-8 bytes, mixed by splitmix64's finalizer), the same
on every machine and run: 8 bytes per id to find duplicates among millions of ids without holding
them (the corpus check at ``campaign init``, the CAL feature store's id index). Equal hashes are
only candidates: the ids themselves decide."""

from __future__ import annotations

import numba as nb
import numpy as np
import pyarrow as pa

__all__ = ["pid_hashes"]


@nb.njit(cache=True)
def _fnv_rows(offsets, data, out):
    for i in range(len(out)):
        h = np.uint64(0xCBF29CE484222325)
        for j in range(offsets[i], offsets[i + 1]):
            h = (h ^ np.uint64(data[j])) * np.uint64(0x100000001B3)
        h ^= h >> np.uint64(30)  # splitmix64's finalizer: every bit depends on every byte
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        out[i] = h ^ (h >> np.uint64(31))


def pid_hashes(pids: pa.Array) -> np.ndarray:
    """A 64-bit hash of every passage id (FNV-1a of its UTF-8 bytes, mixed): 8 bytes per passage
    to find duplicate ids across shards without holding every id. Equal hashes are only
    candidates: the ids themselves decide."""
    arr = pids.cast(pa.large_string())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    out = np.empty(len(arr), np.uint64)
    if len(arr):
        _, off_buf, data_buf = arr.buffers()
        offsets = np.frombuffer(off_buf, np.int64)[arr.offset: arr.offset + len(arr) + 1]
        data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
        _fnv_rows(offsets, data, out)
    return out
