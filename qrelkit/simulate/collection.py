"""Synthetic ad hoc test collections shaped like TREC-8: runs, the judged depth pool, a manifest;
no text. What a study of judging orders and budgets needs at TREC's scale (docs/data-model.md,
"Synthetic collections").

The defaults are TREC-8 ad hoc's figures (Voorhees and Harman, TREC-8 overview): 50 topics
(qids ``401``-``450``), 71 pooled runs from about 40 groups, runs 1,000 documents deep, pooled at depth
100, which gives about 1,700 pool documents per topic and about 4,700 relevant ones (about 94 per
topic, from a handful to a few hundred).

Model, per topic (independent draws from ``numpy.random.SeedSequence(seed)``):

* a universe of ``universe`` documents drawn from a collection of 528,155 ids shaped like TREC
  disks 4 and 5 (``FBIS-1`` ... ``LA-131896``), of which ``n_rel`` are relevant, ``n_rel``
  lognormal (median 118, sigma 0.75, at most 500: a wide spread across topics);
* each document has a latent retrievability ``z ~ N(0, 1)``; a relevant document's is raised by
  ``ease * u`` (``ease`` the topic's, uniform in [1.5, 3]; ``u`` the document's, uniform in
  [0.3, 1.3]): relevant documents rank high in good runs, some of them low everywhere (about a
  third of them stay out of the depth-100 pool: the pool is incomplete, as real pools are);
* run ``r`` of group ``g`` scores a document ``q_r z + sqrt(0.4) e_g + sqrt(0.6) e_r`` (``e`` standard
  normal noise, the group's shared by its runs) and returns its top ``run_length``: runs share
  the documents of high ``z``, relevant or not, runs of one group agree more, and a run's quality
  ``q_r`` (its group's, uniform in [0.7, 1.6], plus N(0, 0.1) of its own; a group's priority-1 run
  is its best) sets how many relevant documents it ranks at the top (precision at 10 from about
  0.2 to 0.6, as at TREC-8).

The qrels are the depth-``depth`` pool of the pooled runs judged by the truth: binary, every
pool document judged (relevant documents outside the pool stay unjudged, as at TREC).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.errors import InputError
from qrelkit.io.atomic import atomic_open
from qrelkit.io.qrels import QRELS_SCHEMA, sort_qrels, write_qrels
from qrelkit.io.runs import RUN_SCHEMA, write_trec_run

#: TREC disks 4 and 5 (minus the Congressional Record): the sources and their sizes
SOURCES = (("FBIS", 130_471), ("FR", 55_630), ("FT", 210_158), ("LA", 131_896))
#: the model's constants (module docstring)
QUALITY = (0.7, 1.6)
RUN_JITTER = 0.1
GROUP_SHARE = 0.4
EASE = (1.5, 3.0)
DOC_EASE = (0.3, 1.3)
REL_MEDIAN, REL_SIGMA, REL_MAX = 118.0, 0.75, 500


@dataclass(frozen=True)
class SimulatedCollection:
    """``runs`` (:data:`~qrelkit.io.runs.RUN_SCHEMA`, canonical order), ``qrels`` (the judged
    pool, :data:`~qrelkit.io.qrels.QRELS_SCHEMA`, qrels order) and ``manifest`` (``run``,
    ``group``, ``priority``, ``pooled``); unpacks as ``runs, qrels, manifest = ...``."""

    runs: pa.Table
    qrels: pa.Table
    manifest: pd.DataFrame

    def __iter__(self) -> Iterator:
        return iter((self.runs, self.qrels, self.manifest))


@dataclass(frozen=True)
class _Plan:
    """The runs: each one's group (index), quality and pooled flag; names."""

    group_of: np.ndarray
    quality: np.ndarray
    pooled: np.ndarray
    run_names: list[str]
    group_names: list[str]
    priority: np.ndarray


def _check(topics: int, runs: int, groups: int, depth: int, run_length: int, pooled: int | None, universe: int) -> None:
    for name, v in (("topics", topics), ("runs", runs), ("groups", groups), ("depth", depth),
                    ("run_length", run_length)):
        if int(v) < 1:
            raise InputError("bad-option", f"{name} must be >= 1, got {v}")
    if groups > runs:
        raise InputError("bad-option", f"{groups} groups cannot submit {runs} runs (every group submits one at least)")
    if pooled is not None and not 1 <= pooled <= runs:
        raise InputError("bad-option", f"pooled runs must be between 1 and {runs}, got {pooled}")
    if not run_length <= universe <= sum(n for _, n in SOURCES):
        raise InputError("bad-option", f"the universe of a topic ({universe}) must hold a run ({run_length}) and fit "
                         f"in the collection ({sum(n for _, n in SOURCES):,})")


