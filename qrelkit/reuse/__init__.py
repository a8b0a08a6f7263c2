"""Reusability studies: leave-one-group-out (and -run-, -type-out) simulation of the judgments,
per-topic relevance density, and the report an organizer publishes. See ``docs/reuse.md``.

Its names are loaded at their first use (:mod:`qrelkit.lazy`): importing the package, or its
parameters' declarations, loads none of its machinery."""

from qrelkit.lazy import attach

__getattr__ = attach(__name__, {
    "attribution": (
        "ORPHANS", "UNIQUENESS", "Attribution", "attribution_table", "build_attribution", "pool_contributions",
        "within_depth",
    ),
    "leaveout": (
        "DEFAULT_MEASURES", "PROCEDURES", "REMOVAL", "LeaveOutResult", "leave_out", "reduced_qrels", "run_info",
    ),
    "report": ("plot_density", "plot_ranks", "plot_scores", "write_report",),
})

__all__ = [
    "DEFAULT_MEASURES", "ORPHANS", "PROCEDURES", "REMOVAL", "UNIQUENESS", "Attribution", "LeaveOutResult",
    "attribution_table", "build_attribution", "leave_out", "plot_density", "plot_ranks", "plot_scores",
    "pool_contributions", "reduced_qrels", "run_info", "within_depth", "write_report",
]
