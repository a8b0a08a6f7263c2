"""Every failure is one line, exit 2, before the work; no command destroys an input.

Every command with an output option is run with each class of failure: a missing input, an
output that cannot be written (in /sys, under a file, in a read-only folder), an output that is
one of its inputs (directly, through a symlink, through a hard link), an output that is an
existing judging store, and for the store commands a damaged store (random bytes over a page in
the middle, an empty file). Each must exit 2 with exactly one line on stderr in the form
``qrelkit: error: FILE[:LINE]: [rule] message``, no traceback, no output left, and the inputs
byte-identical afterwards. The command list comes from the Typer app: a new command with an
output option fails :func:`test_every_command_with_an_output_is_in_the_table` until it is added.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import random
import re
import shutil
import subprocess
import sys
import time
import typing
from pathlib import Path

import pytest

from qrelkit.cli import app, run

# argv per command; {OUT} is the output under test, ALIAS names the input an output is aliased to.
# The paths only need to exist: the checks run before any input is read.
TABLE = {
    "runs validate": (["runs", "validate", "{run}", "-o", "{OUT}"], "run"),
    "runs canonicalize": (["runs", "canonicalize", "{run}", "-o", "{OUT}"], "run"),
    "pool select": (["pool", "select", "-m", "{manifest}", "-o", "{OUT}"], "manifest"),
    "pool make": (["pool", "make", "{run}", "-o", "{OUT}"], "run"),
    "pool depth": (["pool", "depth", "{run}", "-o", "{OUT}"], "run"),
    "pool top1": (["pool", "top1", "{run}", "-o", "{OUT}"], "run"),
    "pool fused": (["pool", "fused", "{run}", "-o", "{OUT}"], "run"),
    "pool fractional": (["pool", "fractional", "{run}", "--corpus", "{corpus}", "-o", "{OUT}"], "corpus"),
    "pool stats": (["pool", "stats", "{pool}", "-o", "{OUT}"], "pool"),
    "batch make": (["batch", "make", "{pool}", "-o", "{OUT}"], "pool"),
    "batch import": (["batch", "import", "{judg}", "-o", "{OUT}"], "judg"),
    "dedupe cluster": (["dedupe", "cluster", "{corpus}", "-o", "{OUT}"], "corpus"),
    "dedupe stats": (["dedupe", "stats", "{classes}", "-o", "{OUT}"], "classes"),
    "dedupe import-nist": (["dedupe", "import-nist", "{truth}", "-o", "{OUT}"], "truth"),
    "dedupe assign": (["dedupe", "assign", "{corpus}", "--index", "{folder}", "-o", "{OUT}"], "corpus"),
    "dedupe runs": (["dedupe", "runs", "{run}", "--classes", "{classes}", "-o", "{OUT}"], "run"),
    "dedupe expand-qrels": (["dedupe", "expand-qrels", "{qrels}", "--classes", "{classes}", "-o", "{OUT}"], "qrels"),
    "dedupe evaluate": (["dedupe", "evaluate", "{classes}", "--truth", "{truth}", "--corpus", "{corpus}", "-o", "{OUT}"],
                        "classes"),
    "simulate campaign": (["simulate", "campaign", "-c", "{config}", "-o", "{OUT}"], "config"),
    "simulate collection": (["simulate", "collection", "-c", "{config}", "-o", "{OUT}"], "config"),
    "simulate judge": (["simulate", "judge", "{judg}", "-q", "{qrels}", "-o", "{OUT}"], "qrels"),
    "cal import": (["cal", "import", "{store}", "{judg}", "--conflicts-out", "{OUT}"], "store"),
    "cal export": (["cal", "export", "{store}", "-o", "{OUT}"], "store"),
    "cal status": (["cal", "status", "{store}", "-o", "{OUT}"], "store"),
    "cal replay": (["cal", "replay", "{store}", "-r", "knee", "-o", "{OUT}"], "store"),
    "cal features": (["cal", "features", "{corpus}", "-o", "{OUT}"], "corpus"),
    "cal next": (["cal", "next", "{store}", "-f", "{folder}", "-o", "{OUT}"], "store"),
    "cal simulate": (["cal", "simulate", "{corpus}", "-t", "{topics}", "-q", "{qrels}", "-o", "{OUT}"], "qrels"),
    "labels aggregate": (["labels", "aggregate", "{judg}", "-o", "{OUT}"], "judg"),
    "labels agreement": (["labels", "agreement", "{judg}", "-o", "{OUT}"], "judg"),
    "labels binarize": (["labels", "binarize", "{qrels}", "-o", "{OUT}"], "qrels"),
    "labels expand": (["labels", "expand", "{qrels}", "--classes", "{classes}", "-o", "{OUT}"], "classes"),
    "labels propagate": (["labels", "propagate", "{qrels}", "--corpus", "{corpus}", "-o", "{OUT}"], "qrels"),
    "labels compare": (["labels", "compare", "{qrels}", "{judg}", "-o", "{OUT}"], "qrels"),
    "eval score": (["eval", "score", "{run}", "-q", "{qrels}", "-o", "{OUT}"], "qrels"),
    "eval compare": (["eval", "compare", "{run}", "-q", "{qrels}", "-o", "{OUT}"], "run"),
    "eval duplicates": (["eval", "duplicates", "{run}", "-q", "{qrels}", "--classes", "{classes}", "-o", "{OUT}"], "run"),
    "eval correlate": (["eval", "correlate", "{judg}", "{qrels}", "-o", "{OUT}"], "judg"),
    "prefs pairs": (["prefs", "pairs", "{pool}", "-o", "{OUT}"], "pool"),
    "prefs tasks": (["prefs", "tasks", "{judg}", "-q", "{qrels}", "-o", "{OUT}"], "judg"),
    "prefs simulate": (["prefs", "simulate", "{judg}", "-q", "{qrels}", "-o", "{OUT}"], "qrels"),
    "prefs import": (["prefs", "import", "{judg}", "--tasks", "{pool}", "-o", "{OUT}"], "pool"),
    "prefs tournament": (["prefs", "tournament", "{judg}", "-o", "{OUT}"], "judg"),
    "prefs winratio": (["prefs", "winratio", "{judg}", "--pool", "{pool}", "-o", "{OUT}"], "judg"),
    "prefs rescore": (["prefs", "rescore", "{run}", "-q", "{qrels}", "--prefs", "{judg}", "-o", "{OUT}"], "run"),
    "prefs single": (["prefs", "single", "{run}", "--run", "x", "-q", "{qrels}", "-o", "{OUT}"], "run"),
    "prefs sparsify": (["prefs", "sparsify", "{qrels}", "-o", "{OUT}"], "qrels"),
    "reuse leave-out": (["reuse", "leave-out", "{run}", "-q", "{qrels}", "-o", "{OUT}"], "run"),
    "study budget": (["study", "budget", "{run}", "-q", "{qrels}", "-o", "{OUT}"], "run"),
    "campaign status": (["campaign", "status", "{campdir}", "-o", "{OUT}"], "campstore"),
    "campaign report": (["campaign", "report", "{campdir}", "-o", "{OUT}"], "campstore"),
    "campaign judgments list": (["campaign", "judgments", "list", "{campdir}", "-o", "{OUT}"], "campstore"),
    "campaign export": (["campaign", "export", "{campdir}", "-o", "{OUT}"], "campstore"),
    "campaign prefs export": (["campaign", "prefs", "export", "{campdir}", "-o", "{OUT}", "--tasks-out", "{tasksout}"],
                              "campstore"),
}
FOLDER_OUTPUT = {"pool stats", "simulate campaign", "simulate collection", "cal features", "cal simulate", "reuse leave-out",
                 "study budget"}
STORE_COMMANDS = {name: argv for name, (argv, _) in TABLE.items() if "{store}" in argv}
STORE_COMMANDS["cal init"] = ["cal", "init", "{store}", "-t", "{topics}"]
# options that write, besides -o/--output and --*-out
OUTPUT_NAMES = {"--plot", "--export", "--reissue-export", "--reissue-list", "--per-assessor-dir"}
LINE = re.compile(r"^qrelkit: error: (?P<file>\S[^\n]*?)(?::\d+)?: \[(?P<rule>[a-z][a-z0-9-]*)\] \S[^\n]*\n$")


def _is_path(hint) -> bool:
    args = typing.get_args(hint)
    return hint is Path or Path in args or any(Path in typing.get_args(a) for a in args)


def output_options() -> dict[str, list[str]]:
    """Command name -> its output options, from the Typer app."""
    found = {}
    groups = [(g.name, g) for g in app.registered_groups]
    while groups:  # nested groups too ("campaign prefs export")
        prefix, group = groups.pop(0)
        groups += [(f"{prefix} {g.name}", g) for g in group.typer_instance.registered_groups]
        for cmd in group.typer_instance.registered_commands:
            name = f"{prefix} {cmd.name or cmd.callback.__name__}"
            hints = typing.get_type_hints(cmd.callback)
            opts = []
            for pname, p in inspect.signature(cmd.callback).parameters.items():
                decls = getattr(p.default, "param_decls", None) or ()
                long = [d for d in decls if d.startswith("--")]
                if _is_path(hints[pname]) and long and (long[0] == "--output" or long[0].endswith("-out")
                                                         or long[0] in OUTPUT_NAMES):
                    opts.append(long[0])
            if opts:
                found[name] = opts
    return found


def test_every_command_with_an_output_is_in_the_table():
    found = output_options()
    assert len(found) >= 40
    missing = sorted(set(found) - set(TABLE))
    assert not missing, f"commands with an output option missing from TABLE in {__file__}: {missing}"
    assert not sorted(set(TABLE) - set(found)), "TABLE lists commands that have no output option"


@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    """A small simulated campaign, a judging store with its judgments, a pool and classes."""
    root = tmp_path_factory.mktemp("failures")
    c = root / "c"
    assert run(["simulate", "campaign", "-o", str(c), "--passages", "2000", "--topics", "3", "--seed", "1"]) == 0
    judg = root / "judgments.csv"
    rows = [ln.split() for ln in (c / "qrels.txt").read_text().splitlines()]
    judg.write_text("qid,docid,assessor,grade,batch_id\n" + "".join(f"{q},{d},A01,{g},{q}-1\n" for q, _, d, g in rows))
    store = root / "campaign.db"
    assert run(["cal", "init", str(store), "-t", str(c / "topics.tsv")]) == 0
    assert run(["cal", "import", str(store), str(judg)]) == 0
    assert run(["pool", "depth", str(c / "runs"), "-o", str(root / "pool.parquet")]) == 0
    assert run(["dedupe", "cluster", str(c / "corpus.jsonl"), "-o", str(root / "classes.parquet")]) == 0
    (root / "config.toml").write_text("")
    (root / "folder").mkdir()
    (root / "folder" / "x.txt").write_text("x\n")
    (root / "camp").mkdir()  # a campaign folder: the checks run before its store is opened
    shutil.copy(store, root / "camp" / "campaign.db")
    return {
        "root": root, "run": sorted((c / "runs").iterdir())[0], "corpus": c / "corpus.jsonl", "qrels": c / "qrels.txt",
        "topics": c / "topics.tsv", "manifest": c / "manifest.csv", "truth": c / "neardup_truth.tsv", "judg": judg,
        "store": store, "pool": root / "pool.parquet", "classes": root / "classes.parquet",
        "config": root / "config.toml", "folder": root / "folder", "campdir": root / "camp",
        "campstore": root / "camp" / "campaign.db", "tasksout": root / "never-written" / "tasks.parquet",
    }


def _snapshot(root: Path) -> dict[str, str]:
    """Hash of every file under root, SQLite's journal files aside (a read-only open may leave
    empty ones; they are not inputs)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


