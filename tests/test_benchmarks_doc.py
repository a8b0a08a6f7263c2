"""docs/benchmarks.md's result blocks are what scripts/gen_benchmarks_doc.py makes of the JSON files
the benchmarks wrote (benchmarks/results/): a figure in the docs is always one a command produced."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def _gen():
    spec = importlib.util.spec_from_file_location("gen_benchmarks_doc", ROOT / "scripts" / "gen_benchmarks_doc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _result(**over):
    import _results as r

    small = r.size_result("1M lines", 1_000_000, "line", [
        r.tool_result("qrelkit", first=r.call(1.2, 2.0), warm=[r.call(1.0, 1.9), r.call(1.1, 2.0), r.call(0.9, 1.8)],
                      import_s=0.2, peak_rss_mb=500, background_cores=0.01, stages={"read": 0.6, "pool": 0.3}),
        r.tool_result("peer", first=r.call(20.0, 20.0), warm=[r.call(19.0, 19.0)], import_s=1.0, peak_rss_mb=900,
                      background_cores=0.0)])
    large = r.size_result("2M lines", 2_000_000, "line", [
        r.tool_result("qrelkit", first=r.call(2.2, 4.0), warm=[r.call(2.2, 4.0)], background_cores=0.02),
        r.tool_result("peer", first=r.call(40.0, 40.0), warm=[r.call(40.0, 40.0)], background_cores=0.0)])
    res = r.benchmark_result("demo", "Demo", [small, large], targets=[r.target("pool of 2M lines", 2.2, "<=", 1.0, "s")],
                             checks={"same pool": True}, notes=["the peer filters nothing"])
    res["command"] = "python benchmarks/bench_demo.py --x 1"
    res.update(over)
    return res


def test_the_doc_is_what_the_result_files_give():
    assert _gen().main(["--check"]) == 0, "run python scripts/gen_benchmarks_doc.py"


def test_every_result_file_has_its_block_and_shape():
    gen = _gen()
    doc = (ROOT / "docs" / "benchmarks.md").read_text()
    for name, res in gen.load_results(ROOT / "benchmarks" / "results").items():
        assert gen.OPEN.format(name) in doc and gen.CLOSE.format(name) in doc, name
        assert res["command"].startswith("python benchmarks/"), name
        assert len(res["sizes"]) >= 2, f"{name}: every benchmark reports two sizes"
        for size in res["sizes"]:
            for t in size["tools"]:
                assert t["warm"]["wall_s"] > 0 and t["warm"]["cpu_s"] >= 0, (name, t["tool"])
                assert t["first"] is not None or t.get("note"), f"{name}/{t['tool']}: a first call, or why not"


def test_render_shows_first_and_warm_wall_and_cpu_ratios_within_a_size_growth_and_targets():
    text = _gen().render(_result())
    assert "`python benchmarks/bench_demo.py --x 1`" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| 1M lines | qrelkit"))
    assert "1.20 s / 2.00 s" in row and "**1.00 s** (0.90 s-1.10 s), n=3" in row and "1.90 s" in row
    assert "500 MB" in row and "0.20 s" in row
    # ratios only between tools of the same size: 19.0 / 1.0 at 1M and 40.0 / 2.2 at 2M
    assert "1M lines: qrelkit against peer: **19.0x** in warm wall time, 10.0x in CPU time, 16.7x" in text
    assert "2M lines: qrelkit against peer: **18.2x**" in text
    assert "qrelkit +10%" in text and "peer +5%" in text  # per line: 1.0/1M -> 2.2/2M; 19/1M -> 40/2M
    assert "pool of 2M lines: 2.2 s (goal <= 1 s): **not met**" in text
    assert "- same pool: True" in text and "- the peer filters nothing" in text


def test_a_result_without_its_block_is_refused(tmp_path):
    gen = _gen()
    with pytest.raises(SystemExit, match="no block"):
        gen.regenerate("# nothing here\n", {"demo": _result()})
    f = tmp_path / "other.json"
    f.write_text(json.dumps(_result()))
    with pytest.raises(SystemExit, match="name the file demo.json"):
        gen.load_results(tmp_path)


def test_regenerate_replaces_only_inside_the_block():
    gen = _gen()
    doc = "intro prose\n<!-- results:demo -->\nold figures\n<!-- /results:demo -->\nmore prose\n"
    new = gen.regenerate(doc, {"demo": _result()})
    assert new.startswith("intro prose\n<!-- results:demo -->\n**Command:**")
    assert new.endswith("<!-- /results:demo -->\nmore prose\n") and "old figures" not in new
    assert gen.regenerate(new, {"demo": _result()}) == new


def test_readme_summary_takes_the_largest_size_and_ratios_from_the_same_file():
    gen = _gen()
    res = _result(benchmark="pool", title="Pool")
    text = gen.summary({"pool": res})
    row = text.splitlines()[-1]
    assert row.startswith("| [Pool](docs/benchmarks.md), 2M lines | 2.20 s (2.20 s) | peer 40.0 s (18.2x) |"), row
    assert gen.summary({}).count("\n") == 1  # the header only


def test_tasks_are_never_compared_with_each_other():
    """A benchmark of several tasks (an import and a status): ratios within a size only, growth per task."""
    import _results as r

    def size(task, label, units, wall):
        return r.size_result(label, units, "judgment", [r.tool_result("qrelkit", first=r.call(wall, wall),
                                                                      warm=[r.call(wall, wall)])], task=task)

    res = r.benchmark_result("demo", "Demo", [size("import", "50k", 50_000, 1.0), size("import", "100k", 100_000, 2.2),
                                              size("status", "50k", 50_000, 0.5), size("status", "100k", 100_000, 0.5)])
    res["command"] = "python benchmarks/bench_demo.py"
    text = _gen().render(res)
    assert "| import, 50k | qrelkit |" in text and "| status, 100k | qrelkit |" in text
    assert "Ratios" not in text  # one tool per size: nothing to compare
    assert "- import: growth of the warm time per judgment from 50k to 100k: qrelkit +10%." in text
    assert "- status: growth of the warm time per judgment from 50k to 100k: qrelkit -50%." in text


def test_qrelkit_is_the_reference_even_when_a_floor_comes_first():
    """pool.json lists pyarrow's reader (the floor) before qrelkit: ratios and the README row still
    compare qrelkit with the others (before: the floor's time was shown as qrelkit's)."""
    import _results as r

    gen = _gen()
    size = r.size_result("5M lines", 5_000_000, "line", [
        r.tool_result("pyarrow floor", first=r.call(1.0, 1.5), warm=[r.call(1.0, 1.5)]),
        r.tool_result("qrelkit", first=r.call(2.1, 3.0), warm=[r.call(2.0, 3.0)]),
        r.tool_result("trectools", first=r.call(100.0, 100.0), warm=[r.call(100.0, 100.0)])])
    res = r.benchmark_result("pool", "Pool", [size, size])
    res["command"] = "python benchmarks/bench_pool.py"
    row = gen.summary({"pool": res}).splitlines()[-1]
    assert "| 2.00 s (2.10 s) | pyarrow floor 1.00 s (0.5x); trectools 100 s (50.0x) |" in row, row
    block = gen.render(res)
    assert "qrelkit against trectools" in block and "qrelkit against pyarrow floor" in block
    assert "pyarrow floor against" not in block
    assert gen.reference([{"tool": "qrelkit (text)"}, {"tool": "ir-measures"}])[0]["tool"] == "qrelkit (text)"
    assert gen.reference([{"tool": "store a"}, {"tool": "store b"}])[0]["tool"] == "store a"


def test_no_growth_line_between_sizes_of_different_units():
    """A result whose first and last sizes count different units (bench_startup's command line in
    processes, its campaigns in passages) has no time per unit to compare: no growth line (before: a
    line with nothing after the colon)."""
    import _results as r

    gen = _gen()
    one = r.tool_result("qrelkit --help", first=r.call(0.2, 0.2), warm=[r.call(0.2, 0.2)])
    two = r.tool_result("evaluate()", first=r.call(0.2, 0.2), warm=[r.call(0.1, 0.1)])
    res = r.benchmark_result("startup", "Start", [r.size_result("command line", 1, "process", [one]),
                                                  r.size_result("50,000 passages", 50_000, "passage", [two]),
                                                  r.size_result("200,000 passages", 200_000, "passage", [two])],
                             ratios=False)
    res["command"] = "python benchmarks/bench_startup.py"
    text = gen.render(res)
    assert "rowth" not in text and not any(line.rstrip().endswith(": .") for line in text.splitlines())
    res["sizes"][0]["task"] = "command line"
    for s in res["sizes"][1:]:
        s["task"] = "first calls"
    assert "first calls: growth of the warm time per passage from 50,000 passages to 200,000 passages" in gen.render(res)


def test_the_generator_reads_the_shape_the_benchmarks_write():
    import _results as r

    assert _gen().SCHEMA == r.SCHEMA


def test_collect_refuses_a_partial_run_and_a_benchmark_in_two_files(tmp_path, monkeypatch, capsys):
    """bench_study.py (bench_budget.py --tasks study) writes a budget result holding one task: collected,
    it would have replaced the recorded result with every task; two files of one benchmark would
    have been decided by their names' order."""
    import _results as r

    gen = _gen()
    results = tmp_path / "results"
    monkeypatch.setattr(gen, "RESULTS", results)
    monkeypatch.setattr(gen, "DOC", tmp_path / "doc.md")
    monkeypatch.setattr(gen, "README", tmp_path / "readme.md")
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    results.mkdir()
    full = _result()
    (results / "demo.json").write_text(json.dumps(full))
    partial = dict(full, sizes=full["sizes"][1:])
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "demo.json").write_text(json.dumps(partial))
    assert gen.collect([out]) == 1
    assert json.loads((results / "demo.json").read_text()) == full  # kept
    assert "lacks 1 of 2 size(s)" in capsys.readouterr().err
    (tmp_path / "doc.md").write_text(f"{gen.OPEN.format('demo')}\n{gen.CLOSE.format('demo')}\n")
    (tmp_path / "readme.md").write_text(f"{gen.OPEN.format('summary')}\n{gen.CLOSE.format('summary')}\n")
    assert gen.main(["--collect", str(out)]) == 2  # the doc is still written from what is stored
    assert gen.collect([out], replace=True) == 0
    assert json.loads((results / "demo.json").read_text())["sizes"] == partial["sizes"]
    (out / "sub" / "again.json").write_text(json.dumps(full))
    assert gen.collect([out]) == 1
    assert "in 2 files" in capsys.readouterr().err
    (out / "sub" / "again.json").unlink()
    (out / "sub" / "demo.json").write_text(json.dumps(full))
    (out / "demo.json").unlink()
    assert gen.collect([out, out / "sub"]) == 0  # one file found through two folders: one file
    more = dict(full, sizes=full["sizes"] + [r.size_result("4M lines", 4_000_000, "line", full["sizes"][1]["tools"])])
    (out / "sub" / "demo.json").write_text(json.dumps(more))
    assert gen.collect([out]) == 0  # more sizes than stored: collected
    assert len(json.loads((results / "demo.json").read_text())["sizes"]) == 3


