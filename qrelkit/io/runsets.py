"""Runs read as every ``qrelkit`` command reads them: validation settings of ``[runs]``
(:class:`~qrelkit.io.params.RunsParams`: lenient, max_depth, expected_depth), the known topics
from a topics file, the known runs from a manifest file.

:func:`load_runs` is what ``qrelkit runs validate|canonicalize``, ``pool``, ``eval``, ``dedupe
runs``, ``prefs`` and ``reuse`` call to read their run arguments.
"""

from __future__ import annotations

import os
from typing import Callable, Sequence

from qrelkit.io.manifest import read_manifest
from qrelkit.io.params import RunsParams
from qrelkit.io.runs import RunSet, expand_sources, read_runs
from qrelkit.io.topics import read_topics


def load_runs(
    sources: str | os.PathLike | Sequence[str | os.PathLike],
    params: RunsParams | None = None,
    *,
    manifest: str | os.PathLike | None = None,
    topics: str | os.PathLike | None = None,
    ties: str = "docid-desc",
    progress: Callable[[int], None] | None = None,
) -> RunSet:
    """Read and validate runs (files or folders) with the ``[runs]`` parameters ``params``
    (:class:`~qrelkit.io.params.RunsParams`; the declared defaults without); ``topics`` and
    ``manifest`` are files (read with :func:`~qrelkit.io.topics.read_topics` and
    :func:`~qrelkit.io.manifest.read_manifest`): other topics, unknown runs and wrong file tags
    are errors. ``ties`` orders equal scores (:data:`qrelkit.io.runs.TIE_RULES`); ``progress(1)``
    is called per file read.

    Examples
    --------
    >>> from qrelkit.io.runsets import load_runs
    >>> from qrelkit.simulate.toy import toy_file
    >>> path = toy_file("run.txt", "1 Q0 d1 1 2.0 r1\\n1 Q0 d2 2 1.0 r1\\n")
    >>> load_runs([path]).runs
    ['r1']
    """
    return read_runs(
        expand_sources(sources),
        **(params or RunsParams()).read_args(),
        topics=None if topics is None else read_topics(topics)["qid"].tolist(),
        manifest=None if manifest is None else read_manifest(manifest),
        progress=progress,
        ties=ties,
    )
