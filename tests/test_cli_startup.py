"""The command line starts fast (issue 24): ``qrelkit --help`` and the help of every group and
command load none of the heavy libraries (pandas, pyarrow, numpy, scipy, numba, scikit-learn,
ir_measures, matplotlib, Dask), and ``qrelkit --help`` imports no group module; ``import qrelkit``
loads none of them either. No timing is asserted: what is imported is (benchmarks/bench_startup.py
measures the seconds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import typer.main

from qrelkit.cli import GROUPS, app, run

ROOT = Path(__file__).resolve().parents[1]
# markdown_it: not heavy, but typer's help loads it through rich.markdown for nothing (0.07 s)
HEAVY = ("pandas", "pyarrow", "numpy", "scipy", "numba", "sklearn", "ir_measures", "matplotlib", "dask", "markdown_it")

# every help in one fresh process, in order: the first one that loads a heavy library is named
SCRIPT = """
import contextlib, io, json, sys
HEAVY = set(json.loads(sys.argv[1]))
paths = json.loads(sys.argv[2])
import qrelkit
out = {"import qrelkit": sorted({m.split(".")[0] for m in sys.modules} & HEAVY)}
from qrelkit.cli import run
for path in paths:
    with contextlib.redirect_stdout(io.StringIO()):
        code = run([*path, "--help"])
    out[" ".join(path) or "(root)"] = [code, sorted({m.split(".")[0] for m in sys.modules} & HEAVY),
                                       sorted(m for m in sys.modules if m.startswith("qrelkit.cli."))]
print(json.dumps(out))
"""


def _paths(cmd=None, path: tuple[str, ...] = (), parent=None):
    """Every path of the command tree: the root, each group, each command."""
    cmd = cmd or typer.main.get_command(app)
    yield list(path)
    if hasattr(cmd, "list_commands"):
        ctx = cmd.make_context(path[-1] if path else "qrelkit", [], parent=parent, resilient_parsing=True)
        for name in cmd.list_commands(ctx):
            yield from _paths(cmd.get_command(ctx, name), path + (name,), ctx)


def test_help_loads_no_heavy_library():
    paths = list(_paths())
    assert len(paths) > 60 and [] in paths and ["pool", "depth"] in paths
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(HEAVY), json.dumps(paths)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out.pop("import qrelkit") == []
    code, heavy, modules = out["(root)"]
    assert code == 0 and heavy == [] and modules == ["qrelkit.cli.help"], "qrelkit --help imports no group"
    loaded = {p: heavy for p, (code, heavy, _) in out.items() if code != 0 or heavy}
    assert not loaded, f"--help that loaded a heavy library (or failed): {loaded}"


def test_the_root_lists_what_the_whole_tree_lists(capsys, monkeypatch):
    """``run`` lists the groups without importing them; the listing is the whole tree's."""
    monkeypatch.setenv("COLUMNS", "120")
    assert run(["--help"]) == 0
    lazy = capsys.readouterr().out
    try:
        typer.main.get_command(app).main(["--help"], prog_name="qrelkit", standalone_mode=False)
    except SystemExit:
        pass
    assert capsys.readouterr().out == lazy
    assert all(f" {name} " in lazy for name in GROUPS)


def test_a_command_imports_its_group_only():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = ("import sys, contextlib, io\nfrom qrelkit.cli import run\n"
            "with contextlib.redirect_stdout(io.StringIO()): run(['config', 'show'])\n"
            "print(sorted(m for m in sys.modules if m.startswith('qrelkit.cli.')))")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(["qrelkit.cli.common", "qrelkit.cli.config_cmd", "qrelkit.cli.help"])


def test_rich_markdown_put_off_still_works():
    """The stand-in for rich.markdown (``qrelkit.cli.help.defer_markdown``) makes the real objects:
    Markdown renders, other names and ``import rich.markdown`` give the real module."""
    code = ("import sys\nfrom qrelkit.cli.help import defer_markdown\ndefer_markdown()\n"
            "assert 'markdown_it' not in sys.modules\n"
            "from rich.markdown import Markdown\nfrom rich.console import Console\n"
            "c = Console(width=40, color_system=None)\n"
            "with c.capture() as cap: c.print(Markdown('# Title\\n\\n* item'))\n"
            "import rich.markdown\nfrom rich.markdown import Heading\n"
            "print(type(Markdown('x')).__module__, rich.markdown.Heading is Heading, 'markdown_it' in sys.modules,"
            " 'Title' in cap.get() and 'item' in cap.get())")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["rich.markdown", "True", "True", "True"]


_LOADED = r"""
import sys, importlib
for name in sys.argv[1:]:
    importlib.import_module(name)
from numba.core.registry import CPUDispatcher
loaded = sorted(f"{m}.{k}" for m, mod in list(sys.modules.items()) if m.startswith("qrelkit")
                for k, v in vars(mod).items() if isinstance(v, CPUDispatcher) and v.signatures)
print("scipy.stats" in sys.modules, loaded)
"""


def test_the_campaign_façade_loads_no_kernel_and_no_scipy_stats():
    """`campaign status`, `init` and `import` load the campaign's façade: importing it must compile or
    load no numba kernel (the tokenizer's tag table called a kernel from Python at import, half a
    second) and not import scipy.stats (the leaderboard's interval, a second; `status` took 3 s)."""
    r = subprocess.run([sys.executable, "-c", _LOADED, "qrelkit.campaign", "qrelkit.dedupe.tokenize", "qrelkit.cal.loop"],
                       capture_output=True, text=True, check=True, timeout=300)
    assert r.stdout.strip() == "False []", r.stdout