def test_collect_compares_sizes_per_task_not_labels(tmp_path, monkeypatch):
    """A label may carry a figure of its run (the judgments a soak made): a full run with other
    labels is no partial run; a task missing, or a task with fewer sizes, is; a stored result
    without tasks is compared by its number of sizes; a stored file that is no result is replaced."""
    gen = _gen()
    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setattr(gen, "RESULTS", results)
    base = _result()
    relabelled = dict(base, sizes=[dict(sz, label=sz["label"] + " (1,234 judgments)") for sz in base["sizes"]])
    assert gen._lost_sizes(base, relabelled) == []
    tasks = dict(base, sizes=[dict(base["sizes"][0], task="a"), dict(base["sizes"][1], task="b")])
    assert gen._lost_sizes(base, tasks) == []  # stored without tasks: two sizes, two sizes
    assert gen._lost_sizes(tasks, dict(tasks, sizes=tasks["sizes"][:1])) == ["1 of 1 size(s) of task 'b'"]
    out = tmp_path / "out"
    out.mkdir()
    (out / "demo.json").write_text(json.dumps(base))
    (results / "demo.json").write_text("{not json")
    assert gen.collect([out]) == 0
    assert json.loads((results / "demo.json").read_text()) == base


def test_collect_refuses_a_result_measured_on_a_busy_machine(tmp_path, monkeypatch, capsys):
    """Nine results were once recorded while other jobs took 1.4-1.8 of the machine's 2 cores: their
    JSON said so, but they were collected and rendered as qrelkit's figures. A load not recorded
    (None, NaN) is no quiet machine either."""
    gen = _gen()
    assert gen.MAX_OTHER_LOAD == 0.25
    results = tmp_path / "results"
    results.mkdir()
    monkeypatch.setattr(gen, "RESULTS", results)
    monkeypatch.setattr(gen, "ROOT", tmp_path)
    for attr in ("DOC", "README"):
        monkeypatch.setattr(gen, attr, tmp_path / f"{attr}.md")
        (tmp_path / f"{attr}.md").write_text(f"{gen.OPEN.format('demo')}\n{gen.CLOSE.format('demo')}\n"
                                             f"{gen.OPEN.format('summary')}\n{gen.CLOSE.format('summary')}\n")
    out = tmp_path / "out"
    out.mkdir()

    def with_load(load):
        res = _result()
        for size in res["sizes"]:
            for t in size["tools"]:
                t["background_cores"] = 0.01
        res["sizes"][1]["tools"][1]["background_cores"] = load
        return res

    assert gen._under_load(with_load(0.01)) == []
    assert gen._under_load(with_load(1.43)) == ["peer at 2M lines: 1.43 cores"]
    assert gen._under_load(with_load(None)) == ["peer at 2M lines: other load not recorded"]
    assert gen._under_load(with_load(float("nan"))) == ["peer at 2M lines: other load not recorded"]
    for load, refused in ((1.43, 1), (gen.MAX_OTHER_LOAD + 0.01, 1), (None, 1), (gen.MAX_OTHER_LOAD, 0), (0.0, 0)):
        (results / "demo.json").unlink(missing_ok=True)
        (out / "demo.json").write_text(json.dumps(with_load(load)))
        assert gen.collect([out]) == refused, load
        assert (results / "demo.json").exists() == (not refused)
    err = capsys.readouterr().err
    assert "busy machine (peer at 2M lines: 1.43 cores" in err and "--allow-load" in err
    busy = with_load(1.43)
    (out / "demo.json").write_text(json.dumps(busy))
    assert gen.main(["--collect", str(out)]) == 2
    assert gen.main(["--collect", str(out), "--allow-load"]) == 0
    assert json.loads((results / "demo.json").read_text()) == busy
    partial_and_busy = dict(busy, sizes=busy["sizes"][1:])  # both reasons in one message
    (out / "demo.json").write_text(json.dumps(partial_and_busy))
    assert gen.collect([out]) == 1
    err = capsys.readouterr().err
    assert "busy machine" in err and "lacks 1 of 2 size(s)" in err
    malformed = {**busy, "sizes": [{"units": 1, "tools": [{"first": {}}]}]}
    assert gen._under_load(malformed) == ["? at ?: other load not recorded"]
