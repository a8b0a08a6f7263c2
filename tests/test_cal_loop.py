"""The CAL loop: schedules, the scoring kernel, selection, determinism, threads and the store."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from qrelkit.cal.features import build_features, load_features
from qrelkit.cal.loop import (
    CalParams, CandidateCache, CalRanker, batch_size, batches_table, candidate_rows, fit_weights, fractional_candidates,
    issue_next_batches, score, score_many, select_top,
)
from qrelkit.store import open_store
from qrelkit.cli import run
from qrelkit.errors import InputError

WORDS = ("apple banana cherry durian elder fig grape honeydew iris jujube kiwi lemon mango nectar olive "
         "papaya quince rasp straw tomato ugli vanilla walnut xigua yam zucchini").split()


def _corpus(n=600, seed=0):
    """Passages of random fruit words; passages mentioning 'mango' and 'nectar' often are the
    relevant ones of topic 'q1'."""
    rng = np.random.default_rng(seed)
    pids, texts, rel = [], [], []
    for i in range(n):
        k = int(rng.integers(5, 15))
        ws = list(rng.choice(WORDS[:12], size=k))
        r = rng.random() < 0.1
        if r:
            ws += ["mango", "nectar"] * int(rng.integers(1, 3))
        elif rng.random() < 0.1:
            ws += ["mango"]
        rng.shuffle(ws)
        pids.append(f"d{i:04d}")
        texts.append(" ".join(ws))
        rel.append(r)
    return pa.table({"pid": pids, "text": texts}), np.array(rel)


@pytest.fixture(scope="module")
def feats():
    t, _ = _corpus()
    return build_features(t)


def test_batch_sizes():
    p = CalParams()
    assert [batch_size(p, "all", i) for i in (1, 2, 10)] == [25, 25, 25]
    assert [batch_size(p, "fractional", i) for i in (1, 2, 3)] == [25, 50, 50]
    assert [batch_size(CalParams(fractional_later_from=4), "fractional", i) for i in (3, 4)] == [25, 50]
    bmi = CalParams(schedule="bmi")
    assert [batch_size(bmi, "all", i) for i in range(1, 16)] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19]
    with pytest.raises(InputError):
        CalParams(schedule="growing")
    with pytest.raises(ValueError):
        batch_size(p, "all", 0)


def test_params_from_config():
    cfg = {"cal": {"batch_size": 10, "fractional_batch_size_later": 20, "schedule": "bmi", "C": 2},
           "labels": {"passage_relevant": [3]}}
    p = CalParams.from_config(cfg, seed=5, batch_size=None)
    assert (p.batch_size, p.fractional_batch_size_later, p.schedule, p.C, p.relevant, p.seed) == (10, 20, "bmi", 2.0, (3,), 5)


def test_score_kernel_matches_scipy(feats):
    rng = np.random.default_rng(1)
    w = rng.normal(size=feats.n_terms).astype(np.float32)
    X = feats.matrix
    expect = (X @ w.astype(np.float64)) + 0.25
    got = score(feats, w, 0.25)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expect, rtol=1e-5, atol=1e-5)
    rows = np.array([5, 0, 17, 599])
    np.testing.assert_allclose(score(feats, w, 0.25, rows), expect[rows], rtol=1e-5, atol=1e-5)


def test_fit_on_present_columns_is_the_full_model(feats):
    """Fitting on the training rows' columns gives the model fitted on every column."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(2)
    X = feats.matrix.tocsc()
    # training rows without the first column, so that some columns are absent from them
    rows = rng.choice(np.flatnonzero(X[:, 0].toarray().ravel() == 0), 120, replace=False)
    y = (rng.random(120) < 0.3).astype(np.int8)
    w, b, cols = fit_weights(feats.rows(rows), y, C=1.0, n_terms=feats.n_terms)
    present = np.flatnonzero(feats.matrix[rows].getnnz(axis=0))
    assert 0 not in present and cols.tolist() == present.tolist()
    full = LogisticRegression(C=1.0, solver="liblinear", random_state=0, max_iter=1000).fit(feats.matrix[rows], y)
    np.testing.assert_allclose(w, full.coef_.ravel(), rtol=1e-4, atol=1e-5)
    assert b == pytest.approx(full.intercept_[0], rel=1e-4, abs=1e-6)
    # the columns left out carry no weight in the model fitted on every column either
    outside = np.setdiff1d(np.arange(feats.n_terms), cols)
    assert len(outside) and not full.coef_.ravel()[outside].any() and not w[outside].any()


