"""Build the API reference (HTML) from the library's docstrings with pdoc.

Run: python scripts/build_apidocs.py [OUT_DIR]   (default docs/api/, a build output, not committed)

Every public module of the library is documented (the command line has its own reference,
docs/commands.md). Docstrings are numpydoc-flavoured reStructuredText (``Examples`` sections,
``:func:`` roles). Any warning pdoc raises (a module that fails to import, a docstring it cannot
convert, a link it cannot resolve; or any other warning raised while it imports and renders)
fails the build: exit code 1, the warnings on stderr.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import warnings
from pathlib import Path

import pdoc
import pdoc.extract
import pdoc.render

import qrelkit

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "docs" / "api"
TEMPLATES = Path(__file__).resolve().parent / "pdoc-templates"  # lists every submodule in the navigation


def modules() -> list[str]:
    """Every public module under qrelkit except the command line, in name order."""
    names = ["qrelkit"]
    for info in pkgutil.walk_packages(qrelkit.__path__, "qrelkit."):
        parts = info.name.split(".")
        if parts[1] == "cli" or any(p.startswith("_") for p in parts):
            continue
        names.append(info.name)
    return sorted(names)


def specs(names: list[str]) -> list[str]:
    """The module specifications for pdoc: a package spec already brings the submodules its
    ``__all__`` names (pdoc warns when a spec repeats a module), so those are not repeated."""
    out: list[str] = []
    seen: set[str] = set()
    for name in names:
        if name in seen:
            continue
        out.append(name)
        mod = importlib.import_module(name)
        for attr in getattr(mod, "__all__", ()):  # a package that loads its names at first use (PEP 562): load them
            getattr(mod, attr)
        info = pkgutil.ModuleInfo(None, name, ispkg=hasattr(mod, "__path__"))
        seen.update(m.name for m in pdoc.extract.walk_packages2([info]))
    return out


def build(out: Path) -> list[str]:
    """Write the HTML reference into ``out``; returns the warnings pdoc raised."""
    pdoc.render.configure(docformat="numpy", show_source=False, footer_text=f"qrelkit {qrelkit.__version__}",
                          template_directory=TEMPLATES)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pdoc.pdoc(*specs(modules()), output_directory=out)  # specs() imports every module: inside
    return [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else DEFAULT_OUT
    problems = build(out)
    for p in problems:
        sys.stderr.write(f"build_apidocs: {p}\n")
    if problems:
        return 1
    print(f"API reference written to {out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
