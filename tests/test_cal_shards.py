"""The sharded feature store and sharded scoring (issue 15): the rows do not depend on the shard
size, old single-folder stores still load, and CAL batches are the same with one shard, with many,
and with the whole-collection scoring of the code before shards (written out here as the
reference), ties at the cut included."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from qrelkit.cal.features import build_features, load_features
from qrelkit.cal.loop import (
    CalParams, CalRanker, candidate_rows, fit_weights, fractional_candidates, issue_next_batches, iteration_seed, score,
    select_top,
)
from qrelkit.cal.scoring import LocalScorer
from qrelkit.cli import run
from qrelkit.errors import InputError
from qrelkit.io.tables import write_table

# words of letters only (the tokenizer drops digits by default)
WORDS = ["".join(chr(97 + (i * 7 + j * 3) % 26) for j in range(3 + i % 3)) for i in range(40)]


def corpus(n=2400, seed=5):
    """Short passages over a small vocabulary; 30% are exact copies of an earlier passage (same
    row, same score: ties), and ids are not in corpus order (ties are broken by id, not row)."""
    rng = np.random.default_rng(seed)
    texts: list[str] = []
    for i in range(n):
        if i > 10 and rng.random() < 0.3:
            texts.append(texts[int(rng.integers(0, i))])
        else:
            texts.append(" ".join(rng.choice(WORDS[: 25 + (i % 15)], size=int(rng.integers(3, 9)))))
    pids = [f"p{(i * 7919) % n:05d}" for i in range(n)]
    return pa.table({"pid": pids, "text": texts})


def classes_of(t: pa.Table) -> pa.Table:
    pids = t["pid"].to_pylist()
    return pa.table({"docid": [pids[i] for i in range(1, len(pids), 9)],
                     "class_id": [pids[i - 1] for i in range(1, len(pids), 9)]})


QUERY = " ".join(WORDS[i] for i in (3, 7, 11))


def _same_rows(a, b):
    for name in ("indptr", "indices", "data", "terms", "df", "idf"):
        assert np.array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name))), name
    assert np.array_equal(a.compact_indices(), b.compact_indices())
    assert a.pids.to_pylist() == b.pids.to_pylist()
    assert (a.canonical is None) == (b.canonical is None)
    if a.canonical is not None:
        assert np.array_equal(a.canonical, b.canonical)


def test_rows_do_not_depend_on_the_shard_size(tmp_path):
    t, cls = corpus(), classes_of(corpus())
    one = build_features(t, tmp_path / "one", classes=cls)
    many = build_features(t, tmp_path / "many", classes=cls, shard_size=250)
    mem = build_features(t, classes=cls, shard_size=333)
    assert len(one.shards) == 1 and len(many.shards) == 10 and len(mem.shards) == 8
    _same_rows(one, many)
    _same_rows(one, mem)
    meta = json.loads((tmp_path / "many" / "meta.json").read_text())
    assert meta["version"] == 3 and meta["shard_size"] == 250 and meta["rows"] == 2400
    assert [s["dir"] for s in meta["shards"]][:2] == ["shard-00000", "shard-00001"]
    assert [s["first_row"] for s in meta["shards"]] == list(range(0, 2400, 250))
    assert sum(s["nnz"] for s in meta["shards"]) == meta["nnz"] == one.nnz
    for name in ("indptr.npy", "indices.npy", "indices16.npy", "data.npy", "pids.arrow", "pid_hash.npy",
                 "pid_hash_rows.npy", "canonical.npy"):
        assert (tmp_path / "many" / "shard-00003" / name).is_file(), name
    # memory-mapped on read, ids read on first use
    g = load_features(tmp_path / "many", mmap=True)
    assert isinstance(g.shards[0].data, np.memmap) and g.shards[0].pid_array is None
    _same_rows(one, g)
    # by default, each shard reads what scoring reads into memory when first scored, while the
    # store's budget holds it; the rest stays mapped; the scores are the same
    from qrelkit.cal.loop import score

    w = np.linspace(-1, 1, one.n_terms).astype(np.float32)
    expect = score(g, w, 0.5)
    r = load_features(tmp_path / "many")
    assert all(isinstance(sh.data, np.memmap) for sh in r.shards)
    assert np.array_equal(score(r, w, 0.5), expect)
    for sh in r.shards:
        assert not isinstance(sh.data, np.memmap) and not isinstance(sh.indptr, np.memmap)
        assert not isinstance(sh.indices16, np.memmap) and isinstance(sh.indices, np.memmap)
    _same_rows(one, r)
    s0 = r.shards[0]
    per_shard = s0.indptr.nbytes + s0.indices16.nbytes + s0.data.nbytes
    few = load_features(tmp_path / "many", resident=per_shard)  # room for one shard only
    assert np.array_equal(score(few, w, 0.5), expect)
    assert [isinstance(sh.data, np.memmap) for sh in few.shards] == [False] + [True] * (len(few.shards) - 1)
    import pickle

    again = pickle.loads(pickle.dumps(load_features(tmp_path / "many")))  # a budget's lock does not travel
    assert np.array_equal(score(again, w, 0.5), expect)
    mapped = load_features(tmp_path / "many", mmap=True)
    assert np.array_equal(score(mapped, w, 0.5), expect) and all(isinstance(sh.data, np.memmap) for sh in mapped.shards)
    assert all(not isinstance(sh.indices, np.memmap) for sh in load_features(tmp_path / "many", mmap=False).shards)
    probe = t["pid"].to_pylist()[::7] + ["nope", "p00007x", ""]
    assert g.rows_of(probe).tolist() == one.rows_of(probe).tolist() == mem.rows_of(probe).tolist()
    assert g.rows_of(probe).tolist()[:3] == [0, 7, 14] and g.rows_of(probe).tolist()[-3:] == [-1, -1, -1]
    assert g.pid_list([2399, 0, 1000]) == [t["pid"][i].as_py() for i in (2399, 0, 1000)]
    # the store can be moved: shard folders are relative
    (tmp_path / "many").rename(tmp_path / "moved")
    _same_rows(one, load_features(tmp_path / "moved"))


def test_gathered_and_scored_rows_across_shards():
    t = corpus()
    one, many = build_features(t), build_features(t, shard_size=97)
    rows = np.array([5, 2399, 0, 96, 97, 1500, 5])
    a, b = one.rows(rows), many.rows(rows)
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices) and np.array_equal(a.data, b.data)
    w = np.random.default_rng(1).normal(size=one.n_terms).astype(np.float32)
    assert np.array_equal(score(one, w, 0.5), score(many, w, 0.5))
    assert np.array_equal(score(one, w, 0.5, rows), score(many, w, 0.5, rows))


def _reference_batch(rk: CalRanker, train_rows, train_rel, skip_rows, k, iteration, known_rows):
    """``CalRanker.next_batch`` as it was before shards: one score array over every candidate,
    one selection over it (``select_top``), positions into the candidate array."""
    f, p = rk.features, rk.params
    cand = rk.candidates
    pos_of = (lambda r: np.asarray(r, np.int64)) if cand is None else (
        lambda r: np.array([int(np.flatnonzero(cand == x)[0]) if (cand == x).any() else -1 for x in r], np.int64))
    skip_pos = pos_of(skip_rows) if len(skip_rows) else np.zeros(0, np.int64)
    skip_pos = skip_pos[skip_pos >= 0]
    known_pos = pos_of(known_rows)
    known_pos = np.setdiff1d(known_pos[known_pos >= 0], skip_pos)
    ss = iteration_seed(p.seed, rk.topic, rk.thread, iteration)
    neg = rk.sample_negatives(np.random.default_rng(ss), np.concatenate([skip_pos, known_pos]), p.negatives)
    block = f.rows(np.concatenate([train_rows, neg])).stack(rk.qvec)
    y = np.concatenate([np.asarray(train_rel, np.int8), np.zeros(len(neg), np.int8), np.ones(1, np.int8)])
    w, b, _ = fit_weights(block, y, C=p.C, class_weight=p.class_weight,
                          random_state=int(ss.generate_state(1)[0] & 0x7FFFFFFF), n_terms=f.n_terms)
    sc = score(f, w, b, cand)
    sc[skip_pos] = -np.inf
    sel = select_top(sc, k + len(known_pos), f.pids, cand)
    new = ~np.isin(sel, known_pos)
    cut = np.flatnonzero(np.cumsum(new) >= k)
    if len(cut):
        sel, new = sel[: cut[0] + 1], new[: cut[0] + 1]
    rows = sel if cand is None else cand[sel]
    return f.pid_list(rows), sc[sel].copy(), new, sc


def _run(f, cand, thread, *, reference=False, scorer=None, known=False, iterations=5):
    rk = CalRanker(f, QUERY, topic="t1", thread=thread, candidates=cand, params=CalParams(seed=2), scorer=scorer)
    judged = np.zeros(0, np.int64)
    out, ties_at_cut = [], 0
    for it in range(1, iterations + 1):
        kn = judged[::3] if known else np.zeros(0, np.int64)
        train = np.setdiff1d(judged, kn)
        rel = (train % 5 == 0) | np.isin(train, judged[:4])
        k = 20 + it
        if reference:
            pids, sc, new, allsc = _reference_batch(rk, train, rel, train, k, it, kn)
            last = sc[-1] if len(sc) else None
            ties_at_cut += int(last is not None and (allsc == last).sum() > (sc == last).sum())
        else:
            b = rk.next_batch(train, rel, train, k, it, known_rows=kn)
            pids, sc, new = b.pids, b.scores, b.new
        rows = f.rows_of(pids)
        judged = np.concatenate([judged, rows[np.asarray(new, bool)]])
        out.append((list(pids), np.asarray(sc, np.float32).tobytes(), np.asarray(new, bool).tolist()))
    return out, ties_at_cut


@pytest.mark.parametrize("shard_size", [None, 97, 1000])
def test_batches_identical_to_whole_collection_scoring(shard_size):
    t = corpus()
    one = build_features(t, classes=classes_of(t))
    f = build_features(t, classes=classes_of(t), shard_size=shard_size)
    cases = [(None, "all", False), (candidate_rows(f), "local", False),
             (fractional_candidates(f, 0.3, 4), "fractional", False), (candidate_rows(f), "local", True)]
    ties = 0
    for cand, thread, known in cases:
        ref, n_ties = _run(one, cand, thread, reference=True, known=known)
        ties += n_ties
        assert _run(one, cand, thread, known=known)[0] == ref, (thread, known, "one shard")
        assert _run(f, cand, thread, known=known)[0] == ref, (thread, known, shard_size)
    assert ties > 0  # some batch ends inside a group of tied scores: the tie rule decided it


def test_unsorted_candidates_are_the_same_set():
    """Candidates given in any order: the same batches (negatives are drawn by position, so the
    order given is kept for them)."""
    t = corpus()
    one, many = build_features(t), build_features(t, shard_size=150)
    cand = np.random.default_rng(3).permutation(one.n_rows)[:1500]
    a = _run(one, cand, "all", reference=True)[0]
    assert _run(many, cand, "all")[0] == a


def _write_single_folder(f, folder, classes_rows=None):
    """A features folder as qrelkit wrote it before shards (format version 2)."""
    folder.mkdir()
    for name in ("indptr", "indices", "data", "terms", "df", "idf"):
        np.save(folder / f"{name}.npy", np.asarray(getattr(f, name)))
    np.save(folder / "indices16.npy", f.compact_indices())
    if classes_rows is not None:
        np.save(folder / "classes.npy", classes_rows)
    meta = {"format": "qrelkit-cal-features", "version": 2, "rows": f.n_rows, "terms": f.n_terms, "nnz": f.nnz,
            "normalization": f.norm.as_dict(), "params": f.params}
    write_table(pa.table({"pid": f.pids}), folder / "pids.parquet", kind="cal-features-pids", params=meta)
    (folder / "meta.json").write_text(json.dumps(meta))


def test_single_folder_stores_still_load(tmp_path):
    t = corpus()
    cls = classes_of(t)
    f = build_features(t, classes=cls)
    canon_row = f.rows_of(pa.array(dict(zip(cls["docid"].to_pylist(), cls["class_id"].to_pylist())).get(p, p)
                                   for p in t["pid"].to_pylist()))
    _write_single_folder(f, tmp_path / "old", canon_row)
    g = load_features(tmp_path / "old")
    assert len(g.shards) == 1
    _same_rows(f, g)
    assert _run(g, candidate_rows(g), "local")[0] == _run(f, candidate_rows(f), "local")[0]


@pytest.mark.parametrize("change,expect", [
    (lambda p: (p / "meta.json").write_text(json.dumps({"format": "qrelkit-cal-features", "version": 1})), "v1"),
    (lambda p: (p / "meta.json").write_text("{"), "unreadable meta.json"),
    (lambda p: __import__("shutil").rmtree(p / "shard-00001"), "shard-00001"),
])
def test_bad_stores_fail_with_one_clear_line(tmp_path, change, expect):
    build_features(corpus(600), tmp_path / "f", shard_size=250)
    change(tmp_path / "f")
    with pytest.raises(InputError) as e:
        load_features(tmp_path / "f")
    assert e.value.rule == "not-features" and expect in str(e.value) and str(tmp_path / "f") in str(e.value)


def test_duplicate_ids_across_shards(tmp_path):
    t = corpus(600)
    pids = t["pid"].to_pylist()
    pids[500] = pids[3]  # shard 0 and shard 2
    with pytest.raises(InputError) as e:
        build_features(t.set_column(0, "pid", pa.array(pids)), tmp_path / "f", shard_size=200)
    assert e.value.rule == "duplicate-id" and pids[3] in str(e.value)
    assert list(tmp_path.iterdir()) == []  # nothing left behind


def test_id_lookup_survives_hash_collisions(monkeypatch):
    """Ids are found by their hash, then compared: two ids with one hash are told apart."""
    import qrelkit.cal.features as features_mod
    import qrelkit.cal.shards as shards_mod

    def coarse(pids):  # 4 hash values for every id: collisions everywhere
        return shards_mod.pid_hashes(pids) % np.uint64(4)

    monkeypatch.setattr(features_mod, "pid_hashes", coarse)
    t = corpus(300)
    f = build_features(t, shard_size=70)
    ids = t["pid"].to_pylist()
    for probe in (ids[::-3] + ["nope"], ids + ids[:50] + ["nope", "x"]):  # fewer, then more ids than a shard's rows
        assert f.rows_of(probe).tolist() == [ids.index(p) if p in ids else -1 for p in probe]


def test_universe_and_hashing(tmp_path):
    t = corpus(800)
    keep = t["pid"].to_pylist()[::2]
    a = build_features(t, universe=keep)
    b = build_features(t, tmp_path / "u", universe=keep, shard_size=64)
    _same_rows(a, b)
    h = build_features(t, tmp_path / "h", shard_size=300, hashing=7)
    assert h.n_terms <= 7 and int(np.asarray(h.terms).max()) < 7
    g = load_features(tmp_path / "h")
    assert g.hashing == 7 and json.loads((tmp_path / "h" / "meta.json").read_text())["hashing"] == 7
    q = g.featurize([t["text"][0].as_py()])  # the query's words fall into the stored buckets
    r = g.rows([0])
    assert np.array_equal(q.indices, r.indices) and np.allclose(q.data, r.data)
    exact = build_features(t)
    wide = build_features(t, hashing=1 << 40)  # more buckets than words: no two words share a column
    assert wide.n_terms == exact.n_terms and wide.nnz == exact.nnz and np.array_equal(wide.df, exact.df)


def test_store_batches_same_with_shards(tmp_path):
    from qrelkit.store import init_store

    t = corpus(1500)
    out = []
    for name, size in (("one", None), ("many", 128)):
        f = build_features(t, tmp_path / f"{name}.features", classes=classes_of(t), shard_size=size)
        st = init_store(tmp_path / f"{name}.db", {"t1": QUERY, "t2": " ".join(WORDS[20:23])})
        got = []
        for _ in range(3):
            bs, _rep = issue_next_batches(st, f, params=CalParams(seed=1), fraction=0.3, fraction_seed=4,
                                          scorer=LocalScorer(f))
            got += [(b.batch_id, b.pids, b.scores.tobytes(), b.new.tolist()) for b in bs]
            st.judgments.import_judgments(pd.DataFrame([{"qid": b.topic, "docid": p, "assessor": "A", "grade": int(p[1:]) % 4,
                                                         "batch_id": b.batch_id} for b in bs for p, n in zip(b.pids, b.new) if n]))
        out.append((got, st.judgments.export_log().to_pylist()))
        st.close()
    assert out[0] == out[1] and len(out[0][0]) == 18


def test_cli_shard_size_and_hashing(tmp_path):
    t = corpus(500)
    c = tmp_path / "corpus.jsonl"
    c.write_text("".join(json.dumps({"pid": p, "passage": x}) + "\n" for p, x in zip(t["pid"].to_pylist(),
                                                                                      t["text"].to_pylist())))
    assert run(["cal", "features", str(c), "-o", str(tmp_path / "f"), "--shard-size", "120", "--json"]) == 0
    meta = json.loads((tmp_path / "f" / "meta.json").read_text())
    assert len(meta["shards"]) == 5 and meta["hashing"] is None
    cfg = tmp_path / "p.toml"
    cfg.write_text("[cal]\nshard_size = 200\nhashing = 4096\n")
    assert run(["cal", "features", str(c), "-o", str(tmp_path / "g"), "-c", str(cfg)]) == 0
    meta = json.loads((tmp_path / "g" / "meta.json").read_text())
    assert len(meta["shards"]) == 3 and meta["hashing"] == 4096
    assert run(["cal", "features", str(c), "-o", str(tmp_path / "x"), "--shard-size", "0"]) == 2
    assert not (tmp_path / "x").exists()


def test_campaign_runs_unchanged_on_shards(tmp_path):
    """A campaign whose features are cut in shards ([cal] shard_size) gives the same outputs."""
    from pathlib import Path

    from qrelkit.campaign import Campaign

    root = Path(__file__).resolve().parents[1]
    sim = tmp_path / "sim"
    assert run(["simulate", "campaign", "-o", str(sim), "--passages", "1500", "--topics", "3", "--groups", "3",
                "--seed", "1"]) == 0
    text = (root / "configs" / "trec-dl-2022.toml").read_text()
    assert "\n[cal]\n" in text
    sharded = tmp_path / "sharded.toml"
    sharded.write_text(text.replace("\n[cal]\n", "\n[cal]\nshard_size = 400\n"))
    outs = []
    for name, cfg in (("default", root / "configs" / "trec-dl-2022.toml"), ("sharded", sharded)):
        d = tmp_path / name
        assert run(["campaign", "init", str(d), "-c", str(cfg), "--corpus", str(sim / "corpus.jsonl"), "-t",
                    str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")]) == 0
        assert Campaign(d).run(oracle=sim / "qrels.txt", error_rate=0.1, seed=7)["state"] == "done"
        outs.append([(d / f).read_bytes() for f in ("qrels-passages.txt", "leaderboard.csv")])
        shards = json.loads(next(d.rglob("features/meta.json")).read_text())["shards"]
        assert len(shards) == (1 if name == "default" else 4)
    assert outs[0] == outs[1]


def test_four_row_kernels_give_each_row_its_own_sum(monkeypatch):
    """Rows are scored four at a time, each in its own accumulator: every score is bit for bit
    the row summed alone in column order (wide rows, and counts that are not multiples of 4)."""
    import qrelkit.cal.scoring as scoring

    rng = np.random.default_rng(4)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, 6)) for _ in range(70000)]
    texts = [" ".join(vocab[i * 3:(i + 1) * 3] + list(rng.choice(vocab[:40], int(rng.integers(0, 9)))))
             for i in range(23333)]
    f = build_features(pa.table({"pid": [f"d{i}" for i in range(len(texts))], "text": texts}), shard_size=5001)
    w = rng.normal(size=f.n_terms).astype(np.float32)
    b = np.float32(0.125)
    ip, ix, da = np.asarray(f.indptr), np.asarray(f.indices), np.asarray(f.data)
    assert (ix >= 0xFFFF).any()

    def alone(r):
        s = np.float32(0.0)
        for j in range(ip[r], ip[r + 1]):
            s = np.float32(s + np.float32(da[j] * w[ix[j]]))
        return np.float32(s + b)

    rows = np.sort(rng.choice(f.n_rows, 2003, replace=False))
    expect = np.array([alone(r) for r in rows], np.float32)
    wide_rows = [r for r in rows if (ix[ip[r]:ip[r + 1]] >= 0xFFFF).any()]
    assert wide_rows and len(wide_rows) < len(rows)
    for parallel_min in (scoring.PARALLEL_MIN_NNZ, 0):  # serial, then parallel kernels
        monkeypatch.setattr(scoring, "PARALLEL_MIN_NNZ", parallel_min)
        assert np.array_equal(score(f, w, b)[rows].view(np.uint32), expect.view(np.uint32))
        assert np.array_equal(score(f, w, b, rows).view(np.uint32), expect.view(np.uint32))


def _models(n_terms, n, seed=3):
    """``n`` sparse models (w, b, cols) with few columns, some with tied scores (one column)."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(n):
        cols = np.sort(rng.choice(n_terms, size=1 if t % 5 == 0 else min(n_terms, 12), replace=False))
        w = np.zeros(n_terms, np.float32)
        w[cols] = rng.normal(size=len(cols)).astype(np.float32)
        out.append((w, float(rng.normal()), cols))
    return out


