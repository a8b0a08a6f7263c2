"""Evaluation benchmark: qrelkit beside ir-measures, side by side at two sizes.

    python benchmarks/bench_eval.py [--repeats 3] [--peer-repeats 2] [--skip-peers] [--wait-idle 120]

Data: 100 runs x 500 topics x 100 documents (``benchmarks/gen_runs.py``, shared with
``bench_pool.py`` and reused while its parameters match); the small size is the first half of the run
files (2.5M lines), the large one all of them (5M). Qrels for 76 of the 500 topics with 300 judged
documents each (made here, deterministic: the topics are a seeded sample; each topic's judged
documents are the first 300 of its depth-100 pool in assessor order, i.e. the documents the runs rank
highest; grades 0-3 drawn with a probability of relevance that falls with the best rank).
Measures: nDCG@10, AP and RR@10.

At each size every tool runs in a fresh process that times its first call and then warm repeats
(imports apart; wall and CPU; peak RSS; the load of other processes meanwhile). The two qrelkit paths
run in ``--rounds`` processes each (3), taking turns, merged (the median first call, every warm call),
so that the VM's slow spells fall on both and a first call is not one process's:

* **ir-measures on the files**: ``read_trec_qrels`` once, one ``evaluator(measures, qrels)`` (its
  bulk API: one evaluator for every run, pytrec_eval behind it), then ``evaluator.calc(read_trec_run(f))``
  for every run file;
* **qrelkit from the files**: ``read_runs(files)`` (full validation) + ``read_qrels`` + ``evaluate``,
  stages timed apart;
* **qrelkit from canonical Parquet**: the runs as ``qrelkit runs canonicalize`` writes them (validated
  once, untimed), ``load_canonical_runs`` (judged topics only) + ``evaluate``;
* **qrelkit eval score (command)**: ``qrelkit eval score runs.parquet -q qrels -o out.parquet`` as a
  fresh command, whole process (interpreter start and imports included), run ``--repeats`` + 1 times.

Check: every (run, topic, measure) value of qrelkit equals ir-measures' to 1e-9, except RR@10 of
(run, topic) lists whose first 11 documents contain tied scores: ir-measures' msmarco provider
(RR with a cutoff) breaks ties by docid ascending where trec_eval, pytrec_eval and qrelkit use
docid descending. Those are counted; any other difference fails the benchmark (exit 1).
Result: ``bench-out/eval.json`` (the shape of ``benchmarks/_results.py``) and a Markdown summary.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _child import child_run, markdown, per_unit_growth, run_tool, run_tools_in_rounds  # noqa: E402
from _machine import run_process  # noqa: E402
from _procs import tool_from_whole_processes  # noqa: E402
from _results import benchmark_result, size_result, target, tool_named, write_result  # noqa: E402

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # last: an installed qrelkit (or PYTHONPATH's) is the one measured

MEASURES = ["nDCG@10", "AP", "RR@10"]


# --------------------------------------------------------------------------- children


def _files_of(list_file: Path) -> list[Path]:
    return [Path(ln) for ln in list_file.read_text().splitlines() if ln]


def child_irmeasures(files: list[Path], qrels_path: Path, out: Path, repeats: int) -> None:
    mods, last = {}, {}

    def imports():
        import ir_measures

        mods["irm"] = ir_measures

    def work():
        irm = mods["irm"]
        ms = [irm.parse_measure(m) for m in MEASURES]
        ev = irm.evaluator(ms, list(irm.read_trec_qrels(str(qrels_path))))
        last["res"] = {f: ev.calc(irm.read_trec_run(str(f))) for f in files}
        return {}

    def extra():
        with open(out, "w") as fh:  # not measured: every value, for the parent's comparison
            for f, (agg, perq) in last["res"].items():
                for m in perq:
                    fh.write(f"{f}\t{m.query_id}\t{m.measure}\t{m.value!r}\n")
                for m, v in agg.items():
                    fh.write(f"{f}\tall\t{m}\t{v!r}\n")
        return {}

    child_run(imports, work, repeats, extra)


def child_qrelkit(files: list[Path] | None, parquet: Path | None, qrels_path: Path, out: Path, repeats: int) -> None:
    mods, last = {}, {}

    def imports():
        from qrelkit.evaluate import evaluate, load_canonical_runs
        from qrelkit.io.qrels import read_qrels
        from qrelkit.io.runs import read_runs
        from qrelkit.io.tables import write_table

        mods.update(evaluate=evaluate, load=load_canonical_runs, read_qrels=read_qrels, read_runs=read_runs,
                    write_table=write_table)

    def work():
        import pyarrow.compute as pc  # lazy: imported by qrelkit already

        t0 = time.perf_counter()
        q = mods["read_qrels"](qrels_path)
        if files is not None:
            rs = mods["read_runs"](files)
            table, names = rs.table, rs.runs
        else:
            table, names = mods["load"](parquet, pc.unique(q["qid"]).to_pylist())
        t1 = time.perf_counter()
        last["ev"] = mods["evaluate"](table, q, MEASURES, run_names=names)
        return {"read": t1 - t0, "evaluate": time.perf_counter() - t1}

    def extra():
        ev = last["ev"]
        mods["write_table"](ev.per_query, out, kind="eval-per-query", params={})
        mods["write_table"](ev.summary, out.with_suffix(".summary.parquet"), kind="eval-summary", params={})
        return {}

    child_run(imports, work, repeats, extra)


def child_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--child", required=True, choices=["ir_measures", "qrelkit_files", "qrelkit_parquet"])
    p.add_argument("--files", type=Path)
    p.add_argument("--parquet", type=Path)
    p.add_argument("--qrels", required=True, type=Path)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    if a.child == "ir_measures":
        child_irmeasures(_files_of(a.files), a.qrels, a.out, a.repeats)
    elif a.child == "qrelkit_files":
        child_qrelkit(_files_of(a.files), None, a.qrels, a.out, a.repeats)
    else:
        child_qrelkit(None, a.parquet, a.qrels, a.out, a.repeats)
    return 0


# --------------------------------------------------------------------------- parent


def make_qrels(run_table, path: Path, n_topics: int, n_docs: int, seed: int) -> dict:
    """Qrels for ``n_topics`` sampled topics, ``n_docs`` judged documents each (see the module doc)."""
    import pandas as pd

    from qrelkit.io.qrels import read_qrels, write_qrels
    from qrelkit.io.runs import qid_order
    import pyarrow as pa
    import pyarrow.compute as pc

    rng = np.random.default_rng(seed)
    topics = qid_order(pc.unique(run_table["qid"]).to_pylist())
    chosen = qid_order(rng.choice(topics, size=n_topics, replace=False).tolist())
    t = run_table.filter(pc.is_in(run_table["qid"], value_set=pa.array(chosen)))
    df = pd.DataFrame({"qid": t["qid"].to_numpy(zero_copy_only=False), "docid": t["docid"].to_numpy(zero_copy_only=False),
                       "rank": t["rank"].to_numpy()})
    g = df.groupby(["qid", "docid"]).agg(min_rank=("rank", "min"), n=("rank", "size")).reset_index()
    g = g.sort_values(["qid", "min_rank", "n", "docid"], ascending=[True, True, False, True], kind="mergesort")
    g = g.groupby("qid", sort=False).head(n_docs)
    p_rel = np.clip(0.9 / np.sqrt(g["min_rank"].to_numpy()), 0.02, 0.9)
    rel = rng.random(len(g)) < p_rel
    grade = np.where(rel, rng.integers(1, 4, len(g)), 0)
    q = pa.table({"qid": g["qid"].tolist(), "docid": g["docid"].tolist(), "rel": pa.array(grade.astype(np.int32))})
    from qrelkit.io.qrels import QRELS_SCHEMA

    write_qrels(q.cast(QRELS_SCHEMA), path)
    back = read_qrels(path)
    return {"judged_topics": len(chosen), "judged": back.num_rows,
            "relevant": int(pc.sum(pc.greater_equal(back["rel"], 1)).as_py())}


def tied_lists(run_table, qrels_topics: set, k: int = 11) -> set[tuple[str, str]]:
    """(run, qid) lists with two equal scores among their first ``k`` documents."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = run_table.filter(pc.and_(pc.less_equal(run_table["rank"], k),
                                 pc.is_in(run_table["qid"], value_set=pa.array(sorted(qrels_topics)))))
    run = t["run"].to_numpy(zero_copy_only=False)
    qid = t["qid"].to_numpy(zero_copy_only=False)
    score = t["score"].to_numpy()
    same = (run[1:] == run[:-1]) & (qid[1:] == qid[:-1]) & (score[1:] == score[:-1])
    idx = np.flatnonzero(same)
    return set(zip(run[idx].tolist(), qid[idx].tolist()))