def _argv(template: list[str], paths: dict) -> list[str]:
    return [a.format(**{k: str(v) for k, v in paths.items()}) if "{" in a else a for a in template]


def _fails_cleanly(argv, capsys, rules: set[str], expect_file: str | None = None) -> str:
    capsys.readouterr()
    code = run(argv)
    err = capsys.readouterr().err
    assert code == 2, (argv, code, err)
    assert "Traceback" not in err, err
    assert err.count("\n") == 1, err
    m = LINE.match(err)
    assert m, err
    assert m["rule"] in rules, (argv, err)
    if expect_file is not None:
        assert m["file"] == expect_file, err
    return err


def _no_leftovers(folder: Path, before: set[str]) -> None:
    now = {p.name for p in folder.iterdir()} if folder.is_dir() else set()
    assert now <= before | {n for n in now if n.endswith(("-wal", "-shm"))}, sorted(now - before)


@pytest.fixture
def unchanged(fx):
    before = _snapshot(fx["root"])
    yield
    assert _snapshot(fx["root"]) == before, "an input changed"


CLASSES = ["missing-input", "sys", "under-a-file", "read-only-folder", "same-path", "symlink", "hardlink", "store"]


@pytest.mark.parametrize("klass", CLASSES)
@pytest.mark.parametrize("name", sorted(TABLE))
def test_failure_is_one_line_before_the_work(name, klass, fx, tmp_path, capsys, unchanged):
    template, alias = TABLE[name]
    paths = dict(fx)
    out = tmp_path / "out" / ("result" if name in FOLDER_OUTPUT else "result.parquet")
    rules = {"unwritable-output"}
    if klass == "missing-input":
        key = [k for k in fx if "{" + k + "}" in template][0]
        paths[key] = tmp_path / f"missing-{key}"
        rules = {"unreadable", "not-a-store"}
    elif klass == "sys":
        out = Path("/sys/qrelkit-test-output")
    elif klass == "under-a-file":
        (tmp_path / "afile").write_text("x")
        out = tmp_path / "afile" / "sub" / "result.parquet"
    elif klass == "read-only-folder":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders (the /sys case covers root)")
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        out = ro / "result.parquet"
    elif klass == "same-path":
        out, rules = fx[alias], {"output-is-input"}
    elif klass == "symlink":
        out, rules = tmp_path / "link", {"output-is-input"}
        out.symlink_to(fx[alias])
    elif klass == "hardlink":
        out, rules = tmp_path / "hard", {"output-is-input"}
        os.link(fx[alias], out)
    elif klass == "store":  # another campaign's store given as the output
        out = tmp_path / "other.db"
        shutil.copy(fx["store"], out)
        rules = {"unwritable-output"} if name in FOLDER_OUTPUT else {"output-is-store"}
    paths["OUT"] = out
    existed = out.exists() or out.is_symlink()
    before_out = _snapshot(out.parent) if out.parent.is_dir() and str(out.parent) != "/sys" else None
    leftovers = {p.name for p in out.parent.iterdir()} if out.parent.is_dir() and before_out is not None else set()
    _fails_cleanly(_argv(template, paths), capsys, rules)
    if not existed:
        assert not out.exists()
    if before_out is not None:
        _no_leftovers(out.parent, leftovers)
        assert _snapshot(out.parent) == before_out
    if klass == "read-only-folder":
        (tmp_path / "ro").chmod(0o755)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_no_output_option_may_name_an_input(name, fx, tmp_path, capsys, unchanged):
    """Every output option of every command, pointed at one of the command's inputs."""
    template, alias = TABLE[name]
    for opt in output_options()[name]:
        paths = {**fx, "OUT": tmp_path / ("o" if name in FOLDER_OUTPUT else "o.parquet")}
        argv = _argv(template, paths)
        if opt in argv or (opt == "--output" and "-o" in argv):
            i = argv.index(opt if opt in argv else "-o")
            argv[i + 1] = str(fx[alias])
        else:
            argv += [opt, str(fx[alias])]
        _fails_cleanly(argv, capsys, {"output-is-input"}, expect_file=str(fx[alias]))
        assert not (tmp_path / "o.parquet").exists() and not (tmp_path / "o").exists()


