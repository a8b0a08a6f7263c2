"""The background worker of the web app: one thread, one campaign runner at a time, requests
coalesced (many batches completed while the runner works give one more run, not many).

:class:`RunnerAdvance` advances a campaign through one long-lived
:class:`qrelkit.campaign.Runner` (store open, inputs stat-checked, CAL features kept loaded), so
the next CAL batch costs one round's computation, not a start-up. :class:`ProcessAdvance` (the
server's default) keeps that runner in a child process: a CAL round is CPU work in Python, and in
the server's process it would hold the interpreter lock while requests wait; in its own process
the requests never wait for it (they share only the store, whose writes are short transactions).
:func:`advance_campaign` is the one-shot form (a fresh ``Campaign(dir).run()``).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import pickle
import signal
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

from qrelkit.campaign import Campaign, protected_paths
from qrelkit.errors import InputError

log = logging.getLogger("qrelkit.web")

IDLE, COMPUTING = "idle", "computing"


def advance_campaign(directory: str | os.PathLike) -> dict:
    """Advance the campaign as far as the judgments allow (no oracle: assessors judge), once."""
    return Campaign(directory).run()


class RunnerAdvance:
    """``advance(directory)`` through one :class:`qrelkit.campaign.Runner` kept between calls
    (opened at the first call; closed and opened again after a failed one). Called by one thread
    at a time (the :class:`Advancer`'s)."""

    def __init__(self) -> None:
        self._runner = None

    def __call__(self, directory: str | os.PathLike) -> dict:
        first = self._runner is None
        if first:
            self._runner = Campaign(directory).runner(what="the runner of 'qrelkit serve'")
        try:
            out = self._runner.advance()
            if first:  # the CAL features, candidates and learner loaded now, not at the first next batch
                self._runner.warm()
            return out
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close the runner's store (idempotent)."""
        if self._runner is not None:
            self._runner.close()
            self._runner = None


def _die_with_parent(parent: int) -> None:
    """Ask Linux to SIGKILL this process when the thread that started it dies (best effort,
    nothing elsewhere); exit now if the parent is gone already."""
    try:
        import ctypes  # lazy: only the runner's child process needs it

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)


def _child(conn, directory: str, parent: int) -> None:
    """The child process of :class:`ProcessAdvance`: one :class:`RunnerAdvance`, one advance per
    ``"advance"`` received; answers ``(True, summary)`` or ``(False, exception)``. Ends on
    ``"close"`` or when the server's end of the pipe is gone (the server stopped); killed with the
    server (Linux: the parent-death signal), so a killed server leaves no runner behind that could
    race the next server's."""
    _die_with_parent(parent)
    adv = RunnerAdvance()
    try:
        while True:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                return
            if msg != "advance":
                return
            try:
                out: tuple = (True, adv(directory))
            except Exception as exc:  # sent to the server, which records it (healthz, organizer page)
                out = (False, exc)
            try:
                try:
                    conn.send(out)
                except (pickle.PicklingError, TypeError, AttributeError):
                    conn.send((False, RuntimeError(f"{type(out[1]).__name__}: {out[1]}")))
            except (BrokenPipeError, EOFError, OSError):
                return
    finally:
        adv.close()


class ProcessAdvance:
    """``advance(directory)`` through a :class:`RunnerAdvance` kept in a child process (spawned at
    the first call, spawned again if it died): the CAL rounds never hold the server's interpreter
    lock. A failed advance raises the child's exception here. Called by one thread at a time."""

    def __init__(self) -> None:
        self._proc = None
        self._conn = None

    def __call__(self, directory: str | os.PathLike) -> dict:
        if self._proc is None or not self._proc.is_alive():
            self.close()
            ctx = multiprocessing.get_context("spawn")  # never fork a threaded server
            self._conn, child = ctx.Pipe()
            self._proc = ctx.Process(target=_child, args=(child, str(directory), os.getpid()), name="qrelkit-runner",
                                     daemon=True)
            self._proc.start()
            child.close()
        try:
            self._conn.send("advance")
            ok, payload = self._conn.recv()
        except (EOFError, OSError) as exc:
            self.close()
            raise RuntimeError(f"the runner process stopped ({exc or 'no answer'})") from None
        if not ok:
            raise payload
        return payload

    def close(self) -> None:
        """Stop the child process (idempotent)."""
        if self._conn is not None:
            try:
                self._conn.send("close")
            except OSError:
                pass
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            self._proc.join(30)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(5)
            self._proc = None


