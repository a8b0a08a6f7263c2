"""Protocol configuration files (TOML) and their one declared schema.

A config holds every threshold of a judging protocol (see ``configs/trec-dl-2022.toml``).
Commands take ``--config FILE``; an explicit flag overrides the file; the built-in defaults
(the TREC 2022 Deep Learning values) fill whatever the file leaves out.

:data:`SCHEMA` declares every section and key: its type, range or choices, default and a
one-line help. It is the single source of defaults (:data:`DEFAULTS`, :func:`default`, the
library's parameter classes, docs/commands.md). A file is validated when it is loaded: an
unknown section or key is ``[unknown-key]`` (with the closest known name), a value of the
wrong type ``[bad-type]`` (an integer key takes no float and no bool: ``depth = 2.5`` is an
error, not 2), a number outside its range ``[out-of-range]``, a word outside its choices
``[bad-choice]`` — each with the file and line. Flag values given to :meth:`Config.get_value`
pass the same checks.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from qrelkit.errors import InputError
from qrelkit.io.text import read_text

# --------------------------------------------------------------------------- the schema


@dataclass(frozen=True)
class Key:
    """One configuration key.

    ``type``: ``int`` | ``float`` | ``bool`` | ``str`` | ``str|int`` | ``list[int]`` | ``list[str]``
    | ``map[int,int]`` (a table of grade -> grade) | ``map[str,list[int]]`` (a table of named
    grade lists). ``optional``: None is allowed (the default None, or ``none`` given with
    ``--set``; TOML has no null). ``choices`` apply to a ``str`` and to each item of a ``list[str]``;
    ``min``/``max`` (inclusive) to numbers and to each item of a ``list[int]``; ``fixed``: the only
    accepted value is the default (the key documents a fixed behaviour)."""

    name: str
    type: str
    default: Any
    help: str
    choices: tuple | None = None
    min: float | None = None
    max: float | None = None
    optional: bool = False
    fixed: bool = False

    def describe_type(self) -> str:
        t = self.type + (" or none" if self.optional else "")
        if self.choices:
            t += ": " + " / ".join(str(c) for c in self.choices)
        if self.min is not None or self.max is not None:
            lo = "" if self.min is None else f"{self.min:g} <= "
            hi = "" if self.max is None else f" <= {self.max:g}"
            t += f" ({lo}x{hi})"
        return t


def _keys(*keys: Key) -> dict[str, Key]:
    return {k.name: k for k in keys}


_UNIT = dict(min=0.0, max=1.0)
_THREADS = ("fractional", "local", "all")
CAMPAIGN_STAGES = ("validate", "select", "dedupe", "pool", "screening", "pool-rest", "fractional", "cal", "qrels",
                   "evaluate", "reuse", "report")

#: section (``stopping.knee`` for ``[stopping.knee]``) -> key name -> :class:`Key`
SCHEMA: dict[str, dict[str, Key]] = {
    "protocol": _keys(
        Key("name", "str", "", "name of the protocol (informative)"),
        Key("source", "str", "", "where the protocol is published (informative)"),
    ),
    "runs": _keys(
        Key("max_depth", "int", None, "at most this many items per topic in a run (rule max-depth); none: no limit",
            min=1, optional=True),
        Key("expected_depth", "int", None, "fewer items than this per topic is reported (warning shallow-topics)",
            min=1, optional=True),
        Key("lenient", "bool", False, "repair run defects (counted) instead of failing on the first"),
    ),
    "selection": _keys(
        Key("include_baselines", "bool", True, "every baseline run feeds the pool"),
        Key("per_group", "int", 3, "the N highest-priority runs per group (and subtask) feed the pool", min=0),
        Key("by_subtask", "bool", True, "apply per_group per subtask"),
        Key("subtasks", "list[str]", [], "the track's subtasks (informative; subtasks come from the manifest)"),
        Key("priority_order", "str", "ascending", "ascending: priority 1 is a group's most important run",
            choices=("ascending", "descending")),
        Key("include", "list[str]", [], "runs always pooled"),
        Key("exclude", "list[str]", [], "runs never pooled"),
    ),
    "pool": _keys(
        Key("depth", "int", 10, "pool depth: the top k of every pooled run", min=1),
        Key("dedupe", "bool", True, "pool near-duplicate class ids when classes are given (informative)"),
        Key("judged", "str", "mark", "items already in the given qrels: keep, mark or drop them",
            choices=("keep", "mark", "drop")),
        Key("order", "list[str]", ["min_rank", "n_runs desc", "docid"], "assessor order of the pool (fixed)",
            fixed=True),
        Key("ties", "str", "docid-desc", "runs' score ties: docid descending (trec_eval), ascending, or file order",
            choices=("docid-desc", "docid-asc", "file-order")),
    ),
    "top1": _keys(
        Key("perfect_min_rel", "int", 1, "qrels with at least this grade join the top-1 pool (the perfect run)",
            min=0),
        Key("perfect", "str", "all", "all such qrels, or only the topic's best-graded", choices=("all", "best")),
    ),
    "fused": _keys(
        Key("method", "str", "rrf", "rank fusion of the runs", choices=("rrf", "rbp")),
        Key("take", "int", 100, "items per topic taken from the fused ranking", min=1),
        Key("rrf_k", "float", 60.0, "k of reciprocal rank fusion 1 / (k + rank)", min=0.0),
        Key("rbp_p", "float", 0.8, "persistence p of RBP fusion", **_UNIT),
    ),
    "screen": _keys(
        Key("first_n", "int", 100, "the assessor judges the first N items of a topic's pool first", min=1),
        Key("discard_if_relevant_share_at_least", "float", 0.5,
            "discard the topic when at least this share of the first N is relevant", **_UNIT),
        Key("discard_if_no_relevant", "bool", True, "discard the topic when none of the first N is relevant"),
    ),
    "fractional": _keys(
        Key("fraction", "float", 0.1, "share of a seeded random order of the deduplicated corpus", **_UNIT),
        Key("seed", "int", 0, "seed of that random order", min=0),
    ),
    "batch": _keys(
        Key("first_n", "int", 100, "per topic: the first N in pool order form the first batch", min=1),
        Key("assessors_per_item", "int", 1, "assessors judging each item (never one assessor twice)", min=1),
        Key("seed", "int", 0, "seed of the assignment to assessors", min=0),
    ),
    "labels": _keys(
        Key("scale", "list[int]", [0, 1, 2, 3], "grades an assessor may give"),
        Key("passage_relevant", "list[int]", [2, 3], "grades that make a passage relevant (scheme 'passage')"),
        Key("document_relevant", "list[int]", [1, 2, 3], "grades that make a document relevant (scheme 'document')"),
        Key("document_rule", "str", "max", "passage -> document grade", choices=("max", "min", "median_high")),
        Key("grade_map", "map[int,int]", {}, "passage grade -> document grade table applied first, e.g. { 1 = 0 }"),
        Key("schemes", "map[str,list[int]]", {}, "further named binarization schemes: name = [grades]"),
        Key("vote_threshold", "int", 2, "several assessors: a vote is relevant at this grade or above"),
        Key("graded", "str", "ceil_median", "graded label of several assessors",
            choices=("ceil_median", "median_high")),
        Key("fallback", "list[str]", ["original", "lowest"], "no majority (a tie): these rules, left to right",
            choices=("original", "lowest", "highest", "not-relevant", "relevant", "drop")),
        Key("original_threshold", "int", 1, "an original qrel at or above this grade is relevant"),
        Key("min_assessors", "int", 1, "a topic enters the evaluation set with at least this many assessors", min=1),
        Key("require_original_relevant", "bool", False, "a topic also needs a relevant original qrel"),
        Key("label", "str", "graded", "qrels written from aggregated labels", choices=("graded", "binary")),
        Key("agreement_level", "str", "ordinal", "Krippendorff's alpha level of measurement",
            choices=("nominal", "ordinal", "interval", "ratio")),
    ),
    "eval": _keys(
        Key("measures", "list[str]", ["nDCG@10", "AP", "RR@10", "P@10", "Judged@10"], "ir-measures measures"),
        Key("relevant", "str|int", None, "relevant grades of binary measures: a scheme or a level; none: 1",
            optional=True),
        Key("missing", "str", "zero", "judged topics missing from a run", choices=("zero", "skip", "error")),
        Key("k", "int", 10, "outcome breakdown: top k", min=1),
        Key("tests", "list[str]", ["ttest", "wilcoxon", "ranksum", "randomization"], "significance tests",
            choices=("ttest", "wilcoxon", "ranksum", "randomization")),
        Key("corrections", "list[str]", ["bonferroni", "holm"], "multiple-comparison corrections",
            choices=("bonferroni", "holm")),
        Key("alpha", "float", 0.05, "significance level", **_UNIT),
        Key("randomizations", "int", 10000, "permutations of the randomization test", min=1),
        Key("seed", "int", 0, "seed of the randomization test", min=0),
        Key("duplicate_measures", "list[str]", ["P@10", "nDCG@10"], "measures of the near-duplicate treatments"),
        Key("depth", "int", None, "evaluate runs cut at this depth; none: whole runs", min=1, optional=True),
        Key("ranking", "str", "trec_eval", "order of a run's documents: trec_eval (scores as float32, ties by "
            "docid descending) or exact (64-bit scores)", choices=("trec_eval", "exact")),
    ),
    "prefs": _keys(
        Key("pairs_per_task", "int", 10, "real pairs per crowd task", min=1),
        Key("test_pairs", "int", 3, "test pairs per task (known relevant vs. off-topic)", min=0),
        Key("test_min_rel", "int", 1, "grade a qrel needs to be the known relevant passage of a test pair"),
        Key("price_per_task", "float", 2.0, "paid to the worker per task", min=0.0),
        Key("fee_per_task", "float", 0.4, "platform fee per task", min=0.0),
        Key("assignments", "int", 1, "workers per task", min=1),
        Key("alpha", "float", 0.05, "win ratios: significance level", **_UNIT),
        Key("correction", "str", "bonferroni", "win ratios: correction", choices=("bonferroni", "holm")),
        Key("measure", "str", "RR@10", "re-scoring measure (ir-measures)"),
        Key("rel", "int", 1, "original qrels: grade counted as relevant by the measure"),
        Key("ci", "str", "t", "confidence intervals", choices=("t", "bootstrap")),
        Key("ci_level", "float", 0.95, "confidence level", **_UNIT),
        Key("bootstrap_resamples", "int", 10000, "bootstrap resamples", min=1),
        Key("seed", "int", 0, "seed of tasks, bootstrap and the simulated oracle", min=0),
        Key("workers", "int", 5, "simulated workers", min=1),
        Key("error_rate", "float", 0.1, "simulated: a good worker picks the worse passage", **_UNIT),
        Key("test_error_rate", "float", 0.0, "simulated: a worker fails a test pair", **_UNIT),
        Key("ties", "str", "latent", "simulated: equal grades", choices=("latent", "random")),
        Key("failing_mode", "str", "random", "simulated: a failing worker's answers", choices=("random", "inverted")),
    ),
    "cal": _keys(
        Key("batch_size", "int", 25, "passages per CAL batch", min=1),
        Key("fractional_batch_size_later", "int", 50, "fractional thread: batch size from fractional_later_from on",
            min=1),
        Key("fractional_later_from", "int", 2, "fractional thread: first iteration of the later batch size", min=1),
        Key("schedule", "str", "fixed", "batch sizes: fixed, or BMI's growing schedule", choices=("fixed", "bmi")),
        Key("negatives", "int", 100, "random unjudged candidates trained as non-relevant", min=0),
        Key("C", "float", 1.0, "inverse L2 regularization of the logistic regression", min=0.0),
        Key("class_weight", "str", "balanced", "class weights of the logistic regression",
            choices=("balanced", "none")),
        Key("query_document", "bool", True, "the query text trains as one relevant document"),
        Key("seed", "int", 0, "seed of the negatives", min=0),
        Key("threads", "list[str]", list(_THREADS), "CAL threads per topic", choices=_THREADS),
        Key("official_thread", "str", "all", "thread whose judgments are official (informative)", choices=_THREADS),
        Key("budget", "int", None, "judging budget per topic and thread; none: no budget", min=1, optional=True),
        Key("shard_size", "int", 1_000_000, "features: passages per shard of the feature store (memory while "
            "building and scoring is about one shard)", min=1),
        Key("hashing", "int", None, "features: fold words into this many hash buckets (bounded vocabulary); none: "
            "every distinct word", min=1, optional=True),
    ),
    "stopping": _keys(
        Key("accept_density_below", "float", 0.4, "density rule: accept below this density ...", **_UNIT),
        Key("accept_min_judged", "int", 150, "... with at least this many judged ...", min=0),
        Key("accept_min_relevant", "int", 4, "... and at least this many relevant", min=0),
        Key("reject_min_judged", "int", 301, "reject with at least this many judged ...", min=0),
        Key("reject_density_above", "float", 0.5, "... and a density above this", **_UNIT),
        Key("budget_min_judged", "int", 150, "budget spent: reject with fewer judged than this ...", min=0),
        Key("budget_min_relevant", "int", 4, "... or fewer relevant than this ...", min=0),
        Key("budget_density_at_least", "float", 0.4, "... or a density at least this", **_UNIT),
    ),
    "stopping.knee": _keys(
        Key("min_judged", "int", 150, "knee rule: judge at least this many first", min=0),
        Key("ratio", "float", 6.0, "slope ratio that stops (adjust = false)", min=0.0),
        Key("adjust", "bool", True, "published adjustment: ratio adjust_base - min(relevant, adjust_cap)"),
        Key("adjust_base", "int", 156, "base of the adjusted ratio", min=0),
        Key("adjust_cap", "int", 150, "cap on the relevant count in the adjusted ratio", min=0),
    ),
    "stopping.budget": _keys(
        Key("ratio", "float", 6.0, "budget rule: slope ratio that stops", min=0.0),
        Key("target_size", "int", 10, "stop when judged >= target_size x collection / relevant (and the ratio)",
            min=1),
        Key("collection_share", "float", 0.75, "stop when this share of the collection is judged", **_UNIT),
    ),
    "stopping.target": _keys(
        Key("size", "int", 10, "target rule: relevant passages in the target sample", min=1),
    ),
    "reuse": _keys(
        Key("procedure", "str", "group", "leave out one group, one run or one type", choices=("group", "run", "type")),
        Key("uniqueness", "str", "pooled", "'only it contributed' through the pooled or all submitted runs",
            choices=("pooled", "submitted")),
        Key("orphans", "str", "shared", "judged items no run contributed: never removed, or attributed",
            choices=("shared", "retrieved")),
        Key("orphan_depth", "int", 100, "orphans retrieved: attributed within this depth", min=1),
        Key("removal", "str", "remove", "unique judged items: removed, or kept as unjudged",
            choices=("remove", "unjudged")),
        Key("measures", "list[str]", None, "measures of the study; none: AP, nDCG@10, P@10, Bpref, Judged@10",
            optional=True),
        Key("density_threshold", "float", 0.4, "'sufficiently complete' at this relevance density or below", **_UNIT),
        Key("voorhees_relevant_share", "float", 0.333, "Voorhees' share of relevant items found by one group",
            **_UNIT),
    ),
    "campaign": _keys(
        Key("skip", "list[str]", [], "stages left out, e.g. [\"cal\"] or [\"fractional\"] (validate, select, pool and "
            "qrels always run)", choices=CAMPAIGN_STAGES),
        Key("assessors", "list[str]", ["A01", "A02", "A03", "A04"], "named assessors; topic i is owned by assessor "
            "i mod n"),
        Key("owner_judges_cal", "bool", True, "the assessor who screened a topic judges its CAL rounds (else: "
            "round-robin over the assessors)"),
        Key("combine", "str", "median_high", "several assessors' grades of one item -> one grade before screening, "
            "CAL, stopping and the qrels: median_high | max | min, or vote (the labels' majority vote: [labels] "
            "vote_threshold, graded, fallback)", choices=("median_high", "max", "min", "vote")),
        Key("max_rounds", "int", 40, "CAL rounds at most; threads still active then stop (rule max-rounds)", min=1),
    ),
    "web": _keys(
        Key("free_topic_choice", "bool", False, "assessors of the web app (qrelkit serve) see every topic, not only "
            "those of their batches, and may take a topic's places held by assessors without an account"),
    ),
    "dedupe": _keys(
        Key("ngram", "int", 3, "words per shingle", min=1),
        Key("num_perm", "int", 128, "MinHash permutations", min=1),
        Key("bands", "int", 32, "LSH bands", min=1),
        Key("rows", "int", 4, "rows per LSH band", min=1),
        Key("seed", "int", 1, "seed of the MinHash permutations", min=0),
        Key("threshold", "float", 0.6, "Jaccard a pair (and a member vs. its canonical) must reach", **_UNIT),
        Key("verify", "str", "exact", "check of candidate pairs and members: exact Jaccard of the shingle sets, "
            "the signatures' estimate, or none", choices=("none", "signature", "exact")),
        Key("mode", "str", "components", "classes: connected components or NIST's first claims",
            choices=("components", "greedy")),
        Key("linkage", "str", "canonical", "members verified against the canonical, or single linkage",
            choices=("canonical", "single")),
        Key("canonical", "str", "first", "canonical passage: first in corpus order, or judged first",
            choices=("first", "priority")),
        Key("lower", "bool", True, "lower-case the text"),
        Key("strip_html", "bool", True, "strip HTML tags"),
        Key("keep_digits", "bool", True, "digits form words (false: letters only, as NIST)"),
    ),
}

#: built-in values, ``{section: {key: default}}`` (subsections nested: ``DEFAULTS["stopping"]["knee"]``)
DEFAULTS: dict[str, dict[str, Any]] = {}


def _slot(tree: dict[str, Any], section: str) -> dict[str, Any]:
    """The dict of ``section`` in a nested ``{section: {key: value}}`` tree (``a.b``: ``tree[a][b]``),
    created when missing."""
    top, _, sub = section.partition(".")
    d = tree.setdefault(top, {})
    return d.setdefault(sub, {}) if sub else d


for _sec, _ks in SCHEMA.items():
    _slot(DEFAULTS, _sec).update({k.name: copy.deepcopy(k.default) for k in _ks.values()})


def format_value(value: Any) -> str:
    """A configuration value as a protocol file would write it (``none`` for no value).

    >>> format_value(None), format_value(True), format_value("ascending"), format_value([2, 3])
    ('none', 'true', '"ascending"', '[2, 3]')
    """
    return "none" if value is None else json.dumps(value, default=str)


def default(section: str, key: str) -> Any:
    """The declared default of ``[section] key`` (a copy)."""
    return copy.deepcopy(SCHEMA[section][key].default)


def defaults(section: str) -> dict[str, Any]:
    """Every declared default of a section (``stopping.knee`` for a subsection)."""
    return {k: copy.deepcopy(v.default) for k, v in SCHEMA[section].items()}


# --------------------------------------------------------------------------- validation

_TYPE_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
               "str|int": "a string or an integer", "list[int]": "a list of integers",
               "list[str]": "a list of strings", "map[int,int]": "a table of grade = grade",
               "map[str,list[int]]": "a table of name = [grades]"}


def _what(value: Any) -> str:
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)
    shown = f'"{value}"' if isinstance(value, str) else ("true" if value else "false") if isinstance(value, bool) \
        else repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"{shown} ({kind})"


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _label(section: str, key: str) -> str:
    return f"[{section}] {key}"


def check_value(section: str, key: str, value: Any, file: str | None = None, line: int | None = None) -> Any:
    """``value`` checked against the schema of ``[section] key``, returned as stored (an integer
    given for a float key becomes a float); raises :class:`InputError` ``bad-type``,
    ``out-of-range`` or ``bad-choice``."""
    spec = SCHEMA[section][key]
    name = _label(section, key)

    def bad(rule: str, msg: str) -> InputError:
        return InputError(rule, f"{name} {msg}", file, line)

    if value is None or (spec.optional and isinstance(value, str) and value.strip().lower() == "none"):
        if spec.optional:
            return None
        raise bad("bad-type", f"must be {_TYPE_WORDS[spec.type]}, got none")
    t = spec.type
    if t == "int":
        ok = _is_int(value)
    elif t == "float":
        ok = _is_num(value)
        value = float(value) if ok else value
    elif t == "bool":
        ok = isinstance(value, bool)
    elif t == "str":
        ok = isinstance(value, str)
    elif t == "str|int":
        ok = isinstance(value, str) or _is_int(value)
    elif t in ("list[int]", "list[str]"):
        if isinstance(value, tuple):
            value = list(value)
        item_ok = _is_int if t == "list[int]" else (lambda x: isinstance(x, str))
        ok = isinstance(value, list) and all(item_ok(x) for x in value)
    elif t == "map[int,int]":
        ok = isinstance(value, Mapping) and all(re.fullmatch(r"-?\d+", str(k)) and _is_int(v) for k, v in value.items())
    elif t == "map[str,list[int]]":
        ok = isinstance(value, Mapping) and all(isinstance(v, list) and all(_is_int(x) for x in v)
                                                for v in value.values())
    else:  # pragma: no cover - a schema typo
        raise AssertionError(f"unknown schema type {t}")
    if not ok:
        raise bad("bad-type", f"must be {_TYPE_WORDS[t]}, got {_what(value)}")
    if spec.fixed and value != spec.default:
        raise bad("bad-choice", f"is fixed to {spec.default!r}, got {value!r}")
    items = value if isinstance(value, list) else [value]
    if spec.choices is not None:
        for v in items:
            if v not in spec.choices:
                close = difflib.get_close_matches(str(v), [str(c) for c in spec.choices], n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise bad("bad-choice", f"must be one of {', '.join(map(str, spec.choices))}, got {v!r}{hint}")
    if spec.min is not None or spec.max is not None:
        for v in items:
            if not _is_num(v):
                continue
            if (spec.min is not None and v < spec.min) or (spec.max is not None and v > spec.max):
                lo = "" if spec.min is None else f">= {spec.min:g}"
                hi = "" if spec.max is None else f"<= {spec.max:g}"
                raise bad("out-of-range", f"must be {' and '.join(x for x in (lo, hi) if x)}, got {v!r}")
    return value


_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_KEYLINE = re.compile(r"""^\s*((?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:"[^"]*"|'[^']*'|[A-Za-z0-9_-]+))*)\s*=""")


