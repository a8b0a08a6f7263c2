"""Preference pairs from shallow top-1 pools, their cost, and maintenance rounds.

**Pairs** (docs/protocol.md section 2): every unordered pair of items in a topic's pool, once. An item
is a passage, or a near-duplicate class (its canonical passage) when the pool was built over
classes or ``classes`` are given here, so two copies of one passage are never compared. A pool
of n items gives n(n-1)/2 pairs.

Pairs table (:data:`PAIR_SCHEMA`), one row per pair, sorted by topic (natural order), then
``doc_a``, ``doc_b``:

===========  ============  ==============================================================
qid          string        topic
pair_id      string        16 hex digits of SHA-256 over (qid, doc_a, doc_b): the same pair
                           has the same id in every round
doc_a        string        the smaller item id (byte order)
doc_b        string        the larger item id
source       string        ``pool`` | ``maintenance`` | ``single`` | ``pending``
a_in_qrels   bool          doc_a is a known relevant passage (the perfect run's candidate)
b_in_qrels   bool
a_runs       list<string>  runs whose first passage is doc_a
b_runs       list<string>
===========  ============  ==============================================================

**Cost** before anything is exported (:func:`estimate_cost`): tasks = ceil(pairs / pairs per
task) times assignments (workers per task); cost = tasks x (price + platform fee per task).
With the paper's figures (10 pairs per task, $2.00 + $0.40 per task) 141,887 pairs cost
$34,053.60, the paper's "over $34,000".

**Maintenance** (:func:`maintenance_pairs`): when new runs surface new top passages, only the
newly surfaced items are judged, each against every current best-known answer of its topic
(the current preference qrels). An item is *newly surfaced* when it is in the new pool but not
among the best answers, not in any previous pool and not in any previously judged pair of its
topic. Topics without best-known answers (new topics) get all pairs of their new items, as in a
first round. Pairs already judged are never issued again.
"""

from __future__ import annotations

import math
from itertools import combinations

import pandas as pd
import pyarrow as pa

from qrelkit.errors import InputError
from qrelkit.io.classes import map_to_classes
from qrelkit.prefs.common import STR_LIST, ordered, pair_id, pool_items, as_frame, sort_frame
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.prefs.params import PrefsParams

PAIR_SCHEMA = pa.schema([
    ("qid", pa.string()), ("pair_id", pa.string()), ("doc_a", pa.string()), ("doc_b", pa.string()),
    ("source", pa.string()), ("a_in_qrels", pa.bool_()), ("b_in_qrels", pa.bool_()),
    ("a_runs", STR_LIST), ("b_runs", STR_LIST),
])
PAIR_COLUMNS = PAIR_SCHEMA.names


def _pair_rows(qid: str, info: dict, source: str, pairs_of) -> list[tuple]:
    rows = []
    for x, y in pairs_of:
        a, b = ordered(x, y)
        ia, ib = info.get((qid, a), (False, [])), info.get((qid, b), (False, []))
        rows.append((qid, pair_id(qid, a, b), a, b, source, ia[0], ib[0], ia[1], ib[1]))
    return rows


def _frame(rows: list[tuple]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=PAIR_COLUMNS)
    df = df.astype({"a_in_qrels": bool, "b_in_qrels": bool}) if len(df) else df
    return sort_frame(df, ["doc_a", "doc_b"])


def pool_pairs(pool: pa.Table, *, classes: pa.Table | None = None) -> pd.DataFrame:
    """Every pair of items of each topic's pool, once (see the module documentation)."""
    items = pool_items(pool, classes)
    info = {(q, d): (bool(iq), list(rs)) for q, d, iq, rs in zip(items["qid"], items["docid"], items["in_qrels"], items["runs"])}
    rows: list[tuple] = []
    for qid, grp in items.groupby("qid", sort=False):
        docs = sorted(grp["docid"])
        rows += _pair_rows(qid, info, "pool", combinations(docs, 2))
    return _frame(rows)


def _judged_keys(judged: pd.DataFrame | pa.Table | None) -> set[tuple[str, str, str]]:
    if judged is None:
        return set()
    df = as_frame(judged)
    out = set()
    for q, a, b in zip(df["qid"].astype(str), df["doc_a"].astype(str), df["doc_b"].astype(str)):
        out.add((q, *ordered(a, b)))
    return out


