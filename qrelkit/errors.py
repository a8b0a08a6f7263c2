"""Error types.

Every defect in user input is reported as an :class:`InputError` that names the file, the line
(1-based, counted in the decompressed text) and the *rule* that was broken. The command line
prints ``str(error)`` as one line and exits with code 2.
"""

from __future__ import annotations

import errno
from typing import Mapping

#: counters an import reports besides its repairs (rows imported, already there, not yet graded)
BOOKKEEPING = frozenset({"imported", "repeated", "ungraded", "unanswered"})


def repair_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """What lenient mode repaired, per rule, from a reader's or an import's counters (the
    :data:`BOOKKEEPING` counters left out)."""
    return {str(r): int(n) for r, n in counts.items() if r not in BOOKKEEPING and int(n)}


class QrelkitError(Exception):
    """Base class of qrelkit's own errors.

    Examples
    --------
    >>> from qrelkit import InputError, QrelkitError
    >>> issubclass(InputError, QrelkitError)
    True
    """


class InputError(QrelkitError, ValueError):
    """Bad user input: a named rule broken at a file and line.

    Examples
    --------
    >>> from qrelkit import InputError
    >>> exc = InputError("grade-not-numeric", "grade 'x' is not a number", file="qrels.txt", line=3)
    >>> str(exc)
    "qrels.txt:3: [grade-not-numeric] grade 'x' is not a number"
    >>> exc.rule, exc.line
    ('grade-not-numeric', 3)
    """

    def __init__(self, rule: str, message: str, file: str | None = None, line: int | None = None):
        self.rule = rule
        self.message = message
        self.file = None if file is None else str(file)
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.file or "<input>"
        if self.line is not None:
            where = f"{where}:{self.line}"
        return f"{where}: [{self.rule}] {self.message}"

    def __reduce__(self):  # picklable across processes
        return (InputError, (self.rule, self.message, self.file, self.line))


def fail_or_count(counts: dict[str, int], lenient: bool, rule: str, message: str, file: str | None = None,
                  line: int | None = None) -> None:
    """One broken rule in a reader: raise it (strict) or count it in ``counts`` (lenient, the row
    is then skipped by the caller).

    Examples
    --------
    >>> counts = {}
    >>> fail_or_count(counts, True, "unknown-item", "not issued", "a.csv", 2)
    >>> counts
    {'unknown-item': 1}
    >>> fail_or_count(counts, False, "unknown-item", "not issued", "a.csv", 3)
    Traceback (most recent call last):
    ...
    qrelkit.errors.InputError: a.csv:3: [unknown-item] not issued
    """
    if not lenient:
        raise InputError(rule, message, file=file, line=line)
    counts[rule] = counts.get(rule, 0) + 1


_FULL = (errno.ENOSPC, errno.EDQUOT)
_FULL_WORDS = ("no space left on device", "disk quota exceeded", "database or disk is full")


def disk_full(exc: BaseException, where: str | None = None) -> InputError | None:
    """``[disk-full]`` when ``exc`` says the disk (or the quota) is full — an ``OSError`` with
    ``ENOSPC``/``EDQUOT``, or a message that says so (pyarrow's writers, SQLite's ``database or
    disk is full``) — else None. ``where``: the file or folder to name when the error names none.
    Every output is written to a temporary file and renamed, and the stores write in
    transactions, so a full disk corrupts nothing: free space and run the command again.

    >>> print(disk_full(OSError(28, "No space left on device", "out.csv")))
    out.csv: [disk-full] no space left on the device while writing out.csv; nothing was changed by the failed write: free some space and run the command again
    >>> disk_full(OSError(2, "No such file or directory")) is None
    True
    """
    if isinstance(exc, InputError):
        return exc if exc.rule == "disk-full" else None
    code = getattr(exc, "errno", None)
    if code not in _FULL and not any(w in str(exc).lower() for w in _FULL_WORDS):
        return None
    name = getattr(exc, "filename2", None) or getattr(exc, "filename", None)
    what = f" while writing {name}" if name else ""
    return InputError("disk-full", f"no space left on the device{what}; nothing was changed by the failed write: free "
                      "some space and run the command again", file=str(name or where) if (name or where) else None)
