"""Stopping rules for CAL: when to stop judging a topic (in one thread).

Every rule is an object with a ``name`` and ``decide(state) -> Decision``. ``state`` is a
:class:`JudgingState`: the passages judged so far in judging order, their binarized relevance,
where the batches ended, and (when a rule needs them) the judging budget, the size of the
collection the thread ranks, the passages issued in the thread's batches and a judged random
sample. A :class:`Decision` is ``continue``, ``accept``, ``reject`` or ``stop`` with a reason that
names the numbers it compared. Decisions use the state **as it is now**: every judgment so far,
the last batch included (no one-round lag, unlike TARexp's count-based rules, which look at
the counts of the previous round). A rule also describes itself: ``describe(state) ->
Description`` (what it needs, where the topic stands), which the campaign's report and web pages
and ``cal status`` print.

Rules (registry: :func:`get_rule`, :func:`available_rules`, :func:`register_rule`; a rule declares
its parameters in ``KEYS`` and they are its configuration section, ``[stopping.<rule>]``; a rule
defined outside qrelkit is found through the modules a protocol file names in ``[protocol]
plugins`` or ``$QRELKIT_PLUGINS`` names, :func:`qrelkit.config.load_plugins`; docs/cal.md "Writing
a stopping rule"):

``density`` — TREC 2022 Deep Learning (docs/protocol.md section 1, step 5), thresholds from the
config's ``[stopping]`` section. With n judged, r relevant and density d = r / n:

* accept if d < ``accept_density_below`` (0.4) and n >= ``accept_min_judged`` (150) and
  r >= ``accept_min_relevant`` (4, "more than 3");
* else reject if n >= ``reject_min_judged`` (301, "more than 300") and d > ``reject_density_above`` (0.5);
* else, when the judging budget is spent (n >= budget): reject if n < ``budget_min_judged`` (150)
  or r < ``budget_min_relevant`` (4) or d >= ``budget_density_at_least`` (0.4), otherwise accept;
* else continue.

Densities are compared exactly (as fractions, the thresholds read as decimals), so a density of
exactly 0.4 or 0.5 is never rounded across a boundary.

``knee`` — Cormack & Grossman, "Engineering Quality and Reliability in Technology-Assisted
Review", SIGIR 2016, section 4 (knee method). With g(i) the relevant passages among the first i
judged, s = n and r = g(s):

* knee k = argmax over 1 <= i <= s of (s * g(i) - r * i), the first on ties: the point of the
  gain curve farthest above the chord from (0, 0) to (s, r) — Kneedle's maximum of the difference
  curve (Satopää et al., ICDCS workshops 2011) on the curve normalized to the unit square;
* slope ratio rho = (g(k) / k) / ((r - g(k) + 1) / (s - k)) (the +1 keeps the slope after the
  knee positive);
* stop when s >= ``min_judged`` (150) and rho >= 156 - min(r, 150) (the published adjustment:
  6 once 150 relevant are found, up to 156 with none). ``adjust = false`` uses the fixed
  ``ratio`` (6) instead. No knee (s * g(i) <= r * i for all i) means continue. rho is compared
  exactly (a fraction), so a ratio exactly at the threshold stops.

  Checked against TARexp 0.1.4 (``KneeStoppingRule``), which differs from the paper: it counts
  rounds (batches) instead of documents, takes the largest ratio over every round instead of
  the ratio at the knee, and has no 150-document minimum; this rule follows the paper. Relevance
  is the binarization of the grades (``[labels] passage_relevant``, 2 and 3): binary qrels
  (grade 1) have no relevant passage under it, and the rule can never fire (the CAL simulation
  now names such topics, an error when it is every topic).

``budget`` — the same paper's budget method: stop when s >= 0.75 |C| (``collection_share``), or
when rho >= 6 (``ratio``, same knee and rho as above) and s >= 10 |C| / r (``target_size`` |C| /
r: what the target method's random sample would cost, with r estimating the number of relevant
passages). |C| is ``state.collection_size`` (the collection the thread ranks); without it the
rule cannot decide and says so. TARexp's version tests the count of an earlier round (a loop
variable left over); this one uses the current s and r.

``target`` — the same paper's target method: a random sample of the collection (seeded, see
:func:`draw_sample`) is judged in draw order until ``size`` (T = 10) relevant passages are found:
the target set. Stop when every target passage has been reached by the CAL review (judged in the
thread, or issued in one of its batches). The target set must not train the classifier. With
fewer than T relevant in the sample, the sample is incomplete (continue) unless it covers the
whole collection, in which case the relevant passages found are the targets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from qrelkit.cal.params import KEYS as CAL_KEYS, PASSAGE_RELEVANT, ThreadParams
from qrelkit.store.combine import DEFAULT_COMBINE, combine_log
from qrelkit.config import (
    PLUGINS_ENV, Config, Conflict, Key, add_choice, cross_rule, declare_section, default as config_default,
    load_plugins,
)
from qrelkit.errors import InputError
from qrelkit.io.keys import stable_int
from qrelkit.labels.params import LabelsParams
from qrelkit.params import AS_DECLARED, declared_defaults

CONTINUE, ACCEPT, REJECT, STOP = "continue", "accept", "reject", "stop"
ACTIONS = (CONTINUE, ACCEPT, REJECT, STOP)

# -- the rules' parameters: each rule declares its keys (the configuration schema takes them as it
# registers: [stopping] for the density rule, [stopping.<rule>] for the others) --------------------

_UNIT = dict(min=0.0, max=1.0)
DENSITY_KEYS = (
    Key("accept_density_below", "float", 0.4, "density rule: accept below this density ...", **_UNIT),
    Key("accept_min_judged", "int", 150, "... with at least this many judged ...", min=0),
    Key("accept_min_relevant", "int", 4, "... and at least this many relevant", min=0),
    Key("reject_min_judged", "int", 301, "reject with at least this many judged ...", min=0),
    Key("reject_density_above", "float", 0.5, "... and a density above this", **_UNIT),
    Key("budget_min_judged", "int", 150, "budget spent: reject with fewer judged than this ...", min=0),
    Key("budget_min_relevant", "int", 4, "... or fewer relevant than this ...", min=0),
    Key("budget_density_at_least", "float", 0.4, "... or a density at least this", **_UNIT),
)
KNEE_KEYS = (
    Key("min_judged", "int", 150, "knee rule: judge at least this many first", min=0),
    Key("ratio", "float", 6.0, "slope ratio that stops (adjust = false)", min=0.0),
    Key("adjust", "bool", True, "published adjustment: ratio adjust_base - min(relevant, adjust_cap)"),
    Key("adjust_base", "int", 156, "base of the adjusted ratio", min=0),
    Key("adjust_cap", "int", 150, "cap on the relevant count in the adjusted ratio", min=0),
)
BUDGET_KEYS = (
    Key("ratio", "float", 6.0, "budget rule: slope ratio that stops", min=0.0),
    Key("target_size", "int", 10, "stop when judged >= target_size x collection / relevant (and the ratio)", min=1),
    Key("collection_share", "float", 0.75, "stop when this share of the collection is judged", **_UNIT),
)
TARGET_KEYS = (
    Key("size", "int", 10, "target rule: relevant passages in the target sample", min=1),
)


def _defaults(keys: Iterable[Key]) -> dict[str, Any]:
    return {k.name: k.default for k in keys}


DENSITY_DEFAULTS: dict[str, float | int] = _defaults(DENSITY_KEYS)
KNEE_DEFAULTS: dict[str, Any] = _defaults(KNEE_KEYS)
BUDGET_DEFAULTS: dict[str, Any] = _defaults(BUDGET_KEYS)
TARGET_DEFAULTS: dict[str, Any] = _defaults(TARGET_KEYS)


# -- state and decision ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetSample:
    """A random sample of the collection, judged, in draw order (for the target method).

    ``exhausted``: the sample is the whole collection (no more can be drawn).
    """

    passages: tuple[str, ...]
    relevant: tuple[bool, ...]
    exhausted: bool = False

    def __post_init__(self) -> None:
        if len(self.passages) != len(self.relevant):
            raise InputError("bad-state", "sample passages and relevance differ in length")

    def targets(self, size: int) -> tuple[str, ...] | None:
        """The first ``size`` relevant passages in draw order; all relevant ones when the sample
        is exhausted; None while the sample is incomplete."""
        rel = [p for p, r in zip(self.passages, self.relevant) if r]
        if len(rel) >= size:
            return tuple(rel[:size])
        return tuple(rel) if self.exhausted else None


def binarize(grades: Sequence[int] | np.ndarray, relevant: Iterable[int]) -> np.ndarray:
    """Relevant (True) when the grade is one of ``relevant``."""
    return np.isin(np.asarray(grades, dtype=np.int64), np.asarray(list(relevant), dtype=np.int64))


@dataclass(frozen=True, eq=False)
class JudgingState:
    """What a stopping rule sees for one topic and thread.

    ``passages`` in judging order, each once; ``relevant`` their binarized relevance (bool array,
    same length); ``batch_ends``: the number of passages judged after each batch (increasing;
    informative); ``budget``: the most passages this thread may judge (None: no budget);
    ``collection_size``: passages the thread ranks (budget method); ``issued``: passages issued
    in the thread's batches, judged or not (target method); ``sample``: the judged random sample
    (target method).
    """

    passages: tuple[str, ...]
    relevant: np.ndarray
    batch_ends: tuple[int, ...] = ()
    budget: int | None = None
    collection_size: int | None = None
    issued: frozenset[str] = frozenset()
    sample: TargetSample | None = None
    topic: str = ""
    thread: str = ""

    def __post_init__(self) -> None:
        rel = np.asarray(self.relevant, dtype=bool)
        if rel.ndim != 1 or len(rel) != len(self.passages):
            raise InputError("bad-state", "relevance must have one entry per judged passage")
        rel.flags.writeable = False
        object.__setattr__(self, "relevant", rel)
        object.__setattr__(self, "passages", tuple(self.passages))
        object.__setattr__(self, "batch_ends", tuple(int(b) for b in self.batch_ends))

    @classmethod
    def from_grades(cls, passages: Sequence[str], grades: Sequence[int], *,
                    relevant_grades: Iterable[int] = PASSAGE_RELEVANT, batches: Sequence[str] | None = None,
                    **kw) -> "JudgingState":
        """A state from grades (binarized by ``relevant_grades``); ``batches`` (one batch id per
        passage, in judging order) gives the batch ends."""
        rel = binarize(grades, relevant_grades)
        ends: tuple[int, ...] = kw.pop("batch_ends", ())
        if batches is not None:
            b = list(batches)
            ends = tuple(i + 1 for i in range(len(b)) if i + 1 == len(b) or b[i + 1] != b[i])
        return cls(tuple(str(p) for p in passages), rel, batch_ends=ends, **kw)

    @property
    def judged(self) -> int:
        return len(self.passages)

    @property
    def n_relevant(self) -> int:
        return int(self.relevant.sum())

    @property
    def density_fraction(self) -> Fraction:
        """Relevant / judged as an exact fraction (0 when nothing is judged)."""
        return Fraction(self.n_relevant, self.judged) if self.judged else Fraction(0)

    @property
    def density(self) -> float:
        """Relevant / judged (NaN when nothing is judged)."""
        return self.n_relevant / self.judged if self.judged else float("nan")

    @property
    def budget_exhausted(self) -> bool:
        return self.budget is not None and self.judged >= self.budget

    def gain(self) -> np.ndarray:
        """g(i) for i = 1..n: relevant passages among the first i judged."""
        return np.cumsum(self.relevant, dtype=np.int64)

    def prefix(self, n: int) -> "JudgingState":
        """The state after the first ``n`` judged passages (batch ends cut accordingly)."""
        return replace(self, passages=self.passages[:n], relevant=self.relevant[:n],
                       batch_ends=tuple(b for b in self.batch_ends if b <= n))


@dataclass(frozen=True)
class Decision:
    """``action``: continue | accept | reject | stop; ``reason``: the comparison that decided;
    ``details``: the numbers (judged, relevant, density, rho, ...)."""

    action: str
    reason: str
    rule: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def stopped(self) -> bool:
        return self.action != CONTINUE


@dataclass(frozen=True)
class Description:
    """A rule describing itself for a topic: ``needs`` (what it needs to decide, e.g. "accepted
    below density 0.4 with at least 150 judged and 4 relevant"), ``stands`` (where the topic
    stands, e.g. "at 0.31 with 120 judged and 37 relevant: 30 more to judge") and
    ``density_line``: the density the rule compares with (the campaign report draws it), None
    for a rule that has none. ``str()`` is "needs: stands"."""

    rule: str
    needs: str
    stands: str
    density_line: float | None = None

    def __str__(self) -> str:
        return f"{self.needs}: {self.stands}"

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "needs": self.needs, "stands": self.stands, "density_line": self.density_line,
                "text": str(self)}


_DONE = {ACCEPT: "accepted", REJECT: "rejected", STOP: "stopped"}


class StoppingRule:
    """Base class: ``name`` and ``decide(state) -> Decision``; ``params()`` for reports;
    ``describe(state)``: what the rule needs and where the topic stands (:class:`Description`).

    A rule declares its parameters in ``KEYS`` (:class:`qrelkit.config.Key`: name, type, default,
    help; ``DEFAULTS``, a plain ``{name: default}``, still does: the types are then taken from
    the defaults) and inherits :meth:`from_config`; registered, its keys are the configuration
    section ``[stopping.<name>]`` (``SECTION``: another name than the rule's; None: ``[stopping]``
    itself, the density rule's)."""

    name = ""
    KEYS: tuple[Key, ...] | None = None
    DEFAULTS: Mapping[str, Any] | None = None
    SECTION: str | None = ""

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if "KEYS" in vars(cls) and cls.KEYS is not None:  # DEFAULTS as before: the declared defaults
            cls.DEFAULTS = _defaults(cls.KEYS)

    def decide(self, state: JudgingState) -> Decision:  # pragma: no cover - interface
        raise NotImplementedError

    def params(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def needs(self) -> str:
        """What the rule needs to decide, in a phrase (by default its documentation's first line)."""
        doc = (type(self).__doc__ or "").strip()
        return doc.splitlines()[0].rstrip(".") if doc else f"the {self.name} rule"

    def describe(self, state: JudgingState, decision: Decision | None = None) -> Description:
        """What the rule needs (:meth:`needs`) and where ``state`` stands: by default the reason of
        its decision (``decision``, when the caller has it already)."""
        d = decision or self.decide(state)
        stands = f"{_DONE.get(d.action, d.action)}: {d.reason}" if d.stopped else d.reason
        return Description(self.name, self.needs(), stands)

    @classmethod
    def keys(cls) -> tuple[Key, ...]:
        """The rule's declared parameters: ``KEYS``, else the ``DEFAULTS`` whose type is plain."""
        if cls.KEYS is not None:
            return tuple(cls.KEYS)
        return tuple(k for k in (_inferred_key(cls.name, n, v) for n, v in (cls.DEFAULTS or {}).items()) if k)

    @classmethod
    def section(cls) -> str:
        """Its configuration section: ``stopping`` or ``stopping.<SECTION or name>``."""
        return "stopping" if cls.SECTION is None else f"stopping.{cls.SECTION or cls.name}"

    @classmethod
    def from_config(cls, config: Mapping | None = None, **overrides) -> "StoppingRule":
        if cls.DEFAULTS is None:
            raise NotImplementedError
        sub = None if cls.SECTION is None else cls.section().partition(".")[2]
        return cls(**_params(cls.DEFAULTS, _section(config, sub), overrides))


def _inferred_key(rule: str, name: str, value: Any) -> Key | None:
    """A rule's parameter declared by its default only (``DEFAULTS``): its type from the value."""
    kinds = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"))
    t = next((t for cls, t in kinds if isinstance(value, cls)), None)
    if isinstance(value, list) and value and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        t = "list[int]"
    elif isinstance(value, list) and all(isinstance(x, str) for x in value):
        t = "list[str]"
    return None if t is None else Key(name, t, value, f"parameter {name} of the {rule} rule")


_RULES: dict[str, type[StoppingRule]] = {}


def register_rule(name: str, cls: type[StoppingRule] | None = None):
    """Make a rule class available by ``name`` (to :func:`get_rule`, the CLI's ``--rule``, a
    campaign's ``[stopping] rule``) with its configuration section (:meth:`StoppingRule.keys`,
    ``[stopping.<name>]``).

    ``register_rule("mine", MyRule)`` registers and returns the class; without ``cls`` it is a
    class decorator (``@register_rule("mine")``). Registering a name again replaces the rule.

    Examples
    --------
    >>> from qrelkit.cal.stopping import CONTINUE, Decision, StoppingRule, get_rule, register_rule
    >>> class Never(StoppingRule):
    ...     DEFAULTS = {}
    ...     def decide(self, state):
    ...         return Decision(CONTINUE, "never stops", self.name)
    >>> _ = register_rule("never", Never)
    >>> get_rule("never").name
    'never'
    """
    if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
        raise InputError("bad-option", f"a stopping rule's name is letters, digits, '-' and '_', got {name!r}")

    def deco(c: type[StoppingRule]) -> type[StoppingRule]:
        c.name = name
        _RULES[name] = c
        add_choice("stopping", "rule", name)
        keys = c.keys()
        if keys:
            declare_section(c.section(), keys, merge=c.SECTION is None)
        return c

    return deco if cls is None else deco(cls)


def available_rules() -> list[str]:
    """The names of the registered rules (plugins in ``$QRELKIT_PLUGINS`` included), sorted."""
    load_plugins()
    return sorted(_RULES)


def get_rule(name: str, config: Mapping | None = None, **params) -> StoppingRule:
    """The rule ``name`` with its parameters from ``config`` (``[stopping]`` for the density
    rule, ``[stopping.<name>]`` for the others), overridden by ``params`` that are not None."""
    if name not in _RULES:
        load_plugins()
    if name not in _RULES:
        raise InputError("bad-option", f"unknown stopping rule {name!r}; rules: {', '.join(available_rules())}")
    return _RULES[name].from_config(config, **{k: v for k, v in params.items() if v is not None})


def rule_name(config: Mapping | None = None, name: str | None = None) -> str:
    """``name`` when given, else the configuration's ``[stopping] rule`` (``density``)."""
    if name:
        return str(name)
    return str(((config or {}).get("stopping", {}) or {}).get("rule", config_default("stopping", "rule")))


def rule_section(name: str) -> str:
    """The configuration section of rule ``name``'s parameters (``stopping.knee``)."""
    return _RULES[name].section() if name in _RULES else f"stopping.{name}"


def _section(config: Mapping | None, sub: str | None) -> dict[str, Any]:
    st = dict((config or {}).get("stopping", {}) or {})
    if sub is None:
        return {k: v for k, v in st.items() if not isinstance(v, dict)}
    val = st.get(sub)
    return dict(val) if isinstance(val, dict) else {}


def _params(defaults: Mapping[str, Any], config: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(defaults)
    for src in (config, overrides):
        for k, v in src.items():
            if k in defaults:
                out[k] = v
    unknown = [k for k in overrides if k not in defaults]
    if unknown:
        raise InputError("bad-option", f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(defaults)}")
    return out


def _dec(x: float | int) -> Fraction:
    """A threshold as the exact decimal it is written as (0.4 -> 2/5)."""
    return Fraction(str(x))


def _fmt(x: Fraction | float) -> str:
    return f"{float(x):.4g}"


# -- TREC 2022 density rule -----------------------------------------------------------------------


@register_rule("density")
class DensityRule(StoppingRule):
    """TREC 2022 Deep Learning relevance-density rule (see the module documentation)."""

    KEYS = DENSITY_KEYS
    SECTION = None

    def __init__(self, **params: Any) -> None:
        p = _params(self.DEFAULTS, {}, params)
        self.accept_density_below = p["accept_density_below"]
        self.accept_min_judged = int(p["accept_min_judged"])
        self.accept_min_relevant = int(p["accept_min_relevant"])
        self.reject_min_judged = int(p["reject_min_judged"])
        self.reject_density_above = p["reject_density_above"]
        self.budget_min_judged = int(p["budget_min_judged"])
        self.budget_min_relevant = int(p["budget_min_relevant"])
        self.budget_density_at_least = p["budget_density_at_least"]

    def decide(self, state: JudgingState) -> Decision:
        n, r, d = state.judged, state.n_relevant, state.density_fraction
        details = {"judged": n, "relevant": r, "density": state.density, "budget": state.budget}
        acc_d, rej_d, bud_d = _dec(self.accept_density_below), _dec(self.reject_density_above), _dec(self.budget_density_at_least)
        dens = f"density {r}/{n} = {_fmt(d)}" if n else "density 0 (nothing judged)"
        accept = [d < acc_d, n >= self.accept_min_judged, r >= self.accept_min_relevant]
        if all(accept):
            return Decision(ACCEPT, f"{dens} < {_fmt(acc_d)}, {n} judged >= {self.accept_min_judged}, "
                            f"{r} relevant >= {self.accept_min_relevant}", self.name, details)
        if n >= self.reject_min_judged and d > rej_d:
            return Decision(REJECT, f"{dens} > {_fmt(rej_d)} with {n} judged >= {self.reject_min_judged}",
                            self.name, details)
        if state.budget_exhausted:
            why = []
            if n < self.budget_min_judged:
                why.append(f"{n} judged < {self.budget_min_judged}")
            if r < self.budget_min_relevant:
                why.append(f"{r} relevant < {self.budget_min_relevant}")
            if d >= bud_d:
                why.append(f"{dens} >= {_fmt(bud_d)}")
            head = f"budget of {state.budget} spent: "
            if why:
                return Decision(REJECT, head + ", ".join(why), self.name, {**details, "budget_exhausted": True})
            return Decision(ACCEPT, head + f"{dens} < {_fmt(bud_d)}, {n} judged, {r} relevant", self.name,
                            {**details, "budget_exhausted": True})
        need = []
        if not accept[0]:
            need.append(f"{dens} >= {_fmt(acc_d)}")
        if not accept[1]:
            need.append(f"{n} judged < {self.accept_min_judged}")
        if not accept[2]:
            need.append(f"{r} relevant < {self.accept_min_relevant}")
        msg = "not accepted: " + ", ".join(need)
        if d > rej_d:
            msg += f"; not rejected: {n} judged < {self.reject_min_judged}"
        if state.budget is not None:
            msg += f"; {state.budget - n} of the budget of {state.budget} left"
        return Decision(CONTINUE, msg, self.name, details)

    def needs(self) -> str:
        return (f"accepted below density {_fmt(_dec(self.accept_density_below))} with at least "
                f"{self.accept_min_judged} judged and {self.accept_min_relevant} relevant")

    def describe(self, state: JudgingState, decision: Decision | None = None) -> Description:
        """Where the topic stands against the accept condition: its density, judged and relevant,
        and what it still lacks (passages to judge, relevant passages to find, a lower density)."""
        n, r, d = state.judged, state.n_relevant, state.density_fraction
        at = f"at {float(d):.2f} with {n} judged and {r} relevant" if n else "nothing judged yet"
        dec = decision or self.decide(state)
        if dec.stopped:
            stands = f"{at}: {_DONE.get(dec.action, dec.action)}" + (f" ({dec.reason})" if dec.action != ACCEPT else "")
        else:
            lacks = [f"{self.accept_min_judged - n} more to judge"] if n < self.accept_min_judged else []
            if r < self.accept_min_relevant:
                lacks.append(f"{self.accept_min_relevant - r} more relevant to find")
            if n and d >= _dec(self.accept_density_below):
                lacks.append(f"the density must fall below {_fmt(_dec(self.accept_density_below))}")
            if state.budget is not None:
                lacks.append(f"{state.budget - n} of the budget of {state.budget} left")
            stands = at + (": " + ", ".join(lacks) if lacks else "")
        return Description(self.name, self.needs(), stands, float(self.accept_density_below))


@cross_rule("stopping", "never-accepted")
def _never_accepted(cfg: Config) -> Conflict | None:
    """No topic can ever be accepted: the density rule (``[stopping] rule``) needs a density below
    ``[stopping] accept_density_below`` = 0, and there is no ``[cal] budget`` (or its rule needs a
    density below ``budget_density_at_least`` = 0 too)."""
    if rule_name(cfg) != "density":
        return None
    density = get_rule("density", cfg)
    if float(density.accept_density_below) > 0:
        return None
    budget = ThreadParams.from_config(cfg).budget
    if budget is not None and float(density.budget_density_at_least) > 0:
        return None
    keys = (("stopping", "accept_density_below"), ("cal", "budget"))
    if budget is not None:
        keys += (("stopping", "budget_density_at_least"),)
    return Conflict(keys, "no density is below 0, so no topic could ever be accepted",
                    "raise accept_density_below (or set a [cal] budget with budget_density_at_least above 0)")


# -- knee and budget methods (Cormack & Grossman 2016) ------------------------------------------


def knee(state: JudgingState) -> tuple[int, float] | None:
    """The knee k of the gain curve and the slope ratio rho there (see module docs); None when
    the curve never rises above its chord (no knee). rho as a float, for reports: the rules
    compare the exact ratio (:func:`knee_ratio`)."""
    kn = knee_ratio(state)
    return None if kn is None else (kn[0], float(kn[1]))


def knee_ratio(state: JudgingState) -> tuple[int, Fraction] | None:
    """The knee k and the exact slope ratio rho = g(k) (s - k) / (k (r - g(k) + 1)) as a
    fraction, so that a ratio exactly at the threshold stops (in floating point, e.g.
    (33/33) / (1/123) is 122.99999999999999, not 123)."""
    s = state.judged
    if s < 2:
        return None
    g = state.gain()
    r = int(g[-1])
    i = np.arange(1, s + 1, dtype=np.int64)
    dist = s * g - r * i
    k = int(np.argmax(dist)) + 1
    if dist[k - 1] <= 0 or k >= s:
        return None
    gk = int(g[k - 1])
    return k, Fraction(gk * (s - k), k * (r - gk + 1))


@register_rule("knee")
class KneeRule(StoppingRule):
    """Cormack & Grossman (2016) knee method (see the module documentation)."""

    KEYS = KNEE_KEYS
    SECTION = "knee"

    def __init__(self, **params: Any) -> None:
        p = _params(self.DEFAULTS, {}, params)
        self.min_judged = int(p["min_judged"])
        self.ratio = float(p["ratio"])
        self.adjust = bool(p["adjust"])
        self.adjust_base = float(p["adjust_base"])
        self.adjust_cap = int(p["adjust_cap"])

    def threshold(self, relevant: int) -> float:
        return self.adjust_base - min(relevant, self.adjust_cap) if self.adjust else self.ratio

    def needs(self) -> str:
        ratio = f"{self.adjust_base:g} - min(relevant, {self.adjust_cap})" if self.adjust else f"{self.ratio:g}"
        return (f"stops at a slope ratio of {ratio} at the knee of the gain curve, with at least {self.min_judged} "
                "judged")

    def decide(self, state: JudgingState) -> Decision:
        s, r = state.judged, state.n_relevant
        need = self.threshold(r)
        kn = knee_ratio(state)
        details = {"judged": s, "relevant": r, "density": state.density, "threshold": need,
                   "knee": None if kn is None else kn[0], "rho": None if kn is None else float(kn[1])}
        if kn is None:
            return Decision(CONTINUE, f"no knee in the gain curve ({r} relevant in {s} judged)", self.name, details)
        k, exact = kn
        rho, reached = float(exact), exact >= _dec(need)
        if s >= self.min_judged and reached:
            return Decision(STOP, f"slope ratio {rho:.4g} at the knee ({k}) >= {need:g}, {s} judged >= {self.min_judged}",
                            self.name, details)
        why = [] if reached else [f"slope ratio {rho:.4g} at the knee ({k}) < {need:g}"]
        if s < self.min_judged:
            why.append(f"{s} judged < {self.min_judged}")
        return Decision(CONTINUE, ", ".join(why), self.name, details)


@register_rule("budget")
class BudgetRule(StoppingRule):
    """Cormack & Grossman (2016) budget method (see the module documentation)."""

    KEYS = BUDGET_KEYS
    SECTION = "budget"

    def __init__(self, **params: Any) -> None:
        p = _params(self.DEFAULTS, {}, params)
        self.ratio = float(p["ratio"])
        self.target_size = int(p["target_size"])
        self.collection_share = float(p["collection_share"])

    def needs(self) -> str:
        return (f"stops once {self.collection_share:g} of the collection is judged, or at a slope ratio of "
                f"{self.ratio:g} with at least {self.target_size} x collection / relevant judged")

    def decide(self, state: JudgingState) -> Decision:
        s, r, c = state.judged, state.n_relevant, state.collection_size
        if not c:
            return Decision(CONTINUE, "collection size unknown (needed by the budget method)", self.name,
                            {"judged": s, "relevant": r})
        kn = knee_ratio(state)
        rho = None if kn is None else float(kn[1])
        need_s = self.target_size * c / r if r else float("inf")
        cap = self.collection_share * c
        details = {"judged": s, "relevant": r, "density": state.density, "collection_size": c,
                   "knee": None if kn is None else kn[0], "rho": rho, "min_judged": need_s, "cap": cap}
        if s >= cap:
            return Decision(STOP, f"{s} judged >= {self.collection_share:g} of the collection ({cap:g})", self.name, details)
        if kn is not None and kn[1] >= _dec(self.ratio) and s >= need_s:
            return Decision(STOP, f"slope ratio {rho:.4g} >= {self.ratio:g} and {s} judged >= "
                            f"{self.target_size}*{c}/{r} = {need_s:.4g}", self.name, details)
        why = []
        if rho is None:
            why.append("no knee in the gain curve")
        elif kn[1] < _dec(self.ratio):
            why.append(f"slope ratio {rho:.4g} < {self.ratio:g}")
        if s < need_s:
            why.append(f"{s} judged < {self.target_size}*{c}/{r} = {need_s:.4g}" if r else "no relevant passage yet")
        return Decision(CONTINUE, ", ".join(why) + f"; {cap:g} judged would stop it", self.name, details)


# -- target method ---------------------------------------------------------------------------------


@declared_defaults(CAL_KEYS)
def draw_sample(collection: Iterable[str], size: int, *, seed: int = AS_DECLARED, topic: str = "") -> list[str]:
    """The first ``size`` passages of a seeded random order of ``collection`` (per topic).

    The order depends only on the set of ids, ``seed`` and ``topic`` — not on the input order —
    and a larger ``size`` extends a smaller one (draw more until T relevant are found).
    """
    ids = np.asarray(sorted(set(map(str, collection))), dtype=object)
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, stable_int("target-sample", topic)])
    order = rng.permutation(len(ids))
    return ids[order[: max(int(size), 0)]].tolist()


@register_rule("target")
class TargetRule(StoppingRule):
    """Cormack & Grossman (2016) target method (see the module documentation)."""

    KEYS = TARGET_KEYS
    SECTION = "target"

    def __init__(self, **params: Any) -> None:
        p = _params(self.DEFAULTS, {}, params)
        self.size = int(p["size"])
        if self.size < 1:
            raise InputError("bad-option", "the target method needs a target size >= 1")

    def needs(self) -> str:
        return f"stops once the first {self.size} relevant passages of a random sample are reached"

    def decide(self, state: JudgingState) -> Decision:
        s, r = state.judged, state.n_relevant
        details: dict[str, Any] = {"judged": s, "relevant": r, "density": state.density}
        if state.sample is None:
            return Decision(CONTINUE, "no random sample (the target method needs one)", self.name, details)
        smp = state.sample
        targets = smp.targets(self.size)
        found_in_sample = int(sum(smp.relevant))
        details.update(sample=len(smp.passages), sample_relevant=found_in_sample)
        if targets is None:
            return Decision(CONTINUE, f"target sample incomplete: {found_in_sample} of {self.size} relevant in "
                            f"{len(smp.passages)} sampled", self.name, details)
        reached = set(state.passages) | set(state.issued)
        missing = [t for t in targets if t not in reached]
        details.update(targets=len(targets), targets_found=len(targets) - len(missing))
        if not missing:
            return Decision(STOP, f"all {len(targets)} target passages reached ({s} judged, sample of {len(smp.passages)})",
                            self.name, details)
        return Decision(CONTINUE, f"{len(targets) - len(missing)} of {len(targets)} target passages reached", self.name, details)


# -- states from a store; status and replay --------------------------------------------------------


def relevant_grades(config: Mapping | None) -> list[int]:
    """The grades counted as relevant: the config's ``[labels] passage_relevant`` (2, 3)."""
    return [int(g) for g in LabelsParams.from_config(config).passage_relevant]


def _state_from_log(lab: pd.DataFrame, rel: Sequence[int], **kw) -> JudgingState:
    return JudgingState.from_grades(lab["docid"].tolist(), lab["grade"].astype(np.int64).tolist(), relevant_grades=rel,
                                    batches=lab["batch_seq"].tolist(), **kw)


def state_from_store(store, topic: str, thread: str = "all", *, relevant: Sequence[int] = PASSAGE_RELEVANT,
                     combine: str = DEFAULT_COMBINE, budget: int | None = None,
                     collection_size: int | None = None, max_batch_seq: int | None = None) -> JudgingState:
    """The :class:`JudgingState` of one topic and thread of a :class:`~qrelkit.store.judging.JudgingStore`
    (optionally only up to the batch issued as ``max_batch_seq``): judged passages in judging
    order, one grade per passage (``combine``), the passages issued in the thread's cal batches,
    its sample batches as the target sample, and the thread's collection size unless given."""
    log = store.judgments.log(topic, thread, max_batch_seq=max_batch_seq)
    return _state_from_judgments(store, topic, thread, log, relevant=relevant, combine=combine, budget=budget,
                                 collection_size=collection_size, max_batch_seq=max_batch_seq)


def _state_from_judgments(store, topic: str, thread: str, log: pd.DataFrame, *, relevant: Sequence[int],
                          combine: str, budget: int | None, collection_size: int | None,
                          max_batch_seq: int | None = None) -> JudgingState:
    """:func:`state_from_store` from ``log``, the thread's judgments already read from ``store``."""
    lab = combine_log(log, combine=combine)
    if collection_size is None:
        th = store.topics.threads(topic)
        row = th[th["thread"] == thread]
        if len(row) and pd.notna(row["collection_size"].iat[0]):
            collection_size = int(row["collection_size"].iat[0])
    return _state_from_log(lab, relevant, budget=budget, collection_size=collection_size,
                           issued=frozenset(store.batches.issued_passages(topic, thread, max_batch_seq=max_batch_seq)),
                           sample=_sample_from_store(store, topic, relevant, combine, collection_size),
                           topic=str(topic), thread=thread)


def _sample_from_store(store, topic: str, relevant: Sequence[int], combine: str, collection_size: int | None) -> TargetSample | None:
    return _sample_from_log(store.judgments.log(topic, None, include_sample=True), relevant, combine, collection_size)


def _sample_from_log(log: pd.DataFrame, relevant: Sequence[int], combine: str, collection_size: int | None) -> TargetSample | None:
    """The judged target sample of one topic from its judgments (the ``sample`` batches)."""
    log = log[log["kind"] == "sample"]
    if len(log) == 0:
        return None
    lab = combine_log(log, combine=combine)
    rel = binarize(lab["grade"].to_numpy(), relevant)
    exhausted = collection_size is not None and len(lab) >= collection_size
    return TargetSample(tuple(lab["docid"]), tuple(bool(x) for x in rel), exhausted)


def _config_budget(config: Mapping | None, budget: int | None) -> int | None:
    """``budget`` when given, else the configuration's ``[cal] budget`` (none: no budget)."""
    return int(budget) if budget is not None else ThreadParams.from_config(config).budget


STATUS_COLUMNS = ["qid", "thread", "state", "judged", "relevant", "density", "batches", "open_batches", "rule",
                  "action", "reason", "stands"]


def _in_view(kind: np.ndarray, thread_of: np.ndarray, thread: str) -> np.ndarray:
    """Which rows (judgments or issued items, by batch ``kind`` and ``thread``) are in a
    thread's view, sample batches excluded: ``all`` sees every pool and cal batch, the others
    the pool batches and their own cal batches (as :meth:`~qrelkit.store.interfaces.JudgmentLog.log`)."""
    if thread == "all":
        return kind != "sample"
    return (kind == "pool") | ((kind == "cal") & (thread_of == thread))


def _by_topic(df: pd.DataFrame, cols: Sequence[str]) -> dict[str, dict[str, np.ndarray]]:
    """topic -> {column: its values for that topic, in the frame's order}: one pass, numpy
    arrays (per-thread pandas selections cost milliseconds each)."""
    arrays = {c: df[c].to_numpy(dtype=object) for c in cols}
    pos: dict[str, list[int]] = {}
    for i, q in enumerate(df["qid"].tolist()):
        pos.setdefault(q, []).append(i)
    return {q: {c: a[np.asarray(p, np.int64)] for c, a in arrays.items()} for q, p in pos.items()}


def thread_states(threads: pd.DataFrame, log: pd.DataFrame, *, items: pd.DataFrame | None = None,
                  relevant: Sequence[int] = PASSAGE_RELEVANT, combine: Any = DEFAULT_COMBINE,
                  budget: int | None = None) -> Iterable[JudgingState]:
    """The current :class:`JudgingState` of every row of ``threads`` (``qid, thread,
    collection_size``, as :meth:`~qrelkit.store.interfaces.Topics.threads` gives) from a judgment
    log already read (:meth:`~qrelkit.store.interfaces.JudgmentLog.log`, samples included when the
                      target method needs them; topics not in it have nothing judged): each thread's view, one grade
    per passage by ``combine`` (:func:`~qrelkit.store.combine.combine_log`) in judging order, the
    budget, the target sample. ``items``: the issued items (``qid, kind, thread, passage``,
    :meth:`~qrelkit.store.interfaces.Batches.issued_items`) for the states' ``issued`` sets; None
    leaves them empty (the density rule does not read them). The same states as
    :func:`state_from_store`, from one pass over the log instead of queries per thread.

    Examples
    --------
    >>> import pandas as pd
    >>> log = pd.DataFrame({"qid": ["1", "1"], "docid": ["p1", "p2"], "assessor": ["a", "a"], "grade": [2, 0],
    ...                     "batch_id": ["b", "b"], "thread": [None, None], "kind": ["pool", "pool"],
    ...                     "iteration": [None, None], "position": [1, 2], "batch_seq": [1, 1]})
    >>> th = pd.DataFrame({"qid": ["1"], "thread": ["all"], "collection_size": [None]})
    >>> [(s.judged, s.n_relevant) for s in thread_states(th, log)]
    [(2, 1)]
    """
    cols = list(log.columns)
    logs = _by_topic(log, cols)
    items_by = _by_topic(items, ["kind", "thread", "passage"]) if items is not None else {}
    none = np.zeros(0, object)
    for t in threads.itertuples(index=False):
        tl = logs.get(t.qid, {c: none for c in cols})
        ti = items_by.get(t.qid)
        csize = None if pd.isna(t.collection_size) else int(t.collection_size)
        view = _in_view(tl["kind"], tl["thread"], t.thread)
        docids = tl["docid"][view]
        grades, seqs = tl["grade"][view], tl["batch_seq"][view]
        if len(set(docids.tolist())) != len(docids):     # several judgments of a passage: combine them
            lab = combine_log(pd.DataFrame({c: tl[c][view] for c in cols}), combine=combine)
            docids, grades, seqs = (lab[c].to_numpy() for c in ("docid", "grade", "batch_seq"))
        sample = None
        if (tl["kind"] == "sample").any():
            sample = _sample_from_log(pd.DataFrame(tl), relevant, combine, csize)
        issued = frozenset() if ti is None else frozenset(ti["passage"][_in_view(ti["kind"], ti["thread"], t.thread)].tolist())
        yield JudgingState.from_grades(docids.tolist(), grades.astype(np.int64).tolist(), relevant_grades=relevant,
                                       batches=seqs.tolist(), budget=budget, collection_size=csize, issued=issued,
                                       sample=sample, topic=str(t.qid), thread=t.thread)


def _current_states(store, threads: pd.DataFrame, *, relevant: Sequence[int], combine: Any,
                    budget: int | None, log: pd.DataFrame | None = None) -> Iterable[JudgingState]:
    """The current :class:`JudgingState` of every row of ``threads`` (as :func:`state_from_store`),
    from one read of the judgment log and one of the issued items (:func:`thread_states`), not
    several queries and frames per thread (``cal status`` on 200 topics x 3 threads: 18.2 s
    before, 0.8 s after; ``benchmarks/bench_store.py``). ``log``: the store's whole log
    (``judgments(None, None, include_sample=True)``) when the caller has read it already."""
    if log is None:
        log = store.judgments.log(None, None, include_sample=True)
    return thread_states(threads, log, items=store.batches.issued_items(), relevant=relevant, combine=combine,
                         budget=budget)


def status_table(store, *, rule: str | None = None, config: Mapping | None = None, combine: str = DEFAULT_COMBINE,
                 budget: int | None = None, threads: Sequence[str] | None = None,
                 progress: Callable[..., None] | None = None, _log: pd.DataFrame | None = None,
                 **params) -> pd.DataFrame:
    """Per topic and thread (natural topic order; fractional, local, all): the stored state,
    judged, relevant, density, batches with judgments, open (issued, not fully judged) batches,
    the decision of ``rule`` (None: the config's ``[stopping] rule``) on the current state with
    its reason, and where the thread stands by the rule's own description (``stands``,
    :meth:`StoppingRule.describe`) (:data:`STATUS_COLUMNS`). ``progress``: called as
    ``progress(0, total=<threads>)``, then ``progress(1)`` after each topic and thread.
    (``_log``: the store's whole log, when the caller read it already.)"""
    r = get_rule(rule_name(config, rule), config, **params)
    rel = relevant_grades(config)
    bud = _config_budget(config, budget)
    batches = store.batches.all()
    n_open = batches[batches["status"] == "open"].groupby(["qid", "thread"]).size().to_dict()
    th = store.topics.threads()
    if threads:
        th = th[th["thread"].isin(list(threads))]
    if progress is not None:
        progress(0, total=len(th))
    rows = []
    for t, st in zip(th.itertuples(index=False), _current_states(store, th, relevant=rel, combine=combine, budget=bud, log=_log)):
        d = r.decide(st)
        rows.append((t.qid, t.thread, t.state, st.judged, st.n_relevant, st.density, len(st.batch_ends),
                     int(n_open.get((t.qid, t.thread), 0)), r.name, d.action, d.reason, r.describe(st, d).stands))
        if progress is not None:
            progress(1)
    return pd.DataFrame(rows, columns=STATUS_COLUMNS)


REPLAY_COLUMNS = ["qid", "thread", "rule", "action", "reason", "stop_batch", "stop_batches", "stop_judged",
                  "stop_relevant", "stop_density", "judged", "relevant", "recall", "saved"]


def replay_state(state: JudgingState, rule: StoppingRule) -> tuple[int | None, Decision]:
    """Apply ``rule`` after every batch of ``state`` (its ``batch_ends``; the whole state when
    it has none) and return (number of batches at the first decision that is not
    ``continue``, that decision) — or (None, the decision on the whole state)."""
    ends = state.batch_ends or ((state.judged,) if state.judged else ())
    last = rule.decide(state.prefix(0)) if not ends else None
    for b, n in enumerate(ends, 1):
        last = rule.decide(state.prefix(n))
        if last.stopped:
            return b, last
    return None, last


def replay_store(store, *, rule: str, config: Mapping | None = None, combine: str = DEFAULT_COMBINE,
                 budget: int | None = None, threads: Sequence[str] | None = None, **params) -> pd.DataFrame:
    """Re-apply ``rule`` to the stored judgment log of every topic and thread, batch by batch in
    judging order, and report where it would first have decided something other than
    ``continue`` (:data:`REPLAY_COLUMNS`): the batch (id and count), judged, relevant and density
    at that point; the log's totals; recall at the stop relative to the relevant passages in the
    log; and the judgments the stop would have saved. A rule that never fires reports the
    decision on the whole log and empty stop columns.

    Each prefix is the log up to that batch: when several assessors judged a passage, its grade
    is combined from the judgments made up to then."""
    r = get_rule(rule, config, **params)
    rel = relevant_grades(config)
    bud = _config_budget(config, budget)
    rows = []
    for t in store.topics.threads().itertuples(index=False):
        if threads and t.thread not in threads:
            continue
        csize = None if pd.isna(t.collection_size) else int(t.collection_size)
        log = store.judgments.log(t.qid, t.thread)
        full = _state_from_judgments(store, t.qid, t.thread, log, relevant=rel, combine=combine, budget=bud,
                                     collection_size=csize)
        seqs = list(dict.fromkeys(log["batch_seq"].tolist()))
        ids = dict(zip(log["batch_seq"], log["batch_id"]))
        simple = not log.duplicated(["qid", "docid"]).any()
        hit = None
        for b, seq in enumerate(seqs, 1):
            if simple:
                st = full.prefix(full.batch_ends[b - 1])
                st = replace(st, issued=frozenset(store.batches.issued_passages(t.qid, t.thread, max_batch_seq=seq)))
            else:
                st = state_from_store(store, t.qid, t.thread, relevant=rel, combine=combine, budget=bud,
                                      collection_size=csize, max_batch_seq=seq)
            d = r.decide(st)
            if d.stopped:
                hit = (b, seq, st, d)
                break
        if hit is None:
            d = r.decide(full)
            rows.append((t.qid, t.thread, r.name, d.action, d.reason, None, None, None, None, None,
                         full.judged, full.n_relevant, None, None))
        else:
            b, seq, st, d = hit
            rows.append((t.qid, t.thread, r.name, d.action, d.reason, ids[seq], b, st.judged, st.n_relevant, st.density,
                         full.judged, full.n_relevant,
                         st.n_relevant / full.n_relevant if full.n_relevant else None, full.judged - st.judged))
    out = pd.DataFrame(rows, columns=REPLAY_COLUMNS)
    for c in ("stop_batches", "stop_judged", "stop_relevant", "saved"):
        out[c] = out[c].astype("Int64")
    return out
