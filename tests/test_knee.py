"""The knee stopping rule against Cormack and Grossman's definition (SIGIR 2016): after s
documents reviewed with relret relevant, the knee i is the point of the gain curve farthest from
the line from (0, 0) to (s, relret); slope ratio = (rel(i)/i) / ((relret - rel(i) + 1)/(s - i));
stop when ratio >= 156 - min(relret, 150) and s >= 150.

The definition is written out here again, independently of qrelkit (exact fractions, the
perpendicular distance itself), and the rule is checked against it on hand-built curves (the
boundaries) and on CAL runs over a real collection (where it must fire at the first batch at
which the definition is met)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from conftest import shared

from qrelkit.cal.stopping import CONTINUE, STOP, JudgingState, KneeRule, get_rule, knee


def definition(rel) -> tuple[bool, int | None, Fraction | None]:
    """(stop?, knee, slope ratio) by the published definition, from the 0/1 relevance sequence."""
    rel = [bool(x) for x in rel]
    s, relret = len(rel), sum(rel)
    if s == 0 or relret == 0:
        return False, None, None
    gain = np.cumsum(rel).tolist()
    best, k = None, None
    for i in range(1, s + 1):      # signed squared distance above the chord y = relret / s * x
        num = s * gain[i - 1] - relret * i
        d = Fraction(num * abs(num), s * s + relret * relret)
        if best is None or d > best:
            best, k = d, i
    if best <= 0 or k == s:        # the curve never rises above the chord: no knee
        return False, None, None
    gk = gain[k - 1]
    ratio = (Fraction(gk, k)) / Fraction(relret - gk + 1, s - k)
    return ratio >= 156 - min(relret, 150) and s >= 150, k, ratio


def curve(bits) -> JudgingState:
    rel = np.asarray([bool(b) for b in bits])
    return JudgingState(tuple(f"p{i}" for i in range(len(rel))), rel)


def first_then(n_rel: int, n_non: int, extra=()) -> list[int]:
    return [1] * n_rel + [0] * n_non + list(extra)


# -- (a) hand-built gain curves ---------------------------------------------------------------------


@pytest.mark.parametrize("gk,s", [(33, 156), (39, 156), (51, 156), (57, 156)])
def test_ratio_exactly_at_the_threshold_stops(gk, s):
    """gk relevant first, then s - gk not: ratio = s - gk = 156 - gk, the threshold exactly. In
    floating point (gk/gk) / (1/(s-gk)) is 122.99999999999999 for gk = 33: the old rule did not
    stop."""
    st = curve(first_then(gk, s - gk))
    assert definition(st.relevant) == (True, gk, Fraction(156 - gk))
    d = KneeRule().decide(st)
    assert d.action == STOP and d.details["rho"] == 156 - gk and d.details["threshold"] == 156 - gk
    # one document fewer: ratio 155 - gk < threshold
    assert KneeRule().decide(st.prefix(s - 1)).action == CONTINUE


def test_rule_agrees_with_the_definition_at_every_length():
    """A curve with a knee and a late relevant document: the rule agrees with the definition
    at every s from 150 to 500, and first stops where the definition first does."""
    bits = [1, 1, 1, 0] * 10 + [0] * 60 + [1] + [0] * 400
    for s in range(150, 501):
        assert (KneeRule().decide(curve(bits[:s])).action == STOP) == definition(bits[:s])[0], s
    stops = [s for s in range(150, 501) if definition(bits[:s])[0]]
    assert stops and stops[0] > 150


def test_149_vs_150_judged():
    rule = KneeRule(adjust=False)    # fixed ratio 6, so that the ratio is met before 150 documents
    bits = first_then(20, 129)       # ratio 129 at s = 149
    d = rule.decide(curve(bits))
    assert d.action == CONTINUE and "149 judged < 150" in d.reason
    assert rule.decide(curve(bits + [0])).action == STOP
    # the adjusted threshold too: 140 relevant first at s = 149 has ratio 9 < 16, at 156 it is 16 = 16
    assert KneeRule().decide(curve(first_then(140, 9))).action == CONTINUE
    assert KneeRule().decide(curve(first_then(140, 16))).action == STOP
    assert KneeRule().decide(curve(first_then(140, 15))).action == CONTINUE


def test_no_relevant_and_all_relevant_never_stop():
    for bits in ([0] * 500, [1] * 500, first_then(0, 300)):
        assert definition(bits)[0] is False and KneeRule().decide(curve(bits)).action == CONTINUE


def test_rule_equals_the_definition_on_random_curves():
    """Curves shaped like CAL's (precision decaying), many lengths: the rule stops exactly when
    the definition does, with the same knee and ratio."""
    rng = np.random.default_rng(11)
    fired = 0
    for _ in range(300):
        n, m = int(rng.integers(100, 700)), int(rng.integers(10, 150))
        p = np.r_[np.linspace(rng.uniform(0.5, 1.0), 0.2, m), np.full(n, rng.uniform(0.0, 0.02))]
        rel = rng.random(len(p)) < p
        stop, k, ratio = definition(rel)
        d = KneeRule().decide(curve(rel))
        assert (d.action == STOP) == stop
        kn = knee(curve(rel))
        assert (kn is None) == (k is None)
        if kn is not None:
            assert kn[0] == k and kn[1] == pytest.approx(float(ratio))
        fired += stop
    assert 30 < fired < 270     # both outcomes are exercised


def test_every_boundary_ratio_is_exact():
    """gk relevant first, s - gk - 1 not, one more relevant last: knee gk, ratio (s - gk) / 2,
    threshold 155 - gk, met exactly at s = 310 - gk. Every such curve stops there and not one
    document earlier (gk = 1..100; the float ratio misses some of them)."""
    for gk in range(1, 101):
        s = 310 - gk
        bits = first_then(gk, s - gk - 1, [1])
        assert definition(bits) == (True, gk, Fraction(155 - gk)), gk
        assert KneeRule().decide(curve(bits)).action == STOP, gk
        early = first_then(gk, s - gk - 2, [1])
        assert definition(early)[0] is False and KneeRule().decide(curve(early)).action == CONTINUE, gk


# -- (b) CAL on a real collection: it fires where the definition says -------------------------------


@pytest.fixture(scope="module")
def med():
    d = shared("classic", "med")
    from qrelkit.cal.features import build_features
    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.topics import read_topics

    return build_features(d / "docs.jsonl"), read_topics(d / "queries.tsv"), read_qrels(d / "qrels.txt")


def _batch_ends(log: pd.DataFrame) -> list[int]:
    """Positions after each batch of a thread's log (the points where the rules look)."""
    it = log["iteration"].tolist()
    return [i + 1 for i in range(len(it)) if i + 1 == len(it) or it[i + 1] != it[i]]


