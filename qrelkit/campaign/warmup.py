"""Every numba kernel compiled ahead, into numba's on-disk cache (``qrelkit warmup``, run by
``make install``): a fresh install's first campaign then loads machine code instead of compiling
it for half a minute.

The kernels are compiled by the code that calls them, on a small synthetic campaign run end to end
(:func:`warm_up`): each kernel gets the argument types a real run gives it, and a kernel added or
changed in a room is warmed with no list to keep here. Where the path depends on a setting or on
the size of the input, the other paths are taken too: near-duplicates with every other choice of
``[dedupe]`` (verification, linkage, mode, canonical), the incremental index, the accuracy against
a truth; CAL's simulation; the adjudication strategies; and each kernel's parallel or serial twin
(:func:`qrelkit.jit.compile_twins`). Only ``dedupe cluster --dask``'s kernels are left (they
compile on the workers).
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

from qrelkit import jit
from qrelkit.campaign.runner import Campaign
from qrelkit.cal.features import build_features, load_features
from qrelkit.cal.scoring import score
from qrelkit.cal.simulation import BM25, simulate_cal
from qrelkit.dedupe import DedupeParams, cluster_corpus
from qrelkit.dedupe.accuracy import evaluate_classes, exact_scores
from qrelkit.dedupe.incremental import assign_new, save_index
from qrelkit.io.corpus import iter_corpus
from qrelkit.io.classes import read_classes
from qrelkit.io.qrels import read_qrels
from qrelkit.io.tables import read_table
from qrelkit.io.topics import read_topics
from qrelkit.pooler.adjudication import adjudicate, available_strategies
from qrelkit.simulate.campaign import simulate_campaign

#: the synthetic campaign: small enough to run in seconds once compiled, large enough that every
#: stage has work (near-duplicates, pooled runs, CAL rounds with relevant passages)
PASSAGES, TOPICS, GROUPS, SEED = 2000, 3, 3, 1


def warm_up(*, progress: Callable[[str], None] | None = None) -> dict:
    """Compile (or load from the on-disk cache) every kernel of qrelkit, as described in the
    module's documentation, in a temporary folder. Returns ``seconds``, ``kernels`` (how many
    cached kernels qrelkit has), ``cached`` (how many the cache holds now) and ``not_cached``
    (their names: none but the Dask ones after a full warm-up)."""
    say = progress or (lambda step: None)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="qrelkit-warmup-") as tmp:
        sim, camp = Path(tmp) / "simulated", Path(tmp) / "campaign"
        say("a small synthetic campaign")
        simulate_campaign(sim, n_passages=PASSAGES, n_topics=TOPICS, n_groups=GROUPS, seed=SEED)
        say("the campaign, end to end (near-duplicates, pool, CAL, qrels, evaluation)")
        Campaign.init(camp, config=None, corpus=sim / "corpus.jsonl", topics=sim / "topics.tsv", runs=sim / "runs",
                      manifest=sim / "manifest.csv")
        Campaign(camp).run(oracle=sim / "qrels.txt", error_rate=0.05, seed=SEED)
        say("near-duplicates with the other settings, the incremental index, the accuracy")
        _dedupe_paths(sim, Path(tmp))
        say("CAL's simulation and scoring, BM25, the adjudication strategies")
        _cal_paths(sim, camp)
    say("the other twin of each parallel kernel")
    jit.compile_twins()
    state = jit.kernel_cache_state()
    return {"seconds": time.perf_counter() - t0, "kernels": len(state), "cached": sum(state.values()),
            "not_cached": sorted(k for k, v in state.items() if not v)}


def _dedupe_paths(sim: Path, tmp: Path) -> None:
    """Near-duplicate clustering with each other choice of every ``[dedupe]`` key that has
    choices (each takes its own kernels), an incremental index and its assignment of passages,
    and the accuracy of the classes against the simulation's truth."""
    corpus = next(iter(iter_corpus(sim / "corpus.jsonl")))
    base = DedupeParams()
    priority = corpus["pid"].to_pylist()[::7]
    for key in base.KEYS.values():
        for choice in [c for c in (key.choices or ()) if c != getattr(base, key.name)]:
            cluster_corpus(corpus, dataclasses.replace(base, **{key.name: choice}), priority=priority)
    half = corpus.num_rows // 2
    res = cluster_corpus(corpus.slice(0, half), base)
    save_index(res, res.sig, tmp / "index")
    assign_new(corpus.slice(half), tmp / "index")
    evaluate_classes(res.classes, read_classes(sim / "neardup_truth.tsv"), sim / "corpus.jsonl")
    row = {pid: k for k, pid in enumerate(res.classes["docid"].to_pylist())}
    canonical = np.array([row[c] for c in res.classes["class_id"].to_pylist()], np.int64)
    exact_scores(canonical, corpus.slice(0, half)["text"], base.threshold)


def _cal_paths(sim: Path, camp: Path) -> None:
    """CAL's simulation on the campaign's features; scoring every row; the BM25 baseline; features
    of a corpus whose vocabulary outgrows its first table; each adjudication strategy on the pool."""
    qrels, topics = read_qrels(sim / "qrels.txt"), read_topics(sim / "topics.tsv")
    features = load_features(camp / "features")
    simulate_cal(features, topics, qrels, max_effort=50)
    score(features, np.ones(features.n_terms, np.float32))
    BM25(sim / "corpus.jsonl").ranking(str(topics["text"].iloc[0]))
    # more distinct words (of letters: a digit is no word) than a vocabulary's first table holds
    words = ["".join(chr(97 + k // 26 ** i % 26) for i in range(4)) for k in range(1 << 16)]
    build_features(pa.table({"pid": [f"p{k}" for k in range(64)], "text": [" ".join(words[k::64]) for k in range(64)]}))
    pool = read_table(camp / "pool.parquet")
    for name in available_strategies():
        adjudicate(pool, qrels, name, budget=20, batch=5)
