"""Runs: reading, validating and holding TREC runs in canonical order.

A run table (:data:`RUN_SCHEMA`) has one row per retrieved document::

    run: string   qid: string   docid: string   rank: int32   score: float64

It is always in **canonical order**: runs by name, topics in natural order (numerically when
every qid is an integer, else as strings), then score descending with ties broken by docid
descending (byte order), exactly as trec_eval orders a run. ``rank`` is recomputed from that order
(1-based); the rank column of the input file is only checked, never trusted.

Validation names a rule for each defect (see :data:`RULES`). Strict mode (the default) raises an
:class:`~qrelkit.errors.InputError` for the first error (file, line, rule); lenient mode repairs
what can be repaired and reports counts per rule. Warnings never abort.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from qrelkit.errors import InputError
from qrelkit.io.atomic import atomic_path
# qid_order and canonical_indices stay importable from here too (callers outside io/ use them)
from qrelkit.io.order import block_ranks, canonical_indices, canonical_order, natural_codes, qid_order  # noqa: F401
from qrelkit.io.strings import all_equal, mix_keys, rows_with_a_repeated_key, string_keys
from qrelkit.io.text import Column, parse_columns, read_bytes
from qrelkit.params import AS_DECLARED, declared_defaults, param
from qrelkit.io.params import RunsParams

RUN_SCHEMA = pa.schema(
    [
        ("run", pa.string()),
        ("qid", pa.string()),
        ("docid", pa.string()),
        ("rank", pa.int32()),
        ("score", pa.float64()),
    ]
)

RUN_TEXT_COLUMNS = [
    Column("qid", "str"),
    Column("q0", "skip"),
    Column("docid", "str"),
    Column("rank", "float", rule="rank-not-integer", soft=True),
    Column("score", "float", rule="score-not-numeric"),
    Column("tag", "str"),
]

#: rule name -> (severity, what lenient mode does)
RULES: dict[str, tuple[str, str]] = {
    "unreadable": ("error", "file skipped"),
    "bad-gzip": ("error", "file skipped"),
    "empty-file": ("error", "file skipped"),
    "not-utf8": ("error", "bytes replaced by U+FFFD"),
    "missing-column": ("error", "line dropped"),
    "extra-column": ("error", "line dropped"),
    "score-not-numeric": ("error", "line dropped"),
    "score-not-finite": ("error", "line dropped"),
    "duplicate-docid": ("error", "first occurrence in the file kept"),
    "multiple-tags": ("error", "all lines kept under the file's run name"),
    "tag-mismatch": ("error", "the manifest's run name used"),
    "not-in-manifest": ("error", "run kept"),
    "missing-run": ("error", "run left out (neither pooled nor evaluated)"),
    "duplicate-run": ("error", "later file skipped"),
    "unknown-topic": ("error", "lines dropped"),
    "max-depth": ("error", "topic truncated to the maximum depth in canonical order"),
    "rank-not-integer": ("warning", "ranks are recomputed"),
    "rank-zero-based": ("warning", "ranks are recomputed"),
    "rank-order-differs": ("warning", "ranks are recomputed from score, docid"),
    "tie-order-differs": ("warning", "ties are ordered by docid descending"),
    "shallow-topics": ("warning", "reported only"),
    "missing-topic": ("warning", "reported only"),
    "blank-line": ("warning", "ignored"),
    "comment-line": ("warning", "ignored"),
}

#: how documents of equal score are ordered within a topic (what ``rank`` follows); pools take
#: it as a choice (``[pool] ties``), everything else uses the canonical ``docid-desc``
TIE_RULES: dict[str, str] = {
    "docid-desc": "equal scores by docid descending (trec_eval's order; the canonical order)",
    "docid-asc": "equal scores by docid ascending",
    "file-order": "equal scores in the order of the run file (row order of a Parquet file)",
}

_TIE_WORDS = {"docid-desc": "docid descending", "docid-asc": "docid ascending", "file-order": "in file order"}

ISSUE_COLUMNS = ["file", "run", "rule", "severity", "count", "line", "message", "repair"]


@dataclass
class RunSet:
    """Runs read from files: the canonical table plus what validation found."""

    table: pa.Table
    issues: pd.DataFrame  # ISSUE_COLUMNS, one row per (file, rule)
    summary: pd.DataFrame  # one row per run
    files: dict[str, str] = field(default_factory=dict)  # run -> file

    @property
    def runs(self) -> list[str]:
        return list(self.summary["run"])

    def errors(self) -> pd.DataFrame:
        return self.issues[self.issues["severity"] == "error"]

    def repairs(self) -> dict[str, int]:
        """What lenient mode repaired: lines (or files, runs) per error rule, by rule name."""
        errs = self.errors()
        return {str(r): int(n) for r, n in errs.groupby("rule")["count"].sum().sort_index().items() if n}


@dataclass
class _Issue:
    rule: str
    count: int
    line: int | None
    message: str


@dataclass
class _FileResult:
    path: str
    run: str | None = None
    table: pa.Table | None = None
    issues: list[_Issue] = field(default_factory=list)
    lines: int = 0
    depth_counts: np.ndarray | None = None  # documents per topic, once the table is final
    topics: list[str] | None = None  # the topics of the final table, in natural order

    def add(self, rule: str, count: int, line: int | None, message: str) -> None:
        if not count:
            return
        line = None if line is None else int(line)
        for i in self.issues:  # one issue per rule: e.g. rank "x" (soft) and rank 3.5 both count
            if i.rule == rule:
                i.count += int(count)
                if line is not None and (i.line is None or line < i.line):
                    i.line, i.message = line, message
                return
        self.issues.append(_Issue(rule, int(count), line, message))

    def first_error(self) -> _Issue | None:
        errs = [i for i in self.issues if RULES[i.rule][0] == "error"]
        if not errs:
            return None
        # a file that is not UTF-8 is not text: that is the news, whatever else its lines break
        return min(errs, key=lambda i: (i.rule != "not-utf8", i.line if i.line is not None else 0, i.rule))


def expand_sources(sources: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    """Files named by ``sources``: files as given, folders expanded to their visible files
    (sorted by name)."""
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    out: list[Path] = []
    for s in sources:
        p = Path(s)
        if p.is_dir():
            kids = sorted(k for k in p.iterdir() if k.is_file() and not k.name.startswith("."))
            if not kids:
                raise InputError("empty-folder", "folder holds no run files", file=str(p))
            out.extend(kids)
        elif p.exists():
            out.append(p)
        else:
            raise InputError("unreadable", "no such file", file=str(p))
    return out


def _first_line(mask: np.ndarray, lines: np.ndarray) -> int | None:
    idx = np.flatnonzero(mask)
    return int(lines[idx[0]]) if len(idx) else None


@dataclass
class RunOptions:
    """What :func:`read_runs` checks. ``max_depth`` and ``expected_depth`` are per topic."""

    lenient: bool = param(RunsParams.KEYS, "lenient")
    topics: set[str] | None = None
    max_depth: int | None = None
    expected_depth: int | None = None
    file_runs: Mapping[str, str] | None = None  # file name -> run name from a manifest
    known_runs: set[str] | None = None  # runs of the manifest
    manifest_lines: Mapping[str, int | None] | None = None  # run -> its line in the manifest
    manifest_file: str | None = None
    ties: str = "docid-desc"  # TIE_RULES


def _read_parquet_runs(path: Path) -> list[tuple[str, pa.Table]]:
    """A Parquet run file split by its ``run`` column: one (label, table) per run, in run-name
    order (a file written by ``runs canonicalize`` holds many runs). Rows keep their file row
    numbers in ``_row``."""
    try:
        t = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - any reader failure is bad input
        raise InputError("unreadable", f"not a readable Parquet file: {exc}", file=str(path)) from None
    t = t.append_column("_row", pa.array(np.arange(1, t.num_rows + 1, dtype=np.int64)))
    if "run" not in t.column_names or t.num_rows == 0:
        return [(str(path), t)]
    _no_nulls(t, ["run"], path)
    names = sorted(pc.unique(pc.cast(t["run"], pa.string())).to_pylist(), key=str)
    if len(names) == 1:
        return [(str(path), t)]
    run = pc.cast(t["run"], pa.string())
    return [(f"{path}#{n}", t.filter(pc.equal(run, n))) for n in names]


def _no_nulls(t: pa.Table, columns: list[str], path: Path) -> None:
    """A Parquet run's value missing (null) is a missing column of that row, as in a text line."""
    for c in columns:
        if t[c].null_count:
            row = int(pc.index(pc.is_null(t[c]), True).as_py())
            line = int(t["_row"][row].as_py()) if "_row" in t.column_names else row + 1
            raise InputError("missing-column", f"row {line} has no {c} (null)", file=str(path), line=line)


