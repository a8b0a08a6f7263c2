"""One configuration schema (qrelkit.config.SCHEMA): validation at load, flags checked by the same
schema, `qrelkit config show` origins, defaults equal to the former scattered ones, the generated
docs, and the protocol's screening rule (qrelkit.cal.screening) reported by `cal status`."""

from __future__ import annotations

import importlib
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from qrelkit.cli import run
from qrelkit.config import DECLARATION_MODULES, SCHEMA, Config, check_value, defaults_tree, find_line, load_config
from qrelkit.errors import InputError
from qrelkit.params import Params

ROOT = Path(__file__).resolve().parents[1]
ONE_LINE = re.compile(r"^qrelkit: error: \S+(:\d+)?: \[[a-z-]+\] .+\n$")


def _toml(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _fails(tmp_path, text) -> InputError:
    with pytest.raises(InputError) as e:
        load_config(_toml(tmp_path, text))
    return e.value


# ----------------------------------------------------------------------------- validation at load


def test_unknown_key_names_the_closest_and_its_line(tmp_path):
    e = _fails(tmp_path, "# a protocol\n[pool]\ndepth = 10\ndepht = 10\n")
    assert (e.rule, e.line) == ("unknown-key", 4) and "did you mean 'depth'?" in e.message
    assert e.file == str(tmp_path / "c.toml")


def test_unknown_section(tmp_path):
    e = _fails(tmp_path, "[pool]\ndepth = 10\n\n[pooll]\ndepth = 3\n")
    assert (e.rule, e.line) == ("unknown-key", 4) and "'pooll'" in e.message and "did you mean 'pool'?" in e.message
    e = _fails(tmp_path, "[stopping.knees]\nratio = 4.0\n")        # a misspelt subsection
    assert e.rule == "unknown-key" and "did you mean 'knee'?" in e.message


def test_unknown_key_in_dotted_and_inline_forms(tmp_path):
    e = _fails(tmp_path, "pool.depht = 3\n")
    assert (e.rule, e.line) == ("unknown-key", 1)
    e = _fails(tmp_path, "[cal]\nbatch_size = 25\n[stopping]\naccept_min_judged = 150\n[stopping.knee]\nmin_judgd = 5\n")
    assert (e.rule, e.line) == ("unknown-key", 6) and "did you mean 'min_judged'?" in e.message


@pytest.mark.parametrize("text, rule, line", [
    ('[pool]\ndepth = "ten"\n', "bad-type", 2),
    ("[pool]\ndepth = 2.5\n", "bad-type", 2),              # not cut to 2
    ("[pool]\ndepth = true\n", "bad-type", 2),             # a bool is not an int
    ("[fused]\nrrf_k = false\n", "bad-type", 2),
    ("[labels]\nscale = [0, 1, 2.5]\n", "bad-type", 2),
    ('[labels.schemes]\nstrict = ["3"]\n', "bad-type", 1),
    ("[pool]\ndepth = 0\n", "out-of-range", 2),
    ("[screen]\ndiscard_if_relevant_share_at_least = 1.5\n", "out-of-range", 2),
    ('[pool]\njudged = "marks"\n', "bad-choice", 2),
    ('[eval]\ntests = ["ttest", "wilcox"]\n', "bad-choice", 2),
    ('[pool]\norder = ["docid"]\n', "bad-choice", 2),        # documents a fixed order
    ("pool = 3\n", "bad-type", 1),
])
def test_bad_values(tmp_path, text, rule, line):
    e = _fails(tmp_path, text)
    assert (e.rule, e.line) == (rule, line), str(e)
    assert "\n" not in str(e)


def test_a_float_key_takes_an_integer_and_stores_a_float(tmp_path):
    cfg = load_config(_toml(tmp_path, "[fused]\nrrf_k = 60\n"))
    assert cfg.get_value("fused", "rrf_k") == 60.0 and isinstance(cfg["fused"]["rrf_k"], float)


def test_choice_message_suggests(tmp_path):
    e = _fails(tmp_path, '[dedupe]\nverify = "exakt"\n')
    assert "did you mean 'exact'?" in e.message and "none, signature, exact" in e.message


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.toml")), ids=lambda p: p.name)
def test_every_shipped_config_loads(path):
    cfg = load_config(path)
    assert cfg.source == str(path)
    origins = {r["origin"] for r in cfg.effective()}
    assert "file" in origins


def test_the_shipped_config_sets_only_declared_keys_and_every_section():
    import tomllib

    doc = tomllib.loads((ROOT / "configs" / "trec-dl-2022.toml").read_text())
    for sec in ("protocol", "screen", "cal", "stopping", "reuse", "dedupe", "prefs"):
        assert sec in doc and sec in SCHEMA
    assert set(doc["labels"]["schemes"]) == {"strict"}
    assert set(doc["pool"]) <= set(SCHEMA["pool"]) and "order" in doc["pool"]


def test_find_line():
    text = '[a]\nx = 1\n# c\n[b.c]\n"y" = 2\nz.w = 3\n'
    assert find_line(text, ("a",)) == 1 and find_line(text, ("a", "x")) == 2
    assert find_line(text, ("b", "c", "y")) == 5 and find_line(text, ("b", "c", "z")) == 6
    assert find_line(text, ("b",)) == 4 and find_line(text, ("q",)) is None


# ----------------------------------------------------------------------------- flags


def test_flags_pass_the_same_checks():
    cfg = load_config(None)
    assert cfg.get_value("pool", "depth", 20) == 20
    with pytest.raises(InputError) as e:
        cfg.get_value("pool", "depth", 0)
    assert e.value.rule == "out-of-range"
    with pytest.raises(InputError) as e:
        cfg.get_value("pool", "judged", "marks")
    assert e.value.rule == "bad-choice"
    with pytest.raises(InputError) as e:
        cfg.get_value("pool", "depth", 2.5)
    assert e.value.rule == "bad-type"
    assert cfg.get_value("pool", "depth") == 10 and cfg.get_value("eval", "relevant") is None


def _campaign(tmp_path):
    (tmp_path / "runs").mkdir()
    for r in ("a", "b"):
        (tmp_path / "runs" / f"{r}.txt").write_text("".join(f"1 Q0 d{i} {i + 1} {10 - i} {r}\n" for i in range(5)))
    return tmp_path / "runs"


@pytest.mark.parametrize("text, rule", [("[pool]\ndepht = 10\n", "unknown-key"), ('[pool]\ndepth = "ten"\n', "bad-type"),
                                        ("[pool]\ndepth = 2.5\n", "bad-type")])
def test_cli_config_errors_are_one_line_exit_2(tmp_path, capsys, text, rule):
    runs = _campaign(tmp_path)
    cfg = _toml(tmp_path, text)
    out = tmp_path / "p.parquet"
    assert run(["pool", "depth", str(runs), "-c", str(cfg), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert ONE_LINE.match(err) and f"{cfg}:2: [{rule}]" in err and "Traceback" not in err
    assert not out.exists()


def test_cli_flag_out_of_range(tmp_path, capsys):
    runs = _campaign(tmp_path)
    assert run(["pool", "depth", str(runs), "--depth", "0", "-o", str(tmp_path / "p.parquet")]) == 2
    err = capsys.readouterr().err
    assert ONE_LINE.match(err) and "[out-of-range] [pool] depth must be >= 1" in err


def test_stopping_rule_settings_are_checked(tmp_path, capsys):
    (tmp_path / "t.tsv").write_text("1\tq\n")
    db = tmp_path / "s.db"
    assert run(["cal", "init", str(db), "-t", str(tmp_path / "t.tsv")]) == 0
    capsys.readouterr()
    assert run(["cal", "status", str(db), "--rule", "knee", "--set", "min_judged=2.5"]) == 2
    assert "[bad-type] [stopping.knee] min_judged must be an integer" in capsys.readouterr().err


# ----------------------------------------------------------------------------- config show


def test_config_show_origins(tmp_path, capsys):
    cfg = _toml(tmp_path, "# x\n[pool]\ndepth = 7\n\n[cal]\nbatch_size = 30\n")
    assert run(["config", "show", "-c", str(cfg), "--set", "pool.judged=drop", "--set", "stopping.knee.ratio=4",
                "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {(r["section"], r["key"]): r for r in out["values"]}
    assert out["config"] == str(cfg)
    assert (rows["pool", "depth"]["value"], rows["pool", "depth"]["origin"], rows["pool", "depth"]["where"]) == \
        (7, "file", f"{cfg}:3")
    assert (rows["cal", "batch_size"]["value"], rows["cal", "batch_size"]["where"]) == (30, f"{cfg}:6")
    assert (rows["pool", "judged"]["value"], rows["pool", "judged"]["origin"]) == ("drop", "flag")
    assert (rows["stopping.knee", "ratio"]["value"], rows["stopping.knee", "ratio"]["origin"]) == (4.0, "flag")
    assert (rows["pool", "ties"]["value"], rows["pool", "ties"]["origin"]) == ("docid-desc", "default")
    assert {(s, k) for s, ks in SCHEMA.items() for k in ks} == set(rows)          # every key, once
    assert run(["config", "show", "-c", str(cfg)]) == 0
    human = capsys.readouterr().out
    assert f"file ({cfg}:3)" in human and "flag" not in human and "default" in human


def test_config_show_rejects_bad_settings(tmp_path, capsys):
    assert run(["config", "show", "--set", "pool.depht=3"]) == 2
    assert "[unknown-key] unknown key 'depht' in [pool]; did you mean 'depth'?" in capsys.readouterr().err
    assert run(["config", "show", "--set", "pool.depth=ten"]) == 2
    assert "[bad-type]" in capsys.readouterr().err
    assert run(["config", "show", "--set", "depth"]) == 2
    assert "[bad-option]" in capsys.readouterr().err


# ----------------------------------------------------------------------------- one source of defaults

#: qrelkit.config.DEFAULTS before the schema (every key keeps its value)
OLD_CONFIG_DEFAULTS = {
    "runs": {"max_depth": None, "expected_depth": None, "lenient": False},
    "selection": {"include_baselines": True, "per_group": 3, "by_subtask": True, "priority_order": "ascending",
                  "include": [], "exclude": []},
    "pool": {"depth": 10, "dedupe": True, "judged": "mark"},
    "top1": {"perfect_min_rel": 1, "perfect": "all"},
    "fused": {"method": "rrf", "take": 100, "rrf_k": 60.0, "rbp_p": 0.8},
    "fractional": {"fraction": 0.1, "seed": 0},
    "batch": {"first_n": 100, "assessors_per_item": 1, "seed": 0},
    "labels": {"scale": [0, 1, 2, 3], "passage_relevant": [2, 3], "document_relevant": [1, 2, 3],
               "document_rule": "max", "grade_map": {}, "schemes": {}, "vote_threshold": 2, "graded": "ceil_median",
               "fallback": ["original", "lowest"], "original_threshold": 1, "min_assessors": 1,
               "require_original_relevant": False, "label": "graded", "agreement_level": "ordinal"},
    "eval": {"measures": ["nDCG@10", "AP", "RR@10", "P@10", "Judged@10"], "relevant": None, "missing": "zero", "k": 10,
             "tests": ["ttest", "wilcoxon", "ranksum", "randomization"], "corrections": ["bonferroni", "holm"],
             "alpha": 0.05, "randomizations": 10000, "seed": 0, "duplicate_measures": ["P@10", "nDCG@10"], "depth": None},
    "prefs": {"pairs_per_task": 10, "test_pairs": 3, "test_min_rel": 1, "price_per_task": 2.0, "fee_per_task": 0.4,
              "assignments": 1, "alpha": 0.05, "correction": "bonferroni", "measure": "RR@10", "rel": 1, "ci": "t",
              "ci_level": 0.95, "bootstrap_resamples": 10000, "seed": 0, "workers": 5, "error_rate": 0.1,
              "test_error_rate": 0.0, "ties": "latent", "failing_mode": "random"},
}
#: cli/reuse.py's former REUSE_DEFAULTS
OLD_REUSE = {"procedure": "group", "uniqueness": "pooled", "orphans": "shared", "orphan_depth": 100, "removal": "remove",
             "measures": None, "density_threshold": 0.4, "voorhees_relevant_share": 0.333}
#: cal/stopping.py's former literals
OLD_STOPPING = {
    "stopping": {"accept_density_below": 0.4, "accept_min_judged": 150, "accept_min_relevant": 4, "reject_min_judged": 301,
                 "reject_density_above": 0.5, "budget_min_judged": 150, "budget_min_relevant": 4,
                 "budget_density_at_least": 0.4},
    "stopping.knee": {"min_judged": 150, "ratio": 6.0, "adjust": True, "adjust_base": 156, "adjust_cap": 150},
    "stopping.budget": {"ratio": 6.0, "target_size": 10, "collection_share": 0.75},
    "stopping.target": {"size": 10},
}
#: cal/loop.py's former CalParams field defaults
OLD_CAL = {"batch_size": 25, "fractional_batch_size_later": 50, "fractional_later_from": 2, "schedule": "fixed",
           "negatives": 100, "C": 1.0, "class_weight": "balanced", "query_document": True, "relevant": (2, 3), "seed": 0}


def _same(a, b) -> bool:
    return a == b and type(a) is type(b) or (isinstance(a, float) and isinstance(b, float) and a == b)


def test_defaults_equal_the_former_config_defaults():
    tree = defaults_tree()
    for sec, keys in OLD_CONFIG_DEFAULTS.items():
        for k, v in keys.items():
            assert _same(tree[sec][k], v), (sec, k, tree[sec][k], v)


def test_reuse_defaults_come_from_the_schema():
    import qrelkit.cli.reuse as reuse_cli
    from qrelkit.reuse.leaveout import DEFAULT_MEASURES
    from qrelkit.reuse.study import leave_out_options  # the [reuse] options of 'reuse leave-out'

    assert not hasattr(reuse_cli, "REUSE_DEFAULTS")
    cfg = load_config(None)
    assert {k: cfg.get_value("reuse", k) for k in OLD_REUSE} == OLD_REUSE
    from qrelkit.reuse.params import ReuseParams

    opts = leave_out_options(ReuseParams.from_config(cfg))
    names = {"voorhees_relevant_share": "voorhees_share"}
    assert {k: opts[names.get(k, k)] for k in OLD_REUSE if k != "measures"} == \
        {k: v for k, v in OLD_REUSE.items() if k != "measures"}
    assert opts["measures"] == list(DEFAULT_MEASURES)


def test_stopping_defaults_come_from_the_schema():
    from qrelkit.cal.stopping import BUDGET_DEFAULTS, DENSITY_DEFAULTS, KNEE_DEFAULTS, TARGET_DEFAULTS, get_rule

    got = {"stopping": DENSITY_DEFAULTS, "stopping.knee": KNEE_DEFAULTS, "stopping.budget": BUDGET_DEFAULTS,
           "stopping.target": TARGET_DEFAULTS}
    assert got == OLD_STOPPING
    for sec, d in got.items():   # [stopping] also names the campaign's rule (issue 20)
        assert d == {k: v.default for k, v in SCHEMA[sec].items() if (sec, k) != ("stopping", "rule")}
    # a rule from the (full) default config equals the rule from nothing
    for name in ("density", "knee", "budget", "target"):
        assert get_rule(name, load_config(None)).params() == get_rule(name, None).params()


def test_cal_params_defaults_come_from_the_schema():
    from dataclasses import asdict

    from qrelkit.cal.loop import CalParams

    assert asdict(CalParams()) == OLD_CAL
    assert CalParams.from_config(load_config(None)) == CalParams()
    assert CalParams.from_config(load_config(None), class_weight="none").class_weight is None


def test_dedupe_defaults_come_from_the_schema():
    from qrelkit.cli.cal import _norm
    from qrelkit.cli.dedupe import _params
    from qrelkit.dedupe import DedupeParams
    from qrelkit.dedupe.tokenize import Normalization

    cfg = load_config(None)
    p = _params(cfg)
    base = DedupeParams()
    assert p == base                                     # the CLI's defaults are the library's
    for k in SCHEMA["dedupe"]:
        assert getattr(p, k) == defaults_tree()["dedupe"][k] == getattr(base, k), k
    assert _norm(cfg) == Normalization(**{k: defaults_tree()["dedupe"][k] for k in ("lower", "strip_html", "keep_digits")})
    assert _params(cfg, threshold=0.8).threshold == 0.8
    with pytest.raises(InputError) as e:
        _params(cfg, threshold=1.5)
    assert e.value.rule == "out-of-range"


def test_schema_choices_match_the_library():
    from qrelkit.cal.loop import SCHEDULES, THREADS
    from qrelkit.dedupe.cluster import CANONICAL, LINKAGE, MODES, VERIFY
    from qrelkit.evaluate.compare import CORRECTIONS, TESTS
    from qrelkit.labels.aggregate import FALLBACKS, GRADED
    from qrelkit.labels.propagate import RULES
    from qrelkit.pooler.pools import JUDGED_POLICIES
    from qrelkit.prefs.crowd import FAILING_MODES, TIES
    from qrelkit.prefs.rescore import CI_METHODS
    from qrelkit.reuse.attribution import ORPHANS, UNIQUENESS
    from qrelkit.reuse.leaveout import PROCEDURES, REMOVAL

    pairs = {("cal", "schedule"): SCHEDULES, ("cal", "threads"): THREADS, ("dedupe", "canonical"): CANONICAL,
             ("dedupe", "linkage"): LINKAGE, ("dedupe", "mode"): MODES, ("dedupe", "verify"): VERIFY,
             ("eval", "corrections"): CORRECTIONS, ("eval", "tests"): TESTS, ("labels", "fallback"): FALLBACKS,
             ("labels", "graded"): GRADED, ("labels", "document_rule"): RULES, ("pool", "judged"): JUDGED_POLICIES,
             ("prefs", "failing_mode"): FAILING_MODES, ("prefs", "ties"): TIES, ("prefs", "ci"): CI_METHODS,
             ("reuse", "orphans"): ORPHANS, ("reuse", "uniqueness"): UNIQUENESS, ("reuse", "procedure"): PROCEDURES,
             ("reuse", "removal"): REMOVAL}
    for (sec, key), lib in pairs.items():
        assert set(SCHEMA[sec][key].choices) == set(lib), (sec, key)


def test_every_key_the_code_reads_is_declared():
    pat = re.compile(r"""get_value\(\s*["'](\w+)["']\s*,\s*f?["'](\w+)["']""")
    found = set()
    for f in (ROOT / "qrelkit").rglob("*.py"):
        if f.name == "config.py":
            continue
        src = f.read_text()
        found |= set(pat.findall(src))
        if f.name == "reuse.py" and f.parent.name == "cli":
            found |= {("reuse", k) for k in re.findall(r"""_opt\(cfg,\s*["'](\w+)["']""", src)}
        if f.name == "prefs.py" and f.parent.name == "cli":
            found |= {("prefs", k) for k in re.findall(r"""_v\(cfg,\s*["'](\w+)["']""", src)}
    for name in DECLARATION_MODULES:  # the keys the components read through their parameters classes
        for cls in vars(importlib.import_module(name)).values():
            if isinstance(cls, type) and issubclass(cls, Params) and cls is not Params:
                found |= {(cls.SECTION, k) for k in cls.KEYS} | set(cls.SOURCES.values())
    assert len(found) > 60
    missing = sorted((s, k) for s, k in found if k not in SCHEMA.get(s, {}))
    assert not missing, missing


def test_every_key_has_help_and_a_valid_default():
    for sec, keys in SCHEMA.items():
        for k in keys.values():
            assert k.help and "\n" not in k.help, (sec, k.name)
            assert check_value(sec, k.name, k.default) == k.default, (sec, k.name)


def test_docs_list_every_key_with_its_default():
    text = (ROOT / "docs" / "commands.md").read_text()
    part = text[text.index("## Configuration keys"):]
    for sec, keys in SCHEMA.items():
        for k in keys.values():
            assert f"| `[{sec}]` | `{k.name}` |" in part, (sec, k.name)
    assert "| `[pool]` | `depth` | int (1 <= x) | `10` |" in part


def test_config_is_still_a_dict_with_get_value():
    cfg = load_config(None)
    assert isinstance(cfg, Config) and isinstance(cfg, dict)
    assert cfg["pool"]["depth"] == 10 and cfg["stopping"]["knee"]["min_judged"] == 150
    assert cfg.get_value("nosuch", "key") is None                    # undeclared: as before


# ----------------------------------------------------------------------------- screening


def _judgments(spec: dict[str, list[int]]) -> pd.DataFrame:
    rows = [(q, f"d{i}", g) for q, grades in spec.items() for i, g in enumerate(grades)]
    return pd.DataFrame(rows, columns=["qid", "docid", "grade"])


def test_screening_boundaries():
    from qrelkit.cal.screening import screen_topics

    j = _judgments({
        "half": [2] * 50 + [0] * 50,              # exactly 50%: discard
        "below": [3] * 49 + [1] * 51,             # 49%: keep (grade 1 is not relevant)
        "none": [0, 1] * 50,                      # no relevant: discard
        "short": [0] * 60,                        # 60 of 100 judged: incomplete
        "more": [0] * 99 + [2] + [2] * 100,       # only the first 100 count: 1% -> keep
    })
    df = screen_topics(j, topics=["half", "below", "none", "short", "more", "absent"])
    got = {r.qid: (r.to_screen, r.screened, r.relevant, r.decision) for r in df.itertuples()}
    assert got == {"half": (100, 100, 50, "discard-too-many"), "below": (100, 100, 49, "keep"),
                   "none": (100, 100, 0, "discard-none"), "short": (100, 60, 0, "incomplete"),
                   "more": (100, 100, 1, "keep"), "absent": (100, 0, 0, "incomplete")}
    assert df.set_index("qid").loc["half", "share"] == 0.5 and math.isnan(df.set_index("qid").loc["absent", "share"])
    assert list(df.columns) == ["qid", "to_screen", "screened", "relevant", "share", "decision"]
    # the rule's switches
    assert screen_topics(j, discard_if_none=False).set_index("qid").loc["none", "decision"] == "keep"
    assert screen_topics(j, discard_share=0.51).set_index("qid").loc["half", "decision"] == "keep"
    assert screen_topics(j, first_n=60).set_index("qid").loc["short", "decision"] == "discard-none"


def test_screening_follows_the_pool_order():
    from qrelkit.cal.screening import screen_topics

    j = _judgments({"1": [2, 2, 0, 0, 0]})
    pool = pd.DataFrame({"qid": ["1"] * 5, "docid": [f"d{i}" for i in (4, 3, 2, 1, 0)], "position": [1, 2, 3, 4, 5]})
    # first 4 of the pool: d4 d3 d2 d1 -> one relevant of four: keep
    r = screen_topics(j, pool.sample(frac=1, random_state=1), first_n=4).iloc[0]
    assert (r.to_screen, r.screened, r.relevant, r.decision) == (4, 4, 1, "keep")
    # a pool smaller than N: the whole pool is screened
    r = screen_topics(j, pool.head(2), first_n=100).iloc[0]
    assert (r.to_screen, r.screened, r.relevant, r.decision) == (2, 2, 0, "discard-none")
    # a pool item not judged yet: incomplete
    r = screen_topics(j.head(3), pool, first_n=4).iloc[0]
    assert (r.screened, r.decision) == (2, "incomplete")


def test_screening_rule_from_config(tmp_path):
    from qrelkit.cal.screening import ScreeningRule

    assert ScreeningRule.from_config(load_config(ROOT / "configs" / "trec-dl-2022.toml")) == ScreeningRule()
    cfg = load_config(_toml(tmp_path, "[screen]\nfirst_n = 20\ndiscard_if_no_relevant = false\n[labels]\npassage_relevant = [3]\n"))
    assert ScreeningRule.from_config(cfg) == ScreeningRule(20, 0.5, False, (3,))


def test_cal_status_reports_screening(tmp_path, capsys):
    (tmp_path / "t.tsv").write_text("1\tfirst\n2\tsecond\n3\tthird\n")
    db = tmp_path / "s.db"
    assert run(["cal", "init", str(db), "-t", str(tmp_path / "t.tsv")]) == 0
    rows = [("1", f"d{i}", "A", 2 if i < 50 else 0, "1-0") for i in range(100)] + \
           [("2", f"d{i}", "A", 0, "2-0") for i in range(100)] + [("3", f"d{i}", "A", 3, "3-0") for i in range(20)]
    f = tmp_path / "j.csv"
    pd.DataFrame(rows, columns=["qid", "docid", "assessor", "grade", "batch_id"]).to_csv(f, index=False)
    assert run(["cal", "import", str(db), str(f)]) == 0
    capsys.readouterr()
    assert run(["cal", "status", str(db), "--thread", "all", "--json", "-o", str(tmp_path / "st.csv")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(t["qid"], t["screening"]) for t in out["threads"]] == \
        [("1", "discard-too-many"), ("2", "discard-none"), ("3", "incomplete")]
    assert [s["decision"] for s in out["screening"]] == ["discard-too-many", "discard-none", "incomplete"]
    assert pd.read_csv(tmp_path / "st.csv")["screening"].tolist()[0] == "discard-too-many"
    # a config with N = 20: topic 3 is screened (all relevant: discard); a pool decides the order
    cfg = _toml(tmp_path, "[screen]\nfirst_n = 20\n")
    pool = tmp_path / "pool.csv"
    pd.DataFrame({"qid": ["1"] * 20, "docid": [f"d{i}" for i in range(99, 79, -1)], "position": range(1, 21)}).to_csv(pool, index=False)
    assert run(["cal", "status", str(db), "--thread", "all", "--json", "-c", str(cfg), "--pool", str(pool)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(s["qid"], s["to_screen"], s["decision"]) for s in out["screening"]] == \
        [("1", 20, "discard-none"), ("2", 0, "incomplete"), ("3", 0, "incomplete")]
    assert run(["cal", "status", str(db), "-c", str(cfg)]) == 0
    assert "screening" in capsys.readouterr().out


def test_python_api_defaults_agree_with_the_schema():
    """Library functions that keep keyword defaults: each must equal the schema's (one value
    everywhere). The pooler's take theirs from the declarations (tests/test_params.py)."""
    import inspect

    from qrelkit.cal.loop import issue_next_batches
    from qrelkit.reuse.leaveout import DEFAULT_MEASURES, leave_out

    checks = {
        leave_out: {"procedure": ("reuse", "procedure"), "uniqueness": ("reuse", "uniqueness"),
                    "orphans": ("reuse", "orphans"), "orphan_depth": ("reuse", "orphan_depth"),
                    "removal": ("reuse", "removal"), "missing": ("eval", "missing"), "depth": ("pool", "depth"),
                    "density_threshold": ("reuse", "density_threshold"),
                    "voorhees_share": ("reuse", "voorhees_relevant_share")},
        issue_next_batches: {"fraction": ("fractional", "fraction"), "fraction_seed": ("fractional", "seed")},
    }
    for fn, keys in checks.items():
        sig = inspect.signature(fn)
        for arg, (sec, key) in keys.items():
            assert sig.parameters[arg].default == defaults_tree()[sec][key], (fn.__name__, arg)
    assert "Bpref" in DEFAULT_MEASURES and "none: AP, nDCG@10, P@10, Bpref, Judged@10" in SCHEMA["reuse"]["measures"].help


def test_screening_rule_from_a_plain_mapping():
    from qrelkit.cal.screening import ScreeningRule

    assert ScreeningRule.from_config({"screen": {"first_n": 10}}) == ScreeningRule(first_n=10)
    assert ScreeningRule.from_config(None, discard_share=0.25).discard_share == 0.25