def _path(dotted: str) -> tuple[str, ...]:
    parts = re.findall(r""""[^"]*"|'[^']*'|[A-Za-z0-9_-]+""", dotted)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


def find_line(text: str, path: Iterable[str]) -> int | None:
    """The 1-based line of a table or key ``path`` (``("pool", "depth")``) in TOML ``text``: its
    ``[table]`` header, its ``key =`` line, or the first line that defines something under it."""
    want = tuple(path)
    table: tuple[str, ...] = ()
    for n, line in enumerate(text.splitlines(), 1):
        m = _HEADER.match(line)
        if m:
            table = _path(m.group(1))
            if table[: len(want)] == want:
                return n
            continue
        m = _KEYLINE.match(line)
        if m:
            full = table + _path(m.group(1))
            if full[: len(want)] == want:
                return n
    return None


def _unknown(kind: str, name: str, known: Iterable[str], file: str | None, line: int | None,
             where: str = "") -> InputError:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else f"; known: {', '.join(sorted(known))}"
    return InputError("unknown-key", f"unknown {kind} {name!r}{where}{hint}", file, line)


def _subsections(section: str) -> dict[str, str]:
    """Declared subsections of a top-level section: short name -> full name."""
    return {s.partition(".")[2]: s for s in SCHEMA if s.startswith(section + ".")}


