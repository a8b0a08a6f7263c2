"""``qrelkit warmup``: every numba kernel compiled into numba's on-disk cache ahead of the first
run (``make install`` runs it) — a thin roof over :func:`qrelkit.campaign.warmup.warm_up`."""

from __future__ import annotations

from qrelkit import jit
from qrelkit.cli import common


def _say(text: str) -> None:
    common.stderr.print(text, markup=False, highlight=False)


def command(as_json: bool = common.JsonOpt) -> None:
    """Compile every numba kernel into numba's on-disk cache once (about a minute), so that no
    later command compiles: a fresh install's first campaign run would otherwise spend half a
    minute compiling. The cache lives beside the installed package (__pycache__; NUMBA_CACHE_DIR
    when set, the user's cache folder when the package's folder is not writable) and stays valid
    until the package changes. Run again, it only loads what is cached (seconds)."""
    _say("compiling qrelkit's kernels into numba's on-disk cache (about a minute, once)")
    with jit.compile_notice(None):  # the line above says it (importing the rooms may compile already)
        from qrelkit.campaign.warmup import warm_up  # lazy: it loads numba and every room; `--help` stays fast

        summary = warm_up(progress=lambda step: _say(f"  {step}"))
    left = f"; not cached: {', '.join(summary['not_cached'])}" if summary["not_cached"] else ""
    common.emit(summary, as_json, f"{summary['cached']} of {summary['kernels']} kernels cached in "
                f"{summary['seconds']:.0f} s{left}")
