"""The judging store's hot paths: ``cal import`` of judgments in many small batches, ``cal status``
over many topics, and reading and writing a log with undos; each at two sizes, each in a fresh
process (the first call beside the warm repeats).

    python benchmarks/bench_store.py                      # every task at both sizes (several minutes)
    python benchmarks/bench_store.py --log                # only the log with undos
    python benchmarks/bench_store.py --tasks import status --sizes 20000 40000 --status-topics 40 80

Tasks (``--tasks``; the unit of each size in brackets):

* ``import``: ``store.judgments.import_judgments`` (what ``qrelkit cal import`` runs, one
  transaction, ``synchronous=FULL``) of N rows over 200 topics, a new batch id every 10 rows (N/10
  batches, all unknown to the store: each is registered as a pool batch), each call into a new
  store [judgments: the work is per row, and per batch registered];
* ``reimport``: the same rows again into the store that holds them (every row repeated, nothing
  written) [judgments];
* ``import-calls``: the same rows in N/100 imports of 100 rows (one transaction each), into a new
  store [judgments];
* ``status``: ``status_table`` (``qrelkit cal status``, the density rule) on a store of T topics x
  3 threads (a pool batch of 100 and 3 judged cal batches of 25 per thread, one open batch: 325
  judgments a topic) [topics: the status is a row per topic and thread];
* the log with undos (``--log`` alone): L judgments over 200 topics in batches of 100, of which
  1% were undone (``retract``) and half of those judged again (the import path): ``log-read``,
  the whole log (``judgments.log()``), and ``export-qrels`` (``export_qrels()``) [judgments];
  ``write``, one judgment through ``import_judgment`` (the web app's write) and ``undo``, one
  ``retract``, on that store [write: one call; the sizes are the log's, so the growth says how
  much a write slows as the log grows].

Each task and size runs in a fresh process (``--processes``): its first call (imports apart,
the data built untimed before it) and ``--repeats`` warm repeats (``--many-repeats`` for
``import-calls``, ``--writes`` calls for ``write`` and ``undo``); wall and CPU seconds, peak RSS, the
cores other processes used meanwhile. Checks: the rows each call imported or found repeated, the
status rows, the log and qrels sizes. Writes ``OUT/store.json`` (``benchmarks/_results.py``'s shape,
for ``scripts/gen_benchmarks_doc.py``) and prints a line per task and size. Exit status 1 when a
check fails.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from _machine import ChildFailed, emit_result, peak_rss_mb, run_child_process  # noqa: E402
from _procs import measure_all, median_stages, tool_from_processes  # noqa: E402
from _results import benchmark_result, measure_each, size_result, write_result  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TOPICS = 200
UNDONE_EVERY = 100  # 1% of the log undone, half of those judged again
TASKS = {  # task: (title, unit)
    "import": ("cal import, one call, a new batch every 10 rows", "judgment"),
    "reimport": ("the same rows imported again (nothing written)", "judgment"),
    "import-calls": ("cal import in calls of 100 rows", "judgment"),
    "status": ("status_table (density rule), 3 threads a topic", "topic"),
    "log-read": ("the whole log with undos, judgments.log()", "judgment"),
    "export-qrels": ("export_qrels() of the log with undos", "judgment"),
    "write": ("one judgment through import_judgment, on the log with undos", "write"),
    "undo": ("one undo (retract), on the log with undos", "write"),
}
LOG_TASKS = ("log-read", "export-qrels", "write", "undo")


def judgments(n: int = 100_000, per_batch: int = 10) -> pd.DataFrame:
    i = np.arange(n)
    return pd.DataFrame({"qid": [f"q{x:03d}" for x in (i // per_batch) % TOPICS], "docid": [f"d{x}" for x in i],
                         "assessor": "A1", "grade": i % 4, "batch_id": [f"b{x}" for x in i // per_batch]})


def status_store(path: Path, topics: int) -> None:
    from qrelkit.store import init_store

    rng = np.random.default_rng(0)
    rows = []
    with init_store(path, [str(q) for q in range(1, topics + 1)], collection_size=10_000, synchronous="OFF") as s:
        for q in map(str, range(1, topics + 1)):
            pool = [f"p{q}_{i}" for i in range(100)]
            b = s.batches.issue(q, None, pool, kind="pool")
            rows += [(q, p, "A", int(rng.integers(0, 4)), b) for p in pool]
            for th in ("fractional", "local", "all"):
                for it in range(4):
                    items = [f"{th[0]}{q}_{it}_{i}" for i in range(25)]
                    b = s.batches.issue(q, th, items, kind="cal")
                    if it < 3:
                        rows += [(q, p, "A", int(rng.integers(0, 4)), b) for p in items]
        s.judgments.import_judgments(pd.DataFrame(rows, columns=["qid", "docid", "assessor", "grade", "batch_id"]))


def changed_log(path: Path, n: int) -> None:
    """``n`` judgments, 1% of them undone, half of those judged again (made once per size)."""
    from qrelkit.store import init_store

    if path.exists():
        return
    df = judgments(n, per_batch=100)
    tmp = path.with_suffix(".tmp")
    with init_store(tmp, [f"q{x:03d}" for x in range(TOPICS)], synchronous="OFF") as s:
        s.judgments.import_judgments(df)
        undone = df.iloc[::UNDONE_EVERY]
        for r in undone.itertuples(index=False):
            s.judgments.retract(r.qid, r.docid, r.assessor, r.batch_id)
        s.judgments.import_judgments(undone.iloc[::2].assign(grade=lambda d: (d["grade"] + 1) % 4))
    tmp.rename(path)


# =========================================================================== a child: one task, one size


def _fresh(work: Path, topics: list[str]):
    """A new empty store in ``work`` (untimed set-up of an import)."""
    from qrelkit.store import init_store

    path = Path(tempfile.mkdtemp(dir=work)) / "store.db"
    return init_store(path, topics)


def child(task: str, size: int, work: Path, a) -> dict:
    t0 = time.perf_counter()
    from qrelkit.cal.stopping import status_table
    from qrelkit.store import open_store

    import_s = time.perf_counter() - t0
    topics = [f"q{x:03d}" for x in range(TOPICS)]
    if task in ("import", "import-calls", "reimport"):
        df = judgments(size)

        def imp(s):
            return s.judgments.import_judgments(df).imported

        def imp_calls(s):
            return sum(s.judgments.import_judgments(df.iloc[k:k + 100]).imported for k in range(0, size, 100))

        if task == "reimport":
            with _fresh(work, topics) as s:
                s.judgments.import_judgments(df)
                first, warm, values = measure_all(lambda: s.judgments.import_judgments(df).counts.get("repeated"),
                                                  a.repeats)
        else:  # each call into a new store, opened and closed untimed (as the benchmark did before)
            first, warm, values = measure_each(lambda: _fresh(work, topics), imp if task == "import" else imp_calls,
                                               a.many_repeats if task == "import-calls" else a.repeats,
                                               teardown=lambda s: s.close())
    elif task == "status":
        path = work / f"status-{size}.db"
        if not path.exists():
            status_store(path, size)
        with open_store(path) as s:
            first, warm, values = measure_all(lambda: len(status_table(s)), a.repeats)
    else:
        src = work / f"log-{size}.db"
        changed_log(src, size)
        path = work / f"log-{size}-{task}.db"
        shutil.copyfile(src, path)  # the writes change it: each child its own copy
        with open_store(path) as s:
            first, warm, values = _log_task(s, task, a)
        path.unlink()
    return {"first": first, "warm": warm, "values": values, "import_s": import_s, "peak_rss_mb": peak_rss_mb()}


def _log_task(s, task: str, a):
    if task == "log-read":
        return measure_all(lambda: len(s.judgments.log()), a.repeats)
    if task == "export-qrels":
        return measure_all(lambda: s.judgments.export_qrels().num_rows, a.repeats)
    k = iter(range(a.writes))
    if task == "write":
        def write(i):
            return s.judgments.import_judgment(f"q{i % TOPICS:03d}", f"new{i}", "A2", i % 4, f"b{i}").imported
        return measure_each(lambda: next(k), write, a.writes - 1)
    for i in range(a.writes):  # what the undos undo (untimed)
        s.judgments.import_judgment(f"q{i % TOPICS:03d}", f"new{i}", "A2", i % 4, f"b{i}")
    return measure_each(lambda: next(k), lambda i: s.judgments.retract(f"q{i % TOPICS:03d}", f"new{i}", "A2", f"b{i}"),
                        a.writes - 1)


# =========================================================================== the parent


def _expected(task: str, size: int, a) -> object:
    """What every call of the task must return (the checks)."""
    undone = len(range(0, size, UNDONE_EVERY))
    return {"import": size, "reimport": size, "import-calls": size, "status": size * 3,
            "log-read": size - undone + len(range(0, undone, 2)), "export-qrels": size - undone + len(range(0, undone, 2)),
            "write": 1, "undo": None}[task]


def _sizes(task: str, a) -> list[int]:
    return a.status_topics if task == "status" else a.log_sizes if task in LOG_TASKS else a.sizes


def _label(task: str, size: int) -> str:
    if task == "status":
        return f"{size} topics ({size * 325:,} judgments)"
    if task in ("write", "undo"):
        return f"log of {size:,} judgments"
    return f"{size:,} judgments"


def run_task(task: str, size: int, work: Path, a) -> tuple[dict, dict]:
    """The task at one size in ``--processes`` fresh processes: (size result, checks)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", task, "--size", str(size), "--work", str(work),
           "--repeats", str(a.repeats), "--many-repeats", str(a.many_repeats), "--writes", str(a.writes)]
    procs = [run_child_process(cmd, idle_wait=a.wait_idle, cwd=ROOT, stderr_tail=4000) for _ in range(a.processes)]
    want = _expected(task, size, a)
    if task == "undo":  # the grade in force each undo retracted
        ok = all(v is not None for p in procs for v in p["values"])
    else:
        ok = all(v == want for p in procs for v in p["values"])
    title, unit = TASKS[task]
    units = 1 if unit == "write" else size
    note = None
    if task in ("write", "undo"):
        note = f"{a.writes} calls a process: the first call, then {a.writes - 1} warm ones"
    tool = tool_from_processes("qrelkit", procs, note=note, stages=median_stages(procs))
    w = tool["warm"]
    print(f"{title}, {_label(task, size)}: first {tool['first']['wall_s']:.3f} s, warm {w['wall_s']:.3f} s wall / "
          f"{w['cpu_s']:.3f} s CPU; others {tool['background_cores'] or 0:.2f} cores; check {'ok' if ok else 'FAILED'}",
          file=sys.stderr, flush=True)
    return size_result(_label(task, size), units, unit, [tool], task=title), {
        "task": title, "size": _label(task, size), "want": want if want is not None else "a grade", "ok": ok}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tasks", nargs="+", choices=list(TASKS), default=None, help="which tasks (default: all)")
    ap.add_argument("--log", action="store_true", help="only the reading and writing of a log with undos")
    ap.add_argument("--sizes", nargs=2, type=int, default=[50_000, 100_000], help="judgments imported")
    ap.add_argument("--status-topics", nargs=2, type=int, default=[100, 200], help="topics of the status stores")
    ap.add_argument("--log-sizes", nargs=2, type=int, default=[150_000, 300_000], help="judgments in the log with undos")
    ap.add_argument("--repeats", type=int, default=3, help="warm repeats after the first call, in each process")
    ap.add_argument("--many-repeats", type=int, default=1, help="warm repeats of import-calls (each as long as the first: see the result)")
    ap.add_argument("--writes", type=int, default=200, help="calls of write and undo in each process")
    ap.add_argument("--processes", type=int, default=1, help="fresh processes per task and size")
    ap.add_argument("--wait-idle", "--idle-wait", dest="wait_idle", type=float, default=30.0,
                    help="before each process, wait up to this long for a quiet machine (--idle-wait: its former name)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench-out")
    ap.add_argument("--child", choices=list(TASKS), help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        emit_result(child(a.child, a.size, a.work, a))
        return 0
    tasks = a.tasks or (list(LOG_TASKS) if a.log else list(TASKS))
    work = a.out / "store-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    sizes, checks = [], {}
    try:
        for task in tasks:
            got = []
            for n in _sizes(task, a):
                s, c = run_task(task, n, work, a)
                sizes.append(s)
                got.append(c)
            checks[f"{TASKS[task][0]}: every call returned "
                   + ", ".join(f"{c['want']} ({c['size']})" for c in got)] = all(c["ok"] for c in got)
    except ChildFailed as e:
        print(f"FAILED: {e}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res = benchmark_result("store", "The CAL judging store: import, status, a log with undos", sizes, checks=checks,
                           notes=["SQLite runs in the measured process: its CPU is the process's own.",
                                  "Every import writes into a new store (made untimed before the call) with "
                                  "synchronous=FULL; the status and log stores are made once per size, untimed."])
    write_result(res, a.out / "store.json", "bench_store.py", argv)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
