"""Packages that load their names at first use (PEP 562).

A room's package (``qrelkit.evaluate``, ``qrelkit.labels``, ...) names what its modules provide
(``from qrelkit.evaluate import evaluate``) without importing them when the package is imported:
its parameters' declarations (``qrelkit/<room>/params.py``, read to assemble the configuration's
schema) and ``qrelkit --help`` then load no ir_measures, no numba, no pandas.

>>> import qrelkit.evaluate, sys
>>> "qrelkit.evaluate.core" in sys.modules or callable(qrelkit.evaluate.evaluate)
True
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Callable, Iterable, Mapping


class _Package(types.ModuleType):
    """A lazy package: a submodule of the same name as a name the package provides (the module
    ``tournament`` of the function ``tournament``) is never made the package's attribute when it
    is imported (which the import system does): the function is, as an eager ``__init__`` has it."""

    def __setattr__(self, name: str, value: object) -> None:
        if isinstance(value, types.ModuleType) and name in self.__dict__.get("_same_names", ()):
            value = getattr(value, name)
        super().__setattr__(name, value)


def attach(package: str, provides: Mapping[str, Iterable[str]]) -> Callable[[str], object]:
    """The module ``__getattr__`` of ``package``: ``provides`` maps each of its submodules to the
    names it provides; a name is imported from its submodule at its first use, then kept in the
    package (a second use costs nothing); a submodule named as a name it provides never hides
    that name (:class:`_Package`)."""
    where = {name: sub for sub, names in provides.items() for name in names}
    mod = sys.modules[package]
    mod.__class__ = _Package
    mod._same_names = frozenset(n for n in where if n in provides)

    def __getattr__(name: str) -> object:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
