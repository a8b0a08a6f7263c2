"""Binarization schemes: which grades count as relevant, per level, named in the protocol file.

TREC Deep Learning (docs/protocol.md section 1): passages are relevant at grades 2 and 3 (``passage``),
documents at 1, 2 and 3 (``document``). A config names its schemes in ``[labels]``
(``passage_relevant``, ``document_relevant``, and any others in ``[labels.schemes]``, e.g.
``strict = [3]``); a scheme can also be given inline as ``"2,3"`` or as a threshold ``">=2"``.

Registry: :func:`register_scheme` names further schemes from Python (one line), and
:func:`scheme_grades` is the one place a scheme name becomes grades, for every command
(``--scheme``, ``--relevant``) and library function; :func:`available_schemes` lists the names.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, Union

import numpy as np
import pyarrow as pa

from qrelkit.errors import InputError
from qrelkit.io.qrels import QRELS_SCHEMA, sort_qrels
from qrelkit.labels.params import LabelsParams


Grades = Union[Sequence[int], Callable[[Any], Sequence[int]]]

#: registered schemes: name -> grades, or a function of the ``[labels]`` parameters returning them
_SCHEMES: dict[str, Grades] = {}
#: the schemes the ``[labels]`` keys define; a ``[labels.schemes]`` entry cannot redefine them
_LEVELS = ("passage", "document")


def register_scheme(name: str, grades: Grades) -> None:
    """Make the binarization scheme ``name`` available to :func:`scheme_grades` (and so to every
    command's ``--scheme`` / ``--relevant``): ``grades`` is the relevant grades, or a function
    of the ``[labels]`` parameters (:class:`~qrelkit.labels.params.LabelsParams`) that returns
    them. A ``[labels.schemes]`` entry of the same name wins over a registered scheme (the
    protocol file is the user's word); ``passage`` and ``document`` are ``[labels]`` keys.

    Examples
    --------
    >>> from qrelkit.labels.binarize import register_scheme, scheme_grades
    >>> register_scheme("top-only", [3])
    >>> scheme_grades("top-only")
    [3]
    """
    if not name or not name.strip() or name.strip() != name:
        raise InputError("bad-scheme", f"a scheme needs a plain name, got {name!r}")
    _SCHEMES[name] = grades if callable(grades) else tuple(int(g) for g in grades)


def available_schemes(labels: LabelsParams | None = None) -> list[str]:
    """The scheme names :func:`scheme_grades` knows: registered ones and ``[labels.schemes]``,
    sorted (inline ``"2,3"`` and ``">=2"`` are always accepted too)."""
    return sorted(set(_SCHEMES) | set((labels or LabelsParams()).schemes or {}))


def _level(key: str) -> Callable[[LabelsParams], Sequence[int]]:
    return lambda labels: getattr(labels, key)


def _named(s: str, labels: LabelsParams) -> Sequence[int] | None:
    """The grades of a named scheme, or None: ``passage``/``document``, then
    ``[labels.schemes]``, then the registry."""
    schemes = labels.schemes or {}
    if s in schemes and s not in _LEVELS:
        return schemes[s]
    if s in _SCHEMES:
        g = _SCHEMES[s]
        return g(labels) if callable(g) else g
    return None


def scheme_grades(name: str | Sequence[int], labels: LabelsParams | None = None) -> list[int]:
    """The relevant grades of scheme ``name``: ``passage``, ``document``, a name from
    ``[labels.schemes]`` or :func:`register_scheme`, ``"2,3"``, ``">=2"`` (on ``[labels] scale``)
    or a list of ints, with the ``[labels]`` parameters ``labels`` (the declared defaults
    without). Every command and library function resolves a scheme here."""
    labels = labels or LabelsParams()
    if not isinstance(name, str):
        return sorted({int(g) for g in name})
    s = name.strip()
    named = _named(s, labels)
    if named is not None:
        return sorted(int(g) for g in named)
    try:
        if s.startswith(">="):
            t = int(s[2:])
            return [g for g in sorted(int(x) for x in labels.scale) if g >= t]
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


register_scheme("passage", _level("passage_relevant"))
register_scheme("document", _level("document_relevant"))
