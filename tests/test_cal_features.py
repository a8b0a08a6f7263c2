"""CAL features: BMI weights against a pure-Python reference, chunking, storage, featurizing."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from qrelkit.cal.features import build_features, load_features, save_features
from qrelkit.cli import run
from qrelkit.dedupe.tokenize import Normalization, word_hash, words
from qrelkit.errors import InputError

TEXTS = [
    "The cat sat on the mat. The cat!",
    "A dog <b>barked</b> at the cat",
    "",
    "Zebras graze; zebras run. Café crème brûlée",
    "the the the the",
    "dog dog cat 42 mat",
]


def _table(texts=TEXTS, prefix="p"):
    return pa.table({"pid": [f"{prefix}{i}" for i in range(len(texts))], "text": texts})


def _reference(texts, norm=Normalization()):
    """{row: {word_hash: weight}} computed in plain Python from the documented formula."""
    bags = [Counter(word_hash(w.encode()) for w in words(t, norm)) for t in texts]
    n = len(texts)
    df = Counter(h for b in bags for h in b)
    out = []
    for b in bags:
        v = {h: (1 + math.log(tf)) * math.log(n / df[h]) for h, tf in b.items()}
        norm2 = math.sqrt(sum(x * x for x in v.values()))
        out.append({h: x / norm2 for h, x in v.items()} if norm2 > 0 else v)
    return out


def _as_dicts(f):
    rows = []
    for r in range(f.n_rows):
        a, b = f.indptr[r], f.indptr[r + 1]
        rows.append({int(f.terms[c]): float(v) for c, v in zip(f.indices[a:b], f.data[a:b])})
    return rows


def test_weights_match_reference():
    f = build_features(_table())
    ref = _reference(TEXTS)
    got = _as_dicts(f)
    assert f.n_rows == len(TEXTS) and f.data.dtype == np.float32 and f.indices.dtype == np.int32
    for r, (g, e) in enumerate(zip(got, ref)):
        assert set(g) == set(e), r
        for h in e:
            assert g[h] == pytest.approx(e[h], rel=1e-5, abs=1e-6), (r, h)
    # unit L2 norm for rows with any non-zero weight; the empty passage is an empty row
    for r, g in enumerate(got):
        s = sum(v * v for v in g.values())
        assert s == pytest.approx(1.0, rel=1e-5) or s == 0.0
    assert f.indptr[3] == f.indptr[2]
    # idf = ln(N / df)
    cat = word_hash(b"cat")
    col = int(np.flatnonzero(f.terms == np.uint64(cat))[0])
    assert f.df[col] == 3 and f.idf[col] == pytest.approx(math.log(6 / 3), rel=1e-6)


def test_chunks_and_order_independent_of_chunking():
    whole = build_features(_table())
    parts = [_table().slice(0, 2), _table().slice(2, 1), _table().slice(3)]
    chunked = build_features(iter(parts))
    for name in ("indptr", "indices", "data", "terms", "df", "idf"):
        assert np.array_equal(getattr(whole, name), getattr(chunked, name)), name
    assert whole.pids.equals(chunked.pids)


def test_vocabulary_grows_past_initial_table():
    # more distinct words than the initial hash table holds forces several resizes
    texts = [" ".join(f"w{chr(97 + i % 26)}{chr(97 + (i // 26) % 26)}{chr(97 + (i // 676) % 26)}x{j}" for j in range(3))
             for i in range(40000)]
    texts = [t.replace("0", "a").replace("1", "b").replace("2", "c") for t in texts]
    f = build_features(_table(texts))
    assert f.n_terms == len(set(w for t in texts for w in t.split()))
    assert len(np.unique(f.terms)) == f.n_terms


def test_save_load_mmap_roundtrip(tmp_path):
    f = build_features(_table(), tmp_path / "feats", params={"corpus": "x"})
    g = load_features(tmp_path / "feats", mmap=True)
    assert isinstance(g.data, np.memmap)
    for name in ("indptr", "indices", "data", "terms", "df", "idf"):
        assert np.array_equal(np.asarray(getattr(f, name)), np.asarray(getattr(g, name))), name
    assert g.pids.to_pylist() == [f"p{i}" for i in range(len(TEXTS))]
    meta = json.loads((tmp_path / "feats" / "meta.json").read_text())
    assert meta["rows"] == len(TEXTS) and meta["params"]["corpus"] == "x"
    # rebuilding writes byte-identical files (no time stamps)
    build_features(_table(), tmp_path / "feats2", params={"corpus": "x"})
    for name in ("shard-00000/indptr.npy", "shard-00000/indices.npy", "shard-00000/data.npy", "meta.json",
                 "shard-00000/pids.arrow", "shard-00000/pid_hash.npy", "terms.npy", "idf.npy"):
        assert (tmp_path / "feats" / name).read_bytes() == (tmp_path / "feats2" / name).read_bytes(), name
    # overwriting a features folder is fine; overwriting anything else is not
    save_features(g, tmp_path / "feats")
    (tmp_path / "other").mkdir()
    with pytest.raises(InputError) as e:
        save_features(f, tmp_path / "other")
    assert e.value.rule == "not-features"
    with pytest.raises(InputError) as e:
        load_features(tmp_path / "other")
    assert e.value.rule == "not-features"


def test_featurize_uses_stored_vocabulary_and_idf(tmp_path):
    f = build_features(_table(), tmp_path / "f")
    g = load_features(tmp_path / "f")
    v = g.featurize([TEXTS[0], "unknownword cat", "nothingknown"])
    a, b = f.indptr[0], f.indptr[1]
    row0 = dict(zip(f.indices[a:b].tolist(), f.data[a:b].tolist()))
    q0 = dict(zip(v.indices[v.indptr[0]:v.indptr[1]].tolist(), v.data[v.indptr[0]:v.indptr[1]].tolist()))
    assert row0 == pytest.approx(q0)
    cat = int(np.flatnonzero(f.terms == np.uint64(word_hash(b"cat")))[0])
    assert v.indices[v.indptr[1]:v.indptr[2]].tolist() == [cat]  # the unknown word is dropped
    assert v.data[v.indptr[1]] == pytest.approx(1.0)
    assert v.indptr[3] == v.indptr[2]  # nothing known: an empty row


def test_universe_classes_rows_of():
    cls = pa.table({"docid": ["p1", "p5"], "class_id": ["p0", "p0"]})
    f = build_features(_table(), universe=["p0", "p1", "p4", "p5", "nope"], classes=cls)
    assert f.pids.to_pylist() == ["p0", "p1", "p4", "p5"]
    assert f.canonical.tolist() == [True, False, True, False]  # p1 and p5 are members of p0's class
    assert f.rows_of(["p5", "p2", "p0"]).tolist() == [3, -1, 0]
    # idf is that of the universe (4 passages)
    cat = int(np.flatnonzero(f.terms == np.uint64(word_hash(b"cat")))[0])
    assert f.idf[cat] == pytest.approx(math.log(4 / 3), rel=1e-6)


def test_duplicate_pid_is_an_error():
    t = pa.table({"pid": ["a", "b", "a"], "text": ["x", "y", "z"]})
    with pytest.raises(InputError) as e:
        build_features(t)
    assert e.value.rule == "duplicate-id"


def test_normalization_follows_tokenizer():
    t = pa.table({"pid": ["a", "b"], "text": ["Route 66 <i>west</i>", "route sixty six"]})
    f = build_features(t, norm=Normalization(keep_digits=True, strip_html=False))
    hs = {int(h) for h in f.terms}
    assert word_hash(b"66") in hs and word_hash(b"i") in hs
    g = build_features(t)
    assert word_hash(b"66") not in {int(h) for h in g.terms}


def test_cli_features(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"pid": f"p{i}", "passage": t}) + "\n" for i, t in enumerate(TEXTS)))
    classes = tmp_path / "cls.tsv"
    classes.write_text("p0 p0\np0 p1\n")
    out = tmp_path / "store.db.features"
    assert run(["cal", "features", str(corpus), "--classes", str(classes), "-o", str(out), "--json"]) == 0
    f = load_features(out)
    assert f.n_rows == len(TEXTS) and f.canonical.tolist()[:2] == [True, False]
    assert run(["cal", "features", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()


def test_featurize_few_and_many_texts_agree():
    """A few texts go through the tokenizer's reference path, many through its kernels: the same
    vectors either way."""
    f = build_features(_table())
    many = TEXTS * 4
    big = f.featurize(many)
    for i, t in enumerate(TEXTS):
        small = f.featurize([t])
        a, b = big.indptr[i], big.indptr[i + 1]
        assert big.indices[a:b].tolist() == small.indices.tolist()
        np.testing.assert_array_equal(big.data[a:b], small.data)


def test_columns_by_df_rows_sorted_and_corpus_order_irrelevant():
    f = build_features(_table())
    assert (np.diff(f.df) <= 0).all()  # columns by document frequency, descending
    for r in range(f.n_rows):
        seg = f.indices[f.indptr[r]:f.indptr[r + 1]]
        assert (np.diff(seg) > 0).all()
    perm = [3, 0, 5, 1, 4, 2]
    g = build_features(_table().take(perm))
    assert np.array_equal(f.terms, g.terms) and np.array_equal(f.idf, g.idf)
    for i, r in enumerate(perm):
        a, b = f.indptr[r], f.indptr[r + 1]
        c, d = g.indptr[i], g.indptr[i + 1]
        assert np.array_equal(f.indices[a:b], g.indices[c:d]) and np.array_equal(f.data[a:b], g.data[c:d])
