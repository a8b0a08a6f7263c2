"""Benchmark: the corpus check of ``campaign init`` (issue 19), and what the readers' per-chunk
rules cost on the hot paths.

    python benchmarks/bench_corpus_check.py --repeats 3 --compare-with /tmp/qrelkit-before --non-ascii
    python benchmarks/bench_corpus_check.py --tasks init_before,init_now --sizes 100000 200000 --repeats 1

* **init, before**: what ``Campaign.init`` did with the corpus before the check: count its
  passages (``count_passages``: newlines, one pass) and then hash it (``sha256_file``, a second
  pass), nothing validated.
* **init, now**: ``check_corpus``: every reader rule and the duplicate ids in one streaming pass,
  the SHA-256 computed from the same reads on a helper thread. The two are the tools of one task,
  "the corpus work of campaign init", on the same file.
* **read**: one pass of ``iter_corpus`` (what every corpus reader does: each chunk's UTF-8, JSON,
  fields and ids checked); **dedupe** ``cluster_corpus`` and **features** ``build_features``: the
  hot paths that read the corpus. With ``--compare-with SRC`` (a qrelkit source tree from before
  the rules, e.g. ``git worktree add /tmp/qrelkit-before <commit>``) each also runs under SRC,
  interleaved, so that the two are measured under the same load (a second tool of the task).

Data: the 1M-passage simulated campaign of ``bench_dedupe.py`` (``OUT/dedupe-campaign-1000000``,
generated once and reused) or ``--corpus``; two sizes (``--sizes``, default half of the corpus and
all of it): the first N passages of the corpus, copied once next to the results (the same text
distribution at both sizes; the unit is the passage: every task is a pass over the passages).
With ``--non-ascii``, a copy of each in which every " the " is " thé " (every line then has UTF-8
beyond ASCII: the validation's slow path) for init and read.

Every measure runs in ``--repeats`` fresh processes (imports excluded): the first call, then
``--warm`` repeats in the same process; wall and CPU seconds, peak RSS, the cores other processes
used meanwhile. The numba kernels of dedupe and features are compiled once into the on-disk cache
on a small corpus beforehand (untimed): a first call loads them. Checks: every call counts the
size's passages; check_corpus gives the SHA-256 of ``sha256_file``. Writes ``OUT/corpus-check.json``
(``benchmarks/_results.py``'s shape, for ``scripts/gen_benchmarks_doc.py``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import emit_result, peak_rss_mb, run_child_process  # noqa: E402
from _procs import tool_from_processes  # noqa: E402
from _results import benchmark_result, measure, size_result, write_result  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TASKS = ("init_before", "init_now", "read", "dedupe", "features")
#: task of the results -> (its tools by measure, the title)
GROUPS = {"init": ("corpus work of campaign init", {"init_now": "check_corpus",
                                                     "init_before": "count_passages + sha256_file (before the check)"}),
          "read": ("one iter_corpus pass", None), "dedupe": ("cluster_corpus (dedupe)", None),
          "features": ("build_features (CAL)", None)}


def _use_source(src: str | None) -> None:
    """Import qrelkit from ``src`` (a source tree), not from the installed (editable) package."""
    if src:
        sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
        sys.path.insert(0, src)


def child(task: str, corpus: Path, work: Path, warm: int) -> dict:
    t0 = time.perf_counter()
    from qrelkit.io import corpus as reader

    if task == "init_before":
        from qrelkit.campaign.store import sha256_file

        def fn():
            return {"passages": reader.count_passages(corpus), "sha256": sha256_file(corpus)}
    elif task == "init_now":
        import pyarrow as pa

        from qrelkit.io.idhash import pid_hashes

        pid_hashes(pa.array(["p1"]))  # numba's kernel loaded (a campaign has numba loaded anyway)

        def fn():
            c = reader.check_corpus(corpus)
            return {"passages": c.passages, "sha256": c.sha256}
    elif task == "read":
        def fn():
            return {"passages": sum(t.num_rows for t in reader.iter_corpus(corpus))}
    elif task == "dedupe":
        from qrelkit.dedupe.cluster import DedupeParams, cluster_corpus

        def fn():
            return {"passages": cluster_corpus(corpus, DedupeParams()).stats["passages"]}
    else:
        from qrelkit.cal.features import build_features

        def fn():
            return {"passages": build_features(corpus, work / "features").n_rows}
    import_s = time.perf_counter() - t0
    values = []
    first, warm_calls, _ = measure(lambda: values.append(fn()), warm)
    return {"first": first, "warm": warm_calls, "import_s": import_s, "values": values, "peak_rss_mb": peak_rss_mb()}


def prefix(corpus: Path, n: int, out: Path) -> Path:
    """The first ``n`` passages of ``corpus`` (the corpus itself when it has no more), made once."""
    dst = out / f"corpus-check-{corpus.parent.name}-{n}.jsonl"
    if dst.exists() and dst.stat().st_mtime >= corpus.stat().st_mtime:
        return dst
    tmp = dst.with_suffix(".tmp")
    with open(corpus, "rb") as src, open(tmp, "wb") as fh:
        for i, line in enumerate(src):
            if i == n:
                break
            fh.write(line)
        else:
            tmp.unlink()
            return corpus
    tmp.replace(dst)
    return dst


def non_ascii_copy(corpus: Path) -> Path:
    """The corpus with every " the " written " thé " (made once, next to it)."""
    out = corpus.with_name(corpus.stem + "-nonascii.jsonl")
    if not out.exists() or out.stat().st_mtime < corpus.stat().st_mtime:
        tmp = out.with_suffix(".tmp")
        with open(corpus, "rb") as src, open(tmp, "wb") as dst:
            for line in src:
                dst.write(line.replace(b" the ", " thé ".encode()))
        tmp.replace(out)
    return out


def _warm_kernels(a, tasks: list[str], sources: list) -> None:
    """Compile the dedupe and features kernels into numba's cache for each tree (untimed)."""
    warm = a.out / "corpus-check-warmup.jsonl"
    with open(a.corpus, "rb") as fh:
        warm.write_bytes(b"".join(fh.readline() for _ in range(5000)))
    for task in ("dedupe", "features"):
        for src in sources if task in tasks else []:
            run_child_process(_cmd(task, warm, a, src, 0), cwd=ROOT)