def _damage(path: Path, seed: int = 1) -> None:
    """Random bytes over one whole page in the middle of a SQLite file."""
    page = 4096
    middle = (path.stat().st_size // page) // 2
    with open(path, "r+b") as fh:
        fh.seek(middle * page)
        fh.write(random.Random(seed).randbytes(page))


@pytest.mark.parametrize("klass", ["damaged", "empty", "not-sqlite"])
@pytest.mark.parametrize("name", sorted(STORE_COMMANDS))
def test_bad_store_is_refused_and_never_written(name, klass, fx, tmp_path, capsys, unchanged):
    store = tmp_path / "campaign.db"
    if klass == "damaged":
        shutil.copy(fx["store"], store)
        _damage(store)
        rules = {"store-damaged"}
    elif klass == "empty":
        if name == "cal init":
            pytest.skip("an empty file is a new store for 'cal init'")
        store.write_bytes(b"")
        rules = {"not-a-store"}
    else:
        store.write_bytes(b"qid\tdocid\n" * 50)
        rules = {"not-a-store"}
    before = store.read_bytes()
    out = tmp_path / "out.parquet"
    argv = _argv(STORE_COMMANDS[name], {**fx, "store": store, "OUT": out})
    if name == "cal import":  # the judgments are the input; the store is written
        argv = argv[:argv.index("--conflicts-out")]
    _fails_cleanly(argv, capsys, rules, expect_file=str(store))
    assert store.read_bytes() == before, "the store was written"
    assert not out.exists()


def test_damaged_store_check_is_sqlites(fx, tmp_path):
    """The damage the test makes is what SQLite itself reports (the library raises store-damaged)."""
    from qrelkit.store import open_store
    from qrelkit.errors import InputError

    store = tmp_path / "s.db"
    shutil.copy(fx["store"], store)
    with open_store(store) as s:  # sound before the damage
        assert s.counts()["judgments"] > 0
    _damage(store)
    with pytest.raises(InputError, match=r"\[store-damaged\]"):
        open_store(store)
    with pytest.raises(InputError, match=r"\[store-damaged\]"):
        open_store(store, readonly=True)


def test_lock_wait_names_the_holder(fx, tmp_path, capsys):
    """A writer that cannot get the lock within --lock-timeout fails in one line naming the
    holder's operation; the waiting import wrote nothing."""
    store = tmp_path / "s.db"
    shutil.copy(fx["store"], store)
    ready = tmp_path / "ready"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time, pathlib\n"
        "from qrelkit.store import open_store\n"
        "s = open_store(sys.argv[1], operation='test holder')\n"
        "with s.transaction():\n"
        "    pathlib.Path(sys.argv[2]).write_text('x')\n"
        "    time.sleep(30)\n"), str(store), str(ready)],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    try:
        for _ in range(300):
            if ready.exists():
                break
            time.sleep(0.05)
        assert ready.exists(), "the holder did not take the lock"
        f = tmp_path / "j.csv"
        f.write_text("qid,docid,assessor,grade,batch_id\n" + fx["judg"].read_text().splitlines()[1].replace("A01", "B09") + "\n")
        t0 = time.monotonic()
        err = _fails_cleanly(["cal", "import", str(store), str(f), "--lock-timeout", "0.5"], capsys, {"store-locked"},
                             expect_file=str(store))
        assert time.monotonic() - t0 < 20
        assert "'test holder'" in err and f"pid {holder.pid}" in err, err
    finally:
        holder.kill()
        holder.wait()
    from qrelkit.store import open_store

    with open_store(store, readonly=True) as s:
        assert "B09" not in set(s.judgments.log()["assessor"])


