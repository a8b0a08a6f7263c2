"""Benchmark: near-duplicate clustering (MinHash + LSH + connected components), qrelkit against
the datasketch README loop and a rensa pipeline.

    python benchmarks/bench_dedupe.py                                  # 1M and 4M, peers on samples
    python benchmarks/bench_dedupe.py --sizes 1000000 --repeats 5 --skip-peers
    python benchmarks/bench_dedupe.py --sizes 200000 --peer-sample 5000 --repeats 1   # smoke test

Data: simulated campaigns (``qrelkit.simulate.campaign.simulate_campaign``, 20 topics, 4 groups,
10% near-duplicates made by 0-3 word edits, ground truth in ``neardup_truth.tsv``), generated once
into ``OUT/dedupe-campaign-N[-sSEED]/`` and reused while their parameters match.

Every measured tool runs in a fresh Python subprocess that reports its own wall time (imports
excluded, reported apart), CPU time and peak RSS (``VmHWM``, the high-water mark of that
process's own memory, interpreter and imports included); the parent also records the process wall time and the CPU that *other*
processes used meanwhile (the machine is shared). Medians over ``--repeats``.

* **datasketch** (README loop): for each passage ``json.loads`` the line, Python tokenizing
  (lower-case, ``re.findall(r"[a-z0-9]+")`` (``[a-z]+`` with ``keep_digits=False``), word 3-gram shingles), ``MinHash(num_perm=128)`` +
  ``update`` per shingle, ``MinHashLSH.query`` then ``insert``; candidates verified by
  ``MinHash.jaccard`` >= threshold; union-find; class table written as TSV.
* **rensa, loop**: the same with ``RMinHash(128, seed)`` + ``update(shingles)`` and
  ``RMinHashLSH(threshold, 128, bands)``.
* **rensa, bulk**: rensa's batch API: ``RMinHash.from_token_sets`` and ``insert_many`` per chunk
  of 20k passages, then ``query_all``; verification and union-find as above.
* **qrelkit**: ``cluster_corpus(corpus.jsonl, DedupeParams())`` (read, tokenize, sign, band,
  verify, cluster) + ``write_table(classes, "classes.parquet", kind="classes")``.

All tools use the same LSH parameters: qrelkit's defaults (128 permutations, 32 bands x 4 rows,
threshold 0.6, word 3-gram shingles of letters and digits). The peers verify candidates by the
Jaccard estimated from their signatures; qrelkit by its default, the exact Jaccard of shingle sets. ``--peer-sample``
says how many passages each peer gets: at least the first size runs it on that whole corpus,
side by side with qrelkit (``--peer-sample 1000000 --peer-repeats 1``: datasketch then takes
about 20 minutes); fewer give a *class-closed* sample of the first size's corpus (the default,
for a quick comparison): passages are drawn by a hash of their true class, so a sampled class
comes whole and the sample has the corpus's share of near-duplicates (its truth is the full
truth restricted to the sample). qrelkit also runs on those sample files, so accuracy is
compared on identical inputs.

Before measuring, qrelkit runs once with an empty numba cache (``NUMBA_CACHE_DIR`` set to a fresh
folder: the "cold" first run, compilation included) and once untimed with the normal cache.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import ChildFailed, cpu_s, emit_result, peak_rss_mb, profile_text, run_child_process  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

PEERS = ("datasketch", "rensa-loop", "rensa-bulk")
DEFAULT_PEER_SAMPLE = "datasketch=20000,rensa-loop=100000,rensa-bulk=100000"


# =========================================================================== children


class _UnionFind:
    """Plain-Python union-find over 0..n-1; the root of a class is its first member."""

    def __init__(self) -> None:
        self.parent: list[int] = []

    def add(self) -> int:
        self.parent.append(len(self.parent))
        return len(self.parent) - 1

    def find(self, i: int) -> int:
        p = self.parent
        while p[i] != i:
            p[i] = p[p[i]]
            i = p[i]
        return i

    def union(self, i: int, j: int) -> None:
        a, b = self.find(i), self.find(j)
        if a < b:
            self.parent[b] = a
        elif b < a:
            self.parent[a] = b


def _write_classes_tsv(path: Path, pids: list[str], uf: _UnionFind) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("docid\tclass_id\n")
        for i, pid in enumerate(pids):
            fh.write(f"{pid}\t{pids[uf.find(i)]}\n")


def _py_tokenizer(ngram: int, keep_digits: bool = True):
    import re

    word = re.compile(r"[a-z0-9]+" if keep_digits else r"[a-z]+")

    def shingles(text: str) -> list[str]:
        ws = word.findall(text.lower())
        if len(ws) < ngram:
            return [" ".join(ws)] if ws else []
        return [" ".join(ws[i : i + ngram]) for i in range(len(ws) - ngram + 1)]

    return shingles


def _read_jsonl(fh):
    """(pid, text) per line of an MS MARCO v2 style JSONL corpus, with the stdlib json module."""
    import json as _json

    for line in fh:
        if not line.strip():
            continue
        obj = _json.loads(line)
        pid = obj.get("pid", obj.get("id"))
        text = obj.get("passage", obj.get("text")) or ""
        yield str(pid), text


def child_datasketch(corpus: Path, out: Path, p: dict) -> dict:
    t0 = time.perf_counter()
    from datasketch import MinHash, MinHashLSH

    t1 = time.perf_counter()
    rss_imports, c1 = peak_rss_mb(), cpu_s()
    shingles = _py_tokenizer(p["ngram"], p["keep_digits"])
    K, thr = p["num_perm"], p["threshold"]
    lsh = MinHashLSH(threshold=thr, num_perm=K, params=(p["bands"], p["rows"]))
    uf, pids, mhs = _UnionFind(), [], []
    candidates = verified = 0
    with open(corpus, "rb") as fh:
        for pid, text in _read_jsonl(fh):
            i = uf.add()
            pids.append(pid)
            sh = shingles(text)
            if not sh:  # an empty passage is its own class
                mhs.append(None)
                continue
            m = MinHash(num_perm=K, seed=p["seed"])
            for s in sh:
                m.update(s.encode("utf8"))
            for j in lsh.query(m):
                candidates += 1
                if m.jaccard(mhs[j]) >= thr:
                    verified += 1
                    uf.union(i, j)
            lsh.insert(i, m)
            mhs.append(m)
    t2 = time.perf_counter()
    _write_classes_tsv(out, pids, uf)
    t3 = time.perf_counter()
    return {"import_s": t1 - t0, "stages": {"read+sign+lsh+union": t2 - t1, "write": t3 - t2},
            "work_s": t3 - t1, "work_cpu_s": cpu_s() - c1, "rss_after_imports_mb": rss_imports,
            "peak_rss_mb": peak_rss_mb(), "passages": len(pids), "candidate_pairs": candidates,
            "verified_pairs": verified}


def child_rensa_loop(corpus: Path, out: Path, p: dict) -> dict:
    t0 = time.perf_counter()
    from rensa import RMinHash, RMinHashLSH

    t1 = time.perf_counter()
    rss_imports, c1 = peak_rss_mb(), cpu_s()
    shingles = _py_tokenizer(p["ngram"], p["keep_digits"])
    K, thr = p["num_perm"], p["threshold"]
    lsh = RMinHashLSH(thr, K, p["bands"])
    uf, pids, mhs = _UnionFind(), [], []
    candidates = verified = 0
    with open(corpus, "rb") as fh:
        for pid, text in _read_jsonl(fh):
            i = uf.add()
            pids.append(pid)
            sh = shingles(text)
            if not sh:
                mhs.append(None)
                continue
            m = RMinHash(K, p["seed"])
            m.update(sh)
            for j in lsh.query(m):
                candidates += 1
                if m.jaccard(mhs[j]) >= thr:
                    verified += 1
                    uf.union(i, j)
            lsh.insert(i, m)
            mhs.append(m)
    t2 = time.perf_counter()
    _write_classes_tsv(out, pids, uf)
    t3 = time.perf_counter()
    return {"import_s": t1 - t0, "stages": {"read+sign+lsh+union": t2 - t1, "write": t3 - t2},
            "work_s": t3 - t1, "work_cpu_s": cpu_s() - c1, "rss_after_imports_mb": rss_imports,
            "peak_rss_mb": peak_rss_mb(), "passages": len(pids), "candidate_pairs": candidates,
            "verified_pairs": verified}


def child_rensa_bulk(corpus: Path, out: Path, p: dict, chunk: int = 20_000) -> dict:
    t0 = time.perf_counter()
    from rensa import RMinHash, RMinHashLSH

    t1 = time.perf_counter()
    rss_imports, c1 = peak_rss_mb(), cpu_s()
    shingles = _py_tokenizer(p["ngram"], p["keep_digits"])
    K, thr = p["num_perm"], p["threshold"]
    lsh = RMinHashLSH(thr, K, p["bands"])
    pids: list[str] = []
    keys: list[int] = []  # passage index of each signed (non-empty) passage
    mhs: list = []
    t_read = t_tok = t_sign = 0.0

    def flush(batch_keys, batch_sets):
        nonlocal t_sign
        s = time.perf_counter()
        ms = RMinHash.from_token_sets(batch_sets, K, p["seed"])
        lsh.insert_many(ms, len(mhs))
        mhs.extend(ms)
        keys.extend(batch_keys)
        t_sign += time.perf_counter() - s

    with open(corpus, "rb") as fh:
        bk, bs = [], []
        it = _read_jsonl(fh)
        while True:
            s = time.perf_counter()
            nxt = next(it, None)
            t_read += time.perf_counter() - s
            if nxt is None:
                break
            pid, text = nxt
            s = time.perf_counter()
            sh = shingles(text)
            t_tok += time.perf_counter() - s
            if sh:
                bk.append(len(pids))
                bs.append(sh)
            pids.append(pid)
            if len(bs) >= chunk:
                flush(bk, bs)
                bk, bs = [], []
        if bs:
            flush(bk, bs)
    t2 = time.perf_counter()
    cand = lsh.query_all(mhs)
    t3 = time.perf_counter()
    uf = _UnionFind()
    for _ in pids:
        uf.add()
    candidates = verified = 0
    for a, cs in enumerate(cand):
        ma = mhs[a]
        for b in cs:
            if b < a:
                candidates += 1
                if ma.jaccard(mhs[b]) >= thr:
                    verified += 1
                    uf.union(keys[a], keys[b])
    t4 = time.perf_counter()
    _write_classes_tsv(out, pids, uf)
    t5 = time.perf_counter()
    return {"import_s": t1 - t0,
            "stages": {"read JSON": t_read, "tokenize": t_tok, "sign+insert": t_sign, "query_all": t3 - t2,
                       "verify+union": t4 - t3, "write": t5 - t4},
            "work_s": t5 - t1, "work_cpu_s": cpu_s() - c1, "rss_after_imports_mb": rss_imports,
            "peak_rss_mb": peak_rss_mb(), "passages": len(pids), "candidate_pairs": candidates,
            "verified_pairs": verified}


def child_qrelkit(corpus: Path, out: Path, p: dict, profile: bool = False) -> dict:
    t0 = time.perf_counter()
    from qrelkit.dedupe.cluster import DedupeParams, cluster_corpus
    from qrelkit.io.tables import write_table

    t1 = time.perf_counter()
    rss_imports, c1 = peak_rss_mb(), cpu_s()
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    res = cluster_corpus(corpus, DedupeParams(**p))
    t2 = time.perf_counter()
    write_table(res.classes, out, kind="classes", params=res.params.as_dict())
    t3 = time.perf_counter()
    result = {"import_s": t1 - t0, "stages": {"cluster_corpus": t2 - t1, "write": t3 - t2},
              "work_s": t3 - t1, "work_cpu_s": cpu_s() - c1, "rss_after_imports_mb": rss_imports,
              "peak_rss_mb": peak_rss_mb(), "passages": res.stats["passages"],
              "candidate_pairs": res.stats["candidate_pairs"], "verified_pairs": res.stats["verified_pairs"],
              "classes": res.stats["classes"], "largest_class": res.stats["largest_class"]}
    if prof is not None:
        result["profile"] = profile_text(prof, 30)
    return result


class _StageTimer:
    """Exclusive wall time, calls and the peak RSS seen after each named stage. Wrapped functions
    may nest (time spent in an inner stage is not counted in the outer one)."""

    def __init__(self) -> None:
        self.t: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.rss: dict[str, float] = {}
        self.stack: list[list] = []

    def enter(self, name: str) -> None:
        self.stack.append([name, time.perf_counter(), 0.0])

    def leave(self) -> None:
        name, start, inner = self.stack.pop()
        el = time.perf_counter() - start
        self.t[name] = self.t.get(name, 0.0) + el - inner
        self.calls[name] = self.calls.get(name, 0) + 1
        self.rss[name] = peak_rss_mb()
        if self.stack:
            self.stack[-1][2] += el

    def wrap(self, module, attr: str, name: str) -> None:
        fn = getattr(module, attr)  # a renamed step fails here instead of vanishing from the table
        timer = self

        def wrapped(*args, **kwargs):
            timer.enter(name)
            try:
                return fn(*args, **kwargs)
            finally:
                timer.leave()

        setattr(module, attr, wrapped)

    def wrap_iter(self, module, attr: str, name: str) -> None:
        """Wrap a generator function: every ``next()`` on its result is timed as ``name``."""
        fn = getattr(module, attr)
        timer = self

        def wrapped(*args, **kwargs):
            it = iter(fn(*args, **kwargs))
            while True:
                timer.enter(name)
                try:
                    item = next(it)
                except StopIteration:
                    return
                finally:
                    timer.leave()
                yield item

        setattr(module, attr, wrapped)


def child_qrelkit_stages(corpus: Path, out: Path, p: dict) -> dict:
    """qrelkit's ``cluster_corpus`` + ``write_table`` with its internal steps wrapped by timers
    (exclusive wall time and the peak RSS after each step). The library code itself runs, so the
    classes are those of a plain run (the parent checks). Steps not wrapped (pid concatenation,
    duplicate-id check, the class table, ...) land in "cluster_corpus: rest"."""
    import qrelkit.io.corpus as corpus_mod
    from qrelkit.dedupe import _exact, cluster, lsh, minhash
    from qrelkit.dedupe.cluster import DedupeParams
    from qrelkit.io import tables

    rss_imports, c1 = peak_rss_mb(), cpu_s()
    T = _StageTimer()
    T.wrap(corpus_mod, "passages_upper_bound", "capacity: line count (pre-pass over the file)")
    T.wrap_iter(corpus_mod, "iter_corpus", "read JSON (pyarrow, per chunk)")
    T.wrap(minhash, "string_buffers", "sign: string buffers (cast, ASCII check)")
    T.wrap(minhash, "_signatures", "sign: tokenize + MinHash kernel (numba)")
    T.wrap(lsh, "first_with_key", "band: first_with_key (numba)")
    T.wrap(lsh, "candidate_pairs", "band: candidate_pairs (np.unique)")
    T.wrap(lsh, "verify_signatures", "verify (signature Jaccard)")
    T.wrap(lsh, "union_components", "union-find")
    T.wrap(cluster, "exact_sets", "verify: shingle sets of candidates (sort)")
    T.wrap(_exact, "exact_pairs", "verify (exact Jaccard)")
    T.wrap(cluster, "link_to_canonicals", "canonical linkage")
    T.wrap(cluster, "class_table", "class table")
    T.wrap(cluster, "sign_corpus", "sign_corpus: rest (pid concat, duplicate check, ...)")
    T.wrap(cluster, "cluster_signed", "cluster_signed: rest (canonicals, ...)")
    T.wrap(tables, "write_table", "write Parquet")
    params = DedupeParams(**p)
    w0 = time.perf_counter()
    res = cluster.cluster_corpus(corpus, params)
    tables.write_table(res.classes, out, kind="classes", params=res.params.as_dict())
    work = time.perf_counter() - w0
    n = res.stats["passages"]
    return {"stages": T.t, "calls": T.calls, "rss_after_mb": T.rss, "work_s": work, "work_cpu_s": cpu_s() - c1,
            "rss_after_imports_mb": rss_imports, "peak_rss_mb": peak_rss_mb(), "passages": n,
            "candidate_pairs": res.stats["candidate_pairs"], "verified_pairs": res.stats["verified_pairs"],
            "arrays_mb": {"signatures uint32[n,K]": n * params.num_perm * 4 / 2**20,
                          "first_with_key int32[bands,n]": params.bands * n * 4 / 2**20,
                          "band hash table per thread (uint64 keys + int64 values)": lsh._table_size(n) * 16 / 2**20},
            "stats": {k: v for k, v in res.stats.items() if isinstance(v, (int, float))}}


def child_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", required=True, choices=[*PEERS, "qrelkit", "qrelkit-stages"])
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--params", required=True)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args(argv)
    p = json.loads(a.params)
    if a.child == "qrelkit":
        res = child_qrelkit(a.corpus, a.out, p, a.profile)
    elif a.child == "qrelkit-stages":
        res = child_qrelkit_stages(a.corpus, a.out, p)
    else:
        lsh_p = {k: p[k] for k in ("ngram", "num_perm", "bands", "rows", "threshold", "seed", "keep_digits")}
        fn = {"datasketch": child_datasketch, "rensa-loop": child_rensa_loop, "rensa-bulk": child_rensa_bulk}[a.child]
        res = fn(a.corpus, a.out, lsh_p)
    emit_result(res)
    return 0


# =========================================================================== parent


def run_child(tool: str, corpus: Path, out: Path, params: dict, *, profile: bool = False,
              idle_wait: float = 0.0, env: dict | None = None) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", tool, "--corpus", str(corpus),
           "--out", str(out), "--params", json.dumps(params)]
    if profile:
        cmd.append("--profile")
    try:
        return run_child_process(cmd, idle_wait=idle_wait, cwd=ROOT, env=env)
    except ChildFailed as exc:
        raise SystemExit(f"{tool}: {exc}") from None


# --------------------------------------------------------------------------- data


def ensure_campaign(folder: Path, n: int, seed: int) -> dict:
    """A simulated campaign of ``n`` passages in ``folder`` (reused when its parameters match)."""
    want = {"n_passages": n, "n_topics": 20, "n_groups": 4, "dup_fraction": 0.1, "seed": seed}
    summ = folder / "summary.json"
    if summ.exists() and (folder / "corpus.jsonl").exists() and (folder / "neardup_truth.tsv").exists():
        try:
            s = json.loads(summ.read_text())
            if all(s["parameters"].get(k) == v for k, v in want.items()):
                print(f"reusing {folder} ({n:,} passages)", flush=True)
                return s
        except (ValueError, KeyError):
            pass
    from qrelkit.simulate.campaign import simulate_campaign

    print(f"generating {folder} ({n:,} passages) ...", flush=True)
    t0 = time.perf_counter()
    s = simulate_campaign(folder, n_passages=n, n_topics=20, n_groups=4, dup_fraction=0.1, seed=seed)
    print(f"  done in {time.perf_counter() - t0:.0f} s", flush=True)
    return s


def read_truth(path: Path):
    """Ground truth (``class_id<TAB>pid``, duplicates only) as a table docid, class_id."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    t = pacsv.read_csv(path, read_options=pacsv.ReadOptions(column_names=["class_id", "docid"]),
                       parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),
                       convert_options=pacsv.ConvertOptions(column_types={"class_id": pa.string(), "docid": pa.string()}))
    return pa.table({"docid": t["docid"], "class_id": t["class_id"]})