@pytest.mark.parametrize("qid", ["1", "28"])
def test_cal_on_med_fires_where_the_definition_says(med, qid):
    """MED's qrels are binary (grade 1): relevant = 1. CAL from the query alone, batches of 25,
    the knee rule watched, run to the whole collection: the rule fires at the first batch end at
    which the definition (computed here from the recorded judging order) is met."""
    from qrelkit.cal.loop import CalParams
    from qrelkit.cal.simulation import simulate_cal

    f, topics, qrels = med
    t = topics[topics["qid"] == qid]
    res = simulate_cal(f, t, qrels, params=CalParams(relevant=(1,)), rules={"knee": get_rule("knee")},
                       max_effort=f.n_rows, until_recall=1.0)
    log = res.log[res.log["thread"] == "all"].sort_values("position")
    rel = log["relevant"].astype(bool).to_numpy()
    assert rel.sum() >= 30
    expected = next((e for e in _batch_ends(log) if definition(rel[:e])[0]), None)
    assert expected is not None, "the definition is met on this topic"
    r = res.rules.iloc[0]
    assert bool(r["fired"]) and r["action"] == "stop"
    assert int(r["effort"]) == expected
    assert int(r["found"]) == int(rel[:expected].sum())


def test_default_binarization_on_med_is_named_not_silent(med):
    """The cause of "the knee never fired on binary reviews": with the passage binarization
    (2, 3) binary qrels have no relevant document at all: now an error, not a silent run."""
    from qrelkit.cal.simulation import simulate_cal
    from qrelkit.errors import InputError

    f, topics, qrels = med
    with pytest.raises(InputError, match="no-relevant"):
        simulate_cal(f, topics[topics["qid"] == "1"], qrels, rules={"knee": get_rule("knee")}, max_effort=50)
