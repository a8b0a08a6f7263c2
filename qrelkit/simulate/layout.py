"""How :func:`qrelkit.simulate.simulate_campaign` names passages and lays out its corpus.

``flat`` (the default): one ``corpus.jsonl`` with ids ``p0000123`` and docids ``d000045``,
zero-padded so that string order equals corpus order.

``msmarco-v2``: the layout of MS MARCO v2 (``msmarco_v2_passage/``): the corpus in ``shards``
gzip JSONL files ``msmarco_passage_00.gz``, ``msmarco_passage_01.gz``, ... (a document's passages
never straddle two shards), records ``{"pid", "passage", "spans", "docid"}`` in that order, where

* the pid is ``msmarco_passage_NN_<offset>``: ``NN`` the shard and ``offset`` the byte offset of
  the record's line in the *uncompressed* shard (as in the real collection, where a pid is its
  own random access), so ``gzip.open(shard).seek(offset)`` lands on that pid's line;
* the docid is ``msmarco_doc_NN_<offset>``, the offset a document of the (not written) document
  collection would have in its shard (its passages' text plus a 130-byte header, one after the
  other), several passages per document;
* ``spans`` is ``"(start,end)"``, the passage's characters in its document's body (the passages
  of a document one after the other, one space apart).

The offsets are computed before any line is written (every line's length is known from its
tokens' surface lengths; a pid's own digits count in its length, solved by a fixed point per
shard), and checked against the lines rendered. The gzip members carry no name and no time
(deterministic bytes). Ids of the runs, qrels and near-duplicate truth are the same strings.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.io.atomic import atomic_path

__all__ = ["LAYOUTS", "FlatNames", "MsmarcoV2Names", "string_bytes"]

LAYOUTS = ("flat", "msmarco-v2")
V2_FOLDER = "msmarco_v2_passage"
_DOC_HEADER = 130  # bytes of a document record besides its passages' text (url, title, ...)
_LINE_FIXED = len('{"pid": "", "passage": "", "spans": "", "docid": ""}\n')


def _digits(x: np.ndarray) -> np.ndarray:
    """Decimal digits of non-negative integers."""
    x = np.asarray(x, np.int64)
    d = np.ones(len(x), np.int64)
    for k in range(1, 19):
        d += x >= 10**k
    return d


class FlatNames:
    """``p0000123`` / ``d000045`` ids, zero-padded (string order = corpus order)."""

    folder = None

    def __init__(self, n: int, n_docs: int) -> None:
        self.pid_width = max(7, len(str(n - 1)))
        self.doc_width = max(6, len(str(n_docs - 1)))

    def key(self, slots: np.ndarray) -> np.ndarray:
        """A number per passage slot whose order is the pid strings' order."""
        return slots

    def pids(self, slots: np.ndarray) -> list[str]:
        w = self.pid_width
        return [f"p{p:0{w}d}" for p in np.asarray(slots).tolist()]


