"""Effectiveness of qrelkit's CAL against TARexp's CAL and the plain BM25 ranking, in simulation on
the classic collections (``../shared/data/classic/``: Cranfield, CISI, CACM, MED, NPL).

    python benchmarks/cal_effectiveness.py                       # all five, seeds 1 2 3
    python benchmarks/cal_effectiveness.py --collections med --seeds 1 --skip-tarexp

For every collection, every topic with at least one relevant document, and every seed, each
method reviews documents until recall reaches 75% and at least 2R documents are reviewed
(R = relevant documents of the topic in the collection). Reported per collection: the mean over
topics (of the mean over seeds) of recall at effort 2R and of the effort (documents reviewed) to
reach 75% recall, and Wilcoxon signed-rank p-values (scipy) of qrelkit against each other method,
paired by topic.

* **qrelkit**: :func:`qrelkit.cal.simulation.simulate_cal`, thread ``all``, no initial judgments
  (CAL starts from the query as a synthetic relevant document), 100 random negatives per
  round, batches of 25, ``C = 1``; features from :func:`qrelkit.cal.features.build_features`.
* **TARexp**: ``tarexp.OnePhaseTARWorkflow`` with the components of TARexp's README
  (``SklearnRanker(LogisticRegression, solver="liblinear")``, ``RelevanceSampler``,
  ``PerfectLabeler``), batches of 25, ``random_seed`` = the seed; the query is appended to the
  collection as one extra document labelled relevant and is the seed document (it is not counted
  as effort). Features: scikit-learn ``TfidfVectorizer(sublinear_tf=True)`` fitted on the
  collection and the query (``--tarexp-features qrelkit`` gives TARexp qrelkit's features instead).
* **BM25**: :class:`qrelkit.cal.simulation.BM25` (k1 = 0.9, b = 0.4) over the same tokenizer;
  documents reviewed in BM25 order.

Relevance: every positive grade counts (Cranfield's -1, "of no interest", does not).
Recall at effort k is checked against ``ir_measures`` ``R@k`` of the review order (``--check``).
Results go to ``bench-out/cal_effectiveness.json`` and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COLLECTIONS = ("cranfield", "cisi", "cacm", "med", "npl_vaswani")
NAMES = {"cranfield": "Cranfield", "cisi": "CISI", "cacm": "CACM", "med": "MED", "npl_vaswani": "NPL"}


def load_collection(data: Path, name: str):
    from qrelkit.io.corpus import read_corpus
    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.topics import read_topics

    d = data / name
    corpus = read_corpus(d / "docs.jsonl")
    qrels = read_qrels(d / "qrels.txt")
    topics = read_topics(d / "queries.tsv")
    q = qrels.to_pandas()
    q = q[q["rel"] > 0]
    pids = set(corpus["pid"].to_pylist())
    q = q[q["docid"].isin(pids)]
    topics = topics[topics["qid"].isin(set(q["qid"]))].reset_index(drop=True)
    return corpus, q, topics


def sequence_metrics(seq: np.ndarray, R: int) -> dict:
    from qrelkit.cal.simulation import effort_to_recall, recall_at

    return {"recall_2R": recall_at(seq, R, 2 * R), "effort_75": effort_to_recall(seq, R, 0.75), "R": R}


# --------------------------------------------------------------------------- methods


def run_qrelkit(feats, topics, q, seed: int, batch: int, schedule: str = "fixed") -> dict[str, dict]:
    from qrelkit.cal.loop import CalParams
    from qrelkit.cal.simulation import simulate_cal

    qrels = pa.Table.from_pandas(q[["qid", "docid", "rel"]], preserve_index=False)
    params = CalParams(batch_size=batch, schedule=schedule, relevant=tuple(sorted(set(q["rel"].astype(int)))), seed=seed)
    res = simulate_cal(feats, topics, qrels, params=params, max_effort=feats.n_rows, until_recall=0.75,
                       until_effort_r=2.0)
    out = {}
    for qid, g in res.log.groupby("qid", sort=False):
        R = int(res.summary.loc[res.summary["qid"] == qid, "R"].iloc[0])
        out[qid] = sequence_metrics(g.sort_values("position")["relevant"].to_numpy(bool), R)
        out[qid]["order"] = g.sort_values("position")["docid"].tolist()
    return out


def run_bm25(corpus, topics, q) -> dict[str, dict]:
    from qrelkit.cal.simulation import BM25

    bm = BM25(corpus)
    pids = np.asarray(bm.pids.to_pylist(), dtype=object)
    out = {}
    for qid, text in zip(topics["qid"], topics["text"]):
        rel = set(q.loc[q["qid"] == qid, "docid"])
        order = pids[bm.ranking(text)]
        seq = np.array([p in rel for p in order])
        out[qid] = sequence_metrics(seq, len(rel))
        out[qid]["order"] = order[: 4 * len(rel)].tolist()
    return out


def tarexp_matrix(corpus, topics, kind: str, feats=None):
    """Document-term matrix for TARexp: rows = collection documents, then one row per query."""
    import scipy.sparse as sp

    texts = corpus["text"].to_pylist()
    if kind == "sklearn":
        from sklearn.feature_extraction.text import TfidfVectorizer

        vec = TfidfVectorizer(sublinear_tf=True)
        return vec.fit_transform(texts + topics["text"].tolist()).tocsr()
    qv = feats.featurize(topics["text"].tolist())
    base = feats.matrix
    qm = sp.csr_matrix((qv.data, qv.indices, qv.indptr), shape=(qv.n_rows, feats.n_terms))
    return sp.vstack([base, qm]).tocsr()


def run_tarexp(corpus, topics, q, seed: int, batch: int, X, schedule: str = "fixed") -> dict[str, dict]:
    import tarexp
    from sklearn.linear_model import LogisticRegression
    from tarexp import component

    from qrelkit.cal.loop import CalParams, batch_size

    pids = corpus["pid"].to_pylist()
    n = len(pids)
    pos = {p: i for i, p in enumerate(pids)}
    out = {}
    for t, (qid, text) in enumerate(zip(topics["qid"], topics["text"])):
        rel = set(q.loc[q["qid"] == qid, "docid"])
        R = len(rel)
        rows = list(range(n)) + [n + t]
        Xt = X[rows]
        labels = np.zeros(n + 1, bool)
        labels[[pos[p] for p in rel]] = True
        labels[n] = True  # the query document
        ds = tarexp.SparseVectorDataset.from_sparse(Xt).setLabels(labels)
        setting = component.combine(component.SklearnRanker(LogisticRegression, solver="liblinear", random_state=seed),
                                    component.PerfectLabeler(), component.RelevanceSampler(),
                                    component.NullStoppingRule())()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            wf = tarexp.OnePhaseTARWorkflow(ds, setting, seed_doc=[n], batch_size=batch, random_seed=seed)
        order: list[int] = []
        found = 0
        it = 0
        while True:
            it += 1
            wf.batch_size = batch_size(CalParams(batch_size=batch, schedule=schedule), "all", it)
            wf.step()
            cand = [int(i) for i in wf.review_candidates]
            if not cand:
                break
            order.extend(cand)
            found += int(labels[cand].sum())
            if (found >= 0.75 * R and len(order) >= 2 * R) or len(order) >= n:
                break
        # the last batch is only proposed: its labels are known to the oracle, no need to train on it
        seq = labels[np.array(order, np.int64)]
        out[qid] = sequence_metrics(seq, R)
        out[qid]["order"] = [pids[i] for i in order]
    return out


# --------------------------------------------------------------------------- driver


def check_ir_measures(results: dict, q: pd.DataFrame) -> int:
    """Recall at effort 2R equals ir_measures R@2R of the review order; returns checked topics."""
    import ir_measures

    checked = 0
    for qid, r in results.items():
        k = 2 * r["R"]
        order = r["order"][:k]
        if len(order) < k:
            continue
        run = [ir_measures.ScoredDoc(qid, d, float(len(order) - i)) for i, d in enumerate(order)]
        qr = [ir_measures.Qrel(qid, d, 1) for d in q.loc[q["qid"] == qid, "docid"]]
        v = ir_measures.calc_aggregate([ir_measures.R @ k], qr, run)[ir_measures.R @ k]
        if abs(v - r["recall_2R"]) > 1e-9:
            raise AssertionError(f"topic {qid}: recall at 2R {r['recall_2R']} != ir_measures R@{k} {v}")
        checked += 1
    return checked


def summarize(per_seed: list[dict]) -> pd.DataFrame:
    """Per topic: mean over seeds."""
    rows = []
    for s, res in enumerate(per_seed):
        for qid, r in res.items():
            rows.append({"qid": qid, "seed": s, "recall_2R": r["recall_2R"], "effort_75": r["effort_75"]})
    df = pd.DataFrame(rows)
    return df.groupby("qid", sort=False)[["recall_2R", "effort_75"]].mean()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data" / "classic")
    ap.add_argument("--collections", nargs="+", default=list(COLLECTIONS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--batch-size", type=int, default=25)
    ap.add_argument("--schedule", choices=["fixed", "bmi"], default="fixed",
                    help="batch sizes for every method: fixed (--batch-size) or BMI's growing schedule")
    ap.add_argument("--skip-tarexp", action="store_true")
    ap.add_argument("--tarexp-features", choices=["sklearn", "qrelkit", "both"], default="sklearn")
    ap.add_argument("--check", action="store_true", help="check recall at 2R against ir_measures R@2R")
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out" / "cal_effectiveness.json")
    args = ap.parse_args(argv)

    from scipy.stats import wilcoxon

    from qrelkit.cal.features import build_features

    report = {"command": " ".join(["python", "benchmarks/cal_effectiveness.py", *(argv or sys.argv[1:])]),
              "machine": {"python": platform.python_version(), "platform": platform.platform()},
              "seeds": args.seeds, "batch_size": args.batch_size, "schedule": args.schedule, "collections": {}}
    table = []
    for name in args.collections:
        t0 = time.perf_counter()
        corpus, q, topics = load_collection(args.data_dir, name)
        feats = build_features(corpus)
        methods: dict[str, list[dict]] = {"qrelkit": [run_qrelkit(feats, topics, q, s, args.batch_size, args.schedule) for s in args.seeds]}
        t_q = time.perf_counter() - t0
        methods["BM25"] = [run_bm25(corpus, topics, q)]
        times = {"qrelkit": t_q}
        if not args.skip_tarexp:
            kinds = ["sklearn", "qrelkit"] if args.tarexp_features == "both" else [args.tarexp_features]
            for kind in kinds:
                t1 = time.perf_counter()
                X = tarexp_matrix(corpus, topics, kind, feats)
                label = "TARexp" if kind == "sklearn" else "TARexp (qrelkit features)"
                methods[label] = [run_tarexp(corpus, topics, q, s, args.batch_size, X, args.schedule) for s in args.seeds]
                times[label] = time.perf_counter() - t1
        if args.check:
            n = sum(check_ir_measures(r, q) for runs in methods.values() for r in runs)
            print(f"{name}: recall at 2R checked against ir_measures R@2R on {n} topic runs", file=sys.stderr)
        summ = {m: summarize(r) for m, r in methods.items()}
        coll = {"topics": len(topics), "documents": feats.n_rows, "relevant": int(len(q)), "methods": {}}
        for m, s in summ.items():
            entry = {"recall_2R": float(s["recall_2R"].mean()), "effort_75": float(s["effort_75"].mean()),
                     "seconds": round(times.get(m, 0.0), 2)}
            if m != "qrelkit":
                a, b = summ["qrelkit"], s.loc[summ["qrelkit"].index]
                for metric in ("recall_2R", "effort_75"):
                    diff = (a[metric] - b[metric]).to_numpy()
                    entry[f"p_{metric}"] = float(wilcoxon(a[metric], b[metric]).pvalue) if np.any(diff != 0) else 1.0
                entry["qrelkit_better_recall_topics"] = int((a["recall_2R"] > b["recall_2R"]).sum())
                entry["qrelkit_worse_recall_topics"] = int((a["recall_2R"] < b["recall_2R"]).sum())
            coll["methods"][m] = entry
            table.append((NAMES.get(name, name), m, entry))
        report["collections"][name] = coll
        print(f"{name}: {len(topics)} topics, {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("| collection | method | recall at 2R (mean) | effort to 75% recall (mean) | p (vs qrelkit): recall, effort |")
    print("|---|---|---|---|---|")
    for coll, m, e in table:
        p = f"{e['p_recall_2R']:.3g}, {e['p_effort_75']:.3g}" if "p_recall_2R" in e else ""
        print(f"| {coll} | {m} | {e['recall_2R']:.3f} | {e['effort_75']:.1f} | {p} |")
    ok = all(report["collections"][c]["methods"]["qrelkit"]["recall_2R"] >= report["collections"][c]["methods"][m]["recall_2R"]
             and report["collections"][c]["methods"]["qrelkit"]["effort_75"] <= report["collections"][c]["methods"][m]["effort_75"]
             for c in report["collections"] for m in report["collections"][c]["methods"])
    print(f"\nqrelkit at least as good as every other method on every collection: {ok}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
