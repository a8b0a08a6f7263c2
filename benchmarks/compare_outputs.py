"""Compare two output folders byte for byte (e.g. two `make demo` runs, before and after a refactor).

    python benchmarks/compare_outputs.py demo-before/ demo-out/

Prints every file that exists on one side only or differs, and exits 1 if any does (0 when the
folders are byte-identical). Lock-holder sidecar files and SQLite's -wal/-shm files are ignored:
they are not outputs.
"""

from __future__ import annotations

import argparse
import filecmp
import sys
from pathlib import Path

IGNORED_SUFFIXES = (".lock-holder", "-wal", "-shm")


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and not p.name.endswith(IGNORED_SUFFIXES)}


def compare(a: Path, b: Path) -> list[str]:
    """The differences between folders ``a`` and ``b``, one line each (empty when identical)."""
    fa, fb = files(a), files(b)
    out = [f"only in {a}: {f}" for f in sorted(fa - fb)] + [f"only in {b}: {f}" for f in sorted(fb - fa)]
    out += [f"differs: {f}" for f in sorted(fa & fb) if not filecmp.cmp(a / f, b / f, shallow=False)]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    args = ap.parse_args(argv)
    diffs = compare(args.before, args.after)
    for line in diffs:
        print(line)
    n = len(files(args.before) | files(args.after))
    print(f"{n} files, {len(diffs)} differences", file=sys.stderr)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
