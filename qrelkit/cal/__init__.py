"""Continuous active learning (CAL) on a durable judging store (:mod:`qrelkit.store`: one SQLite
file per campaign — topics, CAL threads, issued batches, an append-only judgments log with its
append-only retractions and re-judgments —, atomic and idempotent imports, qrels export).

* :mod:`qrelkit.cal.stopping` — pluggable stopping rules (TREC 2022 density rule, knee, budget,
  target) over a :class:`~qrelkit.cal.stopping.JudgingState`, each declaring its configuration
  section and describing itself (:class:`~qrelkit.cal.stopping.Description`); ``status`` and
  ``replay`` over a store.

* :mod:`qrelkit.cal.budget` — CAL as a judging strategy over a pool (:func:`cal_pool_orders`: "CAL
  from the judged top of the pool", for a judging-budget study).

The CAL loop, features and simulation live in ``qrelkit.cal.features``, ``qrelkit.cal.loop`` and
``qrelkit.cal.simulation``; the parameters of screening and CAL (``[screen]``, ``[cal]``) are declared
in ``qrelkit.cal.params``.

Its names are loaded at their first use (:mod:`qrelkit.lazy`): importing the package, or its
parameters' declarations, loads none of its machinery (no pandas, no numba).
"""

from qrelkit.lazy import attach

__getattr__ = attach(__name__, {
    "budget": ("cal_pool_order", "cal_pool_orders", "seed_order"),
    "stopping": (
        "ACCEPT", "CONTINUE", "REJECT", "STOP", "Decision", "Description", "JudgingState", "StoppingRule",
        "TargetSample", "available_rules", "draw_sample", "get_rule", "register_rule", "relevant_grades",
        "replay_state", "replay_store", "rule_name", "state_from_store", "status_table", "thread_states",
    ),
    "params": ("CalParams", "FeatureParams", "ScreenParams", "ThreadParams",),
})

__all__ = [
    "ACCEPT", "CONTINUE", "CalParams", "Decision", "Description", "FeatureParams", "JudgingState", "REJECT", "STOP",
    "ScreenParams", "StoppingRule", "TargetSample", "ThreadParams",
    "available_rules", "draw_sample", "get_rule", "register_rule", "relevant_grades", "replay_state", "replay_store",
    "rule_name", "state_from_store", "status_table", "thread_states", "cal_pool_order", "cal_pool_orders", "seed_order",
]
