"""Which runs feed the pool (docs/protocol.md section 1, "Runs that feed the pool").

One rule, used by every command that needs the pooled runs (:func:`pool_selection`): a manifest
with a ``pooled`` column (as ``qrelkit pool select -o`` writes, or filled by hand) is taken as it
is; a manifest without one gets the selection rule of :func:`select_pool_runs`."""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from qrelkit.errors import InputError
from qrelkit.pooler.params import SelectionParams, declared


def select_pool_runs(
    manifest: pd.DataFrame,
    *,
    per_group: int | None = None,
    include_baselines: bool | None = None,
    by_subtask: bool | None = None,
    priority_order: str | None = None,
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
) -> pd.DataFrame:
    """Mark the pooled runs of a manifest.

    All baselines (``include_baselines``), plus the ``per_group`` highest-priority runs of each
    group — per subtask when ``by_subtask`` — plus ``include``, minus ``exclude`` (exclusion
    wins). Priority 1 is the highest when ``priority_order="ascending"`` (TREC's convention);
    ties in priority are broken by run name. Baselines do not use up a group's quota. A keyword
    left None is the declared ``[selection]`` value (:class:`~qrelkit.pooler.params.SelectionParams`).

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
    d = declared(SelectionParams, per_group=per_group, include_baselines=include_baselines, by_subtask=by_subtask,
                 priority_order=priority_order)
    per_group, include_baselines, by_subtask, priority_order = (d[k] for k in d)
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


_TRUE = {"true", "yes", "y", "1", "t"}
_FALSE = {"false", "no", "n", "0", "f", ""}


def pooled_flag(value, run: str) -> bool:
    """One ``pooled`` cell as a boolean (true/false, yes/no, 1/0; empty is false)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    s = "" if value is None or (isinstance(value, float) and np.isnan(value)) else str(value).strip().lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    raise InputError("bad-pooled", f"run {run!r}: pooled {value!r} is not true/false")


def manifest_column(manifest: pd.DataFrame, name: str) -> str | None:
    """The manifest's column called ``name`` whatever its case and surrounding spaces
    (``Pooled``, `` pooled``), or None: how every command finds the ``pooled`` column.

    Examples
    --------
    >>> import pandas as pd
    >>> from qrelkit.pooler.select import manifest_column
    >>> manifest_column(pd.DataFrame(columns=["run", "Pooled"]), "pooled")
    'Pooled'
    >>> manifest_column(pd.DataFrame(columns=["run"]), "pooled") is None
    True
    """
    cols = {str(c).strip().lower(): c for c in manifest.columns}
    return cols.get(name.lower())


def pool_selection(manifest: pd.DataFrame, **selection) -> pd.DataFrame:
    """The manifest with ``pooled: bool`` and ``reason: str``: its own ``pooled`` column (any case,
    :func:`manifest_column`) taken as it is (reason ``manifest`` where it gives none), else
    :func:`select_pool_runs` with ``selection``'s arguments."""
    pooled = manifest_column(manifest, "pooled")
    if pooled is None:
        return select_pool_runs(manifest, **selection)
    reason_col = manifest_column(manifest, "reason")
    df = manifest.copy()
    df["pooled"] = [pooled_flag(v, r) for v, r in zip(df[pooled], df["run"].astype(str))]
    reason = df[reason_col] if reason_col is not None else pd.Series([""] * len(df), index=df.index)
    df["reason"] = ["manifest" if pd.isna(x) or str(x).strip() == "" else str(x) for x in reason]
    return df
