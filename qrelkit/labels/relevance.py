"""The relevance level of binary measures: which grades count as relevant when a run is scored.

One decision, shared by every command that scores runs (``eval score``/``compare``/``duplicates``,
``reuse leave-out``) and by a Python user who wants the same numbers: :func:`relevance_level`.
"""

from __future__ import annotations

from typing import Any

from qrelkit.labels.binarize import scheme_grades, threshold_of
from qrelkit.labels.params import LabelsParams


def relevance_level(relevant: str | int | None = None, labels: LabelsParams | None = None) -> int | None:
    """The ``rel`` level binary measures use (ir-measures' ``rel``: every grade >= it is relevant).

    ``relevant`` is what the user gave (``--relevant``, else ``[eval] relevant``: the evaluation's
    parameters hold it): nothing (``None`` or ``""``) keeps the measures' own default (None); a
    level (``2`` or ``"2"``) is taken as it is; a scheme (``passage``, ``document``, a
    ``[labels.schemes]`` name, ``"2,3"``, ``">=2"``) becomes its threshold on ``[labels] scale``
    (``labels``: the declared defaults without) — a scheme with a gap (``1,3``) is the error
    ``bad-scheme``.

    Examples
    --------
    >>> from qrelkit.labels.relevance import relevance_level
    >>> relevance_level("2"), relevance_level(">=2"), relevance_level("2,3"), relevance_level("passage")
    (2, 2, 2, 2)
    >>> relevance_level(None) is None
    True
    """
    if relevant is None or relevant == "":
        return None
    if isinstance(relevant, int) or (isinstance(relevant, str) and relevant.strip().isdigit()):
        return int(relevant)
    labels = labels or LabelsParams()
    return threshold_of(scheme_grades(relevant, labels), labels.scale)
