"""One advance at a time per campaign, across processes.

A campaign is advanced by :meth:`qrelkit.campaign.Runner.advance`: from ``qrelkit campaign run``,
or from the background runner of ``qrelkit serve`` (in its own process). Two advances at once
would compute the same CAL round twice and race on what they issue; a change of a judgment in the
web app (or a correction) must not slip between a runner's reading of the judgments and its use
of them. So an advance holds an exclusive lock on ``DIR/advance.lock`` (``flock``: released by
the operating system when the process ends, even killed) for its whole duration, and the web
app's changes take it, waiting a few seconds at most. A second advance waits for the first, up
to :data:`ADVANCE_WAIT_S` seconds, then stops with ``[campaign-busy]``.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

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


def holder(directory: str | os.PathLike) -> dict | None:
    """Who holds (or last held) the campaign's advance lock: ``pid``, ``since`` (local time,
    ISO) and ``what`` — written into the lock file by its holder; None when unknown."""
    try:
        return json.loads((Path(directory) / LOCK_NAME).read_text(encoding="utf-8") or "null")
    except (OSError, ValueError):
        return None


def describe_holder(h: dict | None) -> str:
    """``"a campaign run since 10:42, pid 123"`` (a :func:`holder`), or ``"another process"``."""
    if not h:
        return "another process"
    return f"{h.get('what') or 'another process'} since {str(h.get('since', ''))[11:16]}, pid {h.get('pid')}"


def _holder_text(directory: Path) -> str:
    return describe_holder(holder(directory))


def _claim(fd: int, what: str) -> None:
    """Say in the lock file who holds it now (best effort: a read-only lock file stays silent)."""
    data = json.dumps({"pid": os.getpid(), "since": _dt.datetime.now().isoformat(timespec="seconds"),
                       "what": what}).encode()
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)


@contextlib.contextmanager
def advance_lock(directory: str | os.PathLike, *, wait: float | None = None, what: str = "a campaign run",
                 on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the campaign's advance lock while the block runs; wait up to ``wait`` seconds
    (default :data:`ADVANCE_WAIT_S`; 0: not at all) for another holder, then raise
    ``[campaign-busy]``. ``what`` names the holder for others (``"a campaign run"``, ``"the
    runner of qrelkit serve"``); ``on_wait`` is told once, at once, when this call has to wait
    and for whom (``"another process holds the campaign: a campaign run since 10:42, pid 123;
    waiting up to 10 min"``)."""
    path = Path(directory).resolve() / LOCK_NAME
    held = getattr(_HELD, "paths", None)
    if held is None:
        held = _HELD.paths = set()
    if fcntl is None or path in held:  # this thread holds it already (a run around an advance)
        yield
        return
    fd = _open(path)
    try:
        budget = ADVANCE_WAIT_S if wait is None else float(wait)
        limit = time.monotonic() + budget
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not told and on_wait is not None and budget > 0:
                    told = True
                    on_wait(f"another process holds the campaign: {_holder_text(path.parent)}; waiting up to "
                            f"{_duration(budget)}")
                if time.monotonic() >= limit:
                    raise InputError("campaign-busy", f"another process advances this campaign "
                                     f"({_holder_text(path.parent)}): try again when it is done",
                                     file=str(Path(directory))) from None
                time.sleep(0.05)
        _claim(fd, what)
        held.add(path)
        try:
            yield
        finally:
            held.discard(path)
    finally:
        os.close(fd)  # releases the lock


def _duration(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def held_by(directory: str | os.PathLike) -> dict | None:
    """Who advances the campaign right now (:func:`holder`'s ``pid, since, what``), or None when
    nobody holds its advance lock (tried without waiting, released at once; this thread's own
    hold counts as held)."""
    path = Path(directory).resolve() / LOCK_NAME
    if fcntl is None or not path.exists():
        return None
    if path in (getattr(_HELD, "paths", None) or set()):
        return holder(path.parent) or {}
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return holder(path.parent) or {}
    finally:
        os.close(fd)  # releases it, if this call took it
    return None
