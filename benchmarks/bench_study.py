"""Budget-study benchmark (issue 23): every registered adjudication strategy at ten budgets (10%,
20%, ..., 100% of each topic's pool) on synthetic data shaped like TREC-8 ad hoc.

    python benchmarks/bench_study.py [--repeats 1] [--workers 2] [--batch 10] [--wait-idle 60] [--check]

The study is one task of ``bench_budget.py`` (``--tasks study``), on the same collections
(``simulate_collection(topics=T, seed=0)``, 25 and 50 topics; 71 runs x 1,000 documents, a depth-100
pool of about 1,700 documents per topic, kept as canonical Parquet in ``bench-out/budget-trec8/``):
this script runs only that task, with its own flags, and writes the same one result,
``bench-out/budget.json`` (the replays it is built on and the study are one section of
docs/benchmarks.md; measuring them apart would give two results for one question).

Measured in a fresh subprocess per size (imports and data loading excluded; file cache warm), the
first call then ``--study-warm`` repeats: ``budget_study(runs, qrels, depth=100, workers=W,
params=AdjudicateParams(batch=B))`` — the replays, the distinct (topic, judgments) scorings, the
leaderboards, tau, tau_AP, rank drops, the paired t-tests of every two runs at every budget, the
tables — and ``write_budget_report``. Reported: wall and CPU time (the process and its workers),
the cores other processes used meanwhile, the study's stages and counts. ``--check`` also compares
one strategy's leaderboard at one budget with ``evaluate`` on its qrels found so far, computed here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_budget  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=1, help="fresh processes per size")
    p.add_argument("--study-warm", type=int, default=1, help="warm repeats in each process")
    p.add_argument("--topics", nargs=2, type=int, default=[25, bench_budget.TREC8_TOPICS], help="the two sizes")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--batch", type=int, default=10, help="judgments per round ([adjudicate] batch)")
    p.add_argument("--wait-idle", type=float, default=60.0, help="before each measurement, wait up to this many "
                   "seconds for other processes to use < 0.25 cores")
    p.add_argument("--check", action="store_true", help="compare one leaderboard with evaluate() (untimed)")
    p.add_argument("--work-dir", type=Path, default=ROOT / "bench-out" / "budget-trec8")
    a = p.parse_args(argv)
    return bench_budget.main(["--tasks", "study", "--study-processes", str(a.repeats), "--study-warm", str(a.study_warm),
                              "--topics", *map(str, a.topics), "--workers", str(a.workers), "--batch", str(a.batch),
                              "--wait-idle", str(a.wait_idle), "--work-dir", str(a.work_dir)]
                             + (["--check"] if a.check else []))


if __name__ == "__main__":
    sys.exit(main())
