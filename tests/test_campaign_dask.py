"""``campaign run --workers N | --scheduler ADDR`` (issue #22): the near-duplicate stage on Dask,
on an MS MARCO v2-shaped folder of shards, writes the classes of the in-process stage, byte for
byte, with the same stage summary."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("distributed", reason="dask.distributed is not installed")

from qrelkit.campaign import open_campaign_store  # noqa: E402
from qrelkit.cli import run  # noqa: E402
from qrelkit.simulate.campaign import simulate_campaign  # noqa: E402

ROOT_CFG = "configs/trec-dl-2022.toml"


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    d = tmp_path_factory.mktemp("v2-camp")
    simulate_campaign(d, n_passages=1500, n_topics=3, n_groups=2, runs_per_group=(1, 1), depth=20, seed=3,
                      layout="msmarco-v2", shards=3)
    return d


def _init(sim, folder, root) -> None:
    assert run(["campaign", "init", str(folder), "-c", str(root / ROOT_CFG), "--corpus", str(sim / "msmarco_v2_passage"),
                "-t", str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")]) == 0


def _dedupe_summary(folder) -> dict:
    with open_campaign_store(folder) as s:
        return s.state.stages_done()["dedupe"]


def test_dedupe_stage_on_dask_equals_local(sim, tmp_path, monkeypatch, request):
    root = request.config.rootpath
    monkeypatch.setenv("QRELKIT_DASK_SPILL", str(tmp_path / "spill"))
    _init(sim, tmp_path / "local", root)
    _init(sim, tmp_path / "dask", root)
    assert run(["campaign", "run", str(tmp_path / "local"), "--until", "dedupe"]) == 0
    assert run(["campaign", "run", str(tmp_path / "dask"), "--until", "dedupe", "--workers", "2"]) == 0
    local = (tmp_path / "local" / "classes.parquet").read_bytes()
    assert (tmp_path / "dask" / "classes.parquet").read_bytes() == local
    assert json.dumps(_dedupe_summary(tmp_path / "dask")) == json.dumps(_dedupe_summary(tmp_path / "local"))
    assert list((tmp_path / "spill").iterdir()) == []
