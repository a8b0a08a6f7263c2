"""Forked workers sharing the parent's state (qrelkit.reuse.forked): one mechanism for the leave-out
scoring and the budget study (issue 24), pools that nest, results in order whatever the workers."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from qrelkit.reuse.forked import ForkPool, can_fork, fork_map, shared

REUSE = Path(__file__).resolve().parents[1] / "qrelkit" / "reuse"


def test_one_fork_helper_in_reuse():
    """Only forked.py starts processes or keeps the state workers share: leaveout.py's scorer and
    budget.py's map were the same idea written twice."""
    offenders = []
    for path in sorted(REUSE.glob("*.py")):
        if path.name == "forked.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [f"state {t.id}" for t in targets if isinstance(t, ast.Name) and t.id == "_STATE"]
            offenders += [f"{path.name}:{node.lineno}: {n}" for n in names
                          if n.split(".")[0] in ("multiprocessing", "concurrent") or n.startswith("state ")]
    assert offenders == []


def _read(task):
    return shared()["base"] + task


def _nested(task):
    """Reads the outer state, opens an inner pool with its own, then reads the outer one again."""
    before = shared()["base"]
    with ForkPool(_read, {"base": 1000}, workers=1) as inner:
        inner.submit(task)
        (inner_value,) = inner.results()
    return before, inner_value, shared().get("base")


@pytest.mark.parametrize("workers", [1, 2])
def test_nested_pools_restore_the_outer_state(workers):
    """Each worker runs several tasks; each task's inner pool must give the outer state back."""
    got = fork_map(_nested, range(6), {"base": 10}, workers)
    assert got == [(10, 1000 + t, 10) for t in range(6)]
    assert shared() == {}  # nothing left published after the pool closed


@pytest.mark.parametrize("workers", [1, 3])
def test_results_in_submission_order_with_progress(workers):
    ticks = []
    with ForkPool(_read, {"base": 100}, workers) as pool:
        assert pool.forked == (workers > 1 and can_fork())
        for t in (5, 1, 4):
            pool.submit(t)
        out = pool.results(lambda n: ticks.append(n))
    assert out == [105, 101, 104] and ticks == [1, 1, 1]


def _pid(task):
    return os.getpid(), shared()["base"] + task


def test_a_single_task_forks_nothing():
    """One task runs in this process whatever the workers (fails if it forked: another pid)."""
    assert fork_map(_pid, [7], {"base": 1}, workers=4) == [(os.getpid(), 8)]
    assert fork_map(_pid, [], {"base": 1}, workers=4) == []
    if can_fork():  # and two tasks with two workers do fork: the check above can tell
        assert {pid for pid, _ in fork_map(_pid, [1, 2], {"base": 1}, workers=2)} != {os.getpid()}