def _load_table(path: Path, table: pa.Table | None = None) -> tuple[pa.Table, _FileResult]:
    """Parse one file (text or Parquet) into qid, docid, rank, score, tag, _line. ``table``: one
    run of a Parquet file, already read."""
    res = _FileResult(path=str(path))
    if table is not None or path.suffix == ".parquet":
        t = table if table is not None else _read_parquet_runs(path)[0][1]
        names = set(t.column_names)
        need = {"qid", "docid", "score"}
        if not need <= names:
            raise InputError("missing-column", f"Parquet run needs columns {sorted(need)}", file=str(path))
        tag_col = "run" if "run" in names else ("tag" if "tag" in names else None)
        _no_nulls(t, [c for c in ("qid", "docid", "score", "rank", tag_col) if c in names], path)
        n = t.num_rows
        cols = {
            "qid": pc.cast(t["qid"], pa.string()),
            "docid": pc.cast(t["docid"], pa.string()),
            "rank": pc.cast(t["rank"], pa.float64()) if "rank" in names else pa.array(np.arange(1, n + 1, dtype=np.float64)),
            "score": pc.cast(t["score"], pa.float64()),
            "tag": pc.cast(t[tag_col], pa.string()) if tag_col else pa.array([path.stem] * n, pa.string()),
            "_line": t["_row"] if "_row" in names else pa.array(np.arange(1, n + 1, dtype=np.int64)),
        }
        res.lines = n
        return pa.table(cols).combine_chunks(), res
    data = read_bytes(path)
    parsed = parse_columns(data, RUN_TEXT_COLUMNS, str(path))
    for rule, line, message in parsed.problems:
        res.add(rule, 1, line, message)
    # aggregate repeated problems into one issue per rule (first line, count)
    agg: dict[str, _Issue] = {}
    for i in res.issues:
        if i.rule in agg:
            agg[i.rule].count += i.count
        else:
            agg[i.rule] = i
    res.issues = list(agg.values())
    for rule, lines in parsed.soft.items():
        res.add(rule, len(lines), lines[0], "rank is not a number")
    res.add("blank-line", parsed.blank_lines, None, "blank lines ignored")
    res.add("comment-line", parsed.comment_lines, None, "comment lines ignored")
    res.lines = parsed.table.num_rows
    return parsed.table, res


