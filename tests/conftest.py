from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"


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
