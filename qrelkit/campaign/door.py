"""The checks at a campaign's door: what a command may write, and the folder a campaign may take.

A campaign runs for weeks and is operated by people who mistype. Whatever a command writes is
checked first against everything the campaign depends on (docs/campaign.md, "Operating a
campaign"):

* :func:`protected_paths`: the campaign's recorded inputs (corpus, topics, manifest, every run
  file, the protocol file, earlier qrels), the oracle's qrels and the folder of runs. No output
  of a ``qrelkit campaign`` command may be one of them, lie in one or hold one
  (``[output-is-input]``, :func:`qrelkit.io.paths.check_io`); no output of any command lies in a
  campaign folder (``[output-in-campaign]``).
* :func:`check_folder`: ``campaign init`` takes a new or empty folder; an existing folder with
  files in it only with ``force`` (adopted: its files are kept, and a file under a name the
  campaign writes is refused, so the campaign never touches a file it did not create).
* :func:`guidelines_file`: the assessors' guidelines named by ``[web] guidelines`` are a
  readable UTF-8 file (checked at ``campaign init``: one line and exit 2, never a failure of the
  web app later);
* :func:`check_twin`: an output a command writes beside the one it was given (the report's
  Markdown twin) never replaces a file it did not write itself.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

from qrelkit.config import WebParams
from qrelkit.errors import InputError
from qrelkit.io.paths import check_protected, inside
from qrelkit.store import STORE_NAME, campaign_path, open_campaign_store

#: every name the campaign writes in its folder (files, folders, patterns of temporary files)
OWNED_NAMES = (
    f"{STORE_NAME}*", "advance.lock",
    "selection.csv", "classes.parquet", "pool.parquet", "pool-fractional.parquet", "features", ".features.tmp*",
    "batches", "text-index.sqlite*", "qrels-passages.txt", "qrels-expanded.txt", "qrels-documents.txt",
    "expansion.csv", "eval-per-query.csv", "eval-summary.csv", "leaderboard.csv", "eval-duplicates.csv",
    "reuse-summary.csv", "reuse-runs.csv", "reuse-units.csv", "reuse-topics.csv", "report.html", "report.md",
    ".*.tmp",
)


def owned(name: str) -> bool:
    """Whether ``name`` (an entry of a campaign folder) is one the campaign writes."""
    return any(fnmatch.fnmatchcase(name, pat) for pat in OWNED_NAMES)


def check_folder(directory: str | os.PathLike, *, force: bool = False) -> None:
    """``campaign init``'s folder: new, or empty; an existing folder with entries only with
    ``force``, and then none of them may have a name the campaign writes. Raises
    ``[campaign-exists]``, ``[folder-not-empty]`` or ``[folder-has-campaign-names]``."""
    d = Path(directory)
    if campaign_path(d).exists():
        raise InputError("campaign-exists", "a campaign is already here; it is never re-initialized", file=str(d))
    if not d.is_dir():
        return
    entries = sorted(os.listdir(d))
    if not entries:
        return
    if not force:
        shown = ", ".join(entries[:3]) + (f" and {len(entries) - 3} more" if len(entries) > 3 else "")
        raise InputError("folder-not-empty", f"holds {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} ({shown}); "
                         "a campaign writes its files in its folder: give a new or empty folder, or --force to adopt "
                         "this one (its files are kept)", file=str(d))
    clash = [e for e in entries if owned(e)]
    if clash:
        raise InputError("folder-has-campaign-names", f"holds {', '.join(clash[:5])}, a name the campaign writes: "
                         "move it away first (a campaign never replaces a file it did not create)", file=str(d))


def protected_paths(directory: str | os.PathLike) -> dict[Path, str]:
    """Everything a campaign depends on outside its folder, with a description for messages: the
    recorded inputs, the oracle's qrels and the folder of runs given at init (``{path:
    description}``, the ``protect`` argument of :func:`qrelkit.io.paths.check_io`; the campaign
    folder itself is every command's ``[output-in-campaign]``)."""
    d = Path(directory)
    out: dict[Path, str] = {}
    store = open_campaign_store(d, readonly=True)
    try:
        for name, path in store.state.inputs()[["name", "path"]].itertuples(index=False):
            out[Path(path)] = f"the campaign's {name} input {path}"
        paths = store.state.get("paths") or {}
        oracle = store.state.get("oracle") or {}
    finally:
        store.close()
    if paths.get("runs_dir"):
        out[Path(paths["runs_dir"])] = f"the campaign's folder of runs {paths['runs_dir']}"
    if oracle.get("path"):
        out[Path(oracle["path"])] = f"the oracle's qrels of the campaign {oracle['path']}"
    return out


_OWN_REPORT = {".md": b"# Campaign report", ".html": b"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Campaign report"}


def check_twin(path: str | os.PathLike, *, force: bool = False) -> None:
    """``[output-exists]`` when ``path``, a file written beside the output a command was given
    (the report's Markdown twin), exists and is not a campaign report (``force``: replace it
    anyway)."""
    p = Path(path)
    if force or not p.exists():
        return
    head = _OWN_REPORT.get(p.suffix.lower())
    try:
        with open(p, "rb") as fh:
            ours = head is not None and fh.read(len(head)) == head
    except OSError:
        ours = False
    if not ours:
        raise InputError("output-exists", "exists and is not a campaign report; the report's twin would replace it: "
                         "move it away, write the report elsewhere, or --force", file=str(p))


def check_outputs(directory: str | os.PathLike, outputs) -> None:
    """What every ``qrelkit campaign`` command checks on what it writes, besides the checks of
    :func:`qrelkit.io.paths.check_io` it made already: no output is, lies in or holds what the
    campaign depends on (:func:`protected_paths`; ``[output-is-input]``), and none lies in the
    campaign folder (``[output-in-campaign]``, also for a campaign that has no advance lock file
    yet, which :func:`qrelkit.io.paths.campaign_folder_of` needs)."""
    outs = [Path(o) for o in (outputs if isinstance(outputs, (list, tuple)) else [outputs]) if o is not None]
    check_protected(outs, [], protected_paths(directory))
    for out in outs:
        if inside(out, directory):
            raise InputError("output-in-campaign", f"lies in the campaign folder {directory}, which holds only what "
                             "the campaign writes; write elsewhere", file=str(out))


def read_guidelines(path: str | os.PathLike) -> str:
    """The text of a guidelines file: ``[unreadable]`` when it cannot be read (missing, a folder,
    no permission), ``[not-utf8]`` when it is not UTF-8."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError("unreadable", f"[web] guidelines: cannot read the file ({exc.strerror or exc})",
                         file=str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError("not-utf8", f"[web] guidelines: the file is not UTF-8 (byte {exc.start + 1})",
                         file=str(path)) from None


def guidelines_file(cfg, config: str | os.PathLike | None) -> Path | None:
    """The guidelines file ``[web] guidelines`` of configuration ``cfg`` names, its path relative
    to the protocol file ``config`` (the working folder without one), checked by
    :func:`read_guidelines`; None when the key is not set."""
    name = WebParams.from_config(cfg).guidelines
    if not name:
        return None
    path = (Path(config).resolve().parent if config is not None else Path.cwd()) / name
    read_guidelines(path)
    return path.resolve()
