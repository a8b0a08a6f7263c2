"""Pool kinds by name: ``make_pool(kind, runs, **params)``, as ir_measures names its measures;
``configured_pool(kind, runs, config)`` with the kind's parameters from a configuration.

A pool kind is a function ``(runs, **params) -> pool table`` and, registered with it, how it takes
its parameters from a configuration (``params(config, **overrides) -> the function's keyword
arguments``, a given override winning: the one place that says which keys a kind reads). The
built-in kinds are the pool functions of :mod:`qrelkit.pooler.pools` (unchanged, still public):

* ``depth`` — :func:`~qrelkit.pooler.pools.depth_pool` (``depth``, ``per_run_depth``, ``classes``,
  ``qrels``, ``judged``; from ``[pool] depth`` and ``judged``);
* ``top1`` — :func:`~qrelkit.pooler.pools.top1_pool` (``qrels``, ``perfect_min_rel``, ``perfect``,
  ``classes``; from ``[top1]``);
* ``fused`` — :func:`~qrelkit.pooler.pools.fused_pool` (``take``, ``method`` rrf | rbp, ``k``, ``p``,
  ...; from ``[fused]`` and ``[pool] judged``), and ``rrf`` / ``rbp``, the same with that ``method``;
* ``fractional`` — :func:`fractional_pool`: the depth pool of the runs restricted to a fractional
  collection (``kept`` ids, or drawn from a ``corpus`` by ``[fractional] fraction`` and ``seed``),
  already judged items dropped (``qrelkit pool fractional``).

A new kind is one function and one line: ``register_pool("mine", my_pool)``; its parameters then
come from its own section ``[pool.mine]`` when it declares one (``keys=``), else from overrides
(``qrelkit pool make --kind mine --set KEY=VALUE``); ``params=`` says otherwise. Every registered
kind is a choice of ``[pool] kind``, the campaign's pool.
"""

from __future__ import annotations

import copy
import inspect
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import pyarrow as pa

from qrelkit.errors import InputError
from qrelkit.params import Key, add_choice, check, declare, is_missing, lookup
from qrelkit.pooler.fractional import fractional_ids_from_corpus, restrict_runs
from qrelkit.pooler.params import POOL, FractionalParams, FusedParams, PoolParams, Top1Params, declared
from qrelkit.pooler.pools import depth_pool, fused_pool, top1_pool

PoolKind = Callable[..., pa.Table]
#: what a kind may take besides its parameters: the near-duplicate classes, the qrels, the corpus
INPUTS = ("classes", "qrels", "corpus")


@dataclass(frozen=True)
class PoolSpec:
    """A registered pool kind: ``fn(runs, **params) -> pool``; ``params(config, **overrides)`` ->
    ``fn``'s keyword arguments (overrides that are None take the configuration's value; the
    inputs :data:`INPUTS` are overrides too); ``summary(arguments)``: what a campaign's pool
    stage records of them (default: the kind and its plain parameters)."""

    name: str
    fn: PoolKind
    params: Callable[..., dict]
    summary: Callable[[dict], dict]


_POOLS: dict[str, PoolSpec] = {}


