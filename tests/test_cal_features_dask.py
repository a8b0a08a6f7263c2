"""The CAL feature build on Dask (issue 22): ``build_features_dask`` and ``qrelkit cal features
--workers N | --scheduler ADDR`` write the folder of the one-process build byte for byte (every
file, the manifest included), whatever the parts of the corpus and the shard size."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("distributed")

from distributed import LocalCluster  # noqa: E402

from qrelkit.cal import features_dask  # noqa: E402
from qrelkit.cal.features import build_features, load_features  # noqa: E402
from qrelkit.cal.features_dask import build_features_dask  # noqa: E402
from qrelkit.cli import run  # noqa: E402
from qrelkit.errors import InputError  # noqa: E402

from test_cal_shards import classes_of, corpus  # noqa: E402


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _same_folder(a: Path, b: Path) -> None:
    fa, fb = _files(a), _files(b)
    assert sorted(fa) == sorted(fb)
    for name in fa:
        assert fa[name] == fb[name], name


def _write_jsonl(t: pa.Table, path: Path) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for p, x in zip(t["pid"].to_pylist(), t["text"].to_pylist()):
            fh.write(json.dumps({"pid": p, "text": x}) + "\n")
    return path


@pytest.fixture(scope="module")
def scheduler():
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.CRITICAL) as cluster:
        yield cluster.scheduler_address


@pytest.fixture
def dask_builds(monkeypatch):
    """The calls of the Dask build (its scheduler, or None for a LocalCluster): a build that
    quietly ran in one process would write the same folder."""
    calls: list = []

    def spy(*args, **kw):
        calls.append(kw.get("scheduler"))
        return build_features_dask(*args, **kw)

    monkeypatch.setattr(features_dask, "build_features_dask", spy)
    return calls


@pytest.fixture(scope="module")
def jsonl(tmp_path_factory):
    return _write_jsonl(corpus(1500), tmp_path_factory.mktemp("corpus") / "corpus.jsonl")


@pytest.mark.parametrize("shard_size,part_bytes,hashing", [(200, 7_000, None), (1000, 20_000, None),
                                                            (10_000, 7_000, None), (333, 9_000, 97)])
def test_file_corpus_byte_identical(tmp_path, jsonl, scheduler, shard_size, part_bytes, hashing):
    """Parts (byte chunks of the file, several per shard or several shards per part) never line up
    with shards; the hashing option folds words alike."""
    one = tmp_path / "one"
    build_features(jsonl, one, shard_size=shard_size, hashing=hashing, params={"corpus": "c"})
    dask = tmp_path / "dask"
    f = build_features_dask(jsonl, dask, scheduler=scheduler, shard_size=shard_size, hashing=hashing,
                            part_bytes=part_bytes, params={"corpus": "c"})
    assert f.n_rows == 1500 and len(f.shards) == -(-1500 // shard_size)
    _same_folder(one, dask)
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # the build area and temp folder are gone


def test_chunks_universe_classes_byte_identical(tmp_path, scheduler):
    t = corpus(1200)
    chunks = [t.slice(a, 170) for a in range(0, t.num_rows, 170)]
    universe = t["pid"].to_pylist()[::3] + ["not-there"]
    kw = dict(classes=classes_of(t), universe=universe, shard_size=150)
    build_features(chunks, tmp_path / "one", **kw)
    seen = []
    f = build_features_dask(chunks, tmp_path / "dask", scheduler=scheduler, progress=seen.append, **kw)
    assert sum(seen) == 1200 and f.n_rows == 400 and f.canonical is not None
    _same_folder(tmp_path / "one", tmp_path / "dask")


def test_empty_and_wordless_passages(tmp_path, scheduler):
    t = pa.table({"pid": ["a", "b", "c", "d"], "text": ["", "x y x", "...", "y z"]})
    build_features(t, tmp_path / "one", shard_size=3)
    build_features_dask(t, tmp_path / "dask", scheduler=scheduler, shard_size=3)
    _same_folder(tmp_path / "one", tmp_path / "dask")


def test_duplicate_id_same_error(tmp_path, scheduler):
    t = pa.table({"pid": ["a", "b", "c", "b", "a"], "text": ["x", "y", "z", "w", "v"]})
    with pytest.raises(InputError) as one:
        build_features(t, tmp_path / "one")
    with pytest.raises(InputError) as dask:
        build_features_dask([t.slice(0, 2), t.slice(2)], tmp_path / "dask", scheduler=scheduler)
    assert str(dask.value) == str(one.value) and dask.value.rule == "duplicate-id"
    assert not (tmp_path / "dask").exists() and not list(tmp_path.glob(".dask*"))


def test_local_cluster_of_processes(tmp_path, jsonl):
    build_features(jsonl, tmp_path / "one", shard_size=400)
    build_features_dask(jsonl, tmp_path / "dask", n_workers=2, shard_size=400, part_bytes=30_000)
    _same_folder(tmp_path / "one", tmp_path / "dask")


def test_folder_of_shards_byte_identical(tmp_path, scheduler):
    t = corpus(900)
    folder = tmp_path / "shards"
    folder.mkdir()
    for i, a in enumerate(range(0, 900, 250)):
        _write_jsonl(t.slice(a, 250), folder / f"part_{i:02d}.jsonl")
    build_features(folder, tmp_path / "one", shard_size=200)
    build_features_dask(folder, tmp_path / "dask", scheduler=scheduler, shard_size=200)
    _same_folder(tmp_path / "one", tmp_path / "dask")


def test_cli_workers(tmp_path, jsonl, capsys, dask_builds):
    one, dask = tmp_path / "one", tmp_path / "dask"
    assert run(["cal", "features", str(jsonl), "-o", str(one), "--shard-size", "500"]) == 0
    capsys.readouterr()
    assert run(["cal", "features", str(jsonl), "-o", str(dask), "--shard-size", "500", "--workers", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["shards"] == 3
    assert dask_builds == [None]
    _same_folder(one, dask)
    assert load_features(dask).n_rows == 1500


def test_cli_scheduler(tmp_path, jsonl, scheduler, dask_builds):
    one, dask = tmp_path / "one", tmp_path / "dask"
    assert run(["cal", "features", str(jsonl), "-o", str(one), "--hashing", "50"]) == 0
    assert run(["cal", "features", str(jsonl), "-o", str(dask), "--hashing", "50", "--scheduler", scheduler]) == 0
    assert dask_builds == [scheduler]
    _same_folder(one, dask)


def test_cli_workers_and_scheduler_refused(tmp_path, jsonl, capsys):
    capsys.readouterr()
    assert run(["cal", "features", str(jsonl), "-o", str(tmp_path / "f"), "--workers", "2", "--scheduler", "tcp://x:1"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--workers" in err and "--scheduler" in err
    assert not (tmp_path / "f").exists()


def test_campaign_features_on_dask(sim3, tmp_path, scheduler, dask_builds):
    """A campaign with ``[campaign] scheduler`` (or ``workers``) builds the features folder of a
    campaign run in one process."""
    from qrelkit.campaign import Campaign
    from conftest import ROOT, campaign_init_args

    text = (ROOT / "configs" / "trec-dl-2022.toml").read_text()
    assert "\n[campaign]\n" in text
    cfg = tmp_path / "dask.toml"
    cfg.write_text(text.replace("\n[campaign]\n", f"\n[campaign]\nscheduler = \"{scheduler}\"\n"))
    folders = []
    for name, extra in (("one", ()), ("dask", ("-c", str(cfg)))):
        d = tmp_path / name
        args = campaign_init_args(sim3, d)
        if extra:
            args[args.index("-c") + 1] = extra[1]
        assert run(args) == 0
        assert Campaign(d).run(oracle=sim3 / "qrels.txt", seed=7, until="pool")["state"] != "done"
        with Campaign(d).runner() as r:
            r.warm()  # the CAL features
        folders.append(d / "features")
    assert dask_builds == [scheduler]  # the second campaign's, on the cluster
    _same_folder(*folders)
