"""Packages import only public names of other packages (issue 12): a walk over the AST of every
module under qrelkit/ lists each import of a ``_private`` name, or from a ``_private`` module, that
crosses a package boundary (``from qrelkit.io.runs import _block_ranks`` inside qrelkit/pooler/).
Imports inside one package (qrelkit/cli/pool.py from qrelkit/cli/common.py) are its own business.

Shared kernels are defined once, public at the ground floor (``qrelkit.io.order.block_ranks``): no
two packages define a function with the same body, and no package outside io/ defines its own
(private) version of a public io/ function."""

from __future__ import annotations

import ast
import io
import tokenize
from collections import defaultdict
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "qrelkit"


def module_name(path: Path, root: Path = PKG) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str) -> str:
    """``qrelkit.pooler.pools`` -> ``qrelkit.pooler``; a top-level module is its own package."""
    return ".".join(module.split(".")[:2])


def _private(dotted: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in dotted.split("."))


def imported(path: Path, root: Path = PKG) -> list[tuple[int, str, str]]:
    """(line, module, name) for every import in ``path`` (name "" for ``import module``);
    relative imports resolved."""
    mod = module_name(path, root)
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, a.name, "") for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = mod.split(".")[: len(mod.split(".")) - node.level + (1 if is_pkg else 0)]
                base = ".".join(anchor + ([base] if base else []))
            out.extend((node.lineno, base, a.name) for a in node.names)
    return out


def qrelkit_imports(root: Path = PKG):
    """(path, package of the importer, line, module, name) of every import of qrelkit under ``root``."""
    for path in sorted(root.rglob("*.py")):
        here = package_of(module_name(path, root))
        for line, module, name in imported(path, root):
            if module.startswith("qrelkit"):
                yield path, here, line, module, name


def cross_package_private_imports(root: Path = PKG) -> list[str]:
    """``file:line: module.name`` for each private import across packages under ``root``."""
    found = []
    for path, here, line, module, name in qrelkit_imports(root):
        full = f"{module}.{name}" if name else module
        if name and name != "*" and package_of(full) == here and not _private(module):
            continue  # a submodule or name of one's own package
        if package_of(module) == here:
            continue
        if _private(full):
            rel = path.relative_to(root.parent).as_posix()
            found.append(f"{rel}:{line}: {full}")
    return found


def test_the_walker_sees_a_reach_in(tmp_path):
    """The detector itself: a cross-package private import is listed, a same-package one is not."""
    pkg = tmp_path / "qrelkit"
    (pkg / "io").mkdir(parents=True)
    (pkg / "pooler").mkdir()
    (pkg / "io" / "runs.py").write_text("def _block_ranks(): pass\n")
    (pkg / "io" / "order.py").write_text("from qrelkit.io.runs import _block_ranks\n")
    (pkg / "pooler" / "pools.py").write_text("from qrelkit.io.runs import _block_ranks, read_runs\n"
                                             "from ..io import runs\nfrom .select import _helper\n")
    (pkg / "pooler" / "stats.py").write_text("from ..io.runs import _natural_codes\nimport qrelkit._jit\n")
    assert cross_package_private_imports(pkg) == ["qrelkit/pooler/pools.py:1: qrelkit.io.runs._block_ranks",
                     "qrelkit/pooler/stats.py:1: qrelkit.io.runs._natural_codes",
                     "qrelkit/pooler/stats.py:2: qrelkit._jit"]


def test_no_package_imports_another_packages_private_names():
    found = cross_package_private_imports()
    assert not found, f"{len(found)} cross-package private imports:\n" + "\n".join(found)


def _functions(root: Path):
    """(package, qualified name, node) of every top-level function under ``root``."""
    for path in sorted(root.rglob("*.py")):
        mod = module_name(path, root)
        for node in ast.parse(path.read_text(encoding="utf-8"), filename=str(path)).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield package_of(mod), f"{mod}.{node.name}", node


def _body_key(node: ast.FunctionDef) -> str | None:
    """The function's statements without its docstring (names and parameters aside); None for
    a body of one statement (one-line wrappers: too small to call a copy)."""
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if len(body) < 2:
        return None
    return ast.dump(ast.Module(body=body, type_ignores=[]))


