"""Stopping rules: the TREC 2022 density rule at every boundary of docs/protocol.md, the knee, budget
and target methods of Cormack & Grossman (2016), the registry, no one-round lag, and status /
replay over a judging store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from qrelkit.cal.stopping import (
    ACCEPT, CONTINUE, REJECT, STOP, BudgetRule, DensityRule, JudgingState, KneeRule, StoppingRule, TargetRule,
    TargetSample, available_rules, draw_sample, get_rule, knee, register_rule, relevant_grades, replay_state,
    replay_store, state_from_store, status_table,
)
from qrelkit.store import init_store
from qrelkit.config import load_config
from qrelkit.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "trec-dl-2022.toml"


def state(n: int, r: int, *, budget: int | None = None, first: bool = True, **kw) -> JudgingState:
    """n judged passages, r of them relevant (first, or last)."""
    rel = np.zeros(n, bool)
    if first:
        rel[:r] = True
    elif r:
        rel[-r:] = True
    return JudgingState(tuple(f"p{i}" for i in range(n)), rel, budget=budget, **kw)


def curve(bits: str | list[int], **kw) -> JudgingState:
    rel = np.array([int(b) for b in bits], bool)
    return JudgingState(tuple(f"p{i}" for i in range(len(rel))), rel, **kw)


@pytest.fixture(scope="module")
def density() -> DensityRule:
    return get_rule("density", load_config(CONFIG))


# -- the density rule, boundary by boundary ------------------------------------------------------


def test_config_thresholds_are_the_protocol(density):
    assert density.params() == DensityRule().params()
    assert density.accept_density_below == 0.4 and density.accept_min_judged == 150 and density.accept_min_relevant == 4
    assert density.reject_min_judged == 301 and density.reject_density_above == 0.5
    assert (density.budget_min_judged, density.budget_min_relevant, density.budget_density_at_least) == (150, 4, 0.4)


@pytest.mark.parametrize("n, r, action", [
    (150, 59, ACCEPT),     # density 0.393 < 0.4, exactly 150 judged, > 3 relevant
    (150, 60, CONTINUE),   # density exactly 0.4: not < 0.4
    (200, 80, CONTINUE),   # exactly 0.4 again
    (149, 10, CONTINUE),   # 149 judged: one short of 150
    (150, 3, CONTINUE),    # 3 relevant: not more than 3
    (150, 4, ACCEPT),      # 4 relevant
    (300, 200, CONTINUE),  # exactly 300 judged: not more than 300
    (301, 200, REJECT),    # 301 judged, density 0.66 > 0.5
    (301, 151, REJECT),    # 301 judged, density 0.5017 > 0.5
    (300, 151, CONTINUE),  # density > 0.5 but only 300 judged
    (302, 151, CONTINUE),  # density exactly 0.5: not > 0.5
    (302, 152, REJECT),    # just above 0.5
    (400, 180, CONTINUE),  # 0.45: neither accept nor reject, no budget
    (0, 0, CONTINUE),
])
def test_density_boundaries(density, n, r, action):
    d = density.decide(state(n, r))
    assert d.action == action, d.reason
    assert d.rule == "density" and d.details["judged"] == n and d.details["relevant"] == r


def test_density_reasons_name_the_numbers(density):
    assert density.decide(state(150, 59)).reason == "density 59/150 = 0.3933 < 0.4, 150 judged >= 150, 59 relevant >= 4"
    assert "density 60/150 = 0.4 >= 0.4" in density.decide(state(150, 60)).reason
    assert density.decide(state(301, 200)).reason == "density 200/301 = 0.6645 > 0.5 with 301 judged >= 301"
    assert "3 relevant < 4" in density.decide(state(150, 3)).reason


@pytest.mark.parametrize("n, r, budget, action, why", [
    (100, 10, 100, REJECT, "100 judged < 150"),              # budget spent before 150 judged
    (149, 10, 149, REJECT, "149 judged < 150"),
    (200, 3, 200, REJECT, "3 relevant < 4"),                 # fewer than 4 relevant
    (200, 80, 200, REJECT, "density 80/200 = 0.4 >= 0.4"),   # density exactly 0.4
    (400, 180, 400, REJECT, "density 180/400 = 0.45 >= 0.4"),  # between the two densities
    (200, 79, 200, ACCEPT, "200 judged >= 150"),             # the accept rule itself fires
    (199, 3, 200, CONTINUE, "1 of the budget of 200 left"),  # one judgment of budget left
    (250, 3, 200, REJECT, "3 relevant < 4"),                 # overspent counts as spent
])
def test_density_budget_exhaustion(density, n, r, budget, action, why):
    d = density.decide(state(n, r, budget=budget))
    assert d.action == action and why in d.reason, d.reason


def test_budget_path_accepts_when_only_the_budget_rule_allows_it():
    rule = DensityRule(accept_min_judged=500)   # accept needs 500 judged; the budget path needs 150
    d = rule.decide(state(200, 20, budget=200))
    assert d.action == ACCEPT and d.reason.startswith("budget of 200 spent") and d.details["budget_exhausted"]
    assert rule.decide(state(200, 20, budget=201)).action == CONTINUE


def test_thresholds_come_from_the_config(tmp_path):
    text = CONFIG.read_text().replace("accept_min_judged = 150", "accept_min_judged = 100") \
        .replace("reject_density_above = 0.5", "reject_density_above = 0.6")
    cfg_path = tmp_path / "c.toml"
    cfg_path.write_text(text)
    rule = get_rule("density", load_config(cfg_path))
    assert rule.decide(state(100, 10)).action == ACCEPT
    assert rule.decide(state(302, 152)).action == CONTINUE      # 0.503 is no longer > 0.6
    assert get_rule("density", load_config(cfg_path), accept_min_judged=120).decide(state(100, 10)).action == CONTINUE


def test_relevance_is_the_config_binarization(tmp_path):
    assert relevant_grades(load_config(CONFIG)) == [2, 3]
    grades = [1] * 60 + [0] * 90
    s = JudgingState.from_grades([f"p{i}" for i in range(150)], grades, relevant_grades=relevant_grades(load_config(CONFIG)))
    assert s.n_relevant == 0
    s = JudgingState.from_grades([f"p{i}" for i in range(150)], grades, relevant_grades=[1, 2, 3])
    assert s.n_relevant == 60 and s.density == 0.4


def test_decision_uses_the_batch_just_judged():
    """Accept fires on the state that contains the 150th judgment, not one round later."""
    rule = DensityRule()
    grades = ([2] * 4 + [0] * 21) + [0] * 25 * 5        # 6 batches of 25: 150 judged, 4 relevant
    batches = [f"b{i // 25}" for i in range(150)]
    s = JudgingState.from_grades([f"p{i}" for i in range(150)], grades, batches=batches)
    assert s.batch_ends == (25, 50, 75, 100, 125, 150)
    assert rule.decide(s.prefix(125)).action == CONTINUE
    assert rule.decide(s).action == ACCEPT
    b, d = replay_state(s, rule)
    assert b == 6 and d.action == ACCEPT
    assert replay_state(s.prefix(125), rule)[0] is None


# -- knee method --------------------------------------------------------------------------------


def _kneedle(rel: np.ndarray) -> int | None:
    """Reference: Kneedle's difference curve y - x on the gain curve normalized to the unit
    square (exact fractions; the first maximum)."""
    from fractions import Fraction

    g = np.cumsum(rel)
    s, r = len(rel), int(g[-1])
    if r == 0:
        return None
    diff = [Fraction(int(g[i - 1]), r) - Fraction(i, s) for i in range(1, s + 1)]
    best = max(diff)
    k = diff.index(best) + 1
    return k if best > 0 and k < s else None


def test_knee_worked_example():
    # 30 relevant first, then one more relevant at 100 among 300 judged
    rel = np.zeros(300, bool)
    rel[:30] = True
    rel[99] = True
    s = curve(rel.astype(int).tolist())
    k, rho = knee(s)
    assert k == 30
    assert rho == pytest.approx((30 / 30) / ((31 - 30 + 1) / (300 - 30)))   # 135
    rule = KneeRule()
    assert rule.threshold(31) == 125
    d = rule.decide(s)
    assert d.action == STOP and d.details["knee"] == 30 and "135 at the knee (30) >= 125" in d.reason
    # at 200 judged the same curve gives rho = 85 < 125
    assert rule.decide(s.prefix(200)).action == CONTINUE


def test_knee_adjusted_threshold_boundary():
    rule = KneeRule()   # 10 relevant first: rho = s - 10, threshold 156 - 10 = 146
    assert rule.decide(state(155, 10)).action == CONTINUE
    d = rule.decide(state(156, 10))
    assert d.action == STOP and d.details["rho"] == 146 and d.details["threshold"] == 146
    assert KneeRule().threshold(0) == 156 and KneeRule().threshold(150) == 6 and KneeRule().threshold(400) == 6


def test_knee_needs_150_judged():
    rule = KneeRule(adjust=False)    # fixed ratio 6; rho = s - 10 is far above it
    d = rule.decide(state(149, 10))
    assert d.action == CONTINUE and "149 judged < 150" in d.reason
    assert rule.decide(state(150, 10)).action == STOP


def test_no_knee_means_continue():
    rule = KneeRule()
    for s in (state(200, 0), state(200, 200), state(1, 1), state(0, 0), state(200, 20, first=False)):
        assert rule.decide(s).action == CONTINUE
        assert knee(s) is None


def test_knee_matches_kneedle_reference():
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(2, 400))
        p = np.linspace(rng.uniform(0.2, 1), rng.uniform(0, 0.2), n)   # decaying precision, as CAL
        rel = rng.random(n) < p
        s = curve(rel.astype(int).tolist())
        kn = knee(s)
        assert (kn[0] if kn else None) == _kneedle(rel)


# -- budget method ------------------------------------------------------------------------------


def test_budget_needs_the_collection_size():
    d = BudgetRule().decide(state(500, 100))
    assert d.action == CONTINUE and "collection size unknown" in d.reason


def test_budget_ten_c_over_r_boundary():
    rule = BudgetRule()     # 100 relevant first: rho = s - 100 >= 6; needs s >= 10 * 10000 / 100 = 1000
    assert rule.decide(state(999, 100, collection_size=10_000)).action == CONTINUE
    d = rule.decide(state(1000, 100, collection_size=10_000))
    assert d.action == STOP and "1000 judged >= 10*10000/100 = 1000" in d.reason


def test_budget_needs_the_slope_ratio():
    uniform = curve(([1] + [0] * 4) * 200, collection_size=1000)    # precision 0.2 throughout: no knee
    d = BudgetRule().decide(uniform.prefix(700))
    assert d.action == CONTINUE
    assert BudgetRule().decide(uniform.prefix(750)).action == STOP       # 0.75 |C|
    assert "750 judged >= 0.75 of the collection" in BudgetRule().decide(uniform.prefix(750)).reason


def test_budget_cap_boundary():
    assert BudgetRule().decide(state(149, 0, collection_size=200)).action == CONTINUE
    assert BudgetRule().decide(state(150, 0, collection_size=200)).action == STOP


# -- target method ------------------------------------------------------------------------------


def test_draw_sample_is_seeded_and_prefix_stable():
    ids = [f"d{i}" for i in range(1000)]
    a = draw_sample(ids, 50, seed=3, topic="7")
    assert a == draw_sample(reversed(ids), 50, seed=3, topic="7")      # input order does not matter
    assert draw_sample(ids, 80, seed=3, topic="7")[:50] == a           # drawing more extends the sample
    assert a != draw_sample(ids, 50, seed=4, topic="7") and a != draw_sample(ids, 50, seed=3, topic="8")
    assert len(set(a)) == 50 and set(a) <= set(ids)
    assert sorted(draw_sample(ids, 5000, seed=1)) == sorted(ids)


def test_target_set():
    smp = TargetSample(tuple("abcdefg"), (False, True, False, True, True, False, True))
    assert smp.targets(3) == ("b", "d", "e")
    assert smp.targets(5) is None
    assert TargetSample(smp.passages, smp.relevant, exhausted=True).targets(5) == ("b", "d", "e", "g")


def test_target_rule():
    rule = get_rule("target", None, size=2)
    smp = TargetSample(("x", "t1", "y", "t2", "t3"), (False, True, False, True, True))
    base = state(40, 5)
    assert "no random sample" in rule.decide(base).reason
    s = JudgingState(base.passages + ("t1",), np.append(base.relevant, True), sample=smp)
    d = rule.decide(s)
    assert d.action == CONTINUE and "1 of 2 target passages reached" in d.reason
    s2 = JudgingState(s.passages + ("t2",), np.append(s.relevant, True), sample=smp)
    assert rule.decide(s2).action == STOP
    # reached by the review = judged in the thread or issued in one of its batches
    assert rule.decide(JudgingState(s.passages, s.relevant, sample=smp, issued=frozenset({"t2"}))).action == STOP
    # an incomplete sample cannot stop anything
    small = TargetSample(("x", "t1"), (False, True))
    d = rule.decide(JudgingState(s2.passages, s2.relevant, sample=small))
    assert d.action == CONTINUE and "target sample incomplete: 1 of 2 relevant in 2 sampled" in d.reason
    assert TargetRule().size == 10


def test_target_size_from_config(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text(CONFIG.read_text() + "\n[stopping.target]\nsize = 3\n\n[stopping.knee]\nmin_judged = 99\n")
    cfg = load_config(p)
    assert get_rule("target", cfg).size == 3 and get_rule("target", cfg, size=4).size == 4
    assert get_rule("knee", cfg).min_judged == 99
    assert get_rule("density", cfg).params() == DensityRule().params()


# -- registry -----------------------------------------------------------------------------------


def test_registry(registries):
    assert {"density", "knee", "budget", "target"} <= set(available_rules())
    with pytest.raises(InputError, match=r"\[bad-option\] unknown stopping rule 'nope'"):
        get_rule("nope")
    with pytest.raises(InputError, match="unknown parameter"):
        get_rule("knee", None, rho=3)

    @register_rule("fixed-count-test")
    class FixedCount(StoppingRule):
        def __init__(self, n=10):
            self.n = n

        @classmethod
        def from_config(cls, config=None, **overrides):
            return cls(**overrides)

        def decide(self, state):
            return self.stop(state)

        def stop(self, state):
            from qrelkit.cal.stopping import Decision
            return Decision(STOP if state.judged >= self.n else CONTINUE, f"{state.judged} judged", self.name)

    assert get_rule("fixed-count-test", n=3).decide(state(3, 0)).action == STOP


# -- status and replay over a store -------------------------------------------------------------


def _campaign(tmp_path, grades_by_batch: dict[str, list[list[int]]], thread: str = "all"):
    """A store with topics and CAL batches of the given grades (one list per batch)."""
    store = init_store(tmp_path / "c.db", {q: f"topic {q}" for q in grades_by_batch}, collection_size=5000)
    rows = []
    for q, batches in grades_by_batch.items():
        for it, grades in enumerate(batches):
            items = [f"{q}-p{it}-{i}" for i in range(len(grades))]
            bid = store.batches.issue(q, thread, items)
            rows += [(q, d, "A1", g, bid) for d, g in zip(items, grades)]
    store.judgments.import_judgments(pd.DataFrame(rows, columns=["qid", "docid", "assessor", "grade", "batch_id"]))
    return store


def test_replay_and_status_on_a_store(tmp_path):
    accept = [[2] * 4 + [0] * 21] + [[0] * 25] * 7          # 4 relevant, 150 judged after batch 6
    reject = [[3] * 20 + [0] * 5] * 14                      # density 0.8: reject once > 300 judged
    store = _campaign(tmp_path, {"1": accept, "2": reject})
    rep = replay_store(store, rule="density", config=load_config(CONFIG), threads=["all"])
    one = rep[rep["qid"] == "1"].iloc[0]
    assert (one["action"], one["stop_batches"], one["stop_judged"], one["stop_relevant"]) == (ACCEPT, 6, 150, 4)
    assert one["stop_batch"] == "1/all/0005" and one["judged"] == 200 and one["saved"] == 50 and one["recall"] == 1.0
    two = rep[rep["qid"] == "2"].iloc[0]
    assert (two["action"], two["stop_batches"], two["stop_judged"]) == (REJECT, 13, 325)
    st = status_table(store, config=load_config(CONFIG))
    assert list(st["thread"][:3]) == ["fractional", "local", "all"]
    row = st[(st["qid"] == "1") & (st["thread"] == "all")].iloc[0]
    assert (row["judged"], row["relevant"], row["action"], row["batches"]) == (200, 4, ACCEPT, 8)
    # the local thread saw none of the 'all' thread's batches
    loc = st[(st["qid"] == "1") & (st["thread"] == "local")].iloc[0]
    assert loc["judged"] == 0 and loc["action"] == CONTINUE
    # budget from the command line / config
    rep = replay_store(store, rule="density", config=load_config(CONFIG), budget=100, threads=["all"])
    assert list(rep["action"]) == [REJECT, REJECT] and list(rep["stop_judged"]) == [100, 100]
    assert rep["reason"].iloc[0] == "budget of 100 spent: 100 judged < 150"
    store.close()


def test_replay_knee_and_budget_on_a_store(tmp_path):
    batches = [[2] * 25, [2] * 20 + [0] * 5] + [[0] * 25] * 8      # 45 relevant, then nothing
    store = _campaign(tmp_path, {"7": batches})
    rep = replay_store(store, rule="knee", threads=["all"]).iloc[0]
    # knee at 45; rho = s - 45 >= 156 - 45 = 111 first holds at the batch ending at s = 175
    assert (rep["action"], rep["stop_judged"], rep["stop_batches"]) == (STOP, 175, 7)
    rep = replay_store(store, rule="budget", threads=["all"]).iloc[0]
    # |C| = 5000 from the store: 10 * 5000 / 45 = 1111 judgments are never reached
    assert rep["action"] == CONTINUE and pd.isna(rep["stop_judged"])
    rep = replay_store(store, rule="budget", threads=["all"], target_size=1).iloc[0]   # 5000/45 = 111.1
    assert (rep["action"], rep["stop_judged"]) == (STOP, 125)
    store.close()


def test_target_method_from_store_sample(tmp_path):
    store = _campaign(tmp_path, {"5": [[2, 0, 0, 2, 0], [0, 2, 0, 0, 0], [0, 0, 0, 0, 0]]})
    # a random sample judged separately: its relevant passages are the targets
    sample = ["5-p1-1", "5-x", "5-p0-3", "5-y"]
    bid = store.batches.issue("5", None, sample, kind="sample")
    store.judgments.import_judgments(pd.DataFrame({"qid": "5", "docid": sample, "assessor": "A2", "grade": [2, 0, 2, 0], "batch_id": bid}))
    st = state_from_store(store, "5", "all")
    assert st.sample.passages == tuple(sample) and st.sample.relevant == (True, False, True, False)
    assert st.judged == 15   # the sample is in no thread's sequence
    rep = replay_store(store, rule="target", threads=["all"], size=2).iloc[0]
    assert (rep["action"], rep["stop_batches"], rep["stop_judged"]) == (STOP, 2, 10)
    store.close()


def test_replay_recombines_grades_per_prefix(tmp_path, registries):
    """A second assessor's later grade changes the passage's label only from that batch on."""
    store = init_store(tmp_path / "c.db", {"1": ""})
    b0 = store.batches.issue("1", "all", ["a", "b"])
    b1 = store.batches.issue("1", "all", ["c"])
    store.judgments.import_judgments(pd.DataFrame({"qid": "1", "docid": ["a", "b", "c"], "assessor": "A1", "grade": [0, 0, 0],
                                                   "batch_id": [b0, b0, b1]}))
    # a second assessor judges "a" relevant in a later (pool) batch
    store.judgments.import_judgments(pd.DataFrame({"qid": ["1"], "docid": ["a"], "assessor": ["A2"], "grade": [3], "batch_id": ["late"]}))
    full = state_from_store(store, "1", "all", combine="max")
    assert full.passages == ("a", "b", "c") and full.n_relevant == 1
    early = state_from_store(store, "1", "all", combine="max", max_batch_seq=2)
    assert early.n_relevant == 0

    @register_rule("any-relevant-test")
    class AnyRelevant(StoppingRule):
        @classmethod
        def from_config(cls, config=None, **kw):
            return cls()

        def decide(self, state):
            from qrelkit.cal.stopping import Decision
            return Decision(STOP if state.n_relevant else CONTINUE, "", self.name)

    rep = replay_store(store, rule="any-relevant-test", threads=["all"], combine="max").iloc[0]
    assert (rep["stop_batch"], rep["stop_batches"], rep["stop_judged"]) == ("late", 3, 3)
    store.close()
