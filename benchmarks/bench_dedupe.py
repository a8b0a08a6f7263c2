"""Benchmark: near-duplicate clustering (MinHash + LSH, candidates verified, classes), qrelkit
beside rensa (and, when asked, datasketch), at two sizes.

    python benchmarks/bench_dedupe.py                                      # 1M and 4M passages
    python benchmarks/bench_dedupe.py --compare-with /tmp/qrelkit-before   # + the code before, outputs compared
    python benchmarks/bench_dedupe.py --sizes 100000,400000 --repeats 1 --peer-repeats 0   # a quick try

Data: simulated campaigns (``qrelkit.simulate.campaign.simulate_campaign``, 20 topics, 4 groups,
10% near-duplicates made by 0-3 word edits, ground truth in ``neardup_truth.tsv``), generated once
into ``OUT/dedupe-campaign-N[-sSEED]/`` and reused while their parameters match. Every tool gets
the same ``corpus.jsonl`` at each size. Each runs in a fresh Python process that times its first
call (what a user's command pays) and then ``--repeats`` warm calls (``--peer-repeats`` for the
peers), imports apart: wall and CPU seconds, its peak RSS (``VmHWM``), and the cores other
processes used meanwhile (measured by the parent):

* **qrelkit**: ``cluster_corpus(corpus.jsonl, DedupeParams())`` (read, tokenize, sign, band,
  verify by the exact Jaccard of shingle sets, canonical linkage) + ``write_table(classes,
  Parquet)``; its steps timed apart (the corpus is read on a helper thread beside the signing:
  the read overlaps the other stages);
* **qrelkit (before)** with ``--compare-with SRC``: the same calls on the source tree ``SRC``
  (imported through ``PYTHONPATH``): its class tables must be byte-identical, and its peak RSS is
  the memory limit (+10%);
* **rensa, bulk** (its fastest documented way for full-set MinHash): the corpus read with
  pyarrow's JSON reader, words by Python's ``re`` and word 3-gram shingles joined in Python (rensa
  has no tokenizer), ``RMinHash.from_token_sets`` + ``RMinHashLSH.insert_many`` per 20k passages,
  ``query_all``, candidates verified by ``RMinHash.jaccard`` >= threshold, union-find, TSV;
* **rensa, loop**: its README loop, ``RMinHash`` + ``update`` per passage, ``query`` then
  ``insert``, the lines read with ``json.loads``;
* **datasketch** (``--peers datasketch``; pure Python, far slower than rensa): its README loop, likewise.

The peers hold every sketch and their LSH index in memory (rensa: about 5 GB at 1M): a peer runs at the
larger size only when its peak RSS at the smaller one, grown with the passages, leaves
``--peer-headroom-gb`` of the machine's memory free; a note says so when it does not.

All tools use qrelkit's LSH parameters (128 permutations, 32 bands x 4 rows, threshold 0.6, word
3-gram shingles of letters and digits, lower-cased). The peers verify candidates by the Jaccard
their signatures estimate, qrelkit by the exact Jaccard of the shingle sets; rensa's and
datasketch's hash functions are their own, so their candidates differ from qrelkit's.

The first call: beside each size's first call, qrelkit clusters the first 20,000 passages of the
small corpus in a fresh process with its kernels in numba's on-disk cache (``--first-repeats``
warm calls after it: the fixed cost of loading the kernels), and once with an empty cache
(``NUMBA_CACHE_DIR`` a new folder: compiling included, what a fresh install pays before its
kernels are cached).

Checks: qrelkit's classes byte-identical to the code before (``--compare-with``); every member's
exact Jaccard to its canonical at least the threshold (the exact edge check); pair precision and
recall, and copy recall by word edits, against the simulator's truth for every tool.

The result (``OUT/dedupe.json``, the shape of ``benchmarks/_results.py``) holds both sizes, the
targets of issue 24 (>= 200k passages/s at the small size, time per passage growing <= 10% to the
large size, first call <= 0.3 s above a warm one at 20,000 passages and at each size, peak RSS
<= 1.1x the code before) and the checks; a Markdown summary is printed too.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _child import child_run, markdown, per_unit_growth, run_tool  # noqa: E402
from _machine import warm_page_cache  # noqa: E402
from _results import benchmark_result, size_result, target, tool_named, write_result  # noqa: E402

HERE = Path(__file__).resolve().parent
PEERS = ("rensa-bulk", "rensa-loop", "datasketch")
FIRST_PASSAGES = 20_000
LSH_KEYS = ("ngram", "num_perm", "bands", "rows", "threshold", "seed", "keep_digits")
NOTES = {
    "qrelkit": "cluster_corpus (exact verification, canonical linkage) + write_table (Parquet); the corpus is read "
               "on a helper thread beside the signing, so the read stage overlaps the others",
    "qrelkit (before)": "the same calls on the code before (--compare-with), imported through PYTHONPATH",
    "rensa-bulk": "pyarrow JSON reader, Python re words and 3-gram shingles, RMinHash.from_token_sets + "
                  "RMinHashLSH.insert_many per 20k passages, query_all, estimated Jaccard, union-find, TSV",
    "rensa-loop": "README loop: json.loads, Python re shingles, RMinHash.update, query then insert, estimated "
                  "Jaccard, union-find, TSV",
    "datasketch": "README loop: json.loads, Python re shingles, MinHash.update per shingle, MinHashLSH query then "
                  "insert, estimated Jaccard, union-find, TSV",
}


# =========================================================================== children


class _UnionFind:
    """Plain-Python union-find over 0..n-1; the root of a class is its first member."""

    def __init__(self, n: int = 0) -> None:
        self.parent: list[int] = list(range(n))

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
    for line in fh:
        if not line.strip():
            continue
        obj = json.loads(line)
        pid = obj.get("pid", obj.get("id"))
        text = obj.get("passage", obj.get("text")) or ""
        yield str(pid), text


def _read_chunks_pyarrow(path: Path, block: int = 32 << 20):
    """(pids, texts) lists per block of lines, parsed by pyarrow's JSON reader (its own threads)."""
    import io

    import pyarrow.json as pajson

    with open(path, "rb") as fh:
        rest = b""
        while True:
            data = fh.read(block)
            buf = rest + data
            cut = buf.rfind(b"\n") + 1 if data else len(buf)
            chunk, rest = buf[:cut], buf[cut:]
            if chunk.strip():
                t = pajson.read_json(io.BytesIO(chunk))
                text = "passage" if "passage" in t.column_names else "text"
                pid = "pid" if "pid" in t.column_names else "id"
                yield [str(p) for p in t[pid].to_pylist()], [x or "" for x in t[text].to_pylist()]
            if not data:
                return


