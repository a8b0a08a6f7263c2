"""Comparing runs: the outcome breakdown (docs/protocol.md section 3), significance tests with
multiple-comparison corrections, and rank correlation between leaderboards.

Every IR value comes from ir-measures (through :func:`qrelkit.evaluate.core.evaluate`); every
statistic from scipy or statsmodels:

* paired t-test ``scipy.stats.ttest_rel``; Wilcoxon signed-rank ``scipy.stats.wilcoxon``
  (zero differences dropped, scipy's default); Wilcoxon rank-sum ``scipy.stats.ranksums``
  (unpaired: the "naive" test); randomization test ``scipy.stats.permutation_test`` with
  ``permutation_type="samples"`` (random sign flips of the paired differences, statistic = mean
  difference, two-sided, seeded; exact when 2^n <= the number of resamples);
* Bonferroni and Holm corrections ``statsmodels.stats.multitest.multipletests``, applied within
  each (measure, test) family over all compared pairs;
* Kendall's tau ``scipy.stats.kendalltau`` (tau-b). No maintained library computes tau_ap
  (Yilmaz, Aslam and Robertson 2008), so :func:`tau_ap` implements its definition directly and is
  tested against the published example of the ``ircor`` package.

A p-value is NaN when the test is undefined for the input (e.g. every paired difference is 0);
corrections skip NaN p-values.

**Outcome breakdown.** For runs A and B, each judged topic falls in exactly one case within the
top k: *neither* retrieves a relevant item; *only A* or *only B* does; *both* do — then the
expected search length ESL (rank of the first relevant item; lower is better) and the reciprocal
rank decide (A better, B better, tied). With several relevant items, ESL uses the first relevant
item. ESL is read off ir-measures' RR@k (ESL = 1/RR). Reported: the share of topics per case,
mean ESL and mean RR on the *both* topics with Wilcoxon signed-rank and paired t-test p-values,
and, for contrast, the naive tests (rank-sum, signed-rank, t-test) on RR@k over all topics.
"""

from __future__ import annotations

import math
import warnings
from itertools import combinations
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from qrelkit.errors import InputError
from qrelkit.evaluate.core import evaluate, per_query_matrix
from qrelkit.params import AS_DECLARED, declared_defaults
from qrelkit.evaluate.params import EvalParams

TESTS = ("ttest", "wilcoxon", "ranksum", "randomization")
CORRECTIONS = ("bonferroni", "holm")
ESL_NOTE = ("ESL = rank of the first relevant item within the top k (read off RR@k); with several relevant "
            "items the first one counts")


def _p(fn) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            p = float(fn().pvalue)
        except ValueError:
            return float("nan")
    return p


def ttest_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided paired t-test p-value of per-topic scores ``a`` against ``b`` (NaN when undefined)."""
    from scipy import stats  # lazy: scipy takes ~0.3 s to import, only tests and correlations need it

    return _p(lambda: stats.ttest_rel(a, b))


def wilcoxon_p(a: np.ndarray, b: np.ndarray) -> float:
    """Wilcoxon signed-rank p-value of paired scores ``a`` against ``b``; NaN when empty or all equal."""
    from scipy import stats  # lazy: scipy takes ~0.3 s to import, only tests and correlations need it

    if len(a) == 0 or np.all(np.asarray(a) == np.asarray(b)):
        return float("nan")
    return _p(lambda: stats.wilcoxon(a, b))


def ranksum_p(a: np.ndarray, b: np.ndarray) -> float:
    """Wilcoxon rank-sum p-value of two unpaired score samples; NaN when either is empty."""
    from scipy import stats  # lazy: scipy takes ~0.3 s to import, only tests and correlations need it

    if len(a) == 0 or len(b) == 0:
        return float("nan")
    return _p(lambda: stats.ranksums(a, b))


@declared_defaults(EvalParams)
def randomization_p(a: np.ndarray, b: np.ndarray, *, n_resamples: int = 10000, seed: int = AS_DECLARED) -> float:
    """Two-sided paired randomization (permutation) test p-value of the mean difference of ``a`` and
    ``b``, ``n_resamples`` draws seeded by ``seed``; NaN when empty or all equal."""
    from scipy import stats  # lazy: scipy takes ~0.3 s to import, only tests and correlations need it

    a = np.asarray(a, float)
    b = np.asarray(b, float)
    if len(a) == 0 or np.all(a == b):
        return float("nan")

    def stat(x, y, axis=-1):
        return np.mean(x - y, axis=axis)

    return _p(lambda: stats.permutation_test((a, b), stat, permutation_type="samples", vectorized=True,
                                             n_resamples=n_resamples, alternative="two-sided",
                                             rng=np.random.default_rng(seed)))


@declared_defaults(EvalParams)
def pvalue(test: str, a, b, *, n_resamples: int = 10000, seed: int = AS_DECLARED) -> float:
    """The p-value of paired scores ``a`` and ``b`` by the named ``test`` (one of :data:`TESTS`);
    raises ``bad-option`` for another name."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    if test == "ttest":
        return ttest_p(a, b)
    if test == "wilcoxon":
        return wilcoxon_p(a, b)
    if test == "ranksum":
        return ranksum_p(a, b)
    if test == "randomization":
        return randomization_p(a, b, n_resamples=n_resamples, seed=seed)
    raise InputError("bad-option", f"test must be one of {', '.join(TESTS)}, got {test!r}")


