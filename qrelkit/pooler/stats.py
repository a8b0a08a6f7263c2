"""Pool statistics: sizes per topic, contributions per run and group, overlap between runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from qrelkit.io.order import qid_order


def explode_provenance(pool: pa.Table) -> pd.DataFrame:
    """One row per (qid, docid, run, rank) from a pool's provenance lists."""
    lens = pc.list_value_length(pool["runs"]).to_numpy(zero_copy_only=False)
    lens = np.nan_to_num(lens.astype(float)).astype(np.int64)
    flat = pc.list_flatten(pool["runs"])
    if isinstance(flat, pa.ChunkedArray):
        flat = flat.combine_chunks()
    item = np.repeat(np.arange(pool.num_rows), lens)
    return pd.DataFrame(
        {
            "item": item,
            "run": flat.field("run").to_numpy(zero_copy_only=False),
            "rank": flat.field("rank").to_numpy(zero_copy_only=False),
        }
    )


def pool_stats(pool: pa.Table, manifest: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """Tables describing a pool.

    * ``topics``: qid, size, and (when the pool has judgments) judged, unjudged, relevant counts;
    * ``runs``: per run its group, items contributed, items only it contributed, items only its
      group contributed;
    * ``groups``: per group items contributed and unique items;
    * ``overlap``: per pair of runs the number of pooled items both contributed.

    ``manifest`` maps runs to groups; without it every run is its own group.
    """
    qids = pool["qid"].to_numpy(zero_copy_only=False)
    topics = pd.Series(qids).value_counts().rename_axis("qid").reset_index(name="size")
    if "judged" in pool.column_names:
        j = pd.DataFrame({"qid": qids, "judged": pool["judged"].to_numpy(zero_copy_only=False)})
        topics = topics.merge(j.groupby("qid")["judged"].sum().rename("judged").reset_index(), on="qid")
        topics["unjudged"] = topics["size"] - topics["judged"]
    order = {q: i for i, q in enumerate(qid_order(topics["qid"]))}
    topics = topics.sort_values("qid", key=lambda s: s.map(order)).reset_index(drop=True)

    ex = explode_provenance(pool)
    group_of = {}
    if manifest is not None:
        group_of = dict(zip(manifest["run"], manifest["group"]))
    ex["group"] = [group_of.get(r, r) for r in ex["run"]]
    runs_per_item = ex.groupby("item")["run"].nunique()
    groups_per_item = ex.groupby("item")["group"].nunique()
    ex["unique_run"] = ex["item"].map(runs_per_item).eq(1)
    ex["unique_group"] = ex["item"].map(groups_per_item).eq(1)
    per_run = (
        ex.groupby("run")
        .agg(group=("group", "first"), contributed=("item", "nunique"), unique=("unique_run", "sum"),
             unique_to_group=("unique_group", "sum"))
        .reset_index()
        .sort_values("run")
        .reset_index(drop=True)
    )
    g = ex.drop_duplicates(["item", "group"])
    per_group = (
        g.groupby("group").agg(contributed=("item", "nunique"), unique=("unique_group", "sum")).reset_index()
        .sort_values("group").reset_index(drop=True)
    )
    names = sorted(ex["run"].unique())
    col = {r: i for i, r in enumerate(names)}
    if len(ex):
        x = sp.csr_matrix(
            (np.ones(len(ex), np.int32), (ex["item"].to_numpy(), ex["run"].map(col).to_numpy())),
            shape=(pool.num_rows, len(names)),
        )
        x.data[:] = 1
        co = (x.T @ x).tocoo()
        overlap = pd.DataFrame({"run_a": np.array(names)[co.row], "run_b": np.array(names)[co.col], "shared": co.data})
        overlap = overlap[overlap["run_a"] < overlap["run_b"]].sort_values(["run_a", "run_b"]).reset_index(drop=True)
    else:
        overlap = pd.DataFrame(columns=["run_a", "run_b", "shared"])
    for df in (per_run, per_group):
        for c in ("contributed", "unique", "unique_to_group"):
            if c in df:
                df[c] = df[c].astype(int)
    return {"topics": topics, "runs": per_run, "groups": per_group, "overlap": overlap}