class _Loop:
    """The README loop of a peer: ``sign(shingles)`` per passage, ``query`` then ``insert``."""

    def __init__(self, p: dict, new_sketch, lsh, sign) -> None:
        self.p, self.new_sketch, self.lsh, self.sign = p, new_sketch, lsh, sign

    def __call__(self, corpus: Path, out: Path) -> dict:
        shingles = _py_tokenizer(self.p["ngram"], self.p["keep_digits"])
        thr = self.p["threshold"]
        lsh = self.lsh()
        uf, pids, sketches = _UnionFind(), [], []
        stats = {"candidate_pairs": 0, "verified_pairs": 0}
        t0 = time.perf_counter()
        with open(corpus, "rb") as fh:
            for pid, text in _read_jsonl(fh):
                i = uf.add()
                pids.append(pid)
                sh = shingles(text)
                if not sh:  # an empty passage is its own class
                    sketches.append(None)
                    continue
                m = self.new_sketch()
                self.sign(m, sh)
                for j in lsh.query(m):
                    stats["candidate_pairs"] += 1
                    if m.jaccard(sketches[j]) >= thr:
                        stats["verified_pairs"] += 1
                        uf.union(i, j)
                lsh.insert(i, m)
                sketches.append(m)
        t1 = time.perf_counter()
        _write_classes_tsv(out, pids, uf)
        self.stats = {"passages": len(pids), **stats}
        return {"read+sign+lsh+union": t1 - t0, "write": time.perf_counter() - t1}


