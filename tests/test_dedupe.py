"""Near-duplicate clustering: datasketch parity, normalization, edge cases, modes, uses."""

from __future__ import annotations

import datasketch
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qrelkit.dedupe import DedupeParams, Normalization, cluster_corpus, shingle_hash, shingles, words
from qrelkit.dedupe.apply import expansion_table, label_class_members
from qrelkit.dedupe.lsh import s_curve
from qrelkit.dedupe.minhash import signatures


def corpus(texts, ids=None):
    ids = ids or [f"p{i:04d}" for i in range(len(texts))]
    return pa.table({"pid": ids, "text": texts})


def classes_of(res):
    return dict(zip(res.classes["docid"].to_pylist(), res.classes["class_id"].to_pylist()))


WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCXYZ0123456789 .,;<>-éßü—“”\t", min_size=0, max_size=200)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(WORDS, min_size=1, max_size=5), n=st.integers(1, 5), seed=st.integers(0, 2**31 - 1),
       digits=st.booleans())
def test_signatures_equal_datasketch(texts, n, seed, digits):
    norm = Normalization(keep_digits=digits)
    sig, nwords = signatures(pa.array(texts), num_perm=32, seed=seed, ngram=n, norm=norm)
    for text, row, nw in zip(texts, sig, nwords):
        m = datasketch.MinHash(num_perm=32, seed=seed, hashfunc=shingle_hash)
        for sh in shingles(text, n, norm):
            m.update(sh)
        assert np.array_equal(m.hashvalues, row)
        assert nw == len(words(text, norm))


PIECES = st.sampled_from([
    " ", "  ", "\t", "\n", ".", ",", "-", "'", "=", '"', "<", ">", "/", "!", "<!--", "-->", "<b>", "</P>", "<br/>",
    "<a href='x>y'>", '<div class="a<b">', "<!DOCTYPE html>", "<xyzzy>", "<3", "<p", "a", "Word", "x1", "42", "é",
    "Straße", "ÉCOLE", "中文字", "😀", "—", "“", "\u00a0", "İ", "ﬁ", "١٢", "\u200b", "ＡＢＣ", "𝔘", "\U0010ffff"])


@settings(max_examples=80, deadline=None)
@given(pieces=st.lists(st.lists(PIECES, max_size=40).map("".join), min_size=1, max_size=6), n=st.integers(1, 4),
       lower=st.booleans(), strip_html=st.booleans(), digits=st.booleans())
def test_kernel_words_are_the_reference_words(pieces, n, lower, strip_html, digits):
    """The signing kernel reads plain bytes straight and the rest (tags, UTF-8) through its codes:
    the same words, signatures and shingles as the reference path (:func:`words`, datasketch)."""
    norm = Normalization(lower=lower, strip_html=strip_html, keep_digits=digits)
    sig, nwords, (starts, vals) = signatures(pa.array(pieces), num_perm=16, seed=3, ngram=n, norm=norm,
                                             keep_shingles=True)
    for p, (text, row) in enumerate(zip(pieces, sig)):
        m = datasketch.MinHash(num_perm=16, seed=3, hashfunc=shingle_hash)
        sh = shingles(text, n, norm)
        for s in sh:
            m.update(s)
        assert np.array_equal(m.hashvalues, row) and nwords[p] == len(words(text, norm)), text
        assert starts[p + 1] - starts[p] == len(sh)


def test_normalization():
    assert words("Hello, <b>World</b>! It's 2024.") == ["hello", "world", "it", "s"]
    assert words("Hello, <b>World</b>!", Normalization(strip_html=False)) == ["hello", "b", "world", "b"]
    assert words("abc 123 x4y", Normalization(keep_digits=True)) == ["abc", "123", "x4y"]
    assert words("abc 123 x4y") == ["abc", "x", "y"]
    assert words("ÉCOLE — “Straße” naïve") == ["école", "straße", "naïve"]
    assert words("Keep Case", Normalization(lower=False)) == ["Keep", "Case"]
    assert words("a < b and c > d") == ["a", "b", "and", "c", "d"]  # not a tag: no element name after '<'
    assert words("a < b") == ["a", "b"]
    assert shingles("one two", 3) == [b"one two"]
    assert shingles("...", 3) == []


def test_s_curve_monotone():
    c = s_curve(32, 4)
    vals = list(c.values())
    assert vals == sorted(vals) and c[0.8] > 0.999


def test_case_and_punctuation_copies_merged_empty_is_own_class():
    base = "the quick brown fox jumps over the lazy dog near the river bank today"
    texts = [base, base.upper(), base.replace(" ", ", ") + "!!!", "<p>" + base + "</p>", "", "", "totally different words here"]
    res = cluster_corpus(corpus(texts))
    c = classes_of(res)
    assert c["p0001"] == c["p0002"] == c["p0003"] == "p0000"
    assert c["p0004"] == "p0004" and c["p0005"] == "p0005"  # each empty passage alone
    assert c["p0006"] == "p0006"


def test_eight_word_passages_not_merged_unless_duplicates():
    rng = np.random.default_rng(0)
    vocab = [f"w{chr(97 + i % 26)}{chr(97 + (i // 26) % 26)}" for i in range(2000)]
    texts = [" ".join(rng.choice(vocab, 8)) for _ in range(300)]
    texts.append(texts[5].upper())  # a real copy
    res = cluster_corpus(corpus(texts))
    sizes = pc.value_counts(res.classes["class_id"]).field("counts").to_numpy()
    assert sizes.max() == 2 and (sizes == 2).sum() == 1
    assert classes_of(res)[f"p{300:04d}"] == "p0005"