def test_select_top_ties_and_order():
    pids = pa.array(["e", "d", "c", "b", "a", "f"])
    s = np.array([1.0, 2.0, 2.0, 2.0, -np.inf, 0.5], np.float32)
    # three tied at 2.0 for two places: the smaller pids win; order score desc, then pid
    assert select_top(s, 2, pids).tolist() == [3, 2]
    assert select_top(s, 4, pids).tolist() == [3, 2, 1, 0]
    assert select_top(s, 10, pids).tolist() == [3, 2, 1, 0, 5]  # -inf never selected
    assert select_top(np.full(3, -np.inf, np.float32), 2, pids).tolist() == []
    # with a position -> row mapping
    assert select_top(np.array([2.0, 2.0], np.float32), 1, pids, np.array([0, 4])).tolist() == [1]


def test_next_batch_finds_relevant_and_skips(feats):
    _, rel = _corpus()
    rk = CalRanker(feats, "mango nectar", topic="q1", params=CalParams(seed=3))
    b1 = rk.next_batch(np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64), 25, 1)
    assert len(b1.rows) == 25 and b1.new.all()
    assert rel[b1.rows].mean() > 0.6  # the query alone finds relevant passages
    assert list(b1.scores) == sorted(b1.scores, reverse=True)
    # second iteration: train on the first batch, skip it
    b2 = rk.next_batch(b1.rows, rel[b1.rows], b1.rows, 25, 2)
    assert not set(b2.rows) & set(b1.rows)
    # known rows (judged in another thread) are encountered: in the batch, not counted
    known = b2.rows[:3]
    b3 = rk.next_batch(b1.rows, rel[b1.rows], b1.rows, 10, 2, known_rows=known)
    assert int(b3.new.sum()) == 10 and set(known) <= set(b3.rows) and not b3.new[np.isin(b3.rows, known)].any()
    assert b3.table().num_rows == len(b3.rows)


def test_same_seed_same_batches_across_processes(tmp_path):
    t, rel = _corpus()
    build_features(t, tmp_path / "f")
    code = f"""
import numpy as np, sys
from qrelkit.cal.features import load_features
from qrelkit.cal.loop import CalRanker, CalParams
f = load_features({str(tmp_path / 'f')!r})
rel = np.load({str(tmp_path / 'rel.npy')!r})
rk = CalRanker(f, "mango nectar", topic="q1", params=CalParams(seed=int(sys.argv[1])))
judged = np.zeros(0, np.int64)
out = []
for it in range(1, 5):
    b = rk.next_batch(judged, rel[judged], judged, 25, it)
    judged = np.concatenate([judged, b.rows])
    out.append(",".join(b.pids) + ";" + ",".join(f"{{x:.9g}}" for x in b.scores))
print("|".join(out))
"""
    np.save(tmp_path / "rel.npy", rel)
    res = [subprocess.run([sys.executable, "-c", code, s], capture_output=True, text=True, check=True).stdout
           for s in ("7", "7", "8")]
    assert res[0] == res[1] and res[0].count(",") > 50
    assert res[0] != res[2]  # another seed draws other negatives


def test_candidates_classes_and_fraction():
    t, _ = _corpus(200)
    cls = pa.table({"docid": ["d0001", "d0002", "d0005"], "class_id": ["d0000", "d0000", "d0004"]})
    f = build_features(t, classes=cls)
    cand = candidate_rows(f)
    assert 1 not in cand and 2 not in cand and 5 not in cand and 0 in cand and len(cand) == 197
    rk = CalRanker(f, "mango nectar", topic="q1")
    b = rk.next_batch(np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, np.int64), 300, 1)
    assert len(b.rows) == 197 and not {1, 2, 5} & set(b.rows.tolist())
    # the fractional collection: as pool fractional computes it over canonical passages
    from qrelkit.pooler.fractional import fractional_ids

    rows = fractional_candidates(f, 0.25, 11)
    expect = set(fractional_ids(t["pid"].combine_chunks(), 0.25, 11, classes=cls).to_pylist())
    assert set(f.pid_list(rows)) == expect and len(rows) == round(197 * 0.25)


