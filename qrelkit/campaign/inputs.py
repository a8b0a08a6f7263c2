"""The tables a campaign's stages read: its recorded inputs (runs, manifest, topics, initial
qrels) and what earlier stages wrote beside the store (selection, classes, pool), each read at its
first use and kept for the run (the ones a later stage rewrites are read again each time)."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import pandas as pd
import pyarrow as pa

from qrelkit.campaign.settings import Settings
from qrelkit.io.manifest import read_manifest
from qrelkit.io.qrels import read_qrels
from qrelkit.io.runs import RunSet, read_runs
from qrelkit.io.tables import read_frame, read_table
from qrelkit.pooler import pooled_flag
from qrelkit.store import CampaignStore


class Inputs:
    """The campaign's tables (see the module's docstring): ``directory`` the campaign's folder,
    ``paths`` its recorded inputs (``runs``, ``manifest``, ``qrels``, ``corpus``), read with
    ``settings`` (the runs' rules and tie order, the grade scale)."""

    def __init__(self, directory: Path, store: CampaignStore, paths: dict, settings: Settings) -> None:
        self.dir, self.store, self.paths, self.settings = directory, store, paths, settings

    @cached_property
    def runset(self) -> RunSet:
        """Every submitted run, validated against the topics and the manifest."""
        return read_runs([Path(p) for p in self.paths["runs"]], **self.settings.runs.read_args(),
                         topics=self.topic_ids, manifest=self.manifest, ties=self.settings.pool.ties)

    @cached_property
    def manifest(self) -> pd.DataFrame:
        return read_manifest(self.paths["manifest"])

    @cached_property
    def topic_ids(self) -> list[str]:
        """The campaign's topics, in the store's (natural) order."""
        return self.store.topics.all()["qid"].astype(str).tolist()

    @property
    def selection(self) -> pd.DataFrame:
        """The select stage's table (``selection.csv``): every run, pooled or not, and why."""
        return read_frame(self.dir / "selection.csv", what="selection")

    @property
    def pooled_runs(self) -> list[str]:
        sel = self.selection
        pooled = {str(r) for v, r in zip(sel["pooled"], sel["run"]) if pooled_flag(v, str(r))}
        return sorted(pooled & set(self.runset.runs))

    @cached_property
    def classes(self) -> pa.Table | None:
        """The near-duplicate classes of the dedupe stage (None when it did not run)."""
        p = self.dir / "classes.parquet"
        return read_table(p) if p.exists() else None

    @property
    def pool(self) -> pd.DataFrame:
        """The pool stage's pool (``pool.parquet``)."""
        return read_table(self.dir / "pool.parquet").to_pandas()

    def initial_qrels(self) -> pa.Table | None:
        """The qrels given at init (None without), on the campaign's grade scale."""
        q = self.paths.get("qrels")
        return read_qrels(q, scale=self.settings.labels.scale) if q else None
