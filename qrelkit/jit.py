"""numba helpers shared by the compiled kernels (cal features and the CAL loop), and what
their on-disk cache holds: :func:`kernel_cache_state` (asked of the cache), :func:`compile_notice`
(told when a kernel compiles) and :func:`compile_twins` (``qrelkit warmup``), so that the first run
after an install is fast, or says why it is not.

Importing this module loads no numba (the command line imports it for every command): each
function that needs numba imports it.

Where the machine code is kept. Every kernel is ``@numba.njit(cache=True)``; numba keeps it where its
locator puts it: ``NUMBA_CACHE_DIR`` when set, else ``__pycache__`` beside the kernel's module (in
the installed package: it lives and goes with the install, and a change of the module's source
makes numba compile that module's kernels again), else, when that folder is not writable (a
system-wide install used by another user), the user's cache folder (``~/.cache/numba``). ``qrelkit
warmup`` (run by ``make install``) fills it.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import types
from typing import Any, Callable, Iterable, Iterator


def twins(py_func: Callable) -> tuple[Callable, Callable]:
    """A kernel's (parallel, serial) dispatchers, each with its own on-disk cache entry.

    numba keys its cache by the function's module, qualified name, line and bytecode, not by
    ``parallel``: two dispatchers of one Python function share an entry, and whichever is compiled
    first is loaded for both (a "parallel" kernel that runs serially, or the reverse). The serial
    twin is therefore a copy of the function under the name ``<name>_serial``. The pair is
    remembered for :func:`compile_twins`.
    """
    import numba as nb  # lazy: the kernel modules that call this load numba anyway; this module does not

    serial = types.FunctionType(py_func.__code__, py_func.__globals__, py_func.__name__ + "_serial",
                                py_func.__defaults__, py_func.__closure__)
    serial.__qualname__ = py_func.__qualname__ + "_serial"
    serial.__module__ = py_func.__module__
    serial.__doc__ = py_func.__doc__
    pair = nb.njit(parallel=True, cache=True)(py_func), nb.njit(cache=True)(serial)
    _TWINS.append(pair)
    return pair


#: every (parallel, serial) pair made by :func:`twins`, in the order their modules were imported
_TWINS: list[tuple[Any, Any]] = []


def compile_twins(pairs: Iterable[tuple[Any, Any]] | None = None) -> int:
    """Compile each twin (:func:`twins`; ``pairs``: these only) with every signature its other
    twin has: which twin runs depends on the size of the input (the parallel one from a
    threshold on), so a small run compiles one of each pair and a large one the other. Returns
    how many were compiled (each loaded from the on-disk cache when it holds it)."""
    done = 0
    for a, b in (_TWINS if pairs is None else pairs):
        for one, other in ((a, b), (b, a)):
            for sig in [s for s in one.signatures if s not in other.signatures]:
                other.compile(sig)
                done += 1
    return done


# ------------------------------------------------------------------------ the on-disk cache

#: the modules whose numba kernels carry ``cache=True`` (compiled once, then loaded from disk)
KERNEL_MODULES = ("qrelkit.dedupe.tokenize", "qrelkit.dedupe.minhash", "qrelkit.dedupe.lsh", "qrelkit.dedupe._exact",
                  "qrelkit.dedupe.accuracy", "qrelkit.dedupe.distributed", "qrelkit.cal.features", "qrelkit.cal.shards",
                  "qrelkit.cal.scoring", "qrelkit.cal.loop", "qrelkit.cal.simulation", "qrelkit.io.idhash",
                  "qrelkit.pooler.adjudication_kernels")
NOTICE = "compiling kernels, once per install (about a minute; 'qrelkit warmup' does it ahead)..."


def kernel_cache_state() -> dict[str, bool]:
    """Per kernel (``module.name``): whether numba's on-disk cache holds machine code for it.

    Every kernel is declared ``@numba.njit(cache=True)``: compiled at its first call, then
    loaded from numba's cache (where: see the module's documentation). This reads each kernel's
    cache index there (small files: cheap). Kernels only ever inlined into others are left out;
    a kernel that no run has called yet (the parallel twin on small data, a simulation kernel) is
    not cached until ``qrelkit warmup`` compiles it.
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


# ------------------------------------------------------------------------ saying that kernels compile

_lock = threading.Lock()
#: the callbacks of the :func:`compile_notice` blocks open now, innermost last (None: keep quiet)
_blocks: list[Callable[[], None] | None] = []
_told = False  # within the outermost open block
_listening = False


@contextlib.contextmanager
def compile_notice(callback: Callable[[], None] | None) -> Iterator[None]:
    """Call ``callback()`` once, when a qrelkit kernel starts compiling within the block: numba
    found no machine code for it in its on-disk cache (the first run after an install or an
    upgrade, a kernel no run had needed yet). A warm cache never calls it. Blocks nest: the
    innermost one's callback is told (None keeps it quiet), at most once in the outermost block;
    the compiling may happen in any thread.

    numba is not imported for this: when it is already loaded the listener is installed now, else
    numba installs it as it gets ready to compile (:func:`numba_extension_init`, qrelkit's
    ``numba_extensions`` entry point): a command that never runs a kernel pays nothing.
    """
    global _told
    with _lock:
        if not _blocks:
            _told = False
        _blocks.append(callback)
    if "numba" in sys.modules:
        numba_extension_init()
    try:
        yield
    finally:
        with _lock:
            _blocks.pop()


def _compiling(dispatcher: Any) -> None:
    global _told
    if not str(getattr(getattr(dispatcher, "py_func", None), "__module__", "")).startswith("qrelkit"):
        return
    with _lock:
        if _told or not _blocks or _blocks[-1] is None:
            return
        _told = True
        callback = _blocks[-1]
    callback()


def numba_extension_init() -> None:
    """Listen to numba's compile event (``numba:compile``, fired on a cache miss only) for
    :func:`compile_notice`, once per process. numba calls it before its first compile through
    qrelkit's entry point (``[project.entry-points.numba_extensions] init`` in pyproject.toml)."""
    global _listening
    with _lock:
        if _listening:
            return
        _listening = True
    from numba.core import event  # lazy: numba is loaded (it is the caller, or compile_notice saw it)

    class _Compiling(event.Listener):
        def on_start(self, ev) -> None:
            _compiling((ev.data or {}).get("dispatcher"))

        def on_end(self, ev) -> None:
            pass

    event.register("numba:compile", _Compiling())
