"""Checks every command makes on its paths before any work: an output never destroys an input.

:func:`check_io` is called first thing by every command with the paths it reads, the files and
folders it writes and the judging stores it writes into. It raises
:class:`~qrelkit.errors.InputError` (nothing is touched) when

* an input does not exist: ``unreadable``;
* an output is one of the inputs after resolving symlinks and hard links (same device and inode
  when the output exists, same real path otherwise), lies inside an input folder (it would be
  read as input next time; a folder of runs is read whole), or is a folder that holds an input:
  ``output-is-input``;
* a file output is an existing SQLite file (a judging store is never replaced by a non-store
  output, whatever its name): ``output-is-store``;
* an output is, lies inside or holds one of the ``protect`` paths (files a command does not read
  but must never replace, such as a campaign's recorded inputs and its folder):
  ``output-is-input``;
* an output lies in a campaign folder (a folder with a campaign's ``campaign.db`` store and
  ``advance.lock``, or below one): ``output-in-campaign`` (a campaign's folder holds only what
  the campaign writes);
* two outputs of one command are the same file: ``duplicate-output``;
* an output cannot be written: its folder (or the nearest existing ancestor, since missing
  folders are created) is not a writable folder, checked with a real probe file because the
  permission bits do not bind root (``/sys``, read-only mounts), or a file output is an existing
  folder (and a folder output an existing file): ``unwritable-output``.

:func:`refuse_empty_result` is called once the work is done and before anything is written: an
empty result (an aggregation that includes no topic, an import with no judgment, ...) never
replaces an existing output that holds rows, unless forced: ``empty-result``.
"""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping, Union

from qrelkit.errors import InputError

SQLITE_HEADER = b"SQLite format 3\x00"
#: the store of a campaign folder (qrelkit.campaign) and its advance lock: a folder holding both
#: is a campaign's own
CAMPAIGN_STORE = "campaign.db"
CAMPAIGN_MARKERS = (CAMPAIGN_STORE, "advance.lock")

#: the prefix of an ir_datasets dataset given where a file is expected (``irds:<dataset-id>``)
IRDS = "irds:"

PathLike = Union[str, os.PathLike]
Paths = Union[PathLike, None, Iterable[Union[PathLike, None]]]


def is_irds(spec: Any) -> bool:
    """Whether ``spec`` names an ir_datasets dataset (``irds:<dataset-id>``)."""
    return str(spec).startswith(IRDS)


def _flat(paths: Paths) -> list[Path]:
    if paths is None:
        return []
    if isinstance(paths, (str, os.PathLike)):
        return [Path(paths)]
    out: list[Path] = []
    for p in paths:
        out.extend(_flat(p))
    return out


def is_sqlite_file(path: PathLike) -> bool:
    """True when ``path`` is a file that starts with SQLite's 16-byte header."""
    try:
        with open(path, "rb") as fh:
            return fh.read(16) == SQLITE_HEADER
    except OSError:
        return False


def same_file(a: PathLike, b: PathLike) -> bool:
    """Whether two paths name one file: same device and inode when both exist (symlinks and hard
    links resolved), same real path otherwise."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def inside(path: PathLike, folder: PathLike) -> bool:
    """Whether ``path`` lies below the folder ``folder`` (real paths; not the folder itself)."""
    p, f = os.path.realpath(path), os.path.realpath(folder)
    return p != f and p.startswith(f.rstrip(os.sep) + os.sep)


def _probe(folder: Path) -> OSError | None:
    """Create and remove a file in ``folder``; the error when that fails."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".qrelkit-probe.", dir=folder)
    except OSError as exc:
        return exc
    os.close(fd)
    os.unlink(tmp)
    return None


def check_writable(path: PathLike, *, folder: bool = False) -> None:
    """``unwritable-output`` unless ``path`` can be written as a file (or, with ``folder``, as a
    folder) without touching anything: missing parents must be creatable."""
    p = Path(path)
    if p.is_dir() and not folder:
        raise InputError("unwritable-output", "is a folder, expected a file to write", file=str(p))
    if p.exists() and not p.is_dir() and folder:
        raise InputError("unwritable-output", "is a file, expected a folder to write into", file=str(p))
    here = p if folder and p.is_dir() else p.parent
    while not here.exists():  # the nearest existing ancestor: missing folders are created there
        if here.parent == here:
            break
        here = here.parent
    if not here.is_dir():
        raise InputError("unwritable-output", f"cannot create a folder under {here}: it is a file", file=str(p))
    err = None if os.access(here, os.W_OK | os.X_OK) else OSError(errno.EACCES, os.strerror(errno.EACCES))
    err = err or _probe(here)
    if err is not None:
        reason = err.strerror or str(err)
        raise InputError("unwritable-output", f"cannot write in {here}: {reason}", file=str(p))


def campaign_folder_of(path: PathLike) -> Path | None:
    """The campaign folder ``path`` lies in: the nearest ancestor holding both a campaign's
    store (``campaign.db``) and its advance lock file (made by ``campaign init``) — looked at
    with ``stat`` only, never opened: closing a descriptor of a store file would drop the SQLite
    locks this process holds on it — or None."""
    for parent in Path(os.path.realpath(path)).parents:
        if all(os.path.isfile(parent / name) for name in CAMPAIGN_MARKERS):
            return parent
    return None


