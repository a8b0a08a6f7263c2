"""Pool kinds by name: ``make_pool(kind, runs, **params)``, as ir_measures names its measures.

A pool kind is a function ``(runs, **params) -> pool table``; the built-in kinds are the pool
functions of :mod:`qrelkit.pooler.pools` (unchanged, still public):

* ``depth`` — :func:`~qrelkit.pooler.pools.depth_pool` (``depth``, ``per_run_depth``, ``classes``,
  ``qrels``, ``judged``);
* ``top1`` — :func:`~qrelkit.pooler.pools.top1_pool` (``qrels``, ``perfect_min_rel``, ``perfect``,
  ``classes``);
* ``fused`` — :func:`~qrelkit.pooler.pools.fused_pool` (``take``, ``method`` rrf | rbp, ``k``, ``p``,
  ...), and ``rrf`` / ``rbp``, the same with that ``method`` by default;
* ``fractional`` — :func:`fractional_pool`: the depth pool of the runs restricted to a fractional
  collection (``kept`` ids), already judged items dropped (``qrelkit pool fractional``).

A new kind is one function and one line: ``register_pool("mine", my_pool)``.
"""

from __future__ import annotations

import inspect
from functools import partial
from typing import Any, Callable

import pyarrow as pa

from qrelkit.errors import InputError
from qrelkit.pooler.fractional import restrict_runs
from qrelkit.pooler.pools import depth_pool, fused_pool, top1_pool

PoolKind = Callable[..., pa.Table]

_POOLS: dict[str, PoolKind] = {}


def register_pool(name: str, fn: PoolKind | None = None):
    """Make the pool function ``fn(runs, **params) -> pool`` available as ``name`` (to
    :func:`make_pool`); without ``fn``, a function decorator. Registering a name again replaces it."""

    def deco(f: PoolKind) -> PoolKind:
        _POOLS[name] = f
        return f

    return deco if fn is None else deco(fn)


def available_pools() -> list[str]:
    """The names of the registered pool kinds, sorted."""
    return sorted(_POOLS)


def pool_kind(name: str) -> PoolKind:
    """The pool function registered as ``name`` (the error ``bad-option`` when there is none)."""
    if name not in _POOLS:
        raise InputError("bad-option", f"unknown pool kind {name!r}; kinds: {', '.join(available_pools())}")
    return _POOLS[name]


def make_pool(kind: str, runs: pa.Table, **params: Any) -> pa.Table:
    """The pool of kind ``kind`` over ``runs`` (already restricted to the pooled runs) with
    ``params``: the same table as calling the kind's function directly.

    Examples
    --------
    >>> from qrelkit.pooler.registry import make_pool
    >>> from qrelkit.simulate.toy import toy_runs
    >>> make_pool("depth", toy_runs(), depth=1)["docid"].to_pylist()
    ['p1', 'p3', 'p1', 'p3', 'p1', 'p3']
    >>> make_pool("rrf", toy_runs(), take=1)["docid"].to_pylist()
    ['p1', 'p1', 'p1']
    """
    fn = pool_kind(kind)
    try:
        inspect.signature(fn).bind(runs, **params)
    except TypeError as e:
        raise InputError("bad-option", f"pool kind {kind!r}: {e}") from None
    return fn(runs, **params)


def fractional_pool(runs: pa.Table, kept: pa.Array, depth: int = 10, *, classes: pa.Table | None = None,
                    qrels: pa.Table | None = None) -> pa.Table:
    """The depth-``depth`` pool of ``runs`` restricted to the fractional collection ``kept``
    (:func:`~qrelkit.pooler.fractional.fractional_ids`), items already in ``qrels`` dropped —
    what ``qrelkit pool fractional`` writes."""
    restricted = restrict_runs(runs, kept, classes=classes)
    return depth_pool(restricted, depth, classes=classes, qrels=qrels, judged="drop")


register_pool("depth", depth_pool)
register_pool("top1", top1_pool)
register_pool("fused", fused_pool)
register_pool("rrf", partial(fused_pool, method="rrf"))
register_pool("rbp", partial(fused_pool, method="rbp"))
register_pool("fractional", fractional_pool)