def _cmd(task: str, corpus: Path, a, src, warm: int) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", task, "--corpus", str(corpus), "--out",
            str(a.out / "corpus-check-work"), "--warm", str(warm)] + (["--src", src] if src else [])


def measure_all(a, tasks: list[str], inputs: dict, sources: list) -> dict:
    """Every (size, corpus kind, task, tree) in ``--repeats`` rounds of fresh processes."""
    runs: dict[tuple, list[dict]] = {}
    for rep in range(a.repeats):
        for (n, kind), corpus in inputs.items():
            for task in tasks:
                if kind != "corpus" and task in ("dedupe", "features"):
                    continue
                # the two trees in turn, the first one alternating between repetitions
                for src in (sources[::-1] if rep % 2 else sources) if task not in ("init_before", "init_now") else [None]:
                    r = run_child_process(_cmd(task, corpus, a, src, a.warm), idle_wait=a.wait_idle, cwd=ROOT,
                                          stderr_tail=4000)
                    runs.setdefault((n, kind, task, src), []).append(r)
                    w = sorted(c["wall_s"] for c in r["warm"]) or [float("nan")]
                    print(f"[{rep + 1}/{a.repeats}] {task} | {n:,} | {kind}{' | before' if src else ''}: first "
                          f"{r['first']['wall_s']:.2f} s wall / {r['first']['cpu_s']:.2f} s CPU, warm {w[len(w) // 2]:.2f} s; "
                          f"others {r.get('background_cores', float('nan')):.2f} cores", flush=True)
    return runs


