"""Progress on long work (issue 11, section 8): ``cal status``, ``cal import``, ``eval compare`` and
``reuse leave-out`` report progress through the library's progress callback (announce the total,
then one step per unit), shown as a rich bar on stderr; and ``cal status`` reads the store a fixed
number of times whatever the number of topics (it took 15 s on 200 topics)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow as pa
from rich.console import Console

from qrelkit.cal.stopping import state_from_store, status_table
from qrelkit.store import init_store
from qrelkit.cli import common


class Recorder:
    """A progress callback that records its calls."""

    def __init__(self):
        self.total, self.steps, self.calls = None, 0, []

    def __call__(self, n: int = 1, total: int | None = None) -> None:
        self.calls.append((n, total))
        if total is not None:
            self.total = total
        self.steps += n


def _store(path, n_topics: int):
    """Topics with pool, cal and sample batches; passage p0 judged by two assessors."""
    s = init_store(path, [str(q) for q in range(1, n_topics + 1)], collection_size=1000, synchronous="OFF")
    rows = []
    for q in map(str, range(1, n_topics + 1)):
        pool = [f"{q}-p{i}" for i in range(6)]
        b = s.batches.issue(q, None, pool, kind="pool")
        rows += [(q, p, "A1", i % 4, b) for i, p in enumerate(pool)] + [(q, pool[0], "A2", 3, b)]
        for th in ("local", "all"):
            items = [f"{q}-{th}{i}" for i in range(5)]
            b = s.batches.issue(q, th, items)
            rows += [(q, p, "A1", (i * 3) % 4, b) for i, p in enumerate(items[:4])]   # the last is open
        smp = [f"{q}-s{i}" for i in range(3)] + [f"{q}-local0"]
        b = s.batches.issue(q, None, smp, kind="sample")
        rows += [(q, p, "A3", 2 * (i % 2), b) for i, p in enumerate(smp)]
    s.judgments.import_judgments(pd.DataFrame(rows, columns=["qid", "docid", "assessor", "grade", "batch_id"]))
    return s


def test_status_states_equal_the_per_thread_states(tmp_path):
    """The one-read path of ``cal status`` gives the states :func:`state_from_store` gives."""
    from qrelkit.cal.stopping import _current_states

    with _store(tmp_path / "s.db", 4) as s:
        th = s.topics.threads()
        for combine in ("median_high", "max"):
            states = list(_current_states(s, th, relevant=[2, 3], combine=combine, budget=50))
            assert len(states) == len(th) == 12
            for t, st in zip(th.itertuples(index=False), states):
                ref = state_from_store(s, t.qid, t.thread, relevant=[2, 3], combine=combine, budget=50)
                assert (st.passages, st.relevant.tolist(), st.batch_ends, st.issued, st.sample, st.budget,
                        st.collection_size, st.topic, st.thread) == \
                       (ref.passages, ref.relevant.tolist(), ref.batch_ends, ref.issued, ref.sample, ref.budget,
                        ref.collection_size, ref.topic, ref.thread)
        assert states[2].sample is not None and len(states[2].issued) == 16   # pool + local + all batches
        st = status_table(s, rule="target", size=1)
        assert list(st["open_batches"][:3]) == [0, 1, 1]


def test_status_reads_the_store_a_fixed_number_of_times(tmp_path):
    """Old code: about five queries per topic and thread."""
    counts = []
    for n in (2, 8):
        with _store(tmp_path / f"s{n}.db", n) as s:
            stmts = []
            s.db.conn.set_trace_callback(stmts.append)
            status_table(s, rule="knee")
            s.db.conn.set_trace_callback(None)
            counts.append(len(stmts))
    assert counts[0] > 0 and counts[0] == counts[1], counts


def test_status_progress(tmp_path):
    rec = Recorder()
    with _store(tmp_path / "s.db", 3) as s:
        df = status_table(s, threads=["all", "local"], progress=rec)
    assert rec.calls[0] == (0, 6) and rec.steps == 6 == len(df)


def test_import_progress_per_file(tmp_path):
    files = []
    for k in range(3):
        f = tmp_path / f"j{k}.csv"
        pd.DataFrame({"qid": "1", "docid": [f"d{k}{i}" for i in range(4)], "assessor": "A", "grade": 1,
                      "batch_id": f"b{k}"}).to_csv(f, index=False)
        files.append(f)
    rec = Recorder()
    with init_store(tmp_path / "s.db", ["1"]) as s:
        assert s.judgments.import_files(files, progress=rec).imported == 12
    assert rec.steps == 3 and all(c == (1, None) for c in rec.calls)


def test_compare_progress():
    from qrelkit.evaluate import evaluate, outcome_breakdown, significance

    rng = np.random.default_rng(0)
    rows = [(r, str(q), f"d{d}", d + 1, float(100 - d)) for r in ("a", "b", "c") for q in range(5)
            for d in rng.permutation(10)[:5].tolist()]
    from qrelkit.io.runs import canonicalize

    runs = canonicalize(pa.Table.from_pandas(pd.DataFrame(rows, columns=["run", "qid", "docid", "rank", "score"]),
                                             preserve_index=False))
    qrels = pa.table({"qid": [str(q) for q in range(5) for _ in range(3)],
                      "docid": [f"d{d}" for _ in range(5) for d in range(3)],
                      "rel": pa.array([1] * 15, pa.int32())})
    ev = evaluate(runs, qrels, ["P@5", "RR@10"])
    rec = Recorder()
    significance(ev.per_query, tests=["ttest"], progress=rec)
    assert rec.calls[0] == (0, 6) and rec.steps == 6          # 2 measures x 3 pairs
    rec = Recorder()
    outcome_breakdown(runs, qrels, baseline="a", progress=rec)
    assert rec.calls[0] == (0, 2) and rec.steps == 2


def test_leave_out_progress():
    from test_reuse import MANIFEST, QRELS, SPEC, make_qrels, make_runs

    from qrelkit.reuse import leave_out

    rec = Recorder()
    res = leave_out(make_runs(SPEC), make_qrels(QRELS), MANIFEST, depth=2, measures=["P@2"], progress=rec, workers=1)
    units_scored = int((res.units.to_pandas()["removed_judged"] > 0).sum())
    assert rec.calls[0] == (0, 1 + units_scored) and rec.steps == 1 + units_scored


def test_the_bar_takes_a_total_announced_later(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(common, "stderr", Console(file=buf, force_terminal=True, width=100))
    with common.progress("working") as advance:
        advance(0, total=3)
        for _ in range(3):
            advance()
    assert "working" in buf.getvalue()
    # not a terminal: the callback accepts the same calls and shows nothing
    quiet = io.StringIO()
    monkeypatch.setattr(common, "stderr", Console(file=quiet, force_terminal=False))
    with common.progress("quiet") as advance:
        advance(0, total=3)
        advance(2)
    assert quiet.getvalue() == ""
