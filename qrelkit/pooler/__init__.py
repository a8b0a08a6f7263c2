"""Pools, pool-run selection, fractional collections and assessor batches.

Pool kinds by name: :func:`make_pool`, :func:`configured_pool` (the kind's parameters from a
configuration), :func:`available_pools`, :func:`register_pool` (:mod:`qrelkit.pooler.registry`)."""

from __future__ import annotations

from typing import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.pooler.batches import import_batches, make_batches, require_texts
from qrelkit.pooler.fractional import fractional_ids, fractional_ids_from_corpus, fractional_masks, restrict_runs
from qrelkit.pooler.pools import depth_pool, fused_pool, pool_size_distribution, top1_pool
from qrelkit.pooler.registry import (
    ConfiguredPool, PoolSpec, available_pools, configured_pool, fractional_pool, make_pool, pool_kind, pool_parameters,
    pool_spec, register_pool,
)
from qrelkit.pooler.select import manifest_column, pool_selection, pooled_flag, select_pool_runs
from qrelkit.pooler.stats import pool_stats


def filter_runs(runs: pa.Table, names: Iterable[str]) -> pa.Table:
    """Only the rows of the named runs (canonical order is kept)."""
    return runs.filter(pc.is_in(runs["run"], value_set=pa.array(sorted(set(names)), pa.string())))


__all__ = [
    "ConfiguredPool", "PoolSpec", "available_pools", "configured_pool", "depth_pool", "filter_runs", "fractional_ids",
    "fractional_ids_from_corpus", "fractional_masks", "fractional_pool", "fused_pool", "import_batches", "make_batches",
    "make_pool", "manifest_column", "pool_kind", "pool_parameters", "pool_selection", "pool_size_distribution",
    "pool_spec", "pool_stats", "pooled_flag", "register_pool", "require_texts", "restrict_runs", "select_pool_runs",
    "top1_pool",
]
