"""A synthetic TREC Deep Learning style campaign: corpus, near-duplicates, topics, hidden graded
qrels and submitted runs, for testing and benchmarking qrelkit without real data.

:func:`simulate_campaign` writes into one folder:

``corpus.jsonl``
    One JSON object per line, ``{"pid": "p0000123", "passage": "...", "docid": "d000045"}``, in
    corpus order (MS MARCO v2 style). A document holds 1-10 consecutive passages. Ids are
    zero-padded to a fixed width, so string order equals numeric order. Passage text is 30-80
    words drawn from a Zipfian vocabulary (English stop words first, then pronounceable synthetic
    words made of syllables), split into sentences (capitalized first word, final period, some
    commas). Each topic owns 15 topic terms; passages related to a topic contain several of them.
``neardup_truth.tsv``
    The true near-duplicate classes: ``class_id<TAB>pid`` for every passage in a class of two or
    more, sorted by class then pid. The class id is the canonical member, the class's first
    passage in corpus order, which is also the original the other members were copied from.
    A copy differs from it by 0-3 word edits (substitution, insertion, deletion) plus, for some
    copies, changes of case or punctuation only. About ``dup_fraction`` of the corpus are copies;
    class sizes are heavy tailed (mostly 2-3, a few as large as 1% of the corpus or 3,000).
    Copies land anywhere in the corpus, so usually in other documents.
``topics.tsv``
    ``qid<TAB>query`` with qids ``"1001"``, ``"1002"``, ...; queries are built from topic terms.
``qrels.txt``
    Hidden graded qrels ``qid 0 pid grade`` (3 perfectly relevant, 2 highly relevant, 1 related,
    0 irrelevant), sorted by topic then pid: every passage topically related to a topic, the
    lexical decoys of the topic (grade 0, they carry query terms but are not relevant), and a
    sample of the non-relevant passages the runs put in their top 20. Every near-duplicate of a
    graded passage carries the same grade (expanded qrels). Topics vary: a few have fewer than
    five relevant passages (possibly none), most 10-200, one or two very many.
``runs/<run>.run``
    TREC runs ``qid Q0 pid rank score run``, single spaces, ``depth`` lines per topic, ranks
    1..depth, scores non-increasing with some exact ties. Most runs list tied passages in
    trec_eval's order (pid descending); the groups marked ``tie_order = "asc"`` in the summary
    list them pid ascending, as some real systems do (qrelkit reports that as the warning
    ``tie-order-differs``). Runs come from the organizers' baselines (``p_bm25``, real BM25 over
    the query terms, and ``p_bm25rm3``, BM25 with expansion terms) and from groups ``grpA``,
    ``grpB``, ... whose runs score passages by a noisy function of lexical match, topical match and
    true relevance, with a quality per group, noise shared within a group (runs of a group are
    correlated) and noise shared by all runs (runs of different groups overlap). ``rerank`` runs
    re-order the top 1000 of BM25; other subtasks rank a first-stage pool of BM25 and a "dense"
    retriever. Near-duplicates score alike, so runs retrieve them side by side.
``manifest.csv``
    ``run,group,priority,baseline,subtask,file``: priority 1 is a group's highest priority.
``summary.json``
    The summary :func:`simulate_campaign` returns (parameters, counts, relative file paths,
    per-topic and per-run details). It holds no time stamps or absolute paths, so the whole
    folder is byte-identical for equal arguments.

Determinism: all randomness comes from ``numpy.random.default_rng(seed)`` (and independent child
generators spawned from it, one per stage, so that e.g. the corpus does not change when only the
number of groups does); nothing depends on hashing, set order or the clock.
"""

from __future__ import annotations

import functools
import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.io.atomic import atomic_open, atomic_path
from qrelkit.io.order import block_positions as _block_ranks  # 0-based; the local name its callers use
from qrelkit.simulate.layout import LAYOUTS, FlatNames, MsmarcoV2Names, string_bytes

__all__ = ["simulate_campaign"]

#: number of topic-specific terms per topic
TOPIC_TERMS = 15
#: vocabulary size (stop words + synthetic words)
VOCAB_SIZE = 50_000
#: first-stage depth: rerank runs re-order the BM25 top this many passages
FIRST_STAGE = 1000
#: surface forms per word: case (lower, Capitalized, UPPER) x punctuation ("", ".", ",")
_FORMS = 9
_ZIPF_TABLE_BITS = 22
#: tokens drawn and marked at a time (even: see :func:`_base_tokens`)
_TOKEN_CHUNK = 1 << 24

_STOPWORDS = (
    "the of and to a in is for that on with as by it are was be or an this from at which can have "
    "has not your you more also their they one its all will other may these such when than most "
    "into used but about some there been each how what many if new our we any only first use time "
    "two between after over"
).split()
_ONSETS = ("b c d f g h j k l m n p r s t v w z br ch cl dr fl gr pl pr sh st th tr").split()
_VOWELS = ("a e i o u a e i o ai ea ou").split()
_CODAS = ("", "", "", "", "n", "r", "s", "l", "m", "t", "nd", "st", "x")
_QUERY_TEMPLATES = (
    "what is {}",
    "how to {}",
    "{} definition",
    "why does {}",
    "what causes {}",
    "how long does {} take",
    "where is {}",
    "{}",
    "is {} safe",
    "what are the effects of {}",
)


# --------------------------------------------------------------------------- vocabulary


