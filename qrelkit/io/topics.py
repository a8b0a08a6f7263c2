"""Topics: ``qid<TAB>text`` files (as MS MARCO / TREC DL), JSONL with qid/query keys, or a plain
list of qids one per line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

from qrelkit.errors import InputError
from qrelkit.io.params import SourcesParams
from qrelkit.io.sources import IRDS, is_irds
from qrelkit.io.text import read_bytes, read_text


def read_topics(path: str | os.PathLike, *, params: SourcesParams | None = None) -> pd.DataFrame:
    """Return a DataFrame with columns ``qid`` (string) and ``text`` (may be empty). ``path`` may
    also be ``irds:<dataset-id>``: the queries of an ir_datasets dataset, their text the field
    ``params.query_field`` (:func:`qrelkit.io.irds.read_irds_topics`).

    Examples
    --------
    >>> from qrelkit import read_topics
    >>> from qrelkit.simulate.toy import toy_file
    >>> path = toy_file("topics.tsv", "1\\tblack bear attacks\\n2\\tcost of solar panels\\n")
    >>> read_topics(path).to_dict("list")
    {'qid': ['1', '2'], 'text': ['black bear attacks', 'cost of solar panels']}
    """
    if is_irds(path):
        from qrelkit.io.irds import read_irds_topics  # lazy: ir_datasets is an optional extra

        return read_irds_topics(str(path)[len(IRDS):], params)
    p = Path(path)
    text = read_text(p)
    rows = []
    seen: dict[str, int] = {}
    # split on "\n" only: splitlines() also breaks at \f, \x1c, U+2028, ... inside a topic's text
    for lineno, line in enumerate(text.split("\n"), 1):
        line = line.removesuffix("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if p.suffix in (".jsonl", ".json") or line.lstrip().startswith("{"):
            try:
                obj = json.loads(line, parse_int=str, parse_float=str)  # a numeric id as written: 01001, 1e3
            except json.JSONDecodeError as exc:
                raise InputError("bad-json", f"not JSON: {exc.msg}", file=str(p), line=lineno) from None
            if not isinstance(obj, dict):  # e.g. a list or a number: obj.get would fail
                raise InputError("bad-json", "a line is not a JSON object", file=str(p), line=lineno)
            qid = obj.get("qid", obj.get("query_id", obj.get("id", obj.get("_id"))))
            if qid is None:
                raise InputError("missing-column", "no qid/query_id/id key", file=str(p), line=lineno)
            qtext = obj.get("query", obj.get("text", obj.get("title", "")))
        elif "\t" in line:
            qid, _, qtext = line.partition("\t")
        else:
            parts = line.split(None, 1)
            qid, qtext = parts[0], parts[1] if len(parts) > 1 else ""
        qid = str(qid).strip()
        if qid in seen:
            raise InputError("duplicate-topic", f"topic {qid} already on line {seen[qid]}", file=str(p), line=lineno)
        seen[qid] = lineno
        rows.append((qid, str(qtext).strip()))
    if not rows:
        raise InputError("empty-file", "no topics", file=str(p))
    return pd.DataFrame(rows, columns=["qid", "text"]).astype({"qid": str, "text": str})


DETAIL_KEYS = {"description": ("description", "desc"), "narrative": ("narrative", "narr")}


def read_topic_details(path: str | os.PathLike) -> dict[str, dict[str, str]]:
    """``qid -> {"description": ..., "narrative": ...}`` for the topics of a JSONL topics file
    that have them (keys ``description``/``desc`` and ``narrative``/``narr``); ``{}`` for other
    formats. Read after :func:`read_topics` has validated the file. ``irds:<dataset-id>``: the
    queries' fields of those names (:func:`qrelkit.io.irds.read_irds_topic_details`).

    Examples
    --------
    >>> from qrelkit.simulate.toy import toy_file
    >>> path = toy_file("topics.jsonl", '{"qid": "1", "query": "bears", "narrative": "Attacks only."}\\n')
    >>> read_topic_details(path)
    {'1': {'narrative': 'Attacks only.'}}
    """
    if is_irds(path):
        from qrelkit.io.irds import read_irds_topic_details  # lazy: ir_datasets is an optional extra

        return read_irds_topic_details(str(path)[len(IRDS):])
    out: dict[str, dict[str, str]] = {}
    for line in read_bytes(Path(path)).decode("utf-8", errors="replace").split("\n"):
        if not line.lstrip().startswith("{"):
            continue
        try:
            obj = json.loads(line, parse_int=str, parse_float=str)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        qid = obj.get("qid", obj.get("query_id", obj.get("id", obj.get("_id"))))
        found = {}
        for key, names in DETAIL_KEYS.items():
            value = next((str(obj[n]).strip() for n in names if n in obj and str(obj[n]).strip()), None)
            if value:
                found[key] = value
        if qid is not None and found:
            out[str(qid).strip()] = found
    return out
