"""Leaderboard ties share a rank (issue 19): equal values, compared as written to the file (6
digits), get the same competition rank ("1224"); rows stay in value order, then by run name. The
campaign's leaderboard.csv and report, the preference leaderboard and the reuse tables rank alike."""

from __future__ import annotations

import pandas as pd
import pytest

from qrelkit.campaign.outputs import leaderboard
from qrelkit.campaign.report import _Doc, leaderboard_section
from qrelkit.io.order import competition_ranks
from qrelkit.prefs.rescore import _ranks
from qrelkit.reuse.leaveout import competition_rank


def _per_query(means: dict[str, float], measure: str = "Judged@10") -> pd.DataFrame:
    """Two topics per run whose mean is the given value."""
    rows = [(measure, run, q, v) for run, v in means.items() for q in ("1", "2")]
    return pd.DataFrame(rows, columns=["measure", "run", "qid", "value"])


@pytest.mark.parametrize("means, ranks", [
    ({"b": 1.0, "a": 1.0, "c": 0.5}, {"a": 1, "b": 1, "c": 3}),                       # tie at the top
    ({"d": 0.1, "c": 0.5, "b": 0.5, "a": 0.9}, {"a": 1, "b": 2, "c": 2, "d": 4}),       # tie in the middle
    ({f"r{i:02d}": 1.0 for i in range(28)}, {f"r{i:02d}": 1 for i in range(28)}),       # all equal
    ({"x": 0.1234561, "y": 0.1234559, "z": 0.1}, {"x": 1, "y": 1, "z": 3}),             # equal as printed
])
def test_leaderboard_ties_share_a_rank(means, ranks):
    lb = leaderboard(_per_query(means))
    assert dict(zip(lb["run"], lb["rank"])) == ranks
    # order: value descending, then run name
    assert list(lb["run"]) == sorted(means, key=lambda r: (-round(means[r], 6), r))
    assert list(lb["rank"]) == sorted(lb["rank"])


def test_each_measure_ranks_its_own_runs():
    pq = pd.concat([_per_query({"a": 1.0, "b": 1.0}, "P@10"), _per_query({"a": 0.2, "b": 0.4}, "AP")])
    lb = leaderboard(pq)
    assert lb[["measure", "run", "rank"]].values.tolist() == [["AP", "b", 1], ["AP", "a", 2], ["P@10", "a", 1],
                                                               ["P@10", "b", 1]]


def test_the_report_shows_the_shared_ranks():
    lb = leaderboard(_per_query({"a": 1.0, "b": 1.0, "c": 0.5, "d": 0.5, "e": 0.25}))
    doc = _Doc("t")
    leaderboard_section(doc, lb, "Judged@10")
    md = doc.render_md()
    rows = [ln for ln in md.splitlines() if ln.startswith("| Judged@10 |")]
    assert [r.split(" | ")[1:3] for r in rows] == [["1", "a"], ["1", "b"], ["3", "c"], ["3", "d"], ["5", "e"]]
    html = doc.render_html()
    assert html.count("<td>Judged@10</td><td>1</td>") == 2 and html.count("<td>Judged@10</td><td>3</td>") == 2


def test_other_leaderboards_rank_ties_alike():
    assert competition_ranks([0.3, 0.5, 0.5, 0.1]).tolist() == [3, 1, 1, 4]
    # the preference leaderboard writes its values in full: ranked as written
    assert _ranks(pd.Series([0.5, 0.5, 0.5000001, 0.25], index=[4, 5, 6, 7])).tolist() == [2, 2, 1, 4]
    assert competition_rank(pd.Series([1.0, float("nan"), 1.0]).to_numpy()).tolist() == [1, 3, 1]
