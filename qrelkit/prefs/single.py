"""The single-ranker check ("better than perfect", the paper's section 3 and Table 1).

For one run, per topic with a known relevant passage (a qrel with grade >= ``min_rel``):

* **Category A** (qrel at first rank): the run's top passage is a known relevant passage. It is
  paired with the run's *second* passage: the top one should usually be preferred.
* **Category B** (non-qrel at first rank): the top passage is not a known relevant passage. It is
  paired with *the qrel*: the topic's highest-graded known relevant passage, the first by id among
  equals (for single-qrel collections such as MS MARCO, the qrel).

Topics the run did not retrieve (``not-retrieved``) and category A topics where the run has no
second passage (``no-second``) give no pair. With ``classes`` the run is deduplicated first
(first passage per class, TREC 2022) and qrels are mapped to class ids, so a near-duplicate of
the qrel counts as the qrel and the second passage is never a copy of the first.

The pairs (:data:`qrelkit.prefs.pairs.PAIR_SCHEMA` plus ``category, top_docid, other_docid``)
go to crowd tasks like any other pairs; :func:`single_ranker_outcomes` then reads the judgments:
per category, how often the top passage was preferred (the paper's Figure 1: 65.7% in A, 58.6%
in B).
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.errors import InputError
from qrelkit.evaluate.duplicates import deduped_runs
from qrelkit.io.classes import map_to_classes
from qrelkit.prefs.common import ordered, pair_id, as_frame, sort_frame
from qrelkit.prefs.pairs import PAIR_COLUMNS, PAIR_SCHEMA
from qrelkit.prefs.tournament import pair_outcomes

SINGLE_COLUMNS = PAIR_COLUMNS + ["category", "top_docid", "other_docid"]
SINGLE_SCHEMA = pa.schema(list(PAIR_SCHEMA) + [("category", pa.string()), ("top_docid", pa.string()),
                                               ("other_docid", pa.string())])
CATEGORY_LABELS = {"A": "qrel at first rank", "B": "non-qrel at first rank"}


def single_ranker_pairs(runs: pa.Table, qrels: pa.Table, run: str, *, min_rel: int = 1,
                        classes: pa.Table | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(pairs, category table) of the single-ranker check for ``run`` (module documentation)."""
    t = runs.filter(pc.equal(runs["run"], run))
    if t.num_rows == 0:
        raise InputError("unknown-run", f"no run named {run!r} (runs: {', '.join(sorted(set(runs['run'].to_pylist()))[:10])})")
    if classes is not None:
        t = deduped_runs(t, classes)
    t = t.filter(pc.less_equal(t["rank"], 2))
    ranked: dict[str, dict[int, str]] = {}
    for q, d, r in zip(t["qid"].to_pylist(), t["docid"].to_pylist(), t["rank"].to_pylist()):
        ranked.setdefault(q, {})[int(r)] = d
    rel = qrels.filter(pc.greater_equal(qrels["rel"], min_rel))
    docs = map_to_classes(pc.cast(rel["docid"], pa.string()), classes).to_pylist()
    known: dict[str, dict[str, int]] = {}
    for q, d, g in zip(rel["qid"].to_pylist(), docs, rel["rel"].to_pylist()):
        k = known.setdefault(q, {})
        k[d] = max(k.get(d, g), g)
    rows, counts = [], {"A": 0, "B": 0, "no-second": 0, "not-retrieved": 0}
    for q, k in known.items():
        rk = ranked.get(q)
        if not rk or 1 not in rk:
            counts["not-retrieved"] += 1
            continue
        top = rk[1]
        if top in k:
            counts["A"] += 1
            other = rk.get(2)
            if other is None:
                counts["no-second"] += 1
                continue
            cat = "A"
        else:
            counts["B"] += 1
            best = max(k.values())
            other = sorted(d for d, g in k.items() if g == best)[0]
            cat = "B"
        a, b = ordered(top, other)
        rows.append((q, pair_id(q, a, b), a, b, "single", a in k, b in k, [run] if a == top else [], [run] if b == top else [],
                     cat, top, other))
    pairs = sort_frame(pd.DataFrame(rows, columns=SINGLE_COLUMNS), ["doc_a", "doc_b"])
    total = counts["A"] + counts["B"]
    cats = pd.DataFrame(
        [("A", CATEGORY_LABELS["A"], counts["A"], counts["A"] / total if total else float("nan"),
          counts["A"] - counts["no-second"]),
         ("B", CATEGORY_LABELS["B"], counts["B"], counts["B"] / total if total else float("nan"), counts["B"]),
         ("total", "", total, 1.0 if total else float("nan"), len(rows)),
         ("not-retrieved", "topics with a qrel the run did not retrieve", counts["not-retrieved"], float("nan"), 0),
         ("no-second", "category A topics without a second passage", counts["no-second"], float("nan"), 0)],
        columns=["category", "meaning", "queries", "share", "pairs"])
    return pairs, cats


def single_ranker_outcomes(pairs: pd.DataFrame | pa.Table, judgments: pd.DataFrame | pa.Table) -> pd.DataFrame:
    """Per category: pairs, decided pairs, how often the top passage / the other passage was
    preferred, and the share of decided pairs where the top passage won."""
    p = as_frame(pairs)
    o = pair_outcomes(judgments)
    m = p.merge(o[["qid", "doc_a", "doc_b", "winner"]], on=["qid", "doc_a", "doc_b"], how="left")
    rows = []
    for cat in ("A", "B"):
        g = m[m["category"] == cat]
        w = g["winner"].where(g["winner"].notna(), None)
        top = int((w == g["top_docid"]).sum())
        other = int((w == g["other_docid"]).sum())
        dec = top + other
        rows.append((cat, CATEGORY_LABELS[cat], len(g), dec, top, other, len(g) - dec, top / dec if dec else float("nan")))
    return pd.DataFrame(rows, columns=["category", "meaning", "pairs", "decided", "top_preferred", "other_preferred",
                                       "undecided", "share_top_preferred"])
