"""A campaign's store seen from the campaign: its configuration as recorded (never the protocol
file as it is now), and its recorded inputs checked against the files on disk. The store itself —
its tables, schema versions and migrations, its aggregates — is :mod:`qrelkit.store.campaign`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

from qrelkit.config import Config, changed_values, config_from_rows, format_value, load_config
from qrelkit.errors import InputError
from qrelkit.io.corpus import CorpusCheck
from qrelkit.io.params import SourcesParams
from qrelkit.io.sources import (CorpusSource, ShardCorpus, is_irds, open_corpus, open_qrels, open_topics,
                                shard_files)
from qrelkit.io.text import sha256_file
from qrelkit.store import CampaignStore


#: the input record of each shard of a corpus folder (the folder's own record is ``corpus``)
SHARD = "corpus shard"


def corpus_records(check: CorpusCheck) -> list[tuple[str, str, int, int, str]]:
    """The input records of a checked corpus (:meth:`qrelkit.io.sources.CorpusSource.check`): a
    file's (name, path, size, mtime_ns, sha256); a folder's own (its path, the number of shards, 0,
    its fingerprint) and one per shard; a dataset's (``irds:<id>``, passages, 0, its fingerprint)."""
    if check.kind == "file":
        return [("corpus", str(check.path), check.size, check.mtime_ns, check.sha256)]
    if check.kind == "shards":
        return [("corpus", str(check.path), len(check.parts), 0, check.sha256)] + [
            (SHARD, str(c.path), c.size, c.mtime_ns, c.sha256) for c in check.parts]
    return [("corpus", check.spec, check.passages, 0, check.sha256)]


def campaign_corpus(store: CampaignStore) -> CorpusSource:
    """The campaign's corpus as recorded at init: its ``[sources]`` mapping, and for a folder the
    shards recorded then (a file put into the folder since is the input check's
    ``[input-changed]``; the passages' texts are still read from the recorded shards)."""
    spec = (store.state.get("paths") or {})["corpus"]
    params = SourcesParams.from_config(campaign_config(store))
    if not is_irds(spec) and Path(spec).is_dir():
        rows = store.state.inputs()
        return ShardCorpus(spec, shards=[Path(x) for x in rows.loc[rows["name"] == SHARD, "path"]])
    return open_corpus(spec, params=params)


def source_digest(name: str, spec: str, params: SourcesParams | None = None) -> str:
    """The fingerprint of an ``irds:`` input: the corpus's (:meth:`~qrelkit.io.sources.CorpusSource.
    fingerprint`), or the SHA-256 of the topics or qrels as read (their TSV); ``params``: the
    campaign's ``[sources]``."""
    if name == "corpus":
        return open_corpus(spec, params=params).fingerprint()
    return (open_qrels if name == "qrels" else open_topics)(spec, params).fingerprint()


def input_record(name: str, path: str | os.PathLike,
                 params: SourcesParams | None = None) -> tuple[str, str, int, int, str]:
    """(name, absolute path, size, mtime_ns, sha256) of one input file; (name, ``irds:<id>``, 0, 0,
    :func:`source_digest`) of a dataset of ir_datasets."""
    if is_irds(path):
        return name, str(path), 0, 0, source_digest(name, str(path), params)
    p = Path(path).resolve()
    st = p.stat()
    return name, str(p), int(st.st_size), int(st.st_mtime_ns), sha256_file(p)


def campaign_config(store: CampaignStore) -> Config:
    """The campaign's effective configuration: the one recorded in the store (``campaign_config``:
    the protocol file with the overrides given at ``campaign init``, or as adopted since by
    :func:`qrelkit.campaign.adopt.adopt_config`) — never the file as it is now
    (see :func:`check_config_values`)."""
    rows = store.state.config_rows().rename(columns={"location": "where"})
    return config_from_rows(rows.to_dict("records"), (store.state.get("paths") or {}).get("config"))


def protocol_file_config(store: CampaignStore) -> Config | None:
    """The protocol file as it is now, with the overrides of ``campaign init`` (None for a
    campaign without one); its errors are the file's (``[bad-toml]``, a rule across keys, ...)."""
    path = (store.state.get("paths") or {}).get("config")
    return None if path is None else load_config(path, store.state.get("overrides", {}))


def check_inputs(store: CampaignStore, seen: dict[str, tuple[int, int]] | None = None) -> None:
    """``[input-changed]`` when a recorded input differs from what init saw (size, or content
    when its modification time moved); ``[input-missing]`` when it is gone: the first of
    :func:`input_problems`, raised.

    ``seen`` (path -> (size, mtime_ns), filled here): a file whose size and modification time
    are those seen at an earlier check passes without reading it again (a long-lived runner
    checks cheaply); any other is checked in full and, when it passes, remembered."""
    problems = input_problems(store, seen, first=True)
    if problems:
        raise problems[0]