def _process_file(path: Path, opts: RunOptions, table: pa.Table | None = None, label: str | None = None) -> _FileResult:
    """One run file (or one run of a Parquet file) validated, repaired and in canonical order.

    The stages, in the order their issues are recorded: load, name the run, mark the lines to
    drop (non-finite scores, unknown topics, duplicate docids), check the given ranks, order the
    kept rows, compare the given ranks with that order, cut at the maximum depth.
    """
    try:
        t, res = _load_table(path, table)
        if label is not None:
            res.path = label
    except InputError as exc:
        res = _FileResult(path=str(path))
        res.add(exc.rule, 1, exc.line, exc.message)
        return res
    if t.num_rows == 0:
        if res.first_error() is None:  # else every line was malformed: that error is the news
            res.add("empty-file", 1, None, "no run lines")
        return res
    lines = t["_line"].to_numpy()
    run = _run_name(res, t["tag"], lines, path.name, opts)
    res.run = run
    keep = _valid_rows(res, t, lines, opts.topics)
    qcodes, order = natural_codes(t["qid"])
    _drop_duplicate_docids(res, t["docid"], qcodes, keep, lines)
    rank_in = t["rank"].to_numpy()
    _given_rank_issues(res, rank_in, lines)
    t, qcodes, rank_in, lines = _ordered_rows(t, keep, qcodes, rank_in, lines, opts.ties)
    rank = block_ranks(qcodes)
    _rank_order_issues(res, qcodes, rank_in, t["score"].to_numpy(), opts.ties)
    if opts.max_depth is not None:
        t, rank, qcodes = _cut_at_depth(res, t, rank, qcodes, lines, opts.max_depth)
    res.table = _run_table(run, t, rank)
    counts = np.bincount(qcodes, minlength=len(order))
    res.topics = [q for q, c in zip(order, counts.tolist()) if c]
    res.depth_counts = counts[counts > 0]
    return res


