"""A toy collection in memory, small enough to read whole: the inputs of the examples in the
docstrings (two runs, three topics, four relevance judgments; small files in a new temporary
folder).

For realistic synthetic data use :func:`qrelkit.simulate.campaign.simulate_campaign`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa

from qrelkit.io.qrels import QRELS_SCHEMA
from qrelkit.io.runs import RUN_SCHEMA

TOY_TOPICS = ("1", "2", "3")
TOY_RANKINGS = {"a": ("p1", "p2", "p3"), "b": ("p3", "p2", "p1")}


def toy_file(name: str, text: str) -> Path:
    """Write ``text`` (UTF-8) to a file called ``name`` in a new temporary folder; returns its path.

    Examples
    --------
    >>> from qrelkit.simulate.toy import toy_file
    >>> path = toy_file("topics.tsv", "1\\tblack bear attacks\\n")
    >>> path.name, path.read_text()
    ('topics.tsv', '1\\tblack bear attacks\\n')
    """
    path = Path(tempfile.mkdtemp(prefix="qrelkit-"), name)
    path.write_text(text, encoding="utf-8")
    return path


def toy_runs() -> pa.Table:
    """Two runs, ``a`` and ``b``, in canonical order (:data:`qrelkit.io.runs.RUN_SCHEMA`): on every
    topic ``a`` ranks ``p1 p2 p3`` and ``b`` the reverse; scores 3, 2, 1.

    Examples
    --------
    >>> from qrelkit.simulate.toy import toy_runs
    >>> runs = toy_runs()
    >>> runs.num_rows, runs.column_names
    (18, ['run', 'qid', 'docid', 'rank', 'score'])
    >>> runs.slice(0, 3).select(["run", "qid", "docid", "rank"]).to_pydict()
    {'run': ['a', 'a', 'a'], 'qid': ['1', '1', '1'], 'docid': ['p1', 'p2', 'p3'], 'rank': [1, 2, 3]}
    """
    rows = [(run, qid, docid, k + 1, 3.0 - k)
            for run, ranking in TOY_RANKINGS.items() for qid in TOY_TOPICS for k, docid in enumerate(ranking)]
    return pa.table([list(col) for col in zip(*rows)], schema=RUN_SCHEMA)


def toy_qrels() -> pa.Table:
    """Binary qrels for the toy runs (:data:`qrelkit.io.qrels.QRELS_SCHEMA`): ``p1`` is relevant
    to topics 1 and 2, ``p2`` and ``p3`` to topic 3; nothing else is judged.

    Examples
    --------
    >>> from qrelkit.simulate.toy import toy_qrels
    >>> toy_qrels().to_pydict()
    {'qid': ['1', '2', '3', '3'], 'docid': ['p1', 'p1', 'p2', 'p3'], 'rel': [1, 1, 1, 1]}
    """
    return pa.table([["1", "2", "3", "3"], ["p1", "p1", "p2", "p3"], [1, 1, 1, 1]], schema=QRELS_SCHEMA)
