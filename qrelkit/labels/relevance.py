"""The relevance level of binary measures: which grades count as relevant when a run is scored.

One decision, shared by every command that scores runs (``eval score``/``compare``/``duplicates``,
``reuse leave-out``) and by a Python user who wants the same numbers: :func:`relevance_level`.
"""

from __future__ import annotations

from typing import Any

from qrelkit.config import load_config
from qrelkit.labels.binarize import scheme_grades, threshold_of


def relevance_level(relevant: str | int | None = None, config: Any = None) -> int | None:
    """The ``rel`` level binary measures use (ir-measures' ``rel``: every grade >= it is relevant).

    ``relevant`` is what the user gave (``--relevant``), else the config's ``[eval] relevant``:
    nothing (``None`` or ``""``) keeps the measures' own default (None); a level (``2`` or
    ``"2"``) is taken as it is; a scheme (``passage``, ``document``, a ``[labels.schemes]`` name,
    ``"2,3"``, ``">=2"``) becomes its threshold on the config's ``[labels] scale`` — a scheme
    with a gap (``1,3``) is the error ``bad-scheme``.

    Examples
    --------
    >>> from qrelkit.labels.relevance import relevance_level
    >>> relevance_level("2"), relevance_level(">=2"), relevance_level("2,3")
    (2, 2, 2)
    >>> relevance_level(None) is None
    True
    """
    cfg = config if config is not None else load_config(None)
    r = cfg.get_value("eval", "relevant", relevant)
    if r is None or r == "":
        return None
    if isinstance(r, int) or (isinstance(r, str) and r.strip().isdigit()):
        return int(r)
    return threshold_of(scheme_grades(r, cfg), cfg.get_value("labels", "scale"))
