"""Fault injection for a campaign (issue 19, "How it is checked"): kinds of bad input and operator
error, each at the door of ``campaign init``, ``import``, ``run`` and the other campaign commands.

For every fault: exit 2, one line on stderr naming the rule, no traceback, and the campaign's
store and files byte-identical to before the bad command (the advance lock file excepted: it
names its last holder). Then the campaign is finished, and its final files are compared with
those of a clean run of the same campaign (``finished3``)."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest

from conftest import ROOT, campaign_init_args
from qrelkit.cli import run as cli

FINAL = ["qrels-passages.txt", "qrels-expanded.txt", "qrels-documents.txt", "expansion.csv", "leaderboard.csv",
         "eval-per-query.csv", "eval-summary.csv", "reuse-summary.csv", "reuse-runs.csv", "report.md"]


@dataclass
class Env:
    """What a fault needs: the inputs (a copy of sim3), the campaign, a scratch folder."""

    sim: Path
    camp: Path
    tmp: Path

    @property
    def protocol(self) -> Path:
        """The campaign's protocol file: a copy of configs/trec-dl-2022.toml beside the inputs."""
        p = self.sim / "protocol.toml"
        if not p.exists():
            shutil.copy(ROOT / "configs" / "trec-dl-2022.toml", p)
        return p

    def init(self, d: Path | None = None, **swap: Path) -> list[str]:
        args = campaign_init_args(self.sim, d or self.camp)
        args[args.index("-c") + 1] = str(self.protocol)
        for key, path in swap.items():
            flag = {"corpus": "--corpus", "topics": "-t", "runs": "--runs", "manifest": "-m", "config": "-c"}[key]
            args[args.index(flag) + 1] = str(path)
        return args


def _snapshot(d: Path) -> dict[str, str]:
    """Every file of a folder by its SHA-256, but for the advance lock (it names its last holder)
    and SQLite's housekeeping that carries no data: the shared-memory index and an empty WAL,
    which a read-only reader of a WAL store leaves behind."""
    if not d.exists():
        return {}
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file() and p.name != "advance.lock" and not p.name.endswith("-shm")
            and not (p.name.endswith("-wal") and p.stat().st_size == 0)}