def maintenance_pairs(
    pool: pa.Table,
    best: pa.Table,
    *,
    previous: list[pa.Table] | None = None,
    judged: pd.DataFrame | pa.Table | None = None,
    classes: pa.Table | None = None,
) -> pd.DataFrame:
    """Pairs for a maintenance round: each newly surfaced item against each current best-known
    answer of its topic (``best``: preference qrels ``qid, docid[, rel]``; rows with rel <= 0 are
    ignored). ``previous``: earlier pools (their items count as surfaced); ``judged``: earlier
    pairs or judgments (``qid, doc_a, doc_b``), whose items count as surfaced and whose pairs are
    not issued again. See the module documentation."""
    items = pool_items(pool, classes)
    info = {(q, d): (bool(iq), list(rs)) for q, d, iq, rs in zip(items["qid"], items["docid"], items["in_qrels"], items["runs"])}
    b = best
    if "rel" in b.column_names:
        b = b.filter(pa.compute.greater(b["rel"], 0))
    bdocs = map_to_classes(pa.compute.cast(b["docid"], pa.string()), classes).to_pylist()
    best_by_q: dict[str, set[str]] = {}
    for q, d in zip(b["qid"].to_pylist(), bdocs):
        best_by_q.setdefault(str(q), set()).add(str(d))
    seen: set[tuple[str, str]] = {(q, d) for q, ds in best_by_q.items() for d in ds}
    for prev in previous or []:
        pi = pool_items(prev, classes)
        seen |= set(zip(pi["qid"], pi["docid"]))
    done = _judged_keys(judged)
    for q, a, bb in done:
        seen.add((q, a))
        seen.add((q, bb))
    rows: list[tuple] = []
    for qid, grp in items.groupby("qid", sort=False):
        new = sorted(d for d in grp["docid"] if (qid, d) not in seen)
        if not new:
            continue
        if qid in best_by_q:
            cand = [(n, x) for n in new for x in sorted(best_by_q[qid])]
        else:
            cand = list(combinations(new, 2))
        cand = [(x, y) for x, y in cand if ((qid, *ordered(x, y)) not in done)]
        rows += _pair_rows(qid, info, "maintenance", cand)
    return _frame(rows)


@declared_defaults(PrefsParams)
def estimate_cost(
    n_pairs: int,
    *,
    pairs_per_task: int = AS_DECLARED,
    test_pairs: int = AS_DECLARED,
    price_per_task: float = AS_DECLARED,
    fee_per_task: float = AS_DECLARED,
    assignments: int = AS_DECLARED,
) -> dict:
    """Tasks and money needed to judge ``n_pairs`` pairs (see the module documentation)."""
    if pairs_per_task < 1:
        raise InputError("bad-option", f"pairs per task must be >= 1, got {pairs_per_task}")
    if assignments < 1:
        raise InputError("bad-option", f"assignments must be >= 1, got {assignments}")
    if test_pairs < 0 or price_per_task < 0 or fee_per_task < 0:
        raise InputError("bad-option", "test pairs, price and fee must not be negative")
    tasks = math.ceil(n_pairs / pairs_per_task) if n_pairs else 0
    hits = tasks * assignments
    return {
        "pairs": int(n_pairs),
        "tasks": int(tasks),
        "assignments": int(assignments),
        "task_assignments": int(hits),
        "comparisons_shown": int((n_pairs + tasks * test_pairs) * assignments),
        "pairs_per_task": int(pairs_per_task),
        "test_pairs_per_task": int(test_pairs),
        "price_per_task": float(price_per_task),
        "fee_per_task": float(fee_per_task),
        "cost": round(hits * (price_per_task + fee_per_task), 2),
    }


def pair_summary(pairs: pd.DataFrame) -> dict:
    """Pairs per topic: count, topics, mean/max per topic."""
    per = pairs.groupby("qid").size() if len(pairs) else pd.Series(dtype=int)
    return {"pairs": int(len(pairs)), "topics": int(len(per)),
            "pairs_per_topic_mean": float(per.mean()) if len(per) else 0.0,
            "pairs_per_topic_max": int(per.max()) if len(per) else 0}
