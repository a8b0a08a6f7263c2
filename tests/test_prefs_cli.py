"""``qrelkit prefs`` from the command line: the whole flow on a small collection, byte-identical
reruns, the error contract (exit 2, one line, no output written)."""

from __future__ import annotations

import contextlib
import io
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import write_run

from qrelkit.cli import run


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    d = tmp_path_factory.mktemp("prefs-cli")
    runs = d / "runs"
    runs.mkdir()
    rng = np.random.default_rng(3)
    lines = []
    for t in range(1, 9):
        for i in range(12):
            lines.append((str(t), f"d{t}-{i}", int(rng.integers(0, 4))))
    qrels = d / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 {doc} {g}\n" for q, doc, g in lines))
    for r in range(5):
        rows = []
        for t in range(1, 9):
            docs = rng.permutation([f"d{t}-{i}" for i in range(12)])[:6]
            rows += [(str(t), doc, float(10 - k)) for k, doc in enumerate(docs)]
        write_run(runs / f"run{r}.txt", rows, tag=f"run{r}")
    return d


def cli(args):
    return run([str(a) for a in args])


def flow(d, out, capsys):
    """Every prefs command once; returns the JSON summaries."""
    out.mkdir(exist_ok=True)
    js = {}

    def call(name, args):
        capsys.readouterr()
        assert cli(args + ["--json"]) == 0, capsys.readouterr().err
        js[name] = json.loads(capsys.readouterr().out)

    call("sparse", ["prefs", "sparsify", d / "qrels.txt", "--min-rel", "2", "--seed", "1", "-o", out / "sparse.txt"])
    call("pool", ["pool", "top1", d / "runs", "-q", out / "sparse.txt", "-o", out / "pool.parquet"])
    call("pairs", ["prefs", "pairs", out / "pool.parquet", "-o", out / "pairs.parquet"])
    call("tasks", ["prefs", "tasks", out / "pairs.parquet", "-q", out / "sparse.txt", "-o", out / "tasks.parquet",
                   "--export", out / "tasks.jsonl", "--seed", "2"])
    call("sim", ["prefs", "simulate", out / "tasks.parquet", "-q", d / "qrels.txt", "--workers", "3", "--failing", "W03",
                 "--failing-mode", "inverted", "--error-rate", "0.1", "--seed", "2", "-o", out / "answers.csv"])
    call("imp1", ["prefs", "import", out / "answers.csv", "--tasks", out / "tasks.parquet", "-o", out / "j1.parquet",
                  "--reissue-out", out / "tasks-r1.parquet", "--reissue-list", out / "reissue.csv"])
    call("sim2", ["prefs", "simulate", out / "tasks-r1.parquet", "-q", d / "qrels.txt", "--workers", "3", "--assignments",
                  "2", "--seed", "2", "-o", out / "answers-r1.csv"])
    call("imp2", ["prefs", "import", out / "answers.csv", out / "answers-r1.csv", "--tasks", out / "tasks.parquet",
                  "--tasks", out / "tasks-r1.parquet", "-o", out / "judgments.parquet", "--workers-out", out / "workers.csv"])
    call("tour", ["prefs", "tournament", out / "judgments.parquet", "--pool", out / "pool.parquet", "-o",
                  out / "prefs.txt", "--log-out", out / "log.csv", "--queries-out", out / "topics.parquet",
                  "--pending-out", out / "pending.parquet"])
    call("wr", ["prefs", "winratio", out / "judgments.parquet", "--pool", out / "pool.parquet", "-o", out / "wr.csv",
                "--matrix-out", out / "matrix.csv", "--plot", out / "wr.png"])
    call("rescore", ["prefs", "rescore", d / "runs", "-q", d / "qrels.txt", "--prefs", out / "prefs.txt",
                     "--perfect-qrels", out / "sparse.txt", "-o", out / "board.parquet", "--plot", out / "fig5.png",
                     "--ci", "bootstrap", "--seed", "3"])
    call("single", ["prefs", "single", d / "runs", "--run", "run0", "-q", out / "sparse.txt", "-o", out / "single.parquet",
                    "--categories-out", out / "cats.csv", "--judgments", out / "judgments.parquet"])
    return js