def _write(path: Path, data: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


# ------------------------------------------------------------------------------- faults at init

def _nonempty_folder(e: Env) -> list[str]:
    d = _write(e.tmp / "busy" / "notes.txt", "mine\n").parent
    return e.init(d)


def _corpus_bad_utf8(e: Env) -> list[str]:
    lines = (e.sim / "corpus.jsonl").read_bytes().splitlines(keepends=True)
    lines[5] = lines[5].replace(b'"passage": "', b'"passage": "\xff\xfe', 1)
    return e.init(corpus=_write(e.tmp / "bad-utf8.jsonl", b"".join(lines)))


def _corpus_id_with_space(e: Env) -> list[str]:
    lines = (e.sim / "corpus.jsonl").read_text().splitlines(keepends=True)
    lines[7] = lines[7].replace('"pid": "', '"pid": "a b', 1)
    return e.init(corpus=_write(e.tmp / "space.jsonl", "".join(lines)))


def _binary_manifest(e: Env) -> list[str]:
    return e.init(manifest=_write(e.tmp / "manifest.csv", bytes(range(256)) * 4))


def _topics_not_tsv(e: Env) -> list[str]:
    return e.init(topics=_write(e.tmp / "topics.tsv", "1001\n"))


def _protocol(e: Env, name: str, old: str, new: str) -> Path:
    text = e.protocol.read_text()
    assert old in text, old
    return _write(e.tmp / name, text.replace(old, new, 1))


def _config_unknown_key(e: Env) -> list[str]:
    return e.init(config=_protocol(e, "typo.toml", "depth = 10 ", "dpth = 10 "))


def _names_share_a_file(e: Env) -> list[str]:
    return e.init(config=_protocol(e, "names.toml", "[campaign]\n", '[campaign]\nassessors = ["a b", "a_b"]\n'))


def _too_few_assessors(e: Env) -> list[str]:
    return e.init(config=_protocol(e, "few.toml", "assessors_per_item = 1", "assessors_per_item = 5"))


def _skip_a_required_stage(e: Env) -> list[str]:
    return e.init(config=_protocol(e, "skip.toml", "[campaign]\n", '[campaign]\nskip = ["validate"]\n'))


def _run_not_in_manifest(e: Env) -> list[str]:
    runs = e.tmp / "runs-extra"
    shutil.copytree(e.sim / "runs", runs)
    first = sorted(runs.iterdir())[0].read_text().splitlines()
    _write(runs / "zz-unnamed.run", "".join(ln.rsplit(" ", 1)[0] + " zz-unnamed\n" for ln in first))
    return e.init(runs=runs)


def _manifest_run_without_file(e: Env) -> list[str]:
    runs = e.tmp / "runs-fewer"
    shutil.copytree(e.sim / "runs", runs)
    sorted(runs.iterdir())[-1].unlink()
    return e.init(runs=runs)


# (name, argv maker, rule); the campaign must not exist after any of them
INIT_FAULTS: list[tuple[str, Callable[[Env], list[str]], str]] = [
    ("a folder with a user's files", _nonempty_folder, "folder-not-empty"),
    ("a corpus with invalid UTF-8", _corpus_bad_utf8, "not-utf8"),
    ("a passage id with a space", _corpus_id_with_space, "bad-id"),
    ("a binary manifest", _binary_manifest, "not-utf8"),
    ("topics without text", _topics_not_tsv, ""),
    ("a typo in the protocol file", _config_unknown_key, "unknown-key"),
    ("assessor names that share a batch file", _names_share_a_file, "assessor-names-collide"),
    ("more assessors per item than assessors", _too_few_assessors, "assessors-too-few"),
    ("a stage that always runs skipped", _skip_a_required_stage, "skip-required-stage"),
    ("a run file the manifest does not name", _run_not_in_manifest, "not-in-manifest"),
    ("a manifest run without a run file", _manifest_run_without_file, "missing-run"),
]


# ---------------------------------------------------------------- faults of a campaign at work

def _judged(e: Env) -> pd.DataFrame:
    """The batches out, answered by the oracle (what an assessor's file holds)."""
    from qrelkit.io.qrels import read_qrels
    from qrelkit.simulate.oracle import judge_batches

    files = sorted((e.camp / "batches").rglob("*.csv"))
    df = pd.concat([pd.read_csv(f, dtype=str, keep_default_na=False) for f in files], ignore_index=True)
    return judge_batches(df, read_qrels(e.sim / "qrels.txt"))[["batch_id", "qid", "docid", "assessor", "grade"]]


def _import(e: Env, df: pd.DataFrame, name: str = "done.csv") -> list[str]:
    f = e.tmp / name
    df.to_csv(f, index=False)
    return ["campaign", "import", str(e.camp), str(f)]


def _typo_assessor(e: Env) -> list[str]:
    df = _judged(e)
    df.loc[df.index[-1], "assessor"] = df["assessor"].iat[-1].lower()
    return _import(e, df)


def _stranger(e: Env) -> list[str]:
    return _import(e, _judged(e).assign(assessor="mallory"))


def _unknown_batch(e: Env) -> list[str]:
    df = _judged(e)
    df.loc[df.index[3], "batch_id"] = "1001/scren"
    return _import(e, df)


def _grade_outside_scale(e: Env) -> list[str]:
    df = _judged(e)
    df.loc[df.index[2], "grade"] = 7
    return _import(e, df)


def _binary_judgments(e: Env) -> list[str]:
    return ["campaign", "import", str(e.camp), str(_write(e.tmp / "judged.csv", b"\x00\x01\xff" * 300))]


def _changed_topics(e: Env) -> list[str]:
    shutil.copy(e.sim / "topics.tsv", e.tmp / "topics.keep")
    with open(e.sim / "topics.tsv", "a") as fh:
        fh.write("9999\textra topic\n")
    return ["campaign", "run", str(e.camp)]


def _restore_topics(e: Env) -> None:
    shutil.copy(e.tmp / "topics.keep", e.sim / "topics.tsv")


def _edited_protocol(e: Env) -> list[str]:
    shutil.copy(e.protocol, e.tmp / "protocol.keep")
    e.protocol.write_text(e.protocol.read_text().replace("depth = 10 ", "depth = 20 ", 1))
    return ["campaign", "run", str(e.camp)]


def _restore_protocol(e: Env) -> None:
    shutil.copy(e.tmp / "protocol.keep", e.protocol)


def _status_over_manifest(e: Env) -> list[str]:
    return ["campaign", "status", str(e.camp), "-o", str(e.sim / "manifest.csv")]


def _status_in_campaign(e: Env) -> list[str]:
    return ["campaign", "status", str(e.camp), "-o", str(e.camp / "pool.parquet")]


def _report_over_notes(e: Env) -> list[str]:
    _write(e.tmp / "NOTES.md", "my notes\n")
    return ["campaign", "report", str(e.camp), "-o", str(e.tmp / "NOTES.html")]


def _bad_until(e: Env) -> list[str]:
    return ["campaign", "run", str(e.camp), "--until", "pol"]


def _unknown_judgment(e: Env) -> list[str]:
    return ["campaign", "judgments", "set", str(e.camp), "--topic", "1001", "--docid", "nope", "--assessor", "A01",
            "--grade", "1"]


def _busy(e: Env) -> list[str]:
    import threading

    import qrelkit.campaign.lock as lock

    ready, stop = threading.Event(), threading.Event()

    def hold() -> None:
        with lock.advance_lock(e.camp, what="a campaign run"):
            ready.set()
            stop.wait(30)

    e.stop = stop
    e.thread = threading.Thread(target=hold, daemon=True)
    e.thread.start()
    ready.wait(10)
    e.wait_before, lock.ADVANCE_WAIT_S = lock.ADVANCE_WAIT_S, 0.2
    return ["campaign", "run", str(e.camp)]


def _release(e: Env) -> None:
    import qrelkit.campaign.lock as lock

    lock.ADVANCE_WAIT_S = e.wait_before
    e.stop.set()
    e.thread.join(10)


# (name, argv maker, rule, undo after the check or None)
WORK_FAULTS: list[tuple[str, Callable[[Env], list[str]], str, Callable[[Env], None] | None]] = [
    ("an assessor's name mistyped", _typo_assessor, "not-assigned", None),
    ("a stranger's judgments", _stranger, "not-assigned", None),
    ("an unknown batch", _unknown_batch, "unknown-batch", None),
    ("a grade outside the scale", _grade_outside_scale, "grade-outside-scale", None),
    ("a binary judgments file", _binary_judgments, "not-utf8", None),
    ("the topics edited after init", _changed_topics, "input-changed", _restore_topics),
    ("a value of the protocol file edited after init", _edited_protocol, "input-changed", _restore_protocol),
    ("status written over the manifest", _status_over_manifest, "output-is-input", None),
    ("status written into the campaign", _status_in_campaign, "output-in-campaign", None),
    ("the report's twin over a user's file", _report_over_notes, "output-exists", None),
    ("an unknown stage for --until", _bad_until, "bad-option", None),
    ("a correction of a judgment nobody made", _unknown_judgment, "unknown-judgment", None),
    ("another process advancing the campaign", _busy, "campaign-busy", _release),
]


def _fails_cleanly(argv: list[str], rule: str, capsys, lines: int = 1) -> str:
    capsys.readouterr()
    rc = cli(argv)
    err = capsys.readouterr().err
    assert rc == 2, (argv, err)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert len(err.strip().splitlines()) == lines, err
    assert not rule or f"[{rule}]" in err, (rule, err)
    assert err.isprintable() or all(c.isprintable() or c == "\n" for c in err)
    return err


def test_faults_at_the_door_change_nothing_and_the_campaign_finishes_as_a_clean_one(sim3, finished3, tmp_path,
                                                                                    capsys):
    sim = tmp_path / "sim"
    shutil.copytree(sim3, sim)
    e = Env(sim, tmp_path / "camp", tmp_path / "scratch")
    e.tmp.mkdir()
    kinds = 0
    for name, make, rule in INIT_FAULTS:
        argv = make(e)
        target = Path(argv[2])
        before = _snapshot(target)
        _fails_cleanly(argv, rule, capsys)
        assert not (target / "campaign.db").exists(), name
        assert _snapshot(target) == before, name
        kinds += 1
    assert cli(e.init()) == 0
    with open(e.protocol, "a") as fh:  # a comment: not a fault, the campaign goes on
        fh.write("# edited after init: a comment only\n")
    assert cli(["campaign", "run", str(e.camp)]) == 0  # waiting for the screening batches
    for name, make, rule, undo in WORK_FAULTS:
        before = _snapshot(e.camp)
        argv = make(e)
        _fails_cleanly(argv, rule, capsys, lines=2 if rule == "campaign-busy" else 1)
        if undo is not None:
            undo(e)
        assert _snapshot(e.camp) == before, name
        kinds += 1
    assert cli(["campaign", "run", str(e.camp), "--oracle", str(sim / "qrels.txt"), "--seed", "7"]) == 0
    before = _snapshot(e.camp)
    _fails_cleanly(["campaign", "run", str(e.camp), "--oracle", str(sim / "qrels.txt"), "--seed", "8"], "oracle-changed",
                   capsys)
    assert _snapshot(e.camp) == before
    kinds += 1
    assert kinds >= 12
    for f in FINAL:
        assert (e.camp / f).read_bytes() == (finished3 / f).read_bytes(), f