def validate(doc: Mapping[str, Any], file: str | None = None, text: str | None = None) -> dict[str, dict[str, Any]]:
    """Check a parsed TOML document against :data:`SCHEMA`; returns it with values as stored."""
    top = {s.partition(".")[0] for s in SCHEMA}

    def line_of(*path: str) -> int | None:
        return find_line(text, path) if text is not None else None

    out: dict[str, dict[str, Any]] = {}
    for sec, values in doc.items():
        if sec not in top:
            raise _unknown("section", sec, top, file, line_of(sec))
        if not isinstance(values, Mapping):
            raise InputError("bad-type", f"[{sec}] must be a table, got {_what(values)}", file, line_of(sec))
        out[sec] = _validate_section(sec, values, file, line_of)
    return out


def _validate_section(sec: str, values: Mapping[str, Any], file, line_of) -> dict[str, Any]:
    keys = SCHEMA.get(sec, {})
    subs = _subsections(sec)
    res: dict[str, Any] = {}
    for key, v in values.items():
        path = (*sec.split("."), key)
        if key in subs and key not in keys:
            if not isinstance(v, Mapping):
                raise InputError("bad-type", f"[{subs[key]}] must be a table, got {_what(v)}", file, line_of(*path))
            res[key] = _validate_section(subs[key], v, file, line_of)
        elif key in keys:
            res[key] = check_value(sec, key, v, file, line_of(*path))
        else:
            raise _unknown("key", key, [*keys, *subs], file, line_of(*path), where=f" in [{sec}]")
    return res