def test_lock_timeout_is_a_library_parameter(fx, tmp_path):
    from qrelkit.store import open_store
    from qrelkit.errors import InputError

    store = tmp_path / "s.db"
    shutil.copy(fx["store"], store)
    with open_store(store, operation="first writer") as a, a.transaction():
        b = open_store(store, timeout=0.2)
        t0 = time.monotonic()
        with pytest.raises(InputError, match=r"\[store-locked\] waited 0.2 s .*'first writer'"):
            b.topics.add(["99"])
        assert time.monotonic() - t0 < 5
        b.close()


def test_reading_commands_open_the_store_read_only(fx, tmp_path, capsys):
    """cal status / export / replay on a store in a read-only file: they read; an empty file
    stays empty (no SQLite header written)."""
    store = tmp_path / "s.db"
    shutil.copy(fx["store"], store)
    store.chmod(0o444)
    for argv in (["cal", "status", str(store)], ["cal", "export", str(store), "-o", str(tmp_path / "q.txt")],
                 ["cal", "replay", str(store), "-r", "knee"]):
        assert run(argv) == 0, capsys.readouterr().err
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    assert run(["cal", "status", str(empty)]) == 2
    assert empty.read_bytes() == b""


def test_os_error_with_a_file_name_is_one_line(tmp_path, capsys, monkeypatch):
    """A file-system error on a named file reaching the command line is one line, exit 2; any
    other exception keeps its traceback (a bug)."""
    import qrelkit.cli.labels as labels_cli

    def boom(*a, **k):
        raise PermissionError(13, "Permission denied", str(tmp_path / "x.txt"))

    q = tmp_path / "q.txt"
    q.write_text("1 0 d1 1\n")
    monkeypatch.setattr(labels_cli, "write_qrels_any", boom)
    _fails_cleanly(["labels", "binarize", str(q), "-o", str(tmp_path / "b.txt")], capsys, {"permission-denied"},
                   expect_file=str(tmp_path / "x.txt"))

    def bug(*a, **k):
        raise OSError("no file named")

    monkeypatch.setattr(labels_cli, "write_qrels_any", bug)
    with pytest.raises(OSError):
        run(["labels", "binarize", str(q), "-o", str(tmp_path / "b.txt")])


