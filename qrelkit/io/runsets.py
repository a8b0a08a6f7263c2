"""Runs read as every ``qrelkit`` command reads them: validation settings from the protocol
file (``[runs]``: lenient, max_depth, expected_depth; a given value wins), the known topics from a
topics file, the known runs from a manifest file.

:func:`load_runs` is what ``qrelkit runs validate|canonicalize``, ``pool``, ``eval``, ``dedupe
runs``, ``prefs`` and ``reuse`` call to read their run arguments.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Sequence

from qrelkit.config import load_config
from qrelkit.io.manifest import read_manifest
from qrelkit.io.runs import RunSet, expand_sources, read_runs
from qrelkit.io.topics import read_topics


def load_runs(
    sources: str | os.PathLike | Sequence[str | os.PathLike],
    config: Any = None,
    *,
    manifest: str | os.PathLike | None = None,
    topics: str | os.PathLike | None = None,
    lenient: bool | None = None,
    max_depth: int | None = None,
    expected_depth: int | None = None,
    ties: str = "docid-desc",
    progress: Callable[[int], None] | None = None,
) -> RunSet:
    """Read and validate runs (files or folders) with the config's ``[runs]`` settings (the
    built-in defaults without a config; a given ``lenient``, ``max_depth`` or
    ``expected_depth`` wins); ``topics`` and ``manifest`` are files (read with
    :func:`~qrelkit.io.topics.read_topics` and :func:`~qrelkit.io.manifest.read_manifest`):
    other topics, unknown runs and wrong file tags are errors. ``ties`` orders equal scores
    (:data:`qrelkit.io.runs.TIE_RULES`); ``progress(1)`` is called per file read.

    Examples
    --------
    >>> from qrelkit.io.runsets import load_runs
    >>> from qrelkit.simulate.toy import toy_file
    >>> path = toy_file("run.txt", "1 Q0 d1 1 2.0 r1\\n1 Q0 d2 2 1.0 r1\\n")
    >>> load_runs([path]).runs
    ['r1']
    """
    cfg = config if config is not None else load_config(None)
    return read_runs(
        expand_sources(sources),
        lenient=bool(cfg.get_value("runs", "lenient", lenient)),
        topics=None if topics is None else read_topics(topics)["qid"].tolist(),
        max_depth=cfg.get_value("runs", "max_depth", max_depth),
        expected_depth=cfg.get_value("runs", "expected_depth", expected_depth),
        manifest=None if manifest is None else read_manifest(manifest),
        progress=progress,
        ties=ties,
    )
