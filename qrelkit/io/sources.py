"""Input sources: where a corpus comes from, read the same way whatever it is.

:func:`open_corpus` turns what a user gives (``--corpus``, a campaign's recorded input) into a
:class:`CorpusSource`:

* a **file** (:class:`FileCorpus`): JSONL, TSV (MS MARCO v1's ``collection.tsv``) or Parquet,
  optionally gzipped (:mod:`qrelkit.io.corpus`);
* a **folder of shards** (:class:`ShardCorpus`): every file in it but hidden ones, in the byte order
  of their names, each a corpus file (so MS MARCO v2's ``msmarco_passage_00.gz`` ...
  ``msmarco_passage_69.gz``, gzip JSONL without a suffix, read as JSON lines); the corpus is the
  shards one after the other;
* **``irds:<dataset-id>``**: a dataset of ir_datasets (:mod:`qrelkit.io.irds`, the ``irds`` extra).

Every source streams :data:`~qrelkit.io.corpus.CORPUS_SCHEMA` chunks in corpus order, counts,
checks every rule of the readers (and ids used twice anywhere in the source), fingerprints, and
looks passages up by id — by its own random access where it has one: MS MARCO v2 passage ids name
their shard and the byte offset of their line (``msmarco_passage_03_1234``), so a folder of plain
(not gzipped) shards reads a passage with one seek; ir_datasets has its docs store.

Topics and qrels have their sources too (:func:`open_topics`, :func:`open_qrels`): a file, or an
``irds:`` dataset's queries and qrels, read as the file readers read them and fingerprinted for a
campaign's records.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa

from qrelkit.errors import InputError, quoted
from qrelkit.io.params import SourcesParams
from qrelkit.io.paths import IRDS, is_irds  # noqa: F401 - where they were defined first
from qrelkit.io.text import is_gzip, sha256_file
from qrelkit.io.corpus import (
    CorpusCheck, IdIndex, blocks, check_corpus_file, corpus_format, count_passages_file, find_texts,
    iter_corpus_file, jsonl_chunk, open_bytes, passages_upper_bound_file,
)

#: a passage id that names its shard and the byte offset of its line: ``<shard name>_<offset>``
_OFFSET_ID = re.compile(r"^(?P<shard>.+)_(?P<offset>[0-9]+)$")


class CorpusSource:
    """A corpus, wherever it comes from (see the module documentation)."""

    kind = "file"
    random_access = False

    def __init__(self, spec: str) -> None:
        self.spec = spec

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"

    def __str__(self) -> str:  # what messages name: the path, or irds:<id>
        return self.spec

    def chunks(self, *, chunk_rows: int = 200_000, chunk_bytes: int = 32 << 20) -> Iterator[pa.Table]:
        """The passages as :data:`~qrelkit.io.corpus.CORPUS_SCHEMA` tables, in corpus order."""
        raise NotImplementedError

    def parts(self) -> list["CorpusSource"]:
        """Parts read independently of each other, in corpus order (a folder: its shards)."""
        return [self]

    def count(self) -> int:
        """The number of passages."""
        raise NotImplementedError

    def upper_bound(self) -> int:
        """At least the number of passages, cheaply."""
        return self.count()

    def check(self, progress: Callable[..., Any] | None = None, *, chunk_bytes: int = 32 << 20) -> CorpusCheck:
        """Every rule of the readers and ids used twice anywhere, in one pass, and the fingerprint;
        the first defect raised as an :class:`InputError` naming the file and line."""
        raise NotImplementedError

    def fingerprint(self) -> str:
        """The hex digest a campaign records for this source (see :meth:`check`)."""
        raise NotImplementedError

    def lookup(self, pids: set[str]) -> dict[str, tuple[str, str | None]]:
        """``pid -> (text, docid)`` of the wanted passages the source has (the first of an id wins)."""
        return find_texts(self.chunks(), pids)

    def files(self) -> list[Path]:
        """The files the source reads (none for a dataset of ir_datasets)."""
        return []


class FileCorpus(CorpusSource):
    """One corpus file (:mod:`qrelkit.io.corpus`)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path).resolve()
        super().__init__(str(self.path))

    def chunks(self, *, chunk_rows: int = 200_000, chunk_bytes: int = 32 << 20) -> Iterator[pa.Table]:
        return iter_corpus_file(self.path, chunk_bytes=chunk_bytes, chunk_rows=chunk_rows)

    def count(self) -> int:
        return count_passages_file(self.path)

    def upper_bound(self) -> int:
        return passages_upper_bound_file(self.path)

    def check(self, progress: Callable[..., Any] | None = None, *, chunk_bytes: int = 32 << 20) -> CorpusCheck:
        c, _ = check_corpus_file(self.path, progress, chunk_bytes=chunk_bytes)
        return c

    def fingerprint(self) -> str:
        return sha256_file(self.path)

    def files(self) -> list[Path]:
        return [self.path]


