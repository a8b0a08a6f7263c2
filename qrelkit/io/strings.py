"""String columns as numbers: a 64-bit key of every value of an Arrow string array, computed with
numpy over the array's own buffers (no Python string is made, no dictionary is built).

Hashing a column of document ids with Arrow's ``dictionary_encode`` builds a dictionary of every
distinct value, which costs nearly as much as parsing the column; a run reader only needs to know
whether a (topic, document) pair occurs twice. :func:`string_keys` answers that for a fraction of
the cost: equal strings have equal keys, and the few rows whose keys are equal are then compared
as strings (:func:`qrelkit.io.runs.read_runs` does), so the answer is exact.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["string_keys", "mix_keys", "all_equal", "offsets_and_bytes", "rows_with_a_repeated_key"]

_M = np.uint64(0x9E3779B97F4A7C15)  # odd constants: multiplying by one is a bijection of uint64
_M2 = np.uint64(0xC2B2AE3D27D4EB4F)
_M3 = np.uint64(0x165667B19E3779F9)


def offsets_and_bytes(arr: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets as int64, data bytes as uint8) of a string or binary array, its bytes not copied (a
    chunked array's chunks combined; a null's data is empty). Value ``i`` is
    ``data[offsets[i]:offsets[i + 1]]``."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.chunk(0) if arr.num_chunks == 1 else arr.combine_chunks()
    n = len(arr)
    _, offsets, data = arr.buffers()[:3]
    if offsets is None:
        return np.zeros(n + 1, np.int64), np.zeros(0, np.uint8)
    large = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    otype = np.dtype(np.int64 if large else np.int32)
    off = np.frombuffer(offsets, otype, count=n + 1, offset=arr.offset * otype.itemsize).astype(np.int64)
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return off, raw


def string_keys(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A uint64 key of each value of a string array, from its length, its first 8 bytes and its
    last 8 bytes: equal values have equal keys, values of at most 16 bytes have distinct keys
    (but for a 2^-64 chance), longer ones may share a key when those bytes agree. Nulls key as the
    empty string.

    >>> k = string_keys(pa.array(["d1", "d2", "d1", "msmarco_passage_01_0000052", "msmarco_passage_02_0000052"]))
    >>> bool(k[0] == k[2]), bool(k[0] == k[1]), bool(k[3] == k[4])
    (True, False, True)
    """
    off, raw = offsets_and_bytes(arr)
    n = len(off) - 1
    if n == 0:
        return np.zeros(0, np.uint64)
    lens = np.diff(off)
    first, last = _edge_words(raw, off)
    if int(lens.min()) < 8:  # keep a short value's own bytes only (little-endian: the low ones)
        shift = ((8 - np.minimum(lens, 8)) * 8).astype(np.uint64)
        first <<= shift
        first >>= shift
    last[lens <= 8] = 0  # the first word holds all of it
    # multiply-xorshift rounds, each a bijection of uint64: for a fixed first word, distinct last
    # words (or lengths) give distinct keys; the last multiplication stirs every bit into the top
    # ones, so that a caller may keep the top bits only
    key = first  # in place, through one scratch array (each temporary would be a fresh allocation)
    tmp = np.empty_like(key)
    key *= _M
    key ^= np.right_shift(key, np.uint64(32), out=tmp)
    key ^= last
    key *= _M2
    key ^= np.right_shift(key, np.uint64(29), out=tmp)
    key ^= lens.view(np.uint64)  # lengths are >= 0: the same bits
    key *= _M3
    return key


def _edge_words(raw: np.ndarray, off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the 8 bytes from each value's start, the 8 bytes up to its end) as little-endian uint64,
    read in place from the data bytes (a uint64 view with a stride of one byte loads 8 bytes at
    any offset). A value starting in the data's last 7 bytes has its first load moved inside and
    shifted back, so its own bytes come first (the bytes beyond a short value are the caller's to
    clear); a value ending in the first 7 bytes is at most 7 bytes long, and its last word, read
    from the start, is one the caller does not use."""
    size = len(raw)
    if size < 8:  # too short for one load: the same from a zero-padded copy
        raw = np.concatenate([raw, np.zeros(8 - size, np.uint8)])
    words = np.ndarray(shape=(len(raw) - 7,), dtype="<u8", buffer=raw, strides=(1,))
    starts, ends = off[:-1], off[1:] - 8
    if starts[-1] <= len(raw) - 8:  # the usual case (offsets ascend): every load inside
        first = words[starts]
    else:
        inside = np.minimum(starts, len(raw) - 8)
        first = words[inside] >> ((starts - inside) * 8).astype(np.uint64)
    last = words[np.maximum(ends, 0)]  # read from the start for a value ending in the first 7 bytes: unused
    return first, last


def mix_keys(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One uint64 key of the pairs ``(a[i], b[i])`` of two integer arrays (a topic code and a
    :func:`string_keys` key, say): equal pairs have equal keys."""
    h = a.astype(np.uint64) * _M2
    h ^= b.astype(np.uint64)
    h *= _M
    h ^= h >> np.uint64(29)
    return h


def all_equal(arr: pa.Array | pa.ChunkedArray, value: str) -> bool:
    """Whether every value of a string array (without nulls) is ``value``: its bytes compared at
    once with ``value`` repeated, no value compared on its own.

    >>> all_equal(pa.array(["bm25", "bm25"]), "bm25"), all_equal(pa.array(["bm25", "bm2"]), "bm25")
    (True, False)
    """
    if arr.null_count:
        return False
    off, raw = offsets_and_bytes(arr)
    raw_value = value.encode("utf-8")
    n, width = len(off) - 1, len(raw_value)
    if int(off[-1]) - int(off[0]) != n * width or not (np.diff(off) == width).all():
        return False
    return raw[int(off[0]):int(off[-1])].tobytes() == raw_value * n


def rows_with_a_repeated_key(keys: np.ndarray) -> np.ndarray:
    """The rows whose key occurs more than once (ascending), from one sort: with
    :func:`string_keys`, every row of a repeated value and the rare rows whose values share a key;
    the caller compares these few as strings.

    >>> rows_with_a_repeated_key(np.array([5, 3, 5, 9, 3, 1], np.uint64)).tolist()
    [0, 1, 2, 4]
    """
    ordered = np.sort(keys)
    again = ordered[1:][ordered[1:] == ordered[:-1]]
    return np.flatnonzero(np.isin(keys, again)) if len(again) else np.zeros(0, np.int64)