@declared_defaults(EvalParams)
def correct(pvalues: Sequence[float], method: str, alpha: float = AS_DECLARED) -> tuple[np.ndarray, np.ndarray]:
    """Corrected p-values and reject flags (statsmodels' ``multipletests``); NaNs are left out."""
    from statsmodels.stats.multitest import multipletests  # lazy: statsmodels takes ~1 s to import

    if method not in CORRECTIONS:
        raise InputError("bad-option", f"correction must be one of {', '.join(CORRECTIONS)}, got {method!r}")
    p = np.asarray(pvalues, float)
    out = np.full(len(p), np.nan)
    rej = np.zeros(len(p), bool)
    ok = ~np.isnan(p)
    if ok.any():
        r, pc_, _, _ = multipletests(p[ok], alpha=alpha, method=method)
        out[ok] = pc_
        rej[ok] = r
    return out, rej


def _pairs(runs: Sequence[str], baseline: str | None, pairs: Iterable[tuple[str, str]] | None) -> list[tuple[str, str]]:
    if pairs is not None:
        out = [(str(a), str(b)) for a, b in pairs]
        for a, b in out:
            for r in (a, b):
                if r not in runs:
                    raise InputError("unknown-run", f"run {r!r} is not among the scored runs")
        return out
    if baseline is not None:
        if baseline not in runs:
            raise InputError("unknown-run", f"baseline run {baseline!r} is not among the scored runs")
        return [(r, baseline) for r in runs if r != baseline]
    return list(combinations(runs, 2))


@declared_defaults(EvalParams)
def significance(
    per_query: pa.Table,
    measures: Sequence[str] | None = None,
    *,
    baseline: str | None = None,
    pairs: Iterable[tuple[str, str]] | None = None,
    tests: Sequence[str] = AS_DECLARED,
    corrections: Sequence[str] = AS_DECLARED,
    alpha: float = AS_DECLARED,
    n_resamples: int = 10000,
    seed: int = AS_DECLARED,
    progress: Callable[..., None] | None = None,
) -> pd.DataFrame:
    """Significance tests between runs on per-query values (the table :func:`evaluate` returns).

    Pairs: every pair of runs (default), every run against ``baseline``, or the given ``pairs``.
    Topics where either value is null (skipped missing topics) are left out of that pair. One row
    per (measure, run A, run B, test): topics, means, mean difference, p-value, and for each
    correction the corrected p-value and whether it rejects at ``alpha``. ``progress``: called as
    ``progress(0, total=<measures x pairs>)``, then ``progress(1)`` after each measure and pair.
    Also importable as ``qrelkit.compare``.

    Examples
    --------
    >>> from qrelkit.simulate.toy import toy_qrels, toy_runs
    >>> runs, qrels = toy_runs(), toy_qrels()
    >>> from qrelkit import compare, evaluate
    >>> per_query = evaluate(runs, qrels, ["P@1"]).per_query
    >>> tests = compare(per_query, tests=["ttest"], corrections=["holm"])
    >>> tests[["run_a", "run_b", "test", "topics", "diff", "reject_holm"]].to_dict("records")
    [{'run_a': 'a', 'run_b': 'b', 'test': 'ttest', 'topics': 3, 'diff': 0.3333333333333333, 'reject_holm': False}]
    """
    for t in tests:
        if t not in TESTS:
            raise InputError("bad-option", f"test must be one of {', '.join(TESTS)}, got {t!r}")
    meas = list(measures) if measures else list(dict.fromkeys(per_query["measure"].to_pylist()))
    runs = sorted(set(per_query["run"].to_pylist()))
    pl = _pairs(runs, baseline, pairs)
    if progress is not None:
        progress(0, total=len(meas) * len(pl))
    rows = []
    for m in meas:
        w = per_query_matrix(per_query, m, runs)
        for a, b in pl:
            x, y = w[a].to_numpy(float), w[b].to_numpy(float)
            ok = ~np.isnan(x) & ~np.isnan(y)
            x, y = x[ok], y[ok]
            for t in tests:
                p = pvalue(t, x, y, n_resamples=n_resamples, seed=seed)
                rows.append([m, a, b, t, int(ok.sum()), float(x.mean()) if len(x) else math.nan,
                             float(y.mean()) if len(y) else math.nan,
                             float((x - y).mean()) if len(x) else math.nan, p])
            if progress is not None:
                progress(1)
    df = pd.DataFrame(rows, columns=["measure", "run_a", "run_b", "test", "topics", "mean_a", "mean_b", "diff", "p"])
    for c in corrections:
        df[f"p_{c}"] = np.nan
        df[f"reject_{c}"] = False
        for (m, t), idx in df.groupby(["measure", "test"], sort=False).groups.items():
            pcor, rej = correct(df.loc[idx, "p"].to_numpy(), c, alpha)
            df.loc[idx, f"p_{c}"] = pcor
            df.loc[idx, f"reject_{c}"] = rej
    return df