class MsmarcoV2Names:
    """MS MARCO v2 pids (shard and byte offset) and docids, from every passage's text length.

    ``doc_sizes``: passages per document (corpus order); ``text_len``: characters (= bytes, the
    text is ASCII) of every passage's text; ``shards``: the number of files."""

    folder = V2_FOLDER

    def __init__(self, doc_sizes: np.ndarray, text_len: np.ndarray, shards: int) -> None:
        n, n_docs = len(text_len), len(doc_sizes)
        doc_end = np.cumsum(doc_sizes)
        cut = np.searchsorted(doc_end, np.arange(1, shards) * n / shards)  # first doc ending at or past k*n/S
        self.bounds = np.unique(np.concatenate([[0], doc_end[np.minimum(cut, n_docs - 1)], [n]]))
        if len(self.bounds) != shards + 1:
            raise ValueError("shards must leave every shard at least one document")
        self.width = max(2, len(str(shards - 1)))
        doc_of = np.repeat(np.arange(n_docs, dtype=np.int64), doc_sizes)
        doc_start = doc_end - doc_sizes
        self.shard = (np.searchsorted(self.bounds, np.arange(n), side="right") - 1).astype(np.int32)
        # a passage's span in its document's body, and its document's offset in its shard
        step = text_len.astype(np.int64) + 1
        cum = np.cumsum(step) - step
        self.span_start = cum - cum[doc_start][doc_of]
        doc_len = np.add.reduceat(step, doc_start) - 1 + _DOC_HEADER
        doc_shard = self.shard[doc_start]
        doc_off = np.cumsum(doc_len) - doc_len
        first_doc = np.searchsorted(doc_shard, doc_shard)  # first document of each document's shard
        self.doc_off = (doc_off - doc_off[first_doc])[doc_of]
        self.text_len = text_len.astype(np.int64)
        prefix = len(f"msmarco_passage_{0:0{self.width}d}_")
        base = (_LINE_FIXED + prefix + self.text_len + 3 + _digits(self.span_start)
                + _digits(self.span_start + self.text_len) + len(f"msmarco_doc_{0:0{self.width}d}_")
                + _digits(self.doc_off))
        self.offset = np.zeros(n, np.int64)
        for a, z in zip(self.bounds[:-1], self.bounds[1:]):
            self.offset[a:z] = _offsets(base[a:z])
        d = _digits(self.offset)
        self.line_len = base + d
        scaled = self.offset * (10 ** (int(d.max()) - d))  # decimal strings' order: scaled value, then length
        order = np.lexsort((d, scaled, self.shard))
        self._rank = np.empty(n, np.int64)
        self._rank[order] = np.arange(n)

    def key(self, slots: np.ndarray) -> np.ndarray:
        return self._rank[slots]

    def pids(self, slots: np.ndarray) -> list[str]:
        w, sh, off = self.width, self.shard, self.offset
        return [f"msmarco_passage_{sh[p]:0{w}d}_{off[p]}" for p in np.asarray(slots).tolist()]

    def shard_names(self) -> list[str]:
        return [f"msmarco_passage_{k:0{self.width}d}.gz" for k in range(len(self.bounds) - 1)]

    def lines(self, a: int, z: int, text: pa.Array) -> pa.Array:
        """The records of passages ``a..z`` (one shard's) with their ``text``, checked against
        the offsets their pids claim."""
        w = self.width

        def num(x: np.ndarray) -> pa.Array:
            return pc.cast(pa.array(x), pa.string())

        k = int(self.shard[a])
        s = self.span_start[a:z]
        spans = pc.binary_join_element_wise("(", num(s), ",", num(s + self.text_len[a:z]), ")", "")
        line = pc.binary_join_element_wise(
            f'{{"pid": "msmarco_passage_{k:0{w}d}_', num(self.offset[a:z]), '", "passage": "', text,
            '", "spans": "', spans, f'", "docid": "msmarco_doc_{k:0{w}d}_', num(self.doc_off[a:z]), '"}\n', "")
        got = np.diff(_string_offsets(line))
        if not np.array_equal(got, self.line_len[a:z]):
            raise AssertionError("msmarco-v2 layout: a line's length differs from the one its offset assumed")
        return line

    def write(self, folder: Path, texts: Callable[[int, int], Iterator[tuple[int, int, pa.Array]]],
              report: Callable[[int], None]) -> None:
        """Every shard, gzip-compressed (no name, no time), its lines from ``texts(a, z)``, which
        yields ``(start, end, text)`` chunks of the passages ``a..z``."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, a, z in zip(self.shard_names(), self.bounds[:-1].tolist(), self.bounds[1:].tolist()):
            with atomic_path(folder / name) as tmp, open(tmp, "wb") as raw, \
                    gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=1, mtime=0) as fh:
                for b, e, text in texts(a, z):
                    fh.write(string_bytes(self.lines(b, e, text)))
                    report(e)
        keep = set(self.shard_names())
        for stale in sorted(folder.glob("msmarco_passage_*.gz")):
            if stale.name not in keep:
                stale.unlink()


def _string_offsets(strings: pa.Array) -> np.ndarray:
    """The ``len + 1`` offsets of a pyarrow string array's values in its data buffer."""
    return np.frombuffer(strings.buffers()[1], np.int32)[strings.offset : strings.offset + len(strings) + 1]


def string_bytes(strings: pa.Array) -> memoryview:
    """A pyarrow string array's values one after the other, without a copy (what a JSONL writer writes)."""
    off = _string_offsets(strings)
    return memoryview(strings.buffers()[2])[int(off[0]) : int(off[-1])]


def _offsets(base: np.ndarray) -> np.ndarray:
    """Byte offsets of lines of ``base[i] + digits(offset[i])`` bytes, one after the other from 0
    (a fixed point: the digits only grow, so this ends after a few rounds)."""
    d = np.ones(len(base), np.int64)
    while True:
        length = base + d
        off = np.cumsum(length) - length
        nd = _digits(off)
        if np.array_equal(nd, d):
            return off
        d = nd