def _run_name(res: _FileResult, tag: pa.ChunkedArray, lines: np.ndarray, file_name: str, opts: RunOptions) -> str:
    """The file's run name: the tag of its first line, or the manifest's name for this file."""
    first_tag = tag[0].as_py()
    run = first_tag
    if first_tag is not None and all_equal(tag, first_tag):  # the usual file: one tag, no need to compare each
        other = None
    else:
        other = pc.not_equal(tag, pa.scalar(first_tag, pa.string())).to_numpy(zero_copy_only=False)
    if other is not None and other.any():
        tag_values = sorted(set(pc.unique(tag).to_pylist()))
        res.add("multiple-tags", int(other.sum()), _first_line(other, lines),
                f"{len(tag_values)} tags in one file ({', '.join(tag_values[:5])})")
    if opts.file_runs is not None and file_name in opts.file_runs:
        expected = opts.file_runs[file_name]
        if expected != first_tag:
            res.add("tag-mismatch", 1, int(lines[0]), f"tag {first_tag!r} but the manifest names this file's run {expected!r}")
        run = expected
    elif opts.known_runs is not None and run not in opts.known_runs:
        res.add("not-in-manifest", 1, int(lines[0]), f"run {run!r} is not in the manifest")
    return run


def _valid_rows(res: _FileResult, t: pa.Table, lines: np.ndarray, topics: set[str] | None) -> np.ndarray:
    """The rows to keep (a boolean mask): lines with a non-finite score or a topic outside
    ``topics`` are dropped."""
    keep = np.ones(t.num_rows, dtype=bool)
    finite = np.isfinite(t["score"].to_numpy())
    if not finite.all():
        bad = ~finite
        res.add("score-not-finite", int(bad.sum()), _first_line(bad, lines), "score is NaN or infinite")
        keep &= finite
    if topics is not None:
        qid = t["qid"]
        known = pc.is_in(qid, value_set=pa.array(sorted(topics), pa.string())).to_numpy(zero_copy_only=False)
        unknown = ~known
        if unknown.any():
            first = _first_line(unknown, lines)
            bad_q = pc.unique(qid.filter(pa.array(unknown))).to_pylist()
            res.add("unknown-topic", int(unknown.sum()), first,
                    f"topic(s) not in the topics file: {', '.join(sorted(bad_q)[:5])}")
            keep &= known
    return keep


def _drop_duplicate_docids(res: _FileResult, docid: pa.ChunkedArray, qcodes: np.ndarray, keep: np.ndarray,
                           lines: np.ndarray) -> None:
    """Clear ``keep`` (in place) for every later retrieval of a (topic, docid) already kept.

    A 64-bit key of each (topic, docid) pair (:func:`qrelkit.io.strings.string_keys`: far cheaper
    than a dictionary of the docids) finds the rows that may repeat one; only those rows are
    compared as strings."""
    key = mix_keys(qcodes, string_keys(docid))
    kept_idx = None if keep.all() else np.flatnonzero(keep)  # a dropped line never makes a later one a duplicate
    if kept_idx is not None:
        key = key[kept_idx]
    cand = rows_with_a_repeated_key(key)  # every row of a repeated pair, and rare key collisions
    if len(cand) == 0:
        return
    if kept_idx is not None:
        cand = kept_idx[cand]
    pairs = pd.DataFrame({"q": qcodes[cand], "d": docid.take(pa.array(cand)).to_numpy(zero_copy_only=False)})
    dup = np.zeros(len(keep), bool)
    dup[cand[pairs.duplicated().to_numpy()]] = True
    if dup.any():
        res.add("duplicate-docid", int(dup.sum()), _first_line(dup, lines), "docid retrieved twice for one topic")
        keep &= ~dup


def _given_rank_issues(res: _FileResult, rank_in: np.ndarray, lines: np.ndarray) -> None:
    """Warnings about the file's own rank column: fractional ranks, ranks from 0."""
    with np.errstate(invalid="ignore"):
        nonint = np.isfinite(rank_in) & (rank_in != np.floor(rank_in))
    if nonint.any():
        res.add("rank-not-integer", int(nonint.sum()), _first_line(nonint, lines), "rank is not an integer")
    zero = rank_in == 0
    if zero.any():
        res.add("rank-zero-based", int(zero.sum()), _first_line(zero, lines), "ranks start at 0")


