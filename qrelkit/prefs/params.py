"""The parameters of preference judging (``[prefs]``): crowd tasks and their cost, win ratios,
re-scoring and the simulated workers. Declared here, beside :class:`PrefsParams`, which the
preference commands and the campaign's preference tasks take."""

from __future__ import annotations

from dataclasses import dataclass

from qrelkit.params import UNIT, Key, Params, declare, param

KEYS = declare(
    "prefs",
    Key("pairs_per_task", "int", 10, "real pairs per crowd task", min=1),
    Key("test_pairs", "int", 3, "test pairs per task (known relevant vs. off-topic)", min=0),
    Key("test_min_rel", "int", 1, "grade a qrel needs to be the known relevant passage of a test pair"),
    Key("price_per_task", "float", 2.0, "paid to the worker per task", min=0.0),
    Key("fee_per_task", "float", 0.4, "platform fee per task", min=0.0),
    Key("assignments", "int", 1, "workers per task", min=1),
    Key("alpha", "float", 0.05, "win ratios: significance level", **UNIT),
    Key("correction", "str", "bonferroni", "win ratios: correction", choices=("bonferroni", "holm")),
    Key("measure", "str", "RR@10", "re-scoring measure (ir-measures)"),
    Key("rel", "int", 1, "original qrels: grade counted as relevant by the measure"),
    Key("ci", "str", "t", "confidence intervals", choices=("t", "bootstrap")),
    Key("ci_level", "float", 0.95, "confidence level", **UNIT),
    Key("bootstrap_resamples", "int", 10000, "bootstrap resamples", min=1),
    Key("seed", "int", 0, "seed of tasks, bootstrap and the simulated oracle", min=0),
    Key("workers", "int", 5, "simulated workers", min=1),
    Key("error_rate", "float", 0.1, "simulated: a good worker picks the worse passage", **UNIT),
    Key("test_error_rate", "float", 0.0, "simulated: a worker fails a test pair", **UNIT),
    Key("ties", "str", "latent", "simulated: equal grades", choices=("latent", "random")),
    Key("failing_mode", "str", "random", "simulated: a failing worker's answers", choices=("random", "inverted")),
)


@dataclass(frozen=True)
class PrefsParams(Params):
    """``[prefs]``.

    >>> PrefsParams().pairs_per_task, PrefsParams.from_config(None, test_pairs=2).test_pairs
    (10, 2)
    """

    SECTION = "prefs"
    KEYS = KEYS

    pairs_per_task: int = param(KEYS, "pairs_per_task")
    test_pairs: int = param(KEYS, "test_pairs")
    test_min_rel: int = param(KEYS, "test_min_rel")
    price_per_task: float = param(KEYS, "price_per_task")
    fee_per_task: float = param(KEYS, "fee_per_task")
    assignments: int = param(KEYS, "assignments")
    alpha: float = param(KEYS, "alpha")
    correction: str = param(KEYS, "correction")
    measure: str = param(KEYS, "measure")
    rel: int = param(KEYS, "rel")
    ci: str = param(KEYS, "ci")
    ci_level: float = param(KEYS, "ci_level")
    bootstrap_resamples: int = param(KEYS, "bootstrap_resamples")
    seed: int = param(KEYS, "seed")
    workers: int = param(KEYS, "workers")
    error_rate: float = param(KEYS, "error_rate")
    test_error_rate: float = param(KEYS, "test_error_rate")
    ties: str = param(KEYS, "ties")
    failing_mode: str = param(KEYS, "failing_mode")
