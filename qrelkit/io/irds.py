"""Datasets of ir_datasets as inputs: ``irds:<dataset-id>`` (the ``irds`` extra:
``pip install 'qrelkit[irds]'``).

Any dataset of ir_datasets' registry gives what it has — one of its own (downloaded by
ir_datasets first: qrelkit never downloads, and refuses a corpus whose documents file is not on
the machine) or one registered from local files in the same process (docs/campaign.md,
"Datasets from ir_datasets"):

* a **corpus** (:class:`IrdsCorpus`, opened by :func:`qrelkit.io.sources.open_corpus`): every
  document record is a passage whose id is the record's ``doc_id``; its text the fields of
  ``[sources] text_fields`` joined with one space (empty ones left out; by default the dataset's
  own text, ``default_text()``: the ``text`` field of most, title and body of documents); its
  document the field ``[sources] docid_field`` (``auto``: ``msmarco_document_id``, as MS MARCO v2
  passages have, or ``docid``, when the records have one);
* **topics** (:func:`read_irds_topics`): ``query_id`` and the field ``[sources] query_field``
  (whitespace runs made one space);
* **qrels** (:func:`read_irds_qrels`): ``query_id``, ``doc_id``, ``relevance``.

The records go through the file readers' rules (ids that TREC files can carry, a text, an id
used once); an error is one line naming ``irds:<dataset-id>`` and the record's number (1-based,
in ``docs_iter()`` order) where a file's error names its line.

**Fingerprint** (what a campaign records, :meth:`IrdsCorpus.fingerprint`): the SHA-256 of the
JSON line ``["irds", dataset id, ir_datasets version, docs count]`` followed by the JSON line
``[index, pid, text, docid]`` of each record of a fixed sample, in index order, as read with the
configured fields: the first 1,000 records (indexes 0..999) and 1,000 spread evenly (indexes
``k * count // 1000``, k = 0..999). The docs count is ir_datasets' ``docs_count()`` (its
metadata), or the records counted when it has none. The sample is read by slicing
``docs_iter()`` when the dataset's docs store is built (a few seeks), else in one pass over the
records (two when the count is unknown): the digest is the same either way. A changed sampled
record, another count, another field mapping or another version of ir_datasets changes it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib
import json
import operator
import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.errors import InputError, printable, quoted
from qrelkit.io.corpus import CorpusCheck, IdIndex, _id_problem, normalize_chunk
from qrelkit.io.params import SourcesParams
from qrelkit.io.sources import IRDS, CorpusSource
from qrelkit.io.topics import DETAIL_KEYS

#: the records of a fingerprint's sample: the first ones, and as many spread evenly
SAMPLE_FIRST = SAMPLE_SPREAD = 1000
#: the plugin modules a process imports when it meets a dataset not registered yet (as
#: :data:`qrelkit.config.PLUGINS_ENV`, which imports them when a configuration is loaded)
PLUGINS_ENV = "QRELKIT_PLUGINS"
#: the document fields ``[sources] docid_field = "auto"`` takes, the first the records have
AUTO_DOCID_FIELDS = ("msmarco_document_id", "docid")

Record = tuple[str, "str | None", "str | None"]  # pid, text, docid

#: how many reads through ir_datasets are under way (:func:`no_downloads`): its downloads fail then
_READING = [0]
_READING_LOCK = threading.Lock()
_REFUSED: list[str] = []  # what a read asked ir_datasets to download
_STORES: dict[str, Any] = {}  # dataset id -> its docs store (IrdsCorpus._store)


class DownloadRefused(Exception):
    """ir_datasets was about to download (qrelkit never does)."""


def _refusing(stream: Callable) -> Callable:
    """A download class's ``stream`` that raises :class:`DownloadRefused` while qrelkit reads."""
    @functools.wraps(stream)
    def guarded(self, *args, **kwargs):
        if _READING[0]:
            _REFUSED.append(str(getattr(self, "url", None) or getattr(self, "uri", None) or self))
            raise DownloadRefused(f"qrelkit never downloads: {_REFUSED[-1]}")
        return stream(self, *args, **kwargs)

    guarded.qrelkit_refusing = True  # type: ignore[attr-defined]
    return guarded