def _plan(rng: np.random.Generator, runs: int, groups: int, pooled: int | None) -> _Plan:
    """Groups of 1+ runs, each run's quality (a group's priority-1 run its best) and pooled flag
    (priority 1 of every group first, then priority 2, ...; groups in order)."""
    sizes = 1 + rng.multinomial(runs - groups, np.full(groups, 1.0 / groups))
    group_of = np.repeat(np.arange(groups), sizes)
    base = rng.uniform(*QUALITY, groups)[group_of]
    q = np.clip(base + rng.normal(0.0, RUN_JITTER, runs), 0.05, None)
    priority = np.concatenate([np.arange(1, s + 1) for s in sizes])
    q = q[np.lexsort((-q, group_of))]  # within a group, the best quality gets priority 1
    pick = np.lexsort((group_of, priority))[: runs if pooled is None else pooled]
    flag = np.zeros(runs, bool)
    flag[pick] = True
    width = len(str(groups))
    gnames = [f"g{i + 1:0{width}d}" for i in range(groups)]
    letters = [_letters(int(p) - 1) for p in priority]
    names = [f"{gnames[g]}{a}" for g, a in zip(group_of, letters)]
    return _Plan(group_of, q.astype(np.float32), flag, names, gnames, priority)


def _letters(i: int) -> str:
    """0 -> a, 25 -> z, 26 -> ba, ... (a run's letter within its group)."""
    s = ""
    while True:
        s = chr(ord("a") + i % 26) + s
        i //= 26
        if i == 0:
            return s


