"""Binarization schemes: which grades count as relevant, per level, named in the protocol file.

TREC Deep Learning (docs/protocol.md section 1): passages are relevant at grades 2 and 3 (``passage``),
documents at 1, 2 and 3 (``document``). A config names its schemes in ``[labels]``
(``passage_relevant``, ``document_relevant``, and any others in ``[labels.schemes]``, e.g.
``strict = [3]``); a scheme can also be given inline as ``"2,3"`` or as a threshold ``">=2"``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from qrelkit.config import load_config
from qrelkit.errors import InputError
from qrelkit.io.qrels import QRELS_SCHEMA, sort_qrels


def scheme_grades(name: str | Sequence[int], config: Any = None) -> list[int]:
    """The relevant grades of scheme ``name``: ``passage``, ``document``, a name from
    ``[labels.schemes]``, ``"2,3"``, ``">=2"`` (on the config's scale) or a list of ints."""
    cfg = config if config is not None else load_config(None)
    if not isinstance(name, str):
        return sorted({int(g) for g in name})
    s = name.strip()
    if s in ("passage", "document"):
        return sorted(int(g) for g in cfg.get_value("labels", f"{s}_relevant"))
    schemes = cfg.get_value("labels", "schemes") or {}
    if s in schemes:
        return sorted(int(g) for g in schemes[s])
    try:
        if s.startswith(">="):
            t = int(s[2:])
            return [g for g in sorted(int(x) for x in cfg.get_value("labels", "scale")) if g >= t]
        return sorted({int(x) for x in s.split(",") if x.strip()})
    except ValueError:
        raise InputError("bad-scheme", f"unknown binarization scheme {name!r} (passage, document, a name in "
                         "[labels.schemes], '2,3' or '>=2')") from None


def threshold_of(grades: Sequence[int], scale: Sequence[int] | None = None) -> int:
    """The level t such that the scheme is "every grade >= t" (what ir-measures' ``rel`` means).

    The scale defaults to 0 .. max(grades). A scheme with a gap (``[1, 3]``) has no such level
    and is the error ``bad-scheme``.
    """
    g = sorted(set(int(x) for x in grades))
    if not g:
        raise InputError("bad-scheme", "a binarization scheme needs at least one relevant grade")
    sc = sorted(set(int(x) for x in scale)) if scale is not None else list(range(0, g[-1] + 1))
    t = g[0]
    if not {x for x in sc if x >= t} <= set(g):
        raise InputError("bad-scheme", f"grades {g} are not 'every grade >= {t}' on the scale {sc}")
    return t


def binarize(qrels: pa.Table, relevant: Sequence[int]) -> pa.Table:
    """Qrels with grade 1 for the ``relevant`` grades and 0 for the other judged grades;
    negative grades (pooled, not judged) stay as they are.

    Examples
    --------
    >>> import pyarrow as pa
    >>> from qrelkit import binarize
    >>> qrels = pa.table({"qid": ["1", "1", "1"], "docid": ["p1", "p2", "p3"], "rel": pa.array([3, 1, -1], pa.int32())})
    >>> binarize(qrels, relevant=[2, 3])["rel"].to_pylist()
    [1, 0, -1]
    """
    rel = qrels["rel"].to_numpy(zero_copy_only=False)
    rel_set = np.array(sorted(set(int(g) for g in relevant)), dtype=np.int64)
    out = np.where(rel < 0, rel, np.isin(rel, rel_set).astype(np.int32)).astype(np.int32)
    t = pa.table({"qid": qrels["qid"], "docid": qrels["docid"], "rel": pa.array(out, pa.int32())})
    return sort_qrels(t.cast(QRELS_SCHEMA))