@functools.lru_cache(maxsize=1)
def _vocabulary() -> tuple[tuple[str, ...], pa.Array, np.ndarray]:
    """Words by frequency rank, their surface forms (index ``word * 9 + case * 3 + punct``) and a
    Zipf sampling table. Independent of the campaign's seed (fixed generator), hence cached."""
    rng = np.random.default_rng(20220101)
    words: list[str] = list(_STOPWORDS)
    used = set(words)
    n = VOCAB_SIZE - len(words)
    ranks = np.arange(n)
    nsyl = np.where(ranks < 300, 1, np.where(ranks < 20000, 2, 3)) + (rng.random(n) < 0.08)
    onset = rng.integers(0, len(_ONSETS), size=(n, 4))
    has_onset = rng.random((n, 4)) < 0.9
    vowel = rng.integers(0, len(_VOWELS), size=(n, 4))
    coda = rng.integers(0, len(_CODAS), size=(n, 4))
    for i in range(n):
        k = int(nsyl[i])
        parts = []
        for s in range(k):
            on = _ONSETS[onset[i, s]] if (s > 0 or has_onset[i, s]) else ""
            parts.append(on + _VOWELS[vowel[i, s]] + (_CODAS[coda[i, s]] if s == k - 1 or coda[i, s] % 3 == 0 else ""))
        w = "".join(parts)
        while w in used or len(w) < 3:  # collision: add a syllable
            w += _ONSETS[int(rng.integers(len(_ONSETS)))] + _VOWELS[int(rng.integers(len(_VOWELS)))]
        used.add(w)
        words.append(w)
    base = pa.array(words, pa.string())
    cases = [base, pc.utf8_capitalize(base), pc.utf8_upper(base)]
    forms = []
    for c in cases:
        for p in ("", ".", ","):
            forms.append(c if not p else pc.binary_join_element_wise(c, p, ""))
    stacked = pa.concat_arrays(forms)  # index (case * 3 + punct) * V + word
    code = np.arange(VOCAB_SIZE * _FORMS)
    surface = stacked.take(pa.array((code % _FORMS) * VOCAB_SIZE + code // _FORMS))
    # Zipf-Mandelbrot frequencies, sampled through a lookup table (every word gets a bucket)
    p = 1.0 / (np.arange(VOCAB_SIZE) + 2.7) ** 1.07
    m = 1 << _ZIPF_TABLE_BITS
    counts = np.maximum(1, np.floor(p / p.sum() * m)).astype(np.int64)
    counts[0] += m - counts.sum()
    table = np.repeat(np.arange(VOCAB_SIZE, dtype=np.int32), counts)
    return tuple(words), surface, table


def _zipf_words(rng: np.random.Generator, table: np.ndarray, size: int) -> np.ndarray:
    return table[rng.integers(0, len(table), size=size, dtype=np.int64)]


# --------------------------------------------------------------------------- corpus structure


def _doc_sizes(rng: np.random.Generator, n: int, n_docs: int | None) -> np.ndarray:
    """Passages per document (1-10), summing to ``n``."""
    if n_docs is None:
        p = np.array([12, 12, 12, 11, 10, 10, 9, 8, 8, 8], float)
        p /= p.sum()
        sizes = np.zeros(0, np.int64)
        while sizes.sum() < n:
            sizes = np.concatenate([sizes, rng.choice(10, size=n // 4 + 16, p=p) + 1])
        cum = np.cumsum(sizes)
        k = int(np.searchsorted(cum, n))  # cum[k] >= n
        sizes = sizes[: k + 1].copy()
        sizes[k] -= int(cum[k] - n)
        return sizes
    sizes = np.ones(n_docs, np.int64)
    extra = n - n_docs
    while extra > 0:
        room = np.flatnonzero(sizes < 10)
        add = rng.multinomial(extra, np.full(len(room), 1.0 / len(room)))
        sizes[room] += add
        over = np.maximum(sizes - 10, 0)
        extra = int(over.sum())
        sizes -= over
    return sizes


def _class_sizes(rng: np.random.Generator, n: int, dup_fraction: float) -> np.ndarray:
    """Sizes (>= 2) of near-duplicate classes with about ``dup_fraction * n`` copies in all."""
    budget = int(round(dup_fraction * n))
    if budget <= 0:
        return np.zeros(0, np.int64)
    cap = max(2, min(n // 100, 3000))  # largest class size
    big: list[int] = []
    for s in (cap, cap // 2, cap // 4):
        if s >= 8 and sum(big) + s - 1 <= 0.3 * budget:
            big.append(s - 1)
    rest = budget - sum(big)
    small = np.zeros(0, np.int64)
    if rest > 0:
        c = np.arange(1, max(2, cap))
        pmf = c.astype(float) ** -2.7
        draws = rng.choice(c, size=rest, p=pmf / pmf.sum())
        cum = np.cumsum(draws)
        k = int(np.searchsorted(cum, rest))
        small = draws[: k + 1].astype(np.int64)
        small[k] -= int(cum[k] - rest)
    copies = np.concatenate([np.array(big, np.int64), small])
    return copies + 1


def _segments(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated ``arange(start, start + length)`` for every segment."""
    total = int(lengths.sum())
    out_start = np.cumsum(lengths) - lengths
    return np.repeat(starts - out_start, lengths) + np.arange(total)


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ValueError(msg)


def _pid_strings(ids: np.ndarray, prefix: str, width: int) -> list[str]:
    return [f"{prefix}{i:0{width}d}" for i in ids.tolist()]


# --------------------------------------------------------------------------- stage state


@dataclass
class _Args:
    """The checked arguments of :func:`simulate_campaign`."""

    n: int
    n_docs: int | None
    n_topics: int
    n_groups: int
    lo: int
    hi: int
    depth: int
    dup_fraction: object
    seed: object
    subtasks: tuple[str, ...]
    layout: str = "flat"
    shards: int = 1


@dataclass
class _Structure:
    """Documents and near-duplicate classes of the corpus slots."""

    doc_sizes: np.ndarray
    sizes: np.ndarray  # class sizes
    class_of: np.ndarray  # canonical (= source) slot of every passage
    is_copy: np.ndarray
    class_size: np.ndarray  # size of the class whose canonical is i
    member_order: np.ndarray | None = None
    class_start: np.ndarray | None = None

    def expand(self, topic: np.ndarray, canon: np.ndarray, grade: np.ndarray):
        """(topic, canonical passage, grade) rows expanded to every member of the class."""
        if self.member_order is None:
            self.member_order = np.argsort(self.class_of, kind="stable")
            self.class_start = np.searchsorted(self.class_of[self.member_order], np.arange(len(self.class_of)))
        sz = self.class_size[canon]
        rep = np.repeat(np.arange(len(canon)), sz)
        pids = self.member_order[_segments(self.class_start[canon], sz)]
        return topic[rep], pids, grade[rep]


@dataclass
class _Tokens:
    """Word codes of every slot (``codes[base_off[i]:base_off[i + 1]]``) and of the copies."""

    lengths: np.ndarray
    base_off: np.ndarray
    codes: np.ndarray | None
    copy_slots: np.ndarray | None = None
    copy_codes: np.ndarray | None = None
    copy_off: np.ndarray | None = None
    n_edits: np.ndarray | None = None
    mode: np.ndarray | None = None
    final_len: np.ndarray | None = None


@dataclass
class _Topics:
    """Topic terms, queries and graded (topic, canonical passage, grade) rows."""

    topic_terms: np.ndarray
    term_w: np.ndarray
    term_cdf: np.ndarray
    n_query_terms: np.ndarray
    qids: list[str]
    queries: list[str]
    kinds: np.ndarray
    g_topic: np.ndarray | None = None
    g_pid: np.ndarray | None = None
    g_grade: np.ndarray | None = None


@dataclass
class _Rows:
    """Candidate (topic, passage) rows and their scores."""

    row_key: np.ndarray
    r_topic: np.ndarray
    r_pid: np.ndarray
    bm25: np.ndarray
    rm3: np.ndarray
    sem: np.ndarray
    r_cls: np.ndarray | None = None
    n_cls_rows: int = 0
    lexz: np.ndarray | None = None
    semz: np.ndarray | None = None
    latent: np.ndarray | None = None
    in_bm25: np.ndarray | None = None
    first_stage: np.ndarray | None = None
    r_key: np.ndarray | None = None  # the order of the rows' pid strings (ties)

    @property
    def nrows(self) -> int:
        return len(self.row_key)

    def top_rows(self, score: np.ndarray, mask: np.ndarray | None, k: int, ascending_ties: bool = False) -> np.ndarray:
        """Row indices of the top ``k`` per topic by score (ties: pid descending), in rank order."""
        idx = np.arange(self.nrows) if mask is None else np.flatnonzero(mask)
        pid_key = self.r_key[idx] if ascending_ties else -self.r_key[idx]
        o = idx[np.lexsort((pid_key, -score[idx], self.r_topic[idx]))]
        return o[_block_ranks(self.r_topic[o]) < k]

    def zscore(self, x: np.ndarray, n_topics: int) -> np.ndarray:
        r_topic = self.r_topic
        cnt = np.bincount(r_topic, minlength=n_topics)
        mean = np.bincount(r_topic, weights=x, minlength=n_topics) / np.maximum(cnt, 1)
        var = np.bincount(r_topic, weights=(x - mean[r_topic]) ** 2, minlength=n_topics) / np.maximum(cnt, 1)
        return (x - mean[r_topic]) / np.sqrt(np.maximum(var, 1e-12))[r_topic]


# --------------------------------------------------------------------------- the simulator


def simulate_campaign(
    out_dir: str | os.PathLike,
    *,
    n_passages: int = 20000,
    n_docs: int | None = None,
    n_topics: int = 20,
    n_groups: int = 6,
    runs_per_group: tuple[int, int] = (2, 5),
    depth: int = 100,
    dup_fraction: float = 0.1,
    seed: int = 0,
    subtasks: Sequence[str] = ("fullrank", "rerank"),
    progress: Callable[[str, float], None] | None = None,
    layout: str = "flat",
    shards: int = 10,
) -> dict:
    """Write a synthetic TREC-DL-style campaign into ``out_dir`` and return its summary.

    Parameters
    ----------
    out_dir:
        Output folder (created if needed). Files are written atomically; run files in
        ``out_dir/runs`` that are not part of the new campaign (``*.run`` left by an earlier
        simulation) are removed so that the folder matches ``manifest.csv``.
    n_passages:
        Corpus size (at least ``max(depth, 100)``).
    n_docs:
        Number of source documents (each holds 1-10 passages, so ``ceil(n_passages / 10) <=
        n_docs <= n_passages``); ``None`` draws document sizes with a mean of about 5.
    n_topics:
        Number of topics (qids ``"1001"`` upwards).
    n_groups:
        Participating groups besides the organizers (whose group ``organizers`` submits the
        baseline runs ``p_bm25`` and ``p_bm25rm3``).
    runs_per_group:
        ``(min, max)``, inclusive, runs submitted per group.
    depth:
        Passages per topic in every run.
    dup_fraction:
        Share of the corpus that are near-duplicate copies of another passage (0 to 0.5).
    seed:
        Seed of ``numpy.random.default_rng``; equal arguments give byte-identical files.
    subtasks:
        Subtask names for the manifest; ``"rerank"`` runs re-order the BM25 top 1000, any other
        name ranks the first-stage pool.
    progress:
        Optional ``progress(step, fraction)``, called a few times; ``fraction`` is the overall
        progress in [0, 1].
    layout, shards:
        ``"flat"`` or ``"msmarco-v2"``: ``shards`` gzip files as MS MARCO v2 ships them (:mod:`~qrelkit.simulate.layout`).

    Returns
    -------
    dict
        JSON-able summary, also written to ``summary.json``: ``parameters``, ``files`` (paths
        relative to ``out_dir``), ``counts``, ``pool`` (depth-10 pool sizes), ``topics`` (per
        topic: kind, query, graded passages per grade before and after expansion to
        near-duplicates) and ``runs`` (per run: group, subtask, priority, baseline, the hidden
        quality parameter, score style and tie order).

    Examples
    --------
    A tiny campaign, then its runs pooled and scored:

    >>> import tempfile
    >>> from pathlib import Path
    >>> from qrelkit import depth_pool, evaluate, read_qrels, read_runs, simulate_campaign
    >>> out = Path(tempfile.mkdtemp())
    >>> summary = simulate_campaign(out, n_passages=200, n_topics=2, n_groups=2, runs_per_group=(1, 1),
    ...                             depth=10, seed=0)
    >>> sorted(summary["files"])
    ['corpus', 'manifest', 'neardup_truth', 'qrels', 'runs', 'summary', 'topics']
    >>> runs = read_runs(out / "runs").table
    >>> sorted(set(runs["run"].to_pylist()))
    ['grpA_run1', 'grpB_run1', 'p_bm25', 'p_bm25rm3']
    >>> depth_pool(runs, 10).num_rows == summary["pool"]["mean_distinct_per_topic"] * 2
    True
    >>> scores = evaluate(runs, read_qrels(out / "qrels.txt"), ["nDCG@10"]).summary
    >>> scores.num_rows
    4
    """
    a = _campaign_args(n_passages, n_docs, n_topics, n_groups, runs_per_group, depth, dup_fraction, seed, subtasks,
                       layout, shards)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = _reporter(progress)
    root = np.random.default_rng(seed)
    (rng_docs, rng_cls, rng_tok, rng_topic, rng_copy, rng_runs, rng_qrels, rng_fill) = root.spawn(8)
    report("vocabulary", 0.0)
    words, surface, zipf_table = _vocabulary()
    report("structure", 0.05)
    st = _corpus_structure(rng_docs, rng_cls, a)
    report("tokens", 0.1)
    tok = _base_tokens(rng_tok, zipf_table, a.n)
    report("topics", 0.3)
    tp, counts = _topic_specs(rng_topic, words, a)
    _graded_passages(rng_topic, tp, counts, st, a)
    _insert_topic_terms(rng_topic, tp, tok)
    report("duplicates", 0.4)
    _copies(rng_copy, zipf_table, st, tok)
    names = _names(a, st, tok, surface)  # the pids (msmarco-v2: their lines' offsets)
    report("features", 0.5)
    rows = _candidate_rows(rng_fill, a, st, tok, tp, len(words))
    rows.r_key = names.key(rows.r_pid)
    eg = _row_grades(rng_runs, a, st, tp, rows)
    report("runs", 0.6)
    _first_stage(rng_runs, rows, a.depth)
    runs, group_params = _plan_runs(rng_runs, a, rows.n_cls_rows)
    top10, top20, tie_lines = _write_runs(out, a, runs, group_params, rows, tp.qids, names, report)
    _write_manifest(out, runs)
    report("qrels", 0.78)
    q_topic, q_grade, p_cls = _write_hidden_qrels(rng_qrels, out, a.n, st, tp, eg, top20, names)
    in_class = _write_topics_and_truth(out, tp, st, names)
    report("corpus", 0.8)
    _write_corpus(out, a.n, st, tok, surface, names, report)
    summary = _summary(a, st, tok, tp, runs, len(words), in_class, tie_lines, top10, q_topic, q_grade, p_cls, names)
    with atomic_open(out / "summary.json") as fh:
        fh.write(json.dumps(summary, indent=2) + "\n")
    report("done", 1.0)
    return summary


# --------------------------------------------------------------------------- stages: arguments, corpus


def _reporter(progress: Callable[[str, float], None] | None) -> Callable[[str, float], None]:
    def report(step: str, frac: float) -> None:
        if progress is not None:
            progress(step, float(frac))

    return report


def _campaign_args(n_passages, n_docs, n_topics, n_groups, runs_per_group, depth, dup_fraction, seed,
                   subtasks, layout="flat", shards=10) -> _Args:
    """The arguments of :func:`simulate_campaign`, checked (``ValueError`` names the first bad one)."""
    n = int(n_passages)
    n_topics = int(n_topics)
    n_groups = int(n_groups)
    depth = int(depth)
    subtasks = tuple(str(s) for s in subtasks)
    lo, hi = (int(x) for x in runs_per_group)
    _check(depth >= 1, "depth must be at least 1")
    _check(n >= max(depth, 100), f"n_passages must be at least max(depth, 100) = {max(depth, 100)}")
    _check(n < 10**9, "n_passages must be below 10**9")
    _check(1 <= n_topics <= 3000, "n_topics must be between 1 and 3000")
    _check(n_groups >= 0, "n_groups must not be negative")
    _check(1 <= lo <= hi, "runs_per_group must be (min, max) with 1 <= min <= max")
    _check(0.0 <= float(dup_fraction) <= 0.5, "dup_fraction must be between 0 and 0.5")
    _check(len(subtasks) > 0 and all(s and "," not in s for s in subtasks) and len(set(subtasks)) == len(subtasks),
           "subtasks must be distinct non-empty names without commas")
    _check(layout in LAYOUTS, f"layout must be one of {', '.join(LAYOUTS)}")
    shards = int(shards)
    _check(layout == "flat" or 1 <= shards <= n // 20, "shards must be between 1 and n_passages / 20")
    if n_docs is not None:
        n_docs = int(n_docs)
        _check(-(-n // 10) <= n_docs <= n, "n_docs must be between ceil(n_passages / 10) and n_passages")
    return _Args(n=n, n_docs=n_docs, n_topics=n_topics, n_groups=n_groups, lo=lo, hi=hi, depth=depth,
                 dup_fraction=dup_fraction, seed=seed, subtasks=subtasks, layout=layout, shards=shards)


def _corpus_structure(rng_docs: np.random.Generator, rng_cls: np.random.Generator, a: _Args) -> _Structure:
    """Documents and near-duplicate classes."""
    n = a.n
    doc_sizes = _doc_sizes(rng_docs, n, a.n_docs)
    sizes = _class_sizes(rng_cls, n, float(a.dup_fraction))
    n_classes = len(sizes)
    class_of = np.arange(n, dtype=np.int64)  # canonical (= source) slot of every passage
    if n_classes:
        perm = rng_cls.permutation(n)
        total = int(sizes.sum())
        block = np.repeat(np.arange(n_classes), sizes)
        members = perm[:total]
        order = np.lexsort((members, block))
        members = members[order]
        starts = np.cumsum(sizes) - sizes
        sources_by_block = members[starts]
        class_of[members] = np.repeat(sources_by_block, sizes)
    is_copy = class_of != np.arange(n)
    class_size = np.bincount(class_of, minlength=n)  # size of the class whose canonical is i
    return _Structure(doc_sizes=doc_sizes, sizes=sizes, class_of=class_of, is_copy=is_copy, class_size=class_size)


def _base_tokens(rng_tok: np.random.Generator, zipf_table: np.ndarray, n: int) -> _Tokens:
    """Base tokens for every slot (copies are overwritten later)."""
    lengths = np.clip(np.rint(rng_tok.normal(55, 13, size=n)), 30, 80).astype(np.int64)
    base_off = np.concatenate([[0], np.cumsum(lengths)])
    T = int(base_off[-1])
    # in chunks (memory: the codes and 2 bytes a token, not 4 arrays of the codes' size): the
    # table has 2**22 entries, so every draw takes one half of a 64-bit word and chunks of an
    # even size draw exactly what one call would
    codes = np.empty(T, np.int32)
    for a in range(0, T, _TOKEN_CHUNK):
        codes[a : a + _TOKEN_CHUNK] = _zipf_words(rng_tok, zipf_table, min(_TOKEN_CHUNK, T - a))
    codes *= _FORMS
    rnd = rng_tok.integers(0, 256, size=T, dtype=np.uint8)
    end = rnd < 21
    end[base_off[1:] - 1] = True
    for a in range(0, T, _TOKEN_CHUNK):
        z = min(T, a + _TOKEN_CHUNK)
        e = end[a:z]
        comma = (rnd[a:z] >= 21) & (rnd[a:z] < 36) & ~e
        start = np.empty(z - a, bool)
        start[0] = True if a == 0 else end[a - 1]
        start[1:] = e[:-1]
        codes[a:z] += start.astype(np.int32) * 3 + e.astype(np.int32) + comma.astype(np.int32) * 2
    return _Tokens(lengths=lengths, base_off=base_off, codes=codes)


# --------------------------------------------------------------------------- stages: topics


def _topic_specs(rng_topic: np.random.Generator, words: Sequence[str], a: _Args) -> tuple[_Topics, np.ndarray]:
    """Topic terms, queries and kinds, and the number of graded passages per topic and grade."""
    n, n_topics = a.n, a.n_topics
    V = len(words)
    term_pool_hi = 20000 if n_topics * TOPIC_TERMS <= 20000 - 300 else V
    topic_terms = (rng_topic.choice(np.arange(300, term_pool_hi), size=n_topics * TOPIC_TERMS, replace=False)
                   .reshape(n_topics, TOPIC_TERMS).astype(np.int64))
    term_w = 1.0 / (np.arange(TOPIC_TERMS) + 1.0) ** 0.45
    term_cdf = np.cumsum(term_w) / term_w.sum()
    n_query_terms = rng_topic.integers(2, 6, size=n_topics)
    templates = rng_topic.integers(0, len(_QUERY_TEMPLATES), size=n_topics)
    qids = [str(1001 + t) for t in range(n_topics)]
    queries = [
        _QUERY_TEMPLATES[templates[t]].format(" ".join(words[w] for w in topic_terms[t, : n_query_terms[t]]))
        for t in range(n_topics)
    ]
    kinds = np.array(["normal"] * n_topics, dtype=object)
    n_few = max(1, round(0.12 * n_topics)) if n_topics >= 3 else 0
    n_many = max(1, round(0.08 * n_topics)) if n_topics >= 4 else 0
    kind_perm = rng_topic.permutation(n_topics)
    kinds[kind_perm[:n_few]] = "few"
    kinds[kind_perm[n_few : n_few + n_many]] = "many"
    counts = np.zeros((n_topics, 4), np.int64)  # grades 0 (decoys), 1, 2, 3
    for t in range(n_topics):
        if kinds[t] == "few":
            nrel = int(rng_topic.integers(0, 5))
            n1 = int(rng_topic.integers(1, 10))
            n0 = int(rng_topic.integers(5, 30))
        elif kinds[t] == "many":
            nrel = int(np.clip(round(rng_topic.uniform(0.015, 0.03) * n), 250, 5000))
            n1 = int(round(nrel * rng_topic.uniform(0.3, 0.8)))
            n0 = int(round((nrel + n1) * rng_topic.uniform(0.2, 0.4)))
        else:
            nrel = int(round(math.exp(rng_topic.uniform(math.log(10), math.log(200)))))
            n1 = int(round(nrel * rng_topic.uniform(0.4, 1.5)))
            n0 = int(round((nrel + n1) * rng_topic.uniform(0.3, 0.8))) + 5
        n3 = int(rng_topic.binomial(nrel, rng_topic.uniform(0.2, 0.45)))
        counts[t] = (n0, n1, nrel - n3, n3)
    tp = _Topics(topic_terms=topic_terms, term_w=term_w, term_cdf=term_cdf, n_query_terms=n_query_terms, qids=qids,
                 queries=queries, kinds=kinds)
    return tp, counts


def _graded_passages(rng_topic: np.random.Generator, tp: _Topics, counts: np.ndarray, st: _Structure,
                     a: _Args) -> None:
    """Pick the graded (topic, canonical passage, grade) rows: ``tp.g_topic``, ``tp.g_pid``, ``tp.g_grade``."""
    n_topics, kinds = a.n_topics, tp.kinds
    class_of, is_copy, class_size = st.class_of, st.is_copy, st.class_size
    originals = np.flatnonzero(~is_copy)
    limit = int(0.4 * len(originals))
    if counts.sum() > limit:
        counts = np.floor(counts * (limit / counts.sum())).astype(np.int64)
    # the largest class becomes a decoy of one topic, a large one relevant to another
    sources = np.unique(class_of[is_copy])  # canonical passages of the classes, ascending
    big_order = np.argsort(-class_size[sources], kind="stable")
    forced: list[tuple[int, int, int]] = []  # (topic, source slot, grade)
    if len(sources) >= 2:
        normal_topics = np.flatnonzero(kinds == "normal")
        if len(normal_topics) == 0:
            normal_topics = np.arange(n_topics)
        forced.append((int(rng_topic.integers(n_topics)), int(sources[big_order[0]]), 0))
        forced.append((int(rng_topic.choice(normal_topics)), int(sources[big_order[min(2, len(sources) - 1)]]), 2))
    forced_src = np.array([f[1] for f in forced], np.int64)
    pool_a = rng_topic.permutation(np.setdiff1d(sources, forced_src))
    singletons = np.setdiff1d(originals, sources)
    pool_b = rng_topic.permutation(singletons)
    need = int(counts.sum())
    n_a = min(len(pool_a), int(round(0.2 * need)))
    pick = np.concatenate([pool_a[:n_a], pool_b, pool_a[n_a:]])[:need]
    pick = rng_topic.permutation(pick)
    per_topic = counts.sum(axis=1)
    g_topic = np.repeat(np.arange(n_topics), per_topic)
    g_grade = np.concatenate([np.repeat(np.array([3, 2, 1, 0]), counts[t, ::-1]) for t in range(n_topics)]) \
        if need else np.zeros(0, np.int64)
    g_pid = pick.astype(np.int64)
    if forced:
        g_topic = np.concatenate([g_topic, [f[0] for f in forced]]).astype(np.int64)
        g_pid = np.concatenate([g_pid, forced_src])
        g_grade = np.concatenate([g_grade, [f[2] for f in forced]]).astype(np.int64)
    tp.g_topic, tp.g_pid, tp.g_grade = g_topic, g_pid, g_grade


def _insert_topic_terms(rng_topic: np.random.Generator, tp: _Topics, tok: _Tokens) -> None:
    """Insert topic terms into the graded originals (before copying, so copies carry them too)."""
    g_topic, g_pid, g_grade = tp.g_topic, tp.g_pid, tp.g_grade
    codes = tok.codes
    m = np.select([g_grade == 3, g_grade == 2, g_grade == 1],
                  [rng_topic.integers(6, 11, size=len(g_pid)), rng_topic.integers(4, 8, size=len(g_pid)),
                   rng_topic.integers(2, 5, size=len(g_pid))],
                  rng_topic.integers(2, 5, size=len(g_pid)))
    occ = np.repeat(np.arange(len(g_pid)), m)
    occ_pid = g_pid[occ]
    pos = tok.base_off[occ_pid] + (rng_topic.random(len(occ)) * tok.lengths[occ_pid]).astype(np.int64)
    j_any = np.searchsorted(tp.term_cdf, rng_topic.random(len(occ)))
    j_query = (rng_topic.random(len(occ)) * tp.n_query_terms[g_topic[occ]]).astype(np.int64)
    first_occ = _block_ranks(occ) == 0
    use_query = (g_grade[occ] == 0) | (first_occ & (g_grade[occ] >= 2))
    j = np.where(use_query, j_query, np.minimum(j_any, TOPIC_TERMS - 1))
    term_word = tp.topic_terms[g_topic[occ], j]
    codes[pos] = (term_word * _FORMS + codes[pos] % _FORMS).astype(np.int32)


# --------------------------------------------------------------------------- stages: near-duplicates


def _copies(rng_copy: np.random.Generator, zipf_table: np.ndarray, st: _Structure, tok: _Tokens) -> None:
    """Near-duplicate copies: their word codes, edits and lengths, into ``tok``."""
    lengths, base_off, codes = tok.lengths, tok.base_off, tok.codes
    copy_slots = np.flatnonzero(st.is_copy)
    n_copies = len(copy_slots)
    if n_copies:
        src = st.class_of[copy_slots]
        ls = lengths[src]
        pre_off = np.concatenate([[0], np.cumsum(ls)])
        pre = codes[_segments(base_off[src], ls)]
        n_edits = rng_copy.choice(4, size=n_copies, p=[0.4, 0.3, 0.18, 0.12])
        mode = rng_copy.choice(5, size=n_copies, p=[0.3, 0.2, 0.15, 0.2, 0.15])
        e_copy = np.repeat(np.arange(n_copies), n_edits)
        e_type = rng_copy.integers(0, 3, size=len(e_copy))  # 0 substitute, 1 insert, 2 delete
        e_pos = pre_off[e_copy] + (rng_copy.random(len(e_copy)) * ls[e_copy]).astype(np.int64)
        sub = e_pos[e_type == 0]
        pre[sub] = (_zipf_words(rng_copy, zipf_table, len(sub)) * _FORMS + pre[sub] % _FORMS).astype(np.int32)
        keep = np.ones(len(pre), np.int64)
        keep[e_pos[e_type == 2]] = 0
        ins = np.bincount(e_pos[e_type == 1], minlength=len(pre))
        cnt = keep + ins
        src_tok = np.repeat(np.arange(len(pre)), cnt)
        k_in = np.arange(len(src_tok)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        is_ins = k_in >= keep[src_tok]
        copy_codes = pre[src_tok]
        copy_codes[is_ins] = (_zipf_words(rng_copy, zipf_table, int(is_ins.sum())) * _FORMS).astype(np.int32)
        new_len = np.add.reduceat(cnt, pre_off[:-1])
        copy_off = np.concatenate([[0], np.cumsum(new_len)])
        tok_mode = np.repeat(mode, new_len)
        word = copy_codes // _FORMS
        case = (copy_codes % _FORMS) // 3
        punct = copy_codes % 3
        r = rng_copy.random(len(copy_codes))
        case = np.where(tok_mode == 1, 0, case)
        punct = np.where(tok_mode == 2, 0, punct)
        case = np.where((tok_mode == 3) & (r < 0.15), (case + 1 + (r < 0.05)) % 3, case)
        punct = np.where((tok_mode == 4) & (r < 0.08), (punct + 1 + (r < 0.03)) % 3, punct)
        copy_codes = (word * _FORMS + case * 3 + punct).astype(np.int32)
    else:
        copy_codes = np.zeros(0, np.int32)
        copy_off = np.zeros(1, np.int64)
        n_edits = mode = new_len = np.zeros(0, np.int64)
    final_len = lengths.copy()
    final_len[copy_slots] = new_len
    tok.copy_slots, tok.copy_codes, tok.copy_off = copy_slots, copy_codes, copy_off
    tok.n_edits, tok.mode, tok.final_len = n_edits, mode, final_len


# --------------------------------------------------------------------------- stages: candidate rows


def _term_occurrences(st: _Structure, tok: _Tokens, tp: _Topics, V: int) -> tuple[np.ndarray, np.ndarray]:
    """(topic term id, passage) of every occurrence of a topic term in an original or a copy."""
    n_terms = tp.topic_terms.size
    lut = np.full(V, -1, np.int32)
    lut[tp.topic_terms.ravel()] = np.arange(n_terms, dtype=np.int32)
    term_ids = []
    term_pids = []
    for arr, off, slots in ((tok.codes, tok.base_off, None), (tok.copy_codes, tok.copy_off, tok.copy_slots)):
        for a in range(0, len(arr), 1 << 24):
            tt = lut[arr[a : a + (1 << 24)] // _FORMS]
            hit = np.flatnonzero(tt >= 0)
            p = np.searchsorted(off, hit + a, side="right") - 1
            if slots is None:
                ok = ~st.is_copy[p]
                hit, p = hit[ok], p[ok]
            else:
                p = slots[p]
            term_ids.append(tt[hit].astype(np.int64))
            term_pids.append(p.astype(np.int64))
    return np.concatenate(term_ids), np.concatenate(term_pids)


def _candidate_rows(rng_fill: np.random.Generator, a: _Args, st: _Structure, tok: _Tokens, tp: _Topics,
                    V: int) -> _Rows:
    """Lexical features of every (topic, passage) with a topic term, plus random filler per topic:
    the candidate rows with their BM25, RM3 and semantic scores."""
    n, n_topics, depth = a.n, a.n_topics, a.depth
    term_id, term_pid = _term_occurrences(st, tok, tp, V)
    final_len = tok.final_len
    key, tf = np.unique(term_id * n + term_pid, return_counts=True)
    u_term = key // n
    u_pid = key % n
    df = np.bincount(u_term, minlength=n_topics * TOPIC_TERMS)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    k1, b = 0.9, 0.4
    norm = k1 * (1 - b + b * final_len[u_pid] / final_len.mean())
    contrib = idf[u_term] * tf * (k1 + 1) / (tf + norm)
    u_topic = u_term // TOPIC_TERMS
    u_j = u_term % TOPIC_TERMS
    is_q = u_j < tp.n_query_terms[u_topic]

    # candidate rows: every passage with a topic term, plus random filler per topic
    fill = min(n, 2 * depth)
    fill_key = (np.repeat(np.arange(n_topics, dtype=np.int64), fill) * n
                + rng_fill.integers(0, n, size=n_topics * fill))
    row_key, inv = np.unique(np.concatenate([u_topic * n + u_pid, fill_key]), return_inverse=True)
    inv = inv[: len(key)]
    r_topic = row_key // n
    short = np.flatnonzero(np.bincount(r_topic, minlength=n_topics) < depth)
    if len(short):  # small corpora: make sure every topic has enough candidates
        extra = np.concatenate([t * n + rng_fill.permutation(n)[:depth] for t in short])
        row_key = np.unique(np.concatenate([row_key, extra]))
        r_topic = row_key // n
        inv = np.searchsorted(row_key, u_topic * n + u_pid)
    r_pid = row_key % n
    nrows = len(row_key)
    bm25 = np.bincount(inv, weights=np.where(is_q, contrib, 0.0), minlength=nrows)
    rm3 = bm25 + 0.05 * np.bincount(inv, weights=np.where(is_q, 0.0, contrib), minlength=nrows)
    sem = np.bincount(inv, weights=tp.term_w[u_j] * np.log1p(tf), minlength=nrows)
    bm25 = np.round(bm25, 10)  # identical passages: identical scores, whatever the summation order
    rm3 = np.round(rm3, 10)
    return _Rows(row_key=row_key, r_topic=r_topic, r_pid=r_pid, bm25=bm25, rm3=rm3, sem=sem)


def _row_grades(rng_runs: np.random.Generator, a: _Args, st: _Structure, tp: _Topics,
                rows: _Rows) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Grades of the rows (expanded to near-duplicates), their standardized scores and the latent
    relevance the runs see; returns the expanded graded rows (topic, pid, grade)."""
    n, nrows, row_key = a.n, rows.nrows, rows.row_key
    eg_topic, eg_pid, eg_grade = st.expand(tp.g_topic, tp.g_pid, tp.g_grade)
    eg_key = eg_topic * n + eg_pid
    eg_sort = np.argsort(eg_key, kind="stable")
    eg_key, eg_grade_s = eg_key[eg_sort], eg_grade[eg_sort]
    r_grade = np.full(nrows, -1, np.int64)
    if len(eg_key):
        loc = np.minimum(np.searchsorted(eg_key, row_key), len(eg_key) - 1)
        hit = eg_key[loc] == row_key
        r_grade[hit] = eg_grade_s[loc[hit]]
    r_class = rows.r_topic * n + st.class_of[rows.r_pid]
    cls_key, rows.r_cls = np.unique(r_class, return_inverse=True)
    rows.n_cls_rows = len(cls_key)
    rows.lexz = rows.zscore(rows.bm25, a.n_topics)
    rows.semz = rows.zscore(rows.sem, a.n_topics)
    rows.latent = np.maximum(r_grade, 0) + 0.4 * rng_runs.normal(size=rows.n_cls_rows)[rows.r_cls]
    return eg_topic, eg_pid, eg_grade


def _first_stage(rng_runs: np.random.Generator, rows: _Rows, depth: int) -> None:
    """The first-stage pools: BM25's top and a "dense" retriever's top per topic."""
    k_first = max(FIRST_STAGE, depth)
    nrows = rows.nrows
    in_bm25 = np.zeros(nrows, bool)
    in_bm25[rows.top_rows(rows.bm25, None, k_first)] = True
    dense = rows.semz + 0.5 * rows.latent + 0.5 * rng_runs.normal(size=nrows)
    in_dense = np.zeros(nrows, bool)
    in_dense[rows.top_rows(dense, None, k_first)] = True
    rows.in_bm25 = in_bm25
    rows.first_stage = in_bm25 | in_dense


# --------------------------------------------------------------------------- stages: runs


def _plan_runs(rng_runs: np.random.Generator, a: _Args, n_cls_rows: int) -> tuple[list[dict], list[dict]]:
    """The runs (baselines, then each group's) with their hidden parameters, and the groups'."""
    subtasks = a.subtasks
    full_task = next((s for s in subtasks if s != "rerank"), subtasks[0])
    runs: list[dict] = []
    runs.append(dict(run="p_bm25", group="organizers", priority=1, baseline=True, subtask=full_task,
                     style="bm25", tie_order="desc", quality=None))
    runs.append(dict(run="p_bm25rm3", group="organizers", priority=2, baseline=True, subtask=full_task,
                     style="bm25", tie_order="desc", quality=None))
    styles = ("logit", "prob", "dist", "logit", "prob")
    group_params = []
    for g in range(a.n_groups):
        name = "grp" + _letters(g)
        gp = dict(
            quality=float(rng_runs.uniform(0.3, 1.6)),
            lex=float(rng_runs.uniform(0.2, 1.0)),
            sem=float(rng_runs.uniform(0.2, 1.0)),
            sigma=float(rng_runs.uniform(1.0, 1.8)),
            style=styles[int(rng_runs.integers(len(styles)))],
            tie_order="asc" if rng_runs.random() < 0.3 else "desc",
            main=subtasks[int(rng_runs.integers(len(subtasks)))],
            noise=rng_runs.normal(size=n_cls_rows),
        )
        group_params.append(gp)
        k = int(rng_runs.integers(a.lo, a.hi + 1))
        quals = gp["quality"] * rng_runs.uniform(0.8, 1.1, size=k)
        prio = np.argsort(np.argsort(-(quals + rng_runs.normal(0, 0.1, size=k)), kind="stable"), kind="stable") + 1
        for i in range(k):
            sub = gp["main"] if (len(subtasks) == 1 or rng_runs.random() < 0.7) else \
                subtasks[int(rng_runs.integers(len(subtasks)))]
            runs.append(dict(run=f"{name}_run{i + 1}", group=name, priority=int(prio[i]), baseline=False,
                             subtask=sub, style=gp["style"], tie_order=gp["tie_order"], quality=round(float(quals[i]), 4),
                             _g=g, _lex=gp["lex"] * float(rng_runs.uniform(0.8, 1.2)),
                             _sem=gp["sem"] * float(rng_runs.uniform(0.8, 1.2)), _sigma=float(rng_runs.uniform(0.8, 1.4)),
                             _offset=float(rng_runs.uniform(-2, 2)), _seed=int(rng_runs.integers(2**32))))
    return runs, group_params


def _run_selection(r: dict, group_params: list[dict], rows: _Rows, n_topics: int,
                   depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows run ``r`` retrieves (in rank order, topic by topic) and their output scores."""
    if r["baseline"]:
        raw = rows.bm25 if r["run"] == "p_bm25" else rows.rm3
        sel = rows.top_rows(raw, None, depth)
        return sel, np.round(raw[sel], 4)
    gp = group_params[r["_g"]]
    rr = np.random.default_rng(r["_seed"])
    q_topic = r["quality"] * rr.lognormal(0.0, 0.5, size=n_topics)  # runs fail on some topics
    s = (r["_lex"] * rows.lexz + r["_sem"] * rows.semz + q_topic[rows.r_topic] * rows.latent
         + gp["sigma"] * gp["noise"][rows.r_cls] + r["_sigma"] * rr.standard_t(3, size=rows.nrows))
    mask = rows.in_bm25 if r["subtask"] == "rerank" else rows.first_stage
    sel = rows.top_rows(s, mask, depth)
    x = s[sel]  # in rank order, topic by topic
    starts = np.flatnonzero(_block_ranks(rows.r_topic[sel]) == 0)
    per_topic = np.diff(np.append(starts, len(x)))
    if r["style"] == "logit":
        out_score = np.round(2.0 * x + r["_offset"], 5)
    elif r["style"] == "prob":  # a probability from per-topic standardized scores
        mean = np.repeat(np.add.reduceat(x, starts) / per_topic, per_topic)
        sd = np.sqrt(np.repeat(np.add.reduceat((x - mean) ** 2, starts) / per_topic, per_topic))
        out_score = np.round(1.0 / (1.0 + np.exp(-(1.5 * (x - mean) / np.maximum(sd, 1e-9) - 0.5))), 4)
    else:  # negative distance from the topic's best
        top = np.repeat(x[starts], per_topic)
        out_score = np.round(-3.0 * (top - x) - 1.0, 3)
    return sel, out_score


def _write_runs(out: Path, a: _Args, runs: list[dict], group_params: list[dict], rows: _Rows, qids: list[str],
                names: FlatNames | MsmarcoV2Names, report: Callable[[str, float], None]) -> tuple[list, list, int]:
    """Write every run file (and remove stale ones): the (topic * n + pid) keys of each run's top
    10 and top 20, and the number of tied score pairs."""
    n = a.n
    run_dir = out / "runs"
    run_dir.mkdir(parents=True, exist_ok=True)
    top10: list[np.ndarray] = []
    top20: list[np.ndarray] = []
    tie_lines = 0
    for ri, r in enumerate(runs):
        sel, out_score = _run_selection(r, group_params, rows, a.n_topics, a.depth)
        t_sel = rows.r_topic[sel]
        p_sel = rows.r_pid[sel]
        pid_key = rows.r_key[sel] if r["tie_order"] == "asc" else -rows.r_key[sel]
        o = np.lexsort((pid_key, -out_score, t_sel))
        t_sel, p_sel, out_score = t_sel[o], p_sel[o], out_score[o]
        rank = _block_ranks(t_sel) + 1
        same = (t_sel[1:] == t_sel[:-1]) & (out_score[1:] == out_score[:-1])
        tie_lines += int(same.sum())
        r["tied_pairs"] = int(same.sum())
        top10.append(t_sel[rank <= 10] * n + p_sel[rank <= 10])
        top20.append(t_sel[rank <= 20] * n + p_sel[rank <= 20])
        name = r["run"]
        fmt = "{:.4f}" if r["style"] in ("bm25", "prob") else ("{:.5f}" if r["style"] == "logit" else "{:.3f}")
        lines = [
            f"{qids[t]} Q0 {p} {k} {fmt.format(sc)} {name}\n"
            for t, p, k, sc in zip(t_sel.tolist(), names.pids(p_sel), rank.tolist(), out_score.tolist())
        ]
        with atomic_open(run_dir / f"{name}.run") as fh:
            fh.write("".join(lines))
        report("runs", 0.6 + 0.15 * (ri + 1) / len(runs))
    run_files = {f"{r['run']}.run" for r in runs}
    for stale in sorted(run_dir.glob("*.run")):
        if stale.name not in run_files:
            stale.unlink()
    return top10, top20, tie_lines


def _write_manifest(out: Path, runs: list[dict]) -> None:
    with atomic_open(out / "manifest.csv") as fh:
        fh.write("run,group,priority,baseline,subtask,file\n")
        for r in sorted(runs, key=lambda r: (r["group"] != "organizers", r["group"], r["priority"])):
            fh.write(f"{r['run']},{r['group']},{r['priority']},{'true' if r['baseline'] else 'false'},"
                     f"{r['subtask']},{r['run']}.run\n")


# --------------------------------------------------------------------------- stages: qrels, topics, corpus


def _write_hidden_qrels(rng_qrels: np.random.Generator, out: Path, n: int, st: _Structure, tp: _Topics, eg: tuple,
                 top20: list[np.ndarray], names: FlatNames | MsmarcoV2Names) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Qrels: graded + decoys + a sample of pooled non-relevant passages, expanded. Returns the
    qrels' topics and grades and the sampled (topic * n + canonical pid) keys."""
    eg_topic, eg_pid, eg_grade = eg
    class_of = st.class_of
    pooled = np.unique(np.concatenate(top20)) if top20 else np.zeros(0, np.int64)
    p_topic, p_pid = pooled // n, pooled % n
    p_cls = np.unique(p_topic * n + class_of[p_pid])
    graded_cls = np.unique(tp.g_topic * n + tp.g_pid)
    p_cls = p_cls[~np.isin(p_cls, graded_cls)]
    p_cls = p_cls[rng_qrels.random(len(p_cls)) < 0.5]
    z_topic, z_pid, z_grade = st.expand(p_cls // n, p_cls % n, np.zeros(len(p_cls), np.int64))
    q_topic = np.concatenate([eg_topic, z_topic])
    q_pid = np.concatenate([eg_pid, z_pid])
    q_grade = np.concatenate([eg_grade, z_grade])
    q_order = np.lexsort((names.key(q_pid), q_topic))
    q_topic, q_pid, q_grade = q_topic[q_order], q_pid[q_order], q_grade[q_order]
    assert len(np.unique(q_topic * n + q_pid)) == len(q_topic), "qrels must be unique per topic and pid"
    qids = tp.qids
    with atomic_open(out / "qrels.txt") as fh:
        fh.write("".join(f"{qids[t]} 0 {p} {g}\n"
                         for t, p, g in zip(q_topic.tolist(), names.pids(q_pid), q_grade.tolist())))
    return q_topic, q_grade, p_cls


def _write_topics_and_truth(out: Path, tp: _Topics, st: _Structure, names: FlatNames | MsmarcoV2Names) -> np.ndarray:
    """Write the topics and the near-duplicate truth; returns the passages in a class of two or more."""
    class_of = st.class_of
    with atomic_open(out / "topics.tsv") as fh:
        fh.write("".join(f"{q}\t{text}\n" for q, text in zip(tp.qids, tp.queries)))
    in_class = np.flatnonzero(st.class_size[class_of] >= 2)
    nd_order = in_class[np.lexsort((in_class, class_of[in_class]))]
    with atomic_open(out / "neardup_truth.tsv") as fh:
        fh.write("".join(f"{c}\t{p}\n" for c, p in zip(names.pids(class_of[nd_order]), names.pids(nd_order))))
    return in_class


def _names(a: _Args, st: _Structure, tok: _Tokens, surface: pa.Array) -> FlatNames | MsmarcoV2Names:
    """The passages' ids in the corpus layout (``msmarco-v2``: from every passage's text length)."""
    if a.layout == "flat":
        return FlatNames(a.n, len(st.doc_sizes))
    word_len = pc.binary_length(surface).to_numpy().astype(np.int64)
    text_len = np.zeros(a.n, np.int64)
    for slot0, slot1, tokens, ln in _token_chunks(tok, 0, a.n):
        text_len[slot0:slot1] = np.add.reduceat(word_len[tokens], np.cumsum(ln) - ln) + ln - 1  # ln >= 1
    return MsmarcoV2Names(st.doc_sizes, text_len, a.shards)


def _token_chunks(tok: _Tokens, start: int, stop: int, chunk: int = 100_000):
    """``(a, z, tokens, lengths)`` of the passages ``a..z`` in chunks from ``start`` to ``stop``:
    their word codes one after the other (a copy's from the copies')."""
    copy_index = np.full(len(tok.final_len), -1, np.int64)
    copy_index[tok.copy_slots] = np.arange(len(tok.copy_slots))
    for a in range(start, stop, chunk):
        z = min(stop, a + chunk)
        ln = tok.final_len[a:z]
        cp = copy_index[a:z] >= 0
        tokens = np.empty(int(ln.sum()), np.int32)
        at = np.cumsum(ln) - ln
        orig = np.flatnonzero(~cp)
        tokens[_segments(at[orig], ln[orig])] = tok.codes[_segments(tok.base_off[a + orig], ln[orig])]
        cps = np.flatnonzero(cp)
        tokens[_segments(at[cps], ln[cps])] = tok.copy_codes[_segments(tok.copy_off[copy_index[a + cps]], ln[cps])]
        yield a, z, tokens, ln


def _texts(tok: _Tokens, surface: pa.Array, start: int, stop: int):
    """``(a, z, text)``: the passages' texts (words joined by spaces), in chunks."""
    for a, z, tokens, ln in _token_chunks(tok, start, stop):
        strings = surface.take(pa.array(tokens))
        offsets = pa.array(np.concatenate([[0], np.cumsum(ln)]).astype(np.int32))
        yield a, z, pc.binary_join(pa.ListArray.from_arrays(offsets, strings), " ")


def _write_corpus(out: Path, n: int, st: _Structure, tok: _Tokens, surface: pa.Array,
                  names: FlatNames | MsmarcoV2Names, report: Callable[[str, float], None]) -> None:
    """The corpus text, rendered in chunks with pyarrow: ``corpus.jsonl``, or the shards of the
    ``msmarco-v2`` layout (:mod:`qrelkit.simulate.layout`)."""
    if isinstance(names, MsmarcoV2Names):
        names.write(out / names.folder, lambda a, z: _texts(tok, surface, a, z),
                    lambda z: report("corpus", 0.8 + 0.19 * z / n))
        return
    docid_of = np.repeat(np.arange(len(st.doc_sizes), dtype=np.int64), st.doc_sizes)
    with atomic_path(out / "corpus.jsonl") as tmp, open(tmp, "wb") as fh:
        for a, z, text in _texts(tok, surface, 0, n):
            pid = pc.utf8_lpad(pc.cast(pa.array(np.arange(a, z)), pa.string()), width=names.pid_width, padding="0")
            did = pc.utf8_lpad(pc.cast(pa.array(docid_of[a:z]), pa.string()), width=names.doc_width, padding="0")
            line = pc.binary_join_element_wise('{"pid": "p', pid, '", "passage": "', text, '", "docid": "d', did,
                                               '"}\n', "")
            fh.write(string_bytes(line))
            report("corpus", 0.8 + 0.19 * z / n)


# --------------------------------------------------------------------------- stages: summary


def _topics_info(a: _Args, st: _Structure, tp: _Topics, pool10_sizes: np.ndarray, q_topic: np.ndarray,
                 q_grade: np.ndarray, p_cls: np.ndarray) -> list[dict]:
    """Per topic: kind, query, graded passages before and after expansion, depth-10 pool size."""
    n = a.n
    g_topic, g_pid, g_grade = tp.g_topic, tp.g_pid, tp.g_grade
    topics_info = []
    for t in range(a.n_topics):
        gm = g_topic == t
        qm = q_topic == t
        topics_info.append({
            "qid": tp.qids[t],
            "kind": str(tp.kinds[t]),
            "query": tp.queries[t],
            "query_terms": int(tp.n_query_terms[t]),
            "graded": {str(g): int(((g_grade == g) & gm).sum()) for g in range(4)},
            "relevant": int(((g_grade >= 2) & gm).sum()),
            "relevant_with_duplicates": int(((g_grade >= 2) & gm & (st.class_size[g_pid] >= 2)).sum()),
            "qrels": int(qm.sum()),
            "qrels_relevant": int(((q_grade >= 2) & qm).sum()),
            "expansion": int(qm.sum() - ((g_topic == t).sum() + ((p_cls // n) == t).sum())),
            "pool_depth10": int(pool10_sizes[t]),
        })
    return topics_info


def _summary(a: _Args, st: _Structure, tok: _Tokens, tp: _Topics, runs: list[dict], V: int, in_class: np.ndarray,
             tie_lines: int, top10: list[np.ndarray], q_topic: np.ndarray, q_grade: np.ndarray,
             p_cls: np.ndarray, names: FlatNames | MsmarcoV2Names) -> dict:
    """The JSON-able summary :func:`simulate_campaign` returns."""
    n, n_topics, depth = a.n, a.n_topics, a.depth
    sizes, n_edits, mode = st.sizes, tok.n_edits, tok.mode
    n_classes, n_copies = len(sizes), len(tok.copy_slots)
    pool10 = np.unique(np.concatenate(top10)) if top10 else np.zeros(0, np.int64)
    pool10_sizes = np.bincount(pool10 // n, minlength=n_topics)
    size_hist = np.bincount(np.digitize(sizes, [3, 4, 11, 101, 1001]), minlength=6) if n_classes else np.zeros(6, int)
    grade_counts = np.bincount(q_grade, minlength=4)
    topics_info = _topics_info(a, st, tp, pool10_sizes, q_topic, q_grade, p_cls)
    layout = {} if a.layout == "flat" else {"layout": a.layout, "shards": a.shards}
    return {
        "generator": "qrelkit.simulate.campaign",
        "parameters": {
            "n_passages": n, "n_docs": a.n_docs, "n_topics": n_topics, "n_groups": a.n_groups,
            "runs_per_group": [a.lo, a.hi], "depth": depth, "dup_fraction": float(a.dup_fraction), "seed": a.seed,
            "subtasks": list(a.subtasks), **layout,
        },
        "files": {
            "corpus": names.folder or "corpus.jsonl", "neardup_truth": "neardup_truth.tsv", "topics": "topics.tsv",
            "qrels": "qrels.txt", "manifest": "manifest.csv", "runs": "runs", "summary": "summary.json",
        },
        "counts": {
            "passages": n,
            "documents": len(st.doc_sizes),
            "words": int(tok.final_len.sum()),
            "vocabulary": V,
            "neardup_classes": n_classes,
            "neardup_passages": int(len(in_class)),
            "neardup_copies": n_copies,
            "largest_class": int(sizes.max()) if n_classes else 0,
            "class_sizes": dict(zip(["2", "3", "4-10", "11-100", "101-1000", ">1000"], map(int, size_hist))),
            "copy_edits": {str(e): int((n_edits == e).sum()) for e in range(4)},
            "copies_case_or_punct_only": int(((n_edits == 0) & (mode != 0)).sum()) if n_copies else 0,
            "exact_copies": int(((n_edits == 0) & (mode == 0)).sum()) if n_copies else 0,
            "topics": n_topics,
            "groups": a.n_groups + 1,
            "runs": len(runs),
            "baseline_runs": sum(r["baseline"] for r in runs),
            "run_lines": len(runs) * n_topics * depth,
            "tied_score_pairs": tie_lines,
            "qrels": int(len(q_grade)),
            "qrels_by_grade": {str(g): int(grade_counts[g]) for g in range(4)},
            "topics_without_relevant": int(sum(1 for x in topics_info if x["relevant"] == 0)),
        },
        "pool": {
            "depth": 10,
            "runs": len(runs),
            "mean_distinct_per_topic": round(float(pool10_sizes.mean()), 2),
            "min_distinct_per_topic": int(pool10_sizes.min()),
            "max_distinct_per_topic": int(pool10_sizes.max()),
        },
        "topics": topics_info,
        "runs": [{k: v for k, v in r.items() if not k.startswith("_")} for r in runs],
    }


def _letters(i: int) -> str:
    """0 -> A, 25 -> Z, 26 -> AA, ... (spreadsheet column names)."""
    s = ""
    i += 1
    while i:
        i, rem = divmod(i - 1, 26)
        s = chr(65 + rem) + s
    return s
