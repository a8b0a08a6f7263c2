"""The parameters of labels (``[labels]``): the grade scale, the grades that make an item
relevant, binarization schemes, several assessors' aggregation, passage -> document propagation.
Declared here, beside :class:`LabelsParams`, which the labels room's functions take."""

from __future__ import annotations

from dataclasses import dataclass

from qrelkit.params import Key, Params, declare, param

KEYS = declare(
    "labels",
    Key("scale", "list[int]", [0, 1, 2, 3], "grades an assessor may give"),
    Key("passage_relevant", "list[int]", [2, 3], "grades that make a passage relevant (scheme 'passage')",
        unordered=True),
    Key("document_relevant", "list[int]", [1, 2, 3], "grades that make a document relevant (scheme 'document')",
        unordered=True),
    Key("document_rule", "str", "max", "passage -> document grade", choices=("max", "min", "median_high")),
    Key("grade_map", "map[int,int]", {}, "passage grade -> document grade table applied first, e.g. { 1 = 0 }"),
    Key("schemes", "map[str,list[int]]", {}, "further named binarization schemes: name = [grades]"),
    Key("vote_threshold", "int", 2, "several assessors: a vote is relevant at this grade or above"),
    Key("graded", "str", "ceil_median", "graded label of several assessors",
        choices=("ceil_median", "median_high")),
    Key("fallback", "list[str]", ["original", "lowest"], "no majority (a tie): these rules, left to right",
        choices=("original", "lowest", "highest", "not-relevant", "relevant", "drop")),
    Key("original_threshold", "int", 1, "an original qrel at or above this grade is relevant"),
    Key("min_assessors", "int", 1, "a topic enters the evaluation set with at least this many assessors", min=1),
    Key("require_original_relevant", "bool", False, "a topic also needs a relevant original qrel"),
    Key("label", "str", "graded", "qrels written from aggregated labels", choices=("graded", "binary")),
    Key("agreement_level", "str", "ordinal", "Krippendorff's alpha level of measurement",
        choices=("nominal", "ordinal", "interval", "ratio")),
)


@dataclass(frozen=True)
class LabelsParams(Params):
    """``[labels]``: what the labels room's functions take
    (:func:`qrelkit.labels.binarize.scheme_grades`, :func:`qrelkit.labels.aggregate.aggregation_options`,
    :func:`qrelkit.labels.relevance.relevance_level`, the propagation's document rule).

    >>> LabelsParams().passage_relevant, LabelsParams.from_config({"labels": {"vote_threshold": 3}}).vote_threshold
    ([2, 3], 3)
    """

    SECTION = "labels"
    KEYS = KEYS

    scale: list = param(KEYS, "scale")
    passage_relevant: list = param(KEYS, "passage_relevant")
    document_relevant: list = param(KEYS, "document_relevant")
    document_rule: str = param(KEYS, "document_rule")
    grade_map: dict = param(KEYS, "grade_map")
    schemes: dict = param(KEYS, "schemes")
    vote_threshold: int = param(KEYS, "vote_threshold")
    graded: str = param(KEYS, "graded")
    fallback: list = param(KEYS, "fallback")
    original_threshold: int = param(KEYS, "original_threshold")
    min_assessors: int = param(KEYS, "min_assessors")
    require_original_relevant: bool = param(KEYS, "require_original_relevant")
    label: str = param(KEYS, "label")
    agreement_level: str = param(KEYS, "agreement_level")

    @classmethod
    def coerce(cls, field, value):
        if field == "fallback" and isinstance(value, str):  # a flag's "a,b"
            return [f.strip() for f in value.split(",") if f.strip()]
        return value
