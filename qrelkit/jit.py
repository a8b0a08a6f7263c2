"""numba helpers shared by the compiled kernels (cal features and the CAL loop)."""

from __future__ import annotations

import types
from typing import Callable

import numba as nb


def twins(py_func: Callable) -> tuple[Callable, Callable]:
    """A kernel's (parallel, serial) dispatchers, each with its own on-disk cache entry.

    numba keys its cache by the function's module, qualified name, line and bytecode, not by
    ``parallel``: two dispatchers of one Python function share an entry, and whichever is compiled
    first is loaded for both (a "parallel" kernel that runs serially, or the reverse). The serial
    twin is therefore a copy of the function under the name ``<name>_serial``.
    """
    serial = types.FunctionType(py_func.__code__, py_func.__globals__, py_func.__name__ + "_serial",
                                py_func.__defaults__, py_func.__closure__)
    serial.__qualname__ = py_func.__qualname__ + "_serial"
    serial.__module__ = py_func.__module__
    serial.__doc__ = py_func.__doc__
    return nb.njit(parallel=True, cache=True)(py_func), nb.njit(cache=True)(serial)
