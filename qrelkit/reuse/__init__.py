"""Reusability studies: leave-one-group-out (and -run-, -type-out) simulation of the judgments,
per-topic relevance density, and the report an organizer publishes (``docs/reuse.md``); the budget
study of adjudication strategies on an existing collection (``docs/study.md``).

Its names are loaded at their first use (:mod:`qrelkit.lazy`): importing the package, or its
parameters' declarations, loads none of its machinery."""

from qrelkit.lazy import attach

__getattr__ = attach(__name__, {
    "attribution": (
        "ORPHANS", "UNIQUENESS", "Attribution", "attribution_table", "build_attribution", "pool_contributions",
        "within_depth",
    ),
    "budget": ("DEFAULT_BUDGETS", "Budget", "BudgetStudy", "budget_study", "pair_tests", "parse_budgets",),
    "budget_report": ("plot_relevant", "plot_tau", "write_budget_report",),
    "leaveout": (
        "DEFAULT_MEASURES", "PROCEDURES", "REMOVAL", "LeaveOutResult", "leave_out", "reduced_qrels", "run_info",
    ),
    "report": ("plot_density", "plot_ranks", "plot_scores", "write_report",),
})

__all__ = [
    "DEFAULT_BUDGETS", "Budget", "BudgetStudy", "budget_study", "pair_tests", "parse_budgets", "plot_relevant",
    "plot_tau", "write_budget_report",
    "DEFAULT_MEASURES", "ORPHANS", "PROCEDURES", "REMOVAL", "UNIQUENESS", "Attribution", "LeaveOutResult",
    "attribution_table", "build_attribution", "leave_out", "plot_density", "plot_ranks", "plot_scores",
    "pool_contributions", "reduced_qrels", "run_info", "within_depth", "write_report",
]
