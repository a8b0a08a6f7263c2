"""Which runs feed the pool (PROTOCOL.md section 1, "Runs that feed the pool")."""

from __future__ import annotations

from typing import Iterable

import pandas as pd

from qrelkit.errors import InputError


def select_pool_runs(
    manifest: pd.DataFrame,
    *,
    per_group: int = 3,
    include_baselines: bool = True,
    by_subtask: bool = True,
    priority_order: str = "ascending",
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
) -> pd.DataFrame:
    """Mark the pooled runs of a manifest.

    All baselines (``include_baselines``), plus the ``per_group`` highest-priority runs of each
    group — per subtask when ``by_subtask`` — plus ``include``, minus ``exclude`` (exclusion
    wins). Priority 1 is the highest when ``priority_order="ascending"`` (TREC's convention);
    ties in priority are broken by run name. Baselines do not use up a group's quota.

    Returns the manifest with ``pooled: bool`` and ``reason: str`` columns, in manifest order.
    Also importable as ``qrelkit.select_runs``.

    Examples
    --------
    >>> import pandas as pd
    >>> from qrelkit import select_runs
    >>> manifest = pd.DataFrame({"run": ["a", "b", "c"], "group": ["g1", "g1", "g2"], "subtask": "passages",
    ...                          "priority": [1, 2, 1], "baseline": [False, False, True]})
    >>> selected = select_runs(manifest, per_group=1)
    >>> selected["pooled"].tolist()
    [True, False, True]
    >>> dict(zip(selected["run"], selected["reason"]))
    {'a': 'priority 1 of group', 'b': 'not selected', 'c': 'baseline'}
    """
    if priority_order not in ("ascending", "descending"):
        raise InputError("bad-option", "priority_order must be 'ascending' or 'descending'")
    if per_group < 0:
        raise InputError("bad-option", "per_group must be >= 0")
    include, exclude = set(include), set(exclude)
    known = set(manifest["run"])
    for name in sorted((include | exclude) - known):
        raise InputError("unknown-run", f"run {name!r} named in include/exclude is not in the manifest")
    df = manifest.copy()
    df["pooled"] = False
    df["reason"] = ""
    if include_baselines:
        df.loc[df["baseline"], ["pooled", "reason"]] = [True, "baseline"]
    keys = ["group", "subtask"] if by_subtask else ["group"]
    cand = df[~df["pooled"]].copy()
    cand["_p"] = cand["priority"] if priority_order == "ascending" else -cand["priority"]
    cand = cand.sort_values(keys + ["_p", "run"], kind="stable")
    cand["_n"] = cand.groupby(keys, sort=False).cumcount()
    top = cand.index[cand["_n"] < per_group]
    df.loc[top, "pooled"] = True
    df.loc[top, "reason"] = [f"priority {p} of group" for p in df.loc[top, "priority"]]
    for name in include:
        m = df["run"] == name
        if not df.loc[m, "pooled"].any():
            df.loc[m, ["pooled", "reason"]] = [True, "included"]
    for name in exclude:
        df.loc[df["run"] == name, ["pooled", "reason"]] = [False, "excluded"]
    df.loc[~df["pooled"] & (df["reason"] == ""), "reason"] = "not selected"
    return df