# --------------------------------------------------------------------------- the config object

DEFAULT, FILE, FLAG = "default", "file", "flag"


class Config(dict):
    """A nested dict of sections (every declared key present) with :meth:`get_value` for
    section/key look-ups and :attr:`origins` (``"section.key" -> (origin, where)``, origin one of
    ``default``, ``file``, ``flag``)."""

    source: str | None = None

    def __init__(self, *args, **kw) -> None:
        super().__init__(*args, **kw)
        self.origins: dict[str, tuple[str, str | None]] = {}

    def get_value(self, section: str, key: str, override: Any = None) -> Any:
        """``override`` (a flag; checked against the schema) when it is not None, else the
        config's value, else the default."""
        declared = section in SCHEMA and key in SCHEMA[section]
        if override is not None:
            if declared:
                override = check_value(section, key, override, file="<flag>")
                self.origins[f"{section}.{key}"] = (FLAG, None)
            return override
        sec = self.get(section, {})
        if key in sec:
            return sec[key]
        return copy.deepcopy(SCHEMA[section][key].default) if declared else None

    def set_value(self, section: str, key: str, value: Any, origin: str = FLAG, where: str | None = None) -> None:
        """Set ``[section] key`` (checked) and record where it came from."""
        if section not in SCHEMA:
            raise _unknown("section", section, SCHEMA, where, None)
        if key not in SCHEMA[section]:
            raise _unknown("key", key, SCHEMA[section], where, None, where=f" in [{section}]")
        value = check_value(section, key, value, file=where)
        _slot(self, section)[key] = value
        self.origins[f"{section}.{key}"] = (origin, where)

    def effective(self) -> list[dict[str, Any]]:
        """Every declared key in schema order: section, key, value, origin, where."""
        rows = []
        for sec, keys in SCHEMA.items():
            top, _, sub = sec.partition(".")
            values = self.get(top, {})
            if sub:
                values = values.get(sub, {})
            for k in keys:
                origin, where = self.origins.get(f"{sec}.{k}", (DEFAULT, None))
                rows.append({"section": sec, "key": k, "value": values.get(k, keys[k].default), "origin": origin,
                             "where": where})
        return rows