def check_protected(outs: list[Path], dirs: list[Path], protect: Mapping[PathLike, str]) -> None:
    """``output-is-input`` when an output (file ``outs`` or folder ``dirs``) is, lies in or holds
    a ``protect``-ed path (``{path: description}``)."""
    for out, is_dir in [(o, False) for o in outs] + [(d, True) for d in dirs]:
        for src, what in protect.items():
            src = Path(src)
            if same_file(out, src):
                raise InputError("output-is-input", f"is {what}; it would be destroyed, write elsewhere", file=str(out))
            if inside(out, src):
                raise InputError("output-is-input", f"is inside {what}; write elsewhere", file=str(out))
            if is_dir and inside(src, out):
                raise InputError("output-is-input", f"is a folder that holds {what}; write elsewhere", file=str(out))


def check_io(inputs: Paths = (), outputs: Paths = (), *, folders: Paths = (), stores: Paths = (),
             read_stores: Paths = (), protect: Paths | Mapping[PathLike, str] = ()) -> None:
    """Refuse, before any work, paths that would destroy an input or fail after the work.

    ``inputs``: files and folders the command reads (must exist; an ``irds:<id>`` source is skipped). ``outputs``: files it writes.
    ``folders``: folders it writes into. ``stores``: judging stores it writes into (read too: an
    output is never one of them; their folder must be writable for SQLite's journal files).
    ``read_stores``: judging stores it only reads (``not-a-store`` when missing).
    ``protect``: files and folders no output may be, lie in or hold, whether they exist or not
    (a campaign's recorded inputs and its own folder: :func:`qrelkit.campaign.protected_paths`);
    a mapping gives each one's description for the message (``{path: "the campaign's manifest"}``).
    ``None`` entries are skipped and lists are flattened, so options can be passed as they are.
    Raises :class:`InputError` (see the module documentation for the rules).
    """
    ins, outs, dirs, sts, rsts = _flat(inputs), _flat(outputs), _flat(folders), _flat(stores), _flat(read_stores)
    prot = dict(protect) if isinstance(protect, Mapping) else {p: str(p) for p in _flat(protect)}
    for p in rsts:
        if not p.is_file():
            raise InputError("not-a-store", "no judging store here (create one with 'qrelkit cal init')", file=str(p))
    ins = [p for p in ins if not is_irds(p)]  # a dataset of ir_datasets: no path to check
    for p in ins:
        if not p.exists():
            raise InputError("unreadable", "no such file or folder", file=str(p))
    check_protected(outs, dirs, prot)
    for out in outs + dirs:
        home = campaign_folder_of(out)
        if home is not None:
            raise InputError("output-in-campaign", f"lies in the campaign folder {home}, which holds only what the "
                             "campaign writes; write elsewhere", file=str(out))
    read = ins + sts + rsts
    for out, is_dir in [(o, False) for o in outs] + [(d, True) for d in dirs]:
        for src in read:
            if same_file(out, src):
                raise InputError("output-is-input", f"is also an input ({src}); it would be destroyed, write elsewhere",
                                 file=str(out))
            if src.is_dir() and inside(out, src):
                raise InputError("output-is-input", f"is inside the input folder {src}; write elsewhere", file=str(out))
            if is_dir and inside(src, out):
                raise InputError("output-is-input", f"is a folder that holds the input {src}; write elsewhere",
                                 file=str(out))
        if not is_dir and out.is_file() and is_sqlite_file(out):
            raise InputError("output-is-store", "is a SQLite file (a judging store?); a store is never overwritten by "
                             "another output, write elsewhere", file=str(out))
    for i, a in enumerate(outs):
        for b in outs[i + 1:]:
            if same_file(a, b):
                raise InputError("duplicate-output", f"is given as two outputs ({b}); one would overwrite the other",
                                 file=str(a))
    for out in outs:
        check_writable(out)
    for d in dirs:
        check_writable(d, folder=True)
    for s in sts:
        check_writable(s)
        if s.exists() and not os.access(s, os.W_OK):
            raise InputError("unwritable-output", "the store file is read-only", file=str(s))


def holds_rows(path: PathLike) -> bool:
    """Whether an existing output holds anything worth keeping: a Parquet table with rows, a
    CSV/TSV file with a line after its header, any other file with a byte."""
    p = Path(path)
    if not p.is_file() or p.stat().st_size == 0:
        return False
    suffix = p.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq  # lazy: only a Parquet output needs its footer read

        try:
            return pq.read_metadata(p).num_rows > 0
        except (OSError, ValueError):  # not a Parquet file after all: it has bytes, keep it
            return True
    if suffix in (".csv", ".tsv"):
        with open(p, "rb") as fh:
            return sum(1 for line in fh if line.strip()) > 1
    return True


def refuse_empty_result(outputs: Paths, reason: str | None, *, force: bool = False) -> None:
    """An empty result never replaces a good file: when ``reason`` (why the result is empty;
    ``None``: it is not) is given, the ``outputs`` that exist and hold rows (:func:`holds_rows`)
    are an ``empty-result`` error naming them and why, so that nothing is written; ``force``
    writes the empty result anyway. Outputs that do not exist yet, or hold nothing, are written.

    >>> refuse_empty_result(["no/such/file.txt"], "no topic is included")
    >>> import tempfile, os
    >>> good = os.path.join(tempfile.mkdtemp(), "qrels.txt")
    >>> _ = open(good, "w").write("1 0 p1 1\\n")
    >>> refuse_empty_result([good], "no topic is included")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    qrelkit.errors.InputError: ...qrels.txt: [empty-result] no topic is included: ...qrels.txt not replaced by an empty result; --force to write it
    >>> refuse_empty_result([good], "no topic is included", force=True)
    """
    if reason is None or force:
        return
    kept = [p for p in _flat(outputs) if holds_rows(p)]
    if kept:
        names = ", ".join(str(p) for p in kept)
        raise InputError("empty-result", f"{reason}: {names} not replaced by an empty result; --force to write it",
                         file=str(kept[0]))