def child_datasketch(corpus: Path, out: Path, p: dict, repeats: int) -> None:
    mods = {}

    def imports():
        from datasketch import MinHash, MinHashLSH

        def sign(m, sh):
            for s in sh:
                m.update(s.encode("utf8"))

        mods["loop"] = _Loop(p, lambda: MinHash(num_perm=p["num_perm"], seed=p["seed"]),
                             lambda: MinHashLSH(threshold=p["threshold"], num_perm=p["num_perm"],
                                                params=(p["bands"], p["rows"])), sign)

    child_run(imports, lambda: mods["loop"](corpus, out), repeats, lambda: mods["loop"].stats)


def child_rensa_loop(corpus: Path, out: Path, p: dict, repeats: int) -> None:
    mods = {}

    def imports():
        from rensa import RMinHash, RMinHashLSH

        mods["loop"] = _Loop(p, lambda: RMinHash(p["num_perm"], p["seed"]),
                             lambda: RMinHashLSH(p["threshold"], p["num_perm"], p["bands"]), lambda m, sh: m.update(sh))

    child_run(imports, lambda: mods["loop"](corpus, out), repeats, lambda: mods["loop"].stats)


def child_rensa_bulk(corpus: Path, out: Path, p: dict, repeats: int, chunk: int = 20_000) -> None:
    mods, info = {}, {}

    def imports():
        import pyarrow.json  # noqa: F401
        from rensa import RMinHash, RMinHashLSH

        mods.update(RMinHash=RMinHash, RMinHashLSH=RMinHashLSH)

    def work():
        RMinHash, K, thr = mods["RMinHash"], p["num_perm"], p["threshold"]
        shingles = _py_tokenizer(p["ngram"], p["keep_digits"])
        lsh = mods["RMinHashLSH"](thr, K, p["bands"])
        pids: list[str] = []
        keys: list[int] = []  # passage index of each signed (non-empty) passage
        sketches: list = []
        st = dict.fromkeys(("read JSON", "tokenize", "sign+insert", "query_all", "verify+union", "write"), 0.0)

        def flush(batch_keys, batch_sets):
            s = time.perf_counter()
            ms = RMinHash.from_token_sets(batch_sets, K, p["seed"])
            lsh.insert_many(ms, len(sketches))
            sketches.extend(ms)
            keys.extend(batch_keys)
            st["sign+insert"] += time.perf_counter() - s

        bk, bs = [], []
        s = time.perf_counter()
        for ids, texts in _read_chunks_pyarrow(corpus):
            t = time.perf_counter()
            st["read JSON"] += t - s
            for pid, text in zip(ids, texts):
                sh = shingles(text)
                if sh:
                    bk.append(len(pids))
                    bs.append(sh)
                pids.append(pid)
                if len(bs) >= chunk:
                    st["tokenize"] += time.perf_counter() - t
                    flush(bk, bs)
                    bk, bs, t = [], [], time.perf_counter()
            st["tokenize"] += time.perf_counter() - t
            s = time.perf_counter()
        if bs:
            flush(bk, bs)
        s = time.perf_counter()
        cand = lsh.query_all(sketches)
        st["query_all"] = time.perf_counter() - s
        uf = _UnionFind(len(pids))
        candidates = verified = 0
        for a, cs in enumerate(cand):
            ma = sketches[a]
            for b in cs:
                if b < a:
                    candidates += 1
                    if ma.jaccard(sketches[b]) >= thr:
                        verified += 1
                        uf.union(keys[a], keys[b])
        s2 = time.perf_counter()
        st["verify+union"] = s2 - s - st["query_all"]
        _write_classes_tsv(out, pids, uf)
        st["write"] = time.perf_counter() - s2
        info.update(passages=len(pids), candidate_pairs=candidates, verified_pairs=verified)
        return st

    child_run(imports, work, repeats, lambda: dict(info))


