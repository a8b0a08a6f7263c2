"""Pools, pool-run selection, fractional collections and assessor batches.

Pool kinds by name: :func:`make_pool`, :func:`configured_pool` (the kind's parameters from a
configuration), :func:`available_pools`, :func:`register_pool` (:mod:`qrelkit.pooler.registry`).
The parameters of the pooler are declared in :mod:`qrelkit.pooler.params`.

Its names are loaded at their first use (:mod:`qrelkit.lazy`): importing the package, or its
parameters' declarations, loads none of its machinery."""

from qrelkit.lazy import attach

__getattr__ = attach(__name__, {
    "adjudication": ("TopicPool", "adjudicate", "available_strategies", "next_round", "pool_from_lists",
                   "register_strategy", "run_strategy", "simulate_order", "strategy", "topic_pools"),
    "batches": ("import_batches", "make_batches", "require_texts"),
    "fractional": ("fractional_ids", "fractional_ids_from_corpus", "fractional_masks", "restrict_runs"),
    "params": ("AdjudicateParams", "BatchParams", "FractionalParams", "FusedParams", "PoolParams", "SelectionParams", "Top1Params"),
    "pools": ("depth_pool", "filter_runs", "fused_pool", "pool_size_distribution", "top1_pool"),
    "registry": (
        "ConfiguredPool", "PoolSpec", "available_pools", "configured_pool", "fractional_pool", "make_pool", "pool_kind",
        "pool_parameters", "pool_spec", "register_pool",
    ),
    "select": ("manifest_column", "pool_selection", "pooled_flag", "select_pool_runs"),
    "stats": ("pool_stats",),
})

__all__ = [
    "AdjudicateParams", "TopicPool", "adjudicate", "available_strategies", "next_round", "pool_from_lists",
    "register_strategy", "run_strategy", "simulate_order", "strategy", "topic_pools",
    "BatchParams", "ConfiguredPool", "FractionalParams", "FusedParams", "PoolParams", "PoolSpec", "SelectionParams",
    "Top1Params", "available_pools", "configured_pool", "depth_pool", "filter_runs", "fractional_ids",
    "fractional_ids_from_corpus", "fractional_masks", "fractional_pool", "fused_pool", "import_batches", "make_batches",
    "make_pool", "manifest_column", "pool_kind", "pool_parameters", "pool_selection", "pool_size_distribution",
    "pool_spec", "pool_stats", "pooled_flag", "register_pool", "require_texts", "restrict_runs", "select_pool_runs",
    "top1_pool",
]
