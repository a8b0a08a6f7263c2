"""A CAL simulation study set up, written and summarized as ``qrelkit cal simulate`` does it:
the topics studied, the judgments made before CAL, the stopping rules watched, the fractional
thread's passages, the four output tables and the per-thread summary.

A Python user who calls these around :func:`~qrelkit.cal.simulation.simulate_cal` gets what the
command computes (``tests/test_cli_shape_parity.py`` checks it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd
import pyarrow as pa

from qrelkit.cal.features import Features
from qrelkit.cal.loop import fractional_candidates
from qrelkit.cal.simulation import SimulationResult
from qrelkit.cal.stopping import StoppingRule, get_rule
from qrelkit.errors import InputError
from qrelkit.io.qrels import read_qrels
from qrelkit.io.tables import read_table, write_table


def select_topics(topics: pd.DataFrame, wanted: Sequence[str] = (), *, file: str | None = None) -> pd.DataFrame:
    """Only the ``wanted`` topics of a topics table (all without ``wanted``); naming none of the
    table's topics is the error ``unknown-topic``."""
    if not wanted:
        return topics
    out = topics[topics["qid"].isin(set(wanted))]
    if len(out) == 0:
        raise InputError("unknown-topic", f"none of {', '.join(wanted)} is in the topics file", file=file)
    return out


def read_initial(path: str | os.PathLike) -> pa.Table:
    """Judgments made before CAL: a table (``.parquet``, ``.csv``, ``.jsonl``) or qrels (any
    other name: TREC text)."""
    p = Path(path)
    return read_table(p) if p.name.lower().endswith((".parquet", ".csv", ".jsonl")) else read_qrels(p)


def watched_rules(names: Iterable[str], stop_when: str | None = None, config: Mapping | None = None) -> dict[str, StoppingRule]:
    """The stopping rules a simulation watches: ``names`` in order (once each), then ``stop_when``
    if it is not among them; each with its parameters from ``config``."""
    names = list(names)
    order = list(dict.fromkeys(names + ([stop_when] if stop_when and stop_when not in names else [])))
    return {n: get_rule(n, config) for n in order}


def fractional_pids(features: Features, fraction: float, seed: int) -> pa.Array:
    """The passage ids of the fractional thread's candidates (a seeded ``fraction`` of the features' passages)."""
    return pa.array(features.pid_list(fractional_candidates(features, fraction, seed)), pa.string())


def write_simulation(result: SimulationResult, folder: str | os.PathLike, params: Mapping[str, Any]) -> None:
    """Write ``log.parquet``, ``summary.csv``, ``rules.csv`` and ``curves.parquet`` into ``folder``
    (created if needed), each with ``params`` in its metadata."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for df, name, kind in ((result.log, "log.parquet", "cal-simulation-log"),
                           (result.summary, "summary.csv", "cal-simulation-summary"),
                           (result.rules, "rules.csv", "cal-simulation-rules"),
                           (result.curves, "curves.parquet", "cal-simulation-curves")):
        write_table(pa.Table.from_pandas(df, preserve_index=False), out / name, kind=kind, params=dict(params))


def _mean(values: pd.Series, digits: int) -> float | None:
    """The rounded mean of ``values``, None when every value is missing."""
    return None if values.isna().all() else round(float(pd.to_numeric(values).mean()), digits)


def thread_summary(result: SimulationResult, rules: Iterable[str]) -> list[dict]:
    """One row per thread: topics, mean R, effort and recall, mean effort to 75% and 95% recall,
    topics that reached 95%, for each rule in ``rules`` how often it fired and the mean recall and
    effort when it did, topics with no relevant passage and curves cut by the effort cap."""
    rows = []
    for t, g in result.summary.groupby("thread", sort=False):
        row = {"thread": t, "topics": len(g), "mean_R": round(float(g["R"].mean()), 1),
               "mean_effort": round(float(g["effort"].mean()), 1), "mean_recall": _mean(g["recall"], 4),
               "effort_75_mean": _mean(g["effort_75"], 1), "effort_95_mean": _mean(g["effort_95"], 1),
               "reached_95": int(g["effort_95"].notna().sum())}
        for n in rules:
            r = result.rules[(result.rules["thread"] == t) & (result.rules["rule"] == n)]
            row[f"{n}_fired"] = int(r["fired"].sum())
            row[f"{n}_recall"] = _mean(r["recall"], 4)
            row[f"{n}_effort"] = _mean(r["effort"], 1)
        row["no_relevant"] = int((g["R"] == 0).sum())
        row["cut_by_max_effort"] = int((g["stopped"] == "max-effort").sum())
        rows.append(row)
    return rows
