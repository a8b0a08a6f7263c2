"""Orchestrators resolve behaviour through the registries by name (issue 20): ``[pool] kind`` and
``[stopping] rule`` choose a registered pool kind and stopping rule, a registered rule's
parameters are its section ``[stopping.<rule>]`` (a plugin kind's ``[pool.<kind>]``), a rule
describes itself (``describe(state)``), and a plugin module named in ``[protocol] plugins``
(tests/plugins/qrelkit_toy_protocol.py) drives a whole campaign: init, run with an oracle, done —
its report and organizer page describe the rule and the pool kind it chose."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, restored_registries

from qrelkit.cal.stopping import JudgingState, get_rule
from qrelkit.campaign import Campaign, open_campaign_store
from qrelkit.cli import run as cli
from qrelkit.config import load_config
from qrelkit.errors import InputError
from qrelkit.io.tables import read_metadata, read_table
from qrelkit.pooler import configured_pool, depth_pool, fused_pool, top1_pool
from qrelkit.simulate.toy import toy_qrels, toy_runs

PLUGINS = Path(__file__).resolve().parent / "plugins"
PLUGIN = "qrelkit_toy_protocol"
PROTOCOL = f"""
[protocol]
name = "toy protocol"
plugins = ["{PLUGIN}"]
[pool]
kind = "toy-shallow"
[pool.toy-shallow]
depth = 3
[screen]
first_n = 10
discard_if_relevant_share_at_least = 1.0
discard_if_no_relevant = false
[campaign]
skip = ["dedupe", "fractional", "evaluate", "reuse"]
max_rounds = 10
[cal]
batch_size = 4
threads = ["all"]
official_thread = "all"
[stopping]
rule = "toy-count"
[stopping.toy-count]
judged = 40
"""


@pytest.fixture
def plugin_path(monkeypatch):
    """tests/plugins importable (in this process and the processes it spawns); the plugin module
    imported afresh by the test, the registries as they were after it."""
    monkeypatch.syspath_prepend(str(PLUGINS))
    sys.modules.pop(PLUGIN, None)
    with restored_registries():
        yield
    sys.modules.pop(PLUGIN, None)


def _init(sim: Path, d: Path, protocol: str = PROTOCOL) -> int:
    cfg = d.parent / f"{d.name}.toml"
    cfg.write_text(protocol)
    return cli(["campaign", "init", str(d), "-c", str(cfg), "--corpus", str(sim / "corpus.jsonl"), "-t",
                str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m", str(sim / "manifest.csv")])


@pytest.fixture(scope="module")
def toy_campaign(sim3, tmp_path_factory):
    """The campaign of PROTOCOL on sim3, run to done by the oracle (the plugin loaded through the
    protocol file; the registries restored after the module)."""
    sys.path.insert(0, str(PLUGINS))
    try:
        with restored_registries():
            d = tmp_path_factory.mktemp("toy") / "camp"
            assert _init(sim3, d) == 0
            assert cli(["campaign", "run", str(d), "--oracle", str(sim3 / "qrels.txt"), "--seed", "7"]) == 0
            yield d
    finally:
        sys.path.remove(str(PLUGINS))
        sys.modules.pop(PLUGIN, None)


# -- the campaign -------------------------------------------------------------------------------


def test_a_plugin_rule_and_pool_kind_drive_a_whole_campaign(toy_campaign):
    d = toy_campaign
    assert Campaign(d).status()["stage"].isin(["accept"]).all()
    with open_campaign_store(d) as s:
        done = s.state.stages_done()
        ct = s.state.topics()
        log = s.judgments.log(None, "all")
    assert "report" in done and "cal" in done
    # the pool stage made the plugin's kind, with its own section's depth
    assert done["pool"]["kind"] == "toy-shallow" and done["pool"]["depth"] == 3
    meta = read_metadata(d / "pool.parquet")
    assert meta["kind"] == "pool-toy-shallow" and meta["params"]["depth"] == 3
    pool = read_table(d / "pool.parquet")
    assert pool.num_rows and max(r["rank"] for rs in pool["runs"].to_pylist() for r in rs) == 3
    # every topic decided by the plugin's rule, at its [stopping.toy-count] judged
    assert set(ct["rule"]) == {"toy-count"} and set(ct["decision"]) == {"accept"}
    for q, g in log.drop_duplicates(["qid", "docid"]).groupby("qid"):
        assert len(g) >= 40, q
    assert all(r.startswith(f"{n} judged >= 40") for r, n in
               zip(ct["reason"], log.drop_duplicates(["qid", "docid"]).groupby("qid").size().reindex(ct["qid"])))


def test_the_report_describes_the_plugin_rule_and_kind(toy_campaign):
    md = (toy_campaign / "report.md").read_text()
    row = next(ln for ln in md.splitlines() if ln.startswith("| pool |"))
    assert "kind=toy-shallow" in row and "depth=3" in row
    assert "Stopping rule toy-count: accepted once 40 passages are judged." in md
    # no density line for a rule that has no density threshold
    assert "relevance density vs. judged per topic]" in md and "the 0.4 line" not in md


def test_the_organizer_and_topic_pages_describe_them(toy_campaign, tmp_path):
    """The web app (its runner a spawned process that loads the campaign's configuration, so the
    plugin) shows the pool kind and the rule with what it needs, and where a topic stands."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient  # lazy: the web extra is optional

    from qrelkit.campaign.accounts import add_account
    from qrelkit.web import create_app

    d = tmp_path / "camp"
    __import__("shutil").copytree(toy_campaign, d)
    sys.path.insert(0, str(PLUGINS))
    try:
        app = create_app(d)
        with TestClient(app) as main:
            assert app.state.service.advancer.wait_idle(300)
            token = add_account(d, "org", organizer=True)["link"].rsplit("/", 1)[1]
            assert main.post(f"/login/{token}", follow_redirects=False).status_code == 303
            org = main.get("/organizer")
            data = main.get("/api/organizer").json()
            a01 = TestClient(app)  # topic 1003's owner (topic i: assessor i mod 4), an organizer: she sees the rule
            token = add_account(d, "A03", organizer=True)["link"].rsplit("/", 1)[1]
            assert a01.post(f"/login/{token}", follow_redirects=False).status_code == 303
            topic = a01.get("/api/topics/1003").json()
            page = a01.get("/topics/1003").text
        assert data["health"]["runner_error"] is None  # the runner's process imported the plugin
    finally:
        sys.path.remove(str(PLUGINS))
    assert data["protocol"] == {"pool_kind": "toy-shallow", "pool": "depth=3", "rule": "toy-count",
                                "needs": "accepted once 40 passages are judged", "adjudication": None}
    assert 'data-pool-kind="toy-shallow"' in org.text and "stopping rule toy-count: accepted once 40" in org.text
    st = topic["status"]["stopping"]
    assert st["rule"] == "toy-count" and st["density_line"] is None and st["stands"].startswith("accepted: ")
    assert 'id="topic-stopping" data-rule="toy-count"' in page and "accepted below" not in page