@pytest.mark.parametrize("cmd", ["expand", "propagate"])
def test_missing_classes_file_is_one_line(cmd, fx, tmp_path, capsys):
    """A missing --classes text file in labels expand/propagate was a traceback."""
    missing = tmp_path / "classes.txt"
    argv = ["labels", cmd, str(fx["qrels"]), "--classes", str(missing), "-o", str(tmp_path / "o.txt")]
    if cmd == "propagate":
        argv += ["--corpus", str(fx["corpus"])]
    _fails_cleanly(argv, capsys, {"unreadable"}, expect_file=str(missing))
    assert not (tmp_path / "o.txt").exists()


# -- text that is not UTF-8 ---------------------------------------------------------------------------

NOT_UTF8 = Path(__file__).resolve().parent / "fixtures" / "not_utf8"
CORPUS_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "corpus"
# command -> argv with {BAD} for the text file under test, that file's suffix, and the kind of valid
# file it stands for (a key of the `texts` fixture: the valid bytes a derived case spoils on line 3)
_INIT = ["campaign", "init", "{OUT}", "--corpus", "{corpus}", "-t", "{topics}", "--runs", "{runs}",
         "-m", "{manifest}", "-q", "{qrels}", "-c", "{config_toml}"]
TEXT_READERS = {
    "runs validate": (["runs", "validate", "{BAD}", "-o", "{OUT}"], ".txt", "run"),
    "pool depth": (["pool", "depth", "{BAD}", "-o", "{OUT}"], ".txt", "run"),
    "pool select csv": (["pool", "select", "-m", "{BAD}", "-o", "{OUT}"], ".csv", "manifest"),
    "pool select toml": (["pool", "select", "-m", "{BAD}", "-o", "{OUT}"], ".toml", "manifest_toml"),
    "pool fractional --corpus": (["pool", "fractional", "{run}", "--corpus", "{BAD}", "-o", "{OUT}"], ".jsonl", "corpus"),
    "batch import csv": (["batch", "import", "{BAD}", "-o", "{OUT}"], ".csv", "judg"),
    "batch import tsv": (["batch", "import", "{BAD}", "-o", "{OUT}"], ".tsv", "judg_tsv"),
    "batch import jsonl": (["batch", "import", "{BAD}", "-o", "{OUT}"], ".jsonl", "judg_jsonl"),
    "batch make --corpus": (["batch", "make", "{pool}", "--corpus", "{BAD}", "-o", "{OUT}"], ".jsonl", "corpus"),
    "batch make --topics": (["batch", "make", "{pool}", "-t", "{BAD}", "-o", "{OUT}"], ".tsv", "topics"),
    "labels aggregate": (["labels", "aggregate", "{BAD}", "-o", "{OUT}"], ".csv", "judg"),
    "labels binarize": (["labels", "binarize", "{BAD}", "-o", "{OUT}"], ".txt", "qrels"),
    "labels expand --classes": (["labels", "expand", "{qrels}", "--classes", "{BAD}", "-o", "{OUT}"], ".txt", "truth"),
    "labels propagate --corpus": (["labels", "propagate", "{qrels}", "--corpus", "{BAD}", "-o", "{OUT}"], ".jsonl",
                                  "corpus"),
    "eval score run": (["eval", "score", "{BAD}", "-q", "{qrels}", "-o", "{OUT}"], ".txt", "run"),
    "eval score qrels": (["eval", "score", "{run}", "-q", "{BAD}", "-o", "{OUT}"], ".txt", "qrels"),
    "cal init --topics": (["cal", "init", "{OUT}", "-t", "{BAD}"], ".tsv", "topics"),
    "cal import": (["cal", "import", "{store}", "{BAD}"], ".csv", "judg"),
    "cal features": (["cal", "features", "{BAD}", "-o", "{OUT}"], ".jsonl", "corpus"),
    "dedupe cluster jsonl": (["dedupe", "cluster", "{BAD}", "-o", "{OUT}"], ".jsonl", "corpus"),
    "dedupe cluster tsv": (["dedupe", "cluster", "{BAD}", "-o", "{OUT}"], ".tsv", "corpus_tsv"),
    "dedupe import-nist": (["dedupe", "import-nist", "{BAD}", "-o", "{OUT}"], ".tsv", "truth"),
    "dedupe stats": (["dedupe", "stats", "{BAD}", "-o", "{OUT}"], ".txt", "truth"),
    "prefs import --tasks": (["prefs", "import", "{judg}", "--tasks", "{BAD}", "-o", "{OUT}"], ".csv", "judg"),
    "prefs tasks": (["prefs", "tasks", "{BAD}", "-q", "{qrels}", "-o", "{OUT}"], ".csv", "judg"),
    "config show": (["config", "show", "-c", "{BAD}"], ".toml", "config_toml"),
    "simulate campaign -c": (["simulate", "campaign", "-c", "{BAD}", "-o", "{OUT}"], ".toml", "config_toml"),
    **{f"campaign init {key}": ([("{BAD}" if a == "{" + key + "}" else a) for a in _INIT], suffix, key)
       for key, suffix in (("corpus", ".jsonl"), ("topics", ".tsv"), ("runs", ".run"), ("manifest", ".csv"),
                           ("qrels", ".txt"), ("config_toml", ".toml"))},
}