def _w(prefix, i):  # letters only: digits are not words by default
    return prefix + chr(97 + i // 26) + chr(97 + i % 26)


def _chain():
    a = [_w("alpha", i) for i in range(100)]
    b = a[:40] + [_w("beta", i) for i in range(20)] + a[60:]
    c = b[:60] + [_w("gamma", i) for i in range(20)] + b[80:]
    return [" ".join(x) for x in (a, b, c)]


def test_components_linkage_and_greedy_modes():
    # J(A,B) = J(B,C) = 0.63, J(A,C) = 0.40
    params = dict(num_perm=256, bands=64, rows=4, threshold=0.52)
    single = classes_of(cluster_corpus(corpus(_chain()), DedupeParams(linkage="single", **params)))
    assert single == {"p0000": "p0000", "p0001": "p0000", "p0002": "p0000"}  # transitive
    # canonical linkage: B, the near-duplicate of both, is the canonical; A and C each pass it
    canon = classes_of(cluster_corpus(corpus(_chain()), DedupeParams(**params)))
    assert canon == {"p0000": "p0001", "p0001": "p0001", "p0002": "p0001"}
    chain4 = _chain() + [" ".join(_chain()[2].split()[:80] + [_w("delta", i) for i in range(20)])]
    canon4 = classes_of(cluster_corpus(corpus(chain4), DedupeParams(**params)))
    assert canon4 == {"p0000": "p0001", "p0001": "p0001", "p0002": "p0001", "p0003": "p0003"}  # D is far from B
    greedy = classes_of(cluster_corpus(corpus(_chain()), DedupeParams(mode="greedy", **params)))
    assert greedy == {"p0000": "p0000", "p0001": "p0000", "p0002": "p0002"}  # A claims B, not C


def test_exact_verification():
    params = dict(num_perm=256, bands=64, rows=4)
    ex = classes_of(cluster_corpus(corpus(_chain()), DedupeParams(verify="exact", threshold=0.55, linkage="single", **params)))
    assert ex["p0001"] == "p0000" and ex["p0002"] == "p0000"
    ex = classes_of(cluster_corpus(corpus(_chain()), DedupeParams(verify="exact", threshold=0.55, **params)))
    assert ex == {"p0000": "p0001", "p0001": "p0001", "p0002": "p0001"}
    ex = classes_of(cluster_corpus(corpus(_chain()), DedupeParams(verify="exact", threshold=0.7, **params)))
    assert ex == {"p0000": "p0000", "p0001": "p0001", "p0002": "p0002"}


def test_canonical_priority():
    base = "one two three four five six seven eight nine ten eleven twelve"
    res = cluster_corpus(corpus([base, base + ".", base + "!"]), DedupeParams(canonical="priority"), priority={"p0002"})
    assert set(classes_of(res).values()) == {"p0002"}
    res = cluster_corpus(corpus([base, base + "."]), DedupeParams(canonical="priority"), priority={"x"})
    assert set(classes_of(res).values()) == {"p0000"}


def test_duplicate_ids_rejected():
    from qrelkit.errors import InputError

    with pytest.raises(InputError) as e:
        cluster_corpus(corpus(["a b c", "d e f"], ids=["x", "x"]))
    assert e.value.rule == "duplicate-id"


def test_label_class_members_and_table():
    classes = pa.table({"docid": ["a", "a1", "a2", "b", "b1", "c"], "class_id": ["a", "a", "a", "b", "b", "c"]})
    qrels = pa.table({"qid": ["1", "1", "1", "2", "2"], "docid": ["a", "b1", "c", "a2", "b"],
                      "rel": pa.array([2, 1, -1, 3, 0], pa.int32())})
    ex, conflicts = label_class_members(qrels, classes)
    got = {(q, d): r for q, d, r in zip(ex["qid"].to_pylist(), ex["docid"].to_pylist(), ex["rel"].to_pylist())}
    assert got == {("1", "a"): 2, ("1", "a1"): 2, ("1", "a2"): 2, ("1", "b"): 1, ("1", "b1"): 1, ("1", "c"): -1,
                   ("2", "a"): 3, ("2", "a1"): 3, ("2", "a2"): 3, ("2", "b"): 0, ("2", "b1"): 0}
    assert len(conflicts) == 0
    tab = expansion_table(qrels, ex, labels=[0, 1, 2, 3])
    row = tab.set_index("qid").loc["1"]
    assert (row["judged_2"], row["expanded_2"], row["judged_1"], row["expanded_1"]) == (1, 3, 1, 2)
    assert tab.set_index("qid").loc["all", "expanded_total"] == 10
    # a judged member disagreeing with the judged canonical: the canonical's label wins, conflict reported
    q2 = pa.table({"qid": ["1", "1"], "docid": ["a", "a1"], "rel": pa.array([2, 0], pa.int32())})
    ex2, conflicts2 = label_class_members(q2, classes)
    got2 = dict(zip(ex2["docid"].to_pylist(), ex2["rel"].to_pylist()))
    assert got2 == {"a": 2, "a1": 0, "a2": 2} and len(conflicts2) == 1
