"""A stopping rule and a pool kind from outside qrelkit, as a team would write them
(tests/test_campaign_plugins.py): a protocol file names this module in ``[protocol] plugins``,
and every process that loads the protocol (``campaign init``, ``campaign run``, the web app's
runner) imports it. Each registers with its own configuration section."""

from __future__ import annotations

from qrelkit.cal.stopping import ACCEPT, CONTINUE, Decision, StoppingRule, register_rule
from qrelkit.config import Key
from qrelkit.pooler import depth_pool, register_pool


@register_rule("toy-count")
class ToyCount(StoppingRule):
    """Accepts a topic once enough passages are judged."""

    KEYS = (Key("judged", "int", 20, "toy rule: accept once this many passages are judged", min=1),)

    def __init__(self, judged: int = 20) -> None:
        self.judged = int(judged)

    def needs(self) -> str:
        return f"accepted once {self.judged} passages are judged"

    def decide(self, state):
        n = state.judged
        if n >= self.judged:
            return Decision(ACCEPT, f"{n} judged >= {self.judged}", self.name)
        return Decision(CONTINUE, f"{n} judged, {self.judged - n} to go", self.name)


def shallow_pool(runs, depth: int = 2, *, classes=None, qrels=None, judged: str = "mark"):
    """The depth pool of every run, shallow (its depth: ``[pool.toy-shallow] depth``)."""
    return depth_pool(runs, depth, classes=classes, qrels=qrels, judged=judged)


register_pool("toy-shallow", shallow_pool, keys=(Key("depth", "int", 2, "toy pool: the top k of every run", min=1),))
