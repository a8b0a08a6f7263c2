"""The pool-run selection as a protocol file configures it (config section ``[selection]``).

:func:`selection_options` turns the config (and any explicit overrides) into the keyword
arguments of :func:`~qrelkit.pooler.select.select_pool_runs`; :func:`configured_selection` is
:func:`~qrelkit.pooler.select.pool_selection` — THE rule for which runs are pooled — with them.
Every command that needs the pooled runs (``pool select``, ``pool depth|top1|fused|fractional``
with ``--manifest``, ``reuse leave-out``) goes through these two.
"""

from __future__ import annotations

from typing import Any, Iterable

import pandas as pd

from qrelkit.pooler.params import SelectionParams
from qrelkit.pooler.select import pool_selection, select_pool_runs


def selection_options(config: Any = None, *, per_group: int | None = None, include_baselines: bool | None = None,
                      include: Iterable[str] | None = None, exclude: Iterable[str] | None = None) -> dict:
    """Keyword arguments of :func:`~qrelkit.pooler.select.select_pool_runs` from the config's
    ``[selection]`` section (:class:`~qrelkit.pooler.params.SelectionParams`; the built-in
    defaults without a config); a given override wins, an empty ``include``/``exclude`` falls
    back to the config's list.

    Examples
    --------
    >>> from qrelkit.pooler.protocol import selection_options
    >>> opts = selection_options(per_group=2)
    >>> opts["per_group"], opts["include"]
    (2, [])
    """
    return SelectionParams.from_config(config, per_group=per_group, include_baselines=include_baselines,
                                       include=list(include or ()) or None,
                                       exclude=list(exclude or ()) or None).select_args()


def configured_selection(manifest: pd.DataFrame, config: Any = None, *, select: bool = False, **overrides) -> pd.DataFrame:
    """The manifest with ``pooled`` and ``reason`` by the configured rule: its own ``pooled``
    column as it is, else the config's selection (:func:`~qrelkit.pooler.select.pool_selection`).
    ``select=True`` always applies the selection (what ``qrelkit pool select`` shows), ignoring a
    ``pooled`` column; ``overrides`` are :func:`selection_options`'s."""
    opts = selection_options(config, **overrides)
    return select_pool_runs(manifest, **opts) if select else pool_selection(manifest, **opts)
