"""The parameters of the pooler: which runs feed the pool (``[selection]``), the pool
(``[pool]``: its kind, depth, what is already judged, the runs' score ties), the top-1 pool
(``[top1]``), the adjudication order under a budget (``[adjudicate]``), the fused pool (``[fused]``), the fractional collection (``[fractional]``) and the
assessor batches (``[batch]``). Declared here, beside their classes, which the pool kinds
(:mod:`qrelkit.pooler.registry`), the selection (:mod:`qrelkit.pooler.protocol`) and the batches
(:func:`qrelkit.pooler.batches.make_batches`) take; a library function's keyword left None takes
the declared default (:func:`declared`).

``[pool] kind`` is the registry's: every registered pool kind becomes one of its choices
(:func:`qrelkit.params.add_choice`, as it registers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qrelkit.params import UNIT, Key, Params, declare, param

SELECTION = declare(
    "selection",
    Key("include_baselines", "bool", True, "every baseline run feeds the pool"),
    Key("per_group", "int", 3, "the N highest-priority runs per group (and subtask) feed the pool", min=0),
    Key("by_subtask", "bool", True, "apply per_group per subtask"),
    Key("subtasks", "list[str]", [], "the track's subtasks (informative; subtasks come from the manifest)"),
    Key("priority_order", "str", "ascending", "ascending: priority 1 is a group's most important run",
        choices=("ascending", "descending")),
    Key("include", "list[str]", [], "runs always pooled", unordered=True),
    Key("exclude", "list[str]", [], "runs never pooled", unordered=True),
)

POOL = declare(
    "pool",
    Key("kind", "str", "depth", "the campaign's pool: a registered pool kind (its parameters: [pool] depth and "
        "judged for depth, [top1], [fused], [pool.<kind>] for a plugin's)", choices=("depth",)),
    Key("depth", "int", 10, "pool depth: the top k of every pooled run", min=1),
    Key("dedupe", "bool", True, "pool near-duplicate class ids when classes are given (informative)"),
    Key("judged", "str", "mark", "items already in the given qrels: keep, mark or drop them",
        choices=("keep", "mark", "drop")),
    Key("order", "list[str]", ["min_rank", "n_runs desc", "docid"], "assessor order of the pool (fixed)",
        fixed=True),
    Key("ties", "str", "docid-desc", "runs' score ties: docid descending (trec_eval), ascending, or file order",
        choices=("docid-desc", "docid-asc", "file-order")),
)

TOP1 = declare(
    "top1",
    Key("perfect_min_rel", "int", 1, "qrels with at least this grade join the top-1 pool (the perfect run)",
        min=0),
    Key("perfect", "str", "all", "all such qrels, or only the topic's best-graded", choices=("all", "best")),
)

FUSED = declare(
    "fused",
    Key("method", "str", "rrf", "rank fusion of the runs", choices=("rrf", "rbp")),
    Key("take", "int", 100, "items per topic taken from the fused ranking", min=1),
    Key("rrf_k", "float", 60.0, "k of reciprocal rank fusion 1 / (k + rank)", min=0.0),
    Key("rbp_p", "float", 0.8, "persistence p of RBP fusion", **UNIT),
)

FRACTIONAL = declare(
    "fractional",
    Key("fraction", "float", 0.1, "share of a seeded random order of the deduplicated corpus", **UNIT),
    Key("seed", "int", 0, "seed of that random order", min=0),
)

ADJUDICATE = declare(
    "adjudicate",
    Key("strategy", "str", "none", "the order in which each topic's pool is judged under a budget: none (the whole "
        "pool, in pool order) or a registered adjudication strategy (docs/protocol.md)", choices=("none",)),
    Key("budget", "int", 0, "judgments per topic made in the strategy's order (0: the whole pool)", min=0),
    Key("batch", "int", 10, "documents issued per topic per round: the next round is chosen once the last is judged",
        min=1),
    Key("hedge_beta", "float", 0.1, "Hedge's beta: a run's weight is multiplied by beta**loss after each judgment",
        min=0.0, max=1.0),
    Key("mm_ns_discount", "float", 0.9, "mm-ns: each older judgment of a run weighs this factor less in its "
        "Beta estimate (1: mm)", min=0.0, max=1.0),
    Key("ucb_c", "float", 2.0, "ucb: the exploration bonus sqrt(c ln n / n_k)", min=0.0),
)

BATCH = declare(
    "batch",
    Key("first_n", "int", 100, "per topic: the first N in pool order form the first batch", min=1),
    Key("assessors_per_item", "int", 1, "assessors judging each item (never one assessor twice)", min=1),
    Key("seed", "int", 0, "seed of the assignment to assessors", min=0),
)


@dataclass(frozen=True)
class SelectionParams(Params):
    """``[selection]``: the keyword arguments of :func:`~qrelkit.pooler.select.select_pool_runs`
    (:meth:`select_args`).

    >>> SelectionParams.from_config({"selection": {"per_group": 2}}, include=["r1"]).select_args()["include"]
    ['r1']
    """

    SECTION = "selection"
    KEYS = SELECTION

    include_baselines: bool = param(SELECTION, "include_baselines")
    per_group: int = param(SELECTION, "per_group")
    by_subtask: bool = param(SELECTION, "by_subtask")
    subtasks: list = param(SELECTION, "subtasks")
    priority_order: str = param(SELECTION, "priority_order")
    include: list = param(SELECTION, "include")
    exclude: list = param(SELECTION, "exclude")

    def select_args(self) -> dict[str, Any]:
        """The keyword arguments of :func:`~qrelkit.pooler.select.select_pool_runs`."""
        return dict(per_group=self.per_group, include_baselines=self.include_baselines, by_subtask=self.by_subtask,
                    priority_order=self.priority_order, include=list(self.include), exclude=list(self.exclude))


@dataclass(frozen=True)
class PoolParams(Params):
    """``[pool]``: the campaign's pool kind, the depth and the judged policy of the depth pool (and
    of the fractional and fused pools), the order of the runs' score ties.

    >>> PoolParams().depth, PoolParams.from_config({"pool": {"depth": 20}}, judged="drop").judged
    (10, 'drop')
    """

    SECTION = "pool"
    KEYS = POOL

    kind: str = param(POOL, "kind")
    depth: int = param(POOL, "depth")
    dedupe: bool = param(POOL, "dedupe")
    judged: str = param(POOL, "judged")
    order: list = param(POOL, "order")
    ties: str = param(POOL, "ties")


@dataclass(frozen=True)
class Top1Params(Params):
    """``[top1]``: the perfect run of :func:`~qrelkit.pooler.pools.top1_pool`."""

    SECTION = "top1"
    KEYS = TOP1

    perfect_min_rel: int = param(TOP1, "perfect_min_rel")
    perfect: str = param(TOP1, "perfect")


@dataclass(frozen=True)
class FusedParams(Params):
    """``[fused]``: :func:`~qrelkit.pooler.pools.fused_pool`'s method, take, ``k`` (``rrf_k``) and
    ``p`` (``rbp_p``)."""

    SECTION = "fused"
    KEYS = FUSED

    method: str = param(FUSED, "method")
    take: int = param(FUSED, "take")
    rrf_k: float = param(FUSED, "rrf_k")
    rbp_p: float = param(FUSED, "rbp_p")


@dataclass(frozen=True)
class FractionalParams(Params):
    """``[fractional]``: the fractional collection (:func:`~qrelkit.pooler.fractional.fractional_ids`'
    fraction and seed)."""

    SECTION = "fractional"
    KEYS = FRACTIONAL

    fraction: float = param(FRACTIONAL, "fraction")
    seed: int = param(FRACTIONAL, "seed")


@dataclass(frozen=True)
class AdjudicateParams(Params):
    """``[adjudicate]``: the adjudication strategy of a campaign's pool, its budget and batch per
    topic, and the strategies' constants (:mod:`qrelkit.pooler.adjudication`).

    >>> AdjudicateParams().strategy, AdjudicateParams().hedge_beta
    ('none', 0.1)
    """

    SECTION = "adjudicate"
    KEYS = ADJUDICATE

    strategy: str = param(ADJUDICATE, "strategy")
    budget: int = param(ADJUDICATE, "budget")
    batch: int = param(ADJUDICATE, "batch")
    hedge_beta: float = param(ADJUDICATE, "hedge_beta")
    mm_ns_discount: float = param(ADJUDICATE, "mm_ns_discount")
    ucb_c: float = param(ADJUDICATE, "ucb_c")

    def constants(self) -> dict[str, float]:
        """The strategies' constants, as the strategy functions take them."""
        return {"hedge_beta": self.hedge_beta, "mm_ns_discount": self.mm_ns_discount, "ucb_c": self.ucb_c}


@dataclass(frozen=True)
class BatchParams(Params):
    """``[batch]``: :func:`~qrelkit.pooler.batches.make_batches`' first batch, assessors per item and seed."""

    SECTION = "batch"
    KEYS = BATCH

    first_n: int = param(BATCH, "first_n")
    assessors_per_item: int = param(BATCH, "assessors_per_item")
    seed: int = param(BATCH, "seed")


def declared(cls: type[Params], **values: Any) -> dict[str, Any]:
    """``values`` (fields of ``cls``) with each None replaced by its declared default: a library
    function's keyword left None takes the value of the declaration, written once.

    >>> declared(PoolParams, depth=None, judged="drop")
    {'depth': 10, 'judged': 'drop'}
    """
    return {k: cls.declared_default(k) if v is None else v for k, v in values.items()}
