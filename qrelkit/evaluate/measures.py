"""Measures: ir-measures measure strings, and NCG@k, registered with ir-measures.

qrelkit computes no IR measure itself: every value comes from ir-measures (its pytrec_eval,
msmarco, judged, ... providers). ir-measures has no normalized cumulative gain, so this module
registers one, ``NCG``, as an ir-measures measure (found by ``ir_measures.parse_measure("NCG@100")``
and run by ir-measures' runtime provider):

    NCG@k = CG@k / ideal CG@k,   CG@k = sum of the gains of the first k retrieved documents,

where the gain of a document is its grade (negative grades and unjudged documents gain 0, or a
``gains`` mapping ``{grade: gain}``), and the ideal is the sum of the k largest gains among the
topic's judged documents. A topic with no positive gain scores 0. Without a cutoff, k is the
length of the run. The run is read in canonical order (score descending, ties by docid
descending).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import ir_measures
import numpy as np
import pandas as pd
from ir_measures import measures as _ms

from qrelkit.errors import InputError


def _define_ncg():
    if "NCG" in _ms.registry:  # a future ir-measures may ship its own
        return _ms.registry["NCG"]

    class _NCG(_ms.Measure):
        """Normalized cumulative gain at k (see the module documentation)."""

        __name__ = "NCG"
        NAME = "NCG"
        PRETTY_NAME = "Normalized Cumulative Gain"
        SHORT_DESC = "Gain of the top k divided by the largest gain any k judged documents can give."
        SUPPORTED_PARAMS = {
            "cutoff": _ms.ParamInfo(dtype=int, required=False, desc="ranking cutoff threshold"),
            "gains": _ms.ParamInfo(dtype=dict, desc="custom gain mapping (int-to-int)"),
        }

        def runtime_impl(self, qrels: pd.DataFrame, run: pd.DataFrame):
            k = self.params.get("cutoff")
            gains = self.params.get("gains")
            rel = qrels["relevance"].astype("int64")
            if gains:
                rel = rel.map(lambda g: gains.get(g, g))
            q = pd.DataFrame({"query_id": qrels["query_id"].astype(str), "doc_id": qrels["doc_id"].astype(str),
                              "gain": np.clip(rel.to_numpy(dtype=float), 0, None)})
            ideal_rows = q.sort_values(["query_id", "gain"], ascending=[True, False], kind="mergesort")
            if k is not None:
                ideal_rows = ideal_rows.groupby("query_id", sort=False).head(k)
            ideal = ideal_rows.groupby("query_id")["gain"].sum()
            r = pd.DataFrame({"query_id": run["query_id"].astype(str), "doc_id": run["doc_id"].astype(str),
                              "score": run["score"].astype(float)})
            r = r.sort_values(["query_id", "score", "doc_id"], ascending=[True, False, False], kind="mergesort")
            if k is not None:
                r = r.groupby("query_id", sort=False).head(k)
            r = r.merge(q, on=["query_id", "doc_id"], how="left")
            cg = r.groupby("query_id")["gain"].sum(min_count=0).fillna(0.0)
            for qid, value in cg.items():
                if qid not in ideal.index:
                    continue  # topics without judgments are not scored (as every provider does)
                best = float(ideal[qid])
                yield ir_measures.Metric(query_id=qid, measure=self, value=float(value) / best if best > 0 else 0.0)

    ncg = _NCG()
    _ms.register(ncg)
    return ncg


NCG = _define_ncg()


def parse_measures(specs: Iterable[str | ir_measures.Measure]) -> list[ir_measures.Measure]:
    """Measures from ir-measures strings (``nDCG@10``, ``AP(rel=2)``, ``RR(rel=2)@10``,
    ``Judged@10``, ``NCG@100``); trec_eval names (``ndcg_cut_10``, ``map``, ``P_5``) are accepted
    too. Duplicates are dropped, order is kept. Unknown names raise ``unknown-measure``."""
    out: list[ir_measures.Measure] = []
    for spec in specs:
        if isinstance(spec, ir_measures.Measure):
            found = [spec]
        else:
            s = str(spec).strip()
            try:
                found = [ir_measures.parse_measure(s)]
            except (NameError, ValueError, SyntaxError, TypeError):
                try:
                    found = ir_measures.parse_trec_measure(s)
                except (ValueError, KeyError, TypeError):
                    raise InputError("unknown-measure", f"{s!r} is neither an ir-measures measure nor a "
                                     "trec_eval name (e.g. nDCG@10, AP(rel=2), RR@10, Judged@10)") from None
        for m in found:
            try:
                m.validate_params()
            except AssertionError as exc:
                raise InputError("unknown-measure", f"{spec!r}: {exc}") from None
            if m not in out:
                out.append(m)
    if not out:
        raise InputError("unknown-measure", "no measure given")
    return out


def _providers() -> list:
    """The providers of ir-measures' default pipeline that are installed."""
    return [p for p in ir_measures.DefaultPipeline.providers if p.is_available()]


