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
from qrelkit.params import DECLARED, Params

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "qrelkit"

#: the modules that may still call ``Config.get_value``: the configuration itself, and the rooms
#: whose sections are not yet declared by their components (this list only shrinks)
GET_VALUE_ALLOWED = {
    "config.py", "cal/screening.py", "cal/stopping.py", "reuse/study.py",
    "campaign/stages.py", "campaign/runner.py", "campaign/prefs.py", "campaign/report.py", "campaign/rounds.py",
    "campaign/outputs.py", "campaign/health.py", "campaign/corrections.py", "campaign/accounts.py", "web/service.py",
    "cli/cal.py", "cli/batch.py", "cli/prefs.py", "cli/simulate.py",
}
#: rooms (packages below the configuration) that may still import ``qrelkit.config``
CONFIG_IMPORT_ALLOWED = {"cal/features.py", "cal/loop.py", "cal/screening.py", "cal/stopping.py", "reuse/study.py"}
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
    for name in DECLARATION_MODULES:
        path = PKG.parent / (name.replace(".", "/") + ".py")
        mine = {m for m in _imports(path, top=True) if m.startswith("qrelkit")}
        assert mine <= {"qrelkit.params", "qrelkit.errors"}, (name, mine)


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
        assert SCHEMA[section] == keys
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
            own = {cls.source(f)[1]: f for f in fields if cls.source(f)[0] == cls.SECTION}
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


def test_rooms_read_no_configuration():
    found = set()
    for room in ROOMS:
        for p in (PKG / room).rglob("*.py"):
            if "qrelkit.config" in _imports(p):
                found.add(_rel(p))
    assert found <= CONFIG_IMPORT_ALLOWED, sorted(found - CONFIG_IMPORT_ALLOWED)


#: rooms whose library signatures repeat no declared default (a keyword left None takes the
#: declaration's value): this set only grows
NO_REPEATED_DEFAULTS = {"pooler": ("selection", "pool", "top1", "fused", "fractional", "batch")}
#: a parameter named otherwise than its key: fused_pool's k and p, make_batches' per_item
ALIASES = {"k": "rrf_k", "p": "rbp_p", "per_item": "assessors_per_item"}


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


def test_no_library_signature_repeats_a_declared_default():
    """A keyword of a room's public function named as one of the room's keys has no default of its
    own (None, or nothing given: the declared default, one place); ``include=()`` is no value."""
    load_config(None)
    for room, sections in NO_REPEATED_DEFAULTS.items():
        keys = {k for s in sections for k in SCHEMA[s]}
        found = []
        for where, sig in _public_functions(room):
            for name, prm in sig.parameters.items():
                if ALIASES.get(name, name) in keys and prm.default not in (prm.empty, None, ()):
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