def input_problems(store: CampaignStore, seen: dict[str, tuple[int, int]] | None = None, *,
                   first: bool = False) -> list[InputError]:
    """Every recorded input that is gone (``[input-missing]``) or changed
    (``[input-changed]``) since init, as errors naming the file (only the first with
    ``first``); ``seen`` as in :func:`check_inputs`."""
    out: list[InputError] = []
    rows = list(store.state.inputs().itertuples(index=False))
    for name, path, size, mtime, digest in rows:
        if is_irds(path) or Path(path).is_dir():
            problem = _source_problem(store, name, path, digest, rows, seen)
            out += [problem] if problem is not None else []
            if out and first:
                break
            continue
        p = Path(path)
        if not p.is_file():
            out.append(InputError("input-missing", f"the campaign's {name} input is gone since init; restore it",
                                  file=path))
        else:
            st = p.stat()
            now = (int(st.st_size), int(st.st_mtime_ns))
            if seen is not None and seen.get(path) == now:
                continue
            if st.st_size != size or (st.st_mtime_ns != mtime and sha256_file(p) != digest):
                if name == "config":  # the protocol file: its values count, not its bytes
                    try:
                        check_config_values(store, p)
                    except InputError as exc:
                        out.append(exc)
                else:
                    out.append(InputError("input-changed", f"the campaign's {name} input changed on disk since "
                                          f"init (recorded sha256 {digest[:12]}...); restore it or start a new "
                                          "campaign", file=path))
            if not out and seen is not None:
                seen[path] = now
        if out and first:
            break
    return out


def _source_problem(store: CampaignStore, name: str, spec: str, digest: str, rows: list,
                    seen: dict | None) -> InputError | None:
    """The problem of a recorded input that is no file: a corpus folder whose shards are not those
    of init (one added, removed or renamed; their contents are their own records), or a dataset of
    ir_datasets whose fingerprint changed (checked once per ``seen``)."""
    if seen is not None and seen.get(spec) == (0, 0):
        return None  # a dataset seen unchanged by this runner (a folder's listing is read each time: cheap)
    if is_irds(spec):
        try:
            now = source_digest(name, spec, SourcesParams.from_config(campaign_config(store)))
        except InputError as exc:
            return InputError("input-missing", f"the campaign's {name} input cannot be read: {exc.message}",
                              file=spec)
        if now != digest:
            return InputError("input-changed", f"the campaign's {name} input (an ir_datasets dataset) changed since "
                              f"init (recorded fingerprint {digest[:12]}...); restore it or start a new campaign",
                              file=spec)
    else:
        try:
            names = [p.name for p in shard_files(Path(spec))]
        except InputError as exc:  # a sub-folder put into it, no shard left: said as it is
            return InputError("input-changed", f"the campaign's {name} folder changed since init ({exc.message}: "
                              f"{Path(exc.file or spec).name}); restore it or start a new campaign", file=spec)
        was = [Path(r[1]).name for r in rows if r[0] == SHARD and Path(r[1]).parent == Path(spec)]
        if names != was:
            gone, new = sorted(set(was) - set(names)), sorted(set(names) - set(was))
            what = (f"shard {gone[0]} is gone" if gone else f"shard {new[0]} is new") if gone or new else \
                "its shards are in another order"
            return InputError("input-changed", f"the campaign's {name} folder changed since init ({what}); restore "
                              "it or start a new campaign", file=spec)
    if seen is not None and is_irds(spec):
        seen[spec] = (0, 0)
    return None


def describe_change(change: Mapping[str, Any]) -> str:
    """``[pool] depth 10 -> 20``: one changed key (:func:`qrelkit.config.changed_values`)."""
    return f"[{change['section']}] {change['key']} {format_value(change['old'])} -> {format_value(change['new'])}"


def check_config_values(store: CampaignStore, path: Path) -> None:
    """The campaign's protocol file ``path`` changed on disk: nothing to say when its values are
    still the campaign's (a comment, blank lines, keys moved: :func:`campaign_config`);
    ``[input-changed]`` naming the first key whose value changed (and how many others) and how
    to go on otherwise."""
    changes = changed_values(campaign_config(store), protocol_file_config(store))
    if not changes:
        return
    first, more = changes[0], len(changes) - 1
    others = f" (and {more} other key{'s' if more > 1 else ''})" if more else ""
    m = re.fullmatch(r"(.*):(\d+)", str(first["where"]))
    d = store.path.parent
    raise InputError("input-changed", f"the campaign's protocol file changed since init: {describe_change(first)}"
                     f"{others}; restore it, or adopt it for the stages not run yet ('qrelkit campaign adopt-config "
                     f"{d}'), or start a new campaign with this one's judgments ('qrelkit campaign export {d}', "
                     "then 'campaign init ... --qrels')", file=str(path), line=int(m.group(2)) if m else None)
