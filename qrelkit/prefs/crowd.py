"""A simulated preference oracle: crowd workers answering tasks from graded qrels (the hidden
truth), so that the whole preference workflow runs in demos and tests.

**Truth.** A passage's utility for a topic is its grade (a passage missing from the qrels, or
with a negative grade, has grade 0). The preferred passage of a pair is the one with the higher
utility. Equal grades: with ``ties="latent"`` (default) each (topic, passage) gets a fixed
seeded fraction in [0, 1) added to its grade, so preferences within a grade are random but
consistent (transitive: no cycles in the truth); with ``ties="random"`` every such comparison is
a fresh coin flip.

**Workers** ``W01``, ``W02``, ... Each task goes to ``assignments`` distinct workers, the least
loaded first (ties by name), never to a worker listed in the task's ``exclude_workers``. A good
worker answers real pairs with the truth, but picks the other passage with probability
``error_rate``; test pairs (relevant vs off-topic) are answered correctly unless
``test_error_rate`` says otherwise. A *failing* worker (``failing``) answers ``random``
(a coin flip for every comparison, test pairs included) or ``inverted`` (always the worse
passage). Every draw comes from a generator seeded by (seed, task, worker), so answers do not
depend on the order tasks are processed in.

Output: answers ``task_id, slot, worker, choice`` (left|right), as workers would return them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from qrelkit.errors import InputError
from qrelkit.io.qrels import QRELS_SCHEMA, sort_qrels
from qrelkit.prefs.common import rng_for, unit_hash
from qrelkit.prefs.tasks import ANSWER_COLUMNS, issue_number, base_task, normalize_tasks
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.prefs.params import PrefsParams

TIES = ("latent", "random")
FAILING_MODES = ("random", "inverted")


def worker_names(n: int) -> list[str]:
    """``n`` worker names ``W01``, ``W02``, ...; raises ``bad-option`` when ``n`` < 1."""
    if n < 1:
        raise InputError("bad-option", f"need at least one worker, got {n}")
    return [f"W{i + 1:02d}" for i in range(n)]


@declared_defaults(PrefsParams)
def simulate_answers(
    tasks: pd.DataFrame | pa.Table,
    qrels: pa.Table,
    *,
    workers: int | Sequence[str] = AS_DECLARED,
    assignments: int = AS_DECLARED,
    error_rate: float = AS_DECLARED,
    test_error_rate: float = AS_DECLARED,
    failing: Sequence[str] = (),
    failing_mode: str = AS_DECLARED,
    ties: str = AS_DECLARED,
    seed: int = AS_DECLARED,
) -> pd.DataFrame:
    """Answers of simulated workers to ``tasks`` (module documentation)."""
    if not 0 <= error_rate <= 1 or not 0 <= test_error_rate <= 1:
        raise InputError("bad-option", "error rates must be in [0, 1]")
    if ties not in TIES:
        raise InputError("bad-option", f"ties must be one of {', '.join(TIES)}, got {ties!r}")
    if failing_mode not in FAILING_MODES:
        raise InputError("bad-option", f"failing mode must be one of {', '.join(FAILING_MODES)}, got {failing_mode!r}")
    names = worker_names(workers) if isinstance(workers, int) else [str(w) for w in workers]
    if len(set(names)) != len(names) or not names:
        raise InputError("bad-option", "worker names must be distinct and non-empty")
    bad = set(failing) - set(names)
    if bad:
        raise InputError("bad-option", f"failing worker(s) {', '.join(sorted(bad))} are not among the workers")
    if assignments < 1:
        raise InputError("bad-option", f"assignments must be >= 1, got {assignments}")
    t = normalize_tasks(tasks)
    q = qrels.filter(pc.greater(qrels["rel"], 0))
    grade = {(a, b): int(r) for a, b, r in zip(q["qid"].to_pylist(), q["docid"].to_pylist(), q["rel"].to_pylist())}

    def utility(qid: str, doc: str) -> float:
        g = float(grade.get((qid, doc), 0))
        return g + unit_hash(seed, "latent", qid, doc) if ties == "latent" else g

    load = {w: 0 for w in names}
    ids = list(dict.fromkeys(t["task_id"]))
    ids.sort(key=lambda x: (base_task(x), issue_number(x)))
    groups = {k: g for k, g in t.groupby("task_id", sort=False)}
    out = []
    for tid in ids:
        g = groups[tid].sort_values("slot")
        excl = set(g["exclude_workers"].iloc[0])
        allowed = [w for w in names if w not in excl]
        if len(allowed) < assignments:
            raise InputError("no-workers", f"task {tid} needs {assignments} worker(s) but only {len(allowed)} may take it")
        chosen = sorted(allowed, key=lambda w: (load[w], names.index(w)))[:assignments]
        ul = [utility(qq, d) for qq, d in zip(g["qid"], g["left_docid"])]
        ur = [utility(qq, d) for qq, d in zip(g["qid"], g["right_docid"])]
        kinds = g["kind"].tolist()
        expected = g["expected"].tolist()
        slots = g["slot"].tolist()
        for w in chosen:
            load[w] += 1
            rng = rng_for(seed, "answers", tid, w)
            coin = rng.random(len(g))
            err = rng.random(len(g))
            flip = rng.random(len(g))
            for i in range(len(g)):
                if kinds[i] == "test":
                    truth = expected[i]
                elif ul[i] != ur[i]:
                    truth = "left" if ul[i] > ur[i] else "right"
                else:
                    truth = "left" if flip[i] < 0.5 else "right"
                other = "right" if truth == "left" else "left"
                if w in failing:
                    choice = (("left" if coin[i] < 0.5 else "right") if failing_mode == "random" else other)
                else:
                    rate = test_error_rate if kinds[i] == "test" else error_rate
                    choice = other if err[i] < rate else truth
                out.append((tid, int(slots[i]), w, choice))
    return pd.DataFrame(out, columns=ANSWER_COLUMNS)


@declared_defaults(PrefsParams)
def sparsify_qrels(qrels: pa.Table, *, per_topic: int = 1, min_rel: int = 1, best: bool = False,
                   seed: int = AS_DECLARED) -> pa.Table:
    """MS MARCO-style sparse labels from dense (simulated) qrels: per topic, ``per_topic``
    passages drawn at random (seeded per topic) among those with grade >= ``min_rel`` (with
    ``best``, among those with the topic's highest grade), keeping their grades. Topics without
    such a passage are left out."""
    if per_topic < 1:
        raise InputError("bad-option", f"per topic must be >= 1, got {per_topic}")
    df = qrels.filter(pc.greater_equal(qrels["rel"], min_rel)).to_pandas()
    if best and len(df):
        df = df[df["rel"] == df.groupby("qid")["rel"].transform("max")]
    keep = []
    for qid, g in df.groupby("qid") if len(df) else []:
        g = g.sort_values("docid")
        rng = rng_for(seed, "sparse", qid)
        idx = np.sort(rng.choice(len(g), size=min(per_topic, len(g)), replace=False))
        keep.append(g.iloc[idx])
    out = pd.concat(keep) if keep else df.iloc[0:0]
    t = pa.table({"qid": out["qid"].astype(str).tolist(), "docid": out["docid"].astype(str).tolist(),
                  "rel": pa.array(out["rel"].astype(np.int32).to_numpy(), pa.int32())})
    return sort_qrels(t.cast(QRELS_SCHEMA))
