"""Near-duplicates at the floor (issue 24): the faster clustering gives the very classes the code
before it gave, with every parameter choice, on text with varied lengths, Unicode and markup; the
next corpus chunk is read while this one is signed."""

from __future__ import annotations

import hashlib
import threading

import numpy as np
import pyarrow as pa
import pytest

from qrelkit.dedupe import DedupeParams, cluster_corpus
from qrelkit.dedupe import cluster, minhash

EXTRA = ["café", "Straße", "ÉCOLE", "Москва", "中文字", "😀", "“quoted”", "\u00a0", "İstanbul", "<p>", "</b>", "<br/>",
         "<Company Inc>", "<3", "<!-- c -->", "a < b", "x²", "€100", "1999", "A-1"]


def corpus(n: int = 3000, seed: int = 5) -> pa.Table:
    """Passages of 0 to 150 words from a vocabulary of 2,000, a sixth of them near-duplicates of
    an earlier one (0-3 word edits, upper case, markup and Unicode words put in)."""
    rng = np.random.RandomState(seed)
    vocab = ["".join(chr(97 + c) for c in rng.randint(0, 26, rng.randint(1, 9))) for _ in range(2000)]
    texts: list[list[str]] = []
    for _ in range(n):
        if texts and rng.rand() < 0.17:
            ws = list(texts[rng.randint(len(texts))])
            for _ in range(rng.randint(0, 4)):
                k = rng.randint(len(ws) + 1)
                op = rng.randint(3)
                if op == 0 or not ws:
                    ws.insert(k, vocab[rng.randint(len(vocab))])
                elif op == 1:
                    del ws[min(k, len(ws) - 1)]
                else:
                    ws[min(k, len(ws) - 1)] = vocab[rng.randint(len(vocab))]
        else:
            ws = [vocab[i] for i in rng.randint(0, len(vocab), rng.choice([rng.randint(0, 6), rng.randint(6, 151)]))]
        if rng.rand() < 0.3:
            for _ in range(rng.randint(1, 4)):
                ws.insert(rng.randint(len(ws) + 1), EXTRA[rng.randint(len(EXTRA))])
        texts.append(ws)
    out = [" ".join(ws).upper() if rng.rand() < 0.05 else " ".join(ws) for ws in texts]
    return pa.table({"pid": [f"p{i:05d}" for i in range(n)], "text": out})


def digest(classes: pa.Table) -> str:
    h = hashlib.sha256()
    for row in zip(*(classes[c].to_pylist() for c in ("docid", "class_id", "class_size"))):
        h.update(("\t".join(map(str, row)) + "\n").encode())
    return h.hexdigest()[:16]


# the digests of the class tables the code before issue 24 (5ccf404) gave for this corpus
BEFORE = {
    "default": "8e8f564c9bbf515c",
    "signature": "db4a4d5d9abcc0da",
    "none": "42a99564b33d6b08",
    "greedy": "e0050b2e9abd75df",
    "single": "274936b547355050",
    "letters": "601152e8a555e23e",
    "priority": "af0a920e0c54259d",
    "no-html-no-lower": "171e3605584f132c",
    "ngram1": "707f72f6f434566f",
    "ngram5": "67eb7b153dc7b05f",
    "perm64": "8e8f564c9bbf515c",
    "small-chunks": "8e8f564c9bbf515c",
}
VARIANTS = {"default": {}, "signature": {"verify": "signature"}, "none": {"verify": "none"}, "greedy": {"mode": "greedy"},
            "single": {"linkage": "single"}, "letters": {"keep_digits": False}, "priority": {"canonical": "priority"},
            "no-html-no-lower": {"strip_html": False, "lower": False}, "ngram1": {"ngram": 1},
            "ngram5": {"ngram": 5, "threshold": 0.8}, "perm64": {"num_perm": 64, "bands": 16, "rows": 4, "seed": 3},
            "small-chunks": {"chunk_rows": 700}}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_classes_of_the_code_before(name):
    table = corpus()
    priority = set(table["pid"].to_pylist()[::7])
    res = cluster_corpus(table, DedupeParams(**VARIANTS[name]), priority=priority)
    assert digest(res.classes) == BEFORE[name]


def test_the_next_chunk_is_read_while_this_one_is_signed(monkeypatch):
    table = corpus(2000)
    params = DedupeParams(chunk_rows=500)
    second = threading.Event()
    chunks, signatures = cluster._chunks, cluster.signatures

    def reading(corpus, rows):
        it = chunks(corpus, rows)
        yield next(it)
        second.set()  # asked for the second chunk
        yield from it

    overlapped = []

    def signing(texts, **kwargs):
        if not overlapped:  # signing the first chunk: the second one is asked for meanwhile
            overlapped.append(second.wait(timeout=20))
        return signatures(texts, **kwargs)

    expected = cluster_corpus(table, params).classes
    monkeypatch.setattr(cluster, "_chunks", reading)
    monkeypatch.setattr(cluster, "signatures", signing)
    assert cluster_corpus(table, params).classes.equals(expected)
    assert overlapped == [True]
    # the signing kernel lets go of the GIL: the reader's Python code runs beside it
    assert minhash._signatures.targetoptions.get("nogil") is True


@pytest.mark.parametrize("ids, bad", [
    (["msmarco_passage_01_0000052", "msmarco_passage_02_0000052", "p"], None),  # same length, first and last 8 bytes
    (["msmarco_passage_01_0000052", "msmarco_passage_02_0000052", "msmarco_passage_02_0000052"], "msmarco_passage_02_0000052"),
    (["b", "a", "c", "a", "b"], "b"),  # the first id, in corpus order, that occurs twice
    (["", "x", ""], ""),
])
def test_a_repeated_id_is_found_whatever_its_bytes(ids, bad):
    from qrelkit.errors import InputError

    table = pa.table({"pid": ids, "text": [f"passage {i}" for i in range(len(ids))]})
    if bad is None:
        assert cluster_corpus(table).stats["passages"] == len(ids)
        return
    with pytest.raises(InputError) as e:
        cluster_corpus(table)
    assert e.value.rule == "duplicate-id" and e.value.message == f"passage id {bad!r} occurs twice in the corpus"