@pytest.mark.parametrize("shard_size", [None, 97])
def test_top_many_is_top_model_by_model(shard_size):
    """Several models scored in one pass per shard (a CAL round's topics of one thread) give each
    model the candidates that scoring it alone gives, across shards, skips and batch sizes; more
    models than SCORE_GROUP go in several groups; score_many is score's floats, bit for bit."""
    from qrelkit.cal.scoring import SCORE_GROUP, Candidates, score_many

    t = corpus()
    f = build_features(t, classes=classes_of(t), shard_size=shard_size)
    cands = Candidates(f, candidate_rows(f))
    n = SCORE_GROUP + 3
    models = _models(f.n_terms, n)
    rng = np.random.default_rng(4)
    skips = [np.unique(rng.choice(cands.rows, size=40 * (t % 3), replace=False)) for t in range(n)]
    ks = [5 + 7 * (t % 4) for t in range(n)]
    sc = LocalScorer(f)
    many = sc.top_many(models, cands, skips, ks)
    assert len(many) == n
    for (w, b, cols), skip, k, got in zip(models, skips, ks, many):
        one = sc.top(w, b, cols, cands, skip, k)
        assert got.pids == one.pids and np.array_equal(got.rows, one.rows)
        assert got.scores.tobytes() == one.scores.tobytes()
    W = np.stack([m[0] for m in models[:4]], axis=1)
    bs = np.array([m[1] for m in models[:4]], np.float32)
    rows = np.array([5, 2399, 0, 96, 97, 1500, 5])
    for r in (None, rows):
        got = score_many(f, W, bs, r)
        for j in range(4):
            assert got[:, j].tobytes() == score(f, W[:, j], bs[j], r).tobytes()
