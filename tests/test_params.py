"""Every component owns its parameters (issue 20): a section's keys are declared beside the
component's parameters class, the schema is assembled from the declarations, and the rooms read
no configuration themselves (``Params.from_config`` is the one way from a configuration and the
flags to the values they use)."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from qrelkit.config import DECLARATION_MODULES, SCHEMA, load_config
from qrelkit.errors import InputError
from qrelkit.params import DECLARED, Params

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "qrelkit"

#: the modules that may still call ``Config.get_value``: the configuration itself, and the rooms
#: whose sections are not yet declared by their components (this list only shrinks)
GET_VALUE_ALLOWED = {"config.py"}
#: rooms (packages below the configuration) that may import ``qrelkit.config``: the stopping rules'
#: registry, which declares the rules' sections and choices there as they register
CONFIG_IMPORT_ALLOWED = {"cal/stopping.py"}
ROOMS = ("io", "pooler", "dedupe", "cal", "labels", "evaluate", "prefs", "reuse", "simulate")


def _rel(p: Path) -> str:
    return p.relative_to(PKG).as_posix()


def _imports(path: Path, *, top: bool = False) -> set[str]:
    """The modules ``path`` imports (only at its top level with ``top``: not a function's lazy import)."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in (tree.body if top else ast.walk(tree)):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_declaration_modules_import_only_the_floor_of_parameters():
    """... or another room's declarations (the CAL room's classes take ``[labels] passage_relevant``)."""
    for name in DECLARATION_MODULES:
        path = PKG.parent / (name.replace(".", "/") + ".py")
        mine = {m for m in _imports(path, top=True) if m.startswith("qrelkit")}
        assert mine <= {"qrelkit.params", "qrelkit.errors", *DECLARATION_MODULES} - {name}, (name, mine)


def test_loading_the_schema_loads_no_room_machinery():
    """The components' declarations load nothing heavy (no pandas); a protocol is checkable
    without numba, ir_measures or scikit-learn (loading one imports the registries of stopping
    rules and pool kinds, which use pandas)."""
    code = ("import sys; from qrelkit.config import SCHEMA, load_config; len(SCHEMA); "
            "print(sorted(m for m in ('numba', 'ir_measures', 'pandas', 'sklearn') if m in sys.modules)); "
            "load_config(None); "
            "print(sorted(m for m in ('numba', 'ir_measures', 'sklearn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["[]", "[]"]


def test_every_declared_section_is_in_the_schema_and_owned_once():
    for section, keys in DECLARED.items():
        assert all(SCHEMA[section].get(k) == v for k, v in keys.items()), section  # a registry may add its own
    owners: dict[str, str] = {}
    for name in DECLARATION_MODULES:
        mod = __import__(name, fromlist=["KEYS"])
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, Params) and obj is not Params and obj.SECTION:
                assert owners.setdefault(obj.SECTION, name) == name, obj.SECTION


def test_a_params_class_has_a_field_for_every_key_with_the_declared_default():
    for name in DECLARATION_MODULES:
        mod = __import__(name, fromlist=["KEYS"])
        classes = [o for o in vars(mod).values() if isinstance(o, type) and issubclass(o, Params) and o is not Params]
        for cls in classes:
            fields = {f.name: f for f in dataclasses.fields(cls)}
            own = {cls.key_of(f)[1]: f for f in fields if cls.key_of(f)[0] == cls.SECTION}
            assert set(cls.KEYS) <= set(own), (cls.__name__, set(cls.KEYS) - set(own))
            inst = cls()
            for key, spec in cls.KEYS.items():
                assert getattr(inst, own[key]) == spec.default, (cls.__name__, key)


def test_from_config_takes_the_file_then_the_flag_and_checks_the_flag(tmp_path):
    from qrelkit.errors import InputError
    from qrelkit.reuse.params import ReuseParams

    (tmp_path / "p.toml").write_text("[reuse]\norphan_depth = 50\nprocedure = \"run\"\n")
    cfg = load_config(tmp_path / "p.toml")
    p = ReuseParams.from_config(cfg, procedure="type")
    assert (p.orphan_depth, p.procedure, p.removal) == (50, "type", "remove")
    with pytest.raises(InputError, match=r"<flag>: \[bad-choice\] \[reuse\] procedure"):
        ReuseParams.from_config(cfg, procedure="nope")
    with pytest.raises(InputError, match=r"\[out-of-range\] \[reuse\] orphan_depth"):
        ReuseParams(orphan_depth=0)


def test_get_value_only_in_the_configuration_and_not_yet_converted_modules():
    found = {_rel(p) for p in PKG.rglob("*.py") if ".get_value(" in p.read_text()}
    assert found <= GET_VALUE_ALLOWED, sorted(found - GET_VALUE_ALLOWED)
    assert found == GET_VALUE_ALLOWED, f"stale: {sorted(GET_VALUE_ALLOWED - found)}"


def test_rooms_read_no_configuration():
    found = set()
    for room in ROOMS:
        for p in (PKG / room).rglob("*.py"):
            if "qrelkit.config" in _imports(p):
                found.add(_rel(p))
    assert found == CONFIG_IMPORT_ALLOWED, sorted(found ^ CONFIG_IMPORT_ALLOWED)


# -- no library signature repeats a default ---------------------------------------------------------

#: functions (``file: function(parameter)``) whose keyword default still repeats a declared default
#: (this list only shrinks; a stale entry fails too)
SIGNATURE_DEFAULTS_ALLOWED: set[str] = set()


#: the other rooms' sections whose keys a room's functions take (the study of reusability pools
#: and scores runs), and parameters named otherwise than their key
CROSS = {"reuse": {"eval", "pool"}, "evaluate": {"pool"}, "prefs": {"top1"}, "cal": {"fractional", "campaign"},
         "store": {"campaign"}}
ALIASES = {"voorhees_share": "voorhees_relevant_share", "per_item": "assessors_per_item",
           "fraction_seed": "seed", "perfect_mode": "perfect"}


def _owned_sections() -> dict[str, set[str]]:
    """room -> the sections whose keys its functions take: those of its parameters classes (their
    own and the other sections they read, ``SOURCES``), and every ``[stopping...]`` for cal."""
    import importlib

    owners: dict[str, set[str]] = {"cal": {s for s in SCHEMA if s.partition(".")[0] == "stopping"}}
    for name in DECLARATION_MODULES:
        mod = importlib.import_module(name)
        room = name.split(".")[1]
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, Params) and obj is not Params and obj.SECTION:
                owners.setdefault(room, set()).add(obj.SECTION)
                owners[room].update(sec for sec, _ in obj.SOURCES.values())
    for room, sections in CROSS.items():
        owners.setdefault(room, set()).update(sec for sec in sections if sec in SCHEMA)
    return owners


