"""Stable keys: integers derived from values, the same on every machine, platform and Python
run (no ``hash()``, no process state), for seeding random generators per topic, batch or item
independently of processing order."""

from __future__ import annotations

import hashlib

__all__ = ["stable_int"]


def stable_int(*parts: object) -> int:
    """A 64-bit integer from ``parts`` (SHA-256 of their texts joined by ``\\x1f``): the same on
    every machine and Python run.

    >>> stable_int("batch", "1-1", "A01") == stable_int("batch", "1-1", "A01")
    True
    >>> 0 <= stable_int(7) < 2**64
    True
    """
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "little")