def _ordered_rows(t: pa.Table, keep: np.ndarray, qcodes: np.ndarray, rank_in: np.ndarray, lines: np.ndarray,
                  ties: str) -> tuple[pa.Table, np.ndarray, np.ndarray, np.ndarray]:
    """The kept rows in canonical order (equal scores in ``ties`` order), with their topic codes,
    given ranks and file lines moved along."""
    if not keep.all():
        sel = pa.array(keep)
        t = t.filter(sel)
        qcodes = qcodes[keep]
        lines = lines[keep]
        rank_in = rank_in[keep]
    if ties != "docid-desc":  # equal scores by docid ascending or by line (unique in a topic): one sort
        second = t["docid"] if ties == "docid-asc" else pa.array(lines)
        key = pa.table({"q": qcodes, "s": t["score"], "t": second})
        idx = pc.sort_indices(key, sort_keys=[("q", "ascending"), ("s", "descending"), ("t", "ascending")]).to_numpy()
        return t.take(pa.array(idx)), qcodes[idx], rank_in[idx], lines[idx]
    score = t["score"].to_numpy()
    docid = t["docid"]
    idx, ties_only = canonical_order(qcodes, score, docid)
    if idx is not None:
        if ties_only:  # qid and score are equal among the rows that move
            t = t.set_column(t.column_names.index("docid"), "docid", docid.take(pa.array(idx)))
        else:
            t = t.take(pa.array(idx))
            qcodes = qcodes[idx]
        rank_in = rank_in[idx]
        lines = lines[idx]
    return t, qcodes, rank_in, lines


def _rank_order_issues(res: _FileResult, qcodes: np.ndarray, rank_in: np.ndarray, score: np.ndarray, ties: str) -> None:
    """Given ranks should increase along the (ordered) rows within each topic; disorder among
    equal scores only means the run broke ties differently from ``ties``."""
    same = qcodes[1:] == qcodes[:-1]
    with np.errstate(invalid="ignore"):
        disorder = same & ~(rank_in[1:] > rank_in[:-1])
    tied = score[1:] == score[:-1]
    for rule, mask, what in (
        ("rank-order-differs", disorder & ~tied, "given ranks disagree with the score order"),
        ("tie-order-differs", disorder & tied, "ties in score ranked otherwise than " + _TIE_WORDS[ties]),
    ):
        if mask.any():
            at = qcodes[1:][mask]  # ascending: the rows are in topic order
            nq = 1 + int(np.count_nonzero(at[1:] != at[:-1]))
            res.add(rule, nq, None, f"{what} in {nq} topic(s)")


def _cut_at_depth(res: _FileResult, t: pa.Table, rank: np.ndarray, qcodes: np.ndarray, lines: np.ndarray,
                  max_depth: int) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """The rows ranked at most ``max_depth`` in their topic, their ranks and topic codes."""
    over = rank > max_depth
    if over.any():
        first = int(lines[over].min())
        res.add("max-depth", int(over.sum()), first, f"more than {max_depth} documents for a topic")
        t = t.filter(pa.array(~over))
        rank = rank[~over]
        qcodes = qcodes[~over]
    return t, rank, qcodes


def _run_table(run: str, t: pa.Table, rank: np.ndarray) -> pa.Table:
    """The final :data:`RUN_SCHEMA` table of one run."""
    n = t.num_rows
    return pa.table(
        {
            "run": _constant_strings(run, n),
            "qid": t["qid"],
            "docid": t["docid"],
            "rank": pa.array(rank, pa.int32()),
            "score": t["score"],
        },
        schema=RUN_SCHEMA,
    )


def _constant_strings(value: str, n: int) -> pa.Array:
    """A string array of ``n`` copies of ``value``, built from buffers."""
    raw = value.encode("utf-8")
    offsets = np.arange(n + 1, dtype=np.int32) * len(raw)
    data = raw * n
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data)])


