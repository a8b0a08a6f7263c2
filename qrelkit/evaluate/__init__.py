"""Evaluation: scoring runs with ir-measures (canonical order, judged topics, a stated
missing-topic policy), duplicates in evaluation, and comparisons between runs. See
``docs/labels-and-evaluation.md``.

Its names are loaded at their first use (:mod:`qrelkit.lazy`): importing the package, or its
parameters' declarations, loads none of its machinery."""

from qrelkit.lazy import attach

__getattr__ = attach(__name__, {
    "compare": (
        "breakdown_from_rr", "correct", "leaderboard_correlation", "outcome_breakdown", "pvalue", "significance",
        "tau_ap",
    ),
    "core": (
        "MISSING_POLICIES", "RANKINGS", "Evaluation", "Judgments", "evaluate", "evaluate_sets", "load_canonical_runs",
        "missing_topic_error", "per_query_matrix", "qrels_dict", "refuse_missing",
    ),
    "duplicates": ("canonical_only_runs", "deduped_runs", "duplicate_effects", "plot_duplicates",),
    "measures": ("NCG", "computable", "parse_measures", "supported_names", "with_relevance",),
})

__all__ = [
    "MISSING_POLICIES", "NCG", "RANKINGS", "Evaluation", "Judgments", "breakdown_from_rr", "canonical_only_runs", "computable", "correct", "deduped_runs",
    "duplicate_effects", "evaluate", "evaluate_sets", "leaderboard_correlation", "load_canonical_runs", "missing_topic_error", "outcome_breakdown", "parse_measures",
    "per_query_matrix", "plot_duplicates", "pvalue", "qrels_dict", "refuse_missing", "significance", "supported_names", "tau_ap", "with_relevance",
]
