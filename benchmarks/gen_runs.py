"""Generate synthetic TREC runs that overlap like real submissions (deterministic, vectorized).

    python benchmarks/gen_runs.py OUT_DIR --runs 100 --topics 500 --depth 100 --seed 0

Writes one file per run (``run_000.txt`` ...) with lines ``qid Q0 docid rank score run``
separated by single spaces, plus a hidden ``.params.json`` (the parameters and the measured
statistics; hidden files are ignored by ``qrelkit.io.runs.read_runs``).

Model (Plackett-Luce over a popularity prior, sampled with the Gumbel-top-k trick):

* each topic has a universe of ``--universe`` candidate documents with Zipf popularity
  ``w_j ~ (j + 1) ** -a_t`` (the exponent ``a_t`` varies per topic, so pool sizes vary);
* runs belong to teams (``--team-size`` runs each); run ``r`` ranks topic ``t`` by
  ``b_r * log w_j + noise`` where the noise mixes a team component and a run component
  (runs of one team agree more than runs of different teams) and ``b_r`` is the run's
  "quality" (how much it follows the shared popularity);
* with 100 runs this gives about 300 distinct documents per topic at depth 10: popular
  documents retrieved by most runs, and a long tail retrieved by one or two.

Scores descend within each (run, topic) and are rounded to 4 decimals; about ``--tie-rate`` of
adjacent pairs get exactly the same score. Tied documents are written in an arbitrary order
(rank follows the file order), as real systems do, so readers must break ties themselves
(trec_eval: docid descending).

Document ids look like MS MARCO v2 passage ids (``msmarco_passage_SS_OFFSET`` with a
variable-width offset, so string order differs from numeric order) or, with
``--docid-style plain``, ``D1234567``. qids are ``1000``, ``1001``, ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

GENERATOR_VERSION = 1


def _docids(rng: np.random.Generator, n_topics: int, universe: int, style: str) -> np.ndarray:
    """Per-topic universes of distinct docid strings, shape (topics, universe), dtype object."""
    if style == "msmarco":
        space = 70 * 1_000_000_000  # 70 shards x byte offsets below 1e9
    else:
        space = 10_000_000
    # distinct within a topic: draw, then redraw the few duplicates
    ids = rng.integers(0, space, size=(n_topics, universe), dtype=np.int64)
    for _ in range(100):
        s = np.sort(ids, axis=1)
        dup_rows = np.flatnonzero((s[:, 1:] == s[:, :-1]).any(axis=1))
        if len(dup_rows) == 0:
            break
        for r in dup_rows:
            _, first = np.unique(ids[r], return_index=True)
            mask = np.ones(universe, bool)
            mask[first] = False
            ids[r, mask] = rng.integers(0, space, size=int(mask.sum()), dtype=np.int64)
    else:  # pragma: no cover - impossible for sane sizes
        raise SystemExit("could not draw distinct docids; lower --universe")
    flat = ids.ravel()
    if style == "msmarco":
        shard = flat // 1_000_000_000
        offset = flat % 1_000_000_000
        strs = [f"msmarco_passage_{s:02d}_{o}" for s, o in zip(shard.tolist(), offset.tolist())]
    else:
        strs = [f"D{v}" for v in flat.tolist()]
    return np.array(strs, dtype=object).reshape(n_topics, universe)


def generate(
    out_dir: str | os.PathLike,
    *,
    runs: int = 100,
    topics: int = 500,
    depth: int = 100,
    seed: int = 0,
    universe: int | None = None,
    team_size: int = 4,
    tie_rate: float = 0.03,
    docid_style: str = "msmarco",
    first_qid: int = 1000,
    pool_depth: int = 10,
    quiet: bool = False,
) -> dict:
    """Write the runs into ``out_dir``; return the parameters and measured statistics."""
    t0 = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    universe = universe or max(4 * depth, 2 * depth + 1000)
    if universe < depth:
        raise SystemExit("--universe must be >= --depth")
    rng = np.random.default_rng(seed)

    doc_strs = _docids(rng, topics, universe, docid_style)
    # rank of every universe docid in byte (string) order, per topic: lets us order ties the way
    # trec_eval does (docid descending) without comparing strings again
    str_rank = np.empty((topics, universe), dtype=np.int32)
    for t in range(topics):
        order = np.argsort(doc_strs[t].astype(str), kind="stable")
        str_rank[t, order] = np.arange(universe, dtype=np.int32)

    # popularity prior: Zipf exponent per topic
    a_t = rng.uniform(0.8, 1.25, size=topics)
    logw = -a_t[:, None] * np.log1p(np.arange(universe, dtype=np.float64))[None, :]
    n_teams = (runs + team_size - 1) // team_size
    team_of = np.arange(runs) // team_size
    quality = rng.uniform(0.7, 1.3, size=runs)
    score_gap = rng.uniform(0.02, 0.2, size=runs)  # runs use different score scales
    score_base = np.round(rng.uniform(5.0, 30.0, size=runs) + 2 * depth * score_gap, 4)
    team_seeds = rng.integers(0, 2**63 - 1, size=n_teams)
    run_seeds = rng.integers(0, 2**63 - 1, size=runs)

    qids = pa.array([str(first_qid + t) for t in range(topics)], pa.string())
    qid_col = qids.take(pa.array(np.repeat(np.arange(topics, dtype=np.int32), depth)))
    q0_col = pa.array(["Q0"], pa.string()).take(pa.array(np.zeros(topics * depth, np.int32)))
    rank_col = pa.array(np.tile(np.arange(1, depth + 1, dtype=np.int32), topics))
    flat_docs = pa.array(doc_strs.ravel(), pa.string())
    row_off = (np.arange(topics, dtype=np.int64) * universe)[:, None]

    top_k = min(pool_depth, depth)
    pooled = np.empty((runs, topics, top_k), dtype=np.int32)  # universe index, canonical order
    ties = 0
    boundary_ties = 0
    width = len(str(runs - 1)) if runs > 1 else 1
    width = max(width, 3)
    names = []
    for r in range(runs):
        team_noise = np.random.default_rng(team_seeds[team_of[r]]).gumbel(size=(topics, universe))
        run_noise = np.random.default_rng(run_seeds[r]).gumbel(size=(topics, universe))
        key = quality[r] * logw + 0.6 * team_noise + 0.8 * run_noise
        # top `depth` per topic, best first (the run's own order)
        part = np.argpartition(-key, depth - 1, axis=1)[:, :depth] if depth < universe else np.tile(
            np.arange(universe), (topics, 1))
        kpart = np.take_along_axis(key, part, axis=1)
        o = np.argsort(-kpart, axis=1, kind="stable")
        idx = np.take_along_axis(part, o, axis=1)  # (topics, depth) universe indices
        # scores: strictly decreasing gaps, then forced exact ties on ~tie_rate of adjacent pairs
        gaps = rng.exponential(score_gap[r], size=(topics, depth))
        gaps[:, 0] = 0.0
        gaps = np.round(gaps, 4)
        gaps[gaps < 1e-4] = 1e-4
        tie = rng.random((topics, depth)) < tie_rate
        tie[:, 0] = False
        gaps[tie] = 0.0
        gaps[:, 0] = 0.0
        score = np.round(score_base[r] - np.cumsum(gaps, axis=1), 4)
        # file order among tied scores is arbitrary (the run's own tie order); measure ties
        ties += int((score[:, 1:] == score[:, :-1]).sum())
        if depth > top_k:
            boundary_ties += int((score[:, top_k - 1] == score[:, top_k]).sum())
        # canonical order (score desc, docid desc) for the pool statistics
        srank = np.take_along_axis(str_rank, idx, axis=1)
        canon = np.lexsort((-srank, -score), axis=1)
        pooled[r] = np.take_along_axis(idx, canon, axis=1)[:, :top_k]

        name = f"run_{r:0{width}d}"
        names.append(name)
        table = pa.table(
            {
                "qid": qid_col,
                "q0": q0_col,
                "docid": flat_docs.take(pa.array((idx + row_off).ravel())),
                "rank": rank_col,
                "score": pa.array(score.ravel()),
                "run": pa.array([name], pa.string()).take(pa.array(np.zeros(topics * depth, np.int32))),
            }
        )
        tmp = out / f".{name}.tmp"
        pacsv.write_csv(
            table, tmp,
            write_options=pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none"),
        )
        os.replace(tmp, out / f"{name}.txt")

    # distinct documents per topic at the pool depth, across all runs (canonical tie order)
    key = (np.arange(topics, dtype=np.int64)[None, :, None] * universe + pooled).ravel()
    uniq = np.unique(key)
    per_topic = np.bincount(uniq // universe, minlength=topics)
    elapsed = time.perf_counter() - t0
    stats = {
        "generator_version": GENERATOR_VERSION,
        "runs": runs, "topics": topics, "depth": depth, "seed": seed, "universe": universe,
        "team_size": team_size, "tie_rate": tie_rate, "docid_style": docid_style,
        "first_qid": first_qid, "pool_depth": top_k,
        "lines": runs * topics * depth,
        "distinct_at_pool_depth": {
            "mean": float(per_topic.mean()), "median": float(np.median(per_topic)),
            "min": int(per_topic.min()), "max": int(per_topic.max()), "total": int(per_topic.sum()),
        },
        "tied_adjacent_pairs": ties,
        "lists_tied_across_pool_boundary": boundary_ties,
        "seconds": round(elapsed, 2),
        "files": [f"{n}.txt" for n in names],
    }
    (out / ".params.json").write_text(json.dumps(stats, indent=2) + "\n")
    if not quiet:
        d = stats["distinct_at_pool_depth"]
        print(
            f"wrote {runs} runs x {topics} topics x {depth} docs ({stats['lines']:,} lines) to {out} "
            f"in {elapsed:.1f} s\n"
            f"distinct docs per topic at depth {top_k}: mean {d['mean']:.1f}, median {d['median']:.0f}, "
            f"min {d['min']}, max {d['max']} (pool total {d['total']:,})\n"
            f"exact score ties: {ties:,} adjacent pairs"
            + (f"; {boundary_ties:,} (run, topic) lists tie across ranks {top_k}/{top_k + 1}"
               if depth > top_k else "")
        )
    return stats


def ensure(data: Path, runs: int, topics: int, depth: int, seed: int) -> dict:
    """The runs of these parameters in ``data``, generated unless ``data`` already holds them from
    this version of the generator (its ``.params.json``); returns their statistics. Regenerating
    removes only the files the generator wrote; a folder of other files is refused. Every benchmark
    on generated runs (pool, eval, reuse) goes through here, so none reuses another generator's runs."""
    meta = data / ".params.json"
    try:
        stats = json.loads(meta.read_text()) if meta.exists() else {}
    except ValueError:
        stats = {}
    same = all(stats.get(k) == v for k, v in
               {"runs": runs, "topics": topics, "depth": depth, "seed": seed,
                "generator_version": GENERATOR_VERSION}.items())
    if same and all((data / f).exists() for f in stats.get("files", [None])):
        d = stats["distinct_at_pool_depth"]
        print(f"reusing {data} ({stats['lines']:,} lines; {d['mean']:.1f} distinct docs per topic "
              f"at depth {stats['pool_depth']})")
        return stats
    if data.exists() and any(data.iterdir()):
        if not meta.exists():
            raise SystemExit(f"{data} holds files that gen_runs.py did not write; choose another --data-dir")
        for name in stats.get("files", []):  # regenerate: remove only what the generator wrote
            (data / name).unlink(missing_ok=True)
        meta.unlink()
    return generate(data, runs=runs, topics=topics, depth=depth, seed=seed)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out_dir")
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--topics", type=int, default=500)
    p.add_argument("--depth", type=int, default=100, help="documents per topic per run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--universe", type=int, default=None,
                   help="candidate documents per topic (default max(4*depth, 2*depth+1000))")
    p.add_argument("--team-size", type=int, default=4, help="runs per team (correlated runs)")
    p.add_argument("--tie-rate", type=float, default=0.03, help="share of adjacent pairs with equal scores")
    p.add_argument("--docid-style", choices=["msmarco", "plain"], default="msmarco")
    p.add_argument("--first-qid", type=int, default=1000)
    p.add_argument("--pool-depth", type=int, default=10, help="depth at which distinct docs are measured")
    a = p.parse_args(argv)
    generate(
        a.out_dir, runs=a.runs, topics=a.topics, depth=a.depth, seed=a.seed, universe=a.universe,
        team_size=a.team_size, tie_rate=a.tie_rate, docid_style=a.docid_style, first_qid=a.first_qid,
        pool_depth=a.pool_depth,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
