"""Continuous active learning (CAL) on a durable judging store (:mod:`qrelkit.store`: one SQLite
file per campaign — topics, CAL threads, issued batches, an append-only judgments log with its
append-only retractions and re-judgments —, atomic and idempotent imports, qrels export).

* :mod:`qrelkit.cal.stopping` — pluggable stopping rules (TREC 2022 density rule, knee, budget,
  target) over a :class:`~qrelkit.cal.stopping.JudgingState`, each declaring its configuration
  section and describing itself (:class:`~qrelkit.cal.stopping.Description`); ``status`` and
  ``replay`` over a store.

The CAL loop, features and simulation live in ``qrelkit.cal.features``, ``qrelkit.cal.loop`` and
``qrelkit.cal.simulation``.
"""

from qrelkit.cal.stopping import (
    ACCEPT, CONTINUE, REJECT, STOP, Decision, Description, JudgingState, StoppingRule, TargetSample, available_rules,
    draw_sample, get_rule, register_rule, relevant_grades, replay_state, replay_store, rule_name, state_from_store,
    status_table, thread_states,
)

__all__ = [
    "ACCEPT", "CONTINUE", "REJECT", "STOP", "Decision", "Description", "JudgingState", "StoppingRule", "TargetSample",
    "available_rules", "draw_sample", "get_rule", "register_rule", "relevant_grades", "replay_state", "replay_store",
    "rule_name", "state_from_store", "status_table", "thread_states",
]
