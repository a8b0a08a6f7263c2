"""The parameters of evaluation (``[eval]``): measures, the policy for judged topics a run misses,
the relevance level of binary measures, the tie ranking, and the comparisons' tests. Declared
here, beside :class:`EvalParams`, which :mod:`qrelkit.evaluate.protocol` turns into the keyword
arguments of :func:`~qrelkit.evaluate.core.evaluate` and :func:`~qrelkit.evaluate.compare.significance`."""

from __future__ import annotations

from dataclasses import dataclass

from qrelkit.params import UNIT, Key, Params, declare, param

KEYS = declare(
    "eval",
    Key("measures", "list[str]", ["nDCG@10", "AP", "RR@10", "P@10", "Judged@10"], "ir-measures measures"),
    Key("relevant", "str|int", None, "relevant grades of binary measures: a scheme or a level; none: 1",
        optional=True),
    Key("missing", "str", "zero", "judged topics missing from a run", choices=("zero", "skip", "error")),
    Key("k", "int", 10, "outcome breakdown: top k", min=1),
    Key("tests", "list[str]", ["ttest", "wilcoxon", "ranksum", "randomization"], "significance tests",
        choices=("ttest", "wilcoxon", "ranksum", "randomization")),
    Key("corrections", "list[str]", ["bonferroni", "holm"], "multiple-comparison corrections",
        choices=("bonferroni", "holm")),
    Key("alpha", "float", 0.05, "significance level", **UNIT),
    Key("randomizations", "int", 10000, "permutations of the randomization test", min=1),
    Key("seed", "int", 0, "seed of the randomization test", min=0),
    Key("duplicate_measures", "list[str]", ["P@10", "nDCG@10"], "measures of the near-duplicate treatments"),
    Key("depth", "int", None, "evaluate runs cut at this depth; none: whole runs", min=1, optional=True),
    Key("ranking", "str", "trec_eval", "order of a run's documents: trec_eval (scores as float32, ties by "
        "docid descending) or exact (64-bit scores)", choices=("trec_eval", "exact")),
)


@dataclass(frozen=True)
class EvalParams(Params):
    """``[eval]``.

    >>> EvalParams().missing, EvalParams.from_config({"eval": {"k": 5}}, missing="skip").k
    ('zero', 5)
    """

    SECTION = "eval"
    KEYS = KEYS

    measures: list = param(KEYS, "measures")
    relevant: str | int | None = param(KEYS, "relevant")
    missing: str = param(KEYS, "missing")
    k: int = param(KEYS, "k")
    tests: list = param(KEYS, "tests")
    corrections: list = param(KEYS, "corrections")
    alpha: float = param(KEYS, "alpha")
    randomizations: int = param(KEYS, "randomizations")
    seed: int = param(KEYS, "seed")
    duplicate_measures: list = param(KEYS, "duplicate_measures")
    depth: int | None = param(KEYS, "depth")
    ranking: str = param(KEYS, "ranking")

    @classmethod
    def coerce(cls, field, value):
        if isinstance(value, tuple):  # a flag given as a tuple of names
            return list(value)
        return value