def test_candidate_cache_computes_once_per_features_fraction_and_seed(monkeypatch, tmp_path):
    import qrelkit.cal.loop as loop

    calls = []
    real = loop.fractional_candidates
    monkeypatch.setattr(loop, "fractional_candidates", lambda f, fr, sd: calls.append((fr, sd)) or real(f, fr, sd))
    f, store, t, rel = _store_setup(tmp_path, 300)
    cache = CandidateCache()
    c1 = cache.candidates(f, "fractional", 0.5, 3)
    assert cache.candidates(f, "fractional", 0.5, 3) is c1 and calls == [(0.5, 3)]
    assert np.array_equal(c1.rows, fractional_candidates(f, 0.5, 3))
    cache.candidates(f, "fractional", 0.5, 4)
    cache.candidates(f, "fractional", 0.25, 3)
    assert calls[1:] == [(0.5, 4), (0.25, 3)]
    # the other threads do not depend on the fraction: one entry for them
    assert cache.candidates(f, "local", 0.5, 3) is cache.candidates(f, "local", 0.1, 9)
    # issuing batches twice with the cache: the fractional rows computed once, the same batches as without it
    calls.clear()
    b1, _ = issue_next_batches(store, f, params=CalParams(seed=1), fraction=0.5, fraction_seed=3, dry_run=True,
                               cache=cache)
    issue_next_batches(store, f, params=CalParams(seed=1), fraction=0.5, fraction_seed=3, dry_run=True, cache=cache)
    assert calls == []
    b0, _ = issue_next_batches(store, f, params=CalParams(seed=1), fraction=0.5, fraction_seed=3, dry_run=True)
    assert [x.pids for x in b1] == [x.pids for x in b0] and calls == [(0.5, 3)]
    # other features (rebuilt, reloaded): computed afresh
    f2 = load_features(tmp_path / "camp.db.features")
    cache.candidates(f2, "fractional", 0.5, 3)
    assert calls == [(0.5, 3), (0.5, 3)]
    store.close()


def _store_setup(tmp_path, n=600):
    from qrelkit.store import init_store

    t, rel = _corpus(n)
    f = build_features(t, tmp_path / "camp.db.features")
    store = init_store(tmp_path / "camp.db", {"q1": "mango nectar", "q2": "lemon kiwi"})
    return f, store, t, rel


def _judge(store, batches, rel, pids):
    truth = {p: (3 if r else 0) for p, r in zip(pids, rel)}
    rows = [{"qid": b.topic, "docid": p, "assessor": "A1", "grade": truth[p] if b.topic == "q1" else 0,
             "batch_id": b.batch_id} for b in batches for p, n in zip(b.pids, b.new) if n]
    return store.judgments.import_judgments(pd.DataFrame(rows))