def compare(per_query, summary, peer_file: Path, run_of_file: dict, tied: set) -> dict:
    """Per (run, topic, measure) comparison of qrelkit's tables with ir-measures' values (written
    by its child); see the module documentation."""
    pq_ = per_query.to_pandas()
    ours = {(r, q, m): v for r, q, m, v in zip(pq_["run"], pq_["qid"], pq_["measure"], pq_["value"])}
    sm = summary.to_pandas()
    agg = {(r, m): v for r, m, v in zip(sm["run"], sm["measure"], sm["value"])}
    n = 0
    max_diff = {m: 0.0 for m in MEASURES}
    tie_diffs = 0
    unexplained = []
    for line in peer_file.read_text().splitlines():
        f, qid, m, v = line.split("\t")
        r, value = run_of_file[Path(f)], float(v)
        if qid == "all":
            if m != "RR@10" and abs(agg[(r, m)] - value) > 1e-9:
                unexplained.append((r, "all", m, agg[(r, m)], value))
            continue
        d = abs(ours[(r, qid, m)] - value)
        n += 1
        if d > 1e-9:
            if m == "RR@10" and (r, qid) in tied:
                tie_diffs += 1
                continue
            unexplained.append((r, qid, m, ours[(r, qid, m)], value))
        max_diff[m] = max(max_diff[m], d)
    return {"values_compared": n, "max_abs_diff_outside_ties": max_diff, "rr10_tie_differences": tie_diffs,
            "unexplained": unexplained[:20], "n_unexplained": len(unexplained)}