def make_samples(campaign: Path, sizes: dict[int, Path]) -> dict[int, dict]:
    """Class-closed samples of the campaign's corpus (nested: smaller samples are subsets of
    larger ones). A passage is kept when the hash of its true class is among the smallest, so
    classes are kept whole. Writes ``corpus.jsonl`` (the original lines, corpus order) and
    ``neardup_truth.tsv`` per sample."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    from qrelkit.io.corpus import iter_corpus

    pending = {n: d for n, d in sizes.items()
               if not ((d / "corpus.jsonl").exists() and (d / "neardup_truth.tsv").exists() and (d / ".done").exists())}
    info = {}
    for n, d in sizes.items():
        if n not in pending:
            info[n] = json.loads((d / ".done").read_text())
    if not pending:
        return info
    truth = read_truth(campaign / "neardup_truth.tsv")
    tmap = dict(zip(truth["docid"].to_pylist(), truth["class_id"].to_pylist()))
    pids = pa.concat_arrays([c["pid"].combine_chunks() if isinstance(c["pid"], pa.ChunkedArray) else c["pid"]
                             for c in iter_corpus(campaign / "corpus.jsonl")]).to_pylist()
    keys = pd.Series([tmap.get(p, p) for p in pids])
    h = pd.util.hash_pandas_object(keys, index=False).to_numpy()
    order = np.sort(h)
    for n, d in pending.items():
        d.mkdir(parents=True, exist_ok=True)
        cut = order[min(n, len(order)) - 1]
        keep = h <= cut
        with open(campaign / "corpus.jsonl", "rb") as src, open(d / "corpus.jsonl", "wb") as dst:
            k = 0
            for line in src:
                if not line.strip():
                    continue
                if keep[k]:
                    dst.write(line)
                k += 1
        assert k == len(pids), "corpus lines and passages differ"
        kept = set(np.asarray(pids, dtype=object)[keep].tolist())
        with open(campaign / "neardup_truth.tsv", "rb") as src, open(d / "neardup_truth.tsv", "wb") as dst:
            for line in src:
                if line.rstrip(b"\n").split(b"\t")[1].decode() in kept:
                    dst.write(line)
        meta = {"passages": int(keep.sum()), "source": str(campaign / "corpus.jsonl"),
                "truth_members": sum(1 for p in kept if p in tmap)}
        (d / ".done").write_text(json.dumps(meta))
        info[n] = meta
        print(f"sample {d}: {meta['passages']:,} passages, {meta['truth_members']:,} in true near-duplicate classes",
              flush=True)
    return info


def warm_cache(path: Path) -> None:
    with open(path, "rb") as fh:
        while fh.read(1 << 24):
            pass


# --------------------------------------------------------------------------- accuracy


def read_found(path: Path):
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if path.suffix == ".parquet":
        return pq.read_table(path, columns=["docid", "class_id"])
    t = pacsv.read_csv(path, parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),
                       convert_options=pacsv.ConvertOptions(column_types={"docid": pa.string(), "class_id": pa.string()}))
    return t.select(["docid", "class_id"])


def accuracy(found_path: Path, campaign_dir: Path, texts_cache: dict) -> dict:
    """Pair precision/recall and copy recall by edits of a class table against the ground truth
    of the corpus in ``campaign_dir`` (truth restricted to that corpus's passages)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from qrelkit.dedupe.accuracy import copy_recall_by_edits, pair_scores
    from qrelkit.io.corpus import iter_corpus

    found = read_found(found_path)
    truth = read_truth(campaign_dir / "neardup_truth.tsv")
    key = str(campaign_dir)
    if key not in texts_cache:
        need = pc.unique(pa.concat_arrays([truth["docid"].combine_chunks(), truth["class_id"].combine_chunks()]))
        parts = [c.filter(pc.is_in(c["pid"], value_set=need)).select(["pid", "text"])
                 for c in iter_corpus(campaign_dir / "corpus.jsonl")]
        texts_cache.clear()
        texts_cache[key] = pa.concat_tables(parts).combine_chunks()
    ps = pair_scores(found, truth)
    by = copy_recall_by_edits(found, truth, texts_cache[key], cap=3)
    return {"pairs": ps,
            "copy_recall": {str(r.edits): {"copies": int(r.copies), "found": int(r.found), "recall": float(r.recall)}
                            for r in by.itertuples()}}


# --------------------------------------------------------------------------- report


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def _rng(xs, nd=2):
    return f" ({min(xs):.{nd}f}-{max(xs):.{nd}f})" if len(xs) > 1 else ""


def parse_peer_sample(text: str) -> dict[str, int]:
    if "=" not in text:
        return {p: int(float(text)) for p in PEERS}
    out = {}
    for part in text.split(","):
        k, v = part.split("=")
        if k.strip() == "rensa":
            out["rensa-loop"] = out["rensa-bulk"] = int(float(v))
        else:
            out[k.strip()] = int(float(v))
    bad = set(out) - set(PEERS)
    if bad:
        raise SystemExit(f"unknown peer(s) in --peer-sample: {sorted(bad)}; known: {PEERS}")
    return out


def _versions() -> dict:
    import importlib.metadata as md

    out = {}
    for pkg in ("qrelkit", "numba", "numpy", "pyarrow", "datasketch", "rensa"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--child" in argv:
        return child_main(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000000,4000000",
                    help="comma-separated corpus sizes for qrelkit (the first one also feeds the peers' samples)")
    ap.add_argument("--peer-sample", default=DEFAULT_PEER_SAMPLE,
                    help="passages per peer: one number for all, or tool=N pairs "
                         f"(tools: {', '.join(PEERS)}; 'rensa' sets both); default %(default)s")
    ap.add_argument("--peers", default=",".join(PEERS), help="peers to run (default: all)")
    ap.add_argument("--repeats", type=int, default=3, help="measured runs per tool and size (median reported)")
    ap.add_argument("--peer-repeats", type=int, default=None,
                    help="measured runs per peer (default: --repeats; the peers on the full corpus take minutes)")
    ap.add_argument("--skip-peers", action="store_true", help="measure qrelkit only")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--skip-stages", action="store_true", help="skip qrelkit's per-stage timing run")
    ap.add_argument("--skip-cold", action="store_true", help="skip the run with an empty numba cache")
    ap.add_argument("--stage-repeats", type=int, default=1,
                    help="qrelkit runs with per-stage timers per size (per-stage medians reported)")
    ap.add_argument("--profile", action="store_true", help="also run qrelkit once under cProfile (first size)")
    ap.add_argument("--seed", type=int, default=0, help="campaign seed")
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    ap.add_argument("--wait-idle", type=float, default=20.0, metavar="SECONDS",
                    help="before each measurement wait up to SECONDS for other processes to use < 0.25 cores")
    ap.add_argument("--report-from", type=Path, metavar="JSON",
                    help="only print the report of an earlier run's bench_dedupe.json")
    a = ap.parse_args(argv)
    if a.report_from:
        print(render(json.loads(a.report_from.read_text()))[0])
        return 0

    from qrelkit.dedupe.cluster import DedupeParams

    params = DedupeParams().as_dict()  # the library defaults, used by every tool
    sizes = [int(float(s)) for s in a.sizes.split(",") if s.strip()]
    peer_n = {} if a.skip_peers else {k: v for k, v in parse_peer_sample(a.peer_sample).items()
                                      if k in a.peers.split(",")}
    a.out.mkdir(parents=True, exist_ok=True)
    work = a.out / "bench-dedupe-work"
    work.mkdir(exist_ok=True)
    suffix = f"-s{a.seed}" if a.seed else ""

    # ---------------------------------------------------------------- data
    campaigns = {n: a.out / f"dedupe-campaign-{n}{suffix}" for n in sizes}
    summaries = {n: ensure_campaign(d, n, a.seed) for n, d in campaigns.items()}
    base = sizes[0]
    # a peer asked for at least the whole first corpus runs on it; smaller numbers give samples
    sample_dirs = {m: a.out / f"dedupe-sample-{m}-of-{base}{suffix}" for m in sorted(set(peer_n.values())) if m < base}
    sample_info = make_samples(campaigns[base], sample_dirs) if sample_dirs else {}
    inputs: dict[str, Path] = {f"corpus-{n}": campaigns[n] for n in sizes}
    inputs |= {f"sample-{m}": d for m, d in sample_dirs.items()}
    npass = {f"corpus-{n}": summaries[n]["counts"]["passages"] for n in sizes}
    npass |= {f"sample-{m}": sample_info[m]["passages"] for m in sample_dirs}
    for d in inputs.values():
        warm_cache(d / "corpus.jsonl")

    # (tool, input) jobs; qrelkit on every corpus and on every peer sample
    jobs: list[tuple[str, str]] = [("qrelkit", f"corpus-{n}") for n in sizes]
    jobs += [("qrelkit", f"sample-{m}") for m in sample_dirs]
    jobs += [(tool, f"sample-{m}" if m < base else f"corpus-{base}") for tool, m in peer_n.items()]

    def out_path(tool: str, inp: str, tag: str = "") -> Path:
        return work / f"classes-{tool}-{inp}{tag}.{'parquet' if tool.startswith('qrelkit') else 'tsv'}"

    def show(tool: str, inp: str, r: dict, label: str = "") -> None:
        st = ", ".join(f"{k} {v:.2f}" for k, v in r["stages"].items())
        bg = r.get("background_cores")
        print(f"{tool:10s} {inp:15s}{label}: {r['work_s']:.2f} s wall, {r['work_cpu_s']:.2f} s CPU "
              f"({npass[inp] / r['work_s']:,.0f} passages/s; {st}), peak {r['peak_rss_mb']:.0f} MB"
              + ("" if bg is None else f", other load {bg:.2f} cores"), flush=True)

    # ---------------------------------------------------------------- qrelkit warm-up
    cold = None
    if not a.skip_cold:
        cache = Path(tempfile.mkdtemp(prefix="numba-cold-", dir=work))
        try:
            cold = run_child("qrelkit", inputs[f"corpus-{base}"] / "corpus.jsonl",
                             out_path("qrelkit", f"corpus-{base}", "-cold"), params,
                             env={"NUMBA_CACHE_DIR": str(cache)}, idle_wait=a.wait_idle)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        show("qrelkit", f"corpus-{base}", cold, " [cold numba cache]")
    warm = run_child("qrelkit", inputs[f"corpus-{base}"] / "corpus.jsonl",
                     out_path("qrelkit", f"corpus-{base}", "-warm"), params)
    show("qrelkit", f"corpus-{base}", warm, " [warm-up, not counted]")

    # ---------------------------------------------------------------- measurements (interleaved)
    results: dict[tuple[str, str], list[dict]] = {j: [] for j in jobs}
    peer_repeats = a.repeats if a.peer_repeats is None else a.peer_repeats
    for rep in range(a.repeats):
        for tool, inp in jobs:
            if tool in PEERS and rep >= peer_repeats:
                continue
            r = run_child(tool, inputs[inp] / "corpus.jsonl", out_path(tool, inp), params, idle_wait=a.wait_idle)
            results[(tool, inp)].append(r)
            show(tool, inp, r, f" #{rep + 1}")

    stages = {}
    if not a.skip_stages and a.stage_repeats > 0:
        runs_by_inp: dict[str, list[dict]] = {f"corpus-{n}": [] for n in sizes}
        for rep in range(a.stage_repeats):
            for n in sizes:
                inp = f"corpus-{n}"
                r = run_child("qrelkit-stages", inputs[inp] / "corpus.jsonl", out_path("qrelkit", inp, "-stages"),
                              params, idle_wait=a.wait_idle)
                runs_by_inp[inp].append(r)
                print(f"stages {inp} #{rep + 1}: " + ", ".join(f"{k} {v:.2f}" for k, v in r["stages"].items())
                      + f"; total {r['work_s']:.2f} s, peak {r['peak_rss_mb']:.0f} MB, "
                      f"other load {r.get('background_cores', float('nan')):.2f} cores", flush=True)
        for inp, rs in runs_by_inp.items():  # per-stage medians over the repeats
            names = list(dict.fromkeys(k for r in rs for k in r["stages"]))
            stages[inp] = {
                "repeats": len(rs),
                "stages": {k: median([r["stages"].get(k, 0.0) for r in rs]) for k in names},
                "rss_after_mb": {k: median([r["rss_after_mb"].get(k, float("nan")) for r in rs]) for k in names},
                "work_s": median([r["work_s"] for r in rs]), "work_cpu_s": median([r["work_cpu_s"] for r in rs]),
                "peak_rss_mb": median([r["peak_rss_mb"] for r in rs]),
                "background_cores": median([r.get("background_cores", float("nan")) for r in rs]),
                "arrays_mb": rs[-1]["arrays_mb"], "runs": rs,
            }
    profile = None
    if a.profile:
        profile = run_child("qrelkit", inputs[f"corpus-{base}"] / "corpus.jsonl",
                            out_path("qrelkit", f"corpus-{base}", "-prof"), params, profile=True)["profile"]

    # ---------------------------------------------------------------- checks and accuracy
    import pyarrow.parquet as pq

    same_as_stages = {}
    for inp in stages:
        x = pq.read_table(out_path("qrelkit", inp))
        y = pq.read_table(out_path("qrelkit", inp, "-stages"))
        same_as_stages[inp] = x.select(["docid", "class_id", "class_size"]).equals(y.select(["docid", "class_id", "class_size"]))
    acc: dict[tuple[str, str], dict] = {}
    if not a.skip_accuracy:
        texts_cache: dict = {}
        acc_jobs = [("qrelkit", f"corpus-{base}")] + [j for j in jobs if j[1].startswith("sample-") or j[0] in PEERS]
        for tool, inp in sorted(acc_jobs, key=lambda j: j[1]):
            acc[(tool, inp)] = accuracy(out_path(tool, inp), inputs[inp], texts_cache)
            ps = acc[(tool, inp)]["pairs"]
            print(f"accuracy {tool} {inp}: precision {ps['precision']:.4f}, recall {ps['recall']:.4f}", flush=True)

    # ---------------------------------------------------------------- report
    summary = {}
    for (tool, inp), rs in results.items():
        summary[f"{tool}@{inp}"] = {
            "tool": tool, "input": inp, "passages": npass[inp],
            "work_s": [r["work_s"] for r in rs], "work_cpu_s": [r["work_cpu_s"] for r in rs],
            "process_wall_s": [r["process_wall_s"] for r in rs], "import_s": [r["import_s"] for r in rs],
            "peak_rss_mb": [r["peak_rss_mb"] for r in rs],
            "background_cores": [r.get("background_cores", float("nan")) for r in rs],
            "stages": {k: median([r["stages"][k] for r in rs]) for k in rs[0]["stages"]},
            "candidate_pairs": rs[-1]["candidate_pairs"], "verified_pairs": rs[-1]["verified_pairs"],
        }
    data = {
        "command": "python benchmarks/bench_dedupe.py" + ("" if not argv else " " + shlex.join(argv)),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, Linux {platform.release()}, Python "
                   f"{platform.python_version()}",
        "versions": _versions(), "params": params, "sizes": sizes, "peer_sample": peer_n,
        "samples": {str(k): v for k, v in sample_info.items()}, "summary": summary,
        "runs": {f"{t}@{i}": rs for (t, i), rs in results.items()}, "cold": cold, "stages": stages,
        "same_as_stages": same_as_stages,
        "accuracy": {f"{t}@{i}": r for (t, i), r in acc.items()}, "profile": profile,
    }
    report, targets = render(data)
    data["targets"], data["markdown"] = targets, report
    print("\n" + report)
    if profile:
        print("\ncProfile of one qrelkit run (cumulative):\n")
        print(profile)
    out_json = a.out / "bench_dedupe.json"
    out_json.write_text(json.dumps(data, indent=2, default=str) + "\n")
    print(f"\n(results also in {out_json})")
    return 0 if all(same_as_stages.values()) else 1


QUIET = 0.3  # cores used by other processes below which a run counts as "quiet"


def render(d: dict) -> tuple[str, dict]:
    """The Markdown report (and the targets met) of a result dict (``bench_dedupe.json``)."""
    params, sizes, summary = d["params"], d["sizes"], d["summary"]
    base = sizes[0]
    for s in summary.values():
        s["rate"] = s["passages"] / median(s["work_s"])
        quiet = [w for w, bg in zip(s["work_s"], s["background_cores"]) if bg == bg and bg < QUIET]
        s["quiet_work_s"] = quiet
        s["quiet_rate"] = s["passages"] / median(quiet) if quiet else float("nan")
    peers = {k: s for k, s in summary.items() if s["tool"] in PEERS}
    best_peer = max(peers, key=lambda k: peers[k]["rate"]) if peers else None
    q_main = summary[f"qrelkit@corpus-{base}"]
    L = [f"Command: `{d['command']}`  ",
         f"Machine: {d.get('machine', '?')}; " + ", ".join(f"{k} {v}" for k, v in d["versions"].items()) + "  ",
         f"Parameters (all tools): word {params['ngram']}-gram shingles, {params['num_perm']} permutations, "
         f"{params['bands']} bands x {params['rows']} rows, candidates verified at "
         f"{'exact' if params.get('verify') == 'exact' else 'estimated'} Jaccard >= {params['threshold']} (peers: "
         f"estimated), connected components"
         + (f" (qrelkit: {params['linkage']} linkage)" if "linkage" in params else "")
         + (f". Peers on class-closed samples of the {base:,}-passage corpus where the input says so."
            if d.get("samples") else "."),
         "",
         "| tool | input | passages | runs | wall s, median (min-max) | passages/s | qrelkit 1M speed / this "
         "| CPU s | process wall s | peak RSS MB | other load, cores: median (max) | quiet runs: n, passages/s |",
         "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    order = sorted(summary.values(), key=lambda s: (s["tool"] != "qrelkit", s["input"].startswith("sample"),
                                                    s["passages"] if s["tool"] == "qrelkit" else -s["rate"]))
    for s in order:
        rel = "" if s["tool"] == "qrelkit" else f"{q_main['rate'] / s['rate']:.1f}x"
        qr = f"{len(s['quiet_work_s'])}, {s['quiet_rate']:,.0f}" if s["quiet_work_s"] else "0"
        L.append(f"| {s['tool']} | {s['input']} | {s['passages']:,} | {len(s['work_s'])} | "
                 f"{median(s['work_s']):.2f}{_rng(s['work_s'])} | {s['rate']:,.0f} | {rel} | "
                 f"{median(s['work_cpu_s']):.1f} | {median(s['process_wall_s']):.2f} | "
                 f"{median(s['peak_rss_mb']):.0f} | {median(s['background_cores']):.2f} "
                 f"({max(s['background_cores']):.2f}) | {qr} |")
    L.append("")
    targets = {}
    cold = d.get("cold")
    if cold:
        L.append(f"- cold first run ({base:,} passages, empty numba cache, compilation included): "
                 f"{cold['work_s']:.2f} s work, {cold['process_wall_s']:.2f} s process wall, other load "
                 f"{cold.get('background_cores', float('nan')):.2f} cores (warm median {median(q_main['work_s']):.2f} s)")
    rate = q_main["rate"]
    L.append(f"- qrelkit at {base:,} passages: **{rate:,.0f} passages/s** median over all runs, "
             f"{q_main['quiet_rate']:,.0f} over quiet runs (target >= 100,000)")
    targets["rate >= 100k/s"] = rate >= 100_000
    if best_peer:
        bp = summary[best_peer]
        ratio = rate / bp["rate"]
        qratio = q_main["quiet_rate"] / bp["quiet_rate"] if bp["quiet_work_s"] else float("nan")
        L.append(f"- vs the best peer ({bp['tool']}, {bp['rate']:,.0f} passages/s): **{ratio:.1f}x** "
                 f"({qratio:.1f}x on quiet runs; target >= 3x)")
        targets[">= 3x best peer"] = ratio >= 3
    peak = median(q_main["peak_rss_mb"])
    L.append(f"- qrelkit peak RSS at {base:,}: **{peak:,.0f} MB** (target < 1,500 MB)")
    targets["peak < 1.5 GB at 1M"] = peak < 1500
    for n in sizes[1:]:
        s = summary[f"qrelkit@corpus-{n}"]
        r = median(s["work_s"]) / median(q_main["work_s"])
        qr = (median(s["quiet_work_s"]) / median(q_main["quiet_work_s"])
              if s["quiet_work_s"] and q_main["quiet_work_s"] else float("nan"))
        limit = 4.5 * n / (4 * base)
        L.append(f"- qrelkit {n:,} / {base:,} time ratio: **{r:.2f}x** median over all runs, {qr:.2f}x over quiet "
                 f"runs, for {n / base:.0f}x the passages (target <= {limit:.2f}x); peak RSS "
                 f"{median(s['peak_rss_mb']):,.0f} MB")
        targets[f"{n // base}x size <= {limit:.2f}x time"] = r <= limit
    L.append("- targets: " + "; ".join(f"{k}: {'met' if v else '**missed**'}" for k, v in targets.items()))
    acc = d.get("accuracy") or {}
    if acc:
        L += ["", "Accuracy against the simulator's ground truth (pairs over the passages of each input; copy recall "
              "= share of true copies in their source's class, by word edits from the source):", "",
              "| tool | input | pair precision | pair recall | found pairs | true pairs | copy recall 0 / 1 / 2 / 3 edits |",
              "|---|---|---|---|---|---|---|"]
        keys = sorted(acc, key=lambda k: (k.split("@")[1].startswith("sample"), k.split("@")[1], not k.startswith("qrelkit")))
        for k in keys:
            tool, inp = k.split("@")
            ps, cr = acc[k]["pairs"], acc[k]["copy_recall"]
            crs = " / ".join(f"{cr[e]['recall']:.4f}" if e in cr else "-" for e in ("0", "1", "2", "3"))
            L.append(f"| {tool} | {inp} | {ps['precision']:.4f} | {ps['recall']:.4f} | {ps['found_pairs']:,} | "
                     f"{ps['true_pairs']:,} | {crs} |")
    stages = d.get("stages") or {}
    if stages:
        reps = max(st.get("repeats", 1) for st in stages.values())
        L += ["", f"qrelkit stage by stage (median of {reps} run(s) per size with the steps of `cluster_corpus` "
              "wrapped by timers: exclusive wall time, peak RSS after the step; the classes equal the plain run's: "
              + ", ".join(f"{k} {v}" for k, v in d.get("same_as_stages", {}).items()) + "):", "",
              "| stage | " + " | ".join(f"{k} s | {k} peak RSS MB" for k in stages) + " |",
              "|---|" + "---|---|" * len(stages)]
        names = list(dict.fromkeys(nm for st in stages.values() for nm in st["stages"]))
        for nm in names:
            L.append(f"| {nm} | " + " | ".join(f"{st['stages'].get(nm, float('nan')):.2f} | "
                                               f"{st['rss_after_mb'].get(nm, float('nan')):,.0f}" for st in stages.values()) + " |")
        L.append("| **total** (work, peak) | " + " | ".join(f"**{st['work_s']:.2f}** | **{st['peak_rss_mb']:,.0f}**"
                                                      for st in stages.values()) + " |")
        L.append("| other load (cores) | " + " | ".join(f"{st.get('background_cores', float('nan')):.2f} | "
                                                     for st in stages.values()) + " |")
        for inp, st in stages.items():
            L.append(f"- {inp} large arrays: " + ", ".join(f"{k} {v:,.0f} MB" for k, v in st["arrays_mb"].items()))
    return "\n".join(L), targets


if __name__ == "__main__":
    sys.exit(main())