def _topic(rng: np.random.Generator, plan: _Plan, universe: int, run_length: int, n_groups: int):
    """One topic: the universe's collection ids, each run's list (universe indices, best first)
    with its scores, and the relevant mask of the universe."""
    ids = rng.choice(sum(n for _, n in SOURCES), size=universe, replace=False)
    n_rel = int(np.clip(round(rng.lognormal(np.log(REL_MEDIAN), REL_SIGMA)), 3, min(REL_MAX, universe // 4)))
    relevant = np.zeros(universe, bool)
    relevant[:n_rel] = True
    z = rng.standard_normal(universe, dtype=np.float32)
    z[:n_rel] += np.float32(rng.uniform(*EASE)) * rng.uniform(*DOC_EASE, n_rel).astype(np.float32)
    s = rng.standard_normal((len(plan.quality), universe), dtype=np.float32)
    s *= np.float32(np.sqrt(1.0 - GROUP_SHARE))
    s += np.float32(np.sqrt(GROUP_SHARE)) * rng.standard_normal((n_groups, universe), dtype=np.float32)[plan.group_of]
    s += plan.quality[:, None] * z[None, :]
    k = min(run_length, universe)
    top = np.argpartition(-s, k - 1, axis=1)[:, :k]
    score = np.take_along_axis(s, top, 1)
    o = np.argsort(-score, axis=1, kind="stable")
    return ids, np.take_along_axis(top, o, 1), np.take_along_axis(score, o, 1), relevant


def _strict_scores(score: np.ndarray) -> np.ndarray:
    """Scores rounded to 4 decimals and made strictly descending along the last axis (a tie
    would let a reader's tie rule reorder the list): the largest such values not above the
    rounded ones."""
    t = np.round(score.astype(np.float64) * 1e4)
    i = np.arange(score.shape[-1])
    return (np.minimum.accumulate(t + i, axis=-1) - i) / 1e4


def _docid_strings(ids: np.ndarray) -> tuple[np.ndarray, pa.Array]:
    """Where each collection id of ``ids`` sits among the distinct ones (sorted), and their
    docid strings (``FBIS-1`` ...)."""
    seen = np.zeros(sum(n for _, n in SOURCES), bool)
    seen[ids.ravel()] = True
    uniq = np.flatnonzero(seen)
    at = np.cumsum(seen) - 1
    bounds = np.cumsum([0] + [n for _, n in SOURCES])
    src = np.searchsorted(bounds, uniq, side="right") - 1
    prefix = pa.array([f"{name}-" for name, _ in SOURCES], pa.string()).take(src)
    number = pc.cast(pa.array(uniq - bounds[src] + 1), pa.string())
    return at, pc.binary_join_element_wise(prefix, number, "")


def simulate_collection(*, topics: int = 50, runs: int = 71, groups: int = 40, depth: int = 100,
                        run_length: int = 1000, pooled: int | None = None, universe: int = 12_000,
                        seed: int = 0) -> SimulatedCollection:
    """A TREC-8-shaped collection (the module docstring gives the model): ``runs`` runs of
    ``run_length`` documents on ``topics`` topics from ``groups`` groups, the first ``pooled``
    by priority pooled (None: all), the qrels their depth-``depth`` pool judged. Deterministic for
    a ``seed``; bad sizes are ``[bad-option]``. About 2 s at TREC-8's size.

    Examples
    --------
    >>> from qrelkit import simulate_collection
    >>> c = simulate_collection(topics=2, runs=5, groups=3, depth=10, run_length=50, universe=2000, seed=1)
    >>> c.runs.num_rows, c.manifest.columns.tolist(), sorted(set(c.qrels["rel"].to_pylist()))
    (500, ['run', 'group', 'priority', 'pooled'], [0, 1])
    >>> c.manifest.groupby("group").size().tolist()
    [2, 1, 2]
    """
    _check(topics, runs, groups, depth, run_length, pooled, universe)
    seeds = np.random.SeedSequence(int(seed)).spawn(topics + 1)
    plan = _plan(np.random.default_rng(seeds[0]), runs, groups, pooled)
    k = min(run_length, universe)
    doc = np.empty((topics, runs, k), np.int64)
    score = np.empty((topics, runs, k))
    q_keys, q_rel = [], []
    for t in range(topics):
        ids, top, sc, relevant = _topic(np.random.default_rng(seeds[t + 1]), plan, universe, run_length, groups)
        doc[t], score[t] = ids[top], _strict_scores(sc)
        pool = np.unique(top[plan.pooled, :depth])
        q_keys.append(ids[pool] + t * (1 << 20))
        q_rel.append(relevant[pool])
    at, names = _docid_strings(doc)
    qids = [str(401 + t) for t in range(topics)]
    order = np.argsort(np.array(plan.run_names), kind="stable")  # canonical order: runs by name, then qid, rank
    run_tab = pa.table({
        "run": pa.array(plan.run_names, pa.string()).take(np.repeat(order, topics * k)),
        "qid": pa.array(qids, pa.string()).take(np.tile(np.repeat(np.arange(topics), k), runs)),
        "docid": names.take(at[doc.transpose(1, 0, 2)[order].ravel()]),
        "rank": pa.array(np.tile(np.arange(1, k + 1, dtype=np.int32), runs * topics)),
        "score": pa.array(score.transpose(1, 0, 2)[order].ravel()),
    }, schema=RUN_SCHEMA)
    keys = np.concatenate(q_keys)
    qrels = pa.table({"qid": pa.array(qids, pa.string()).take(keys >> 20),
                      "docid": names.take(at[keys & ((1 << 20) - 1)]),
                      "rel": pa.array(np.concatenate(q_rel).astype(np.int32))}, schema=QRELS_SCHEMA)
    manifest = pd.DataFrame({"run": plan.run_names, "group": [plan.group_names[g] for g in plan.group_of],
                             "priority": plan.priority.astype(int), "pooled": plan.pooled})
    return SimulatedCollection(run_tab, sort_qrels(qrels), manifest)


def collection_summary(c: SimulatedCollection) -> dict:
    """The collection's figures: topics, runs, groups, pooled runs, run length, and per topic the
    pool size and the relevant documents (total, mean, min, median, max)."""
    q = c.qrels.to_pandas()
    per = q.groupby("qid")["rel"].agg(["size", "sum"])
    lengths = c.runs.group_by(["run", "qid"]).aggregate([("docid", "count")])["docid_count"].to_numpy()

    def spread(x: pd.Series) -> dict:
        return {"total": int(x.sum()), "mean": round(float(x.mean()), 1), "min": int(x.min()),
                "median": float(x.median()), "max": int(x.max())}

    return {"topics": len(c.runs["qid"].unique()), "runs": len(c.manifest),
            "groups": int(c.manifest["group"].nunique()), "pooled_runs": int(c.manifest["pooled"].sum()),
            "run_length": int(lengths.max()) if len(lengths) else 0,
            "pool_per_topic": spread(per["size"]), "relevant_per_topic": spread(per["sum"])}


def write_collection(c: SimulatedCollection, out_dir: str | os.PathLike) -> dict:
    """Write ``runs/<run>.run`` (TREC run files; a ``runs`` folder holding other ``*.run`` files is
    ``[output-not-empty]``, before anything is written), ``qrels.txt`` and ``manifest.csv`` (``run, group, priority,
    pooled, file``) into ``out_dir``; returns :func:`collection_summary` with the files."""
    out = Path(out_dir)
    run_dir = out / "runs"
    keep = {f"{r}.run" for r in c.manifest["run"]}
    other = sorted(p.name for p in run_dir.glob("*.run") if p.name not in keep) if run_dir.is_dir() else []
    if other:  # never remove what someone else put there: the folder would not match the manifest
        raise InputError("output-not-empty", f"{run_dir} holds {len(other)} other run file(s) ({', '.join(other[:3])}"
                         f"{' ...' if len(other) > 3 else ''}); write the collection to another folder",
                         file=str(run_dir))
    run_dir.mkdir(parents=True, exist_ok=True)
    names = c.runs["run"].to_numpy()
    cuts = np.flatnonzero(names[1:] != names[:-1]) + 1
    for a, b in zip(np.r_[0, cuts], np.r_[cuts, len(names)]):
        write_trec_run(c.runs.slice(int(a), int(b - a)), run_dir / f"{names[a]}.run")
    write_qrels(c.qrels, out / "qrels.txt")
    with atomic_open(out / "manifest.csv") as fh:
        fh.write("run,group,priority,pooled,file\n" + "".join(
            f"{r},{g},{p},{'true' if f else 'false'},{r}.run\n"
            for r, g, p, f in c.manifest[["run", "group", "priority", "pooled"]].itertuples(index=False)))
    summary = collection_summary(c)
    summary["files"] = {"runs": "runs", "qrels": "qrels.txt", "manifest": "manifest.csv"}
    json.dumps(summary)  # JSON-able
    return summary
