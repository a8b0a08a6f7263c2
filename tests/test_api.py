"""The top-level Python API (issue 12): ``from qrelkit import ...``, docstrings with examples that
run, a cheap ``import qrelkit``, and the API reference built from the docstrings."""

from __future__ import annotations

import ast
import doctest
import inspect
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import qrelkit

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = [n for n in qrelkit.__all__ if n != "__version__"]  # __version__ is a string


def _python(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)


def test_done_when_import_line_works():
    r = _python("from qrelkit import read_runs, depth_pool, evaluate, leave_out, cluster_corpus, JudgingStore")
    assert r.returncode == 0, r.stderr


def test_the_notebook_names_are_exported():
    wanted = {"read_runs", "read_qrels", "read_corpus", "depth_pool", "top1_pool", "select_runs", "cluster_corpus",
              "JudgingStore", "evaluate", "compare", "leave_out", "tournament", "aggregate_judgments", "expand_qrels",
              "propagate_to_documents", "make_batches", "import_batches", "load_config", "InputError"}
    assert wanted <= set(qrelkit.__all__)
    assert len(set(qrelkit.__all__)) == len(qrelkit.__all__)
    assert set(qrelkit.__all__) <= set(dir(qrelkit))
    with pytest.raises(AttributeError):
        qrelkit.no_such_name  # noqa: B018


def test_names_resolve_to_the_library_objects():
    from qrelkit.evaluate.compare import significance
    from qrelkit.evaluate.core import evaluate
    from qrelkit.labels.propagate import expand_qrels
    from qrelkit.pooler.select import select_pool_runs

    assert qrelkit.select_runs is select_pool_runs
    assert qrelkit.compare is significance
    assert qrelkit.evaluate is evaluate  # the function, although qrelkit.evaluate is also a subpackage
    assert qrelkit.expand_qrels is expand_qrels  # the labels one (with provenance), not dedupe.apply's


def test_evaluate_is_the_function_whatever_was_imported_first():
    r = _python("import qrelkit.evaluate.core, qrelkit.evaluate.compare\n"
                "from qrelkit import evaluate\n"
                "from qrelkit.evaluate import compare\n"
                "assert callable(evaluate) and evaluate.__module__ == 'qrelkit.evaluate.core', evaluate\n"
                "assert compare.__name__ == 'qrelkit.evaluate.compare'\n")
    assert r.returncode == 0, r.stderr


def test_no_code_imports_a_shadowed_subpackage_with_as():
    """``import qrelkit.evaluate.core as m`` reads the attribute ``qrelkit.evaluate``, which is the
    function: such code must say ``from qrelkit.evaluate import core as m``."""
    shadowed = {n for n in qrelkit.__all__ if (ROOT / "qrelkit" / n).is_dir()}
    assert shadowed == {"evaluate"}
    bad = []
    for folder in ("qrelkit", "tests", "scripts", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    bad += [f"{path.relative_to(ROOT)}:{node.lineno}" for a in node.names
                            if a.asname and a.name.split(".")[:2] in (["qrelkit", s] for s in shadowed)]
    assert not bad, ("use 'from qrelkit.evaluate import X' instead of 'import qrelkit.evaluate.X as ...': "
                     + ", ".join(bad))


def test_import_qrelkit_is_cheap():
    """The names resolve on first use: a bare import loads none of the heavy packages."""
    r = _python("import sys, qrelkit\n"
                "heavy = ('numba', 'dask', 'matplotlib', 'sklearn', 'scipy', 'ir_measures', 'pandas', 'pyarrow')\n"
                "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


@pytest.mark.parametrize("name", PUBLIC)
def test_public_name_has_a_docstring_with_an_example(name):
    doc = inspect.getdoc(getattr(qrelkit, name))
    assert doc and doc.strip(), f"qrelkit.{name} has no docstring"
    assert ">>>" in doc, f"qrelkit.{name}'s docstring has no example"


@pytest.mark.parametrize("name", PUBLIC)
def test_public_name_examples_run(name, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the examples' temp files go here
    obj = getattr(qrelkit, name)
    tests = doctest.DocTestFinder(recurse=False).find(obj, f"qrelkit.{name}")
    assert sum(len(t.examples) for t in tests) > 0
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for t in tests:
        runner.run(t, out=sys.stdout.write)
    assert runner.summarize(verbose=False).failed == 0, f"the examples of qrelkit.{name} fail (see stdout)"


def test_api_reference_builds_without_warnings(tmp_path):
    pytest.importorskip("pdoc")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_apidocs.py"), str(tmp_path)], cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip() == "", r.stderr
    page = (tmp_path / "qrelkit.html").read_text()
    for name in ("read_runs", "depth_pool", "JudgingStore", "leave_out"):
        assert f'id="{name}"' in page
    assert (tmp_path / "qrelkit" / "io" / "runs.html").is_file()
    assert 'href="qrelkit/cal.html"' in page  # the navigation lists every subpackage
    assert 'href="cal/loop.html"' in (tmp_path / "qrelkit" / "cal.html").read_text()