def kernel_copies(root: Path = PKG) -> list[str]:
    """Kernels defined more than once: functions with the same body in two packages, and a
    private function outside io/ named as an io/ function, public or not (``_block_ranks`` beside
    ``qrelkit.io.order.block_ranks``)."""
    found = []
    by_body: dict[str, list[tuple[str, str]]] = defaultdict(list)
    io_names: dict[str, str] = {}
    functions = list(_functions(root))
    for package, name, node in functions:
        key = _body_key(node)
        if key is not None:
            by_body[key].append((package, name))
        if package == "qrelkit.io":
            io_names.setdefault(node.name.lstrip("_"), name)
    for same in by_body.values():
        if len({p for p, _ in same}) > 1:
            found.append("same body: " + ", ".join(sorted(n for _, n in same)))
    for package, name, node in functions:
        public = node.name.lstrip("_")
        if package != "qrelkit.io" and node.name.startswith("_") and public in io_names:
            found.append(f"{name} shadows {io_names[public]}")
    return sorted(found)


def test_the_copy_finder_sees_a_copied_kernel(tmp_path):
    pkg = tmp_path / "qrelkit"
    (pkg / "io").mkdir(parents=True)
    (pkg / "pooler").mkdir()
    (pkg / "simulate").mkdir()
    (pkg / "io" / "order.py").write_text("def block_ranks(q):\n    n = len(q)\n    return n\n")
    (pkg / "io" / "runs.py").write_text("def _natural_codes(q):\n    return q\n")
    (pkg / "pooler" / "pools.py").write_text("def _ranks(q, k=1):\n    \"\"\"doc\"\"\"\n    n = len(q)\n    return n\n"
                                             "def _one(q):\n    return q\n")
    (pkg / "pooler" / "fractional.py").write_text("def _one(q):\n    return q\n"  # one statement: not a copy
                                                  "def _natural_codes(q):\n    return q\n")
    (pkg / "simulate" / "campaign.py").write_text("def _block_ranks(g):\n    return g\n")
    assert kernel_copies(pkg) == [
        "qrelkit.pooler.fractional._natural_codes shadows qrelkit.io.runs._natural_codes",
        "qrelkit.simulate.campaign._block_ranks shadows qrelkit.io.order.block_ranks",
        "same body: qrelkit.io.order.block_ranks, qrelkit.pooler.pools._ranks",
    ]


#: known copies still allowed (none left: cal/stopping.py now imports io.keys.stable_int)
KNOWN_COPIES: list[str] = []


def test_kernels_are_defined_once():
    """A new copy fails; a known copy that is gone fails too (then drop it from KNOWN_COPIES)."""
    assert kernel_copies() == KNOWN_COPIES


def _comments(source: str) -> dict[int, str]:
    """Line -> the comment on that line (tokenized: a ``#`` inside a string is not a comment)."""
    out: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string
    return out


