"""Error types.

Every defect in user input is reported as an :class:`InputError` that names the file, the line
(1-based, counted in the decompressed text) and the *rule* that was broken. The command line
prints ``str(error)`` as one line and exits with code 2.
"""

from __future__ import annotations

import errno
from typing import Mapping

#: the longest message an :class:`InputError` shows (characters); a longer one is cut with "..."
MESSAGE_LIMIT = 1000
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

#: counters an import reports besides its repairs (rows imported, already there, not yet graded)
BOOKKEEPING = frozenset({"imported", "repeated", "ungraded", "unanswered"})


def repair_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """What lenient mode repaired, per rule, from a reader's or an import's counters (the
    :data:`BOOKKEEPING` counters left out)."""
    return {str(r): int(n) for r, n in counts.items() if r not in BOOKKEEPING and int(n)}


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    o = ord(ch)
    if 0xDC80 <= o <= 0xDCFF:  # an undecodable byte kept by the "surrogateescape" error handler
        return f"\\x{o - 0xDC00:02x}"
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def printable(text: object, limit: int | None = None) -> str:
    """``text`` made safe to show on one line of a terminal: control characters, line and
    paragraph separators, undecodable bytes (``bytes`` input, or surrogates left by
    ``surrogateescape``) and every other character Python does not call printable are written as
    escapes (``\\x1b``, ``\\n``, ``\\xff``, ``\\u2028``); cut to ``limit`` characters with "..." when
    longer. Printable text is returned as it is (a backslash is not escaped, so applying it twice
    changes nothing).

    Examples
    --------
    >>> from qrelkit.errors import printable
    >>> printable("caf\\xe9 \\x1b[31mred\\tok")
    'café \\\\x1b[31mred\\\\tok'
    >>> printable(b"d\\xff3")
    'd\\\\xff3'
    >>> printable("x" * 50, limit=10)
    'xxxxxxx...'
    """
    s = text.decode("utf-8", "surrogateescape") if isinstance(text, (bytes, bytearray)) else str(text)
    if not s.isprintable():
        s = "".join(ch if ch.isprintable() else _escape(ch) for ch in s)
    if limit is not None and len(s) > limit:
        s = s[: max(limit - 3, 0)] + "..."
    return s


def quoted(value: object, limit: int = 40) -> str:
    """A piece of input quoted in a message: printable (:func:`printable`), at most ``limit``
    characters, in single quotes.

    Examples
    --------
    >>> from qrelkit.errors import quoted
    >>> quoted("3.O")
    "'3.O'"
    >>> quoted("\\x00\\x01" + "z" * 60, limit=12)
    "'\\\\x00\\\\x01z...'"
    """
    return f"'{printable(value, limit)}'"


class QrelkitError(Exception):
    """Base class of qrelkit's own errors.

    Examples
    --------
    >>> from qrelkit import InputError, QrelkitError
    >>> issubclass(InputError, QrelkitError)
    True
    """


class InputError(QrelkitError, ValueError):
    """Bad user input: a named rule broken at a file and line. The message and the file name are
    shown printable (:func:`printable`: no control character or undecodable byte ever reaches the
    terminal), the message cut at :data:`MESSAGE_LIMIT` characters.

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
        self.message = printable(message, MESSAGE_LIMIT)
        self.file = None if file is None else str(file)
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = printable(self.file) if self.file else "<input>"
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