@pytest.fixture(scope="module")
def texts(fx):
    """Valid bytes of every kind of text file TEXT_READERS reads, and the paths of the valid ones."""
    judg = fx["judg"].read_text()
    rows = [ln.split(",") for ln in judg.splitlines()]
    jsonl = "".join("{" + ", ".join(f'"{k}": "{v}"' for k, v in zip(rows[0], r)) + "}\n" for r in rows[1:])
    corpus = fx["corpus"].read_text().splitlines()[:50]
    tsv = "".join(f"p{i}\t{ln[40:120]}\n" for i, ln in enumerate(corpus))
    manifest_toml = "".join(f'[[runs]]\nrun = "{r[0]}"\ngroup = "{r[1]}"\n'
                            for r in (ln.split(",") for ln in fx["manifest"].read_text().splitlines()[1:]))
    root = fx["root"] / "texts"
    root.mkdir(exist_ok=True)
    config = root / "config.toml"
    config.write_text("[pool]\ndepth = 10\n# the protocol of the test\n")
    valid = {"run": fx["run"].read_bytes(), "manifest": fx["manifest"].read_bytes(), "judg": judg.encode(),
             "judg_tsv": judg.replace(",", "\t").encode(), "judg_jsonl": jsonl.encode(),
             "qrels": fx["qrels"].read_bytes(), "topics": fx["topics"].read_bytes(), "truth": fx["truth"].read_bytes(),
             "corpus": "\n".join(corpus).encode() + b"\n", "corpus_tsv": tsv.encode(),
             "manifest_toml": manifest_toml.encode(), "config_toml": config.read_bytes(),
             "runs": fx["run"].read_bytes()}
    return {"valid": valid, "paths": {"runs": fx["run"].parent, "config_toml": config}}