def unexplained_function_imports(root: Path = PKG) -> list[str]:
    """``file:line: statement`` for each import inside a function (methods and nested functions
    too) with no comment containing "lazy" on its lines or on the line above: an import is at the
    top of its module unless it must wait (start-up time, an import cycle), and then it says why."""
    found = []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        comments = _comments(source)
        seen: set[int] = set()
        for fn in ast.walk(ast.parse(source, filename=str(path))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in seen:
                    continue
                seen.add(node.lineno)
                lines = range(node.lineno - 1, (node.end_lineno or node.lineno) + 1)
                if not any("lazy" in comments.get(i, "").lower() for i in lines):
                    rel = path.relative_to(root.parent).as_posix()
                    found.append(f"{rel}:{node.lineno}: {ast.get_source_segment(source, node)}")
    return found


def test_the_import_finder_sees_an_unexplained_import(tmp_path):
    pkg = tmp_path / "qrelkit"
    pkg.mkdir()
    (pkg / "a.py").write_text(
        "import os\n"
        "def f():\n"
        "    import json\n"                                  # no reason: listed
        "    import numba  # lazy: numba is slow to import\n"
        "    # lazy: an import cycle\n"
        "    from qrelkit import b\n"
        "    s = '# lazy'; import csv\n"                      # a string is not a comment
        "class C:\n"
        "    def m(self):\n"
        "        def inner():\n"
        "            from qrelkit import (\n"
        "                c,  # LAZY: cycle\n"
        "            )\n"
        "            import re\n"
        "        return inner\n")
    assert unexplained_function_imports(pkg) == ["qrelkit/a.py:3: import json", "qrelkit/a.py:7: import csv",
                                                 "qrelkit/a.py:14: import re"]


def test_imports_inside_functions_are_lazy_and_say_why():
    """Every import inside a function anywhere under qrelkit/ is a lazy one with its reason."""
    found = unexplained_function_imports()
    assert not found, f"{len(found)} imports inside functions without a 'lazy' comment:\n" + "\n".join(found)


#: the floors of the house (docs: io/ the floor, the stores, the rooms, campaign/, then the roofs cli/
#: and web/); a package imports only from its own level or below. ``qrelkit`` (the top-level
#: ``__init__``, whose names resolve lazily by string) and the top-level modules (errors, config,
#: jit) sit with io. store/ is below every room: it keeps what they make and knows none of them.
LEVELS = {"qrelkit.io": 0, "qrelkit.errors": 0, "qrelkit.config": 0, "qrelkit.jit": 0, "qrelkit.plots": 0,
          "qrelkit.params": 0, "qrelkit.lazy": 0, "qrelkit": 0, "qrelkit.store": 1,
          "qrelkit.pooler": 2, "qrelkit.dedupe": 2, "qrelkit.cal": 2, "qrelkit.labels": 2, "qrelkit.evaluate": 2,
          "qrelkit.prefs": 2, "qrelkit.reuse": 2, "qrelkit.simulate": 2,
          "qrelkit.campaign": 3, "qrelkit.web": 4, "qrelkit.cli": 5}
#: the one upward exception: the ``serve`` command of the command line starts the web app
ALLOWED_UP = {("qrelkit.cli", "qrelkit.web")}


def upward_imports(root: Path = PKG) -> list[str]:
    """``file:line: importer -> imported`` for each import of a higher level (web never imports
    cli; nothing below the roofs imports them; nothing below campaign imports it)."""
    found = []
    for path, here, line, module, name in qrelkit_imports(root):
        target = package_of(f"{module}.{name}" if name and module == "qrelkit" else module)
        if target not in LEVELS or here not in LEVELS or target == here:
            continue
        if LEVELS[target] > LEVELS[here] and (here, target) not in ALLOWED_UP:
            found.append(f"{path.relative_to(root.parent).as_posix()}:{line}: {here} -> {target}")
    return found


def test_every_package_has_a_level():
    pkgs = {package_of(module_name(p)) for p in PKG.rglob("*.py")}
    assert pkgs <= set(LEVELS), sorted(pkgs - set(LEVELS))
    assert "qrelkit.web" in pkgs


def test_nothing_imports_upward():
    """The roofs (cli/, web/) are imported by nobody below them; the web app never imports the
    command line; the rooms never import the campaign runner."""
    found = upward_imports()
    assert not found, "imports of a higher level:\n" + "\n".join(found)


def test_the_level_walker_sees_an_upward_import(tmp_path):
    pkg = tmp_path / "qrelkit"
    for d in ("io", "cal", "web", "cli"):
        (pkg / d).mkdir(parents=True)
    (pkg / "cal" / "store.py").write_text("from qrelkit.web.app import create_app\n")
    (pkg / "web" / "app.py").write_text("from qrelkit.cli import common\nfrom qrelkit.cal.store import open_store\n")
    (pkg / "cli" / "serve.py").write_text("from qrelkit import web\n")
    assert upward_imports(pkg) == ["qrelkit/cal/store.py:1: qrelkit.cal -> qrelkit.web",
                                   "qrelkit/web/app.py:1: qrelkit.web -> qrelkit.cli"]


#: the one package that may use SQLite (issue 20: storage split by concern, in one package)
STORAGE = "qrelkit.store"


def sqlite_imports(root: Path = PKG) -> list[str]:
    """``file:line: module`` for each import of ``sqlite3`` outside the storage package: every
    other package keeps and reads what it stores through the store's interfaces, and a store's
    SQLite errors reach it as :class:`~qrelkit.errors.InputError`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if package_of(module_name(path, root)) == STORAGE:
            continue
        for line, module, name in imported(path, root):
            if module.split(".")[0] == "sqlite3" or (module == "" and name.split(".")[0] == "sqlite3"):
                found.append(f"{path.relative_to(root.parent).as_posix()}:{line}: {module or name}")
    return found


def test_the_sqlite_finder_sees_an_import(tmp_path):
    pkg = tmp_path / "qrelkit"
    for d in ("store", "web", "io"):
        (pkg / d).mkdir(parents=True)
    (pkg / "store" / "sqlite.py").write_text("import sqlite3\n")
    (pkg / "web" / "service.py").write_text("import os\nimport sqlite3\n")
    (pkg / "io" / "textindex.py").write_text("def f():\n    from sqlite3 import connect  # lazy\n")
    assert sqlite_imports(pkg) == ["qrelkit/io/textindex.py:2: sqlite3", "qrelkit/web/service.py:2: sqlite3"]


def test_no_sqlite_outside_the_storage_package():
    """SQLite is the storage package's business: the web app, the command line, io/ and every
    room go through the store (qrelkit/store/)."""
    found = sqlite_imports()
    assert not found, "sqlite3 imported outside qrelkit/store/:\n" + "\n".join(found)


#: the pool functions of pooler/ (the registry's built-in kinds) and the orchestrators, which reach
#: pool kinds and stopping rules by name through the registries (issue 20): ``configured_pool`` /
#: ``make_pool`` with ``[pool] kind``, ``get_rule`` with ``[stopping] rule``
POOL_FUNCTIONS = {"depth_pool", "top1_pool", "fused_pool", "fractional_pool"}
ORCHESTRATORS = {"qrelkit.campaign", "qrelkit.web", "qrelkit.cli"}


def registry_bypasses(root: Path = PKG) -> list[str]:
    """``file:line: what`` for each place in the orchestrators that goes around the registries: a
    pool function called by name, a stopping rule named by a literal (``get_rule("density")``), a
    rule's own parameter read (``get_value("stopping", "accept_density_below")``: the rule reads
    its keys, an orchestrator asks it to describe itself)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if package_of(module_name(path, root)) not in ORCHESTRATORS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            args = [a.value if isinstance(a, ast.Constant) else None for a in node.args]
            if name in POOL_FUNCTIONS:
                what = f"{name}() called: name the kind (configured_pool)"
            elif name == "get_rule" and args and isinstance(args[0], str):
                what = f"get_rule({args[0]!r}): the rule is [stopping] rule's"
            elif name == "get_value" and args and isinstance(args[0], str) and args[0].partition(".")[0] == "stopping" \
                    and args[1:2] != ["rule"]:
                what = f"get_value({args[0]!r}, {args[1]!r}): a rule's own key (describe it instead)"
            else:
                continue
            found.append(f"{path.relative_to(root.parent).as_posix()}:{node.lineno}: {what}")
    return found


