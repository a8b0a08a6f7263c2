"""A leave-out study set up as ``qrelkit reuse leave-out`` sets it up: the options from the
protocol file (flags win), what the pool table says (depths, tie rule, pooled runs), which runs
count as pooled and where that came from, and the reduced qrels of every unit.

A Python user who calls these and then :func:`~qrelkit.reuse.leaveout.leave_out` gets what the
command computes (``tests/test_cli_shape_parity.py`` checks it).
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd
import pyarrow as pa

from qrelkit.evaluate.params import EvalParams
from qrelkit.evaluate.protocol import scoring_options
from qrelkit.io.manifest import read_run_depths
from qrelkit.io.qrels import write_qrels
from qrelkit.labels.params import LabelsParams
from qrelkit.pooler.params import PoolParams
from qrelkit.pooler.protocol import configured_selection
from qrelkit.pooler.select import manifest_column
from qrelkit.pooler.saved import read_pool
from qrelkit.reuse.leaveout import DEFAULT_MEASURES, LeaveOutResult, reduced_qrels
from qrelkit.reuse.params import ReuseParams


def leave_out_options(params: ReuseParams | None = None, scoring: EvalParams | None = None,
                      labels: LabelsParams | None = None) -> dict:
    """Keyword arguments of :func:`~qrelkit.reuse.leaveout.leave_out` from the ``[reuse]``
    parameters (and ``[eval]`` missing, relevant, ranking, with ``[labels]`` for a relevance
    scheme, resolved by :func:`~qrelkit.evaluate.protocol.scoring_options`; the measures are
    ``[reuse] measures``, else :data:`~qrelkit.reuse.leaveout.DEFAULT_MEASURES`); the declared
    defaults without.

    Examples
    --------
    >>> from qrelkit.reuse.params import ReuseParams
    >>> from qrelkit.reuse.study import leave_out_options
    >>> opts = leave_out_options(ReuseParams.from_config(None, procedure="run"))
    >>> opts["procedure"], opts["removal"], opts["missing"]
    ('run', 'remove', 'zero')
    """
    p = params or ReuseParams()
    ev = dataclasses.replace(scoring or EvalParams(), measures=list(p.measures or DEFAULT_MEASURES))
    so = scoring_options(ev, labels)
    return dict(procedure=p.procedure, uniqueness=p.uniqueness, orphans=p.orphans, orphan_depth=p.orphan_depth,
                removal=p.removal, measures=so["measures"], missing=so["missing"], rel=so["rel"],
                density_threshold=p.density_threshold, voorhees_share=p.voorhees_relevant_share,
                ranking=so["ranking"])


@dataclass
class PoolSetting:
    """What a leave-out study takes from the pool: the pool table (provenance; None without one),
    the depth, per-run depths, the tie rule that orders equal scores, and the pool's build
    parameters."""

    table: pa.Table | None
    depth: int
    per_run_depth: dict[str, int] | None
    ties: str
    params: dict = field(default_factory=dict)


def pool_setting(config: Any = None, pool: str | os.PathLike | None = None, *, depth: int | None = None,
                 run_depth: str | os.PathLike | None = None) -> PoolSetting:
    """The pool a study simulates: ``pool`` (a table from ``qrelkit pool depth``) if given; the
    depth is ``depth``, else the pool's, else the config's ``[pool] depth``; per-run depths come
    from the ``run_depth`` table, else the pool's parameters; ranks for recomputed provenance
    follow the pool's tie rule, else the config's ``[pool] ties``."""
    cfg = PoolParams.from_config(config)
    table, params = read_pool(pool) if pool is not None else (None, {})
    k = int(depth if depth is not None else params.get("depth") or cfg.depth)
    per_run = None
    if run_depth:
        per_run = read_run_depths(run_depth)
    elif params.get("per_run_depth"):
        per_run = {str(a): int(b) for a, b in params["per_run_depth"].items()}
    ties = str(params.get("ties") or cfg.ties)
    return PoolSetting(table, k, per_run, ties, params)


def pooled_runs(run_names: Iterable[str], manifest: pd.DataFrame | None, pool_params: Mapping[str, Any] | None = None,
                config: Any = None, *, all_pooled: bool = False, pool_name: str = "") -> tuple[list[str] | None, str]:
    """Which runs count as pooled in a study, and the sentence that says where that came from
    (the report states it). In this order: every run (``all_pooled``); else the manifest's
    ``pooled`` column or, without one, the config's selection — both by
    :func:`~qrelkit.pooler.select.pool_selection`, the one rule — except that a pool's own
    ``pooled_runs`` parameter comes before the config's selection; without a manifest or pool
    every run is pooled (returned as None: every run is then its own group as well)."""
    pool_params = pool_params or {}
    if all_pooled:
        return list(run_names), "every run counts as pooled (--all-pooled)"
    if manifest is not None and manifest_column(manifest, "pooled") is not None:
        sel = configured_selection(manifest, config)
        return sel.loc[sel["pooled"], "run"].tolist(), "the manifest's pooled column"
    if pool_params.get("pooled_runs"):
        return [str(r) for r in pool_params["pooled_runs"]], f"the pool's parameters ({pool_name})"
    if manifest is not None:
        sel = configured_selection(manifest, config)
        return sel.loc[sel["pooled"], "run"].tolist(), "the config's pool-run selection (as 'qrelkit pool select')"
    return None, "no manifest: every run counts as pooled and is its own group"


def safe_name(name: str) -> str:
    """A unit name as a file-name part: runs of other characters than ``A-Za-z0-9._-`` become ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name) or "_"


def write_reduced_qrels(qrels: pa.Table, result: LeaveOutResult, folder: str | os.PathLike,
                        removal: str) -> dict[str, str]:
    """Write each unit's reduced qrels (TREC text) as ``FOLDER/qrels-UNIT.txt``; returns file
    name -> path, in unit order."""
    written = {}
    for u in result.units["unit"].to_pylist():
        path = Path(folder) / f"qrels-{safe_name(u)}.txt"
        write_qrels(reduced_qrels(qrels, result.removed, u, removal), path)
        written[f"qrels-{safe_name(u)}.txt"] = str(path)
    return written
