"""The adjudication strategies' loops, compiled (numba): one call judges a whole topic, document by
document (:mod:`qrelkit.pooler.adjudication` says what each strategy does; docs/protocol.md gives the
formulas and their sources).

Every kernel takes one topic's pool as the runs' lists (``offsets``, ``docs``: run ``k`` ranks the
pool documents ``docs[offsets[k]:offsets[k+1]]``, best first; a document is an index into the
topic's pool, ``0 .. n_docs-1``, in docid order), ``known`` (per document: 1 relevant, 0 not, -1
not known), ``prior`` (documents judged before the strategy starts: never chosen, their outcome
``known``) and ``batches`` (the sizes of the successive rounds: a round's documents are all chosen
before any of their outcomes is seen). It returns the documents chosen, in order; it stops when
the pool is exhausted, when the rounds are done, or after a round holding a document whose outcome
is not known (the outcomes after it cannot be computed yet).
"""

from __future__ import annotations

import numba as nb
import numpy as np

@nb.njit(cache=True)
def _candidate(k, ptr, offsets, docs, taken):
    """Run ``k``'s next document to judge: the first not taken at or after its pointer (-1: none)."""
    j = ptr[k]
    end = offsets[k + 1]
    while j < end:
        d = docs[j]
        if not taken[d]:
            return j
        j += 1
    return -1


@nb.njit(cache=True)
def pointer_order(offsets, docs, n_docs, known, prior, batches, kind, discount, ucb_c):
    """MTF (``kind`` 0), MaxMean (1; ``discount`` < 1: mm-ns) and UCB1 (2), each run an arm.

    An arm's pointer walks down its run over the documents whose outcome is seen (judged before,
    or chosen and revealed), observing each: the bandits' statistics ``a_k`` (relevant) and ``b_k``
    (observed), each older observation weighted ``discount`` times less; MTF's priority drops by one
    when a document chosen from the run is not relevant. The next document of an arm is the first
    not yet taken at or after its pointer. Ties go to the first run (run order)."""
    n_runs = len(offsets) - 1
    taken = prior.copy()
    revealed = prior.copy()
    ptr = offsets[:-1].copy()
    a = np.zeros(n_runs)
    b = np.zeros(n_runs)
    prio = np.zeros(n_runs, np.int64)
    source = np.full(n_docs, -1, np.int64)
    out = np.empty(n_docs, np.int32)
    n_out = 0
    observed = 0.0
    for size in batches:
        start = n_out
        for _ in range(size):
            best = -1
            best_score = -np.inf
            for k in range(n_runs):
                # catch the pointer up over the revealed documents, observing them (every arm
                # first: UCB's bonus takes the count of all observations)
                j = ptr[k]
                end = offsets[k + 1]
                while j < end and revealed[docs[j]]:
                    rel = 1.0 if known[docs[j]] > 0 else 0.0
                    a[k] = a[k] * discount + rel
                    b[k] = b[k] * discount + 1.0
                    observed += 1.0
                    j += 1
                ptr[k] = j
            for k in range(n_runs):
                if _candidate(k, ptr, offsets, docs, taken) < 0:
                    continue
                if kind == 0:
                    score = float(prio[k])
                elif kind == 1:
                    score = (1.0 + a[k]) / (2.0 + b[k])
                else:
                    if b[k] <= 0.0:
                        score = np.inf
                    else:
                        score = a[k] / b[k] + np.sqrt(ucb_c * np.log(max(observed, 1.0)) / b[k])
                if score > best_score:
                    best_score = score
                    best = k
            if best < 0:
                break
            d = docs[_candidate(best, ptr, offsets, docs, taken)]
            taken[d] = True
            source[d] = best
            out[n_out] = d
            n_out += 1
        stop = False
        for i in range(start, n_out):  # the round's outcomes come back
            d = out[i]
            if known[d] < 0:
                stop = True
            else:
                revealed[d] = True
                if kind == 0 and known[d] == 0:
                    prio[source[d]] -= 1
        if stop or n_out == start:
            break
    return out[:n_out]