OUTPUTS = ["sparse.txt", "pool.parquet", "pairs.parquet", "tasks.parquet", "tasks.jsonl", "answers.csv", "j1.parquet",
           "tasks-r1.parquet", "reissue.csv", "answers-r1.csv", "judgments.parquet", "workers.csv", "prefs.txt",
           "log.csv", "topics.parquet", "pending.parquet", "wr.csv", "matrix.csv", "wr.png", "board.parquet",
           "fig5.png", "single.parquet", "cats.csv"]


@pytest.fixture(scope="module")
def done(collection, tmp_path_factory):
    """The flow run once (the module's other tests use its outputs)."""
    out = tmp_path_factory.mktemp("prefs-flow")
    buf_out, buf_err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf_out), contextlib.redirect_stderr(buf_err):
        js = flow(collection, out / "ok", _Capture(buf_out, buf_err))
    return out / "ok", js


class _Capture:
    """Reads what was written to redirected stdout/stderr since the last call (like capsys)."""

    def __init__(self, out, err):
        self.out, self.err = out, err

    def readouterr(self):
        o, e = self.out.getvalue(), self.err.getvalue()
        self.out.seek(0), self.out.truncate(0), self.err.seek(0), self.err.truncate(0)
        return SimpleNamespace(out=o, err=e)


def test_flow_runs_and_reruns_byte_identical(collection, done, capsys):
    first, a = done
    before = {name: (first / name).read_bytes() for name in OUTPUTS}
    b = flow(collection, first, capsys)  # the same commands again, same paths and seeds
    for name in OUTPUTS:
        assert (first / name).read_bytes() == before[name], name
    assert a == b
    # the flow's own checks
    assert a["pairs"]["pairs"] == a["tasks"]["real_pairs"] and a["tasks"]["test_pairs"] == 3 * a["tasks"]["tasks"]
    assert a["imp1"]["excluded_workers"] == ["W03"] and a["imp1"]["tasks_reissue"] > 0
    assert a["imp2"]["tasks_reissue"] == 0 and a["imp2"]["pairs_judged"] == a["pairs"]["pairs"]
    # re-issued tasks were done by two workers each: agreement is measured on those pairs
    assert a["imp2"]["agreement"]["pairs_multi"] > 0 and a["imp2"]["agreement"]["fleiss_kappa"] is not None
    assert a["tour"]["topics_with_prefs"] == 8
    qrels = pd.read_csv(first / "prefs.txt", sep=" ", header=None, dtype=str)
    assert len(qrels) == a["tour"]["pref_qrels"]
    ex = [json.loads(x) for x in (first / "tasks.jsonl").read_text().splitlines()]
    assert set(ex[0]) == {"task_id", "slot", "qid", "query", "left_docid", "left_text", "right_docid", "right_text", "choice"}
    board = pq.read_table(first / "board.parquet").to_pandas().set_index("run")
    assert board.loc["perfect", "mrr_original"] == 1.0 and len(board) == 6
    assert a["rescore"]["ci"] == "bootstrap"
    meta = json.loads(pq.read_schema(first / "pairs.parquet").metadata[b"qrelkit"])
    assert meta["kind"] == "pref-pairs" and meta["params"]["mode"] == "all-pairs"