@contextlib.contextmanager
def no_downloads():
    """While qrelkit reads through ir_datasets, every download it would start fails (every
    download class but ``LocalDownload``: their ``stream``, wrapped once, does as before outside);
    a read that needed one is ``not-downloaded`` (:func:`_read_error`)."""
    base = irds_module().util.BaseDownload
    todo = list(base.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        stream = cls.__dict__.get("stream")
        if cls.__name__ != "LocalDownload" and stream is not None and not getattr(stream, "qrelkit_refusing", False):
            cls.stream = _refusing(stream)
    with _READING_LOCK:
        _READING[0] += 1
        _REFUSED.clear()
    try:
        yield
    finally:
        with _READING_LOCK:
            _READING[0] -= 1


def _read_error(exc: Exception, spec: str, line: int | None) -> InputError:
    """What a failure of ir_datasets while qrelkit reads is: ``not-downloaded`` when it wanted to
    download, else ``unreadable`` (a malformed record, a missing file)."""
    if isinstance(exc, DownloadRefused) or _REFUSED:
        return InputError("not-downloaded", f"ir_datasets would download {_REFUSED[0] if _REFUSED else exc}: "
                          "download the dataset with ir_datasets first (qrelkit never downloads)", file=spec)
    return InputError("unreadable", f"ir_datasets cannot read this record: {printable(exc, 200)}", file=spec, line=line)


def irds_module():
    """The ``ir_datasets`` module, or ``missing-extra`` when it is not installed."""
    try:
        import ir_datasets  # lazy: an optional extra (qrelkit[irds]); qrelkit reads files without it
    except ImportError:
        raise InputError("missing-extra", "irds: inputs need ir_datasets: pip install 'qrelkit[irds]'") from None
    return ir_datasets


def _find_dataset(irds: Any, dataset_id: str) -> Any:
    """``irds.load(dataset_id)``; a dataset not registered yet may be registered by a module of
    ``$QRELKIT_PLUGINS`` (docs/campaign.md), imported then: a process that has loaded no
    configuration yet (a command without one, a Dask worker) finds it too."""
    try:
        return irds.load(dataset_id)
    except KeyError:
        pass
    for name in filter(None, (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a module that does not import is the user's to fix
            raise InputError("bad-plugin", f"cannot import {name!r} named in ${PLUGINS_ENV}: {printable(exc, 200)}") \
                from None
    return irds.load(dataset_id)


def load_dataset(dataset_id: str, part: str) -> Any:
    """The dataset ``dataset_id`` of ir_datasets' registry, which must have ``part`` (``docs``,
    ``queries`` or ``qrels``): ``unknown-dataset`` or ``missing-part`` otherwise."""
    irds = irds_module()
    spec = IRDS + dataset_id
    try:
        ds = _find_dataset(irds, dataset_id)
    except KeyError:
        raise InputError("unknown-dataset", f"ir_datasets has no dataset {quoted(dataset_id, 120)} (registered ones: "
                         "ir_datasets.registry; a dataset of local files is registered first)", file=spec) from None
    if not ds.has(part):
        has = [p for p in ("docs", "queries", "qrels") if ds.has(p)]
        raise InputError("missing-part", f"ir_datasets' {dataset_id} has no {part} (it has: {', '.join(has) or 'none'})",
                         file=spec)
    path_of = getattr(ds, f"{part}_path", None)
    try:
        local = path_of(force=False) if path_of is not None else None  # the path, without fetching it
    except Exception:  # noqa: BLE001 - a handler that cannot tell its path without fetching it: not checked
        local = None
    if local and not os.path.exists(local):
        raise InputError("not-downloaded", f"the {part} of ir_datasets' {dataset_id} are not on this machine ({local}): "
                         "download them with ir_datasets first (qrelkit never downloads)", file=spec)
    return ds


def _fields(cls: Any) -> tuple[str, ...]:
    return tuple(getattr(cls, "_fields", ()))


def _field(cls: Any, name: str, what: str, key: str, spec: str) -> Callable[[Any], Any]:
    if name not in _fields(cls):
        raise InputError("missing-column", f"the {what} have no field {quoted(name)} (fields: {', '.join(_fields(cls))}): "
                         f"set [sources] {key}", file=spec)
    return operator.attrgetter(name)


def _text_of(cls: Any, fields: list[str], spec: str) -> Callable[[Any], str | None]:
    """A record's text: its ``fields`` joined with a space (empty ones left out; None when all are
    missing), or its own text (``default_text()``, else a ``text`` field)."""
    if not fields:
        if hasattr(cls, "default_text"):
            return lambda d: d.default_text()
        return _field(cls, "text", "documents", "text_fields", spec)
    getters = [_field(cls, f, "documents", "text_fields", spec) for f in fields]

    def joined(d: Any) -> str | None:
        values = [g(d) for g in getters]
        if all(v is None for v in values):
            return None
        return " ".join(v if isinstance(v, str) else str(v) for v in values if v is not None and v != "")

    return joined


def record_mapper(cls: Any, params: SourcesParams, spec: str) -> Callable[[Any], Record]:
    """``record -> (pid, text, docid)`` for the document records of class ``cls`` (a named tuple)
    with the fields ``params`` names; a field the records lack is ``missing-column``."""
    pid_of = operator.attrgetter("doc_id") if "doc_id" in _fields(cls) else operator.itemgetter(0)
    text_of = _text_of(cls, list(params.text_fields), spec)
    name = params.docid_field
    if name == "auto":
        name = next((f for f in AUTO_DOCID_FIELDS if f in _fields(cls)), "none")
    doc_of = None if name == "none" else _field(cls, name, "documents", "docid_field", spec)

    def record(d: Any) -> Record:
        pid = pid_of(d)
        docid = doc_of(d) if doc_of is not None else None
        return (pid if isinstance(pid, str) or pid is None else str(pid), text_of(d),
                docid if isinstance(docid, str) or docid is None else str(docid))

    return record


def _guarded(records: Iterable[Any], spec: str, first: int = 1, batch: int = 1024) -> Iterator[Any]:
    """``records`` as ir_datasets yields them (pulled ``batch`` at a time, downloads refused:
    :func:`no_downloads`); its failure is one :class:`InputError` (:func:`_read_error`) at the
    record it could not give, raised after the records before it (whose own defects come first)."""
    it, n, done = iter(records), first, False
    while not done:
        got: list[Any] = []
        error: InputError | None = None
        with no_downloads():
            try:
                while len(got) < batch:
                    got.append(next(it))
            except StopIteration:
                done = True
            except InputError:
                raise
            except Exception as exc:  # noqa: BLE001 - whatever ir_datasets raises on bad input is the input's
                error = _read_error(exc, spec, n + len(got))
        yield from got
        if error is not None:
            raise error
        n += len(got)


def _table(rows: list[Record], spec: str, first: int) -> pa.Table:
    """``rows`` (records ``first``, ``first + 1``, ...) as :data:`CORPUS_SCHEMA` under the file
    readers' rules (:func:`qrelkit.io.corpus.normalize_chunk`), an error naming its record."""
    try:
        t = pa.table({k: pa.array(v, pa.string()) for k, v in zip(("pid", "text", "docid"), zip(*rows))})
    except (UnicodeEncodeError, pa.ArrowException):
        bad = next(i for i, r in enumerate(rows) if not all(_encodes(x) for x in r))
        raise InputError("not-utf8", "a field is not UTF-8 text (a lone surrogate)", file=spec, line=first + bad) from None
    # one line per record ("x\n"), so that the readers' rule names the record's number as its line
    return normalize_chunk(t, spec, first, b"x\n" * len(rows), b"")


def _encodes(x: str | None) -> bool:
    try:
        x is None or x.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def sample_indexes(count: int) -> list[int]:
    """The records of a fingerprint's sample: the first :data:`SAMPLE_FIRST` and
    :data:`SAMPLE_SPREAD` spread evenly (``k * count // SAMPLE_SPREAD``), ascending.

    >>> sample_indexes(5)
    [0, 1, 2, 3, 4]
    >>> sample_indexes(10_000)[998:1003]
    [998, 999, 1000, 1010, 1020]
    """
    return sorted(set(range(min(count, SAMPLE_FIRST))) | {k * count // SAMPLE_SPREAD for k in range(SAMPLE_SPREAD)
                                                          if k * count // SAMPLE_SPREAD < count})


def sample_digest(dataset_id: str, version: str, count: int, sample: Iterable[tuple[int, Record]]) -> str:
    """The fingerprint of an ``irds:`` corpus from its parts (see the module documentation)."""
    h = hashlib.sha256()
    h.update(json.dumps(["irds", dataset_id, version, count], ensure_ascii=False).encode() + b"\n")
    for i, (pid, text, docid) in sample:
        h.update(json.dumps([i, pid, text, docid], ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n")
    return h.hexdigest()


class _RecordIds(IdIndex):
    """The hashes of a dataset's passage ids (:class:`~qrelkit.io.corpus.IdIndex`), the ids read
    again from the dataset."""

    def __init__(self, source: "IrdsCorpus"):
        super().__init__(Path(source.spec), "irds")
        self.source = source

    def _ids(self, rows: np.ndarray, before_line: int | None) -> list[str]:
        want, last, out = set(rows.tolist()), int(rows[-1]), []
        for i, (pid, _, _) in enumerate(self.source.records()):
            if i in want:
                out.append(pid)
            if i >= last:
                break
        return out


class IrdsCorpus(CorpusSource):
    """The documents of an ir_datasets dataset as a corpus (see the module documentation)."""

    kind = "irds"

    def __init__(self, dataset_id: str, params: SourcesParams | None = None) -> None:
        super().__init__(IRDS + dataset_id)
        self.dataset_id = dataset_id
        self.params = params if params is not None else SourcesParams()
        self.dataset = load_dataset(dataset_id, "docs")
        self.record = record_mapper(self.dataset.docs_cls(), self.params, self.spec)

    def __reduce__(self):  # picklable (a Dask worker): opened again there from the id and the field mapping
        return (type(self), (self.dataset_id, self.params))

    def records(self) -> Iterator[Record]:
        """``(pid, text, docid)`` of every record, in ``docs_iter()`` order, not checked."""
        return map(self.record, _guarded(self.dataset.docs_iter(), self.spec))

    def chunks(self, *, chunk_rows: int = 200_000, chunk_bytes: int = 32 << 20) -> Iterator[pa.Table]:
        rows: list[Record] = []
        size, first = 0, 1
        try:
            for r in self.records():
                rows.append(r)
                size += len(r[1] or "")
                if len(rows) >= chunk_rows or size >= chunk_bytes:
                    yield _table(rows, self.spec, first)
                    first, rows, size = first + len(rows), [], 0
        except InputError as err:  # a record ir_datasets cannot give: the records before it first
            if rows:
                yield _table(rows, self.spec, first)
            raise err from None
        if rows:
            yield _table(rows, self.spec, first)

    def declared_count(self) -> int | None:
        """ir_datasets' count of the documents (``docs_count()``, its metadata), or None."""
        try:
            n = self.dataset.docs_count()
        except Exception:  # noqa: BLE001 - NotImplementedError, or a store that cannot tell: counted instead
            return None
        return None if n is None else int(n)

    def count(self) -> int:
        n = self.declared_count()
        return n if n is not None else sum(1 for _ in _guarded(self.dataset.docs_iter(), self.spec))

    def _store(self) -> Any | None:
        """The dataset's docs store, or None; one per dataset and process (ir_datasets logs each
        store it opens)."""
        if self.dataset_id not in _STORES:
            try:
                _STORES[self.dataset_id] = self.dataset.docs_store()
            except Exception:  # noqa: BLE001 - NotImplementedError, AttributeError: a dataset without a docs store
                _STORES[self.dataset_id] = None
        return _STORES[self.dataset_id]

    @property
    def random_access(self) -> bool:  # type: ignore[override]
        """Whether the dataset has a docs store (:meth:`lookup` uses it; a store ir_datasets builds
        from the records, as for TSV or JSONL documents, is built by ir_datasets at the first
        lookup, where ir_datasets keeps it)."""
        return self._store() is not None

    def lookup(self, pids: set[str]) -> dict[str, tuple[str, str | None]]:
        store = self._store()
        if store is None:
            return super().lookup(pids)
        try:
            with no_downloads():
                got = store.get_many(sorted(pids))
        except Exception as exc:  # noqa: BLE001 - the store cannot be built or read: the input's
            raise _read_error(exc, self.spec, None) from None
        found: dict[str, tuple[str, str | None]] = {}
        for d in got.values():
            pid, text, docid = self.record(d)
            if pid in pids:
                found.setdefault(pid, (text or "", docid))
        return found

    def _sliceable(self) -> bool:
        """Whether ``docs_iter()`` slices without a pass over the records: its docs store built."""
        store = self._store()
        built = getattr(store, "built", None)
        return store is not None and callable(built) and bool(built())

    def sample(self, count: int) -> list[tuple[int, Record]]:
        """The fingerprint's records (:func:`sample_indexes`) with their indexes."""
        want = sample_indexes(count)
        if self._sliceable():
            head = [i for i in want if i < SAMPLE_FIRST]
            got = list(zip(head, map(self.record, _guarded(self.dataset.docs_iter()[0:len(head)], self.spec))))
            for i in want[len(head):]:
                got += [(i, self.record(d)) for d in _guarded(self.dataset.docs_iter()[i:i + 1], self.spec, i + 1)]
            return got
        keep, got = set(want), []
        for i, r in enumerate(self.records()):
            if i in keep:
                got.append((i, r))
                if len(got) == len(keep):
                    break
        return got

    def fingerprint(self) -> str:
        n = self.count()
        return sample_digest(self.dataset_id, irds_module().__version__, n, self.sample(n))

    def check(self, progress: Callable[..., Any] | None = None, *, chunk_bytes: int = 32 << 20) -> CorpusCheck:
        """Every record through the readers' rules, ids used twice, the count against ir_datasets'
        (``count-mismatch``: a partial download), and the fingerprint (the sample gathered in the
        same pass when the count is known). ``progress(n)`` is called with the records read."""
        declared = self.declared_count()
        keep = set(sample_indexes(declared)) if declared is not None else set()
        ids, sample, n, documents = _RecordIds(self), [], 0, False
        chunks = self.chunks(chunk_bytes=chunk_bytes)
        while True:
            try:
                t = next(chunks, None)
            except InputError as err:  # an id used twice before the bad record is the first error
                raise (ids.duplicate() or err) from None
            if t is None:
                break
            ids.add(t["pid"], n + 1)
            for i in sorted(k for k in keep if n <= k < n + t.num_rows):
                sample.append((i, (t["pid"][i - n].as_py(), t["text"][i - n].as_py(), t["docid"][i - n].as_py())))
            n, documents = n + t.num_rows, documents or t["docid"].null_count < t.num_rows
            if progress is not None:
                progress(t.num_rows)
        dup = ids.duplicate()
        if dup is not None:
            raise dup
        if declared is not None and declared != n:
            raise InputError("count-mismatch", f"ir_datasets counts {declared} documents, {n} were read (a partial "
                             "download?)", file=self.spec)
        if declared is None:
            sample = self.sample(n)
        digest = sample_digest(self.dataset_id, irds_module().__version__, n, sample)
        return CorpusCheck(path=Path(self.spec), format="irds", passages=n, documents=bool(documents), size=0,
                           mtime_ns=0, sha256=digest, kind=self.kind, spec=self.spec)


def _check_ids(values: list[str], what: str, spec: str) -> None:
    """The file readers' ``bad-id`` (:func:`qrelkit.io.corpus._id_problem`), naming the record."""
    problem = _id_problem(pa.array(values, pa.string()), what)
    if problem is not None:
        row, rule, message = problem
        raise InputError(rule, message, file=spec, line=row + 1)


def read_irds_topics(dataset_id: str, params: SourcesParams | None = None) -> pd.DataFrame:
    """The queries of an ir_datasets dataset as :func:`qrelkit.io.topics.read_topics` returns
    topics: ``qid`` and ``text`` (the field ``[sources] query_field``, whitespace runs made one
    space); ``duplicate-topic``, ``bad-id``, ``empty-file`` as for a file, naming the record."""
    params = params if params is not None else SourcesParams()
    spec = IRDS + dataset_id
    ds = load_dataset(dataset_id, "queries")
    text_of = _field(ds.queries_cls(), params.query_field, "queries", "query_field", spec)
    rows, seen = [], {}
    for n, q in enumerate(_guarded(ds.queries_iter(), spec), 1):
        qid, text = str(q[0]), text_of(q)
        if qid in seen:
            raise InputError("duplicate-topic", f"topic {qid} already on record {seen[qid]}", file=spec, line=n)
        seen[qid] = n
        rows.append((qid, " ".join(str(text).split()) if text is not None else ""))
    if not rows:
        raise InputError("empty-file", "no topics", file=spec)
    _check_ids([r[0] for r in rows], "topic id", spec)
    return pd.DataFrame(rows, columns=["qid", "text"]).astype({"qid": str, "text": str})


def read_irds_topic_details(dataset_id: str) -> dict[str, dict[str, str]]:
    """``qid -> {"description": ..., "narrative": ...}`` of the queries of an ir_datasets dataset
    that have such fields (TREC topics: :data:`qrelkit.io.topics.DETAIL_KEYS`), as
    :func:`qrelkit.io.topics.read_topic_details` reads a JSONL file; ``{}`` for other queries."""
    spec = IRDS + dataset_id
    ds = load_dataset(dataset_id, "queries")
    fields = _fields(ds.queries_cls())
    pairs = [(key, next(n for n in names if n in fields)) for key, names in DETAIL_KEYS.items()
             if any(n in fields for n in names)]
    out: dict[str, dict[str, str]] = {}
    for q in _guarded(ds.queries_iter(), spec) if pairs else ():
        found = {key: " ".join(str(getattr(q, n)).split()) for key, n in pairs if str(getattr(q, n) or "").strip()}
        if found:
            out[str(q[0])] = found
    return out


def read_irds_qrels(dataset_id: str) -> pa.Table:
    """The qrels of an ir_datasets dataset as the text reader parses a file (``qid``, ``docid``,
    ``rel`` as a float, ``_line`` the record's number), for :func:`qrelkit.io.qrels.read_qrels`'
    rules; ids TREC files cannot carry are ``bad-id``."""
    spec = IRDS + dataset_id
    ds = load_dataset(dataset_id, "qrels")
    qids, docids, rels = [], [], []
    for n, q in enumerate(_guarded(ds.qrels_iter(), spec), 1):
        qids.append(str(q.query_id))
        docids.append(str(q.doc_id))
        try:
            rels.append(float(q.relevance))
        except (TypeError, ValueError):
            raise InputError("grade-not-numeric", f"grade {quoted(q.relevance)} is not a number", file=spec, line=n) from None
    _check_ids(qids, "topic id", spec)
    _check_ids(docids, "document id", spec)
    return pa.table({"qid": pa.array(qids, pa.string()), "docid": pa.array(docids, pa.string()),
                     "rel": pa.array(rels, pa.float64()), "_line": pa.array(np.arange(1, len(qids) + 1), pa.int64())})
