"""numba helpers shared by the compiled kernels (cal features and the CAL loop), and what
their on-disk cache holds: :func:`kernel_cache_state` (asked of the cache) and
:func:`compile_notice` (told when a kernel compiles), so that the first run after an install can
say why it is slow."""

from __future__ import annotations

import contextlib
import threading
import types
from typing import Callable, Iterator

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


# ------------------------------------------------------------------------ the on-disk cache

#: the modules whose numba kernels carry ``cache=True`` (compiled once, then loaded from disk)
KERNEL_MODULES = ("qrelkit.dedupe.tokenize", "qrelkit.dedupe.minhash", "qrelkit.dedupe.lsh", "qrelkit.dedupe._exact",
                  "qrelkit.dedupe.accuracy", "qrelkit.dedupe.distributed", "qrelkit.cal.features", "qrelkit.cal.shards",
                  "qrelkit.cal.scoring", "qrelkit.cal.loop", "qrelkit.cal.simulation", "qrelkit.io.idhash",
                  "qrelkit.pooler.adjudication_kernels")
NOTICE = "compiling kernels, once per install (about a minute)..."


def kernel_cache_state() -> dict[str, bool]:
    """Per kernel (``module.name``): whether numba's on-disk cache holds machine code for it.

    Every kernel is declared ``@numba.njit(cache=True)``: compiled at its first call, then
    loaded from numba's cache, which lives where numba's locator puts it (``NUMBA_CACHE_DIR`` when
    set, else ``__pycache__`` beside the module when writable, else the user's cache folder). This
    reads each kernel's cache index there (small files: cheap). Kernels only ever inlined into
    others are left out; a kernel that no run has called yet (the parallel twin on small data, a
    simulation kernel) is not cached, so "all cached" is not to be expected.
    """
    import importlib  # lazy: the kernel modules load numba and compile nothing until called

    state = {}
    for name in KERNEL_MODULES:
        mod = importlib.import_module(name)
        for attr, obj in sorted(vars(mod).items()):
            cache = getattr(obj, "_cache", None)
            if getattr(obj, "targetoptions", {}).get("inline") == "always" or cache is None:
                continue
            index = getattr(getattr(cache, "_cache_file", None), "_load_index", None)
            if index is None or getattr(obj, "py_func", None) is None:
                continue  # not a cached dispatcher (or a numba that stores its cache otherwise)
            state[f"{obj.py_func.__module__}.{obj.py_func.__qualname__}"] = bool(index())
    return state


@contextlib.contextmanager
def compile_notice(callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback()`` once, when a qrelkit kernel starts compiling within the block: numba
    found no machine code for it in its on-disk cache (the first run after an install or an
    upgrade, a kernel no run had needed yet). A warm cache never calls it. numba's compile event
    (``numba:compile``) fires on a cache miss only, in whichever thread compiles."""
    from numba.core import event  # lazy: numba's event API, only where kernels may compile

    lock = threading.Lock()
    told = []

    class _First(event.Listener):
        def on_start(self, ev) -> None:
            d = (ev.data or {}).get("dispatcher")
            if str(getattr(getattr(d, "py_func", None), "__module__", "")).startswith("qrelkit"):
                with lock:
                    if told:
                        return
                    told.append(True)
                callback()

        def on_end(self, ev) -> None:
            pass

    with event.install_listener("numba:compile", _First()):
        yield
