"""Error types.

Every defect in user input is reported as an :class:`InputError` that names the file, the line
(1-based, counted in the decompressed text) and the *rule* that was broken. The command line
prints ``str(error)`` as one line and exits with code 2.
"""

from __future__ import annotations

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
