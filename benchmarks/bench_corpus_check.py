"""Benchmark: the corpus check of ``campaign init`` (issue 19), and what the readers' per-chunk
rules cost on the hot paths.

    python benchmarks/bench_corpus_check.py --repeats 3 --compare-with /tmp/qrelkit-before

* **init, before**: what ``Campaign.init`` did with the corpus before the check: count its
  passages (``count_passages``: newlines, one pass) and then hash it (``sha256_file``, a second
  pass), nothing validated.
* **init, now**: ``check_corpus``: every reader rule and the duplicate ids in one streaming pass,
  the SHA-256 computed from the same reads on a helper thread.
* **read**: one pass of ``iter_corpus`` (what every corpus reader does: each chunk's UTF-8, JSON,
  fields and ids checked); **dedupe** ``cluster_corpus`` and **features** ``build_features``: the
  hot paths that read the corpus. With ``--compare-with SRC`` (a qrelkit source tree from before
  the rules, e.g. ``git worktree add /tmp/qrelkit-before <commit>``) each also runs under SRC,
  interleaved, so that the two are measured under the same load.

Data: the 1M-passage simulated campaign of ``bench_dedupe.py`` (``OUT/dedupe-campaign-1000000``,
generated once and reused), and with ``--non-ascii`` a copy of its corpus in which every " the "
is " thé " (every line then has UTF-8 beyond ASCII: the validation's slow path). Every measure runs
in a fresh process (imports excluded); medians over ``--repeats``. Results also go to
``OUT/bench_corpus_check.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import cpu_s, emit_result, peak_rss_mb, record_result, run_child_process  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TASKS = ("init_before", "init_now", "read", "dedupe", "features")


def _use_source(src: str | None) -> None:
    """Import qrelkit from ``src`` (a source tree), not from the installed (editable) package."""
    if src:
        sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
        sys.path.insert(0, src)


def child(task: str, corpus: Path, work: Path) -> dict:
    t0 = time.perf_counter()
    from qrelkit.io import corpus as reader

    t1, c1 = time.perf_counter(), cpu_s()
    out: dict = {}
    if task == "init_before":
        from qrelkit.campaign.store import sha256_file

        t1, c1 = time.perf_counter(), cpu_s()
        out["passages"], out["sha256"] = reader.count_passages(corpus), sha256_file(corpus)
    elif task == "init_now":
        import pyarrow as pa

        from qrelkit.io.idhash import pid_hashes

        pid_hashes(pa.array(["p1"]))  # numba's kernel loaded (a campaign has numba loaded anyway)
        t1, c1 = time.perf_counter(), cpu_s()
        c = reader.check_corpus(corpus)
        out["passages"], out["sha256"] = c.passages, c.sha256
    elif task == "read":
        out["passages"] = sum(t.num_rows for t in reader.iter_corpus(corpus))
    elif task == "dedupe":
        from qrelkit.dedupe.cluster import DedupeParams, cluster_corpus

        t1, c1 = time.perf_counter(), cpu_s()
        out["passages"] = cluster_corpus(corpus, DedupeParams()).stats["passages"]
    else:
        from qrelkit.cal.features import build_features

        t1, c1 = time.perf_counter(), cpu_s()
        out["passages"] = build_features(corpus, work / "features").n_rows
    out.update(work_s=time.perf_counter() - t1, work_cpu_s=cpu_s() - c1, import_s=t1 - t0, peak_rss_mb=peak_rss_mb())
    return out


def non_ascii_copy(corpus: Path) -> Path:
    """The corpus with every " the " written " thé " (made once, next to it)."""
    out = corpus.with_name("corpus-nonascii.jsonl")
    if not out.exists() or out.stat().st_mtime < corpus.stat().st_mtime:
        tmp = out.with_suffix(".tmp")
        with open(corpus, "rb") as src, open(tmp, "wb") as dst:
            for line in src:
                dst.write(line.replace(b" the ", " thé ".encode()))
        tmp.replace(out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", choices=TASKS, help=argparse.SUPPRESS)
    ap.add_argument("--src", help=argparse.SUPPRESS)
    ap.add_argument("--corpus", type=Path, help="a corpus to measure instead of the simulated 1M one")
    ap.add_argument("--tasks", default=",".join(TASKS), help="which measures (default: all)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compare-with", default=None, help="an earlier qrelkit source tree, run side by side")
    ap.add_argument("--non-ascii", action="store_true", help="also measure init and read on a non-ASCII copy")
    ap.add_argument("--wait-idle", type=float, default=20.0, metavar="SECONDS")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=Path("bench-out"))
    a = ap.parse_args(argv)
    if a.child:
        _use_source(a.src)
        emit_result(child(a.child, a.corpus, a.out))
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    if a.corpus is None:
        from bench_dedupe import ensure_campaign

        folder = a.out / ("dedupe-campaign-1000000" + (f"-s{a.seed}" if a.seed else ""))
        ensure_campaign(folder, 1_000_000, a.seed)
        a.corpus = folder / "corpus.jsonl"
    corpora = {"corpus": a.corpus, **({"non-ASCII copy": non_ascii_copy(a.corpus)} if a.non_ascii else {})}
    tasks = [t for t in a.tasks.split(",") if t]
    sources = [None, a.compare_with] if a.compare_with else [None]
    warm = a.out / "corpus-check-warmup.jsonl"  # compiled kernels cached for each source tree, untimed
    with open(a.corpus, "rb") as fh:
        warm.write_bytes(b"".join(fh.readline() for _ in range(5000)))
    for task in ("dedupe", "features"):
        for src in sources if task in tasks else []:
            run_child_process([sys.executable, str(Path(__file__).resolve()), "--child", task, "--corpus", str(warm),
                               "--out", str(a.out / "corpus-check-work")] + (["--src", src] if src else []), cwd=ROOT)
    runs: dict[str, list[dict]] = {}
    for rep in range(a.repeats):
        for cname, corpus in corpora.items():
            for task in tasks:
                if cname != "corpus" and task in ("dedupe", "features"):
                    continue
                # the two trees in turn, the first one alternating between repetitions
                for src in (sources[::-1] if rep % 2 else sources) if task not in ("init_before", "init_now") else [None]:
                    key = f"{task} | {cname}" + (" | before" if src else "")
                    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", task, "--corpus", str(corpus),
                           "--out", str(a.out / "corpus-check-work")] + (["--src", src] if src else [])
                    r = run_child_process(cmd, idle_wait=a.wait_idle, cwd=ROOT)
                    runs.setdefault(key, []).append(r)
                    print(f"[{rep + 1}/{a.repeats}] {key}: {r['work_s']:.2f} s wall, {r['work_cpu_s']:.2f} s CPU, "
                          f"others {r.get('background_cores', float('nan')):.2f} cores", flush=True)
    table = {k: {"wall_s": statistics.median(r["work_s"] for r in rs), "cpu_s": statistics.median(r["work_cpu_s"] for r in rs),
                 "wall_min_max": [min(r["work_s"] for r in rs), max(r["work_s"] for r in rs)],
                 "others_cores_max": max(r.get("background_cores", float("nan")) for r in rs),
                 "peak_rss_mb": max(r["peak_rss_mb"] for r in rs), "passages": rs[0]["passages"]} for k, rs in runs.items()}
    print("\n| measure | wall, median (min-max) | CPU | peak RSS | others' cores (max) |\n|---|---|---|---|---|")
    for k, v in table.items():
        print(f"| {k} | {v['wall_s']:.2f} s ({v['wall_min_max'][0]:.2f}-{v['wall_min_max'][1]:.2f}) | {v['cpu_s']:.2f} s "
              f"| {v['peak_rss_mb']:.0f} MB | {v['others_cores_max']:.2f} |")
    res = {"corpus": str(a.corpus), "repeats": a.repeats, "table": table, "runs": runs}
    return record_result(res, a.out / "bench_corpus_check.json", "bench_corpus_check.py", argv)


if __name__ == "__main__":
    raise SystemExit(main())
