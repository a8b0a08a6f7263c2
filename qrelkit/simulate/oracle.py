"""A simulated assessor: fills in batch grades from hidden qrels."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.errors import InputError


def truth_map(qrels: pa.Table) -> dict[tuple[str, str], int]:
    """(qid, docid) -> grade of hidden qrels: what :func:`judge_batches` looks grades up in; a
    caller that judges many batches builds it once and passes it instead of the table."""
    return dict(zip(zip(qrels["qid"].to_pylist(), qrels["docid"].to_pylist()), qrels["rel"].to_pylist()))


def judge_batches(
    batches: pd.DataFrame,
    qrels: pa.Table | Mapping[tuple[str, str], int],
    *,
    unjudged: str = "zero",
    error_rate: float = 0.0,
    scale: tuple[int, ...] = (0, 1, 2, 3),
    seed: int = 0,
) -> pd.DataFrame:
    """Return ``batches`` with ``grade`` filled from ``qrels`` (the hidden truth: a table, or
    its :func:`truth_map`).

    ``unjudged`` says what a passage missing from the qrels gets: ``"zero"`` (not relevant, the
    usual assumption) or ``"skip"`` (left empty). With ``error_rate`` > 0 each grade is replaced,
    with that probability, by another grade of the scale drawn uniformly (seeded).
    """
    if unjudged not in ("zero", "skip"):
        raise InputError("bad-option", "unjudged must be 'zero' or 'skip'")
    if not 0 <= error_rate <= 1:
        raise InputError("bad-option", "error_rate must be in [0, 1]")
    truth = qrels if isinstance(qrels, Mapping) else truth_map(qrels)
    grades = []
    for q, d in zip(batches["qid"], batches["docid"]):
        g = truth.get((q, d))
        if g is None or g < 0:
            g = 0 if unjudged == "zero" else None
        grades.append(g)
    out = batches.copy()
    g = pd.array(grades, dtype="Int32")
    if error_rate > 0:
        rng = np.random.default_rng(seed)
        flip = rng.random(len(g)) < error_rate
        choices = np.array(scale)
        for i in np.flatnonzero(flip):
            if g[i] is pd.NA:
                continue
            others = choices[choices != g[i]]
            g[i] = int(rng.choice(others))
    out["grade"] = g
    return out
