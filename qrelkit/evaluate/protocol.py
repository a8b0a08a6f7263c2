"""Evaluation settings as a protocol file configures them (config section ``[eval]``): the
measures, the policy for judged topics a run misses, the relevance level of binary measures, the
tie ranking, and the comparison settings (tests, corrections, alpha, resamples, seed, k).

``qrelkit eval score|compare|duplicates`` resolve their flags through these functions, so a
Python user passing the same values gets the same keyword arguments for
:func:`~qrelkit.evaluate.core.evaluate`, :func:`~qrelkit.evaluate.compare.significance` and
:func:`~qrelkit.evaluate.compare.outcome_breakdown`.
"""

from __future__ import annotations

from qrelkit.evaluate.params import EvalParams
from qrelkit.labels.params import LabelsParams
from qrelkit.labels.relevance import relevance_level


def scoring_options(params: EvalParams | None = None, labels: LabelsParams | None = None, *,
                    duplicates: bool = False) -> dict:
    """Keyword arguments of :func:`~qrelkit.evaluate.core.evaluate` from the ``[eval]`` parameters
    (and ``[labels]``, for a relevance scheme): ``measures`` (``duplicate_measures`` with
    ``duplicates``), ``missing``, ``rel`` (:func:`~qrelkit.labels.relevance.relevance_level`) and
    ``ranking``; the declared defaults without.

    Examples
    --------
    >>> from qrelkit.evaluate.params import EvalParams
    >>> from qrelkit.evaluate.protocol import scoring_options
    >>> opts = scoring_options(EvalParams.from_config(None, measures=["nDCG@10"], relevant="2"))
    >>> opts["measures"], opts["rel"], opts["missing"]
    (['nDCG@10'], 2, 'zero')
    """
    p = params or EvalParams()
    return dict(measures=list(p.duplicate_measures if duplicates else p.measures), missing=p.missing,
                rel=relevance_level(p.relevant, labels), ranking=p.ranking)


def comparison_options(params: EvalParams | None = None) -> dict:
    """The settings of a comparison from the ``[eval]`` parameters: ``tests``, ``corrections``,
    ``alpha``, ``n_resamples`` and ``seed`` (for :func:`~qrelkit.evaluate.compare.significance`)
    and ``k`` (the outcome breakdown's top k).

    Examples
    --------
    >>> from qrelkit.evaluate.params import EvalParams
    >>> from qrelkit.evaluate.protocol import comparison_options
    >>> opts = comparison_options(EvalParams.from_config(None, tests=["ttest"], k=5))
    >>> opts["tests"], opts["k"], opts["n_resamples"]
    (['ttest'], 5, 10000)
    """
    p = params or EvalParams()
    return dict(tests=list(p.tests), corrections=list(p.corrections), alpha=p.alpha, n_resamples=p.randomizations,
                seed=p.seed, k=p.k)
