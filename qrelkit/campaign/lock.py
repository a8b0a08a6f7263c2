"""One advance at a time per campaign, across processes.

A campaign is advanced by :meth:`qrelkit.campaign.Runner.advance`: from ``qrelkit campaign run``,
or from the background runner of ``qrelkit serve`` (in its own process). Two advances at once
would compute the same CAL round twice and race on what they issue; an undo in the web app must
not slip between a runner's reading of the judgments and its use of them. So an advance holds an
exclusive lock on ``DIR/advance.lock`` (``flock``: released by the operating system when the
process ends, even killed) for its whole duration, and the web app's undo takes it without
waiting. A second advance waits for the first, up to :data:`ADVANCE_WAIT_S` seconds, then stops
with ``[campaign-busy]``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Iterator

from qrelkit.errors import InputError

try:  # lazy alternative: flock is POSIX; elsewhere the lock is a no-op (one process per campaign)
    import fcntl
except ImportError:  # pragma: no cover - not on the platforms qrelkit is tested on
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = "advance.lock"
_HELD = threading.local()  # the lock files this thread holds (re-entering is free)
#: how long an advance waits for another one to finish (a CAL round at 1M passages takes seconds)
ADVANCE_WAIT_S = 600.0


def _open(path: Path) -> int:
    """A descriptor of the lock file: created as the umask allows (0o666 before it: a group that
    shares the campaign shares its lock), or opened read-only (flock needs no write access)."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        try:
            return os.open(path, os.O_RDONLY)
        except OSError as exc:
            raise InputError("unwritable-output", f"cannot open the campaign's lock file: {exc.strerror}",
                             file=str(path)) from None


@contextlib.contextmanager
def advance_lock(directory: str | os.PathLike, *, wait: float | None = None) -> Iterator[None]:
    """Hold the campaign's advance lock while the block runs; wait up to ``wait`` seconds
    (default :data:`ADVANCE_WAIT_S`; 0: not at all) for another holder, then raise
    ``[campaign-busy]``."""
    path = Path(directory).resolve() / LOCK_NAME
    held = getattr(_HELD, "paths", None)
    if held is None:
        held = _HELD.paths = set()
    if fcntl is None or path in held:  # this thread holds it already (a run around an advance)
        yield
        return
    fd = _open(path)
    try:
        limit = time.monotonic() + (ADVANCE_WAIT_S if wait is None else float(wait))
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= limit:
                    raise InputError("campaign-busy", "another process is advancing this campaign (the runner of "
                                     "'qrelkit serve', or another 'campaign run'): try again when it is done",
                                     file=str(Path(directory))) from None
                time.sleep(0.05)
        held.add(path)
        try:
            yield
        finally:
            held.discard(path)
    finally:
        os.close(fd)  # releases the lock