def _line3(data: bytes) -> bytes:
    """``data`` with one byte that is not UTF-8 in the middle of its third line."""
    lines = data.split(b"\n")
    mid = len(lines[2]) // 2
    lines[2] = lines[2][:mid] + b"\xff" + lines[2][mid:]
    return b"\n".join(lines)


def _first_bad_line(data: bytes) -> int:
    """The line of the first byte that is not UTF-8 text (an undecodable byte or a NUL)."""
    try:
        data.decode("utf-8")
        end = len(data)
    except UnicodeDecodeError as exc:
        end = exc.start
    nul = data.find(b"\x00")
    return data[: min(end, nul) if nul >= 0 else end].count(b"\n") + 1


TEXT_CASES = ["line3", *sorted(p.name for p in NOT_UTF8.iterdir())]


def test_not_utf8_fixtures_are_not_utf8():
    """Each fixture holds a byte that is not UTF-8, or a NUL (UTF-16 without a byte order mark)."""
    assert len(TEXT_CASES) >= 5
    for p in NOT_UTF8.iterdir():
        data = p.read_bytes()
        assert b"\x00" in data or not _decodes(data), p.name


def _decodes(data: bytes) -> bool:
    return data.decode("utf-8", "replace").encode("utf-8") == data


@pytest.mark.parametrize("case", TEXT_CASES)
@pytest.mark.parametrize("name", sorted(TEXT_READERS))
def test_text_that_is_not_utf8_is_one_line(name, case, fx, texts, tmp_path, capsys, unchanged):
    """Every command that reads a text file, given one that is not UTF-8 in its place: exit 2, one
    printable line ``FILE:LINE: [not-utf8] ...`` naming the line of the first bad byte, nothing
    written, no traceback, no "Exception ignored"."""
    template, suffix, kind = TEXT_READERS[name]
    data = _line3(texts["valid"][kind]) if case == "line3" else (NOT_UTF8 / case).read_bytes()
    bad = tmp_path / f"bad{suffix}"
    bad.write_bytes(data)
    paths = {**fx, **texts["paths"], "BAD": bad, "OUT": tmp_path / "out" / ("result.db" if "cal init" in name else
                                                                          "result.parquet")}
    if name.startswith("campaign init"):
        paths["OUT"] = tmp_path / "camp"
    if name == "cal import":
        paths["store"] = tmp_path / "store.db"
        shutil.copy(fx["store"], paths["store"])
    before = paths["store"].read_bytes() if name == "cal import" else None
    err = _fails_cleanly(_argv(template, paths), capsys, {"not-utf8"}, expect_file=str(bad))
    assert f"{bad}:{_first_bad_line(data)}: [not-utf8]" in err, err
    assert "Exception ignored" not in err and err[:-1].isprintable(), repr(err)
    assert not paths["OUT"].exists() or not any(paths["OUT"].iterdir()) if paths["OUT"].is_dir() \
        else not paths["OUT"].exists()
    if before is not None:
        assert paths["store"].read_bytes() == before