def _depth_issues(res: _FileResult, opts: RunOptions) -> None:
    t = res.table
    if t is None or t.num_rows == 0:
        return
    counts, topics = res.depth_counts, res.topics
    if opts.expected_depth:
        shallow = counts < opts.expected_depth
        if shallow.any():
            res.add("shallow-topics", int(shallow.sum()), None,
                    f"{int(shallow.sum())} of {len(counts)} topics have fewer than {opts.expected_depth} "
                    f"documents (median {int(np.median(counts))})")
    if opts.topics is not None:
        missing = sorted(opts.topics - set(topics))
        if missing:
            res.add("missing-topic", len(missing), None, f"no documents for topic(s) {', '.join(missing[:5])}")


def _common_topic_order(results: list[_FileResult]) -> None:
    """Give every run the topic order of the whole run set.

    Each file is put in natural topic order on its own; a file whose qids are all integers is
    ordered numerically even when another file has a non-numeric qid, and then the concatenated
    table would not be canonical. Such files are re-sorted by qid string (a stable sort keeps the
    score/docid order within each topic).
    """
    if len(results) < 2:
        return
    qids = set()
    for r in results:
        qids.update(r.topics)
    if all(q.isascii() and q.isdigit() for q in qids):
        return
    for r in results:
        if all(q.isascii() and q.isdigit() for q in r.topics):
            idx = pc.sort_indices(pa.table({"q": r.table["qid"]}), sort_keys=[("q", "ascending")])  # stable
            r.table = r.table.take(idx)


@declared_defaults(RunsParams)
def read_runs(
    sources: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    lenient: bool = AS_DECLARED,
    topics: Iterable[str] | None = None,
    max_depth: int | None = None,
    expected_depth: int | None = None,
    manifest: pd.DataFrame | None = None,
    threads: int | None = None,
    progress: Callable[[int], None] | None = None,
    ties: str = "docid-desc",
) -> RunSet:
    """Read and validate TREC runs (text, ``.gz`` or Parquet; files or folders).

    Strict mode raises :class:`InputError` for the first error in the first offending file (in
    file-name order). Lenient mode repairs (see :data:`RULES`) and reports every rule's count in
    ``RunSet.issues``. ``manifest`` (see :func:`qrelkit.io.manifest.read_manifest`) checks that
    every run is known (``not-in-manifest``), that every run it names is read from a file
    (``missing-run``, at the manifest's line) and, when it has a ``file`` column, that each
    file's tag matches.
    ``expected_depth`` flags topics with fewer documents (a warning). The returned table is in
    canonical order with ranks recomputed; ``ties`` (:data:`TIE_RULES`) orders documents of equal
    score otherwise (then the table is in canonical order except among equal scores).

    Examples
    --------
    >>> from qrelkit import read_runs
    >>> from qrelkit.simulate.toy import toy_file
    >>> path = toy_file("bm25.run", "1 Q0 d1 1 2.5 bm25\\n1 Q0 d2 2 1.5 bm25\\n2 Q0 d3 1 0.7 bm25\\n")
    >>> runs = read_runs(path)
    >>> runs.runs
    ['bm25']
    >>> runs.table.column_names
    ['run', 'qid', 'docid', 'rank', 'score']
    >>> runs.table["docid"].to_pylist()
    ['d1', 'd2', 'd3']
    """
    if ties not in TIE_RULES:
        raise InputError("bad-option", f"tie rule must be one of {', '.join(TIE_RULES)}, got {ties!r}")
    paths = expand_sources(sources)
    opts = _run_options(lenient, topics, max_depth, expected_depth, manifest, ties)
    results = _process_files(_file_tasks(paths), opts, threads or min(2, os.cpu_count() or 1), progress)
    _skip_duplicate_runs(results)
    missing = _missing_runs(results, opts)
    if not lenient:
        for r in results:
            err = r.first_error()
            if err is not None:
                raise InputError(err.rule, err.message, file=r.path, line=err.line)
        if missing:
            file, _, rule, _, _, line, message, _ = missing[0]
            raise InputError(rule, message, file=file, line=line)
    return _run_set(results, missing)


