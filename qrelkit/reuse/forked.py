"""Tasks in forked processes that share the parent's state: the one mechanism behind the
leave-out scoring (:func:`qrelkit.reuse.leave_out`) and the budget study's replays and scorings.

A :class:`ForkPool` publishes a ``state`` dict (large tables, settings) before its workers fork;
a task function reads it with :func:`shared` instead of receiving it, so nothing big is pickled:
the workers see the parent's memory (copy-on-write) as it was when they forked. Only the tasks
(small: codes, row indices) and the results travel. With one worker, or where the platform cannot
fork, the tasks run in this process, when their results are collected, with the same state and
the same results.

Pools nest (a task may open a pool of its own, e.g. the budget study's leave-out task with one
worker): a pool restores the state that was published before it when it closes.
"""

from __future__ import annotations

import multiprocessing as mp
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Iterable

__all__ = ["ForkPool", "can_fork", "fork_map", "shared"]

_STATE: dict[str, Any] = {}


def shared() -> dict[str, Any]:
    """The state of the innermost open pool (in a worker: the one it forked with)."""
    return _STATE


def can_fork() -> bool:
    """Whether this platform starts processes by fork (Linux, and macOS on request)."""
    return "fork" in mp.get_all_start_methods()


class ForkPool:
    """``fn(task)`` for every task submitted, in ``workers`` forked processes sharing ``state``,
    or in this process with one worker. The parent keeps working between :meth:`submit` and
    :meth:`results` (the workers fork at the first submission, sharing the state as it is then).

    >>> with ForkPool(lambda t: shared()["base"] + t, {"base": 10}, workers=1) as pool:
    ...     pool.submit(1); pool.submit(2)
    ...     pool.results()
    [11, 12]
    """

    def __init__(self, fn: Callable[[Any], Any], state: dict[str, Any], workers: int):
        global _STATE
        self.fn = fn
        self._previous = _STATE
        _STATE = state
        self.items: list = []
        self.ex = None
        if workers > 1 and can_fork():
            self.ex = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("fork"))

    @property
    def forked(self) -> bool:
        return self.ex is not None

    def submit(self, task: Any) -> None:
        self.items.append(self.ex.submit(self.fn, task) if self.ex is not None else task)

    def results(self, progress: Callable[..., None] | None = None) -> list:
        """The results in submission order; ``progress(1)`` after each."""
        out = []
        for item in self.items:
            out.append(item.result() if self.ex is not None else self.fn(item))
            if progress is not None:
                progress(1)
        self.items = []
        return out

    def close(self) -> None:
        """Stop the workers (cancelling what has not started) and restore the previous state."""
        global _STATE
        if self.ex is not None:
            self.ex.shutdown(wait=True, cancel_futures=True)
            self.ex = None
        _STATE = self._previous

    def __enter__(self) -> ForkPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def fork_map(fn: Callable[[Any], Any], tasks: Iterable, state: dict[str, Any], workers: int,
             progress: Callable[..., None] | None = None) -> list:
    """``fn(task)`` for every task, results in task order (:class:`ForkPool`; no more workers
    than tasks, none forked for a single task)."""
    tasks = list(tasks)
    with ForkPool(fn, state, min(workers, len(tasks))) as pool:
        for task in tasks:
            pool.submit(task)
        return pool.results(progress)
