"""CAL scoring on Dask (issue 15): shards pinned to the workers of a LocalCluster (2 processes),
the same batches as local scoring byte for byte, and the same batch when a worker process is
killed in the middle of an iteration."""

from __future__ import annotations

import json
import os
import signal
import threading

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed")

from qrelkit.cal.distributed import DaskScorer, _store_visible  # noqa: E402
from qrelkit.cal.features import build_features  # noqa: E402
from qrelkit.cal.loop import CalParams, CalRanker, candidate_rows, fractional_candidates  # noqa: E402
from qrelkit.cli import run  # noqa: E402
from qrelkit.errors import InputError  # noqa: E402

from test_cal_shards import QUERY, classes_of, corpus  # noqa: E402


def _batches(f, cand, thread, scorer=None, iterations=4, known=False):
    rk = CalRanker(f, QUERY, topic="t1", thread=thread, candidates=cand, params=CalParams(seed=2), scorer=scorer)
    judged = np.zeros(0, np.int64)
    out = []
    for it in range(1, iterations + 1):
        kn = judged[::3] if known else np.zeros(0, np.int64)
        train = np.setdiff1d(judged, kn)
        b = rk.next_batch(train, (train % 5 == 0) | np.isin(train, judged[:4]), train, 20 + it, it, known_rows=kn)
        judged = np.concatenate([judged, b.rows[b.new]])
        out.append((b.pids, b.scores.tobytes(), b.new.tolist()))
    return out


@pytest.fixture(scope="module")
def feats(tmp_path_factory):
    t = corpus(2000)
    return build_features(t, tmp_path_factory.mktemp("dask") / "f", classes=classes_of(t), shard_size=300)


@pytest.fixture(scope="module")
def scorer(feats):
    with DaskScorer(feats, n_workers=2) as ds:
        yield ds


def test_same_batches_as_local(feats, scorer):
    cases = [(None, "all", False), (candidate_rows(feats), "local", False),
             (fractional_candidates(feats, 0.3, 4), "fractional", False), (candidate_rows(feats), "local", True)]
    for cand, thread, known in cases:
        assert _batches(feats, cand, thread, scorer, known=known) == _batches(feats, cand, thread, known=known), thread
    owners = scorer.assignment()
    assert sorted(owners) == list(range(7)) and len(set(owners.values())) == 2
    _batches(feats, None, "all", scorer, iterations=1)
    assert scorer.assignment() == owners  # shards stay on their workers
    st = scorer.stats
    assert st["iterations"] == 17 and st["retries"] == 0 and st["per_iteration"][-1]["tasks"] == 2
    assert 0 < st["per_iteration"][-1]["sent"] < st["bytes_sent"]


def test_worker_killed_mid_iteration(feats):
    with DaskScorer(feats, n_workers=2, worker_timeout=30) as ds:
        cand = candidate_rows(feats)
        expect = _batches(feats, cand, "local")
        assert _batches(feats, cand, "local", ds, iterations=1) == expect[:1]  # shards placed, workers warm
        pids = ds.client.run(os.getpid)
        victim = sorted(pids)[0]

        def slow_scoring():  # on the victim only: its next task waits long enough to be killed
            import time

            import qrelkit.cal.distributed as m

            orig = m._score_shards

            def waiting(*a, **k):
                time.sleep(60)
                return orig(*a, **k)

            m._score_shards = waiting

        ds.client.run(slow_scoring, workers=[victim])
        killer = threading.Timer(1.0, os.kill, (pids[victim], signal.SIGKILL))
        killer.start()
        try:
            got = _batches(feats, cand, "local", ds)
        finally:
            killer.cancel()
        assert got == expect
        assert ds.stats["retries"] >= 1
        assert victim not in set(ds.assignment().values())


def test_cli_next_on_dask_writes_the_same_batches(tmp_path):
    t = corpus(900)
    c = tmp_path / "corpus.jsonl"
    c.write_text("".join(json.dumps({"pid": p, "passage": x}) + "\n" for p, x in zip(t["pid"].to_pylist(),
                                                                                      t["text"].to_pylist())))
    topics = tmp_path / "topics.tsv"
    topics.write_text(f"t1\t{QUERY}\nt2\tzzz\n")
    outs = []
    for name, extra in (("local", []), ("dask", ["--workers", "2"])):
        d = tmp_path / name
        d.mkdir()
        assert run(["cal", "features", str(c), "-o", str(d / "c.db.features"), "--shard-size", "200"]) == 0
        assert run(["cal", "init", str(d / "c.db"), "--topics", str(topics)]) == 0
        assert run(["cal", "next", str(d / "c.db"), "-o", str(d / "b1.csv"), "--seed", "3", "--assessor", "A1", *extra]) == 0
        df = pd.read_csv(d / "b1.csv", dtype=str).assign(grade="1")
        df.to_csv(d / "b1-done.csv", index=False)
        assert run(["cal", "import", str(d / "c.db"), str(d / "b1-done.csv")]) == 0
        assert run(["cal", "next", str(d / "c.db"), "-o", str(d / "b2.csv"), "--seed", "3", *extra]) == 0
        outs.append(((d / "b1.csv").read_bytes(), (d / "b2.csv").read_bytes()))
    assert outs[0] == outs[1] and outs[0][1].count(b"\n") > 100
    d = tmp_path / "local"  # both --workers and --scheduler: refused, nothing written
    assert run(["cal", "next", str(d / "c.db"), "-o", str(d / "b3.csv"), "--workers", "2", "--scheduler", "tcp://x:1"]) == 2
    assert not (d / "b3.csv").exists()


