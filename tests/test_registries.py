"""Registries of named, parametrized objects (issue 12), as ir_measures has for measures:
stopping rules (a new rule is one small module plus one ``register_rule`` line, found by the
library and by ``qrelkit cal status/replay --rule NAME``), binarization schemes and pool kinds."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

import qrelkit.cal.stopping as stopping
import qrelkit.pooler.registry as pool_registry
from qrelkit.cal.stopping import PLUGINS_ENV, available_rules, get_rule, replay_store, status_table
from qrelkit.store import init_store
from qrelkit.cli import run
from qrelkit.config import load_config
from qrelkit.errors import InputError
from qrelkit.labels.params import LabelsParams
from qrelkit.labels.binarize import available_schemes, register_scheme, scheme_grades
from qrelkit.pooler import (
    available_pools, depth_pool, fractional_ids, fractional_pool, fused_pool, make_pool, register_pool, top1_pool,
)
from qrelkit.simulate.toy import toy_runs

ROOT = Path(__file__).resolve().parents[1]
binarize_mod = importlib.import_module("qrelkit.labels.binarize")   # the package's `binarize` is the function

# -- stopping rules: one small module plus one register line -------------------------------------

RULE_MODULE = '''
"""Stop once ``n`` passages are judged (a toy rule)."""
from qrelkit.cal.stopping import CONTINUE, STOP, Decision, StoppingRule, register_rule


class FixedCount(StoppingRule):
    DEFAULTS = {"n": 100}
    SECTION = "fixed-count"

    def __init__(self, n=100):
        self.n = int(n)

    def decide(self, state):
        action = STOP if state.judged >= self.n else CONTINUE
        return Decision(action, f"{state.judged} judged, stop at {self.n}", self.name, {"judged": state.judged})


register_rule("fixed-count", FixedCount)
'''


@pytest.fixture
def rule_plugin(tmp_path, monkeypatch, registries):
    """A rule in a tiny module outside qrelkit, named in $QRELKIT_PLUGINS (the registry restored after)."""
    mod = f"my_rules_{os.getpid()}_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{mod}.py").write_text(textwrap.dedent(RULE_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(PLUGINS_ENV, mod)
    yield mod
    sys.modules.pop(mod, None)


def _store(tmp_path):
    """Topic 1: 8 batches of 25 (200 judged); topic 2: nothing judged."""
    store = init_store(tmp_path / "c.db", {"1": "first", "2": "second"}, collection_size=500)
    rows = []
    for b in range(8):
        items = [f"d{b * 25 + i}" for i in range(25)]
        bid = store.batches.issue("1", "all", items)
        rows += [("1", d, "A1", 2 if b == 0 else 0, bid) for d in items]
    store.judgments.import_judgments(pd.DataFrame(rows, columns=["qid", "docid", "assessor", "grade", "batch_id"]))
    return store


def test_a_plugin_rule_through_the_library(rule_plugin, tmp_path):
    assert "fixed-count" in available_rules() and {"density", "knee", "budget", "target"} <= set(available_rules())
    assert get_rule("fixed-count").n == 100 and get_rule("fixed-count", n=3).n == 3
    # a plain-dict config reads the rule's SECTION, keyword parameters win
    assert get_rule("fixed-count", {"stopping": {"fixed-count": {"n": 7}}}).n == 7
    with pytest.raises(InputError, match="unknown parameter"):
        get_rule("fixed-count", m=3)
    store = _store(tmp_path)
    rep = replay_store(store, rule="fixed-count", threads=["all"], n=60)
    one = rep[rep["qid"] == "1"].iloc[0]
    assert (one["rule"], one["action"], one["stop_batches"], one["stop_judged"], one["saved"]) == ("fixed-count", "stop", 3, 75, 125)
    st = status_table(store, rule="fixed-count", threads=["all"], n=60)
    assert st["action"].tolist() == ["stop", "continue"] and st["reason"][0] == "200 judged, stop at 60"


def test_a_plugin_rule_through_the_cli(rule_plugin, tmp_path, capsys):
    db = tmp_path / "c.db"
    _store(tmp_path).close()
    assert run(["cal", "status", str(db), "--rule", "fixed-count", "--set", "n=150", "--json", "--thread", "all"]) == 0
    st = json.loads(capsys.readouterr().out)["threads"]
    assert [(t["qid"], t["rule"], t["action"]) for t in st] == [("1", "fixed-count", "stop"), ("2", "fixed-count", "continue")]
    assert run(["cal", "replay", str(db), "-r", "fixed-count", "--set", "n=60", "--json", "--thread", "all"]) == 0
    assert json.loads(capsys.readouterr().out)["threads"][0]["stop_judged"] == 75
    # a registered rule's parameters are its section of the config file, [stopping.<rule>] (issue 20),
    # checked as every key (types from its DEFAULTS); a rule nobody registered has no section
    cfg = tmp_path / "c.toml"
    cfg.write_text("[stopping.fixed-count]\nn = 60\n")
    assert get_rule("fixed-count", load_config(cfg)).n == 60
    assert run(["cal", "replay", str(db), "-r", "fixed-count", "-c", str(cfg), "--json", "--thread", "all"]) == 0
    assert json.loads(capsys.readouterr().out)["threads"][0]["stop_judged"] == 75
    cfg.write_text("[stopping.fixed-count]\nn = \"sixty\"\n")
    with pytest.raises(InputError, match=r"\[bad-type\] \[stopping.fixed-count\] n must be an integer"):
        load_config(cfg)
    cfg.write_text("[stopping.fixed-cont]\nn = 5\n")
    with pytest.raises(InputError, match=r"\[unknown-key\].*'fixed-cont'.*did you mean 'fixed-count'"):
        load_config(cfg)
    assert run(["cal", "replay", str(db), "-r", "fixed-count", "--set", "m=1", "--thread", "all"]) == 2


def test_a_plugin_rule_in_a_fresh_cli_process(rule_plugin, tmp_path):
    """A new process (the command line as a user runs it) finds the rule through $QRELKIT_PLUGINS."""
    _store(tmp_path).close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    code = "import sys; from qrelkit.cli import run; sys.exit(run(sys.argv[1:]))"
    p = subprocess.run([sys.executable, "-c", code, "cal", "replay", str(tmp_path / "c.db"), "-r", "fixed-count",
                        "--set", "n=60", "--json", "--thread", "all"], env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["threads"][0]["stop_judged"] == 75
    env[PLUGINS_ENV] = "no_such_module_here"
    p = subprocess.run([sys.executable, "-c", code, "cal", "replay", str(tmp_path / "c.db"), "-r", "fixed-count"],
                       env=env, capture_output=True, text=True)
    assert p.returncode == 2 and "[bad-plugin]" in p.stderr


def test_register_rule_as_a_call_or_a_decorator(monkeypatch, registries):

    class Never(stopping.StoppingRule):
        DEFAULTS: dict = {}

        def decide(self, state):
            return stopping.Decision(stopping.CONTINUE, "never", self.name)

    assert stopping.register_rule("never-test", Never) is Never and Never.name == "never-test"
    assert stopping.register_rule("never-again")(Never) is Never
    assert isinstance(get_rule("never-again"), Never)
    monkeypatch.delenv(PLUGINS_ENV, raising=False)
    with pytest.raises(InputError, match=r"\[bad-option\] unknown stopping rule 'nope'"):
        get_rule("nope")


# -- binarization schemes ------------------------------------------------------------------------


@pytest.fixture
def schemes(monkeypatch):
    monkeypatch.setattr(binarize_mod, "_SCHEMES", dict(binarize_mod._SCHEMES))


def test_scheme_registry(schemes, tmp_path):
    cfg = LabelsParams.from_config(load_config(None))
    assert scheme_grades("passage", cfg) == [2, 3] and scheme_grades("document", cfg) == [1, 2, 3]
    assert scheme_grades(" 3,2 ", cfg) == [2, 3] and scheme_grades(">=1", cfg) == [1, 2, 3] and scheme_grades([3, 2]) == [2, 3]
    assert {"passage", "document"} <= set(available_schemes(cfg))
    register_scheme("top-only", [3])
    register_scheme("half", lambda labels: [g for g in labels.scale if g >= 2])
    assert scheme_grades("top-only", cfg) == [3] and scheme_grades("half", cfg) == [2, 3]
    assert {"top-only", "half"} <= set(available_schemes(cfg))
    # the config is the user's word: its [labels.schemes] wins over a registered scheme, but
    # passage and document are the [labels] keys (a scheme of that name is refused: it would be ignored)
    (tmp_path / "c.toml").write_text("[labels]\npassage_relevant = [3]\n[labels.schemes]\ntop-only = [2, 3]\npassage = [1]\n")
    with pytest.raises(InputError, match=r"\[scheme-shadows-level\]"):
        load_config(tmp_path / "c.toml")
    (tmp_path / "c.toml").write_text("[labels]\npassage_relevant = [3]\n[labels.schemes]\ntop-only = [2, 3]\n")
    c2 = LabelsParams.from_config(load_config(tmp_path / "c.toml"))
    assert scheme_grades("top-only", c2) == [2, 3] and scheme_grades("passage", c2) == [3] and "top-only" in available_schemes(c2)
    with pytest.raises(InputError, match=r"\[bad-scheme\] unknown binarization scheme 'nope'"):
        scheme_grades("nope", cfg)
    with pytest.raises(InputError, match=r"\[bad-scheme\]"):
        register_scheme(" spaced ", [1])


def test_a_registered_scheme_reaches_the_commands(schemes, tmp_path, capsys):
    register_scheme("top-only", [3])
    q = tmp_path / "q.txt"
    q.write_text("1 0 p1 3\n1 0 p2 2\n1 0 p3 0\n")
    assert run(["labels", "binarize", str(q), "--scheme", "top-only", "-o", str(tmp_path / "b.txt"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["relevant_grades"] == [3]
    assert (tmp_path / "b.txt").read_text().split("\n")[:3] == ["1 0 p1 1", "1 0 p2 0", "1 0 p3 0"]
    from qrelkit.labels.relevance import relevance_level
    assert relevance_level("top-only") == 3


# -- pool kinds ------------------------------------------------------------------------------------


def _same(a: pa.Table, b: pa.Table) -> bool:
    return a.equals(b, check_metadata=True)


def test_built_in_pool_kinds_are_the_pool_functions():
    runs = toy_runs()
    assert {"depth", "top1", "fused", "rrf", "rbp", "fractional"} <= set(available_pools())
    assert _same(make_pool("depth", runs, depth=2), depth_pool(runs, 2))
    assert _same(make_pool("depth", runs, depth=1, per_run_depth={"a": 3}), depth_pool(runs, 1, per_run_depth={"a": 3}))
    assert _same(make_pool("top1", runs), top1_pool(runs))
    assert _same(make_pool("fused", runs, take=2, method="rbp", p=0.5), fused_pool(runs, 2, method="rbp", p=0.5))
    assert _same(make_pool("rrf", runs, take=2, k=10), fused_pool(runs, 2, method="rrf", k=10))
    assert _same(make_pool("rbp", runs, take=2), fused_pool(runs, 2, method="rbp"))
    kept = fractional_ids(["p1", "p2", "p3"], 0.67, 3)
    assert _same(make_pool("fractional", runs, kept=kept, depth=1), fractional_pool(runs, kept, 1))
    with pytest.raises(InputError, match=r"\[bad-option\] unknown pool kind 'deep'"):
        make_pool("deep", runs)
    with pytest.raises(InputError, match=r"\[bad-option\] pool kind 'depth'"):
        make_pool("depth", runs, dept=3)


def test_a_new_pool_kind_is_one_function_and_one_line(monkeypatch, registries):

    def one_run_pool(runs: pa.Table, depth: int = 10, *, run: str = "a") -> pa.Table:
        """The depth pool of one run."""
        return depth_pool(runs.filter(pa.compute.equal(runs["run"], run)), depth)

    register_pool("one-run", one_run_pool)
    assert "one-run" in available_pools()
    pool = make_pool("one-run", toy_runs(), depth=1, run="b")
    assert pool["docid"].to_pylist() == ["p3"] * 3 and pool["runs"][0].as_py() == [{"run": "b", "rank": 1}]
