from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


@contextlib.contextmanager
def restored_registries():
    """The stopping rules, pool kinds and adjudication strategies registered, and the configuration
    they declare (sections, choices of ``[stopping] rule``, ``[pool] kind`` and ``[adjudicate]
    strategy``, rules across keys), as they were before the
    block: a test may register its own."""
    import qrelkit.cal.stopping as stopping  # lazy: only the tests that register something
    import qrelkit.config as config
    import qrelkit.pooler.adjudication as adjudication
    import qrelkit.pooler.registry as pools

    config.load_plugins()
    saved = [(d, {k: (dict(v) if isinstance(v, dict) else v) for k, v in d.items()})
             for d in (stopping._RULES, pools._POOLS, adjudication._STRATEGIES, config.CROSS_RULES)]
    schema = config.SCHEMA.snapshot()
    try:
        yield
    finally:
        for now, before in saved:
            now.clear()
            now.update(before)
        config.SCHEMA.restore(schema)


@pytest.fixture
def registries():
    """:func:`restored_registries` around a test."""
    with restored_registries():
        yield


def shared(*parts: str) -> Path:
    """A path under ../shared/data; skips the test when the data is absent."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"real data not available: {p} (a fresh clone has no ../shared)")
    return p


def write_run(path: Path, rows: list[tuple], tag: str = "r") -> Path:
    """rows: (qid, docid, score) or (qid, docid, rank, score)."""
    lines = []
    for i, r in enumerate(rows):
        if len(r) == 3:
            q, d, s = r
            rank = i + 1
        else:
            q, d, rank, s = r
        lines.append(f"{q} Q0 {d} {rank} {s} {tag}\n")
    path.write_text("".join(lines))
    return path


def write_three_runs(folder: Path, offsets: tuple[int, int, int] = (0, 1, 2)) -> Path:
    """Runs alpha, beta and gamma on topics 1-3, 12 documents each (D0..D11 shifted by the run's
    offset, scores 20 down to 9), in ``folder``."""
    folder.mkdir()
    for r, offset in zip(("alpha", "beta", "gamma"), offsets):
        rows = [(q, f"D{(i + offset) % 12}", 20 - i) for q in ("1", "2", "3") for i in range(12)]
        write_run(folder / f"{r}.run", rows, tag=r)
    return folder


def cli_store(folder: Path) -> Path:
    """A judging store of one topic ("1"), made by ``qrelkit cal init`` in ``folder``."""
    from qrelkit.cli import run

    (folder / "topics.tsv").write_text("1\tfirst\n")
    db = folder / "c.db"
    assert run(["cal", "init", str(db), "-t", str(folder / "topics.tsv")]) == 0
    return db


@pytest.fixture(scope="session")
def sim6(tmp_path_factory) -> Path:
    """A simulated campaign of six topics (3000 passages, three groups, seed 1): with the
    trec-dl-2022 protocol, topics 1001, 1003 and 1005 are kept at screening."""
    from qrelkit.cli import run as cli  # lazy: the CLI (and numba) only for the tests that use it

    d = tmp_path_factory.mktemp("sim6") / "s"
    assert cli(["simulate", "campaign", "-o", str(d), "--passages", "3000", "--topics", "6", "--groups", "3",
                "--seed", "1"]) == 0
    return d


@pytest.fixture(scope="session")
def sim4(tmp_path_factory) -> Path:
    """A simulated campaign of four topics (3000 passages, three groups, seed 1); read it only
    (copy it before changing a file)."""
    from qrelkit.cli import run as cli  # lazy: the CLI (and numba) only for the tests that use it

    d = tmp_path_factory.mktemp("sim4") / "s"
    assert cli(["simulate", "campaign", "-o", str(d), "--passages", "3000", "--topics", "4", "--groups", "3",
                "--seed", "1"]) == 0
    return d


@pytest.fixture(scope="session")
def sim3(tmp_path_factory) -> Path:
    """A small simulated campaign (2000 passages, three topics, three groups, seed 1): with the
    trec-dl-2022 protocol and its hidden qrels as the oracle (seed 7), topic 1001 is accepted and
    the two others are discarded at screening."""
    from qrelkit.cli import run as cli  # lazy: the CLI (and numba) only for the tests that use it

    d = tmp_path_factory.mktemp("sim3") / "s"
    assert cli(["simulate", "campaign", "-o", str(d), "--passages", "2000", "--topics", "3", "--groups", "3",
                "--seed", "1"]) == 0
    return d


def campaign_init_args(sim: Path, d: Path, *extra: str) -> list[str]:
    """``qrelkit campaign init D`` on a simulated campaign's inputs, with the trec-dl-2022 protocol."""
    return ["campaign", "init", str(d), "-c", str(ROOT / "configs" / "trec-dl-2022.toml"), "--corpus",
            str(sim / "corpus.jsonl"), "-t", str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m",
            str(sim / "manifest.csv"), *extra]


@pytest.fixture(scope="session")
def finished3(sim3, tmp_path_factory) -> Path:
    """``sim3`` as a finished campaign (every stage, the oracle with seed 7): copy it before changing it."""
    from qrelkit.campaign import Campaign  # lazy: numba only for the tests that use it
    from qrelkit.cli import run as cli  # lazy: as above

    d = tmp_path_factory.mktemp("fin3") / "c"
    assert cli(campaign_init_args(sim3, d)) == 0
    assert Campaign(d).run(oracle=sim3 / "qrels.txt", seed=7)["state"] == "done"
    return d
