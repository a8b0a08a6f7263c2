"""The campaign's parameters, typed, read once from its recorded configuration.

A campaign runs with the configuration recorded at ``campaign init`` (:func:`qrelkit.campaign.store.campaign_config`,
never the protocol file as it is now). :class:`Settings` turns it, once per run, into the parameters
objects of the components the stages call (``settings.labels.passage_relevant``,
``settings.campaign.assessors``, ...): each from its own class's ``from_config``, so each value is
checked and defaulted by the declaration of its component, and no stage reads a raw key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from qrelkit.cal.params import CalParams, FeatureParams, ThreadParams
from qrelkit.cal.screening import ScreeningRule
from qrelkit.config import CampaignParams, Config, ProtocolParams, WebParams
from qrelkit.dedupe.params import DedupeParams
from qrelkit.evaluate.params import EvalParams
from qrelkit.io.params import RunsParams, SourcesParams
from qrelkit.labels.aggregate import VoteRule
from qrelkit.labels.params import LabelsParams
from qrelkit.pooler.params import (AdjudicateParams, BatchParams, FractionalParams, FusedParams, PoolParams,
                                   SelectionParams, Top1Params)
from qrelkit.prefs.params import PrefsParams
from qrelkit.reuse.params import ReuseParams


def combine_rule(cfg: Config | Mapping | None) -> Any:
    """``[campaign] combine`` as :func:`qrelkit.store.combine.combined_grades` takes it: a rule name
    (median_high, max, min) or, for ``vote``, the labels' majority vote
    (:meth:`qrelkit.labels.VoteRule.from_config`: ``[labels] vote_threshold``, ``graded``,
    ``fallback``). That the vote and ``[labels] passage_relevant`` agree is a rule across keys
    (``vote-vs-passage-relevant``, checked when the configuration is loaded)."""
    name = CampaignParams.from_config(cfg).combine
    return VoteRule.from_config(cfg) if name == "vote" else name


def official_thread(cfg: Config | Mapping | None) -> str:
    """The CAL thread that decides a topic: ``[cal] official_thread``, among ``[cal] threads``."""
    p = ThreadParams.from_config(cfg)  # the official thread is among the threads (rule official-thread-not-run)
    return p.official_thread if p.official_thread in p.threads else p.threads[-1]  # a store recorded before that rule


@dataclass(frozen=True)
class Settings:
    """Every component's parameters for one campaign (see the module's docstring)."""

    protocol: ProtocolParams
    campaign: CampaignParams
    web: WebParams
    runs: RunsParams
    sources: SourcesParams
    dedupe: DedupeParams
    labels: LabelsParams
    eval: EvalParams
    prefs: PrefsParams
    reuse: ReuseParams
    screen: ScreeningRule
    cal: CalParams
    threads: ThreadParams
    features: FeatureParams
    selection: SelectionParams
    pool: PoolParams
    top1: Top1Params
    fused: FusedParams
    fractional: FractionalParams
    adjudicate: AdjudicateParams
    batch: BatchParams
    #: how several assessors' grades of an item become one (:func:`combine_rule`)
    combine: Any
    #: the CAL thread whose decisions are the topic's (:func:`official_thread`)
    official_thread: str

    @classmethod
    def from_config(cls, cfg: Config | Mapping | None) -> "Settings":
        """The parameters of ``cfg`` (a campaign's recorded configuration), each by its class."""
        return cls(protocol=ProtocolParams.from_config(cfg), campaign=CampaignParams.from_config(cfg),
                   web=WebParams.from_config(cfg), runs=RunsParams.from_config(cfg),
                   sources=SourcesParams.from_config(cfg),
                   dedupe=DedupeParams.from_config(cfg), labels=LabelsParams.from_config(cfg),
                   eval=EvalParams.from_config(cfg), prefs=PrefsParams.from_config(cfg),
                   reuse=ReuseParams.from_config(cfg), screen=ScreeningRule.from_config(cfg),
                   cal=CalParams.from_config(cfg), threads=ThreadParams.from_config(cfg),
                   features=FeatureParams.from_config(cfg), selection=SelectionParams.from_config(cfg),
                   pool=PoolParams.from_config(cfg), top1=Top1Params.from_config(cfg),
                   fused=FusedParams.from_config(cfg), fractional=FractionalParams.from_config(cfg),
                   adjudicate=AdjudicateParams.from_config(cfg), batch=BatchParams.from_config(cfg), combine=combine_rule(cfg),
                   official_thread=official_thread(cfg))

    @property
    def relevant(self) -> list[int]:
        """The grades that make a passage relevant (``[labels] passage_relevant``)."""
        return [int(g) for g in self.labels.passage_relevant]
