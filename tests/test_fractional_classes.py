"""The fractional collection with near-duplicate classes at scale (issue #22): the campaign's
fractional stage takes the canonical ids from the dedupe stage's classes (every passage of the
corpus) instead of reading the corpus twice, and the streamed version looks each chunk up in the
non-canonical ids only (it hashed every class row once per chunk: quadratic in the corpus)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import qrelkit.campaign.stages as stages
from qrelkit.campaign import Campaign
from qrelkit.io.classes import map_to_classes
from qrelkit.pooler import fractional_ids, fractional_ids_from_corpus
from qrelkit.simulate.campaign import simulate_campaign

CFG = "configs/trec-dl-2022.toml"


def test_streamed_canonical_filter_is_the_class_mapping():
    ids = pa.array([f"p{i:03d}" for i in range(300)])
    classes = pa.table({"docid": ["p005", "p006", "p007", "p100", "p101", "p200", "zzz"],
                        "class_id": ["p005", "p005", "p005", "p101", "p101", "p200", "p005"]})
    chunks = [ids.slice(0, 120), ids.slice(120, 100), ids.slice(220)]
    got = fractional_ids(lambda: iter(chunks), 0.5, 3, classes=classes)
    canonical = ids.filter(pc.equal(map_to_classes(ids, classes), ids))  # the definition
    assert got.equals(fractional_ids(canonical, 0.5, 3))
    assert not set(got.to_pylist()) & {"p006", "p007", "p100"}


@pytest.fixture(scope="module")
def camp(tmp_path_factory, request):
    d = tmp_path_factory.mktemp("frac")
    simulate_campaign(d / "sim", n_passages=3000, n_topics=4, n_groups=2, runs_per_group=(1, 1), depth=20, seed=2)
    c = Campaign.init(d / "camp", config=request.config.rootpath / CFG, corpus=d / "sim" / "corpus.jsonl",
                      topics=d / "sim" / "topics.tsv", runs=d / "sim" / "runs", manifest=d / "sim" / "manifest.csv")
    c.run(oracle=d / "sim" / "qrels.txt", until="pool-rest")
    return d, c


def test_fractional_stage_reads_no_corpus(camp, monkeypatch):
    d, c = camp
    import pyarrow.parquet as pq  # lazy: only this test reads the stage's artefacts

    classes = pq.read_table(d / "camp" / "classes.parquet")
    expected = fractional_ids_from_corpus(d / "sim" / "corpus.jsonl", 0.1, 2022, classes=classes)
    seen = []
    real = stages.fractional_ids

    def spy(ids, fraction, seed, **kw):
        out = real(ids, fraction, seed, **kw)
        seen.append(out)
        return out

    def no_corpus(*a, **kw):
        raise AssertionError("the fractional stage read the corpus")

    monkeypatch.setattr(stages, "fractional_ids_from_corpus", no_corpus)
    monkeypatch.setattr(stages, "fractional_ids", spy)
    res = c.run(oracle=d / "sim" / "qrels.txt", until="fractional")
    assert "fractional" in res["stages_done"]
    assert len(seen) == 1 and seen[0].equals(expected)
    assert pq.read_table(d / "camp" / "pool-fractional.parquet").num_rows > 0