def supported_names() -> list[str]:
    """Names of the measures some installed ir-measures provider computes (for messages)."""
    names = set()
    for p in _providers():
        names.update(sm.NAME for sm in getattr(p, "SUPPORTED_MEASURES", ()))
    # measures defined at run time (NCG) are computed by ir-measures' runtime provider
    names.update(m.NAME for m in _ms.registry.values() if hasattr(m, "runtime_impl"))
    return sorted(names, key=str.lower)


def _computable(m: ir_measures.Measure) -> bool:
    """Whether an installed provider of ir-measures' default pipeline computes ``m``. Asked as the
    pipeline asks: whether a provider supports the measure first, and only then whether it is
    installed, since finding that out imports it (ranx, say, imports scipy and matplotlib: seconds
    in the first evaluation of a process, for a measure pytrec_eval computes)."""
    return any(p.supports(m) and p.is_available() for p in ir_measures.DefaultPipeline.providers)


def computable(measures: Sequence[ir_measures.Measure]) -> list[ir_measures.Measure]:
    """``measures`` checked against the installed ir-measures providers.

    A measure whose provider needs a relevance level it did not set gets ir-measures' usual
    binary default, ``rel=1`` (``RBP(p=0.5)`` -> ``RBP(p=0.5,rel=1)``: cwl_eval needs ``rel``).
    A measure no installed provider computes raises ``unsupported-measure`` naming the measures
    that can be computed."""
    out = []
    for m in measures:
        if not _computable(m) and "rel" in m.SUPPORTED_PARAMS and "rel" not in m.params and _computable(m(rel=1)):
            m = m(rel=1)
        if not _computable(m):
            raise InputError("unsupported-measure", f"no installed ir-measures provider computes {m}; supported "
                             f"measures: {', '.join(supported_names())}")
        if m not in out:
            out.append(m)
    return out


def with_relevance(measures: Sequence[ir_measures.Measure], rel: int | None) -> list[ir_measures.Measure]:
    """Set the binary relevance level ``rel`` on every measure that has one and where the
    measure string did not set it (e.g. ``AP`` -> ``AP(rel=2)``; ``AP(rel=3)`` is kept)."""
    if rel is None:
        return list(measures)
    out = []
    for m in measures:
        if "rel" in m.SUPPORTED_PARAMS and "rel" not in m.params:
            m = m(rel=int(rel))
        if m not in out:
            out.append(m)
    return out


def _hash_once(self) -> int:
    """A measure's hash, ``hash(repr(measure))`` as ir-measures defines it, computed once."""
    h = self.__dict__.get("_qrelkit_hash")
    if h is None:
        h = self.__dict__["_qrelkit_hash"] = hash(repr(self))
    return h


_HASHED_ONCE: dict[type, type] = {}


def hashed_once(m: ir_measures.Measure) -> ir_measures.Measure:
    """The same measure (equal to ``m``, of a subclass of its class) whose hash is computed once.

    ir-measures hashes a measure by building its repr, and its evaluators hash a measure for every
    value they yield (a set of the expected (measure, topic) pairs, one ``discard`` per value):
    about a quarter of an evaluation's time (issue 24). The copy hashes and compares as ``m``; it
    is made for ir-measures' evaluators, which live in one evaluation or in a
    :class:`qrelkit.evaluate.Judgments` (its class is made here, so it does not pickle)."""
    base = type(m)
    cls = _HASHED_ONCE.get(base)
    if cls is None:
        cls = _HASHED_ONCE[base] = type(base.__name__, (base,), {"__hash__": _hash_once, "__module__": base.__module__,
                                                                 "__qualname__": base.__qualname__})
    return cls(**m.params)
