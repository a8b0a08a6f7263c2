"""Shallow pooling with preference judgments (docs/protocol.md section 2; Arabzadeh et al.,
"Shallow pooling for sparse labels"): pairs from top-1 pools and their cost, crowd tasks with
test pairs, worker screening and agreement, preference qrels by tournament, win ratios between
runs, re-scoring on preference qrels, the single-ranker check, and a simulated preference
oracle. See ``docs/prefs.md``.

Its names are loaded at their first use (:mod:`qrelkit.lazy`): importing the package, or its
parameters' declarations, loads none of its machinery."""

from qrelkit.lazy import attach

__getattr__ = attach(__name__, {
    "common": ("PERFECT", "pair_id", "pool_items", "run_tops",),
    "crowd": ("simulate_answers", "sparsify_qrels",),
    "pairs": ("PAIR_SCHEMA", "estimate_cost", "maintenance_pairs", "pair_summary", "pool_pairs",),
    "rescore": ("Rescored", "confidence_interval", "perfect_run", "plot_rescore", "rescore",),
    "single": ("single_ranker_outcomes", "single_ranker_pairs",),
    "tasks": (
        "EXPORT_COLUMNS", "JUDGMENT_SCHEMA", "TASK_SCHEMA", "export_view", "import_answers", "make_tasks",
        "read_answers", "read_judgments", "reissue_tasks", "screen_answers", "worker_agreement",
    ),
    "tournament": ("TournamentResult", "pair_outcomes", "tournament", "tournament_topic", "update_best",),
    "winratio": ("WinRatios", "matrix_table", "plot_heatmap", "win_ratios", "win_ratios_from_tops",),
})

__all__ = [
    "EXPORT_COLUMNS", "JUDGMENT_SCHEMA", "PAIR_SCHEMA", "PERFECT", "Rescored", "TASK_SCHEMA", "TournamentResult",
    "WinRatios", "confidence_interval", "estimate_cost", "export_view", "import_answers", "maintenance_pairs", "make_tasks",
    "matrix_table", "pair_id", "pair_outcomes", "pair_summary", "perfect_run", "plot_heatmap", "plot_rescore",
    "pool_items", "pool_pairs", "read_answers", "read_judgments", "reissue_tasks", "rescore", "run_tops",
    "screen_answers", "simulate_answers", "single_ranker_outcomes", "single_ranker_pairs", "sparsify_qrels",
    "tournament", "tournament_topic", "update_best", "win_ratios", "win_ratios_from_tops", "worker_agreement",
]