class _StageTimer:
    """Exclusive wall seconds of named steps of one call: wrapped functions may nest (an inner
    step's time is not counted in the outer one). Generators wrapped with :meth:`wrap_iter` are
    timed per ``next()`` on whatever thread consumes them, apart from the stack (qrelkit reads its
    corpus on a helper thread)."""

    def __init__(self) -> None:
        self.t: dict[str, float] = {}
        self.stack: list[list] = []
        self.lock = threading.Lock()

    def _add(self, name: str, el: float) -> None:
        with self.lock:
            self.t[name] = self.t.get(name, 0.0) + el

    def wrap(self, module, attr: str, name: str) -> None:
        fn = getattr(module, attr, None)
        if fn is None:  # a step this version of the code does not have
            return
        timer = self

        def wrapped(*args, **kwargs):
            timer.stack.append([time.perf_counter(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                start, inner = timer.stack.pop()
                el = time.perf_counter() - start
                timer._add(name, el - inner)
                if timer.stack:
                    timer.stack[-1][1] += el

        setattr(module, attr, wrapped)

    def wrap_iter(self, module, attr: str, name: str) -> None:
        fn = getattr(module, attr)
        timer = self

        def wrapped(*args, **kwargs):
            it = iter(fn(*args, **kwargs))
            while True:
                start = time.perf_counter()
                try:
                    item = next(it)
                except StopIteration:
                    return
                finally:
                    el = time.perf_counter() - start
                    timer._add(name, el)
                    if timer.stack and threading.current_thread() is threading.main_thread():
                        timer.stack[-1][1] += el
                yield item

        setattr(module, attr, wrapped)


#: (module, function, stage) of the steps of ``cluster_corpus`` timed apart
STEPS = (("cluster", "_passage_estimate", "capacity: line count"), ("minhash", "string_buffers", "sign: string buffers"),
         ("minhash", "_signatures", "sign: tokenize + MinHash (numba)"),
         ("cluster", "sign_corpus", "sign: rest (waiting for the read, ids, duplicate check)"),
         ("lsh", "first_with_key", "band: keys, first of each (numba)"), ("lsh", "candidate_pairs", "band: candidate pairs"),
         ("cluster", "exact_sets", "verify: shingle sets of candidates"), ("cluster", "exact_pairs", "verify: exact Jaccard"),
         ("cluster", "link_to_canonicals", "canonical linkage"), ("cluster", "class_table", "class table"),
         ("cluster", "cluster_signed", "cluster: rest"))


def _install_timers(timer: _StageTimer) -> None:
    """Timers around the steps of ``cluster_corpus`` (of whichever qrelkit is imported)."""
    from qrelkit.dedupe import cluster, lsh, minhash

    mods = {"cluster": cluster, "lsh": lsh, "minhash": minhash}
    timer.wrap_iter(cluster, "_chunks", "read chunks (pyarrow JSON, checks)")
    for mod, fn, name in STEPS:
        timer.wrap(mods[mod], fn, name)


def child_qrelkit(corpus: Path, out: Path, p: dict, repeats: int) -> None:
    mods, info = {}, {}
    timer = _StageTimer()

    def imports():
        import qrelkit
        from qrelkit.dedupe.cluster import DedupeParams, cluster_corpus
        from qrelkit.io.tables import write_table

        _install_timers(timer)
        mods.update(DedupeParams=DedupeParams, cluster_corpus=cluster_corpus, write_table=write_table)
        info["qrelkit_from"] = str(Path(qrelkit.__file__).parent)

    def work():
        timer.t = {}
        t0 = time.perf_counter()
        res = mods["cluster_corpus"](corpus, mods["DedupeParams"](**p))
        t1 = time.perf_counter()
        mods["write_table"](res.classes, out, kind="classes", params=res.params.as_dict())
        info.update({k: v for k, v in res.stats.items() if isinstance(v, int)})
        return {"cluster_corpus": t1 - t0, "write Parquet": time.perf_counter() - t1, **timer.t}

    child_run(imports, work, repeats, lambda: dict(info))


def child_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", required=True, choices=["qrelkit", *PEERS])
    ap.add_argument("--corpus", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--params", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    p = json.loads(a.params)
    if a.child == "qrelkit":
        child_qrelkit(a.corpus, a.out, p, a.repeats)
    else:
        fn = {"datasketch": child_datasketch, "rensa-loop": child_rensa_loop, "rensa-bulk": child_rensa_bulk}[a.child]
        fn(a.corpus, a.out, {k: p[k] for k in LSH_KEYS}, a.repeats)
    return 0


# =========================================================================== data


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


def head_corpus(src: Path, dst: Path, n: int) -> Path:
    """The first ``n`` lines of ``src`` as ``dst`` (written once)."""
    if not dst.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        with open(src, "rb") as fin, open(dst.with_suffix(".tmp"), "wb") as fout:
            for k, line in enumerate(fin):
                if k >= n:
                    break
                fout.write(line)
        dst.with_suffix(".tmp").replace(dst)
    return dst


# =========================================================================== checks


def read_truth(path: Path):
    """Ground truth (``class_id<TAB>pid``, duplicates only) as a table docid, class_id."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    t = pacsv.read_csv(path, read_options=pacsv.ReadOptions(column_names=["class_id", "docid"]),
                       parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),
                       convert_options=pacsv.ConvertOptions(column_types={"class_id": pa.string(), "docid": pa.string()}))
    return pa.table({"docid": t["docid"], "class_id": t["class_id"]})


def read_found(path: Path):
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if path.suffix == ".parquet":
        return pq.read_table(path, columns=["docid", "class_id"])
    t = pacsv.read_csv(path, parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),
                       convert_options=pacsv.ConvertOptions(column_types={"docid": pa.string(), "class_id": pa.string()}))
    return t.select(["docid", "class_id"])


def _texts_of(corpus: Path, pids):
    """pid, text of the passages ``pids`` of a corpus file (one streaming pass)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from qrelkit.io.corpus import iter_corpus

    parts = [c.filter(pc.is_in(c["pid"], value_set=pids)).select(["pid", "text"]) for c in iter_corpus(corpus)]
    return pa.concat_tables(parts).combine_chunks()


def accuracy(found_path: Path, campaign: Path, texts) -> dict:
    """Pair precision/recall and copy recall by word edits of a class table against the truth."""
    from qrelkit.dedupe.accuracy import copy_recall_by_edits, pair_scores

    found, truth = read_found(found_path), read_truth(campaign / "neardup_truth.tsv")
    by = copy_recall_by_edits(found, truth, texts, cap=3)
    return {"pairs": pair_scores(found, truth),
            "copy_recall": {str(r.edits): {"copies": int(r.copies), "found": int(r.found), "recall": float(r.recall)}
                            for r in by.itertuples()}}


def edge_check(classes_path: Path, corpus: Path, params: dict) -> dict:
    """The exact edge check: every member's exact Jaccard of shingle sets to its canonical."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from qrelkit.dedupe import DedupeParams
    from qrelkit.dedupe._exact import jaccard_pairs
    from qrelkit.dedupe.minhash import shingle_sets

    dp = DedupeParams(**params)
    t = pq.read_table(classes_path, columns=["docid", "class_id"])
    members = t.filter(pc.not_equal(t["docid"], t["class_id"]))
    need = pc.unique(pa.concat_arrays([members["docid"].combine_chunks(), members["class_id"].combine_chunks()]))
    texts = _texts_of(corpus, need)
    pos = {p: i for i, p in enumerate(texts["pid"].to_pylist())}
    starts, vals = shingle_sets(texts["text"], np.arange(texts.num_rows), ngram=dp.ngram, norm=dp.norm)
    a = np.array([pos[d] for d in members["docid"].to_pylist()], np.int64)
    b = np.array([pos[c] for c in members["class_id"].to_pylist()], np.int64)
    jac = jaccard_pairs(starts, vals, a, b)
    return {"members": len(a), "below_threshold": int((jac < dp.threshold).sum()),
            "lowest_jaccard": float(jac.min()) if len(a) else 1.0, "threshold": dp.threshold}


def same_bytes(a: Path, b: Path) -> bool:
    import filecmp

    return a.exists() and b.exists() and filecmp.cmp(a, b, shallow=False)


# =========================================================================== parent


def _cmd(tool: str, corpus: Path, out: Path, params: dict, repeats: int, env: dict | None = None) -> list[str]:
    child = "qrelkit" if tool.startswith("qrelkit") else tool
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", child, "--corpus", str(corpus),
           "--out", str(out), "--params", json.dumps(params), "--repeats", str(repeats)]
    return (["env", *(f"{k}={v}" for k, v in env.items())] + cmd) if env else cmd


def first_call(a, corpus: Path, params: dict, work: Path) -> dict:
    """qrelkit's first call beside warm ones on a small corpus: kernels cached, and an empty cache."""
    out = {"passages": FIRST_PASSAGES, "input": str(corpus)}
    print(f"first call ({FIRST_PASSAGES:,} passages):", flush=True)
    trees = [("qrelkit", None)] + ([("qrelkit (before)", a.compare_with)] if a.compare_with else [])
    for name, src in trees:
        env = {"PYTHONPATH": str(src)} if src else {}
        tag = "before" if src else "qrelkit"
        run_tool(f"{name}, warming", _cmd(name, corpus, work / f"first-{tag}.parquet", params, 0, env or None),
                 idle_wait=0)  # fills numba's cache of this tree: not counted
        out[f"{name}, kernels cached"] = run_tool(
            f"{name}, kernels cached", _cmd(name, corpus, work / f"first-{tag}.parquet", params, a.first_repeats,
                                            env or None), idle_wait=a.wait_idle)
        if not a.skip_cold:
            cache = Path(tempfile.mkdtemp(prefix="numba-cold-", dir=work))
            try:
                out[f"{name}, empty numba cache"] = run_tool(
                    f"{name}, empty numba cache",
                    _cmd(name, corpus, work / f"first-{tag}-cold.parquet", params, a.first_repeats,
                         {**env, "NUMBA_CACHE_DIR": str(cache)}), idle_wait=a.wait_idle)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
    return out


def mem_available_gb() -> float:
    """MemAvailable of /proc/meminfo in GiB (inf where there is none)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return float("inf")


def peers_that_fit(peers: list[str], n: int, before: dict | None, a) -> tuple[list[str], list[str]]:
    """The peers to run at ``n`` passages, and a note for each left out: a peer whose peak RSS at
    the size before (``before``), grown with the passages, would not leave ``--peer-headroom-gb``
    of the memory free now is not started (the machine is shared)."""
    if before is None:
        return peers, []
    run, notes = [], []
    free = mem_available_gb()
    for p in peers:
        t = tool_named(before, p)
        need = t["peak_rss_mb"] / 1024 * n / before["units"] if t else 0.0
        if need > free - a.peer_headroom_gb:
            notes.append(f"{p} was not run at {n / 1e6:g}M passages: its peak RSS at {before['label']} "
                         f"({t['peak_rss_mb'] / 1024:.1f} GiB) grows to about {need:.0f} GiB, more than the "
                         f"{free:.0f} GiB free less {a.peer_headroom_gb:g} GiB kept for the machine's other users")
            print("  " + notes[-1], flush=True)
        else:
            run.append(p)
    return run, notes


def measure_size(n: int, campaign: Path, a, params: dict, peers: list[str], work: Path) -> tuple[dict, dict]:
    """Every tool on the corpus of ``n`` passages: (size_result, checks)."""
    corpus = campaign / "corpus.jsonl"
    label = f"{n / 1e6:g}M passages"
    print(f"{label}: {corpus}", flush=True)
    warm_page_cache(corpus)
    outs = {"qrelkit": work / f"classes-qrelkit-{n}.parquet", "qrelkit (before)": work / f"classes-before-{n}.parquet"}
    outs |= {p: work / f"classes-{p}-{n}.tsv" for p in peers}
    tools = [run_tool("qrelkit", _cmd("qrelkit", corpus, outs["qrelkit"], params, a.repeats), idle_wait=a.wait_idle,
                      note=NOTES["qrelkit"])]
    if a.compare_with:
        tools.append(run_tool("qrelkit (before)", _cmd("qrelkit", corpus, outs["qrelkit (before)"], params, a.repeats,
                                                       {"PYTHONPATH": str(a.compare_with)}),
                              idle_wait=a.wait_idle, note=NOTES["qrelkit (before)"]))
    for p in peers:
        tools.append(run_tool(p, _cmd(p, corpus, outs[p], params, a.peer_repeats), idle_wait=a.wait_idle,
                              note=NOTES[p]))
    checks: dict = {}
    if a.compare_with:
        checks["classes byte-identical to the code before"] = same_bytes(outs["qrelkit"], outs["qrelkit (before)"])
    if not a.skip_checks:
        checks["exact edge check (qrelkit)"] = edge_check(outs["qrelkit"], corpus, params)
        truth = read_truth(campaign / "neardup_truth.tsv")
        import pyarrow as pa
        import pyarrow.compute as pc

        need = pc.unique(pa.concat_arrays([truth["docid"].combine_chunks(), truth["class_id"].combine_chunks()]))
        texts = _texts_of(corpus, need)
        checks["accuracy against the truth"] = {t["tool"]: accuracy(outs[t["tool"]], campaign, texts) for t in tools
                                                if t["tool"] != "qrelkit (before)"}
    return size_result(label, n, "passage", tools), checks


def targets_of(sizes: list[dict], first: dict | None) -> list[dict]:
    small, large = sizes[0], sizes[-1]
    q = tool_named(small, "qrelkit")
    out = [target(f"qrelkit at {small['label']}: passages per second, warm wall",
                  small["units"] / q["warm"]["wall_s"], ">=", 200_000, "passages/s")]
    if large is not small:
        out.append(target(f"qrelkit's time per passage, {large['label']} / {small['label']}, warm wall",
                          per_unit_growth(q, tool_named(large, "qrelkit"), small["units"], large["units"]), "<=", 1.1, "x"))
    if first is not None and "qrelkit, kernels cached" in first:
        f = first["qrelkit, kernels cached"]
        out.append(target(f"qrelkit's first call above a warm one, fresh process, kernels in numba's cache "
                          f"({first['passages']:,} passages), wall", f["first"]["wall_s"] - f["warm"]["wall_s"],
                          "<=", 0.3, "s"))
    for size in sizes:  # the same at the measured sizes: a command clusters once per process
        t = tool_named(size, "qrelkit")
        out.append(target(f"qrelkit's first call above a warm one, fresh process, {size['label']}, wall",
                          t["first"]["wall_s"] - t["warm"]["wall_s"], "<=", 0.3, "s"))
    for size in sizes:
        before = tool_named(size, "qrelkit (before)")
        if before is not None:
            out.append(target(f"qrelkit's peak RSS / the code before's, {size['label']}",
                              tool_named(size, "qrelkit")["peak_rss_mb"] / before["peak_rss_mb"], "<=", 1.1, "x"))
    return out


def accuracy_markdown(checks: dict) -> str:
    lines = ["| size | tool | pair precision | pair recall | found pairs | true pairs | copy recall 0 / 1 / 2 / 3 edits |",
             "|---|---|---|---|---|---|---|"]
    for label, ch in checks.items():
        for tool, acc in (ch.get("accuracy against the truth") or {}).items():
            ps, cr = acc["pairs"], acc["copy_recall"]
            crs = " / ".join(f"{cr[e]['recall']:.4f}" if e in cr else "-" for e in ("0", "1", "2", "3"))
            lines.append(f"| {label} | {tool} | {ps['precision']:.4f} | {ps['recall']:.4f} | {ps['found_pairs']:,} | "
                         f"{ps['true_pairs']:,} | {crs} |")
        edge = ch.get("exact edge check (qrelkit)")
        if edge:
            lines.append(f"\n{label}: exact edge check: {edge['members']:,} members, {edge['below_threshold']} below "
                         f"the threshold {edge['threshold']}, lowest Jaccard to the canonical {edge['lowest_jaccard']:.3f}"
                         + ("" if "classes byte-identical to the code before" not in ch else
                            f"; classes byte-identical to the code before: {ch['classes byte-identical to the code before']}")
                         + "\n")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--child" in argv:
        return child_main(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000000,4000000", help="two corpus sizes in passages (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=3, help="qrelkit's warm calls after the first")
    ap.add_argument("--peers", default="rensa-bulk,rensa-loop", help=f"peers to run, of {', '.join(PEERS)}")
    ap.add_argument("--peer-repeats", type=int, default=1, help="the peers' warm calls after the first")
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--peer-headroom-gb", type=float, default=6.0,
                    help="a peer runs at the larger size only if its projected peak RSS leaves this much memory free")
    ap.add_argument("--compare-with", type=Path, metavar="SRC",
                    help="a source tree of qrelkit (a folder holding qrelkit/): measured beside, outputs compared")
    ap.add_argument("--first-repeats", type=int, default=5, help="warm calls after the first on the small corpus")
    ap.add_argument("--skip-first", action="store_true", help="no first-call runs on the small corpus")
    ap.add_argument("--skip-cold", action="store_true", help="no run with an empty numba cache")
    ap.add_argument("--skip-checks", action="store_true", help="no edge check, no accuracy against the truth")
    ap.add_argument("--seed", type=int, default=0, help="campaign seed")
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    ap.add_argument("--json-out", type=Path, default=None, help="result file (default OUT/dedupe.json)")
    ap.add_argument("--wait-idle", type=float, default=30.0, metavar="SECONDS",
                    help="before each tool wait up to SECONDS for other processes to use < 0.25 cores (0: don't)")
    a = ap.parse_args(argv)
    if a.compare_with is not None:
        a.compare_with = a.compare_with.resolve()
        if not (a.compare_with / "qrelkit" / "__init__.py").exists():
            raise SystemExit(f"--compare-with {a.compare_with}: no qrelkit/ package there")

    from qrelkit.dedupe import DedupeParams

    params = DedupeParams().as_dict()  # the library defaults, used by every tool
    sizes = [int(float(s)) for s in a.sizes.split(",") if s.strip()]
    peers = [] if a.skip_peers else [p for p in a.peers.split(",") if p]
    if set(peers) - set(PEERS):
        raise SystemExit(f"unknown peer(s): {sorted(set(peers) - set(PEERS))}; known: {PEERS}")
    a.out.mkdir(parents=True, exist_ok=True)
    work = a.out / "bench-dedupe-work"
    work.mkdir(exist_ok=True)
    suffix = f"-s{a.seed}" if a.seed else ""
    campaigns = {n: a.out / f"dedupe-campaign-{n}{suffix}" for n in sizes}
    for n, d in campaigns.items():
        ensure_campaign(d, n, a.seed)
    small = head_corpus(campaigns[sizes[0]] / "corpus.jsonl", a.out / f"dedupe-first-{FIRST_PASSAGES}{suffix}" /
                        "corpus.jsonl", FIRST_PASSAGES)
    first = None if a.skip_first else first_call(a, small, params, work)
    results, checks = [], {}
    left_out = []
    for n in sizes:
        run, notes = peers_that_fit(peers, n, results[-1] if results else None, a)
        left_out += notes
        size, ch = measure_size(n, campaigns[n], a, params, run, work)
        results.append(size)
        checks[size["label"]] = ch
    identical = [c["classes byte-identical to the code before"] for c in checks.values()
                 if "classes byte-identical to the code before" in c]
    edges = [c["exact edge check (qrelkit)"]["below_threshold"] == 0 for c in checks.values()
             if "exact edge check (qrelkit)" in c]
    notes = [f"Simulated campaigns (20 topics, 10% near-duplicates by 0-3 word edits, seed {a.seed}); every tool "
             "reads the same corpus.jsonl at each size.",
             "Each tool in a fresh process: 'first' is its first call there, 'warm' the calls after it; imports apart.",
             "All tools with qrelkit's LSH parameters (128 permutations, 32 bands x 4 rows, threshold 0.6, word 3-gram "
             "shingles); the peers verify candidates by their signatures' estimated Jaccard, qrelkit by the exact "
             "Jaccard of shingle sets, and their hash functions differ: the classes differ (accuracy in the checks).",
             "rensa has no tokenizer and no reader: it gets the words of Python's re, the shingles joined in Python.",
             *left_out]
    res = benchmark_result("dedupe", "Near-duplicate clustering", results, peers=("rensa", "datasketch"),
                           targets=targets_of(results, first), checks={
                               "sizes": checks, "classes identical to the code before": all(identical) if identical else None,
                               "every member passes its canonical exactly": all(edges) if edges else None},
                           notes=notes, first_call=first, params=params)
    print()
    print(markdown(res))
    print()
    print(accuracy_markdown(checks))
    write_result(res, a.json_out or a.out / "dedupe.json", "bench_dedupe.py", argv)
    return 0 if all(identical) and all(edges) else 1


if __name__ == "__main__":
    sys.exit(main())
