"""Several assessors' grades -> one label per (topic, passage), and how much the assessors agree.

docs/protocol.md section 4. For each (topic, passage):

* **Missing grades are ignored** (an empty or null grade is no vote).
* **Binary label by majority vote:** each grade is binarized (``grade >= threshold`` is a vote for
  relevant); more than half of the votes decide. **Tie policy:** when exactly half the votes say
  relevant (no majority: 1 of 2, 2 of 4, ...) the ``fallback`` chain decides, tried left to right:
  ``original`` (the original qrel's grade binarized at ``original_threshold``; skipped when the
  passage has no original qrel), ``lowest`` (the lowest grade given, binarized: not relevant, in
  a tie), ``highest`` (relevant, in a tie), ``not-relevant``, ``relevant``, or ``drop`` (no label:
  the passage is left out). The default chain is ``original, lowest``. Every label says where it
  came from (``source``).
* **Graded label:** ``ceil_median`` = ceil(median of the grades), which can be a grade nobody
  gave ([0, 3] -> 2); or ``median_high`` = the higher of the two middle grades ([0, 3] -> 3),
  always a grade someone gave. The graded label is computed independently of the vote.
* **Inclusion** (per topic): a topic enters the evaluation set only if at least ``min_assessors``
  distinct assessors judged it and, with ``require_original_relevant``, at least one of its
  original relevant qrels (original grade >= ``original_threshold``) got the binary label
  relevant. Labels of excluded topics are kept in the table with ``included = false``.

Agreement statistics come from maintained libraries: Cohen's kappa per assessor pair
(scikit-learn), Fleiss' kappa (statsmodels) and Krippendorff's alpha (``krippendorff``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Sequence

import krippendorff
import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.errors import InputError
from qrelkit.io.order import qid_order
from qrelkit.io.qrels import QRELS_SCHEMA, sort_qrels
from qrelkit.labels.params import KEYS, LabelsParams
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.labels.params import LabelsParams

FALLBACKS = ("original", "lowest", "highest", "not-relevant", "relevant", "drop")
FINAL_FALLBACKS = ("lowest", "highest", "not-relevant", "relevant", "drop")
GRADED = ("ceil_median", "median_high")

LABEL_COLUMNS = ["qid", "docid", "n_grades", "n_relevant", "grades", "vote", "relevant", "source", "grade",
                 "original", "included"]


@dataclass
class Aggregation:
    """What :func:`aggregate_judgments` returns: ``labels`` (:data:`LABEL_COLUMNS`, one row per topic
    and passage), ``topics`` (one row per topic: assessors, items, relevant, whether included and why)
    and the ``params`` used."""
    labels: pd.DataFrame  # LABEL_COLUMNS, one row per (topic, passage)
    topics: pd.DataFrame  # qid, assessors, items, relevant, original_relevant_items, original_judged_relevant, included, reason
    params: dict

    @declared_defaults(LabelsParams)
    def qrels(self, label: str = AS_DECLARED, included_only: bool = True) -> pa.Table:
        """Qrels from the labels: ``graded`` (the graded label) or ``binary`` (1 = the vote says
        relevant). Dropped passages and, by default, excluded topics are left out."""
        df = self.labels
        df = df[df["source"] != "drop"]
        if included_only:
            df = df[df["included"]]
        if label == "graded":
            rel = df["grade"].astype("int32")
        elif label == "binary":
            rel = df["relevant"].astype(bool).astype("int32")
        else:
            raise InputError("bad-option", f"label must be graded or binary, got {label!r}")
        t = pa.table({"qid": pa.array(df["qid"].astype(str).tolist(), pa.string()),
                      "docid": pa.array(df["docid"].astype(str).tolist(), pa.string()),
                      "rel": pa.array(rel.to_numpy(), pa.int32())})
        return sort_qrels(t.cast(QRELS_SCHEMA))

    def empty_reason(self) -> str | None:
        """Why :meth:`qrels` (of the included topics) has no row, or ``None`` when it has rows."""
        lab = self.labels
        kept = lab[lab["source"] != "drop"]
        if len(kept[kept["included"]]):
            return None
        if len(lab) == 0:
            return "no judgments"
        if len(kept) == 0:
            return f"every one of the {len(lab)} labels was dropped by the fallback chain {self.params.get('fallback')}"
        why = self.topics.loc[~self.topics["included"], "reason"].value_counts()
        listed = "; ".join(f"{r} ({n} topic{'s' if n != 1 else ''})" for r, n in why.items())
        return f"no topic is included (all {len(self.topics)} excluded: {listed})"

    def summary(self) -> dict:
        lab = self.labels
        reason = self.empty_reason()
        return {
            "empty": reason is not None,
            "reason": reason,
            "items": int(len(lab)),
            "topics": int(len(self.topics)),
            "topics_included": int(self.topics["included"].sum()),
            "labels_by_source": {k: int(v) for k, v in lab["source"].value_counts().sort_index().items()},
            "ties": int((lab["vote"] == "tie").sum()),
            "relevant": int(lab["relevant"].fillna(False).astype(bool).sum()),
            "grades": {str(k): int(v) for k, v in lab["grade"].value_counts().sort_index().items()},
        }


def _judgments_frame(judgments) -> pd.DataFrame:
    df = judgments.to_pandas() if isinstance(judgments, pa.Table) else pd.DataFrame(judgments).copy()
    for c in ("qid", "docid", "assessor", "grade"):
        if c not in df.columns:
            raise InputError("missing-column", f"judgments need columns qid, docid, assessor, grade (missing {c!r})")
    df = df[["qid", "docid", "assessor", "grade"]].copy()
    for c in ("qid", "docid", "assessor"):
        df[c] = df[c].astype(str)
    g = pd.to_numeric(df["grade"], errors="coerce")
    bad = df["grade"].notna() & g.isna() & (df["grade"].astype(str).str.strip() != "")
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        raise InputError("grade-not-numeric", f"grade {df['grade'].iloc[i]!r} is not a number", line=i + 1)
    frac = g.notna() & (g != np.floor(g))
    if frac.any():
        i = int(np.flatnonzero(frac.to_numpy())[0])
        raise InputError("grade-not-integer", f"grade {float(g.iloc[i])!r} is not an integer", line=i + 1)
    df["grade"] = g
    df = df[df["grade"].notna()]  # missing grades are no vote
    df["grade"] = df["grade"].astype("int64")
    dup = df.duplicated(["qid", "docid", "assessor"], keep=False)
    if dup.any():
        conflict = df[dup].groupby(["qid", "docid", "assessor"])["grade"].nunique()
        if (conflict > 1).any():
            q, d, a = conflict[conflict > 1].index[0]
            raise InputError("conflict", f"assessor {a} gave topic {q} passage {d} two different grades")
        df = df.drop_duplicates(["qid", "docid", "assessor"])
    return df


def _original_map(original: pa.Table | None) -> dict[tuple[str, str], int]:
    if original is None:
        return {}
    return {(q, d): int(r) for q, d, r in zip(original["qid"].to_pylist(), original["docid"].to_pylist(),
                                               original["rel"].to_pylist()) if r is not None and r >= 0}


def aggregate_judgments(
    judgments,
    *,
    threshold: int = KEYS["vote_threshold"].default,
    graded: str = KEYS["graded"].default,
    fallback: Sequence[str] | str = tuple(KEYS["fallback"].default),
    original: pa.Table | None = None,
    original_threshold: int = KEYS["original_threshold"].default,
    min_assessors: int = KEYS["min_assessors"].default,
    require_original_relevant: bool = KEYS["require_original_relevant"].default,
) -> Aggregation:
    """Aggregate a judgments table (``qid, docid, assessor, grade``) into one label per
    (topic, passage); see the module documentation for every rule.

    Examples
    --------
    >>> import pandas as pd
    >>> from qrelkit import aggregate_judgments
    >>> judgments = pd.DataFrame({"qid": ["1", "1", "1"], "docid": ["p1", "p1", "p1"],
    ...                           "assessor": ["ann", "bob", "cy"], "grade": [2, 3, 1]})
    >>> result = aggregate_judgments(judgments)
    >>> result.labels[["qid", "docid", "grades", "vote", "grade"]].to_dict("list")
    {'qid': ['1'], 'docid': ['p1'], 'grades': ['1,2,3'], 'vote': ['relevant'], 'grade': [2]}
    >>> result.qrels().to_pydict()
    {'qid': ['1'], 'docid': ['p1'], 'rel': [2]}
    """
    if isinstance(fallback, str):
        fallback = [f.strip() for f in fallback.split(",") if f.strip()]
    fallback = list(fallback)
    for f in fallback:
        if f not in FALLBACKS:
            raise InputError("bad-option", f"fallback {f!r} is not one of {', '.join(FALLBACKS)}")
    if not fallback or fallback[-1] not in FINAL_FALLBACKS:
        raise InputError("bad-option", f"the fallback chain must end with one of {', '.join(FINAL_FALLBACKS)} "
                         f"(got {', '.join(fallback) or 'nothing'})")
    if graded not in GRADED:
        raise InputError("bad-option", f"graded label must be one of {', '.join(GRADED)}, got {graded!r}")
    if require_original_relevant and original is None:
        raise InputError("bad-option", "require_original_relevant needs the original qrels")
    df = _judgments_frame(judgments)
    orig = _original_map(original)

    df = df.sort_values(["qid", "docid", "assessor"], kind="mergesort")
    grp = df.groupby(["qid", "docid"], sort=True)["grade"]
    items = grp.agg(n_grades="count", lowest="min", highest="max").reset_index()
    items["n_relevant"] = grp.apply(lambda s: int((s >= threshold).sum())).to_numpy()
    grades_sorted = grp.apply(lambda s: sorted(int(x) for x in s))
    items["grades"] = [",".join(str(x) for x in g) for g in grades_sorted]
    if graded == "ceil_median":
        items["grade"] = np.ceil(grp.median().to_numpy()).astype("int64")
    else:
        items["grade"] = [g[len(g) // 2] for g in grades_sorted]  # higher middle when even
    twice = 2 * items["n_relevant"]
    items["vote"] = np.where(twice > items["n_grades"], "relevant", np.where(twice < items["n_grades"], "not-relevant", "tie"))
    items["original"] = pd.array([orig.get((q, d)) for q, d in zip(items["qid"], items["docid"])], dtype="Int64")

    relevant: list[bool | None] = []
    source: list[str] = []
    for vote, lo, hi, o in zip(items["vote"], items["lowest"], items["highest"], items["original"]):
        if vote != "tie":
            relevant.append(vote == "relevant")
            source.append("majority")
            continue
        for f in fallback:
            if f == "original":
                if pd.isna(o):
                    continue
                relevant.append(int(o) >= original_threshold)
            elif f == "lowest":
                relevant.append(int(lo) >= threshold)
            elif f == "highest":
                relevant.append(int(hi) >= threshold)
            elif f == "not-relevant":
                relevant.append(False)
            elif f == "relevant":
                relevant.append(True)
            else:  # drop
                relevant.append(None)
            source.append(f)
            break
    items["relevant"] = pd.array(relevant, dtype="boolean")
    items["source"] = source

    # topics: assessors, inclusion
    per_topic = df.groupby("qid")["assessor"].nunique()
    topics = qid_order(per_topic.index)
    trows = []
    included: dict[str, bool] = {}
    for q in topics:
        n_ass = int(per_topic[q])
        it = items[items["qid"] == q]
        orig_rel = it[[not pd.isna(o) and int(o) >= original_threshold for o in it["original"]]]
        orig_judged_rel = bool(orig_rel["relevant"].fillna(False).astype(bool).any()) if len(orig_rel) else False
        ok = n_ass >= min_assessors
        reason = "" if ok else f"{n_ass} assessor(s) < {min_assessors}"
        if ok and require_original_relevant and not orig_judged_rel:
            ok = False
            reason = "no original relevant qrel judged relevant" if len(orig_rel) else "original relevant qrel not judged"
        included[q] = ok
        trows.append((q, n_ass, int(len(it)), int(it["relevant"].fillna(False).astype(bool).sum()), int(len(orig_rel)),
                      orig_judged_rel if original is not None else None, ok, reason))
    tdf = pd.DataFrame(trows, columns=["qid", "assessors", "items", "relevant", "original_relevant_items",
                                       "original_judged_relevant", "included", "reason"])
    items["included"] = items["qid"].map(included).astype(bool)
    # natural topic order, then docid
    order = {q: i for i, q in enumerate(topics)}
    items = items.assign(_o=items["qid"].map(order)).sort_values(["_o", "docid"], kind="mergesort")
    labels = items[LABEL_COLUMNS].reset_index(drop=True)
    params = {"threshold": threshold, "graded": graded, "fallback": fallback, "original_threshold": original_threshold,
              "min_assessors": min_assessors, "require_original_relevant": require_original_relevant}
    return Aggregation(labels=labels, topics=tdf, params=params)


def aggregation_options(labels: LabelsParams | None = None) -> dict:
    """Keyword arguments of :func:`aggregate_judgments` from the ``[labels]`` parameters
    (``vote_threshold``, ``graded``, ``fallback``, ``original_threshold``, ``min_assessors``,
    ``require_original_relevant``; the declared defaults without).

    Examples
    --------
    >>> from qrelkit.labels.aggregate import aggregation_options
    >>> from qrelkit.labels.params import LabelsParams
    >>> opts = aggregation_options(LabelsParams.from_config(None, fallback="lowest"))
    >>> opts["threshold"], opts["graded"], opts["fallback"]
    (2, 'ceil_median', ['lowest'])
    """
    p = labels or LabelsParams()
    return {"threshold": p.vote_threshold, "graded": p.graded, "fallback": list(p.fallback),
            "original_threshold": p.original_threshold, "min_assessors": p.min_assessors,
            "require_original_relevant": p.require_original_relevant}


@dataclass(frozen=True)
class VoteRule:
    """Several assessors' grades of an item -> one grade, by :func:`aggregate_judgments`' majority
    vote: what a judging store's ``combine`` takes (:func:`qrelkit.store.combine.combine_log`) so that
    CAL, its stopping rules and the qrels see the voted label.

    The grade is the graded label (``graded``: ceiled median or median_high) when it is on the
    vote's side of ``threshold``; when it is not (a tie settled by the ``fallback`` chain, e.g.
    grades 1 and 3 -> graded 2, but ``lowest`` says not relevant), it is the grade an assessor
    gave that is nearest to it on the vote's side (1 there). A passage the chain drops counts as
    not relevant. Binarized at ``threshold``, the grade is the vote. There are no original qrels
    here: an ``original`` step of the chain is passed over.

    Examples
    --------
    >>> import pandas as pd
    >>> from qrelkit.labels import VoteRule
    >>> j = pd.DataFrame({"qid": ["1"] * 5, "docid": ["p1", "p1", "p2", "p2", "p2"],
    ...                   "assessor": ["a", "b", "a", "b", "c"], "grade": [1, 3, 0, 2, 3]})
    >>> VoteRule(threshold=2, fallback=("original", "lowest")).grades(j).to_pydict()
    {'qid': ['1', '1'], 'docid': ['p1', 'p2'], 'rel': [1, 2]}
    """

    threshold: int = KEYS["vote_threshold"].default
    graded: str = KEYS["graded"].default
    fallback: tuple[str, ...] = tuple(KEYS["fallback"].default)

    @classmethod
    def from_config(cls, config: Any = None) -> "VoteRule":
        """The rule of the config's ``[labels]`` (``vote_threshold``, ``graded``, ``fallback``), as
        ``qrelkit labels aggregate`` resolves them (:func:`aggregation_options`)."""
        o = aggregation_options(LabelsParams.from_config(config))
        return cls(threshold=o["threshold"], graded=o["graded"], fallback=tuple(o["fallback"]))

    def grades(self, judgments: pd.DataFrame) -> pa.Table:
        """Qrels (``qid, docid, rel``, qrels order) from judgments (``qid, docid, assessor, grade``):
        one grade per item (see the class documentation). Items with one assessor keep the grade."""
        df = judgments[["qid", "docid", "assessor", "grade"]]
        many = df.groupby(["qid", "docid"], sort=False)["assessor"].transform("nunique").to_numpy() > 1
        one = df[~many].drop_duplicates(["qid", "docid"])
        parts = [pd.DataFrame({"qid": one["qid"].astype(str), "docid": one["docid"].astype(str),
                               "rel": one["grade"].astype("int64")})]
        if many.any():
            lab = aggregate_judgments(df[many], threshold=self.threshold, graded=self.graded,
                                      fallback=list(self.fallback)).labels
            parts.append(pd.DataFrame({"qid": lab["qid"], "docid": lab["docid"],
                                       "rel": [self._voted(g, r, gs) for g, r, gs in
                                               zip(lab["grade"], lab["relevant"], lab["grades"])]}))
        q = pd.concat(parts, ignore_index=True)
        t = pa.table({"qid": pa.array(q["qid"].tolist(), pa.string()), "docid": pa.array(q["docid"].tolist(), pa.string()),
                      "rel": pa.array(q["rel"].astype("int64").tolist(), pa.int32())})
        return sort_qrels(t.cast(QRELS_SCHEMA))

    def _voted(self, grade: int, relevant, grades: str) -> int:
        rel = bool(relevant) if not pd.isna(relevant) else False
        if (int(grade) >= self.threshold) == rel:
            return int(grade)
        given = [int(x) for x in grades.split(",")]
        side = [x for x in given if (x >= self.threshold) == rel]
        return min(side, key=lambda x: (abs(x - int(grade)), x))


def labels_to_table(labels: pd.DataFrame) -> pa.Table:
    """The ``labels`` frame of an :class:`Aggregation` as a pyarrow table with fixed types (ids strings,
    counts and grades int32, missing values null)."""
    df = labels.copy()
    return pa.table({
        "qid": pa.array(df["qid"].astype(str).tolist(), pa.string()),
        "docid": pa.array(df["docid"].astype(str).tolist(), pa.string()),
        "n_grades": pa.array(df["n_grades"].astype("int32").to_numpy(), pa.int32()),
        "n_relevant": pa.array(df["n_relevant"].astype("int32").to_numpy(), pa.int32()),
        "grades": pa.array(df["grades"].tolist(), pa.string()),
        "vote": pa.array(df["vote"].tolist(), pa.string()),
        "relevant": pa.array([None if pd.isna(v) else bool(v) for v in df["relevant"]], pa.bool_()),
        "source": pa.array(df["source"].tolist(), pa.string()),
        "grade": pa.array(df["grade"].astype("int32").to_numpy(), pa.int32()),
        "original": pa.array([None if pd.isna(v) else int(v) for v in df["original"]], pa.int32()),
        "included": pa.array(df["included"].astype(bool).tolist(), pa.bool_()),
    })


# ---------------------------------------------------------------------------------- agreement

def _nan_to_none(x: float) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def assessor_agreement(
    judgments,
    *,
    threshold: int | None = None,
    scale: Sequence[int] | None = None,
    level: str = "ordinal",
) -> tuple[dict, pd.DataFrame]:
    """Inter-assessor agreement on a judgments table.

    Returns a summary (Krippendorff's alpha at ``level`` over all items, missing grades allowed;
    Fleiss' kappa over the items judged by the most common number (>= 2) of assessors; the mean
    of the pairwise Cohen's kappas; each also on grades binarized at ``threshold`` when given)
    and a table with one row per assessor pair (items judged by both, Cohen's kappa unweighted and
    linearly weighted, and binary).
    """
    from sklearn.metrics import cohen_kappa_score  # lazy: scikit-learn takes seconds to import
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa  # lazy: statsmodels, likewise

    df = _judgments_frame(judgments)
    if df.empty:
        raise InputError("empty-file", "no grades to compare")
    cats = sorted(set(int(x) for x in (scale or [])) | set(int(x) for x in df["grade"].unique()))
    wide = df.pivot_table(index=["qid", "docid"], columns="assessor", values="grade", aggfunc="first")
    assessors = sorted(wide.columns)
    wide = wide[assessors]
    mat = wide.to_numpy(dtype=float)  # items x assessors, NaN = not judged
    out: dict = {"items": int(mat.shape[0]), "assessors": len(assessors), "level": level,
                 "threshold": threshold}
    counts = (~np.isnan(mat)).sum(axis=1)
    out["grades_per_item"] = {str(k): int(v) for k, v in zip(*np.unique(counts, return_counts=True))}
    multi = counts >= 2
    out["items_with_2_or_more"] = int(multi.sum())

    def alpha(m: np.ndarray, lvl: str) -> float | None:
        m = m[(~np.isnan(m)).sum(axis=1) >= 2]
        if len(m) == 0 or len(np.unique(m[~np.isnan(m)])) < 2:
            return None
        return _nan_to_none(float(krippendorff.alpha(reliability_data=m.T, level_of_measurement=lvl)))

    def fleiss(m: np.ndarray, categories: list[int]) -> tuple[float | None, int, int]:
        c = (~np.isnan(m)).sum(axis=1)
        cand = c[c >= 2]
        if len(cand) == 0:
            return None, 0, 0
        vals, freq = np.unique(cand, return_counts=True)
        k = int(vals[np.argmax(freq)])  # most common number of raters (ties: fewer raters)
        rows = m[c == k]
        data = np.array([r[~np.isnan(r)] for r in rows], dtype=int)
        table, present = aggregate_raters(data, n_cat=None)
        # pad the categories present to the whole scale, for a table that does not depend on the data
        full = np.zeros((len(rows), len(categories)))
        for j, cat in enumerate(present):
            full[:, categories.index(int(cat))] = table[:, j]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kappa = float(fleiss_kappa(full, method="fleiss"))
        return _nan_to_none(kappa), k, int(len(rows))

    out["krippendorff_alpha"] = alpha(mat, level)
    out["fleiss_kappa"], out["fleiss_raters"], out["fleiss_items"] = fleiss(mat, cats)
    binm = None
    if threshold is not None:
        binm = np.where(np.isnan(mat), np.nan, (mat >= threshold).astype(float))
        out["krippendorff_alpha_binary"] = alpha(binm, "nominal")
        out["fleiss_kappa_binary"] = fleiss(binm, [0, 1])[0]

    pair_rows = []
    for i, j in combinations(range(len(assessors)), 2):
        both = ~np.isnan(mat[:, i]) & ~np.isnan(mat[:, j])
        n = int(both.sum())
        if n < 2:
            continue
        a, b = mat[both, i].astype(int), mat[both, j].astype(int)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            k = _nan_to_none(float(cohen_kappa_score(a, b, labels=cats)))
            kw = _nan_to_none(float(cohen_kappa_score(a, b, labels=cats, weights="linear")))
            kb = None
            if threshold is not None:
                kb = _nan_to_none(float(cohen_kappa_score(a >= threshold, b >= threshold, labels=[False, True])))
        pair_rows.append((assessors[i], assessors[j], n, float(np.mean(a == b)), k, kw, kb))
    pairs = pd.DataFrame(pair_rows, columns=["assessor_a", "assessor_b", "items", "exact_agreement", "cohen_kappa",
                                             "cohen_kappa_linear", "cohen_kappa_binary"])
    finite = pairs["cohen_kappa"].dropna()
    out["cohen_kappa_mean"] = float(finite.mean()) if len(finite) else None
    out["assessor_pairs"] = int(len(pairs))
    if threshold is not None:
        fb = pairs["cohen_kappa_binary"].dropna()
        out["cohen_kappa_binary_mean"] = float(fb.mean()) if len(fb) else None
    return out, pairs
