"""The parameters of the CAL room: screening (``[screen]``) and continuous active learning
(``[cal]``). Declared here, beside the classes their components take:

* :class:`ScreenParams` — ``[screen]``: is a topic worth judging (:class:`qrelkit.cal.screening.ScreeningRule`);
* :class:`CalParams` — the ``[cal]`` keys that decide a CAL batch (:mod:`qrelkit.cal.loop`, the
  simulation);
* :class:`ThreadParams` — ``[cal] threads``, ``official_thread``, ``budget``: the threads a topic
  runs, whose judgments are official, the judging budget the stopping rules see;
* :class:`FeatureParams` — ``[cal] shard_size``, ``hashing``: how the feature store is built
  (:func:`qrelkit.cal.features.build_features`).

The grades that make a passage relevant are the labels room's (``[labels] passage_relevant``,
declared by :mod:`qrelkit.labels.params`). Importing this module loads no kernel (no numba, no
pandas): the configuration's schema is assembled from it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from qrelkit.labels.params import KEYS as LABEL_KEYS
from qrelkit.params import UNIT, Key, Params, declare, param

SCREEN_KEYS = declare(
    "screen",
    Key("first_n", "int", 100, "the assessor judges the first N items of a topic's pool first", min=1),
    Key("discard_if_relevant_share_at_least", "float", 0.5,
        "discard the topic when at least this share of the first N is relevant", **UNIT),
    Key("discard_if_no_relevant", "bool", True, "discard the topic when none of the first N is relevant"),
)

STOPPING_KEYS = declare(
    "stopping",
    Key("rule", "str", "density", "the campaign's stopping rule: a registered rule (its parameters: [stopping] for "
        "density, [stopping.<rule>] for the others)", choices=("density",)),
)
# the rules' own keys (the density rule's in [stopping], [stopping.knee], [stopping.budget],
# [stopping.target], a plugin's [stopping.<rule>]) are declared by the rules as they register
# (qrelkit.cal.stopping, qrelkit.config.declare_section); each registered rule is a choice of
# [stopping] rule

_THREADS = ("fractional", "local", "all")
KEYS = declare(
    "cal",
    Key("batch_size", "int", 25, "passages per CAL batch", min=1),
    Key("fractional_batch_size_later", "int", 50, "fractional thread: batch size from fractional_later_from on",
        min=1),
    Key("fractional_later_from", "int", 2, "fractional thread: first iteration of the later batch size", min=1),
    Key("schedule", "str", "fixed", "batch sizes: fixed, or BMI's growing schedule", choices=("fixed", "bmi")),
    Key("negatives", "int", 100, "random unjudged candidates trained as non-relevant", min=0),
    Key("C", "float", 1.0, "inverse L2 regularization of the logistic regression", min=0.0),
    Key("class_weight", "str", "balanced", "class weights of the logistic regression",
        choices=("balanced", "none")),
    Key("query_document", "bool", True, "the query text trains as one relevant document"),
    Key("seed", "int", 0, "seed of the negatives", min=0),
    Key("threads", "list[str]", list(_THREADS), "CAL threads per topic", choices=_THREADS),
    Key("official_thread", "str", "all", "thread whose judgments are official (informative)", choices=_THREADS),
    Key("budget", "int", None, "judging budget per topic and thread; none: no budget", min=1, optional=True),
    Key("shard_size", "int", 1_000_000, "features: passages per shard of the feature store (memory while "
        "building and scoring is about one shard)", min=1),
    Key("hashing", "int", None, "features: fold words into this many hash buckets (bounded vocabulary); none: "
        "every distinct word", min=1, optional=True),
)
THREADS: tuple[str, ...] = KEYS["threads"].choices
SCHEDULES: tuple[str, ...] = KEYS["schedule"].choices

_RELEVANT = ("labels", "passage_relevant")
#: the grades that make a passage relevant by default: ``[labels] passage_relevant``'s declared default
PASSAGE_RELEVANT: tuple[int, ...] = tuple(LABEL_KEYS["passage_relevant"].default)


def _grades(value: Any) -> tuple[int, ...]:
    return tuple(int(g) for g in value)


def _keys(*names: str) -> dict[str, Key]:
    """The declared ``[cal]`` keys ``names`` (the ones a class of this section owns)."""
    return {n: KEYS[n] for n in names}


@dataclass(frozen=True)
class ScreenParams(Params):
    """The screening rule's parameters (:class:`qrelkit.cal.screening.ScreeningRule` applies
    them): ``[screen]`` and ``[labels] passage_relevant``.

    >>> ScreenParams().first_n, ScreenParams.from_config({"screen": {"first_n": 10}}).first_n
    (100, 10)
    """

    SECTION = "screen"
    KEYS = SCREEN_KEYS
    SOURCES = {"discard_share": ("screen", "discard_if_relevant_share_at_least"),
               "discard_if_none": ("screen", "discard_if_no_relevant"), "relevant_grades": _RELEVANT}

    first_n: int = param(SCREEN_KEYS, "first_n")
    discard_share: float = param(SCREEN_KEYS, "discard_if_relevant_share_at_least")
    discard_if_none: bool = param(SCREEN_KEYS, "discard_if_no_relevant")
    relevant_grades: tuple[int, ...] = PASSAGE_RELEVANT

    @classmethod
    def coerce(cls, field: str, value: Any) -> Any:
        return _grades(value) if field == "relevant_grades" else value


@dataclass(frozen=True)
class CalParams(Params):
    """Everything that decides a CAL batch (with the features and the judgments): the ``[cal]``
    keys of the loop and ``[labels] passage_relevant`` (``relevant``). ``class_weight`` "none" is
    held as None (scikit-learn's no weights).

    >>> CalParams().batch_size, CalParams.from_config({"cal": {"batch_size": 10}}, seed=3).seed
    (25, 3)
    """

    SECTION = "cal"
    KEYS = _keys("batch_size", "fractional_batch_size_later", "fractional_later_from", "schedule", "negatives", "C",
                 "class_weight", "query_document", "seed")
    SOURCES = {"relevant": _RELEVANT}

    batch_size: int = param(KEYS, "batch_size")
    fractional_batch_size_later: int = param(KEYS, "fractional_batch_size_later")
    fractional_later_from: int = param(KEYS, "fractional_later_from")
    schedule: str = param(KEYS, "schedule")
    negatives: int = param(KEYS, "negatives")
    C: float = param(KEYS, "C")
    class_weight: str | None = param(KEYS, "class_weight")
    query_document: bool = param(KEYS, "query_document")
    relevant: tuple[int, ...] = PASSAGE_RELEVANT
    seed: int = param(KEYS, "seed")

    def __post_init__(self) -> None:
        if self.class_weight is None:  # no weights: checked as the key's word for it
            replace(self, class_weight="none")
        else:
            super().__post_init__()
        if self.class_weight == "none":
            object.__setattr__(self, "class_weight", None)

    @classmethod
    def coerce(cls, field: str, value: Any) -> Any:
        if field == "relevant":
            return _grades(value)
        if field == "class_weight" and value in ("", "None"):
            return "none"
        if field == "C" and type(value) is int:  # a plain mapping's integer is the number it means
            return float(value)
        return value

    def as_dict(self) -> dict:
        d = asdict(self)
        d["relevant"] = list(self.relevant)
        return d


@dataclass(frozen=True)
class ThreadParams(Params):
    """The CAL threads of a topic (``[cal] threads``), the one whose judgments are official and
    the judging budget per topic and thread (none: no budget), which the stopping rules see.

    >>> ThreadParams().threads, ThreadParams.from_config(None, threads="all, local").threads
    (['fractional', 'local', 'all'], ['all', 'local'])
    """

    SECTION = "cal"
    KEYS = _keys("threads", "official_thread", "budget")

    threads: list[str] = param(KEYS, "threads")
    official_thread: str = param(KEYS, "official_thread")
    budget: int | None = param(KEYS, "budget")

    @classmethod
    def coerce(cls, field: str, value: Any) -> Any:
        if field == "threads":  # a flag's "a,b"
            items = value.split(",") if isinstance(value, str) else value
            return [str(t).strip() for t in items if str(t).strip()]
        return value


@dataclass(frozen=True)
class FeatureParams(Params):
    """How the CAL feature store is built: passages per shard, and the hash buckets words are
    folded into (none: every distinct word).

    >>> FeatureParams().shard_size, FeatureParams.from_config(None, hashing=1024).hashing
    (1000000, 1024)
    """

    SECTION = "cal"
    KEYS = _keys("shard_size", "hashing")

    shard_size: int = param(KEYS, "shard_size")
    hashing: int | None = param(KEYS, "hashing")


__all__ = ["KEYS", "PASSAGE_RELEVANT", "SCREEN_KEYS", "SCHEDULES", "THREADS", "CalParams", "FeatureParams", "ScreenParams", "ThreadParams"]


@dataclass(frozen=True)
class StoppingParams(Params):
    """``[stopping] rule``: the stopping rule a campaign applies, by its registered name (the rule
    reads its own parameters: :func:`qrelkit.cal.stopping.get_rule`)."""

    SECTION = "stopping"
    KEYS = STOPPING_KEYS

    rule: str = param(STOPPING_KEYS, "rule")