def test_errors_exit_2_and_write_nothing(collection, done, tmp_path, capsys):
    out = tmp_path
    ok = done[0]
    # an answer for a task never issued: strict import stops, none of its outputs is written
    ans = pd.read_csv(ok / "answers.csv", dtype=str)
    ans.loc[len(ans)] = ["T99999", "1", "W01", "left"]
    ans.to_csv(out / "bad-answers.csv", index=False)
    capsys.readouterr()
    code = cli(["prefs", "import", out / "bad-answers.csv", "--tasks", ok / "tasks.parquet", "-o", out / "j.parquet",
                "--workers-out", out / "w.csv", "--reissue-out", out / "r.parquet"])
    err = capsys.readouterr().err
    assert code == 2 and f"bad-answers.csv:{len(ans) + 1}: [unknown-item]" in err and err.count("\n") == 1
    assert not any((out / n).exists() for n in ("j.parquet", "w.csv", "r.parquet"))
    # lenient import of the same file works and counts the rule
    capsys.readouterr()
    assert cli(["prefs", "import", out / "bad-answers.csv", "--tasks", ok / "tasks.parquet", "--tasks",
                ok / "tasks-r1.parquet", "--lenient", "-o", out / "j.parquet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rules"]["unknown-item"] == 1
    # a judgment whose winner is neither passage
    j = pq.read_table(ok / "judgments.parquet").to_pandas()
    j.loc[0, "winner"] = "nobody"
    j.to_csv(out / "bad-j.csv", index=False)
    assert cli(["prefs", "tournament", out / "bad-j.csv", "--pool", ok / "pool.parquet", "-o", out / "p.txt",
                "--log-out", out / "log.csv"]) == 2
    assert "[bad-winner]" in capsys.readouterr().err
    assert not (out / "p.txt").exists() and not (out / "log.csv").exists()
    # missing columns, bad options
    assert cli(["prefs", "pairs", ok / "answers.csv"]) == 2
    assert "[missing-column]" in capsys.readouterr().err
    assert cli(["prefs", "pairs", ok / "pool.parquet", "--per-task", "0"]) == 2
    assert cli(["prefs", "tournament", ok / "judgments.parquet", "-o", out / "p.txt"]) == 2
    assert cli(["prefs", "rescore", collection / "runs", "-q", collection / "qrels.txt", "--prefs", ok / "prefs.txt",
                "--ci", "jackknife", "-o", out / "b.csv"]) == 2
    assert cli(["prefs", "simulate", ok / "tasks.parquet", "-q", collection / "qrels.txt", "--failing", "W09",
                "-o", out / "a.csv"]) == 2
    assert not any((out / n).exists() for n in ("p.txt", "b.csv", "a.csv"))


def test_maintenance_round_cli(collection, done, tmp_path, capsys):
    out = tmp_path
    ok = done[0]
    # round 1 pooled runs 0-2 only; runs 3-4 surface new passages
    r1 = out / "runs1"
    r1.mkdir()
    for i in range(3):
        (r1 / f"run{i}.txt").write_bytes((collection / "runs" / f"run{i}.txt").read_bytes())
    capsys.readouterr()
    assert cli(["pool", "top1", r1, "-q", ok / "sparse.txt", "-o", out / "pool1.parquet"]) == 0
    assert cli(["prefs", "pairs", out / "pool1.parquet", "--best", ok / "prefs.txt", "--previous", out / "pool1.parquet",
                "-o", out / "none.parquet", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pairs"] == 0  # nothing new surfaced
    assert cli(["prefs", "pairs", ok / "pool.parquet", "--best", ok / "prefs.txt", "--previous", out / "pool1.parquet",
                "-o", out / "m.parquet", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    m = pq.read_table(out / "m.parquet").to_pandas()
    best = pd.read_csv(ok / "prefs.txt", sep=" ", header=None, dtype=str, names=["qid", "it", "docid", "rel"])
    seen = set(zip(pq.read_table(out / "pool1.parquet")["qid"].to_pylist(), pq.read_table(out / "pool1.parquet")["docid"].to_pylist()))
    bset = set(zip(best["qid"], best["docid"]))
    assert s["mode"] == "maintenance" and s["pairs"] == len(m) > 0
    for q, a, b in zip(m["qid"], m["doc_a"], m["doc_b"]):
        new = [x for x in (a, b) if (q, x) not in bset]
        assert len(new) == 1 and (q, new[0]) not in seen and ((q, a) in bset or (q, b) in bset)
    assert cli(["prefs", "tasks", out / "m.parquet", "-q", ok / "sparse.txt", "--prefix", "M", "-o", out / "mt.parquet"]) == 0
    assert cli(["prefs", "simulate", out / "mt.parquet", "-q", collection / "qrels.txt", "-o", out / "ma.csv"]) == 0
    assert cli(["prefs", "import", out / "ma.csv", "--tasks", out / "mt.parquet", "-o", out / "mj.parquet"]) == 0
    capsys.readouterr()
    assert cli(["prefs", "tournament", out / "mj.parquet", "--pairs", out / "m.parquet", "--best", ok / "prefs.txt",
                "-o", out / "prefs2.txt", "--json"]) == 0
    t = json.loads(capsys.readouterr().out)
    assert t["topics"] == 8 and "topics_best_changed" in t
    new_best = pd.read_csv(out / "prefs2.txt", sep=" ", header=None, dtype=str, names=["qid", "it", "docid", "rel"])
    changed = {q for q in set(best["qid"]) if set(best[best["qid"] == q]["docid"]) != set(new_best[new_best["qid"] == q]["docid"])}
    assert sorted(changed) == sorted(t["best_changed"])
