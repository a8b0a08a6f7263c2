"""CAL simulation says what it did (issue 11, section 6): a binarization that leaves a topic no
relevant passage is named (an error when it is every topic), and the curves that --max-effort cut
are reported with their recall at the cut (stderr, --json, table metadata)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from qrelkit.cal.features import build_features
from qrelkit.cal.loop import CalParams
from qrelkit.cal.simulation import qrels_grades, simulate_cal, topics_without_relevant
from qrelkit.cli import run
from qrelkit.errors import InputError
from qrelkit.io.tables import read_metadata

WORDS = [f"w{i}" for i in range(300)]


@pytest.fixture(scope="module")
def camp(tmp_path_factory):
    """400 passages; topic 1 ("alpha beta") and topic 2 ("gamma delta") each have 40 passages
    about them, graded 1 in binary qrels (and topic 3 of graded qrels has grades 2 and 0)."""
    d = tmp_path_factory.mktemp("honest")
    rng = np.random.default_rng(3)
    docs, qrels = [], []
    for i in range(400):
        words = list(rng.choice(WORDS, 30))
        if i < 40:
            words += ["alpha", "beta"] * 3
            qrels.append(("1", f"d{i:03d}", 1))
        elif i < 80:
            words += ["gamma", "delta"] * 3
            qrels.append(("2", f"d{i:03d}", 1))
        qrels.append(("1", f"d{i:03d}", 0)) if 300 <= i < 320 else None
        docs.append({"pid": f"d{i:03d}", "text": " ".join(words)})
    pd.DataFrame(docs).to_json(d / "corpus.jsonl", orient="records", lines=True)
    (d / "topics.tsv").write_text("1\talpha beta\n2\tgamma delta\n")
    (d / "qrels.txt").write_text("".join(f"{q} 0 {p} {g}\n" for q, p, g in qrels))
    # graded copy: topic 1 keeps grade 1 (not relevant under 2,3), topic 2 becomes grade 2
    (d / "graded.txt").write_text("".join(f"{q} 0 {p} {2 if q == '2' else g}\n" for q, p, g in qrels))
    build_features(d / "corpus.jsonl", d / "f")
    return d


def _inputs(camp, qrels="qrels.txt"):
    from qrelkit.cal.features import load_features
    from qrelkit.io.qrels import read_qrels
    from qrelkit.io.topics import read_topics

    return load_features(camp / "f"), read_topics(camp / "topics.tsv"), read_qrels(camp / qrels)


def _sim(camp, out, *extra):
    return ["cal", "simulate", str(camp / "f"), "-t", str(camp / "topics.tsv"), "-o", str(out), "--no-plot", *extra]


# -- no relevant passage under the binarization -------------------------------------------------------


def test_binary_qrels_with_the_default_binarization_is_an_error(camp):
    """Old behaviour: R = 0, stopped=recall-reached after 25 passages, exit 0, nothing said."""
    f, t, q = _inputs(camp)
    with pytest.raises(InputError) as e:
        simulate_cal(f, t, q)     # passage binarization 2, 3; the qrels have grade 1 only
    assert e.value.rule == "no-relevant" and "grades 2, 3" in e.value.message and "grades for these topics: 0, 1" in e.value.message


def test_cli_no_relevant_is_one_line_exit_2_nothing_written(camp, tmp_path, capsys):
    out = tmp_path / "sim"
    assert run(_sim(camp, out, "-q", str(camp / "qrels.txt"))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "qrels.txt: [no-relevant]" in err[0] and "Traceback" not in err[0]
    assert not out.exists()


def test_binary_qrels_with_relevant_1_simulate(camp, tmp_path, capsys):
    out = tmp_path / "sim"
    assert run(_sim(camp, out, "-q", str(camp / "qrels.txt"), "--relevant", "1", "--json")) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["no_relevant"] == []
    s = pd.read_csv(out / "summary.csv", dtype={"qid": str})
    assert (s["R"] == 40).all() and (s["stopped"] == "recall-reached").all()


def test_some_topics_without_relevant_are_named(camp, tmp_path, capsys):
    f, t, q = _inputs(camp, "graded.txt")
    res = simulate_cal(f, t, q, params=CalParams(relevant=(2, 3)))
    assert res.no_relevant == ["1"]
    s = res.summary.set_index("qid")
    assert s.at["1", "R"] == 0 and s.at["1", "stopped"] == "no-relevant"      # was "recall-reached"
    assert s.at["1", "recall"] is None or np.isnan(s.at["1", "recall"])
    assert s.at["2", "stopped"] == "recall-reached"
    # the command: a warning line on stderr, the list in --json and in the tables' metadata
    out = tmp_path / "sim"
    assert run(_sim(camp, out, "-q", str(camp / "graded.txt"), "--json")) == 0
    cap = capsys.readouterr()
    js = json.loads(cap.out)
    assert js["no_relevant"] == ["1"] and js["threads"][0]["no_relevant"] == 1
    warn = [ln for ln in cap.err.splitlines() if "warning" in ln]
    assert len(warn) == 1 and "1 of 2 topics have no relevant passage when grades 2, 3 count as relevant" in warn[0]
    assert warn[0].endswith(": 1")
    assert read_metadata(out / "log.parquet")["params"]["no_relevant_topics"] == ["1"]


def test_topics_without_relevant():
    g = {"a": [0, 1], "b": [2], "c": []}
    assert topics_without_relevant(g, ["a", "b", "c"], [2, 3]) == ["a", "c"]
    assert topics_without_relevant(g, [], [2, 3]) == []
    with pytest.raises(InputError, match=r"\[no-relevant\].*grades for these topics: 0, 1"):
        topics_without_relevant(g, ["a", "c"], [2, 3], file="q.txt")
    q = pa.table({"qid": ["1", "1", "2"], "docid": ["x", "y", "x"], "rel": [1, -1, 0]})
    assert qrels_grades(q) == {"1": [1], "2": [0]}


# -- --max-effort cuts ----------------------------------------------------------------------------------


def test_max_effort_cut_is_reported(camp, tmp_path, capsys):
    f, t, q = _inputs(camp)
    res = simulate_cal(f, t, q, params=CalParams(relevant=(1,)), max_effort=30)
    assert list(res.cut.columns) == ["qid", "thread", "R", "effort", "found", "recall"]
    assert res.cut["qid"].tolist() == ["1", "2"] and (res.cut["effort"] == 30).all()
    s = res.summary.set_index("qid")
    for qid, rec in zip(res.cut["qid"], res.cut["recall"]):
        assert rec == s.at[qid, "recall"] == s.at[qid, "found"] / 40 < 0.95
    # a curve that ends before the cap is not cut
    assert len(simulate_cal(f, t, q, params=CalParams(relevant=(1,)), max_effort=400).cut) == 0

    out = tmp_path / "sim"
    assert run(_sim(camp, out, "-q", str(camp / "qrels.txt"), "--relevant", "1", "--max-effort", "30", "--json")) == 0
    cap = capsys.readouterr()
    js = json.loads(cap.out)
    assert [c["qid"] for c in js["cut_by_max_effort"]] == ["1", "2"] and js["threads"][0]["cut_by_max_effort"] == 2
    assert js["cut_by_max_effort"][0]["recall"] == pytest.approx(res.cut["recall"].iat[0])
    warn = [ln for ln in cap.err.splitlines() if "warning" in ln]
    assert len(warn) == 1 and "--max-effort 30 cut 2 curves" in warn[0]
    assert f"1/all {res.cut['recall'].iat[0]:.3f}" in warn[0]
    meta = read_metadata(out / "curves.parquet")["params"]
    assert [c["qid"] for c in meta["cut_by_max_effort"]] == ["1", "2"]
    # the human table has the count per thread
    assert run(_sim(camp, tmp_path / "sim2", "-q", str(camp / "qrels.txt"), "--relevant", "1", "--max-effort", "30")) == 0
    assert "cut_by_max_effort" in capsys.readouterr().out


def test_bad_relevant_option(camp, tmp_path):
    assert run(_sim(camp, tmp_path / "x", "-q", str(camp / "qrels.txt"), "--relevant", "a,b")) == 2


def test_relevant_only_outside_the_collection_is_no_relevant(camp, tmp_path, capsys):
    """The qrels grade 2 only passages the collection does not hold: no relevant candidate."""
    q = tmp_path / "outside.txt"
    q.write_text("1 0 nowhere 2\n1 0 d000 0\n2 0 elsewhere 3\n")
    assert run(_sim(camp, tmp_path / "sim", "-q", str(q))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{q}: [no-relevant]" in err[0]
    assert not (tmp_path / "sim").exists()