def parse_setting(item: str) -> tuple[str, str, Any]:
    """``section.key=value`` (the value in TOML syntax, else a bare string) -> (section, key, value);
    the section may be dotted (``stopping.knee.ratio=4``)."""
    lhs, sep, raw = item.partition("=")
    parts = lhs.strip().split(".")
    if not sep or len(parts) < 2 or not all(parts):
        raise InputError("bad-option", f"--set needs SECTION.KEY=VALUE, got {item!r}", "--set")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return ".".join(parts[:-1]), parts[-1], value


def load_config(path: str | os.PathLike | None = None, overrides: Iterable[str] | Mapping[str, Any] = ()) -> Config:
    """Load a TOML protocol file, validated, merged over the defaults (``None`` = defaults only);
    then ``overrides`` (``"section.key=value"`` strings or ``{"section.key": value}``), origin flag.

    Examples
    --------
    >>> from qrelkit import InputError, load_config
    >>> from qrelkit.simulate.toy import toy_file
    >>> path = toy_file("protocol.toml", "[pool]\\ndepth = 30\\n")
    >>> config = load_config(path, overrides=["batch.first_n=50"])
    >>> config["pool"]["depth"], config.origins["batch.first_n"]
    (30, ('flag', '--set'))
    >>> try:
    ...     load_config(overrides=["pool.dpth=3"])
    ... except InputError as exc:
    ...     print(exc)
    --set: [unknown-key] unknown key 'dpth' in [pool]; did you mean 'depth'?
    """
    cfg = Config(copy.deepcopy(DEFAULTS))
    if path is not None:
        p = Path(path)
        text = read_text(p)
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            m = re.search(r"\(at line (\d+)", str(exc))
            raise InputError("bad-toml", str(exc), file=str(p), line=int(m.group(1)) if m else None) from None
        valid = validate(doc, str(p), text)
        for sec, values in valid.items():
            _merge(cfg, sec, values, str(p), text)
        cfg.source = str(p)
    items = overrides.items() if isinstance(overrides, Mapping) else (
        ((s + "." + k), v) for s, k, v in map(parse_setting, overrides))
    for name, value in items:
        sec, _, key = name.rpartition(".")
        cfg.set_value(sec, key, value, FLAG, "--set")
    return cfg


def _merge(cfg: Config, sec: str, values: Mapping[str, Any], file: str, text: str) -> None:
    target = _slot(cfg, sec)
    for k, v in values.items():
        if f"{sec}.{k}" in SCHEMA:
            _merge(cfg, f"{sec}.{k}", v, file, text)
            continue
        target[k] = v
        line = find_line(text, (*sec.split("."), k))
        cfg.origins[f"{sec}.{k}"] = (FILE, f"{file}:{line}" if line else file)