def shard_files(folder: Path) -> list[Path]:
    """The shards of a corpus folder: its files but hidden ones, by the byte order of their names;
    a sub-folder is ``unknown-format`` (a folder of shards holds files only), no shard at all
    ``empty-folder``."""
    try:
        entries = sorted((e for e in os.scandir(folder) if not e.name.startswith(".")), key=lambda e: e.name.encode())
    except OSError as exc:
        raise InputError("unreadable", exc.strerror or str(exc), file=str(folder)) from None
    for e in entries:
        if e.is_dir():
            raise InputError("unknown-format", "a corpus folder holds shard files only, not folders", file=e.path)
    if not entries:
        raise InputError("empty-folder", "the corpus folder holds no shard", file=str(folder))
    return [Path(e.path) for e in entries]


class ShardCorpus(CorpusSource):
    """A folder of corpus files, the corpus being its shards one after the other (see
    :func:`shard_files`)."""

    kind = "shards"

    def __init__(self, folder: str | os.PathLike, shards: list[Path] | None = None) -> None:
        self.folder = Path(folder).resolve()
        super().__init__(str(self.folder))
        # ``shards``: these files of the folder, in this order (a campaign's recorded shards: what
        # else the folder holds since is the input check's business, not a lookup's)
        self.shards = [FileCorpus(p) for p in (shard_files(self.folder) if shards is None else shards)]
        self.formats = [corpus_format(s.path) for s in self.shards]  # unknown-format names its shard now
        self._offsets: bool | None = None
        self._plain: bool | None = None

    def chunks(self, *, chunk_rows: int = 200_000, chunk_bytes: int = 32 << 20) -> Iterator[pa.Table]:
        for s in self.shards:
            yield from s.chunks(chunk_rows=chunk_rows, chunk_bytes=chunk_bytes)

    def parts(self) -> list[CorpusSource]:
        return list(self.shards)

    def count(self) -> int:
        return sum(s.count() for s in self.shards)

    def upper_bound(self) -> int:
        return sum(s.upper_bound() for s in self.shards)

    def files(self) -> list[Path]:
        return [s.path for s in self.shards]

    def check(self, progress: Callable[..., Any] | None = None, *, chunk_bytes: int = 32 << 20) -> CorpusCheck:
        checks, indexes = [], []
        for s in self.shards:
            c, ids = check_corpus_file(s.path, progress, chunk_bytes=chunk_bytes, duplicates=False)
            checks.append(c)
            indexes.append(ids)
        dup = duplicate_across(indexes)
        if dup is not None:
            raise dup
        return CorpusCheck(path=self.folder, format="+".join(sorted(set(c.format for c in checks))),
                           passages=sum(c.passages for c in checks), documents=any(c.documents for c in checks),
                           size=sum(c.size for c in checks), mtime_ns=max(c.mtime_ns for c in checks),
                           sha256=shards_digest([(c.path.name, c.sha256) for c in checks]), kind=self.kind,
                           spec=self.spec, parts=tuple(checks))

    def fingerprint(self) -> str:
        with ThreadPoolExecutor(min(len(self.shards), os.cpu_count() or 1, 8)) as pool:  # hashlib lets go of the GIL
            digests = list(pool.map(FileCorpus.fingerprint, self.shards))
        return shards_digest([(s.path.name, d) for s, d in zip(self.shards, digests)])

    @property
    def offset_named(self) -> bool:
        """JSON-lines shards whose first passage is ``<shard name>_0`` (the name without ``.gz``):
        MS MARCO v2's layout, where an id names its shard and the byte offset of its line."""
        if self._offsets is None:
            self._offsets = all(f == "jsonl" and _first_id(s.path) == f"{s.path.name.removesuffix('.gz')}_0"
                                for s, f in zip(self.shards, self.formats))
        return self._offsets

    @property
    def random_access(self) -> bool:  # type: ignore[override]
        """MS MARCO v2's layout unzipped (:attr:`offset_named`, no shard gzipped): an id is read
        with one seek."""
        if self._plain is None:
            self._plain = self.offset_named and not any(is_gzip(s.path) for s in self.shards)
        return self._plain

    def lookup(self, pids: set[str]) -> dict[str, tuple[str, str | None]]:
        """In MS MARCO v2's layout (:attr:`offset_named`) an id is read in the shard it names (at
        its offset when plain) or is not in the corpus: no other shard is read for it; else
        the shards an id could name are read first, then every shard for the rest."""
        by_name = {s.path.name.lower().removesuffix(".gz"): s for s in self.shards}
        mine: dict[str, set[str]] = {}
        anywhere: set[str] = set()
        for pid in pids:
            m = _OFFSET_ID.match(pid)
            shard = by_name.get(m["shard"].lower()) if m else None
            (mine.setdefault(shard.spec, set()).add(pid) if shard is not None else anywhere.add(pid))
        found: dict[str, tuple[str, str | None]] = {}
        # a plain shard: a seek per id; a gzipped one: its stream read up to the last offset, only those
        # lines parsed (shards on threads: zlib lets go of the GIL); an id not at its offset is looked for
        # everywhere (unless the layout says it is not in the corpus)
        named = [(s, mine[s.spec]) for s in self.shards if mine.get(s.spec)]
        with ThreadPoolExecutor(max(1, min(len(named), os.cpu_count() or 1))) as pool:
            for (s, want), got in zip(named, pool.map(lambda sw: _seek_lines(sw[0].path, sw[1]), named)):
                found.update(got)
                anywhere |= want - set(got)
        rest = anywhere - set(found)
        if rest and not self.offset_named:
            for pid, v in find_texts(self.chunks(), rest).items():
                found.setdefault(pid, v)
        return found


