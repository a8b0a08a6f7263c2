"""The judging store's hot paths: ``cal import`` of 100k judgments in many small batches, and
``cal status`` over 200 topics.

* import, one call: 100,000 rows over 200 topics, a new batch id every 10 rows (10,000 batches,
  all unknown to the store: each is registered as a pool batch), ``synchronous=FULL``; then the
  same rows again (every row repeated, nothing written);
* import, many calls: the same rows in 1,000 imports of 100 rows (one transaction each);
* status: a store of 200 topics x 3 threads (a pool batch of 100 and 3 judged cal batches of 25
  per thread, one open batch), the density rule: ``status_table``;
* reading a changed log (``--log``): 300,000 judgments of which 3,000 were undone and 1,500 of
  those judged again (``retract``, then the import path), read whole (``judgments()``,
  ``export_qrels()``), then 200 single judgments through ``import_judgment`` (the web app's
  write) and 200 undos (medians in ms).

In-process timings (SQLite runs in this process): wall and CPU seconds, and the cores other
processes used meanwhile. Run: ``python benchmarks/bench_store.py`` (the qrelkit on the path).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from _machine import busy_cpu_s, cpu_s, others_cores, wait_idle
from qrelkit.cal.stopping import status_table
from qrelkit.store import init_store, open_store

TOPICS = 200


def judgments(n: int = 100_000, per_batch: int = 10) -> pd.DataFrame:
    i = np.arange(n)
    return pd.DataFrame({"qid": [f"q{x:03d}" for x in (i // per_batch) % TOPICS], "docid": [f"d{x}" for x in i],
                         "assessor": "A1", "grade": i % 4, "batch_id": [f"b{x}" for x in i // per_batch]})


def timed(fn) -> dict:
    b0, c0, t0 = busy_cpu_s(), cpu_s(), time.perf_counter()
    out = fn()
    wall, cpu = time.perf_counter() - t0, cpu_s() - c0
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "others_cores": round(others_cores(b0, busy_cpu_s(), cpu, wall), 2), "result": out}


def status_store(path: Path) -> None:
    rng = np.random.default_rng(0)
    rows = []
    with init_store(path, [str(q) for q in range(1, TOPICS + 1)], collection_size=10_000, synchronous="OFF") as s:
        for q in map(str, range(1, TOPICS + 1)):
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


def changed_log(path: Path) -> dict:
    n = 300_000
    df = judgments(n, per_batch=100)
    with init_store(path, [f"q{x:03d}" for x in range(TOPICS)], synchronous="OFF") as s:
        s.judgments.import_judgments(df)
        undone = df.iloc[::100]
        for r in undone.itertuples(index=False):
            s.judgments.retract(r.qid, r.docid, r.assessor, r.batch_id)
        s.judgments.import_judgments(undone.iloc[::2].assign(grade=lambda d: (d["grade"] + 1) % 4))
    out = {}
    with open_store(path) as s:
        out["judgments_300k"] = timed(lambda: len(s.judgments.log()))
        out["export_qrels_300k"] = timed(lambda: s.judgments.export_qrels().num_rows)
        one, undo = [], []
        for k in range(200):
            t0 = time.perf_counter()
            s.judgments.import_judgment(f"q{k % TOPICS:03d}", f"new{k}", "A2", k % 4, f"b{k}")
            one.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            s.judgments.retract(f"q{k % TOPICS:03d}", f"new{k}", "A2", f"b{k}")
            undo.append(time.perf_counter() - t0)
        out["import_judgment_ms"] = round(float(np.median(one)) * 1000, 2)
        out["retract_ms"] = round(float(np.median(undo)) * 1000, 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--idle-wait", type=float, default=120.0, help="Wait up to this long for a quiet machine.")
    ap.add_argument("--log", action="store_true", help="only the reading of a changed log")
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="bench-store-"))
    if args.log:
        wait_idle(args.idle_wait)
        print(json.dumps(changed_log(d / "log.db"), indent=2))
        return
    df = judgments()
    topics = [f"q{x:03d}" for x in range(TOPICS)]
    out = {}
    wait_idle(args.idle_wait)
    with init_store(d / "one.db", topics) as s:
        out["import_one_call"] = timed(lambda: s.judgments.import_judgments(df).imported)
        out["reimport_one_call"] = timed(lambda: s.judgments.import_judgments(df).counts.get("repeated"))
    with init_store(d / "many.db", topics) as s:
        out["import_1000_calls"] = timed(lambda: sum(s.judgments.import_judgments(df.iloc[k * 100:(k + 1) * 100]).imported
                                                     for k in range(1000)))
    status_store(d / "status.db")
    wait_idle(args.idle_wait)
    with open_store(d / "status.db") as s:
        out["status_200_topics"] = timed(lambda: len(status_table(s)))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
