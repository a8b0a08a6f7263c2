"""Rules across configuration keys (issue 19): every contradiction between keys is refused when
the configuration is loaded — ``qrelkit config show -c FILE``, ``campaign init`` and every command
with ``--config`` — in one line naming the rule, both keys and where each was set, exit 2, nothing
created. One row per rule (qrelkit.config.CROSS_RULES)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qrelkit.cli import run as cli
from qrelkit.config import CROSS_RULES, load_config
from qrelkit.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
ONE_LINE = re.compile(r"^qrelkit: error: \S+(:\d+)?: \[[a-z-]+\] .+\n$")

#: rule -> (TOML with the contradiction, the two keys the message must name (section, key), the
#: line of the first key located in the file)
CASES: dict[str, tuple[str, tuple[str, str], int]] = {
    "assessors-empty": ('[campaign]\nassessors = []\n', ("[campaign] assessors", "[batch] assessors_per_item"), 2),
    "assessor-names-collide": ('[campaign]\nassessors = ["a b", "a_b"]\n',
                               ("[campaign] assessors", "batches/a_b"), 2),
    "assessors-too-few": ('[batch]\nassessors_per_item = 3\n[campaign]\nassessors = ["ann", "bob"]\n',
                          ("[batch] assessors_per_item", "[campaign] assessors"), 2),
    "skip-required-stage": ('[campaign]\nskip = ["validate"]\n', ("[campaign] skip", "validate"), 2),
    "vote-vs-passage-relevant": ('[campaign]\ncombine = "vote"\n[labels]\nvote_threshold = 3\n',
                                 ("[campaign] combine", "[labels] passage_relevant"), 2),
    "grade-outside-scale": ('[labels]\nscale = [0, 1]\npassage_relevant = [1]\ndocument_relevant = [1]\n'
                            'vote_threshold = 1\ngrade_map = { 2 = 1 }\n',
                            ("[labels] grade_map", "[labels] scale"), 6),
    "vote-threshold-outside-scale": ('[labels]\nscale = [0, 1]\npassage_relevant = [1]\ndocument_relevant = [1]\n',
                                     ("[labels] vote_threshold", "[labels] scale"), 2),
    "scheme-shadows-level": ('[labels.schemes]\npassage = [3]\n', ("[labels.schemes] passage", "[labels] passage_relevant"),
                             1),
    "perfect-min-rel-outside-scale": ('[top1]\nperfect_min_rel = 4\n', ("[top1] perfect_min_rel", "[labels] scale"), 2),
    "relevant-level-outside-scale": ('[eval]\nrelevant = 5\n', ("[eval] relevant", "[labels] scale"), 2),
    "official-thread-not-run": ('[cal]\nthreads = ["local"]\n', ("[cal] official_thread", "[cal] threads"), 2),
    "include-and-exclude": ('[selection]\ninclude = ["r1"]\nexclude = ["r1"]\n',
                            ("[selection] include", "[selection] exclude"), 2),
    "nothing-pooled": ('[selection]\ninclude_baselines = false\nper_group = 0\n',
                       ("[selection] per_group", "[selection] include_baselines"), 2),
    "pool-deeper-than-runs": ('[runs]\nmax_depth = 100\n[pool]\ndepth = 200\n', ("[pool] depth", "[runs] max_depth"), 4),
    "expected-deeper-than-max": ('[runs]\nmax_depth = 100\nexpected_depth = 200\n',
                                 ("[runs] expected_depth", "[runs] max_depth"), 3),
    "lsh-bands-exceed-permutations": ('[dedupe]\nbands = 40\n', ("[dedupe] bands", "[dedupe] num_perm"), 2),
    "budget-without-strategy": ('[adjudicate]\nbudget = 300\n', ("[adjudicate] budget", "[adjudicate] strategy"), 2),
    "strategy-without-pool-rest": ('[adjudicate]\nstrategy = "mm-ns"\n[campaign]\nskip = ["pool-rest"]\n',
                                   ("[adjudicate] strategy", "[campaign] skip"), 2),
    "never-accepted": ('[stopping]\naccept_density_below = 0.0\n',
                       ("[stopping] accept_density_below", "[cal] budget"), 2),
}


def test_every_registered_rule_has_a_row():
    assert set(CASES) == {name for rules in CROSS_RULES.values() for name in rules}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_config_show_refuses_the_contradiction(rule, tmp_path, capsys):
    text, keys, line = CASES[rule]
    f = tmp_path / "p.toml"
    f.write_text(text)
    assert cli(["config", "show", "-c", str(f)]) == 2
    err = capsys.readouterr().err
    assert ONE_LINE.match(err), err
    assert f"{f}:{line}: [{rule}]" in err
    for k in keys:
        assert k in err, (k, err)
    assert "Traceback" not in err


@pytest.mark.parametrize("rule", sorted(CASES))
def test_campaign_init_refuses_the_contradiction_and_creates_nothing(rule, tmp_path, capsys):
    text, keys, _ = CASES[rule]
    f = tmp_path / "p.toml"
    f.write_text(text)
    i = tmp_path / "in"
    (i / "runs").mkdir(parents=True)
    for name in ("c.jsonl", "t.tsv", "m.csv"):   # placeholders: the configuration is checked before them
        (i / name).write_text("")
    d = tmp_path / "camp"
    assert cli(["campaign", "init", str(d), "-c", str(f), "--corpus", str(i / "c.jsonl"), "-t", str(i / "t.tsv"),
                "--runs", str(i / "runs"), "-m", str(i / "m.csv")]) == 2
    err = capsys.readouterr().err
    assert ONE_LINE.match(err) and f"[{rule}]" in err and all(k in err for k in keys), err
    assert not d.exists() or not any(d.iterdir())


def test_where_each_key_was_set_file_line_default_and_flag(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text("# assessors\n\n[campaign]\nassessors = [\"ann\", \"bob\"]\n")
    with pytest.raises(InputError) as e:
        load_config(f, ["batch.assessors_per_item=3"])
    assert e.value.rule == "assessors-too-few"
    assert f"[batch] assessors_per_item = 3 (--set)" in e.value.message
    assert f'[campaign] assessors = ["ann", "bob"] ({f}:4)' in e.value.message
    assert (e.value.file, e.value.line) == (str(f), 4)
    with pytest.raises(InputError) as e:
        load_config(None, ["batch.assessors_per_item=5"])
    assert "(default)" in e.value.message and e.value.file == "--set"


def test_flags_can_resolve_a_contradiction_of_the_file(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('[batch]\nassessors_per_item = 3\n[campaign]\nassessors = ["ann", "bob"]\n')
    cfg = load_config(f, ['campaign.assessors=["ann", "bob", "cy"]'])
    assert cfg.get_value("batch", "assessors_per_item") == 3


def test_several_broken_rules_are_counted(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('[campaign]\nskip = ["pool"]\n[cal]\nthreads = ["local"]\n')
    with pytest.raises(InputError) as e:
        load_config(f)
    assert "1 other rule across keys is broken too" in e.value.message


@pytest.mark.parametrize("names, why", [
    (["ann", "ann"], "twice"), (["Ann", "ann"], "ignoring case"), (["ann", " "], "empty"), (["ann", ".."], "folder"),
])
def test_assessor_names_that_would_collide(names, why, tmp_path):
    f = tmp_path / "p.toml"
    f.write_text("[campaign]\nassessors = [" + ", ".join(f'"{n}"' for n in names) + "]\n")
    with pytest.raises(InputError) as e:
        load_config(f)
    assert e.value.rule == "assessor-names-collide" and why in e.value.message


def test_the_shipped_configs_and_the_defaults_pass_every_rule():
    load_config(None)
    for p in sorted((ROOT / "configs").glob("*.toml")):
        load_config(p)


def test_a_room_can_register_a_rule(tmp_path, monkeypatch):
    from qrelkit.config import Conflict, cross_rule

    monkeypatch.setitem(CROSS_RULES, "fused", dict(CROSS_RULES.get("fused", {})))

    @cross_rule("fused", "take-below-depth")
    def _take(cfg):
        """[fused] take below [pool] depth."""
        if cfg.get_value("fused", "take") < cfg.get_value("pool", "depth"):
            return Conflict((("fused", "take"), ("pool", "depth")), "the fused ranking is cut above the pool depth",
                            "raise take")
        return None

    f = tmp_path / "p.toml"
    f.write_text("[fused]\ntake = 5\n")
    with pytest.raises(InputError) as e:
        load_config(f)
    assert e.value.rule == "take-below-depth" and "[pool] depth = 10 (default)" in e.value.message