def shards_digest(named: list[tuple[str, str]]) -> str:
    """The fingerprint of a folder of shards: SHA-256 of ``name<TAB>sha256`` lines, in shard order."""
    return hashlib.sha256("".join(f"{n}\t{d}\n" for n, d in named).encode()).hexdigest()


def _first_id(path: Path) -> str | None:
    """The ``pid`` of a JSON-lines file's first line, gunzipped (None when not JSON)."""
    try:
        with open_bytes(path) as fh:
            obj = json.loads(fh.readline())
    except (OSError, EOFError, zlib.error, ValueError):
        return None
    pid = obj.get("pid") if isinstance(obj, dict) else None
    return pid if isinstance(pid, str) else None


def _seek_lines(path: Path, pids: set[str]) -> dict[str, tuple[str, str | None]]:
    """The passages whose ids give their line's byte offset in ``path`` (``<name>_<offset>``; of
    the uncompressed stream of a gzip file), each parsed as the reader parses it; an id not found
    at its offset is left out. A plain file is read with one seek per id; a gzip file is
    decompressed once up to the last offset, without parsing the lines between."""
    found: dict[str, tuple[str, str | None]] = {}
    offset = {p: int(_OFFSET_ID.match(p)["offset"]) for p in pids}
    order = sorted(pids, key=offset.__getitem__)
    for pid, line in zip(order, _lines_at(path, [offset[p] for p in order])):
        if not line.startswith(b"{"):
            continue
        try:
            t = jsonl_chunk(line if line.endswith(b"\n") else line + b"\n", path, 1)
        except InputError:
            continue
        if t.num_rows == 1 and t["pid"][0].as_py() == pid:
            found[pid] = (t["text"][0].as_py(), t["docid"][0].as_py())
    return found


def _lines_at(path: Path, offsets: list[int], block: int = 8 << 20) -> list[bytes]:
    """The line starting at each of the (ascending) byte ``offsets`` of a file, gunzipped when it
    is gzip (b"" past its end)."""
    if not is_gzip(path):
        with open(path, "rb") as fh:
            out = []
            for off in offsets:
                fh.seek(off)
                out.append(fh.readline())
            return out
    out, buf, start = [], b"", 0  # buf holds the stream from byte ``start`` on
    with open_bytes(path) as stream:
        blocks_ = blocks(stream, block, path)
        for off in offsets:
            while True:
                end = buf.find(b"\n", off - start) if off >= start else -1
                if off >= start and end >= 0:
                    out.append(buf[off - start:end + 1])
                    break
                block = next(blocks_, None)
                if block is None:
                    out.append(buf[off - start:] if off >= start else b"")
                    break
                keep = max(0, min(off, start + len(buf)) - start)  # what lies before the wanted offset goes
                buf, start = buf[keep:] + block, start + keep
    return out


