"""Near-duplicate classes against the exact truth at the clustering's own threshold and shingling.

    python benchmarks/dedupe_exact_truth.py CORPUS [CORPUS ...] [--method product|prefix] [--letters-only]

For each corpus (any file the corpus readers take): cluster with the library defaults
(``DedupeParams()``), compute every pair of passages whose exact Jaccard of shingle sets reaches
the threshold (``qrelkit.dedupe.accuracy.exact_similar_pairs``: the sparse binary shingle matrix
``X``, ``X @ X.T`` in row chunks; ``--method prefix`` finds exactly the same pairs with the
all-pairs prefix filter, for large corpora) and print edge precision (members whose exact Jaccard
to their canonical reaches the threshold), pair recall (true pairs in one class) and pair
precision as a Markdown table row. Repeated passage ids (LISA repeats records) get a suffix.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def unique_ids(corpus):
    """The corpus with repeated ids (LISA repeats records) made unique: ``id~2``, ``id~3``, ..."""
    import pyarrow as pa

    seen: dict[str, int] = {}
    ids = []
    for p in corpus["pid"].to_pylist():
        seen[p] = seen.get(p, 0) + 1
        ids.append(p if seen[p] == 1 else f"{p}~{seen[p]}")
    return corpus.set_column(0, "pid", pa.array(ids, pa.string()))


def evaluate_corpus(path: Path, method: str, **overrides) -> dict:
    import pyarrow as pa
    import pyarrow.compute as pc

    from qrelkit.dedupe import DedupeParams, cluster_corpus
    from qrelkit.dedupe.accuracy import exact_scores, exact_similar_pairs
    from qrelkit.io.corpus import read_corpus

    corpus = unique_ids(read_corpus(path).select(["pid", "text"]))
    texts = corpus["text"].combine_chunks()
    params = DedupeParams(**overrides)
    t0 = time.perf_counter()
    res = cluster_corpus(corpus, params)
    t1 = time.perf_counter()
    ti, tj, _ = exact_similar_pairs(texts, params.threshold, ngram=params.ngram, norm=params.norm, method=method)
    t2 = time.perf_counter()
    canon = pc.index_in(res.classes["class_id"], value_set=corpus["pid"]).to_numpy()
    scores = exact_scores(canon, texts, params.threshold, ngram=params.ngram, norm=params.norm, truth=(ti, tj))
    scores.update(corpus=str(path), cluster_s=round(t1 - t0, 2), truth_s=round(t2 - t1, 2), method=method,
                  params={k: v for k, v in params.as_dict().items() if k in overrides})
    return scores


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("corpora", nargs="+", type=Path)
    ap.add_argument("--method", choices=["product", "prefix"], default="product")
    ap.add_argument("--params", default="{}", help="JSON overrides of DedupeParams, e.g. '{\"keep_digits\": false}'")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    print("| corpus | passages | true pairs | members | edge precision (lowest J) | pair recall | pair precision |")
    print("|---|---|---|---|---|---|---|")
    out = []
    for p in a.corpora:
        s = evaluate_corpus(p, a.method, **json.loads(a.params))
        out.append(s)
        print(f"| {p} | {s['passages']:,} | {s['true_pairs']:,} | {s['members']:,} | {s['edge_precision']:.4f} "
              f"({s['lowest_member_jaccard']:.3f}) | {s['pair_recall']:.4f} | {s['pair_precision']:.4f} |", flush=True)
    if a.json:
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
