"""Preference qrels by tournament (docs/protocol.md section 2; Arabzadeh et al., section 5.1).

**Pair outcomes** (:func:`pair_outcomes`). Each pair's judgments are counted; the passage with
more votes wins the pair. Equal votes (e.g. one judgment each way) make the pair a *draw*; a pair
with no judgment is *unjudged*. Draws and unjudged pairs give no win to anyone. With one judgment
per pair, as in the paper, the outcome is that judgment.

**The tournament**, per topic, over its items (the pool's passages or classes):

1. The candidates C are all items. If there is one item only (every run and the qrels agree),
   it is the preference qrel (outcome ``single-item``). If no pair of the topic was judged at
   all, the topic gets no preference qrel (``unjudged``).
2. Each candidate's *wins* are the decided pairs it won against other members of C (pairs with
   items outside C no longer count).
3. T = the candidates with the most wins. If T has one member, it is the preference qrel
   (``winner``). If T is smaller than C, the others are dropped (C := T) and step 2 is repeated
   among the tied: this is "repeat among the tied".
4. If T = C (every candidate has the same number of wins, so repeating would change nothing), all
   of C are preference qrels: outcome ``cycle`` when every pair within C is decided (C then has
   at least 3 members that beat each other in a circle, as the paper's 3-cycles), else
   ``unresolved`` (a draw or an unjudged pair among them; these pairs are reported as *pending*
   so that a further round can decide them).

C shrinks in every repeated round, so the procedure ends. Example: A beats B, C, D; B beats C, D;
C beats D -> A (3 wins), ``winner`` in round 1. A, B, C each beat D and A > B, B > C, C > A ->
round 1: A, B, C tie with 2 wins, D is dropped; round 2: each has 1 win -> ``cycle``, three
preference qrels.

Preference qrels have grade 1. Every round of every topic is logged (:data:`LOG_SCHEMA`):
``qid, round, candidates, wins (item:wins, most first), max_wins, kept, outcome`` where the
outcome of a non-final round is ``repeat``.

**Summary counts** (as the paper reports them): topics with one winner, with cycles, unresolved,
unjudged; preference qrels per topic; and the *win rate* of the preference qrels and of the
original qrels (pool items with ``in_qrels``): over the decided pairs of the whole pool that
involve them, the share they won (the paper: 91.8% vs 46.6%).

**Maintenance** (:func:`update_best`): for each topic of a maintenance round, the candidates are
the current best answers plus the round's newly surfaced items, and the same tournament runs
over every supplied judgment among them; topics without new items keep their best answers
(``unchanged``). In the summary of a maintenance round, the "original" qrels are the best
answers the round started from, and ``topics_best_changed`` counts the topics whose best
answers changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.io.order import qid_order
from qrelkit.io.qrels import QRELS_SCHEMA, sort_qrels
from qrelkit.prefs.common import STR_LIST, ordered, pair_id, pool_items, as_frame, sort_frame
from qrelkit.prefs.pairs import PAIR_COLUMNS
from qrelkit.prefs.tasks import read_judgments

OUTCOMES = ("single-item", "winner", "cycle", "unresolved", "unjudged", "unchanged")

LOG_SCHEMA = pa.schema([
    ("qid", pa.string()), ("round", pa.int32()), ("candidates", pa.int32()),
    ("wins", pa.list_(pa.struct([("docid", pa.string()), ("wins", pa.int32())]))),
    ("max_wins", pa.int32()), ("kept", STR_LIST), ("outcome", pa.string()),
])
QUERY_SCHEMA = pa.schema([
    ("qid", pa.string()), ("items", pa.int32()), ("pairs", pa.int32()), ("decided", pa.int32()),
    ("draws", pa.int32()), ("unjudged_pairs", pa.int32()), ("rounds", pa.int32()), ("outcome", pa.string()),
    ("prefs", STR_LIST), ("n_prefs", pa.int32()), ("original", STR_LIST), ("original_is_pref", pa.bool_()),
    ("pref_wins", pa.int32()), ("pref_pairings", pa.int32()), ("orig_wins", pa.int32()), ("orig_pairings", pa.int32()),
])


def pair_outcomes(judgments: pd.DataFrame | pa.Table) -> pd.DataFrame:
    """One row per judged pair: ``qid, pair_id, doc_a, doc_b, votes_a, votes_b, judgments,
    winner`` (null for a draw)."""
    j = read_judgments(judgments)
    if len(j) == 0:
        return pd.DataFrame(columns=["qid", "pair_id", "doc_a", "doc_b", "votes_a", "votes_b", "judgments", "winner"])
    j = j.assign(_a=(j["winner"] == j["doc_a"]).astype(int))
    g = j.groupby(["qid", "pair_id", "doc_a", "doc_b"], sort=False)["_a"].agg(["sum", "count"]).reset_index()
    g = g.rename(columns={"sum": "votes_a", "count": "judgments"})
    g["votes_b"] = g["judgments"] - g["votes_a"]
    g["winner"] = pd.Series([a if va > vb else b if vb > va else None
                             for a, b, va, vb in zip(g["doc_a"], g["doc_b"], g["votes_a"], g["votes_b"])],
                            index=g.index, dtype=object)
    g = g[["qid", "pair_id", "doc_a", "doc_b", "votes_a", "votes_b", "judgments", "winner"]]
    return sort_frame(g, ["doc_a", "doc_b"])


def tournament_topic(items: list[str], outcome: dict[tuple[str, str], str | None]) -> tuple[list[str], str, list[dict]]:
    """The tournament of one topic (module documentation). ``outcome`` maps an ordered pair
    (a, b), a < b, to its winner or None (draw); a missing pair is unjudged. Returns
    (preference qrels sorted, outcome, rounds)."""
    items = sorted(set(items))
    if len(items) == 1:
        return items, "single-item", [{"round": 1, "candidates": 1, "wins": [(items[0], 0)], "max_wins": 0,
                                       "kept": items, "outcome": "single-item"}]
    if not any(ordered(x, y) in outcome for x, y in combinations(items, 2)):
        return [], "unjudged", [{"round": 1, "candidates": len(items), "wins": [(d, 0) for d in items],
                                 "max_wins": 0, "kept": [], "outcome": "unjudged"}]
    cand = items
    rounds = []
    r = 0
    while True:
        r += 1
        wins = {d: 0 for d in cand}
        for x, y in combinations(cand, 2):
            w = outcome.get(ordered(x, y))
            if w is not None:
                wins[w] += 1
        top = max(wins.values())
        tied = [d for d in cand if wins[d] == top]
        ranked = sorted(wins.items(), key=lambda kv: (-kv[1], kv[0]))
        if len(tied) == 1:
            res = "winner"
        elif len(tied) < len(cand):
            res = "repeat"
        else:
            decided = all(outcome.get(ordered(x, y)) is not None for x, y in combinations(cand, 2))
            res = "cycle" if decided else "unresolved"
        rounds.append({"round": r, "candidates": len(cand), "wins": ranked, "max_wins": top, "kept": tied,
                       "outcome": res})
        if res != "repeat":
            return tied, res, rounds
        cand = tied


@dataclass
class TournamentResult:
    """What a tournament returns: the preference ``qrels`` (the winners, rel 1), the ``log`` (one row per
    topic and round), ``per_query`` results, the ``pending`` pairs of unresolved topics and a ``summary``."""
    qrels: pa.Table  # preference qrels (qid, docid, rel=1)
    log: pd.DataFrame  # one row per (topic, round)
    per_query: pd.DataFrame  # one row per topic
    pending: pd.DataFrame  # undecided pairs among the final candidates of unresolved topics
    summary: dict = field(default_factory=dict)


def _lookup(outcomes: pd.DataFrame) -> dict[str, dict[tuple[str, str], str | None]]:
    by_q: dict[str, dict[tuple[str, str], str | None]] = {}
    for q, a, b, w in zip(outcomes["qid"], outcomes["doc_a"], outcomes["doc_b"], outcomes["winner"]):
        by_q.setdefault(q, {})[(a, b)] = None if w is None or (isinstance(w, float) and np.isnan(w)) else w
    return by_q


def _win_count(docs: list[str], items: list[str], res: dict) -> tuple[int, int]:
    wins = pairings = 0
    s = set(docs)
    for x, y in combinations(items, 2):
        w = res.get(ordered(x, y))
        if w is None:
            continue
        for d in (x, y):
            if d in s:
                pairings += 1
                wins += int(w == d)
    return wins, pairings


def _run(topics: dict[str, list[str]], original: dict[str, list[str]], outcomes: pd.DataFrame,
         unchanged: dict[str, list[str]] | None = None) -> TournamentResult:
    res_by_q = _lookup(outcomes)
    q_rows, log_rows, qrel_rows, pend_rows = [], [], [], []
    for q in qid_order(set(topics) | set(unchanged or {})):
        if q not in topics:
            keep = sorted(unchanged[q])
            log_rows.append((q, 1, len(keep), [{"docid": d, "wins": 0} for d in keep], 0, keep, "unchanged"))
            qrel_rows += [(q, d) for d in keep]
            q_rows.append((q, len(keep), 0, 0, 0, 0, 0, "unchanged", keep, len(keep), [], False, 0, 0, 0, 0))
            continue
        items = sorted(set(topics[q]))
        res = res_by_q.get(q, {})
        prefs, outcome, rounds = tournament_topic(items, res)
        for rd in rounds:
            log_rows.append((q, rd["round"], rd["candidates"], [{"docid": d, "wins": int(w)} for d, w in rd["wins"]],
                             rd["max_wins"], list(rd["kept"]), rd["outcome"]))
        qrel_rows += [(q, d) for d in prefs]
        pairs = list(combinations(items, 2))
        vals = [res.get(p, "__unjudged__") for p in pairs]
        decided = sum(1 for v in vals if v is not None and v != "__unjudged__")
        draws = sum(1 for v in vals if v is None)
        orig = sorted(d for d in original.get(q, []) if d in set(items))
        pw, pp = _win_count(prefs, items, res)
        ow, op = _win_count(orig, items, res)
        q_rows.append((q, len(items), len(pairs), decided, draws, len(pairs) - decided - draws, len(rounds), outcome,
                       prefs, len(prefs), orig, bool(set(orig) & set(prefs)), pw, pp, ow, op))
        if outcome == "unresolved":
            for x, y in combinations(prefs, 2):
                if res.get((x, y)) is None:
                    pend_rows.append((q, pair_id(q, x, y), x, y, "pending", x in orig, y in orig, [], []))
    log = pd.DataFrame(log_rows, columns=LOG_SCHEMA.names)
    per_query = pd.DataFrame(q_rows, columns=QUERY_SCHEMA.names)
    pending = pd.DataFrame(pend_rows, columns=PAIR_COLUMNS)
    qr = pa.table({"qid": pa.array([q for q, _ in qrel_rows], pa.string()),
                   "docid": pa.array([d for _, d in qrel_rows], pa.string()),
                   "rel": pa.array(np.ones(len(qrel_rows), np.int32), pa.int32())})
    qrels = sort_qrels(qr.cast(QRELS_SCHEMA))
    return TournamentResult(qrels=qrels, log=log, per_query=per_query, pending=pending, summary=summarize(per_query))


def summarize(per_query: pd.DataFrame) -> dict:
    """Summary counts of a tournament (module documentation)."""
    pq_ = per_query
    counts = pq_["outcome"].value_counts()
    with_prefs = pq_[pq_["n_prefs"] > 0]
    hist = with_prefs["n_prefs"].value_counts().sort_index()
    pw, pp = int(pq_["pref_wins"].sum()), int(pq_["pref_pairings"].sum())
    ow, op = int(pq_["orig_wins"].sum()), int(pq_["orig_pairings"].sum())
    has_orig = pq_[pq_["original"].map(len) > 0]
    return {
        "topics": int(len(pq_)),
        "topics_with_prefs": int(len(with_prefs)),
        **{f"topics_{o.replace('-', '_')}": int(counts.get(o, 0)) for o in OUTCOMES},
        "topics_with_cycles": int(counts.get("cycle", 0)),
        "pref_qrels": int(pq_["n_prefs"].sum()),
        "prefs_per_topic_mean": float(with_prefs["n_prefs"].mean()) if len(with_prefs) else 0.0,
        "prefs_per_topic_histogram": {int(k): int(v) for k, v in hist.items()},
        "pairs": int(pq_["pairs"].sum()), "pairs_decided": int(pq_["decided"].sum()),
        "pairs_draw": int(pq_["draws"].sum()), "pairs_unjudged": int(pq_["unjudged_pairs"].sum()),
        "pref_wins": pw, "pref_pairings": pp, "pref_win_rate": pw / pp if pp else None,
        "orig_wins": ow, "orig_pairings": op, "orig_win_rate": ow / op if op else None,
        "topics_with_original_in_pool": int(len(has_orig)),
        "topics_original_is_pref": int(has_orig["original_is_pref"].sum()),
    }


def tournament(judgments: pd.DataFrame | pa.Table, pool: pa.Table | None = None, *,
               items: pd.DataFrame | None = None, classes: pa.Table | None = None) -> TournamentResult:
    """Preference qrels from preference judgments (``qid, doc_a, doc_b, winner``) by the
    tournament of the module documentation. The items of each topic come from ``pool`` (a top-1
    pool; its ``in_qrels`` items are the original qrels) or from ``items`` (``qid, docid[,
    in_qrels]``); without either, from the judged pairs.

    Examples
    --------
    >>> import pandas as pd
    >>> from qrelkit import tournament
    >>> judgments = pd.DataFrame({"qid": ["1", "1", "1"], "doc_a": ["p1", "p1", "p2"],
    ...                           "doc_b": ["p2", "p3", "p3"], "winner": ["p1", "p1", "p3"]})
    >>> result = tournament(judgments)
    >>> result.qrels.to_pydict()
    {'qid': ['1'], 'docid': ['p1'], 'rel': [1]}
    >>> result.summary["topics_winner"]
    1
    """
    outcomes = pair_outcomes(judgments)
    if pool is not None:
        it = pool_items(pool, classes)
    elif items is not None:
        it = as_frame(items).copy()
        if "in_qrels" not in it.columns:
            it["in_qrels"] = False
    else:
        it = pd.concat([outcomes[["qid", "doc_a"]].rename(columns={"doc_a": "docid"}),
                        outcomes[["qid", "doc_b"]].rename(columns={"doc_b": "docid"})]).drop_duplicates()
        it["in_qrels"] = False
    topics: dict[str, list[str]] = {}
    original: dict[str, list[str]] = {}
    for q, d, iq in zip(it["qid"].astype(str), it["docid"].astype(str), it["in_qrels"]):
        topics.setdefault(q, []).append(d)
        if bool(iq):
            original.setdefault(q, []).append(d)
    return _run(topics, original, outcomes)


def update_best(judgments: pd.DataFrame | pa.Table, pairs: pd.DataFrame | pa.Table, best: pa.Table) -> TournamentResult:
    """Maintenance: new best answers after a round of new-vs-best pairs (module documentation).
    ``pairs``: the maintenance round's pairs; ``best``: the current preference qrels."""
    outcomes = pair_outcomes(judgments)
    p = as_frame(pairs)
    b = best.filter(pa.compute.greater(best["rel"], 0)) if "rel" in best.column_names else best
    cur: dict[str, list[str]] = {}
    for q, d in zip(b["qid"].to_pylist(), b["docid"].to_pylist()):
        cur.setdefault(str(q), []).append(str(d))
    topics: dict[str, list[str]] = {}
    for q, a, bb in zip(p["qid"].astype(str), p["doc_a"].astype(str), p["doc_b"].astype(str)):
        topics.setdefault(q, list(cur.get(q, []))).extend([a, bb])
    unchanged = {q: v for q, v in cur.items() if q not in topics}
    res = _run(topics, cur, outcomes, unchanged)
    changed = [q for q, pr in zip(res.per_query["qid"], res.per_query["prefs"]) if set(pr) != set(cur.get(q, []))]
    res.summary["topics_best_changed"] = len(changed)
    res.summary["best_changed"] = changed
    return res