def test_the_bypass_finder_sees_a_bypass(tmp_path):
    pkg = tmp_path / "qrelkit"
    for d in ("campaign", "pooler"):
        (pkg / d).mkdir(parents=True)
    (pkg / "campaign" / "stages.py").write_text(
        "from qrelkit.pooler import depth_pool\n"
        "pool = depth_pool(runs, 10)\n"
        "rule = get_rule('density', cfg)\n"
        "ok = get_rule(cfg.get_value('stopping', 'rule'), cfg)\n"
        "thr = cfg.get_value('stopping', 'accept_density_below')\n"
        "k = cfg.get_value('stopping.knee', 'ratio')\n")
    (pkg / "pooler" / "registry.py").write_text("p = depth_pool(runs, 10)\n")   # the registry itself: fine
    assert registry_bypasses(pkg) == [
        "qrelkit/campaign/stages.py:2: depth_pool() called: name the kind (configured_pool)",
        "qrelkit/campaign/stages.py:3: get_rule('density'): the rule is [stopping] rule's",
        "qrelkit/campaign/stages.py:5: get_value('stopping', 'accept_density_below'): a rule's own key (describe it instead)",
        "qrelkit/campaign/stages.py:6: get_value('stopping.knee', 'ratio'): a rule's own key (describe it instead)",
    ]


def test_orchestrators_go_through_the_registries():
    """The campaign, the web app and the command line build pools and choose stopping rules by
    name, never by calling a pool function or naming the density rule."""
    found = registry_bypasses()
    assert not found, "places that go around the registries:\n" + "\n".join(found)
