"""Propagating labels: to near-duplicates (expanded qrels) and from passages to documents.

**Near-duplicates** (docs/protocol.md section 1 (i)). Every member of a near-duplicate class gets the
label of the class: the canonical passage's grade when it is judged, else the highest grade among
the class's judged members. Passages judged directly keep their own grade (never overwritten);
judged members of one class with different grades are reported as conflicts. Negative grades
(pooled, not judged) are never propagated. The report has one row per topic: judged passages,
relevant ones, passages after expansion, relevant ones, passages added (TREC 2022, Table 4).

**Documents** (docs/protocol.md section 1 (ii)). A document's label is the maximum grade over its
judged passages (``rule="max"``, the default; ``min`` and ``median_high`` are offered for
analysis), where, when classes are given, the near-duplicates of a judged passage count with that
passage's label (the qrels are expanded first). An optional **grade mapping** ("passage grade ->
document grade", e.g. ``{1: 0}``) is applied to each passage grade before the rule: under max, a
passage graded 1 ("related") otherwise makes its document relevant under the document
binarization (1, 2, 3). The passage -> document mapping comes from the corpus's document field, a
mapping table (``pid, docid``), or the passage id itself (``id_separator="#"``: the document is
the id before the first ``#``, as in MS MARCO v2.1 segments; an id without it is its own
document). Passages with no document are counted and left out. The report lists every document
whose passages disagree (different grades).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import krippendorff
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.errors import InputError
from qrelkit.io.classes import map_to_classes
from qrelkit.io.sources import open_corpus
from qrelkit.io.order import qid_order
from qrelkit.io.qrels import QRELS_SCHEMA, judged, sort_qrels
from qrelkit.io.tables import read_table

RULES = ("max", "min", "median_high")


@dataclass
class Expansion:
    """What :func:`expand_qrels` returns: the expanded ``qrels``, their ``source`` (judged or expanded,
    with the class), a per-topic ``report`` and the ``conflicts`` (classes judged with several grades)."""
    qrels: pa.Table  # expanded qrels (QRELS_SCHEMA)
    source: pa.Table  # qid, docid, rel, source ("judged" | "expanded"), class_id
    report: pd.DataFrame  # per topic
    conflicts: pd.DataFrame  # qid, class_id, grades

    def summary(self) -> dict:
        """Totals over the topics of the report, and the number of conflicts."""
        r = self.report
        return {"topics": int(len(r)), "judged": int(r["judged"].sum()), "expanded": int(r["expanded"].sum()),
                "added": int(r["added"].sum()), "added_relevant": int(r["added_relevant"].sum()),
                "conflicts": int(len(self.conflicts))}


def expand_qrels(qrels: pa.Table, classes: pa.Table | None, *, relevant_at: int = 2) -> Expansion:
    """Give every near-duplicate of a judged passage that passage's class label.

    The expansion itself is the dedupe module's (:func:`qrelkit.dedupe.apply.label_class_members`, one
    rule for the whole project); this adds the provenance of each row and the per-topic report.
    ``relevant_at`` is the grade from which the report counts a passage as relevant (the passage
    binarization: 2).

    Examples
    --------
    >>> import pyarrow as pa
    >>> from qrelkit import expand_qrels
    >>> qrels = pa.table({"qid": ["1", "1"], "docid": ["p1", "p3"], "rel": pa.array([2, 0], pa.int32())})
    >>> classes = pa.table({"docid": ["p1", "p2", "p3"], "class_id": ["p1", "p1", "p3"]})
    >>> expand_qrels(qrels, classes).qrels.to_pydict()
    {'qid': ['1', '1', '1'], 'docid': ['p1', 'p2', 'p3'], 'rel': [2, 2, 0]}
    """
    # lazy: importing qrelkit.dedupe compiles/loads its numba kernels (~0.5 s), and evaluate/ imports this module
    from qrelkit.dedupe.apply import label_class_members

    q = qrels.select(["qid", "docid", "rel"]).cast(QRELS_SCHEMA)
    if classes is None or classes.num_rows == 0:
        out, raw_conf = sort_qrels(q), pd.DataFrame(columns=["qid", "class_id", "grades"])
    else:
        out, raw_conf = label_class_members(q, classes)
    conflicts = raw_conf.copy()
    if len(conflicts):
        conflicts["grades"] = [",".join(str(g) for g in v) for v in conflicts["grades"]]
    jq = judged(q)
    direct = pd.DataFrame({"qid": jq["qid"].to_pylist(), "docid": jq["docid"].to_pylist(), "direct": True})
    df = pd.DataFrame({"qid": out["qid"].to_pylist(), "docid": out["docid"].to_pylist(), "rel": out["rel"].to_numpy()})
    df = df.merge(direct, on=["qid", "docid"], how="left")
    df["source"] = np.where(df["rel"] < 0, "unjudged", np.where(df["direct"].fillna(False).astype(bool), "judged", "expanded"))
    cls = map_to_classes(pa.array(df["docid"].tolist(), pa.string()), classes)
    src_t = pa.table({"qid": pa.array(df["qid"].tolist(), pa.string()), "docid": pa.array(df["docid"].tolist(), pa.string()),
                      "rel": pa.array(df["rel"].astype("int32").to_numpy(), pa.int32()),
                      "source": pa.array(df["source"].tolist(), pa.string()), "class_id": cls})
    rows = []
    pos = df[df["rel"] >= 0]
    order = {qq: i for i, qq in enumerate(qid_order(pos["qid"].unique()))}
    for qq, g in sorted(pos.groupby("qid"), key=lambda kv: order[kv[0]]):
        j = g[g["source"] == "judged"]
        a = g[g["source"] == "expanded"]
        nj, nrj = len(j), int((j["rel"] >= relevant_at).sum())
        na, nra = len(a), int((a["rel"] >= relevant_at).sum())
        rows.append((qq, nj, nrj, nj + na, nrj + nra, na, nra, round((nj + na) / nj, 4) if nj else 0.0))
    report = pd.DataFrame(rows, columns=["qid", "judged", "judged_relevant", "expanded", "expanded_relevant", "added",
                                         "added_relevant", "factor"])
    return Expansion(qrels=out, source=src_t, report=report, conflicts=conflicts.reset_index(drop=True))


# ----------------------------------------------------------------------------- documents

def passage_document_map(
    *,
    corpus: str | os.PathLike | None = None,
    mapping: str | os.PathLike | pa.Table | None = None,
    id_separator: str | None = None,
    passages: Iterable[str] | None = None,
) -> pa.Table:
    """``pid, docid``: where each passage belongs, from exactly one source (see the module
    documentation). ``passages`` restricts the table to those ids (memory: a corpus is streamed)."""
    given = [x is not None for x in (corpus, mapping, id_separator)]
    if sum(given) != 1:
        raise InputError("bad-option", "give exactly one passage -> document source: a corpus with a document "
                         "field, a mapping table (pid, docid), or an id separator")
    want = None if passages is None else pa.array(sorted(set(passages)), pa.string())
    if id_separator is not None:
        if want is None:
            raise InputError("bad-option", "an id separator needs the passage ids")
        parts = pc.split_pattern(want, pattern=id_separator, max_splits=1)
        doc = pc.list_element(parts, 0)
        return pa.table({"pid": want, "docid": doc})
    if corpus is not None:
        source = open_corpus(corpus)
        if want is not None:  # by the source's lookup: a seek per id (MS MARCO v2, ir_datasets), else one early-ending pass
            found = source.lookup(set(want.to_pylist()))
            hits = sorted((p, d) for p, (_, d) in found.items() if d is not None)
            if not hits and len(want):
                raise InputError("missing-column", "the corpus has no document field (docid) for the judged passages",
                                 file=str(corpus))
            return pa.table({"pid": pa.array([h[0] for h in hits], pa.string()),
                             "docid": pa.array([h[1] for h in hits], pa.string())})
        chunks = [c.select(["pid", "docid"]).filter(pc.is_valid(c["docid"])) for c in source.chunks()]
        if not chunks:
            return pa.table({"pid": pa.array([], pa.string()), "docid": pa.array([], pa.string())})
        return pa.concat_tables(chunks)
    if isinstance(mapping, pa.Table):
        t = mapping
        src = "<mapping>"
    else:
        t = read_table(mapping)
        src = str(mapping)
    names = t.column_names
    pid_col = next((c for c in ("pid", "passage", "passage_id", "segment_id") if c in names), None)
    doc_col = next((c for c in ("docid", "doc_id", "document", "document_id") if c in names), None)
    if pid_col is None or doc_col is None:
        raise InputError("missing-column", "a mapping table needs columns pid and docid", file=src)
    out = pa.table({"pid": pc.cast(t[pid_col], pa.string()), "docid": pc.cast(t[doc_col], pa.string())})
    dup = pd.Series(out["pid"].to_numpy(zero_copy_only=False)).duplicated()
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        raise InputError("duplicate-member", f"passage {out['pid'][i].as_py()} is mapped to two documents",
                         file=src, line=i + 2)
    if want is not None:
        out = out.filter(pc.is_in(out["pid"], value_set=want))
    return out


def parse_grade_map(spec: str | Mapping | None) -> dict[int, int] | None:
    """``"1=0,2=1"`` or a mapping -> ``{1: 0, 2: 1}``; grades not listed are kept."""
    if spec is None or spec == "" or spec == {}:
        return None
    if isinstance(spec, Mapping):
        return {int(k): int(v) for k, v in spec.items()}
    out = {}
    for part in str(spec).split(","):
        if not part.strip():
            continue
        try:
            k, v = part.split("=")
            out[int(k)] = int(v)
        except ValueError:
            raise InputError("bad-option", f"grade map entries look like 1=0, got {part!r}") from None
    return out


@dataclass
class DocumentLabels:
    """What :func:`propagate_to_documents` returns: the document ``qrels``, one row per topic and
    document in ``documents`` (its passages' grades, the label, whether they disagree) and a ``summary``."""
    qrels: pa.Table  # document qrels
    documents: pd.DataFrame  # qid, docid, passages, grades, min, max, label, disagree
    summary: dict = field(default_factory=dict)

    def disagreements(self) -> pd.DataFrame:
        """The rows of ``documents`` whose passages disagree."""
        return self.documents[self.documents["disagree"]].reset_index(drop=True)

    def empty_reason(self) -> str | None:
        """Why :attr:`qrels` has no row (no passage label, or none maps to a document), or ``None``
        when it has rows."""
        if self.qrels.num_rows:
            return None
        s = self.summary
        if not s.get("passages"):
            return "no judged passage to propagate"
        return f"none of the {s['passages']} judged passages maps to a document"


def propagate_to_documents(
    qrels: pa.Table,
    mapping: pa.Table,
    *,
    rule: str = "max",
    grade_map: Mapping[int, int] | None = None,
    classes: pa.Table | None = None,
) -> DocumentLabels:
    """Document labels from passage labels (see the module documentation).

    Examples
    --------
    >>> import pyarrow as pa
    >>> from qrelkit import propagate_to_documents
    >>> qrels = pa.table({"qid": ["1", "1", "1"], "docid": ["p1", "p2", "p3"], "rel": pa.array([2, 0, 0], pa.int32())})
    >>> passages = pa.table({"pid": ["p1", "p2", "p3"], "docid": ["D1", "D1", "D2"]})
    >>> propagate_to_documents(qrels, passages, rule="max").qrels.to_pydict()
    {'qid': ['1', '1'], 'docid': ['D1', 'D2'], 'rel': [2, 0]}
    """
    if rule not in RULES:
        raise InputError("bad-option", f"rule must be one of {', '.join(RULES)}, got {rule!r}")
    q = judged(qrels.select(["qid", "docid", "rel"]).cast(QRELS_SCHEMA))
    via_duplicates = 0
    if classes is not None:
        exp = expand_qrels(q, classes)
        q = judged(exp.qrels)
        via_duplicates = int(exp.summary()["added"])
    m = mapping.select(["pid", "docid"]).to_pandas().drop_duplicates("pid")
    df = pd.DataFrame({"qid": q["qid"].to_pylist(), "pid": q["docid"].to_pylist(), "rel": q["rel"].to_numpy().astype("int64")})
    if grade_map:
        df["rel"] = df["rel"].map(lambda g: grade_map.get(int(g), int(g))).astype("int64")
    df = df.merge(m, on="pid", how="left")
    unmapped = df[df["docid"].isna()]
    df = df[df["docid"].notna()]
    df = df.sort_values(["qid", "docid", "rel", "pid"], ascending=[True, True, False, True], kind="mergesort")
    g = df.groupby(["qid", "docid"], sort=True)["rel"]
    docs = g.agg(passages="count", min="min", max="max").reset_index()
    lists = g.apply(lambda s: list(s))  # grades, highest first
    docs["grades"] = [",".join(str(x) for x in v) for v in lists]
    if rule == "max":
        docs["label"] = docs["max"]
    elif rule == "min":
        docs["label"] = docs["min"]
    else:
        docs["label"] = [sorted(v)[len(v) // 2] for v in lists]
    docs["disagree"] = docs["min"] != docs["max"]
    order = {qq: i for i, qq in enumerate(qid_order(docs["qid"].unique()))} if len(docs) else {}
    docs = docs.assign(_o=docs["qid"].map(order)).sort_values(["_o", "docid"], kind="mergesort").drop(columns="_o")
    docs = docs[["qid", "docid", "passages", "grades", "min", "max", "label", "disagree"]].reset_index(drop=True)
    out = pa.table({"qid": pa.array(docs["qid"].astype(str).tolist(), pa.string()),
                    "docid": pa.array(docs["docid"].astype(str).tolist(), pa.string()),
                    "rel": pa.array(docs["label"].astype("int32").to_numpy(), pa.int32())})
    multi = docs["passages"] > 1
    summary = {
        "rule": rule,
        "grade_map": {str(k): v for k, v in sorted((grade_map or {}).items())},
        "passages": int(q.num_rows),
        "passages_via_duplicates": via_duplicates,
        "passages_unmapped": int(len(unmapped)),
        "documents": int(len(docs)),
        "documents_multi_passage": int(multi.sum()),
        "documents_disagree": int(docs["disagree"].sum()),
        "labels": {str(k): int(v) for k, v in docs["label"].value_counts().sort_index().items()},
    }
    return DocumentLabels(qrels=sort_qrels(out.cast(QRELS_SCHEMA)), documents=docs, summary=summary)


def max_rule_feasibility(passage_qrels: pa.Table, document_qrels: pa.Table) -> pd.DataFrame:
    """Without a passage -> document mapping: can these document labels come from these passage
    labels under the max rule?

    Each document labelled g needs a passage of its topic graded exactly g of its own (a passage
    belongs to one document), and passages may have no document. So a mapping exists exactly when,
    for every topic and grade g, there are at least as many passages graded g as documents
    labelled g. Returns one row per (topic, grade): documents, passages, feasible.
    """
    p = judged(passage_qrels).to_pandas()
    d = judged(document_qrels).to_pandas()
    pc_ = p.groupby(["qid", "rel"]).size().rename("passages")
    dc = d.groupby(["qid", "rel"]).size().rename("documents")
    t = pd.concat([dc, pc_], axis=1).fillna(0).astype(int).reset_index().rename(columns={"rel": "grade"})
    t = t[t["documents"] > 0].copy()
    t["feasible"] = t["documents"] <= t["passages"]
    order = {qq: i for i, qq in enumerate(qid_order(t["qid"].unique()))} if len(t) else {}
    return (t.assign(_o=t["qid"].map(order)).sort_values(["_o", "grade"]).drop(columns="_o")
            [["qid", "grade", "documents", "passages", "feasible"]].reset_index(drop=True))


def compare_labels(a: pa.Table, b: pa.Table, *, relevant: Iterable[int] | None = None) -> tuple[dict, pd.DataFrame]:
    """Agreement of two label sets on the (topic, item) pairs both hold: counts, exact agreement,
    Cohen's kappa (unweighted and linear; scikit-learn), Krippendorff's alpha (ordinal;
    ``krippendorff``), and the same on binary labels when ``relevant`` grades are given. Returns
    the summary and the confusion table (``grade_a, grade_b, count``)."""
    from sklearn.metrics import cohen_kappa_score  # lazy: scikit-learn takes seconds to import

    da = judged(a.select(["qid", "docid", "rel"])).to_pandas()
    db = judged(b.select(["qid", "docid", "rel"])).to_pandas()
    m = da.merge(db, on=["qid", "docid"], suffixes=("_a", "_b"))
    only_a = len(da) - len(m)
    only_b = len(db) - len(m)
    out = {"pairs_a": int(len(da)), "pairs_b": int(len(db)), "common": int(len(m)), "only_a": int(only_a),
           "only_b": int(only_b), "common_topics": int(m["qid"].nunique())}
    if len(m):
        x, y = m["rel_a"].to_numpy(), m["rel_b"].to_numpy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out["exact_agreement"] = float(np.mean(x == y))
            out["cohen_kappa"] = float(cohen_kappa_score(x, y))
            out["cohen_kappa_linear"] = float(cohen_kappa_score(x, y, weights="linear"))
            out["krippendorff_alpha_ordinal"] = float(krippendorff.alpha(
                reliability_data=np.vstack([x, y]).astype(float), level_of_measurement="ordinal"))
            if relevant is not None:
                rs = sorted(set(int(g) for g in relevant))
                bx, by = np.isin(x, rs), np.isin(y, rs)
                out["relevant_grades"] = rs
                out["binary_agreement"] = float(np.mean(bx == by))
                out["relevant_a"] = int(bx.sum())
                out["relevant_b"] = int(by.sum())
                out["cohen_kappa_binary"] = float(cohen_kappa_score(bx, by))
    conf = m.groupby(["rel_a", "rel_b"]).size().reset_index(name="count").rename(
        columns={"rel_a": "grade_a", "rel_b": "grade_b"})
    return out, conf
