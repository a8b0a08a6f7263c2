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
