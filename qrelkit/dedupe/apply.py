"""Using near-duplicate classes: expanded qrels and the per-topic expansion table.

Run deduplication lives in :func:`qrelkit.io.classes.dedupe_runs` (shared with the pools).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.io.classes import map_to_classes
from qrelkit.io.qrels import QRELS_SCHEMA, sort_qrels
from qrelkit.io.runs import qid_order


def label_class_members(qrels: pa.Table, classes: pa.Table) -> tuple[pa.Table, pd.DataFrame]:
    """Give every member of a judged class its class's label (TREC 2022 "expanded qrels").

    A class's label is its canonical member's grade when the canonical was judged, else the
    highest grade among its judged members. Judged passages keep their own grades; negative
    grades (pooled, not judged) are not propagated. Returns the expanded qrels and a table of
    classes whose judged members disagree (topic, class, grades).
    """
    q = qrels.filter(pc.greater_equal(qrels["rel"], 0))
    cls = map_to_classes(q["docid"], classes)
    df = pd.DataFrame({
        "qid": q["qid"].to_numpy(zero_copy_only=False),
        "docid": q["docid"].to_numpy(zero_copy_only=False),
        "class_id": cls.to_numpy(zero_copy_only=False),
        "rel": q["rel"].to_numpy(),
    })
    df["canonical"] = df["docid"] == df["class_id"]
    # class label: canonical's grade if judged, else the max
    lab = df.sort_values(["qid", "class_id", "canonical", "rel"], ascending=[True, True, False, False])
    label = lab.drop_duplicates(["qid", "class_id"])[["qid", "class_id", "rel"]].rename(columns={"rel": "class_rel"})
    grades = df.groupby(["qid", "class_id"])["rel"].agg(lambda s: sorted(set(int(x) for x in s)))
    conflicts = grades[grades.map(len) > 1].rename("grades").reset_index()
    members = pd.DataFrame({
        "docid": classes["docid"].to_numpy(zero_copy_only=False),
        "class_id": classes["class_id"].to_numpy(zero_copy_only=False),
    })
    expanded = label.merge(members, on="class_id", how="left")
    expanded["docid"] = expanded["docid"].fillna(expanded["class_id"])
    expanded = expanded.merge(df[["qid", "docid", "rel"]], on=["qid", "docid"], how="left")
    expanded["rel"] = expanded["rel"].fillna(expanded["class_rel"]).astype(np.int32)
    out = pd.concat([expanded[["qid", "docid", "rel"]], df[["qid", "docid", "rel"]]]).drop_duplicates(["qid", "docid"])
    unjudged = qrels.filter(pc.less(qrels["rel"], 0))
    table = pa.table({"qid": out["qid"].astype(str).tolist(), "docid": out["docid"].astype(str).tolist(),
                      "rel": pa.array(out["rel"].astype(np.int32).to_numpy(), pa.int32())})
    if unjudged.num_rows:
        keep = pc.invert(pc.is_in(
            pc.binary_join_element_wise(unjudged["qid"], unjudged["docid"], "\x1f"),
            value_set=pc.binary_join_element_wise(table["qid"], table["docid"], "\x1f")))
        table = pa.concat_tables([table, unjudged.filter(keep).select(["qid", "docid", "rel"]).cast(QRELS_SCHEMA)])
    return sort_qrels(table.cast(QRELS_SCHEMA)), conflicts


def expansion_table(qrels: pa.Table, expanded: pa.Table, *, labels: list[int] | None = None) -> pd.DataFrame:
    """Per topic and label: judged passages and passages after expansion (as Table 4 of the
    TREC 2022 Deep Learning overview), with a total row."""
    def counts(t: pa.Table, name: str) -> pd.DataFrame:
        t = t.filter(pc.greater_equal(t["rel"], 0))
        df = pd.DataFrame({"qid": t["qid"].to_numpy(zero_copy_only=False), "rel": t["rel"].to_numpy()})
        return df.groupby(["qid", "rel"]).size().rename(name).reset_index()

    merged = counts(qrels, "judged").merge(counts(expanded, "expanded"), on=["qid", "rel"], how="outer").fillna(0)
    labels = labels if labels is not None else sorted(merged["rel"].astype(int).unique())
    wide = merged.pivot_table(index="qid", columns="rel", values=["judged", "expanded"], fill_value=0, aggfunc="sum")
    cols = {}
    for lab in labels:
        for kind in ("judged", "expanded"):
            cols[f"{kind}_{lab}"] = wide[(kind, lab)] if (kind, lab) in wide.columns else 0
    out = pd.DataFrame(cols, index=wide.index).astype(int)
    out["judged_total"] = out[[f"judged_{lab}" for lab in labels]].sum(axis=1)
    out["expanded_total"] = out[[f"expanded_{lab}" for lab in labels]].sum(axis=1)
    order = {q: i for i, q in enumerate(qid_order(out.index))}
    out = out.sort_index(key=lambda s: s.map(order)).reset_index().rename(columns={"index": "qid"})
    total = out.drop(columns=["qid"]).sum().to_frame().T
    total.insert(0, "qid", "all")
    return pd.concat([out, total], ignore_index=True)