# -- a corpus checked at the door -----------------------------------------------------------------------

_HEAD, *_ROWS = (CORPUS_FIXTURES / "EXPECTED.tsv").read_text(encoding="utf-8").splitlines()
CORPUS_CASES = [dict(zip(_HEAD.split("\t"), row.split("\t"))) for row in _ROWS]
# readers of the corpus besides init: argv with {BAD} for the corpus
CORPUS_READERS = {
    "dedupe cluster": ["dedupe", "cluster", "{BAD}", "-o", "{OUT}"],
    "cal features": ["cal", "features", "{BAD}", "-o", "{OUT}"],
    "batch make --corpus": ["batch", "make", "{pool}", "--corpus", "{BAD}", "-o", "{OUT}"],
}


def test_corpus_fixtures_are_listed():
    listed = {c["file"] for c in CORPUS_CASES}
    assert listed == {p.name for p in CORPUS_FIXTURES.iterdir()} - {"EXPECTED.tsv"}
    assert {c["rule"] for c in CORPUS_CASES} >= {"not-utf8", "bad-json", "missing-value", "duplicate-id", "bad-id",
                                                  "bad-gzip"}


def _corpus_error(case: dict, argv: list[str], capsys) -> None:
    bad = CORPUS_FIXTURES / case["file"]
    err = _fails_cleanly(argv, capsys, {case["rule"]}, expect_file=str(bad))
    if case["line"] != "-":
        assert f"{bad}:{case['line']}: [{case['rule']}]" in err, err
    assert err[:-1].isprintable(), repr(err)


@pytest.mark.parametrize("case", CORPUS_CASES, ids=[c["file"] for c in CORPUS_CASES])
def test_bad_corpus_is_refused_at_init(case, fx, tmp_path, capsys, unchanged):
    """campaign init: exit 2, one line naming the corpus, the line and the rule; no campaign.db."""
    camp = tmp_path / "camp"
    argv = ["campaign", "init", str(camp), "--corpus", str(CORPUS_FIXTURES / case["file"]), "-t", str(fx["topics"]),
            "--runs", str(fx["run"].parent), "-m", str(fx["manifest"])]
    _corpus_error(case, argv, capsys)
    assert not (camp / "campaign.db").exists()


READ_CASES = [c for c in CORPUS_CASES if c["init_only"] == "no"]


@pytest.mark.parametrize("reader", sorted(CORPUS_READERS))
@pytest.mark.parametrize("case", READ_CASES, ids=[c["file"] for c in READ_CASES])
def test_bad_corpus_is_one_line_in_every_reader(case, reader, fx, tmp_path, capsys, unchanged):
    """The rules of every chunk (not the whole-file duplicate check) hold wherever a corpus is
    read: the same one line as init, exit 2, nothing written."""
    out = tmp_path / "out" / ("features" if reader == "cal features" else "result.parquet")
    argv = _argv(CORPUS_READERS[reader], {**fx, "BAD": CORPUS_FIXTURES / case["file"], "OUT": out})
    _corpus_error(case, argv, capsys)
    assert not out.exists()


def test_messages_quote_input_printably(tmp_path, capsys):
    """A piece of input quoted in an error is printable and short: control characters and
    undecodable bytes escaped, a long token cut."""
    run = tmp_path / "r.txt"
    run.write_bytes(b"301 Q0 d1 1 3.0 runA\n301 Q0 d2 2 \x1b[31m" + b"9" * 500 + b"\x07 runA\n")
    err = _fails_cleanly(["runs", "validate", str(run)], capsys, {"score-not-numeric"}, expect_file=str(run))
    assert err[:-1].isprintable() and "\\x1b[31m999" in err and len(err) < 300, err