def _missing_runs(results: list[_FileResult], opts: RunOptions) -> list[list]:
    """The manifest's runs no file read holds (rule ``missing-run``), in manifest order: one issue
    row (:data:`ISSUE_COLUMNS`) each, with the manifest's file and line."""
    if opts.known_runs is None:
        return []
    read = {r.run for r in results}
    gone = [run for run in (opts.manifest_lines or sorted(opts.known_runs)) if run not in read]
    files = {r: f for f, r in (opts.file_runs or {}).items()}
    out = []
    for i, run in enumerate(gone):
        where = f" (its file {files[run]!r} is not among them)" if run in files else ""
        more = f"; {len(gone) - 1} other run(s) of the manifest too" if i == 0 and len(gone) > 1 else ""
        out.append([opts.manifest_file, run, "missing-run", RULES["missing-run"][0], 1,
                    (opts.manifest_lines or {}).get(run),
                    f"the manifest names run {run!r}, but no run file read holds it{where}{more}", RULES["missing-run"][1]])
    return out


#: one unit of work for :func:`_process_file`: a file, one run of a Parquet file (or None) and its label
_Task = tuple[Path, pa.Table | None, str | None]


def _run_options(lenient: bool, topics: Iterable[str] | None, max_depth: int | None, expected_depth: int | None,
                 manifest: pd.DataFrame | None, ties: str) -> RunOptions:
    """:func:`read_runs`'s arguments as :class:`RunOptions` (the manifest as run and file names)."""
    opts = RunOptions(
        lenient=lenient,
        topics=None if topics is None else {str(q) for q in topics},
        max_depth=max_depth,
        expected_depth=expected_depth,
        ties=ties,
    )
    if manifest is not None:
        opts.known_runs = set(manifest["run"].astype(str))
        opts.manifest_lines = dict(manifest.attrs.get("lines") or {r: None for r in manifest["run"].astype(str)})
        opts.manifest_file = manifest.attrs.get("path")
        if "file" in manifest.columns:
            opts.file_runs = {
                Path(str(f)).name: str(r) for f, r in zip(manifest["file"], manifest["run"]) if isinstance(f, str) and f
            }
    return opts


def _file_tasks(paths: list[Path]) -> list[_Task]:
    """One task per file, except a Parquet file of several runs: one task per run in it."""
    tasks: list[_Task] = []
    for p in paths:
        if p.suffix == ".parquet":
            try:
                parts = _read_parquet_runs(p)
            except InputError:
                parts = []
            if len(parts) > 1:  # several runs in one file: each is validated as a run of its own
                tasks.extend((p, t, label) for label, t in parts)
                continue
            if parts:
                tasks.append((p, parts[0][1], None))
                continue
        tasks.append((p, None, None))
    return tasks


def _process_files(tasks: list[_Task], opts: RunOptions, nthreads: int,
                   progress: Callable[[int], None] | None) -> list[_FileResult]:
    """Every task through :func:`_process_file` and :func:`_depth_issues`, on ``nthreads``
    threads; results in task order."""

    def work(task: _Task) -> _FileResult:
        r = _process_file(task[0], opts, task[1], task[2])
        _depth_issues(r, opts)
        if progress is not None:
            progress(1)
        return r

    if nthreads > 1 and len(tasks) > 1:
        with ThreadPoolExecutor(nthreads) as ex:
            return list(ex.map(work, tasks))
    return [work(t) for t in tasks]


def _skip_duplicate_runs(results: list[_FileResult]) -> None:
    """The cross-file rule, one file per run name: a later file of a run already read is skipped."""
    seen: dict[str, str] = {}
    for r in results:
        if r.run is None or r.table is None:
            continue
        if r.run in seen:
            r.add("duplicate-run", 1, None, f"run {r.run!r} also read from {seen[r.run]}")
            r.table = None
        else:
            seen[r.run] = r.path


def _run_set(results: list[_FileResult], more_issues: Sequence[list] = ()) -> RunSet:
    """The :class:`RunSet` of the validated files: their runs concatenated in run-name order,
    every issue (the files', then ``more_issues``: rows of the manifest's), one summary row per file."""
    issues = []
    for r in results:
        for i in r.issues:
            sev, repair = RULES[i.rule]
            issues.append([r.path, r.run, i.rule, sev, i.count, i.line, i.message, repair])
    issues.extend(list(row) for row in more_issues)
    good = sorted((r for r in results if r.table is not None and r.table.num_rows), key=lambda r: r.run)
    _common_topic_order(good)
    issues_df = pd.DataFrame(issues, columns=ISSUE_COLUMNS)
    issues_df["line"] = issues_df["line"].astype("Int64")
    summary_df = pd.DataFrame(
        [_run_summary(r) for r in results],
        columns=["run", "file", "lines", "docs", "topics", "min_depth", "median_depth", "max_depth",
                 "errors", "warnings", "status"],
    ).sort_values(["run", "file"], na_position="last", kind="stable").reset_index(drop=True)
    if good:
        table = pa.concat_tables([r.table for r in good])
    else:
        table = RUN_SCHEMA.empty_table()
    return RunSet(table=table, issues=issues_df, summary=summary_df, files={r.run: r.path for r in good})


