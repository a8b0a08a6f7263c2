"""How the grades of several assessors for one passage become one: the rules a store's exports
and readers combine by (:meth:`~qrelkit.store.interfaces.JudgmentLog.export_qrels`,
:meth:`~qrelkit.store.interfaces.JudgmentLog.labels`), and that ``qrelkit batch import`` uses.

A rule is a name — ``median_high`` (the higher middle grade, always a grade someone gave),
``max``, ``min`` — or an object with a ``grades(judgments) -> qrels table`` method, such as
:class:`qrelkit.labels.VoteRule` (the labels' majority vote), passed in by the caller.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.config import CAMPAIGN_KEYS
from qrelkit.errors import InputError
from qrelkit.io.qrels import QRELS_SCHEMA, sort_qrels

#: the rule a reader combines by when none is given: ``[campaign] combine``'s declared default
DEFAULT_COMBINE: str = CAMPAIGN_KEYS["combine"].default


def judgments_to_qrels(judgments: pd.DataFrame, *, combine: str = DEFAULT_COMBINE) -> pa.Table:
    """Qrels from a judgments table, one grade per (topic, passage).

    ``combine`` says how several assessors' grades become one: ``median_high`` (the higher
    middle grade, always a grade someone gave; the default), ``max`` or ``min``. The labels
    module offers the full set of aggregation rules (majority vote, ceiled median, ...).
    """
    if combine not in ("median_high", "max", "min"):
        raise InputError("bad-option", f"combine must be median_high, max or min, got {combine!r}")
    if len(judgments) == 0:
        return QRELS_SCHEMA.empty_table()
    try:  # grades compare as numbers, whatever their dtype (text "10" > "2")
        grades = pd.to_numeric(judgments["grade"], errors="raise").to_numpy(dtype=np.float64, na_value=np.nan)
    except (ValueError, TypeError):
        raise InputError("grade-outside-scale", "a grade is not a number") from None
    g = judgments.assign(grade=grades).groupby(["qid", "docid"], sort=False)["grade"]
    codes = g.ngroup().to_numpy()  # -1: a row with a missing qid or docid, no group's
    if not np.isfinite(grades[codes >= 0]).all():
        raise InputError("missing-value", "a judgment has no grade (NaN or missing)")
    if combine == "max":
        agg = g.max().reset_index()
    elif combine == "min":
        agg = g.min().reset_index()
    else:  # the higher middle grade of each group, for every group at once (no Python call per group)
        keep = np.flatnonzero(codes >= 0)
        order = keep[np.lexsort((grades[keep], codes[keep]))]
        sc = codes[order]
        starts = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1]])
        sizes = np.diff(np.r_[starts, len(order)])
        first = judgments.iloc[order[starts]]
        agg = pd.DataFrame({"qid": first["qid"].to_numpy(), "docid": first["docid"].to_numpy(),
                            "grade": grades[order][starts + sizes // 2]})
    t = pa.table({"qid": agg["qid"].astype(str).tolist(), "docid": agg["docid"].astype(str).tolist(),
                  "rel": pa.array(agg["grade"].astype(int).tolist(), pa.int32())})
    return sort_qrels(t.cast(QRELS_SCHEMA))


def combined_grades(judgments: pd.DataFrame, combine: Any = DEFAULT_COMBINE) -> pa.Table:
    """Qrels (``qid, docid, rel``) from judgments (``qid, docid, assessor, grade``), one grade per
    (topic, passage). ``combine``: a rule name — ``median_high``, ``max``, ``min``
    (:func:`judgments_to_qrels`) — or a rule object with a
    ``grades(judgments) -> qrels table`` method, such as :class:`qrelkit.labels.VoteRule` (the
    labels' majority vote)."""
    if isinstance(combine, str):
        return judgments_to_qrels(judgments, combine=combine)
    if not callable(getattr(combine, "grades", None)):
        raise InputError("bad-option", f"combine must be a rule name or have a grades() method, got {combine!r}")
    return combine.grades(judgments)


def combine_log(log: pd.DataFrame, *, combine: Any = DEFAULT_COMBINE) -> pd.DataFrame:
    """One row per (topic, passage) of a judgment log, in the order of its first judgment:
    ``qid, docid, grade, batch_id, batch_seq`` (the batch of the first judgment); several
    judgments of a passage combined by ``combine`` (:func:`combined_grades`)."""
    cols = ["qid", "docid", "grade", "batch_id", "batch_seq"]
    if len(log) == 0:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("qid", "docid", "batch_id") else np.int64) for c in cols})
    first = log.drop_duplicates(["qid", "docid"], keep="first")
    if len(first) == len(log):  # one judgment per passage: nothing to combine
        return first[cols].reset_index(drop=True)
    if len(log.drop_duplicates(["qid", "docid", "assessor"])) == len(first):
        # one assessor per passage (its judgment copied into other batches: the same grade, the
        # store refuses another): every rule gives that grade
        return first[cols].reset_index(drop=True)
    q = combined_grades(log[["qid", "docid", "assessor", "grade", "batch_id"]], combine)
    grade = {(a, b): c for a, b, c in zip(q["qid"].to_pylist(), q["docid"].to_pylist(), q["rel"].to_pylist())}
    first = first.assign(grade=[grade[(a, b)] for a, b in zip(first["qid"], first["docid"])])
    return first[cols].reset_index(drop=True)