# ------------------------------------------------------------------------ outcome breakdown

def breakdown_from_rr(rr_a: np.ndarray, rr_b: np.ndarray) -> dict:
    """Outcome breakdown of two runs from their per-topic RR@k values (0 = no relevant item in
    the top k). Returns counts, shares, means and p-values (see the module documentation)."""
    a = np.asarray(rr_a, float)
    b = np.asarray(rr_b, float)
    n = len(a)
    ha, hb = a > 0, b > 0
    neither = ~ha & ~hb
    only_a = ha & ~hb
    only_b = ~ha & hb
    both = ha & hb
    esl_a = np.rint(1.0 / a[both])
    esl_b = np.rint(1.0 / b[both])
    out = {
        "topics": n,
        "neither": int(neither.sum()), "only_a": int(only_a.sum()), "only_b": int(only_b.sum()), "both": int(both.sum()),
        "both_a_better": int((esl_a < esl_b).sum()), "both_b_better": int((esl_a > esl_b).sum()),
        "both_tied": int((esl_a == esl_b).sum()),
    }
    for k in ("neither", "only_a", "only_b", "both"):
        out[f"share_{k}"] = out[k] / n if n else math.nan
    out["mean_esl_a"] = float(esl_a.mean()) if both.any() else math.nan
    out["mean_esl_b"] = float(esl_b.mean()) if both.any() else math.nan
    out["mean_rr_both_a"] = float(a[both].mean()) if both.any() else math.nan
    out["mean_rr_both_b"] = float(b[both].mean()) if both.any() else math.nan
    out["p_esl_wilcoxon"] = wilcoxon_p(esl_a, esl_b)
    out["p_esl_ttest"] = ttest_p(esl_a, esl_b)
    out["p_rr_both_wilcoxon"] = wilcoxon_p(a[both], b[both])
    out["p_rr_both_ttest"] = ttest_p(a[both], b[both])
    out["mean_rr_a"] = float(a.mean()) if n else math.nan
    out["mean_rr_b"] = float(b.mean()) if n else math.nan
    out["p_naive_ranksum"] = ranksum_p(a, b)
    out["p_naive_wilcoxon"] = wilcoxon_p(a, b)
    out["p_naive_ttest"] = ttest_p(a, b)
    return out