def _same(value, default) -> bool:
    if isinstance(value, tuple) and isinstance(default, list):
        value = list(value)
    return type(value) is type(default) and value == default


def _literal(node, constants: dict):
    """The value of a literal default, or of a module constant it names (``DEFAULT_X = 0.4``)."""
    if isinstance(node, ast.Name):
        return constants.get(node.id, _NOT_LITERAL)
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        return _NOT_LITERAL


def _constants(tree: ast.Module) -> dict:
    out = {}
    for st in tree.body:
        targets = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AnnAssign) else []
        if len(targets) == 1 and isinstance(targets[0], ast.Name) and st.value is not None:
            v = _literal(st.value, {})
            if v is not _NOT_LITERAL:
                out[targets[0].id] = v
    return out


_NOT_LITERAL = object()


def _defaults_of(node: ast.AST):
    """(name, default node) of a function's parameters with a default, or of a class's fields."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = node.args
        pos = a.posonlyargs + a.args
        yield from zip((x.arg for x in pos[len(pos) - len(a.defaults):]), a.defaults)
        yield from ((x.arg, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None)
    elif isinstance(node, ast.ClassDef):
        for st in node.body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is not None:
                yield st.target.id, st.value


def signature_repeats(root: Path = PKG, owners: dict[str, set[str]] | None = None) -> set[str]:
    """``file: function(parameter)`` for each parameter (or dataclass field) of a room's code whose
    default is a literal equal to the declared default of a key of the same name in a section the
    room owns: the default written twice (the declaration modules themselves excepted)."""
    owners = _owned_sections() if owners is None else owners
    found = set()
    for room, sections in owners.items():
        keys: dict[str, list] = {}
        for sec in sections:
            for k in SCHEMA.get(sec, {}).values():
                keys.setdefault(k.name, []).append(k.default)
        for alias, key in ALIASES.items():
            keys.setdefault(alias, []).extend(keys.get(key, []))
        for path in sorted((root / room).rglob("*.py")):
            if path.name == "params.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            constants = _constants(tree)
            for node in ast.walk(tree):
                for name, d in _defaults_of(node):
                    v = _literal(d, constants) if name in keys else None
                    if v not in (None, (), []) and v is not _NOT_LITERAL and any(_same(v, kd) for kd in keys[name]):
                        found.add(f"{path.relative_to(root).as_posix()}: {node.name}({name})")
    return found


def test_the_repeat_finder_sees_a_repeated_default(tmp_path):
    (tmp_path / "reuse").mkdir()
    (tmp_path / "reuse" / "study.py").write_text(
        "def a(x, orphan_depth=100, *, removal='remove', procedure='run'):\n    pass\n"
        "class B:\n    uniqueness: str = 'pooled'\n    other: int = 100\n"
        "def c(orphan_depth=AS_DECLARED, removal=True, uniqueness=None):\n    pass\n"
        "PROCEDURE = 'group'\ndef d(procedure=PROCEDURE):\n    pass\n")
    assert signature_repeats(tmp_path, {"reuse": {"reuse"}}) == {
        "reuse/study.py: a(orphan_depth)", "reuse/study.py: a(removal)", "reuse/study.py: B(uniqueness)",
        "reuse/study.py: d(procedure)"}


def test_no_library_signature_repeats_a_declared_default():
    """A library function takes a key's default from its declaration (:func:`qrelkit.params.declared_defaults`,
    a :class:`~qrelkit.params.Params` field), never as a second literal."""
    found = signature_repeats()
    assert found <= SIGNATURE_DEFAULTS_ALLOWED, sorted(found - SIGNATURE_DEFAULTS_ALLOWED)
    assert not SIGNATURE_DEFAULTS_ALLOWED - found, f"stale: {sorted(SIGNATURE_DEFAULTS_ALLOWED - found)}"


#: rooms whose library signatures repeat no declared default (a keyword left None takes the
#: declaration's value): this set only grows
NO_REPEATED_DEFAULTS = {"pooler": ("selection", "pool", "top1", "fused", "fractional", "batch")}
#: a parameter named otherwise than its key: fused_pool's k and p, make_batches' per_item
POOLER_ALIASES = {"k": "rrf_k", "p": "rbp_p", "per_item": "assessors_per_item"}


def _public_functions(room: str):
    import importlib
    import inspect

    for p in sorted((PKG / room).glob("*.py")):
        if p.name in ("__init__.py", "params.py"):
            continue
        mod = importlib.import_module(f"qrelkit.{room}.{p.stem}")
        for name, fn in vars(mod).items():
            if inspect.isfunction(fn) and not name.startswith("_") and fn.__module__ == mod.__name__:
                yield f"{p.stem}.{name}", inspect.signature(fn)


def test_the_pooler_leaves_its_defaults_to_the_declarations():
    """A keyword of a room's public function named as one of the room's keys has no default of its
    own (None, or nothing given: the declared default, one place); ``include=()`` is no value."""
    load_config(None)
    for room, sections in NO_REPEATED_DEFAULTS.items():
        keys = {k for s in sections for k in SCHEMA[s]}
        found = []
        for where, sig in _public_functions(room):
            for name, prm in sig.parameters.items():
                if POOLER_ALIASES.get(name, name) in keys and prm.default not in (prm.empty, None, ()):
                    found.append(f"{where}({name}={prm.default!r})")
        assert not found, found


def test_a_default_left_none_is_the_declared_one(monkeypatch):
    """The pooler's functions read their defaults from the declarations: change a declared default
    and the function's default follows."""
    import pyarrow as pa

    from qrelkit.pooler import make_batches, select_pool_runs
    from qrelkit.pooler import params as pp
    from qrelkit.pooler.pools import depth_pool
    from qrelkit.simulate.toy import toy_runs

    runs = toy_runs()
    assert depth_pool(runs).equals(depth_pool(runs, 10, judged="mark"))
    monkeypatch.setitem(pp.POOL, "depth", dataclasses.replace(pp.POOL["depth"], default=1))
    assert depth_pool(runs).equals(depth_pool(runs, 1))
    pool = pa.table({"qid": ["1"] * 4, "docid": ["a", "b", "c", "d"], "position": [1, 2, 3, 4]})
    monkeypatch.setitem(pp.BATCH, "first_n", dataclasses.replace(pp.BATCH["first_n"], default=2))
    assert make_batches(pool)["batch_id"].tolist().count("1-1") == 2
    import pandas as pd

    man = pd.DataFrame({"run": ["a", "b"], "group": ["g", "g"], "subtask": "p", "priority": [1, 2],
                        "baseline": [False, False]})
    monkeypatch.setitem(pp.SELECTION, "per_group", dataclasses.replace(pp.SELECTION["per_group"], default=1))
    assert select_pool_runs(man)["pooled"].tolist() == [True, False]