def duplicate_across(indexes: list[IdIndex]) -> InputError | None:
    """``duplicate-id`` at the first passage (in corpus order: the files one after the other) whose
    id an earlier passage has, or None; equal id hashes are only candidates, their ids are read
    again."""
    per = [np.concatenate(ix.hashes) if ix.hashes else np.zeros(0, np.uint64) for ix in indexes]
    s = np.sort(np.concatenate(per))
    same = s[1:][s[1:] == s[:-1]]
    if not len(same):
        return None
    first: dict[str, tuple[int, int]] = {}
    for k, (ix, hashes) in enumerate(zip(indexes, per)):
        rows = np.flatnonzero(np.isin(hashes, same))
        if not len(rows):
            continue
        for row, pid in zip(rows.tolist(), ix._ids(rows, None)):
            if pid in first:
                j, was = first[pid]
                line = indexes[j].line(was)
                where = f"line {line}" if line is not None else f"row {was + 1}"
                return InputError("duplicate-id", f"passage id {quoted(pid)} already in {indexes[j].path.name} "
                                  f"({where})", file=str(ix.path), line=ix.line(row))
            first.setdefault(pid, (k, row))
    return None


def open_corpus(spec: "str | os.PathLike | CorpusSource", *, params: SourcesParams | None = None) -> CorpusSource:
    """The corpus source ``spec`` names: ``irds:<dataset-id>``, a folder of shards, or a file
    (see the module documentation); ``unreadable`` when there is nothing at the path. A source
    given is returned as it is. ``params``: which fields of an ``irds:`` dataset's records are a
    passage's text and document (``[sources]``; the declared defaults when None)."""
    if isinstance(spec, CorpusSource):
        return spec
    if is_irds(spec):
        from qrelkit.io.irds import IrdsCorpus  # lazy: ir_datasets is an optional extra

        return IrdsCorpus(str(spec)[len(IRDS):], params)
    p = Path(spec)
    if p.is_dir():
        return ShardCorpus(p)
    if not p.exists():
        raise InputError("unreadable", "no such file or folder", file=str(p))
    return FileCorpus(p)


class TableSource:
    """Topics or qrels, from a file or an ``irds:<dataset-id>`` dataset: :meth:`read` gives what
    the file reader gives (:func:`qrelkit.io.topics.read_topics`, :func:`qrelkit.io.qrels.read_qrels`,
    which take either), :meth:`fingerprint` what a campaign records (a file's SHA-256; a dataset's:
    the SHA-256 of the table as read, written as TSV)."""

    def __init__(self, spec: str | os.PathLike, params: SourcesParams | None = None) -> None:
        self.kind = "irds" if is_irds(spec) else "file"
        self.spec = str(spec) if self.kind == "irds" else str(Path(spec).resolve())
        self.params = params

    def __str__(self) -> str:
        return self.spec

    def read(self, **kw: Any):
        raise NotImplementedError

    def files(self) -> list[Path]:
        return [Path(self.spec)] if self.kind == "file" else []

    def fingerprint(self) -> str:
        if self.kind == "file":
            return sha256_file(self.spec)
        t = self.read()
        frame = t.to_pandas() if isinstance(t, pa.Table) else t
        return hashlib.sha256(frame.to_csv(sep="\t", index=False).encode()).hexdigest()


class TopicSource(TableSource):
    """The topics of a file or of an ir_datasets dataset (its queries; ``[sources] query_field``)."""

    def read(self, **kw: Any):
        from qrelkit.io.topics import read_topics  # lazy: the topic readers import this module

        return read_topics(self.spec, params=self.params, **kw)


class QrelsSource(TableSource):
    """The qrels of a file or of an ir_datasets dataset."""

    def read(self, **kw: Any):
        from qrelkit.io.qrels import read_qrels  # lazy: the qrels readers import this module

        return read_qrels(self.spec, **kw)


def open_topics(spec: str | os.PathLike, params: SourcesParams | None = None) -> TopicSource:
    """The topic source ``spec`` names (a file, or ``irds:<dataset-id>``'s queries)."""
    return TopicSource(spec, params)


def open_qrels(spec: str | os.PathLike, params: SourcesParams | None = None) -> QrelsSource:
    """The qrels source ``spec`` names (a file, or ``irds:<dataset-id>``'s qrels)."""
    return QrelsSource(spec, params)