def _plain(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters among ``arguments`` a record can hold (numbers, words, lists and tables of
    them): not the inputs (classes, qrels, corpus) nor the kept ids."""
    out = {}
    for k, v in arguments.items():
        if k in INPUTS or k == "kept":
            continue
        if isinstance(v, os.PathLike):
            v = str(v)
        if v is None or isinstance(v, (bool, int, float, str)) or \
                (isinstance(v, (list, tuple, dict)) and not any(isinstance(x, (pa.Array, pa.Table)) for x in v)):
            out[k] = v
    return out


def _declared_params(name: str, fn: PoolKind, keys: tuple[Key, ...]) -> Callable[..., dict]:
    """A plugin kind's ``params``: its section ``[pool.<name>]`` (``keys``: an override that is not
    None, checked against its key, else the configuration's value, else the declared default), the
    other overrides, and the inputs its function takes."""
    takes = inspect.signature(fn).parameters
    section = f"pool.{name}"

    def params(config, **overrides) -> dict:
        out = {}
        for k in keys:
            flag = overrides.pop(k.name, None)
            value = check(k, section, flag, file="<flag>") if flag is not None else lookup(config, section, k.name)
            out[k.name] = copy.deepcopy(k.default) if is_missing(value) else value
        out.update({k: v for k, v in overrides.items() if k not in INPUTS or k in takes})
        return out

    return params


def register_pool(name: str, fn: PoolKind | None = None, *, params: Callable[..., dict] | None = None,
                  keys: Iterable[Key] = (), summary: Callable[[dict], dict] | None = None):
    """Make the pool function ``fn(runs, **params) -> pool`` available as ``name`` (to
    :func:`make_pool`, :func:`configured_pool`, ``qrelkit pool make --kind``, ``[pool] kind``);
    without ``fn``, a function decorator. ``keys``: its own parameters, declared as the section
    ``[pool.<name>]``; ``params``: how it takes them from a configuration instead
    (:class:`PoolSpec`). Registering a name again replaces it."""
    keys = tuple(keys)

    def deco(f: PoolKind) -> PoolKind:
        if keys:
            if name in POOL:
                raise ValueError(f"cannot declare [pool.{name}]: [pool] has a key {name!r}")
            declare(f"pool.{name}", *keys, again=True)
        _POOLS[name] = PoolSpec(name, f, params or _declared_params(name, f, keys),
                                summary or (lambda a: {"kind": name, **_plain(a)}))
        add_choice("pool", "kind", name)
        return f

    return deco if fn is None else deco(fn)


def available_pools() -> list[str]:
    """The names of the registered pool kinds, sorted."""
    return sorted(_POOLS)


def pool_spec(name: str) -> PoolSpec:
    """The registered kind ``name`` (the error ``bad-option`` when there is none)."""
    if name not in _POOLS:
        raise InputError("bad-option", f"unknown pool kind {name!r}; kinds: {', '.join(available_pools())}")
    return _POOLS[name]


def pool_kind(name: str) -> PoolKind:
    """The pool function registered as ``name`` (the error ``bad-option`` when there is none)."""
    return pool_spec(name).fn


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
    _bind(f"pool kind {kind!r}", fn, runs, **params)
    return fn(runs, **params)


def _bind(what: str, fn: Callable, *args: Any, **params: Any) -> None:
    try:
        inspect.signature(fn).bind(*args, **params)
    except TypeError as e:
        raise InputError("bad-option", f"{what}: {e}") from None


@dataclass(frozen=True)
class ConfiguredPool:
    """A pool made by :func:`configured_pool`: its ``kind``, the ``table`` and the keyword
    ``arguments`` the kind's function got."""

    kind: str
    table: pa.Table
    arguments: dict

    @property
    def params(self) -> dict[str, Any]:
        """The arguments a record can hold (the numbers and words; not the tables)."""
        return _plain(self.arguments)

    @property
    def summary(self) -> dict[str, Any]:
        """What a campaign's pool stage records of the parameters (:class:`PoolSpec`)."""
        return _POOLS[self.kind].summary(self.arguments) if self.kind in _POOLS else self.params


def configured_pool(kind: str | None, runs: pa.Table, config: Any = None, **overrides: Any) -> ConfiguredPool:
    """The pool of kind ``kind`` (None: the configuration's ``[pool] kind``) over ``runs`` with
    its parameters from ``config`` (the built-in defaults without one) as the kind takes them
    (:class:`PoolSpec`), ``overrides`` (flags, and the inputs ``classes``, ``qrels``, ``corpus``)
    winning unless None: what ``qrelkit pool make`` and its aliases, and a campaign's pool stage,
    build. A parameter the kind does not take is ``[bad-option]``.

    Examples
    --------
    >>> from qrelkit.pooler.registry import configured_pool
    >>> from qrelkit.simulate.toy import toy_runs
    >>> p = configured_pool("depth", toy_runs(), depth=1)
    >>> p.kind, p.params, p.summary, p.table.num_rows
    ('depth', {'depth': 1, 'per_run_depth': None, 'judged': 'mark'}, {'depth': 1}, 6)
    """
    name = PoolParams.from_config(config, kind=kind).kind
    spec = pool_spec(name)
    overrides = {k: v for k, v in overrides.items() if v is not None or k not in INPUTS}  # an input not given
    _bind(f"pool kind {name!r}", spec.params, config, **overrides)
    arguments = spec.params(config, **overrides)
    return ConfiguredPool(name, make_pool(name, runs, **arguments), arguments)


def pool_parameters(kind: str | None = None, config: Any = None) -> dict[str, Any]:
    """The parameters kind ``kind`` (None: ``[pool] kind``) takes from ``config``, as a record holds
    them (the inputs left out): ``{"depth": 10, "per_run_depth": None, "judged": "mark"}``."""
    return _plain(pool_spec(PoolParams.from_config(config, kind=kind).kind).params(config))


def fractional_pool(runs: pa.Table, kept: pa.Array | None = None, depth: int | None = None, *,
                    classes: pa.Table | None = None, qrels: pa.Table | None = None,
                    corpus: str | os.PathLike | None = None, fraction: float | None = None,
                    seed: int | None = None) -> pa.Table:
    """The depth-``depth`` pool of ``runs`` restricted to the fractional collection ``kept``
    (:func:`~qrelkit.pooler.fractional.fractional_ids`; drawn from ``corpus`` with ``fraction`` and
    ``seed`` when not given), items already in ``qrels`` dropped — what ``qrelkit pool
    fractional`` writes. A parameter left None is the declared default (``[pool] depth``,
    ``[fractional] fraction`` and ``seed``)."""
    depth = declared(PoolParams, depth=depth)["depth"]
    if kept is None:
        if corpus is None:
            raise InputError("bad-option", "the fractional pool needs the kept passage ids or the corpus (--corpus)")
        drawn = declared(FractionalParams, fraction=fraction, seed=seed)
        kept = fractional_ids_from_corpus(Path(corpus), drawn["fraction"], drawn["seed"], classes=classes)
    restricted = restrict_runs(runs, kept, classes=classes)
    return depth_pool(restricted, depth, classes=classes, qrels=qrels, judged="drop")


# -- the built-in kinds and how each takes its parameters from a configuration ---------------------


def _depth_params(cfg, *, depth: int | None = None, per_run_depth: Mapping[str, int] | None = None,
                  judged: str | None = None, classes: pa.Table | None = None, qrels: pa.Table | None = None) -> dict:
    p = PoolParams.from_config(cfg, depth=depth, judged=judged)
    return {"depth": p.depth, "per_run_depth": per_run_depth, "classes": classes, "qrels": qrels, "judged": p.judged}


def _top1_params(cfg, *, perfect_min_rel: int | None = None, perfect: str | None = None,
                 classes: pa.Table | None = None, qrels: pa.Table | None = None) -> dict:
    p = Top1Params.from_config(cfg, perfect_min_rel=perfect_min_rel, perfect=perfect)
    return {"qrels": qrels, "perfect_min_rel": p.perfect_min_rel, "perfect": p.perfect, "classes": classes}


def _fused_params(cfg, *, take: int | None = None, method: str | None = None, rrf_k: float | None = None,
                  rbp_p: float | None = None, judged: str | None = None, classes: pa.Table | None = None,
                  qrels: pa.Table | None = None) -> dict:
    p = FusedParams.from_config(cfg, take=take, method=method, rrf_k=rrf_k, rbp_p=rbp_p)
    return {"take": p.take, "method": p.method, "k": p.rrf_k, "p": p.rbp_p, "classes": classes, "qrels": qrels,
            "judged": PoolParams.from_config(cfg, judged=judged).judged}


def _fractional_params(cfg, *, depth: int | None = None, fraction: float | None = None, seed: int | None = None,
                       kept: pa.Array | None = None, corpus: str | os.PathLike | None = None,
                       classes: pa.Table | None = None, qrels: pa.Table | None = None) -> dict:
    f = FractionalParams.from_config(cfg, fraction=fraction, seed=seed)
    return {"kept": kept, "depth": PoolParams.from_config(cfg, depth=depth).depth, "classes": classes,
            "qrels": qrels, "corpus": corpus, "fraction": f.fraction, "seed": f.seed}


register_pool("depth", depth_pool, params=_depth_params, summary=lambda a: {"depth": a["depth"]})
register_pool("top1", top1_pool, params=_top1_params)
register_pool("fused", fused_pool, params=_fused_params)
register_pool("rrf", partial(fused_pool, method="rrf"), params=partial(_fused_params, method="rrf"))
register_pool("rbp", partial(fused_pool, method="rbp"), params=partial(_fused_params, method="rbp"))
register_pool("fractional", fractional_pool, params=_fractional_params)