@nb.njit(cache=True)
def _beliefs(offsets, docs, u, logw, belief):
    """``belief[d] = sum_k w_k u_k(d)``, the weights scaled by the largest (exact every round: an
    update in place would lose the small weights to rounding)."""
    top = logw.max()
    belief[:] = 0.0
    for k in range(len(offsets) - 1):
        w = np.exp(logw[k] - top)
        if w == 0.0:
            continue
        for j in range(offsets[k], offsets[k + 1]):
            belief[docs[j]] += w * u[j]


@nb.njit(cache=True)
def hedge_order(offsets, docs, n_docs, known, prior, batches, beta):
    """Hedge (Aslam, Pavlu and Savell, SIGIR 2003), each run an expert.

    Run ``k``'s belief in the document at rank ``r`` of its ``Z`` documents is
    ``u = (H(Z) - H(r - 1)) / H(Z)`` (``H`` the harmonic numbers: 1 at the top, ``1 / (Z H(Z))`` at
    the bottom, 0 for a document it did not retrieve). The next document is the one not taken with
    the largest ``sum_k w_k u_k(d)`` (ties: docid order). Once a document's outcome is seen, each
    run's weight is multiplied by ``beta ** loss``: ``loss = (1 - u) / 2`` when relevant,
    ``(1 + u) / 2`` when not (1/2 for a run that did not retrieve it)."""
    n_runs = len(offsets) - 1
    u = np.empty(len(docs))
    # each document's occurrences (run, position), to update only the runs that retrieved it
    count = np.zeros(n_docs + 1, np.int64)
    for k in range(n_runs):
        z = offsets[k + 1] - offsets[k]
        hz = 0.0
        for i in range(1, z + 1):
            hz += 1.0 / i
        tail = hz
        for i in range(z):  # rank i + 1: H(Z) - H(i)
            u[offsets[k] + i] = tail / hz
            tail -= 1.0 / (i + 1)
            count[docs[offsets[k] + i] + 1] += 1
    starts = np.cumsum(count)
    fill = starts[:-1].copy()
    occ_run = np.empty(len(docs), np.int64)
    occ_pos = np.empty(len(docs), np.int64)
    for k in range(n_runs):
        for j in range(offsets[k], offsets[k + 1]):
            d = docs[j]
            occ_run[fill[d]] = k
            occ_pos[fill[d]] = j
            fill[d] += 1
    logw = np.zeros(n_runs)
    lb = np.log(max(beta, 1e-300))  # beta 0: a loss silences a run (finite, so no inf - inf)
    taken = prior.copy()
    belief = np.zeros(n_docs)
    out = np.empty(n_docs, np.int32)
    n_out = 0
    seen = np.flatnonzero(prior).astype(np.int32)  # the prior judgments, then each round's
    for size in batches:
        for d in seen:
            logw += 0.5 * lb
            for o in range(starts[d], starts[d + 1]):
                j = occ_pos[o]
                loss = (1.0 - u[j]) / 2.0 if known[d] > 0 else (1.0 + u[j]) / 2.0
                logw[occ_run[o]] += (loss - 0.5) * lb
        if len(seen):
            logw -= logw.max()  # the weights' scale means nothing: keep the largest at 1
        _beliefs(offsets, docs, u, logw, belief)
        start = n_out
        for _ in range(size):
            best = -1
            best_b = -1.0
            for d in range(n_docs):
                if not taken[d] and belief[d] > best_b:
                    best_b = belief[d]
                    best = d
            if best < 0:
                break
            taken[best] = True
            out[n_out] = best
            n_out += 1
        seen = out[start:n_out].copy()
        stop = n_out == start
        for d in seen:
            if known[d] < 0:
                stop = True
        if stop:
            break
    return out[:n_out]