def test_issue_next_batches_with_store(tmp_path):
    f, store, t, rel = _store_setup(tmp_path)
    pids = t["pid"].to_pylist()
    params = CalParams(seed=1)
    b, rep = issue_next_batches(store, f, params=params, fraction=0.5, fraction_seed=3)
    assert len(b) == 6 and set(rep["action"]) == {"issued"}
    assert store.batches.all("q1", "all")["batch_id"].tolist() == ["q1/all/0000"]
    # no passage is issued twice for a topic
    q1 = [p for x in b if x.topic == "q1" for p in x.pids]
    assert len(q1) == len(set(q1)) == 75
    # the fractional thread selects inside the fractional collection only
    frac = set(f.pid_list(fractional_candidates(f, 0.5, 3)))
    assert set(next(x for x in b if x.thread == "fractional" and x.topic == "q1").pids) <= frac
    # open batches: wait
    b2, rep2 = issue_next_batches(store, f, params=params, fraction=0.5, fraction_seed=3)
    assert b2 == [] and set(rep2["action"]) == {"waiting"}
    _judge(store, b, rel, pids)
    b3, rep3 = issue_next_batches(store, f, params=params, fraction=0.5, fraction_seed=3)
    sizes = {(x.topic, x.thread): int(x.new.sum()) for x in b3}
    assert sizes[("q1", "fractional")] == 50 and sizes[("q1", "all")] == 25
    # the local thread encounters what the other threads judged: copied, not re-judged
    enc = rep3[rep3["thread"] != "all"]["encountered"].sum()
    assert enc > 0  # the seeded setup has the fractional and local rankings reach judged passages
    log = store.judgments.log("q1", None)
    assert (log.groupby("docid")["grade"].nunique() == 1).all()
    if enc:
        assert log["docid"].duplicated().any()
    # the new batches hold judgments for exactly their encountered passages, copied with their grades
    b3_q1 = [x for x in b3 if x.topic == "q1"]
    copied = log[log["batch_id"].isin([x.batch_id for x in b3_q1])]
    enc_q1 = sorted(p for x in b3_q1 for p, n in zip(x.pids, x.new) if not n)
    assert enc_q1 and sorted(copied["docid"]) == enc_q1
    first = log.drop_duplicates("docid").set_index("docid")["grade"]
    assert (copied["grade"].to_numpy() == first.loc[copied["docid"]].to_numpy()).all()
    new = [p for x in b3 if x.topic == "q1" for p, n in zip(x.pids, x.new) if n]
    assert len(new) == len(set(new)) and not set(new) & set(q1)
    # the assessor table lists only what needs judging
    tab = batches_table(b3, assessor="A2")
    assert tab.num_rows == sum(int(x.new.sum()) for x in b3) and set(tab["assessor"].to_pylist()) == {"A2"}
    store.close()


def test_dry_run_and_inactive_threads(tmp_path):
    f, store, t, rel = _store_setup(tmp_path, 300)
    store.topics.set_thread_state("q2", "all", "accepted", "done")
    b, rep = issue_next_batches(store, f, dry_run=True, threads=["all"])
    assert [x.batch_id for x in b] == [None] and len(store.batches.all()) == 0
    assert rep.set_index("qid").loc["q2", "action"] == "accepted"
    store.close()


def test_cli_next_is_deterministic(tmp_path):
    outs = []
    for k in range(2):
        d = tmp_path / f"s{k}"
        d.mkdir()
        t, rel = _corpus(400)
        corpus = d / "corpus.jsonl"
        corpus.write_text("".join(json.dumps({"pid": p, "passage": x}) + "\n"
                                  for p, x in zip(t["pid"].to_pylist(), t["text"].to_pylist())))
        topics = d / "topics.tsv"
        topics.write_text("q1\tmango nectar\nq2\tlemon kiwi\n")
        assert run(["cal", "features", str(corpus), "-o", str(d / "camp.db.features")]) == 0
        assert run(["cal", "init", str(d / "camp.db"), "--topics", str(topics)]) == 0
        assert run(["cal", "next", str(d / "camp.db"), "-o", str(d / "b1.csv"), "--corpus", str(corpus),
                    "--assessor", "A1", "--seed", "4", "--json"]) == 0
        outs.append((d / "b1.csv").read_bytes())
        df = pd.read_csv(d / "b1.csv", dtype=str)
        assert len(df) == 150 and df["text"].str.len().min() > 0
        # fill grades and import them: the batch file is the import format
        df["grade"] = "0"
        df.to_csv(d / "b1-done.csv", index=False)
        assert run(["cal", "import", str(d / "camp.db"), str(d / "b1-done.csv")]) == 0
        assert run(["cal", "next", str(d / "camp.db"), "-o", str(d / "b2.parquet"), "--threads", "all,local"]) == 0
        assert set(pq.read_table(d / "b2.parquet")["thread"].to_pylist()) == {"all", "local"}
    assert outs[0] == outs[1]
    assert run(["cal", "next", str(tmp_path / "nope.db"), "-o", str(tmp_path / "x.csv")]) == 2
    assert run(["cal", "next", str(tmp_path / "s0" / "camp.db"), "-o", str(tmp_path / "x.csv"), "--threads", "bogus"]) == 2
    assert not (tmp_path / "x.csv").exists()