def measure_command(name: str, cmd: list[str], runs: int, idle_wait: float, note: str) -> dict:
    """A whole command in ``runs`` fresh processes (:func:`_machine.run_process`: each its own CPU
    time and peak RSS); the first is the first call."""
    out = tool_from_whole_processes(name, [run_process(cmd, idle_wait=idle_wait) for _ in range(runs)], note=note)
    f, w = out["first"], out["warm"]
    print(f"  {name:22s} first {f['wall_s']:.2f} s wall / {f['cpu_s']:.2f} s CPU; later runs median "
          f"{w['wall_s']:.2f} s wall / {w['cpu_s']:.2f} s CPU", flush=True)
    return out


def _cli() -> list[str]:
    exe = Path(sys.executable).parent / "qrelkit"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-c", "import sys; from qrelkit.cli import main; sys.argv[0] = 'qrelkit'; main()"]


def measure_size(n: int, files: list[Path], rs, qrels_path: Path, tied: set, a) -> tuple[dict, dict]:
    """Every tool on the first ``n`` run files: (size_result, checks)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from qrelkit.io.tables import write_table

    sub = files[:n]
    run_of_file = {Path(rs.files[r]): r for r in rs.runs}
    names = sorted(run_of_file[f] for f in sub)
    lines = int(pc.sum(pc.is_in(rs.table["run"], value_set=pa.array(names))).as_py())
    label = f"{lines / 1e6:g}M lines"
    print(f"{label}: {n} runs", flush=True)
    work = a.out_dir / f"size-{n}"
    work.mkdir(parents=True, exist_ok=True)
    listing = work / "files.txt"
    listing.write_text("".join(f"{f}\n" for f in sub))
    parquet = work / "runs-canonical.parquet"  # untimed: what 'qrelkit runs canonicalize' writes
    write_table(rs.table.filter(pc.is_in(rs.table["run"], value_set=pa.array(names))), parquet, kind="runs",
                params={"runs": str(a.data_dir)})
    me = [sys.executable, str(Path(__file__).resolve()), "--qrels", str(qrels_path), "--repeats", str(a.repeats)]
    tools = run_tools_in_rounds(
        [("qrelkit (text)", me + ["--child", "qrelkit_files", "--files", str(listing), "--out",
                                  str(work / "qrelkit-files.parquet")], "read_runs (every rule checked) + read_qrels + evaluate"),
         ("qrelkit (Parquet)", me + ["--child", "qrelkit_parquet", "--parquet", str(parquet), "--out",
                                     str(work / "qrelkit-parquet.parquet")],
          "load_canonical_runs (judged topics) + read_qrels + evaluate")],
        a.rounds, idle_wait=a.wait_idle)
    if not a.skip_command:
        tools.append(measure_command(
            "qrelkit eval score", _cli() + ["eval", "score", str(parquet), "-q", str(qrels_path), "-o",
                                            str(work / "cli.parquet")] + [x for m in MEASURES for x in ("-m", m)],
            a.repeats + 1, a.wait_idle,
            note="the command from canonical Parquet, whole process (start and imports included); every run a "
                 "fresh process ('warm': the runs after the first)"))
    if not a.skip_peers:
        me[me.index("--repeats") + 1] = str(a.peer_repeats)
        tools.append(run_tool("ir-measures", me + ["--child", "ir_measures", "--files", str(listing), "--out",
                                                  str(work / "ir-measures.tsv")], idle_wait=a.wait_idle,
                              note="one evaluator (pytrec_eval) for all runs, read_trec_run per file"))
    mine = pq.read_table(work / "qrelkit-files.parquet")
    checks = {"parquet_equals_files": bool(mine.equals(pq.read_table(work / "qrelkit-parquet.parquet")))}
    if not a.skip_peers:
        checks["vs_ir_measures"] = compare(mine, pq.read_table(work / "qrelkit-files.summary.parquet"),
                                           work / "ir-measures.tsv", run_of_file, tied)
    return size_result(label, lines, "line", tools, runs=n), checks


def targets_of(sizes: list[dict]) -> list[dict]:
    small, large = sizes[0], sizes[-1]
    text, parq = tool_named(large, "qrelkit (text)"), tool_named(large, "qrelkit (Parquet)")
    label = large["label"]
    out = [target(f"evaluation from text, {label} ({large['runs']} runs), warm wall", text["warm"]["wall_s"], "<=", 1.0, "s"),
           target(f"first evaluate() above a warm one (from Parquet, {label}), wall",
                  parq["first_stages"]["evaluate"] - parq["stages"]["evaluate"], "<=", 0.3, "s"),
           target(f"first call from text above a warm one ({label}), wall",
                  text["first"]["wall_s"] - text["warm"]["wall_s"], "<=", 0.3, "s")]
    if small is not large:
        out.append(target(f"time per line from text, {label} / {small['label']}, warm wall",
                          per_unit_growth(tool_named(small, "qrelkit (text)"), text, small["units"], large["units"]),
                          "<=", 1.1, "x"))
    peer = tool_named(large, "ir-measures")
    if peer is not None:
        out.append(target(f"ir-measures / qrelkit from text, {label}, warm wall",
                          peer["warm"]["wall_s"] / text["warm"]["wall_s"], ">=", 20, "x"))
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--child" in argv:
        return child_main(argv)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=ROOT / "bench-out" / "runs-100x500x100")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "bench-out" / "bench-eval")
    ap.add_argument("--runs", type=int, default=100, help="runs generated (the large size; the small one is half)")
    ap.add_argument("--topics", type=int, default=500)
    ap.add_argument("--depth", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--judged-topics", type=int, default=76)
    ap.add_argument("--judged-docs", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3, help="warm calls after the first (qrelkit)")
    ap.add_argument("--peer-repeats", type=int, default=2, help="warm calls after the first (ir-measures)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="fresh processes of each qrelkit path, taking turns (ir-measures and the command: one series)")
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--skip-command", action="store_true", help="do not time 'qrelkit eval score' as a command")
    ap.add_argument("--one-size", action="store_true", help="the large size only")
    ap.add_argument("--wait-idle", type=float, default=30.0, help="seconds to wait for a quiet machine before each tool")
    ap.add_argument("--json-out", type=Path, default=ROOT / "bench-out" / "eval.json")
    a = ap.parse_args(argv)

    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.runs import read_runs

    import gen_runs  # lazy: only the parent makes the runs

    gen_runs.ensure(a.data_dir, a.runs, a.topics, a.depth, a.seed)
    a.out_dir.mkdir(parents=True, exist_ok=True)
    rs = read_runs(a.data_dir)  # untimed: qrels, canonical Parquet, tie lists, warm file cache
    qrels_path = a.out_dir / f"qrels-{a.judged_topics}x{a.judged_docs}.txt"
    qinfo = make_qrels(rs.table, qrels_path, a.judged_topics, a.judged_docs, a.seed)
    files = sorted(p for p in a.data_dir.iterdir() if p.is_file() and not p.name.startswith("."))
    tied = tied_lists(rs.table, set(read_qrels(qrels_path)["qid"].to_pylist()))
    counts = [len(files)] if a.one_size else sorted({max(1, len(files) // 2), len(files)})
    sizes, by_size = [], {}
    for n in counts:
        size, checks = measure_size(n, files, rs, qrels_path, tied, a)
        sizes.append(size)
        by_size[size["label"]] = checks
    checks = dict(by_size[sizes[-1]["label"]])  # the large size's, at the top (as before)
    checks["sizes"] = by_size
    ok = all(c["parquet_equals_files"] and c.get("vs_ir_measures", {}).get("n_unexplained", 0) == 0
             for c in by_size.values())
    notes = [f"Generated runs ({a.topics} topics x {a.depth} documents, seed {a.seed}); qrels: {qinfo['judged_topics']} "
             f"topics x {a.judged_docs} documents ({qinfo['judged']} judgments, {qinfo['relevant']} relevant); "
             f"measures {', '.join(MEASURES)}. The small size is the first half of the run files.",
             "Each tool in a fresh process: 'first' is its first call there, 'warm' the calls after it; imports apart "
             "(but the command's figures are whole processes).",
             "ir-measures' RR@10 (its msmarco provider) breaks score ties by docid ascending: those lists differ "
             "from trec_eval's order, which qrelkit follows (counted in checks)."]
    res = benchmark_result("eval", "Evaluation: 3 measures, from text and from Parquet", sizes, peers=("ir_measures",),
                           targets=targets_of(sizes), checks=checks, notes=notes, measures=MEASURES,
                           data={"runs": a.runs, "topics": a.topics, "depth": a.depth, **qinfo})
    print()
    print(markdown(res))
    write_result(res, a.json_out, "bench_eval.py", argv)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