def test_a_fresh_process_loads_the_plugin_the_campaign_names(toy_campaign):
    """``campaign status`` in a new process finds the plugin through the recorded configuration;
    without it importable, one line ``[bad-plugin]``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLUGINS), str(ROOT)])}
    code = "import sys; from qrelkit.cli import run; sys.exit(run(sys.argv[1:]))"
    p = subprocess.run([sys.executable, "-c", code, "campaign", "status", str(toy_campaign), "--json"], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    env["PYTHONPATH"] = str(ROOT)
    p = subprocess.run([sys.executable, "-c", code, "campaign", "status", str(toy_campaign)], env=env,
                       capture_output=True, text=True)
    assert p.returncode == 2 and "[bad-plugin]" in p.stderr and PLUGIN in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


# -- the protocol file: plugins, kinds, rules, their sections -----------------------------------


def test_a_protocol_file_names_its_plugins_and_their_sections(plugin_path, tmp_path):
    f = tmp_path / "p.toml"
    f.write_text(PROTOCOL)
    cfg = load_config(f)
    assert cfg.get_value("pool.toy-shallow", "depth") == 3 and cfg.get_value("stopping.toy-count", "judged") == 40
    assert get_rule("toy-count", cfg).judged == 40
    rows = {(r["section"], r["key"]) for r in cfg.effective()}
    assert {("stopping.toy-count", "judged"), ("pool.toy-shallow", "depth"), ("protocol", "plugins")} <= rows
    f.write_text(PROTOCOL.replace("judged = 40", "judged = 0"))
    with pytest.raises(InputError, match=r"\[out-of-range\] \[stopping.toy-count\] judged must be >= 1") as e:
        load_config(f)
    assert e.value.line == PROTOCOL.count("\n", 0, PROTOCOL.index("judged = 40")) + 1


def test_a_plugin_that_does_not_import_is_one_error_at_its_line(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('# a protocol\n[protocol]\nplugins = ["no_such_plugin_here"]\n')
    with pytest.raises(InputError) as e:
        load_config(f)
    assert (e.value.rule, e.value.file, e.value.line) == ("bad-plugin", str(f), 3)
    assert "no_such_plugin_here" in e.value.message and "[protocol] plugins" in e.value.message


def test_kind_and_rule_are_checked_against_the_registries(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('[pool]\nkind = "dpth"\n')
    with pytest.raises(InputError, match=r"\[bad-choice\] \[pool\] kind must be one of depth, top1, fused, rrf, rbp, "
                                         r"fractional.*did you mean 'depth'"):
        load_config(f)
    f.write_text('[stopping]\nrule = "kne"\n')
    with pytest.raises(InputError, match=r"\[bad-choice\] \[stopping\] rule must be one of density, knee, budget, "
                                         r"target.*did you mean 'knee'"):
        load_config(f)
    # an unregistered rule's section is an unknown key; a registered one's is checked
    f.write_text('[stopping.nobodys-rule]\njudged = 3\n')
    with pytest.raises(InputError, match=r"\[unknown-key\] unknown key 'nobodys-rule' in \[stopping\]"):
        load_config(f)
    f.write_text('[stopping.knee]\nmin_judged = -1\n')
    with pytest.raises(InputError, match=r"\[out-of-range\] \[stopping.knee\] min_judged"):
        load_config(f)


def test_the_density_rule_check_only_for_the_density_rule(tmp_path):
    f = tmp_path / "p.toml"
    f.write_text('[stopping]\naccept_density_below = 0.0\n')
    with pytest.raises(InputError, match=r"\[never-accepted\]"):
        load_config(f)
    f.write_text('[stopping]\nrule = "knee"\naccept_density_below = 0.0\n')
    assert load_config(f).get_value("stopping", "rule") == "knee"


def test_checking_a_protocol_imports_no_numba(tmp_path):
    """The schema is assembled from the registries (their sections, the choices) without the
    kernels: a protocol file is checked in a process that never imports numba."""
    f = tmp_path / "p.toml"
    f.write_text('[pool]\nkind = "rrf"\n[stopping]\nrule = "knee"\n[stopping.knee]\nmin_judged = 100\n')
    code = ("import sys; from qrelkit.config import load_config; c = load_config(sys.argv[1]); "
            "print(c.get_value('stopping.knee', 'min_judged'), 'numba' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code, str(f)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["100", "False"]


# -- pool kinds through the registry ------------------------------------------------------------


def _same(a, b) -> bool:
    return a.equals(b, check_metadata=True)


def test_configured_pool_takes_each_kinds_parameters_from_the_config(tmp_path):
    runs, q = toy_runs(), toy_qrels()
    f = tmp_path / "p.toml"
    f.write_text('[pool]\ndepth = 1\njudged = "drop"\n[top1]\nperfect = "best"\n[fused]\ntake = 2\nmethod = "rbp"\n'
                 'rbp_p = 0.5\n')
    cfg = load_config(f)
    assert _same(configured_pool("depth", runs, cfg, qrels=q).table, depth_pool(runs, 1, qrels=q, judged="drop"))
    assert _same(configured_pool("top1", runs, cfg, qrels=q).table, top1_pool(runs, qrels=q, perfect="best"))
    assert _same(configured_pool("fused", runs, cfg).table, fused_pool(runs, 2, method="rbp", p=0.5, judged="drop"))
    assert _same(configured_pool("rrf", runs, cfg).table, fused_pool(runs, 2, method="rrf", p=0.5, judged="drop"))
    # a flag wins over the file; the kind by default is [pool] kind
    assert _same(configured_pool(None, runs, cfg, depth=2).table, depth_pool(runs, 2, judged="drop"))
    f.write_text('[pool]\nkind = "top1"\n')
    made = configured_pool(None, runs, load_config(f))
    assert made.kind == "top1" and made.summary == {"kind": "top1", "perfect_min_rel": 1, "perfect": "all"}
    with pytest.raises(InputError, match=r"\[bad-option\] pool kind 'depth'.*dept"):
        configured_pool("depth", runs, cfg, dept=3)
    with pytest.raises(InputError, match=r"\[bad-type\] \[pool\] depth"):
        configured_pool("depth", runs, cfg, depth="ten")


def test_pool_make_is_the_per_kind_commands(tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    for name in ("a", "b"):
        rows = [f"{q} Q0 d{(i + ord(name)) % 7} {i + 1} {10 - i} {name}\n" for q in ("1", "2") for i in range(6)]
        (runs / f"{name}.run").write_text("".join(rows))
    out = {}
    for name, args in {"depth": ["pool", "depth", "-k", "3"], "make-depth": ["pool", "make", "--kind", "depth", "--set",
                                                                              "depth=3"],
                       "fused": ["pool", "fused", "--take", "4", "--method", "rbp"],
                       "make-fused": ["pool", "make", "--kind", "fused", "--set", "take=4", "--set", "method=rbp"],
                       "top1": ["pool", "top1"], "make-top1": ["pool", "make", "--kind", "top1"]}.items():
        assert cli([*args, str(runs), "-o", str(tmp_path / f"{name}.tsv"), "--json"]) == 0, name
        out[name] = (tmp_path / f"{name}.tsv").read_text()
        capsys.readouterr()
    assert out["depth"] == out["make-depth"] and out["fused"] == out["make-fused"] and out["top1"] == out["make-top1"]
    assert cli(["pool", "make", "--kind", "depth", "--set", "dept=3", str(runs), "-o", str(tmp_path / "x.tsv")]) == 2
    assert "[bad-option]" in capsys.readouterr().err and not (tmp_path / "x.tsv").exists()
    f = tmp_path / "p.toml"
    f.write_text('[pool]\nkind = "rrf"\n[fused]\ntake = 3\n')
    assert cli(["pool", "make", str(runs), "-c", str(f), "-o", str(tmp_path / "k.parquet"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["kind"] == "rrf" and summary["take"] == 3 and summary["items"] == 6
    assert read_metadata(tmp_path / "k.parquet")["kind"] == "pool-rrf"


# -- a rule describes itself --------------------------------------------------------------------


def _state(n: int, r: int, **kw) -> JudgingState:
    return JudgingState.from_grades([f"p{i}" for i in range(n)], [2] * r + [0] * (n - r), **kw)


def test_the_density_rule_describes_what_it_needs_and_where_a_topic_stands():
    rule = get_rule("density")
    d = rule.describe(_state(120, 37))
    assert d.needs == "accepted below density 0.4 with at least 150 judged and 4 relevant"
    assert d.stands == "at 0.31 with 120 judged and 37 relevant: 30 more to judge" and d.density_line == 0.4
    assert str(d) == f"{d.needs}: {d.stands}"
    assert rule.describe(_state(160, 2)).stands == "at 0.01 with 160 judged and 2 relevant: 2 more relevant to find"
    assert rule.describe(_state(160, 80)).stands.endswith("the density must fall below 0.4")
    assert rule.describe(_state(160, 20)).stands == "at 0.12 with 160 judged and 20 relevant: accepted"
    assert rule.describe(_state(0, 0)).stands == "nothing judged yet: 150 more to judge, 4 more relevant to find"
    assert "rejected" in rule.describe(_state(400, 300)).stands
    assert get_rule("density", accept_density_below=0.3).describe(_state(1, 0)).density_line == 0.3


def test_every_rule_says_what_it_needs():
    st = _state(120, 37)
    for name in ("knee", "budget", "target"):
        d = get_rule(name).describe(st)
        assert d.rule == name and d.needs and d.stands and d.density_line is None, name
    assert get_rule("knee").describe(st).needs.startswith("stops at a slope ratio of 156 - min(relevant, 150)")
    assert "no random sample" in get_rule("target").describe(st).stands


def test_cal_status_prints_the_rules_description(tmp_path, capsys):
    from qrelkit.store import init_store

    store = init_store(tmp_path / "c.db", {"1": "first"})
    bid = store.batches.issue("1", "all", [f"d{i}" for i in range(20)])
    store.judgments.import_judgments(__import__("pandas").DataFrame(
        {"qid": "1", "docid": [f"d{i}" for i in range(20)], "assessor": "A", "grade": [2] * 5 + [0] * 15,
         "batch_id": bid}))
    store.close()
    assert cli(["cal", "status", str(tmp_path / "c.db"), "--thread", "all", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rule"] == "density" and out["needs"].startswith("accepted below density 0.4")
    assert out["threads"][0]["stands"] == "at 0.25 with 20 judged and 5 relevant: 130 more to judge"
    f = tmp_path / "p.toml"
    f.write_text('[stopping]\nrule = "knee"\n')
    assert cli(["cal", "status", str(tmp_path / "c.db"), "--thread", "all", "-c", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rule"] == "knee" and out["threads"][0]["rule"] == "knee" and "slope ratio" in out["needs"]
    assert cli(["cal", "status", str(tmp_path / "c.db"), "--thread", "all", "-c", str(f)]) == 0
    assert "knee rule: stops at a slope ratio" in capsys.readouterr().out


def test_an_empty_state_describes_too():
    st = JudgingState((), np.zeros(0, bool))
    assert get_rule("density").describe(st).density_line == 0.4