@declared_defaults(EvalParams)
def outcome_breakdown(
    runs: pa.Table,
    qrels: pa.Table,
    *,
    k: int = AS_DECLARED,
    rel: int = 1,
    baseline: str | None = None,
    pairs: Iterable[tuple[str, str]] | None = None,
    missing: str = AS_DECLARED,
    ranking: str = AS_DECLARED,
    progress: Callable[..., None] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Outcome breakdown (docs/protocol.md section 3) for every pair of runs, every run against
    ``baseline``, or the given ``pairs``. Returns (one row per pair, one row per pair and topic
    with its case). A run that retrieved nothing for a topic has no relevant item there.
    ``ranking``: as :func:`~qrelkit.evaluate.evaluate`.
    ``progress``: called as ``progress(0, total=<pairs>)``, then ``progress(1)`` per pair."""
    measure = f"RR(rel={int(rel)})@{int(k)}"
    ev = evaluate(runs, qrels, [measure], missing="zero" if missing == "skip" else missing, ranking=ranking)
    name = ev.measures[0]
    w = per_query_matrix(ev.per_query, name, ev.runs)
    pl = _pairs(ev.runs, baseline, pairs)
    if progress is not None:
        progress(0, total=len(pl))
    rows, cases = [], []
    for a, b in pl:
        ra, rb = w[a].to_numpy(float), w[b].to_numpy(float)
        d = breakdown_from_rr(ra, rb)
        rows.append({"run_a": a, "run_b": b, "k": int(k), "rel": int(rel), **d, "note": ESL_NOTE})
        for q, x, y in zip(w.index, ra, rb):
            case = ("neither" if x <= 0 and y <= 0 else "only_a" if y <= 0 else "only_b" if x <= 0 else "both")
            ea = int(round(1 / x)) if x > 0 else None
            eb = int(round(1 / y)) if y > 0 else None
            cases.append((a, b, q, case, ea, eb, float(x), float(y)))
        if progress is not None:
            progress(1)
    per_topic = pd.DataFrame(cases, columns=["run_a", "run_b", "qid", "case", "esl_a", "esl_b", "rr_a", "rr_b"])
    per_topic["esl_a"] = per_topic["esl_a"].astype("Int64")
    per_topic["esl_b"] = per_topic["esl_b"].astype("Int64")
    return pd.DataFrame(rows), per_topic


# --------------------------------------------------------------------------- correlation

def tau_ap(reference: Sequence[float], other: Sequence[float]) -> float:
    """AP rank correlation (Yilmaz, Aslam and Robertson, SIGIR 2008) of ``other`` against the
    ``reference`` scores (higher = better in both): items are ranked by ``other``; for each item
    at rank i > 1, C(i) counts the items above it that the reference also puts above it;
    tau_ap = 2/(n-1) * sum_i C(i)/(i-1) - 1. Assumes no ties (break them before calling).
    Not symmetric: the reference is the "true" ranking, as in ircor's ``tauAP(x, y)``."""
    x = np.asarray(reference, float)
    y = np.asarray(other, float)
    if len(x) != len(y):
        raise InputError("bad-option", "tau_ap needs two score vectors of the same length")
    n = len(x)
    if n < 2:
        return math.nan
    r = x[np.argsort(-y, kind="stable")]
    above = r[None, :] > r[:, None]  # above[i, j]: reference puts item j above item i
    c = np.tril(above, k=-1).sum(axis=1)[1:]
    return float(2.0 / (n - 1) * np.sum(c / np.arange(1, n)) - 1.0)


def leaderboard_correlation(a: pd.Series | dict, b: pd.Series | dict) -> dict:
    """Kendall's tau (scipy, tau-b) and tau_ap between two leaderboards (run -> score) over their
    common runs. tau_ap is given both ways (``tau_ap_a`` takes ``a`` as the reference). Ties in a
    leaderboard are broken by run name (ascending) for tau_ap; ranked by a leaderboard where every
    run ties, tau_ap is NaN (as Kendall's tau is then)."""
    from scipy import stats  # lazy: scipy takes ~0.3 s to import, only tests and correlations need it

    sa = pd.Series(a, dtype=float)
    sb = pd.Series(b, dtype=float)
    common = sorted(set(sa.index) & set(sb.index))
    out = {"runs": len(common), "only_a": sorted(set(sa.index) - set(common)),
           "only_b": sorted(set(sb.index) - set(common))}
    if len(common) < 2:
        out.update(kendall_tau=math.nan, kendall_p=math.nan, tau_ap_a=math.nan, tau_ap_b=math.nan)
        return out
    x = sa[common].to_numpy()
    y = sb[common].to_numpy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = stats.kendalltau(x, y)
    out["kendall_tau"] = float(res.statistic)
    out["kendall_p"] = float(res.pvalue)

    def untie(v: np.ndarray) -> np.ndarray:
        # strict order: score, then run name ascending first (names are sorted already)
        order = np.lexsort((np.arange(len(v)), -v))
        s = np.empty(len(v))
        s[order] = np.arange(len(v), 0, -1)
        return s

    ux, uy = untie(x), untie(y)
    # a leaderboard where every run ties orders them by name alone: tau_AP ranking by it is no value
    flat = {k: len(np.unique(v[~np.isnan(v)])) < 2 for k, v in (("x", x), ("y", y))}
    out["tau_ap_a"] = math.nan if flat["y"] else tau_ap(ux, uy)
    out["tau_ap_b"] = math.nan if flat["x"] else tau_ap(uy, ux)
    return out