def test_each_value_is_checked_once(tmp_path, monkeypatch):
    """``[cal] batch_size``: the file's value when the file is loaded, a flag's by ``from_config``,
    never again as the parameters are made (issue 20: it was checked three times)."""
    import qrelkit.config as config
    import qrelkit.params as params
    from qrelkit.cal.params import CalParams

    seen = []
    real = params.check

    def counting(spec, section, value, *a, **kw):
        if (section, spec.name) == ("cal", "batch_size"):
            seen.append(value)
        return real(spec, section, value, *a, **kw)

    monkeypatch.setattr(params, "check", counting)
    monkeypatch.setattr(config, "check", counting)
    (tmp_path / "p.toml").write_text("[cal]\nbatch_size = 40\n")
    cfg = load_config(tmp_path / "p.toml")
    assert seen == [40]
    assert CalParams.from_config(cfg).batch_size == 40 and seen == [40]
    assert CalParams.from_config(cfg, batch_size=30).batch_size == 30 and seen == [40, 30]
    # a plain mapping is no checked configuration: its values are checked as the instance is made
    with pytest.raises(InputError, match=r"\[out-of-range\] \[cal\] batch_size"):
        CalParams.from_config({"cal": {"batch_size": 0}})
    # the rows a campaign recorded are checked once when read back, by today's declarations
    rows = [{"section": "cal", "key": "batch_size", "value": 0, "origin": "file", "where": "p.toml:2"}]
    with pytest.raises(InputError, match=r"\[out-of-range\] \[cal\] batch_size"):
        config.config_from_rows(rows, "p.toml")
