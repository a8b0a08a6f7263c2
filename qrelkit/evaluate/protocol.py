"""Evaluation settings as a protocol file configures them (config section ``[eval]``): the
measures, the policy for judged topics a run misses, the relevance level of binary measures, the
tie ranking, and the comparison settings (tests, corrections, alpha, resamples, seed, k).

``qrelkit eval score|compare|duplicates`` resolve their flags through these functions, so a
Python user passing the same values gets the same keyword arguments for
:func:`~qrelkit.evaluate.core.evaluate`, :func:`~qrelkit.evaluate.compare.significance` and
:func:`~qrelkit.evaluate.compare.outcome_breakdown`.
"""

from __future__ import annotations

from typing import Any, Sequence

from qrelkit.config import load_config
from qrelkit.labels.relevance import relevance_level


def scoring_options(config: Any = None, *, measures: Sequence[str] = (), missing: str | None = None,
                    relevant: str | int | None = None, measures_key: str = "measures") -> dict:
    """Keyword arguments of :func:`~qrelkit.evaluate.core.evaluate`: ``measures`` (the given
    ones, else the config's ``[eval] <measures_key>``), ``missing``, ``rel``
    (:func:`~qrelkit.labels.relevance.relevance_level`) and ``ranking``; a given value wins over
    the config's.

    Examples
    --------
    >>> from qrelkit.evaluate.protocol import scoring_options
    >>> opts = scoring_options(measures=["nDCG@10"], relevant="2")
    >>> opts["measures"], opts["rel"], opts["missing"]
    (['nDCG@10'], 2, 'zero')
    """
    cfg = config if config is not None else load_config(None)
    ms = list(measures) if measures else list(cfg.get_value("eval", measures_key))
    missing = str(cfg.get_value("eval", "missing", missing))
    rel = relevance_level(relevant, cfg)
    return dict(measures=ms, missing=missing, rel=rel, ranking=str(cfg.get_value("eval", "ranking")))


def comparison_options(config: Any = None, *, tests: Sequence[str] | None = None,
                       corrections: Sequence[str] | None = None, alpha: float | None = None,
                       randomizations: int | None = None, seed: int | None = None, k: int | None = None) -> dict:
    """The settings of a comparison: ``tests``, ``corrections``, ``alpha``, ``n_resamples``
    and ``seed`` (for :func:`~qrelkit.evaluate.compare.significance`) and ``k`` (the outcome
    breakdown's top k); a given value wins over the config's ``[eval]`` one.

    Examples
    --------
    >>> from qrelkit.evaluate.protocol import comparison_options
    >>> comparison_options(tests=["ttest"], k=5)["tests"], comparison_options(k=5)["k"]
    (['ttest'], 5)
    """
    cfg = config if config is not None else load_config(None)
    return dict(
        tests=list(tests) if tests else list(cfg.get_value("eval", "tests")),
        corrections=list(corrections) if corrections else list(cfg.get_value("eval", "corrections")),
        alpha=float(cfg.get_value("eval", "alpha", alpha)),
        n_resamples=int(cfg.get_value("eval", "randomizations", randomizations)),
        seed=int(cfg.get_value("eval", "seed", seed)),
        k=int(cfg.get_value("eval", "k", k)),
    )
