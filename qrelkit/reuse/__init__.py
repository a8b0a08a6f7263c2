"""Reusability studies: leave-one-group-out (and -run-, -type-out) simulation of the judgments,
per-topic relevance density, and the report an organizer publishes. See ``docs/reuse.md``."""

from qrelkit.reuse.attribution import (
    ORPHANS, UNIQUENESS, Attribution, attribution_table, build_attribution, pool_contributions, within_depth,
)
from qrelkit.reuse.leaveout import (
    DEFAULT_MEASURES, PROCEDURES, REMOVAL, LeaveOutResult, leave_out, reduced_qrels, run_info,
)
from qrelkit.reuse.report import plot_density, plot_ranks, plot_scores, write_report

__all__ = [
    "DEFAULT_MEASURES", "ORPHANS", "PROCEDURES", "REMOVAL", "UNIQUENESS", "Attribution", "LeaveOutResult",
    "attribution_table", "build_attribution", "leave_out", "plot_density", "plot_ranks", "plot_scores",
    "pool_contributions", "reduced_qrels", "run_info", "within_depth", "write_report",
]