def test_score_kernel_with_wide_columns(monkeypatch):
    """More than 65535 columns: ids that do not fit in 16 bits are read from the int32 ids."""
    rng = np.random.default_rng(5)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, 7)) for _ in range(90000)]
    texts = [" ".join(vocab[i * 3:(i + 1) * 3] + ["common", "words"] + list(rng.choice(vocab[:50], 3)))
             for i in range(30000)]
    f = build_features(pa.table({"pid": [f"d{i}" for i in range(len(texts))], "text": texts}))
    assert f.n_terms > 65535 and (f.compact_indices() == 0xFFFF).any()
    w = rng.normal(size=f.n_terms).astype(np.float32)
    expect = f.matrix @ w.astype(np.float64)
    np.testing.assert_allclose(score(f, w), expect, rtol=1e-5, atol=1e-5)
    rows = np.arange(0, f.n_rows, 7)
    np.testing.assert_allclose(score(f, w, 0.0, rows), expect[rows], rtol=1e-5, atol=1e-5)
    # training rows are gathered from the 2-byte ids, wide ones from the int32 ids
    blk, ref = f.rows(rows[::-1]), f.matrix[rows[::-1]]
    assert (ref.indices >= 0xFFFF).any()
    assert np.array_equal(blk.indptr, ref.indptr) and np.array_equal(blk.indices, ref.indices)
    assert np.array_equal(blk.data, ref.data)
    import qrelkit.cal.scoring as scoring_mod

    serial = score(f, w)
    # several models in one pass: each column the one-model scores, bit for bit (wide ids too)
    W = np.stack([w, -w, rng.normal(size=f.n_terms).astype(np.float32)], axis=1)
    many = score_many(f, W, np.array([0.5, 0.0, -1.0], np.float32), rows)
    for t, b in enumerate((0.5, 0.0, -1.0)):
        assert np.array_equal(many[:, t].view(np.uint32), score(f, W[:, t], b, rows).view(np.uint32))
    monkeypatch.setattr(scoring_mod, "PARALLEL_MIN_NNZ", 0)  # the parallel kernels: the same floats
    assert np.array_equal(score(f, w), serial)
    assert np.array_equal(score(f, w, 0.0, rows), serial[rows])
    assert np.array_equal(score_many(f, W, np.array([0.5, 0.0, -1.0], np.float32), rows), many)


def test_rows_of_a_few_pids_and_many_agree(feats):
    """A few pids are looked up in a dict, many with index_in: the same rows, -1 for unknown ones."""
    ids = ["d0005", "nope", "d0599", "d0000", "d0005"]
    few = feats.rows_of(ids)
    assert few.tolist() == [5, -1, 599, 0, 5]
    assert np.array_equal(feats.rows_of(pa.array(ids)), few)
    many = [f"d{i:04d}" for i in range(0, 600, 3)] + ["x"]
    assert np.array_equal(feats.rows_of(many), feats.rows_of(pa.array(many)))
    assert feats.rows_of(many).tolist() == list(range(0, 600, 3)) + [-1]


def test_topics_computed_together_as_one_by_one(tmp_path):
    """A round of several topics (thread by thread across topics, models scored together) gives
    each topic the batches it gets when issued alone."""
    import shutil

    f, store, t, rel = _store_setup(tmp_path)
    params = CalParams(seed=4, batch_size=10)
    first, _ = issue_next_batches(store, f, params=params, fraction=0.5, fraction_seed=3)
    _judge(store, first, rel, t["pid"].to_pylist())
    store.close()
    for i in (1, 2):
        shutil.copy(tmp_path / "camp.db", tmp_path / f"copy{i}.db")
    together_store = open_store(tmp_path / "copy1.db")
    together, _ = issue_next_batches(together_store, f, params=params, fraction=0.5, fraction_seed=3)
    alone_store = open_store(tmp_path / "copy2.db")
    alone = [b for q in ("q1", "q2") for b in issue_next_batches(alone_store, f, topics=[q], params=params,
                                                                 fraction=0.5, fraction_seed=3)[0]]
    key = [(b.topic, b.thread, b.batch_id, tuple(b.pids), tuple(b.new.tolist())) for b in together]
    assert key == [(b.topic, b.thread, b.batch_id, tuple(b.pids), tuple(b.new.tolist())) for b in alone]
    assert len(together) == 6
    assert together_store.judgments.export_log().equals(alone_store.judgments.export_log())
    together_store.close()
    alone_store.close()
