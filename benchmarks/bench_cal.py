"""Benchmark: one CAL iteration (fit, score the collection, select the next 25) in qrelkit, TARexp
and hical, side by side on the same synthetic passages; and the one-time feature build.

    python benchmarks/bench_cal.py                        # 1M and 100k passages, all tools
    python benchmarks/bench_cal.py --sizes 100000 --skip-peers --iterations 20

Data: simulated campaigns (``qrelkit.simulate.campaign.simulate_campaign``: about 55 words per
passage, 20 topics, 10% near-duplicates), generated once into ``OUT/cal-campaign-N/`` and reused
while their parameters match.

The CAL state is the same for every tool: topic ``1001``'s query as the seed, and 200 judged
passages (every relevant passage of the topic's qrels up to 60, the rest non-relevant: graded 0
or random), written to ``OUT/cal-state-N.tsv``. One iteration, timed ``--iterations`` times from
that same state (the median is reported):

* **qrelkit**: ``CalRanker.next_batch`` — 100 fresh random negatives, logistic regression
  (liblinear) on the training rows' columns, one float32 sparse product over all passages,
  argpartition, 25 passages. Features: ``build_features(corpus.jsonl)`` (stored, then opened
  memory-mapped by the iteration process).
* **TARexp**: the work of one ``OnePhaseTARWorkflow.step()`` on that state —
  ``trainRanker(*dataset.getTrainingData(ledger))`` (``SklearnRanker(LogisticRegression,
  solver="liblinear")``), ``scoreDocuments(dataset.getAllData())`` (``predict_proba``) and
  ``RelevanceSampler.sampleDocs(25)``. The query is one extra document, labelled relevant.
  Features: scikit-learn ``TfidfVectorizer(sublinear_tf=True)`` on the corpus (timed).
* **hical**: a ``Session`` (manual retraining, 2 threads) seeded with the query and the 200
  judgments; one iteration = ``retrain()`` + ``get_doc_to_judge(25)``. Features: hical's native
  corpus builder (``build_corpus``, JSONL, 2 build threads; timed).

Every tool runs in a fresh subprocess that reports its own times (imports excluded), CPU time and
peak RSS (``VmHWM``); the parent records the CPU other processes used meanwhile (the machine is
shared) and, with ``--wait-idle``, waits for a quiet moment first.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import ChildFailed, cpu_s, emit_result, peak_rss_mb, run_child_process, warm_page_cache  # noqa: E402
from _procs import median_stages, tool_from_processes  # noqa: E402
from _results import benchmark_result, call, size_result, target, write_result  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TOOLS = ("qrelkit", "tarexp", "hical")
TOPIC = "1001"
N_JUDGED = 200
MAX_RELEVANT = 60


# =========================================================================== children


def _state(path: Path) -> tuple[str, list[str], list[int]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    query = lines[0].split("\t", 1)[1]
    pids, labels = [], []
    for ln in lines[1:]:
        p, lab = ln.split("\t")
        pids.append(p)
        labels.append(int(lab))
    return query, pids, labels


def _median(xs):
    return statistics.median(xs) if xs else None


def child_qrelkit_features(corpus: Path, work: Path, a) -> dict:
    t0 = time.perf_counter()
    from qrelkit.cal.features import build_features

    t1 = time.perf_counter()
    c1 = cpu_s()
    f = build_features(corpus, work / "features")
    t2 = time.perf_counter()
    return {"import_s": t1 - t0, "features_s": t2 - t1, "features_cpu_s": cpu_s() - c1, "rows": f.n_rows,
            "terms": f.n_terms, "nnz": f.nnz, "stages": {k: round(v, 3) for k, v in f.timings.items()},
            "peak_rss_mb": peak_rss_mb()}


def child_qrelkit(corpus: Path, work: Path, a) -> dict:
    t0 = time.perf_counter()
    import numpy as np

    from qrelkit.cal.features import load_features
    from qrelkit.cal.loop import CalParams, CalRanker

    t1 = time.perf_counter()
    query, pids, labels = _state(a.state)
    f = load_features(work / "features")
    rows = f.rows_of(pids)
    rel = np.asarray(labels) > 0
    s0 = time.perf_counter()
    rk = CalRanker(f, query, topic=TOPIC, thread="all", params=CalParams(seed=0))
    setup_s = time.perf_counter() - s0
    first, warm, stages, batches = None, [], [], []
    for it in range(a.iterations + 1):  # the first call (kernels loaded or compiled) and the warm repeats
        c0, s = cpu_s(), time.perf_counter()
        b = rk.next_batch(rows, rel, rows, 25, it)
        one = call(time.perf_counter() - s, cpu_s() - c0)
        if it == 0:
            first = one
            continue
        warm.append(one)
        stages.append(b.timings)
        batches.append(b.pids)
    times = [c["wall_s"] for c in warm]
    return {"import_s": t1 - t0, "setup_s": setup_s, "first": first, "warm": warm, "iteration_s": times,
            "median_s": _median(times), "cpu_per_iteration_s": _median([c["cpu_s"] for c in warm]),
            "stages": {k: _median([s[k] for s in stages]) for k in stages[0]}, "batch": batches[0],
            "train_rows": int(b.n_train), "columns": int(b.n_columns), "peak_rss_mb": peak_rss_mb()}


def child_tarexp(corpus: Path, work: Path, a) -> dict:
    t0 = time.perf_counter()
    import numpy as np
    import scipy.sparse as sp
    import tarexp
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from tarexp import component

    from qrelkit.io.corpus import read_corpus

    t1 = time.perf_counter()
    query, pids, labels = _state(a.state)
    table = read_corpus(corpus)
    texts = table["text"].to_pylist()
    all_pids = table["pid"].to_pylist()
    del table
    c0 = cpu_s()
    s = time.perf_counter()
    X = TfidfVectorizer(sublinear_tf=True).fit_transform(texts + [query]).tocsr()
    features_s = time.perf_counter() - s
    features_cpu = cpu_s() - c0
    del texts
    n = X.shape[0] - 1
    pos = {p: i for i, p in enumerate(all_pids)}
    ds = tarexp.SparseVectorDataset.from_sparse(X)
    ranker = component.SklearnRanker(LogisticRegression, solver="liblinear", random_state=0)
    sampler = component.RelevanceSampler()
    ledger = tarexp.Ledger(X.shape[0])
    idx = [pos[p] for p in pids] + [n]
    ledger.annotate(idx, [bool(v > 0) for v in labels] + [True])
    first, warm, st = None, [], []
    batch = None
    for it in range(a.iterations + 1):  # the first call, then the warm repeats
        c0, s0 = cpu_s(), time.perf_counter()
        ranker.trainRanker(*ds.getTrainingData(ledger))
        s1 = time.perf_counter()
        scores = ranker.scoreDocuments(ds.getAllData())
        s2 = time.perf_counter()
        batch = sampler.sampleDocs(25, ledger, scores)
        s3 = time.perf_counter()
        one = call(s3 - s0, cpu_s() - c0)
        if it == 0:
            first = one
            continue
        warm.append(one)
        st.append({"fit": s1 - s0, "score": s2 - s1, "select": s3 - s2})
    times = [c["wall_s"] for c in warm]
    del sp
    return {"import_s": t1 - t0, "features_s": features_s, "features_cpu_s": features_cpu,
            "first": first, "warm": warm, "iteration_s": times, "median_s": _median(times),
            "cpu_per_iteration_s": _median([c["cpu_s"] for c in warm]),
            "stages": {k: _median([x[k] for x in st]) for k in st[0]},
            "batch": [all_pids[int(i)] for i in np.asarray(batch)], "peak_rss_mb": peak_rss_mb()}


def child_hical(corpus: Path, work: Path, a) -> dict:
    import contextlib
    import io

    t0 = time.perf_counter()
    from hical import SessionConfig, build_corpus, open_dataset
    from hical.config.schema import CorpusConfig, InputConfig, OutputConfig, PreprocessingConfig

    t1 = time.perf_counter()
    query, pids, labels = _state(a.state)
    cfg = CorpusConfig(
        input=InputConfig(format="jsonl", path=str(corpus), doc_id_field="pid", text_fields=["passage"]),
        preprocessing=PreprocessingConfig(mode="native"),
        output=OutputConfig(path=str(work / "hical" / "docs.bin"), build_threads=2))
    c0 = cpu_s()
    s = time.perf_counter()
    res = build_corpus(cfg)
    features_s = time.perf_counter() - s
    features_cpu = cpu_s() - c0
    ds = open_dataset(res.document_features_path)
    # hical prints its training log on stdout: keep it out of the result line
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink):
        sess = ds.start_session(relevant_seeds=query, config=SessionConfig(num_threads=2), review_batch_size=25,
                                retraining="manual")
        sess.record_judgment_batch([(p, 1 if v > 0 else -1) for p, v in zip(pids, labels)])
        first, warm, st = None, [], []
        batch = None
        for it in range(a.iterations + 1):  # the first call, then the warm repeats
            c0, s0 = cpu_s(), time.perf_counter()
            sess.retrain()
            s1 = time.perf_counter()
            batch = sess.get_doc_to_judge(25)
            s2 = time.perf_counter()
            one = call(s2 - s0, cpu_s() - c0)
            if it == 0:
                first = one
                continue
            warm.append(one)
            st.append({"retrain": s1 - s0, "get_doc_to_judge": s2 - s1})
    times = [c["wall_s"] for c in warm]
    return {"import_s": t1 - t0, "features_s": features_s, "features_cpu_s": features_cpu,
            "first": first, "warm": warm, "iteration_s": times, "median_s": _median(times),
            "cpu_per_iteration_s": _median([c["cpu_s"] for c in warm]),
            "stages": {k: _median([x[k] for x in st]) for k in st[0]},
            "batch": [x.doc_id for x in batch], "documents": ds.document_count, "peak_rss_mb": peak_rss_mb()}


def child_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", required=True, choices=["qrelkit-features", *TOOLS])
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--state", required=True, type=Path)
    ap.add_argument("--iterations", type=int, default=15)
    a = ap.parse_args(argv)
    fn = {"qrelkit-features": child_qrelkit_features, "qrelkit": child_qrelkit, "tarexp": child_tarexp,
          "hical": child_hical}[a.child]
    res = fn(a.corpus, a.work, a)
    emit_result(res)
    return 0


# =========================================================================== parent


def run_child(tool: str, corpus: Path, work: Path, state: Path, iterations: int, idle_wait: float) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", tool, "--corpus", str(corpus), "--work", str(work),
           "--state", str(state), "--iterations", str(iterations)]
    try:
        return run_child_process(cmd, idle_wait=idle_wait, cwd=ROOT, stderr_tail=5000)
    except ChildFailed as exc:
        return {"error": f"{tool}: {exc}"}


def ensure_campaign(folder: Path, n: int, seed: int) -> None:
    want = {"n_passages": n, "n_topics": 20, "n_groups": 2, "dup_fraction": 0.1, "seed": seed}
    summ = folder / "summary.json"
    if summ.exists() and (folder / "corpus.jsonl").exists():
        try:
            s = json.loads(summ.read_text())
            if all(s["parameters"].get(k) == v for k, v in want.items()):
                print(f"reusing {folder} ({n:,} passages)", flush=True)
                return
        except (ValueError, KeyError):
            pass
    from qrelkit.simulate.campaign import simulate_campaign

    print(f"generating {folder} ({n:,} passages) ...", flush=True)
    simulate_campaign(folder, n_passages=n, n_topics=20, n_groups=2, dup_fraction=0.1, seed=seed)


def make_state(folder: Path, out: Path, seed: int) -> dict:
    """Topic 1001's query and 200 judged passages (relevant ones from the qrels, up to 60)."""
    import numpy as np

    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.topics import read_topics

    topics = read_topics(folder / "topics.tsv")
    query = topics.loc[topics["qid"] == TOPIC, "text"].iloc[0]
    q = read_qrels(folder / "qrels.txt").to_pandas()
    q = q[q["qid"] == TOPIC]
    rng = np.random.default_rng(seed)
    rel = sorted(q.loc[q["rel"] >= 2, "docid"])
    rel = list(rng.permutation(rel)[:MAX_RELEVANT])
    non = list(rng.permutation(sorted(q.loc[q["rel"] < 2, "docid"])))
    pids, labels = list(rel), [1] * len(rel)
    for p in non[: N_JUDGED - len(pids)]:
        pids.append(p)
        labels.append(0)
    graded = set(q["docid"])
    summary = json.loads((folder / "summary.json").read_text())
    n = summary["parameters"]["n_passages"]
    width = len(str(n - 1))
    while len(pids) < N_JUDGED:
        p = f"p{int(rng.integers(n)):0{max(width, 7)}d}"
        if p not in graded and p not in pids:
            pids.append(p)
            labels.append(0)
    with open(out, "w", encoding="utf-8") as fh:
        fh.write(f"{TOPIC}\t{query}\n")
        for p, lab in zip(pids, labels):
            fh.write(f"{p}\t{lab}\n")
    return {"query": query, "judged": len(pids), "relevant": int(sum(labels))}


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("qrelkit", "tarexp", "hical", "scikit-learn", "scipy", "numpy", "numba", "pyarrow"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def _ms(x) -> str:
    return "—" if x is None else f"{x * 1000:.1f}"


def _tool(tool: str, runs: list[dict], feats: list[dict]) -> dict:
    """One tool at one size in the shared shape (:func:`_procs.tool_from_processes`): the median of
    the processes' first iterations, the warm iterations of every process, the largest peak RSS."""
    f = [x["features_s"] for x in (feats if tool == "qrelkit" else runs) if "features_s" in x]
    note = (f"one-time features {statistics.median(f):.1f} s (median over processes)" if f else None)
    if tool == "qrelkit":
        note = (note or "") + f"; ranker set-up (loads scikit-learn) {statistics.median([x['setup_s'] for x in runs]) * 1e3:.0f} ms"
    return tool_from_processes(tool, runs, note=note, stages=median_stages(runs))


def shared_result(report: dict, tools: list[str]) -> dict:
    """The run in benchmarks/_results.py's shape (for docs/benchmarks.md)."""
    sizes, targets = [], []
    for n in sorted(report["sizes"], key=int):
        res = report["sizes"][n]["results"]
        rows = [_tool(t, [x for x in res.get(t, []) if "error" not in x], res["qrelkit-features"])
                for t in tools if any("error" not in x for x in res.get(t, []))]
        sizes.append(size_result(f"{int(n):,} passages", int(n), "passage", rows))
        q = next((r for r in rows if r["tool"] == "qrelkit"), None)
        if q and q["first"]:
            targets.append(target(f"first CAL iteration in a fresh process above a warm one, {int(n):,} passages",
                                  q["first"]["wall_s"] - q["warm"]["wall_s"], "<=", 0.3, "s"))
    return benchmark_result("cal", "One CAL iteration", sizes, peers=("hical", "tarexp", "scikit-learn"),
                            targets=targets, notes=[
        "One iteration = fit on the same 200 judged passages + 100 fresh negatives (qrelkit), score every "
        "passage, select the next 25; every tool starts from the same state of topic 1001.",
        "TARexp gets scikit-learn TfidfVectorizer features, hical its native corpus builder (2 threads), "
        "qrelkit its own stored features opened memory-mapped; building them is a one-time cost (notes).",
        "The first call is the first iteration after the ranker or session is set up in a fresh process."])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return child_main(argv)
    ap = argparse.ArgumentParser(description="One CAL iteration: qrelkit vs TARexp vs hical.")
    ap.add_argument("--sizes", nargs="+", type=int, default=[1_000_000, 100_000])
    ap.add_argument("--iterations", type=int, default=15, help="timed iterations per tool (median reported)")
    ap.add_argument("--repeats", type=int, default=1, help="fresh processes per tool and size")
    ap.add_argument("--tools", nargs="+", default=list(TOOLS), choices=list(TOOLS))
    ap.add_argument("--skip-peers", action="store_true", help="qrelkit only")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--wait-idle", type=float, default=60.0, help="seconds to wait for a quiet machine before each process")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "bench-out")
    a = ap.parse_args(argv)
    tools = ["qrelkit"] if a.skip_peers else a.tools
    report = {"command": "python benchmarks/bench_cal.py " + " ".join(shlex.quote(x) for x in argv),
              "versions": _versions(), "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
              "sizes": {}}
    for n in a.sizes:
        folder = a.out_dir / f"cal-campaign-{n}"
        ensure_campaign(folder, n, a.seed)
        corpus = folder / "corpus.jsonl"
        state = a.out_dir / f"cal-state-{n}.tsv"
        st = make_state(folder, state, a.seed)
        work = a.out_dir / f"cal-work-{n}"
        work.mkdir(parents=True, exist_ok=True)
        warm_page_cache(corpus)
        res: dict[str, list] = {"qrelkit-features": []}
        for r in range(a.repeats):
            x = run_child("qrelkit-features", corpus, work, state, a.iterations, a.wait_idle)
            res["qrelkit-features"].append(x)
            print(f"[{n:,}] qrelkit features #{r + 1}: {x.get('features_s', float('nan')):.2f} s "
                  f"(other load {x.get('background_cores', 0):.2f} cores)", flush=True)
            for tool in tools:
                y = run_child(tool, corpus, work, state, a.iterations, a.wait_idle)
                res.setdefault(tool, []).append(y)
                if "error" in y:
                    print(f"[{n:,}] {tool}: {y['error']}", flush=True)
                    continue
                print(f"[{n:,}] {tool} #{r + 1}: iteration median {_ms(y['median_s'])} ms "
                      f"(stages {', '.join(f'{k} {_ms(v)}' for k, v in y['stages'].items())}); "
                      f"features {y.get('features_s', float('nan')):.2f} s; peak {y['peak_rss_mb']:.0f} MB; "
                      f"other load {y.get('background_cores', 0):.2f} cores", flush=True)
        report["sizes"][str(n)] = {"state": st, "results": res}
    out = a.out_dir / "bench_cal.json"
    out.write_text(json.dumps(report, indent=2) + "\n")
    write_result(shared_result(report, tools), a.out_dir / "cal.json", "bench_cal.py", argv)
    # the table
    print("\n| passages | tool | one iteration, median (min-max) | fit / score / select | features (one time) | peak RSS (iteration process) | other load |")
    print("|---|---|---|---|---|---|---|")
    for n, s in report["sizes"].items():
        feats = [x["features_s"] for x in s["results"]["qrelkit-features"] if "features_s" in x]
        for tool in tools:
            runs = [x for x in s["results"].get(tool, []) if "error" not in x]
            if not runs:
                print(f"| {int(n):,} | {tool} | failed | | | | |")
                continue
            its = [t for x in runs for t in x["iteration_s"]]
            med = statistics.median(its)
            stg = median_stages(runs)
            parts = " / ".join(_ms(v) for v in stg.values())
            f_s = statistics.median(feats) if tool == "qrelkit" and feats else statistics.median([x["features_s"] for x in runs])
            load = statistics.median([x.get("background_cores", 0.0) for x in runs])
            print(f"| {int(n):,} | {tool} | **{_ms(med)} ms** ({_ms(min(its))}-{_ms(max(its))}) | {parts} ms | "
                  f"{f_s:.1f} s | {max(x['peak_rss_mb'] for x in runs):.0f} MB | {load:.2f} |")
        q = [t for x in s["results"].get("qrelkit", []) if "error" not in x for t in x["iteration_s"]]
        for tool in tools:
            if tool == "qrelkit" or not q:
                continue
            o = [t for x in s["results"].get(tool, []) if "error" not in x for t in x["iteration_s"]]
            if o:
                print(f"[{int(n):,}] qrelkit is {statistics.median(o) / statistics.median(q):.1f}x faster than {tool} per iteration")
    print(f"\nresults: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
