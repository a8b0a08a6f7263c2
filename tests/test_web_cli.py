"""The command line of the web app (issue 14): ``qrelkit campaign assessor add|revoke|list`` and
``qrelkit serve``'s refusals (one line, exit 2)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from qrelkit.store import open_campaign_store
from qrelkit.cli import run

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^qrelkit: error: \S[^\n]*: \[(?P<rule>[a-z-]+)\] [^\n]+\n$")


@pytest.fixture(scope="module")
def camp0(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("webcli")
    sim = root / "sim"
    assert run(["simulate", "campaign", "-o", str(sim), "--passages", "1500", "--topics", "2", "--groups", "2",
                "--seed", "3"]) == 0
    d = root / "camp"
    assert run(["campaign", "init", str(d), "-c", str(ROOT / "configs" / "trec-dl-2022.toml"), "--corpus",
                str(sim / "corpus.jsonl"), "-t", str(sim / "topics.tsv"), "--runs", str(sim / "runs"), "-m",
                str(sim / "manifest.csv")]) == 0
    return d


@pytest.fixture
def camp(camp0, tmp_path) -> Path:
    d = tmp_path / "camp"
    shutil.copytree(camp0, d)
    return d


def _fails(argv, capsys, rule: str) -> str:
    capsys.readouterr()
    assert run(argv) == 2
    err = capsys.readouterr().err
    m = LINE.match(err)
    assert m and m["rule"] == rule and "Traceback" not in err, err
    return err


def test_add_prints_a_link_once_and_stores_only_its_hash(camp, capsys):
    capsys.readouterr()
    assert run(["campaign", "assessor", "add", str(camp), "ann", "--topics", "1001"]) == 0
    out, err = capsys.readouterr()
    m = re.fullmatch(r"http://127\.0\.0\.1:8765/login/(?P<token>[A-Za-z0-9_-]{43})\n", out)
    assert m and "shown only now" in err and "not among the protocol's assessors" in err  # the DL protocol: A01..A04
    assert run(["campaign", "assessor", "add", str(camp), "A01"]) == 0
    assert "not among" not in capsys.readouterr().err
    with open_campaign_store(camp) as s:
        dump = "\n".join(s.db.conn.iterdump())
        assert m["token"] not in dump
        assert s.accounts.get("ann")["topics"] == ["1001"] and not s.accounts.get("ann")["organizer"]
    assert run(["campaign", "assessor", "add", str(camp), "boss", "--organizer", "--base-url",
                "https://judge.example.org/qk/", "--json"]) == 0
    acc = json.loads(capsys.readouterr().out)
    assert acc["organizer"] is True and acc["link"].startswith("https://judge.example.org/qk/login/")
    assert acc["assessor"] is False and acc["assessors"] == ["A01", "A02", "A03", "A04"]


def test_add_refusals(camp, capsys, tmp_path):
    assert run(["campaign", "assessor", "add", str(camp), "ann"]) == 0
    _fails(["campaign", "assessor", "add", str(camp), "ann"], capsys, "assessor-exists")
    _fails(["campaign", "assessor", "add", str(camp), "bob", "--topics", "1001,9999"], capsys, "unknown-topic")
    _fails(["campaign", "assessor", "add", str(camp), "no spaces"], capsys, "bad-option")
    _fails(["campaign", "assessor", "add", str(camp), "bob", "--base-url", "ftp://x"], capsys, "bad-option")
    (tmp_path / "empty").mkdir()
    _fails(["campaign", "assessor", "add", str(tmp_path / "empty"), "bob"], capsys, "not-a-campaign")
    _fails(["campaign", "assessor", "list", str(tmp_path / "empty")], capsys, "not-a-store")


def test_revoke_and_list(camp, capsys):
    assert run(["campaign", "assessor", "add", str(camp), "ann"]) == 0
    assert run(["campaign", "assessor", "add", str(camp), "boss", "--organizer"]) == 0
    capsys.readouterr()
    assert run(["campaign", "assessor", "revoke", str(camp), "ann", "--json"]) == 0
    acc = json.loads(capsys.readouterr().out)
    assert acc["revoked"] and acc["generation"] == 2
    _fails(["campaign", "assessor", "revoke", str(camp), "nobody"], capsys, "unknown-assessor")
    assert run(["campaign", "assessor", "list", str(camp), "--json"]) == 0
    accs = json.loads(capsys.readouterr().out)["accounts"]
    assert [(a["name"], a["organizer"], bool(a["revoked"])) for a in accs] == [("ann", False, True), ("boss", True, False)]
    assert all("token" not in k for a in accs for k in a)
    assert run(["campaign", "assessor", "list", str(camp)]) == 0
    assert "boss" in capsys.readouterr().out
    # a revoked account added again gets a new link
    assert run(["campaign", "assessor", "add", str(camp), "ann"]) == 0
    with open_campaign_store(camp) as s:
        assert s.accounts.get("ann")["revoked"] is None and s.accounts.get("ann")["generation"] == 3


def test_renew_issues_a_new_link_and_the_old_one_stops(camp, capsys):
    from qrelkit.campaign.accounts import token_hash

    assert run(["campaign", "assessor", "add", str(camp), "ann", "--topics", "1001"]) == 0
    old = capsys.readouterr().out.strip().rsplit("/", 1)[1]
    assert "--renew issues a new link" in _fails(["campaign", "assessor", "add", str(camp), "ann"], capsys,
                                                 "assessor-exists")  # as before, without --renew: it says how
    assert run(["campaign", "assessor", "add", str(camp), "ann", "--renew", "--json"]) == 0
    acc = json.loads(capsys.readouterr().out)
    new = acc["link"].rsplit("/", 1)[1]
    assert new != old and acc["topics"] == ["1001"] and acc["generation"] == 1  # role, topics and sessions stay
    with open_campaign_store(camp) as s:
        assert s.accounts.link(token_hash(old)) is None
        link = s.accounts.link(token_hash(new))
        assert link["account"]["name"] == "ann" and link["used"] is None
    _fails(["campaign", "assessor", "add", str(camp), "nobody", "--renew"], capsys, "unknown-assessor")
    _fails(["campaign", "assessor", "add", str(camp), "ann", "--renew", "--organizer"], capsys, "bad-option")


def test_serve_refuses_a_folder_without_a_campaign(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    _fails(["serve", str(tmp_path / "empty")], capsys, "not-a-campaign")
    _fails(["serve", str(tmp_path / "missing")], capsys, "not-a-campaign")


def test_serve_refuses_a_bad_port(camp, capsys):
    capsys.readouterr()
    assert run(["serve", str(camp), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--port" in err and "greater than or equal to 1" in err, err


def test_serve_on_a_network_address_warns_of_plain_http(camp, capsys, monkeypatch):
    from qrelkit import web

    served = []
    monkeypatch.setattr(web, "run_server", lambda app, host, port, **kw: served.append((host, kw)))
    assert run(["serve", str(camp)]) == 0
    assert "warning" not in capsys.readouterr().err
    assert run(["serve", str(camp), "--host", "0.0.0.0"]) == 0
    err = capsys.readouterr().err
    assert "warning: serving plain HTTP on 0.0.0.0" in err and "TLS reverse proxy" in err
    assert [h for h, _ in served] == ["127.0.0.1", "0.0.0.0"] and served[0][1]["proxy_headers"] is False
    # behind a TLS proxy: its forwarded scheme and address trusted (cookies Secure under https)
    assert run(["serve", str(camp), "--proxy-headers", "--forwarded-allow-ips", "10.0.0.2"]) == 0
    assert served[-1][1] == {"proxy_headers": True, "forwarded_allow_ips": "10.0.0.2"}