class Advancer:
    """Runs ``advance(directory)`` in one background thread whenever :meth:`request` was called
    since its last run. ``lock`` is held for the whole of a run: a change that must not race the
    runner (a change of a judgment, a topic taken) takes it too. ``state`` is ``idle`` or ``computing``; ``last_error`` the
    message of the last run that failed (None after a run that did not), ``error_at`` its time and
    ``retry_at`` the time of the next automatic try (UTC, ISO 8601) — a failed run is tried again
    by itself, after 2 s, then twice as long after each failure, up to 5 minutes, and at once
    when one of the campaign's recorded inputs changes on disk meanwhile (a file put back, fixed,
    replaced: :func:`watched_inputs`, :func:`inputs_stamp`, looked at every :attr:`WATCH_S` seconds while paused);
    :meth:`request` (the organizer's retry button) asks for one now."""

    def __init__(self, directory: str | os.PathLike, advance: Callable[[Path], dict] | None = None) -> None:
        self.dir = Path(directory)
        self.advance = advance if advance is not None else ProcessAdvance()
        self.lock = threading.Lock()
        self.state = IDLE
        self.last_error: str | None = None
        self.last_result: dict | None = None
        self.last_seconds: float | None = None  # wall seconds of the last run
        self.recent: list[dict] = []  # the last runs: wall seconds and seconds per stage run
        self.runs = 0
        self.failures = 0  # runs failed in a row
        self.error_at: str | None = None  # when the last run failed (None after one that did not)
        self.retry_at: str | None = None  # when a failed run is tried again by itself
        self.started: float | None = None  # time.monotonic() at the start of the run going on
        self._stamp: tuple | None = None  # the inputs as the last failed run left them (inputs_stamp)
        self._watched: list[Path] | None = None  # the inputs' paths, read from the store once per failure
        self._requested = False
        self._stop = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="qrelkit-advance", daemon=True)
            self._thread.start()

    def request(self) -> None:
        """Ask for a run (returns at once; several requests before the run starts make one)."""
        with self._cond:
            self._requested = True
            self._cond.notify_all()

    @property
    def busy(self) -> bool:
        """A run is going on or asked for."""
        return self._requested or self.state == COMPUTING

    def wait_idle(self, timeout: float = 300.0) -> bool:
        """Block until no run is going on or asked for (False after ``timeout`` seconds)."""
        end = time.monotonic() + timeout
        with self._cond:
            while self._requested or self.state == COMPUTING:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the thread after the run going on, if any."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        close = getattr(self.advance, "close", None)
        if close is not None:
            with self.lock:
                close()

    #: after a failed run, the next one comes by itself after this many seconds, doubled after
    #: each failure up to :attr:`RETRY_MAX_S` (the cause — an input changed, a full disk — may be
    #: fixed meanwhile: the campaign then goes on without anyone asking)
    RETRY_FIRST_S = 2.0
    RETRY_MAX_S = 300.0
    #: while paused, the campaign's inputs are looked at this often (a few stat calls)
    WATCH_S = 2.0

    @property
    def paused(self) -> bool:
        """The last run failed: nothing moves on until a run goes through."""
        return self.last_error is not None

    def estimate(self) -> dict:
        """How long a run takes: ``estimate_s``, the median wall time of the recent runs that
        went through (None before the first), and ``elapsed_s``, the seconds of the run going on
        so far (None when none is)."""
        started = self.started
        ok = sorted(r["s"] for r in self.recent if r.get("ok", True))
        return {"elapsed_s": None if started is None else round(time.monotonic() - started, 1),
                "estimate_s": round(ok[len(ok) // 2], 1) if ok else None}

    def _retry_delay(self) -> float:
        return min(self.RETRY_FIRST_S * 2 ** max(self.failures - 1, 0), self.RETRY_MAX_S)

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._requested and not self._stop:
                    if self.last_error is None:
                        self._cond.wait()
                        continue
                    self._requested = self._wait_for_retry()
                if self._stop:
                    return
                self._requested = False
                self.retry_at = None
                self.state = COMPUTING
                self.started = time.monotonic()
                self._cond.notify_all()
            self._run_once()
            with self._cond:
                self.failures = self.failures + 1 if self.last_error is not None else 0
                self.retry_at = _utc(self._retry_delay()) if self.failures else None
                self.started = None
                self.state = IDLE
                self._cond.notify_all()

    def _wait_for_retry(self) -> bool:
        """Wait (the condition held) until the next automatic try is due or the inputs changed
        (True), or a request or stop came (False: the loop sees it)."""
        end = time.monotonic() + self._retry_delay()
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return True
            if self._cond.wait(min(left, self.WATCH_S)):
                return self._requested
            if self._stop or self._requested:
                return self._requested
            if self._stamp is not None and inputs_stamp(self._watched or ()) != self._stamp:
                log.info("an input of the campaign changed: trying again now")
                return True

    def _run_once(self) -> None:
        with self.lock:
            t0 = time.perf_counter()
            try:
                self.last_result = self.advance(self.dir)
                self.last_error = self.error_at = None
            except Exception as exc:  # the server goes on: the organizer sees the error (healthz, organizer page)
                self.last_error, self.error_at = f"{type(exc).__name__}: {exc}", _utc()
                self._watched = watched_inputs(self.dir)
                self._stamp = None if self._watched is None else inputs_stamp(self._watched)
                if isinstance(exc, InputError):  # the input's to fix (one line, as on the command line)
                    log.error("advancing the campaign stopped: %s", " ".join(str(exc).splitlines()))
                else:
                    log.exception("advancing the campaign failed")
            finally:
                self.runs += 1
                self.last_seconds = round(time.perf_counter() - t0, 3)
                stages = (self.last_result or {}).get("seconds", {}) if self.last_error is None else {}
                self.recent = (self.recent + [{"s": self.last_seconds, "stages": stages,
                                               "ok": self.last_error is None}])[-20:]
                log.info("campaign advanced in %.3f s (%s)", self.last_seconds,
                         self.last_error or ", ".join(f"{k} {v} s" for k, v in stages.items()) or "nothing to do")


def watched_inputs(directory: str | os.PathLike) -> list[Path] | None:
    """The paths a paused runner watches (:func:`qrelkit.campaign.protected_paths`: the recorded
    inputs, the folder of runs, the oracle's qrels); None when the store cannot say (nothing to
    watch: the backoff alone brings the next try)."""
    try:
        return sorted(protected_paths(directory))
    except Exception:  # a store that cannot be read now
        return None


def inputs_stamp(paths) -> tuple:
    """What ``paths`` look like on disk: each one's size and modification time, None for a
    missing one. A paused runner compares it with the stamp of its failure."""
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((str(p), st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((str(p), None, None))
    return tuple(out)


def _utc(after_s: float = 0.0) -> str:
    """The UTC time now (or ``after_s`` seconds from now), ISO 8601 to the second."""
    return (datetime.now(timezone.utc) + timedelta(seconds=after_s)).isoformat(timespec="seconds")