def _run_summary(r: _FileResult) -> list:
    """One file's row of ``RunSet.summary``: size, depth per topic, error and warning counts, status."""
    t = r.table
    if t is not None and t.num_rows:
        counts = r.depth_counts if r.depth_counts is not None else pc.value_counts(t["qid"]).field("counts").to_numpy()
        depth = (int(counts.min()), float(np.median(counts)), int(counts.max()))
        ntopics = len(counts)
        docs = t.num_rows
    else:
        depth = (0, 0.0, 0)
        ntopics = 0
        docs = 0
    errs = sum(i.count for i in r.issues if RULES[i.rule][0] == "error")
    warns = sum(i.count for i in r.issues if RULES[i.rule][0] == "warning")
    status = "skipped" if r.table is None else ("repaired" if errs else ("warnings" if warns else "ok"))
    return [r.run, r.path, r.lines, docs, ntopics, *depth, errs, warns, status]


def canonicalize(table: pa.Table | pd.DataFrame) -> pa.Table:
    """Put any table with run, qid, docid, score columns into canonical order; ranks recomputed.

    A missing ``run`` column is treated as one run named ``run``.
    """
    if isinstance(table, pd.DataFrame):
        table = pa.Table.from_pandas(table, preserve_index=False)
    n = table.num_rows
    run = pc.cast(table["run"], pa.string()) if "run" in table.column_names else pa.array(["run"] * n, pa.string())
    qid = pc.cast(table["qid"], pa.string())
    docid = pc.cast(table["docid"], pa.string())
    score = pc.cast(table["score"], pa.float64())
    qcodes, _ = natural_codes(qid)
    t = pa.table({"r": run, "q": qcodes, "s": score, "d": docid})
    idx = pc.sort_indices(t, sort_keys=[("r", "ascending"), ("q", "ascending"), ("s", "descending"), ("d", "descending")])
    t = pa.table({"run": run, "qid": qid, "docid": docid, "score": score}).take(idx)
    rcodes = pc.dictionary_encode(t["run"]).combine_chunks().indices.to_numpy() if n else np.zeros(0, np.int32)
    q2 = qcodes[idx.to_numpy()]
    group = rcodes.astype(np.int64) * (int(q2.max()) + 1 if n else 1) + q2
    rank = block_ranks(group)
    return pa.table(
        {"run": t["run"], "qid": t["qid"], "docid": t["docid"], "rank": pa.array(rank, pa.int32()), "score": t["score"]},
        schema=RUN_SCHEMA,
    )


def write_trec_run(table: pa.Table, path: str | os.PathLike) -> None:
    """Write a run table as TREC text (``qid Q0 docid rank score run``), atomically.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> import pyarrow as pa
    >>> from qrelkit import write_trec_run
    >>> path = Path(tempfile.mkdtemp(), "bm25.run")
    >>> write_trec_run(pa.table({"run": ["bm25", "bm25"], "qid": ["1", "1"], "docid": ["d1", "d2"],
    ...                          "rank": pa.array([1, 2], pa.int32()), "score": [2.5, 1.5]}), path)
    >>> print(path.read_text(), end="")
    1 Q0 d1 1 2.5 bm25
    1 Q0 d2 2 1.5 bm25
    """
    n = table.num_rows
    out = pa.table(
        {
            "qid": table["qid"],
            "q0": pa.array(["Q0"], pa.string()).take(pa.array(np.zeros(n, np.int32))) if n else pa.array([], pa.string()),
            "docid": table["docid"],
            "rank": table["rank"],
            "score": table["score"],
            "run": table["run"],
        }
    )
    with atomic_path(path) as tmp:
        pacsv.write_csv(
            out, tmp, write_options=pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
        )