def shared_result(runs: dict, sizes: list[int], a) -> dict:
    out, checks = [], {}
    for kind in ("corpus", "non-ASCII copy"):
        for group, (title, names) in GROUPS.items():
            for n in sizes:
                tools = []
                for (m, k, task, src), procs in runs.items():
                    if m != n or k != kind or (task != group and not (names and task in names)):
                        continue
                    name = names[task] if names else ("qrelkit" if src is None else f"qrelkit before ({src})")
                    tools.append(tool_from_processes(name, procs))
                    checks.setdefault(f"every call counted the size's passages ({task}, {kind})", True)
                    checks[f"every call counted the size's passages ({task}, {kind})"] &= all(
                        v["passages"] == n for p in procs for v in p["values"])
                if tools:
                    tools.sort(key=lambda t: "before" in t["tool"])  # the current code first: ratios against it
                    t = title + (", non-ASCII copy" if kind != "corpus" else "")
                    out.append(size_result(f"{n:,} passages", n, "passage", tools, task=t))
            if group == "init":
                sha = {task: {v["sha256"] for (m, k, t2, _), ps in runs.items() if k == kind and t2 == task
                              for p in ps for v in p["values"]} for task in ("init_before", "init_now")}
                if all(sha.values()):
                    checks[f"check_corpus's SHA-256 is sha256_file's ({kind})"] = (
                        len(sha["init_now"]) == len(sizes) and sha["init_now"] == sha["init_before"])
    return benchmark_result("corpus-check", "The corpus check at campaign init", out, checks=checks, notes=[
        "check_corpus parses and checks every line (UTF-8, JSON, ids, duplicates) and hashes the file on a helper "
        "thread; the count and hash it replaced read bytes only and validated nothing.",
        "init_now loads numba's id-hash kernel before its first call (a campaign has numba loaded anyway).",
        "Sizes: the first N passages of the same corpus."])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", choices=TASKS, help=argparse.SUPPRESS)
    ap.add_argument("--src", help=argparse.SUPPRESS)
    ap.add_argument("--corpus", type=Path, help="a corpus to measure instead of the simulated 1M one")
    ap.add_argument("--sizes", nargs=2, type=int, default=None, metavar="N",
                    help="passages of the two sizes: the first N of the corpus (default: half of it and all of it)")
    ap.add_argument("--tasks", default=",".join(TASKS), help="which measures (default: all)")
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per measure")
    ap.add_argument("--warm", type=int, default=1, help="warm repeats after the first call, in each process")
    ap.add_argument("--compare-with", default=None, help="an earlier qrelkit source tree, run side by side")
    ap.add_argument("--non-ascii", action="store_true", help="also measure init and read on a non-ASCII copy")
    ap.add_argument("--wait-idle", type=float, default=20.0, metavar="SECONDS")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    a = ap.parse_args(argv)
    if a.child:
        _use_source(a.src)
        emit_result(child(a.child, a.corpus, a.out, a.warm))
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    if a.corpus is None:
        from bench_dedupe import ensure_campaign

        folder = a.out / ("dedupe-campaign-1000000" + (f"-s{a.seed}" if a.seed else ""))
        ensure_campaign(folder, 1_000_000, a.seed)
        a.corpus = folder / "corpus.jsonl"
    from qrelkit.io.corpus import count_passages

    total = count_passages(a.corpus)
    sizes = sorted(min(n, total) for n in (a.sizes or (total // 2, total)))
    inputs = {}
    for n in sizes:
        inputs[(n, "corpus")] = prefix(a.corpus, n, a.out)
        if a.non_ascii:
            inputs[(n, "non-ASCII copy")] = non_ascii_copy(inputs[(n, "corpus")])
    tasks = [t for t in a.tasks.split(",") if t]
    sources = [None, a.compare_with] if a.compare_with else [None]
    _warm_kernels(a, tasks, sources)
    res = shared_result(measure_all(a, tasks, inputs, sources), sizes, a)
    write_result(res, a.out / "corpus-check.json", "bench_corpus_check.py", argv)
    return 0 if all(res["checks"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