def test_dask_needs_stored_features_visible_everywhere(tmp_path):
    with pytest.raises(InputError) as e:
        DaskScorer(build_features(corpus(100)), n_workers=1)
    assert e.value.rule == "bad-option" and "stored features" in str(e.value)
    assert "not visible" in _store_visible(str(tmp_path / "nowhere"))


def test_top_many_on_dask_same_as_local(feats, scorer):
    """A group of models in one task per worker: each model's candidates as local scoring gives."""
    from qrelkit.cal.scoring import Candidates, LocalScorer

    from test_cal_shards import _models

    cands = Candidates(feats, fractional_candidates(feats, 0.3, 4))
    models = _models(feats.n_terms, 5)
    skips = [cands.rows[: 10 * t] for t in range(5)]
    ks = [4, 9, 15, 9, 30]
    before = scorer.stats["per_iteration"][-1:] if scorer.stats["per_iteration"] else []
    got = scorer.top_many(models, cands, skips, ks)
    ref = LocalScorer(feats).top_many(models, cands, skips, ks)
    assert len(got) == len(ref) == 5
    for a, b in zip(got, ref):
        assert a.pids == b.pids and a.scores.tobytes() == b.scores.tobytes() and np.array_equal(a.rows, b.rows)
    last = scorer.stats["per_iteration"][-1]
    assert last is not (before[0] if before else None) and last["models"] == 5 and last["tasks"] == 2


class _LateFuture:
    """A task that finishes between the client's scans: 'pending' at the first look, then done."""

    def __init__(self, result, late=True):
        self.looks, self.result_, self.cancelled = 0 if late else 1, result, False

    @property
    def status(self):
        self.looks += 1
        return "pending" if self.looks == 1 else "finished"

    def done(self):
        return self.looks >= 1

    def cancel(self):
        self.cancelled = True


class _FakeClient:
    def __init__(self):
        self.submitted = []

    def submit(self, fn, *args, **kw):
        fut = _LateFuture([(args[1][0], "ok")], late=not self.submitted)  # a resubmission is prompt
        self.submitted.append(fut)
        return fut

    def gather(self, futs):
        return [f.result_ for f in futs]

    def nthreads(self):
        return {"tcp://w0": 1}


def test_a_task_finishing_between_scans_is_not_taken_for_lost(monkeypatch):
    """A result that arrives while the client looks at its tasks is gathered, never cancelled and
    resubmitted (the false retry CI saw under load)."""
    import distributed

    monkeypatch.setattr(distributed, "wait", lambda futs, timeout=None: None)
    sc = DaskScorer.__new__(DaskScorer)
    sc.client, sc.path, sc._owner = _FakeClient(), "x", {0: "tcp://w0"}
    sc.features = type("F", (), {"shards": [object()]})()
    it = {"sent": 0, "received": 0, "retries": 0, "tasks": 0}
    assert sc._run(("all",), [np.zeros(0, np.int64)], it) == [(0, "ok")]
    assert it["retries"] == 0 and it["tasks"] == 1
    assert len(sc.client.submitted) == 1 and not sc.client.submitted[0].cancelled


class _LostFuture:
    status = "lost"

    def done(self):
        return True

    def cancel(self):
        pass


def test_an_iteration_whose_workers_are_always_lost_fails_instead_of_looping(monkeypatch):
    import distributed

    class Client(_FakeClient):
        def submit(self, fn, *args, **kw):
            self.submitted.append(_LostFuture())
            return self.submitted[-1]

    monkeypatch.setattr(distributed, "wait", lambda futs, timeout=None: None)
    sc = DaskScorer.__new__(DaskScorer)
    sc.client, sc.path, sc._owner, sc.worker_timeout = Client(), "x", {0: "tcp://w0"}, 1.0
    sc.features = type("F", (), {"shards": [object()]})()
    it = {"sent": 0, "received": 0, "retries": 0, "tasks": 0}
    with pytest.raises(InputError, match="dask-worker-lost"):
        sc._run(("all",), [np.zeros(0, np.int64)], it)
    assert len(sc.client.submitted) == 4  # the first attempt and 3 retries
