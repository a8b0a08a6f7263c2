"""Pool tables written by the pool commands, read back with the parameters they were built with."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from qrelkit.errors import InputError
from qrelkit.io.tables import read_metadata, read_table


def read_pool(path: str | os.PathLike) -> tuple[pa.Table, dict]:
    """A pool table (``qrelkit pool depth|top1|fused|fractional -o``) and its build parameters
    (``depth``, ``per_run_depth``, ``pooled_runs``, ``ties``, ...; ``{}`` unless it is Parquet,
    the only format that carries them). A table without the provenance column ``runs`` is the
    error ``missing-column``."""
    t = read_table(path)
    if "runs" not in t.column_names:
        raise InputError("missing-column", "not a pool table (no provenance column 'runs')", file=str(path))
    params = (read_metadata(path).get("params", {}) or {}) if Path(path).suffix == ".parquet" else {}
    return t, params
