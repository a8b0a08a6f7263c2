"""Run manifests: which group submitted each run, with its priority, baseline flag and subtask.

CSV (header row) or TOML (an array of tables ``[[runs]]``). Columns:

=========  ========  ==========================================================================
run        required  the run's name (its tag)
group      required  the submitting group
priority   optional  integer; 1 is the highest priority, as on TREC submission forms (default 1)
baseline   optional  true/false, yes/no, 1/0 (default false)
subtask    optional  e.g. ``rerank`` or ``fullrank`` (default empty)
file       optional  the run's file name; then each file's tag must equal its ``run``
...        optional  any further columns are kept as they are
=========  ========  ==========================================================================
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from pathlib import Path

import pandas as pd

from qrelkit.errors import InputError, quoted
from qrelkit.io.tables import first_row_line, read_frame
from qrelkit.io.text import read_text

_TRUE = {"true", "yes", "y", "1", "t"}
_FALSE = {"false", "no", "n", "0", "f", ""}


def _missing(v) -> bool:
    """A value a TOML table left out (pandas fills it with NaN)."""
    return v is None or (isinstance(v, float) and math.isnan(v))


def _line_in(message: str) -> int | None:
    m = re.search(r"\bline (\d+)", message)
    return int(m.group(1)) if m else None


def read_manifest(path: str | os.PathLike) -> pd.DataFrame:
    """Read and validate a manifest; returns one row per run (strings, ``priority`` int,
    ``baseline`` bool); ``attrs``: ``path`` (the file) and ``lines`` (run -> its line, None in
    a TOML manifest), which the readers of the runs name in their errors.

    Examples
    --------
    >>> from qrelkit import read_manifest
    >>> from qrelkit.simulate.toy import toy_file
    >>> path = toy_file("manifest.csv", "run,group,priority,baseline\\nbm25,organizers,1,true\\nbert,uni,1,false\\n")
    >>> manifest = read_manifest(path)
    >>> manifest[["run", "group", "priority", "baseline"]].to_dict("list")
    {'run': ['bm25', 'bert'], 'group': ['organizers', 'uni'], 'priority': [1, 1], 'baseline': [True, False]}
    """
    p = Path(path)
    if p.suffix == ".toml":
        try:
            doc = tomllib.loads(read_text(p))
        except tomllib.TOMLDecodeError as exc:
            raise InputError("bad-toml", str(exc), file=str(p), line=_line_in(str(exc))) from None
        rows = doc.get("runs", doc.get("run"))
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise InputError("missing-column", "TOML manifest needs an array of tables [[runs]]", file=str(p))
        # dtype=object: a key left out of one table must not turn the column's integers to floats
        df = pd.DataFrame(rows, dtype=object)
        line_of = {i: None for i in range(len(df))}
        header_line = None
    else:
        try:
            if p.stat().st_size == 0:
                raise InputError("empty-file", "manifest lists no runs", file=str(p))
        except OSError as exc:
            raise InputError("unreadable", exc.strerror or str(exc), file=str(p)) from None
        # any extension: a manifest is CSV-like, its delimiter sniffed from the header
        df = read_frame(p, strings="all", fmt="csv", delimiter="auto", what="CSV manifest")
        line_of = {i: i + 2 for i in range(len(df))}  # header is line 1
        header_line = 1
    df.columns = [str(c).strip().lower() for c in df.columns]
    for col in ("run", "group"):
        if col not in df.columns:
            raise InputError("missing-column", f"manifest needs a {col!r} column", file=str(p), line=header_line)
    if df.empty:
        raise InputError("empty-file", "manifest lists no runs", file=str(p))
    for col in ("run", "group"):
        df[col] = ["" if _missing(v) else str(v).strip() for v in df[col]]
        for i, v in enumerate(df[col]):
            if not v:
                raise InputError("missing-value", f"empty {col} name", file=str(p), line=line_of[i])
    dup = df["run"].duplicated()
    if dup.any():
        i = int(dup.to_numpy().nonzero()[0][0])
        raise InputError("duplicate-run", f"run {df['run'].iloc[i]!r} listed twice", file=str(p), line=line_of[i])
    if "priority" not in df.columns:
        df["priority"] = 1
    prio = []
    for i, v in enumerate(df["priority"]):
        s = "" if _missing(v) else str(v).strip()
        if not s:
            prio.append(1)  # left out: the default
            continue
        try:
            prio.append(int(s))
        except ValueError:
            raise InputError("bad-priority", f"priority {quoted(s)} is not an integer", file=str(p), line=line_of[i]) from None
    df["priority"] = prio
    if "baseline" not in df.columns:
        df["baseline"] = False
    base = []
    for i, v in enumerate(df["baseline"]):
        s = "" if _missing(v) else str(v).strip().lower()
        if isinstance(v, bool):
            base.append(v)
        elif s in _TRUE:
            base.append(True)
        elif s in _FALSE:
            base.append(False)
        else:
            raise InputError("bad-baseline", f"baseline {v!r} is not true/false", file=str(p), line=line_of[i])
    df["baseline"] = base
    if "subtask" not in df.columns:
        df["subtask"] = ""
    df["subtask"] = ["" if _missing(v) else str(v).strip() for v in df["subtask"]]
    front = ["run", "group", "priority", "baseline", "subtask"]
    out = df[front + [c for c in df.columns if c not in front]].reset_index(drop=True)
    out.attrs.update(path=str(p), lines={run: line_of[i] for i, run in enumerate(out["run"])})  # for run readers' errors
    return out


def read_run_depths(path: str | os.PathLike) -> dict[str, int]:
    """A per-run pool depth table (columns ``run``, ``depth``; CSV, TSV, JSONL or Parquet):
    run name (a string as written) -> depth. Rules: ``missing-column``, ``bad-depth`` (not a
    non-negative integer)."""
    p = Path(path)
    df = read_frame(p, strings="all", what="per-run depth file")
    df.columns = [str(c).strip().lower() for c in df.columns]
    if not {"run", "depth"} <= set(df.columns):
        raise InputError("missing-column", "per-run depth file needs columns run,depth", file=str(p), line=1)
    first = first_row_line(p)
    out = {}
    for i, (run, depth) in enumerate(zip(df["run"], df["depth"])):
        s = str(depth).strip()
        try:
            d = int(float(s)) if s and float(s) == int(float(s)) else None
        except (ValueError, OverflowError):
            d = None
        if d is None or d < 0:
            raise InputError("bad-depth", f"depth {s!r} of run {run!r} is not a non-negative integer",
                             file=str(p), line=i + first)
        out[str(run).strip()] = d
    return out
