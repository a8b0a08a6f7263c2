"""Regenerate docs/benchmarks.md's result blocks from the JSON the benchmarks write.

    python scripts/gen_benchmarks_doc.py                     # rewrite the blocks from benchmarks/results/
    python scripts/gen_benchmarks_doc.py --collect bench-out # first copy bench-out/*.json results there
                                                             # (a partial run is refused: --replace;
                                                             # a run under other load too: --allow-load)
    python scripts/gen_benchmarks_doc.py --check             # exit 1 if the doc is not what the files give

Each benchmark writes one result file in the shape of ``benchmarks/_results.py`` (``schema``,
``benchmark``, ``sizes`` -> ``tools``, ``targets``, ``checks``, ``notes``, ``command``, ``machine``,
``versions``). The committed copies live in ``benchmarks/results/NAME.json``; docs/benchmarks.md holds
one block per file between ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->``, and everything
inside a block is written by this script: the command, the machine, a table of every tool at every
size (first call in a fresh process beside the warm repeats, wall and CPU, cores, time per unit, peak
memory, other processes' load), the ratios between tools of the same size of the same file (so
measured in the same run on the same input), the growth of the time per unit between the sizes, the
targets and the checks. Prose outside the blocks is the author's and carries no figure.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from _results import SCHEMA  # noqa: E402  (the version of the result shape the benchmarks write)

RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "benchmarks.md"
README = ROOT / "README.md"
#: the benchmarks the root README.md's "How fast" table shows (largest size), in this order
SUMMARY = ("pool", "eval", "dedupe", "cal", "reuse")
#: the most cores other processes may have used while a tool was measured, for its result to be
#: collected: a result measured on a busy machine gives figures that are not the tool's
MAX_OTHER_LOAD = 0.25


def is_result(res) -> bool:
    """Whether a JSON value is a benchmark result in the shape of benchmarks/_results.py."""
    return isinstance(res, dict) and res.get("schema") == SCHEMA and "benchmark" in res
OPEN, CLOSE = "<!-- results:{} -->", "<!-- /results:{} -->"


# ------------------------------------------------------------------------------ formatting


def secs(x: float | None) -> str:
    if x is None or x != x:
        return "n/a"
    if x >= 100:
        return f"{x:.0f} s"
    if x >= 10:
        return f"{x:.1f} s"
    if x >= 0.1:
        return f"{x:.2f} s"
    if x >= 1e-3:
        return f"{x * 1e3:.1f} ms" if x < 0.01 else f"{x * 1e3:.0f} ms"
    return f"{x * 1e6:.1f} µs"


def per_unit(x: float, unit: str) -> str:
    """Seconds per unit as a time and as a throughput."""
    if x <= 0 or x != x:
        return "n/a"
    if x >= 1:
        t = f"{x:.2f} s"
    elif x >= 1e-3:
        t = f"{x * 1e3:.2f} ms"
    elif x >= 1e-6:
        t = f"{x * 1e6:.2f} µs"
    else:
        t = f"{x * 1e9:.0f} ns"
    rate = 1 / x
    r = f"{rate / 1e6:.2f}M" if rate >= 1e6 else f"{rate / 1e3:.0f}k" if rate >= 1e4 else f"{rate:.3g}"
    return f"{t} ({r} {unit}{'es' if unit.endswith('s') else 's'}/s)"


def num(x, nd: int = 2) -> str:
    if x is None or x != x:
        return "n/a"
    return f"{x:.{nd}f}"


def ratio(a: float, b: float) -> str:
    if not a or not b or a != a or b != b:
        return "n/a"
    return f"{b / a:.1f}x"


# ------------------------------------------------------------------------------ one block


def _label(size: dict) -> str:
    """A size's name in the tables: its task first, when the result measures several tasks."""
    return f"{size['task']}, {size.get('label', '?')}" if size.get("task") else size.get("label", "?")


def _by_task(sizes: list[dict]) -> dict:
    """The sizes grouped by their task (one group, None, for a single-task result), in order."""
    out: dict = {}
    for s in sizes:
        out.setdefault(s.get("task"), []).append(s)
    return out


def _table(res: dict) -> list[str]:
    head = ("| input | tool | imports | first call, wall / CPU | warm wall, median (min-max) | warm CPU | cores "
            "| warm time per unit | peak RSS | others' load |")
    lines = [head, "|---|---|---|---|---|---|---|---|---|---|"]
    for size in res["sizes"]:
        for t in size["tools"]:
            f, w = t.get("first"), t["warm"]
            first = f"{secs(f['wall_s'])} / {secs(f['cpu_s'])}" if f else "n/a"
            warm = f"**{secs(w['wall_s'])}** ({secs(w['wall_min_s'])}-{secs(w['wall_max_s'])}), n={w['n']}"
            rss = f"{t['peak_rss_mb']:,.0f} MB" if t.get("peak_rss_mb") else "n/a"
            bg = num(t.get("background_cores"))
            lines.append(f"| {_label(size)} | {t['tool']} | {secs(t.get('import_s'))} | {first} | {warm} | {secs(w['cpu_s'])} "
                         f"| {num(t.get('cores'), 1)} | {per_unit(w['wall_s'] / size['units'], size['unit'])} "
                         f"| {rss} | {bg} |")
    return lines


def _stages(res: dict) -> list[str]:
    out = []
    for size in res["sizes"]:
        for t in size["tools"]:
            if t.get("stages"):
                parts = ", ".join(f"{k} {secs(v)}" for k, v in t["stages"].items())
                out.append(f"- {t['tool']}, {_label(size)}: {parts}")
            if t.get("note"):
                out.append(f"- {t['tool']}, {_label(size)}: {t['note']}")
    return (["", "Stages (warm median) and notes per tool:", ""] + out) if out else []


def reference(tools: list[dict]) -> tuple[dict, list[dict]]:
    """The tool the others are compared with: qrelkit (the tool named so, else the first whose name
    starts with it, else the first tool; a floor such as pyarrow's reader may come first), and the others."""
    names = [t["tool"] for t in tools]
    i = names.index("qrelkit") if "qrelkit" in names else next(
        (k for k, n in enumerate(names) if n.startswith("qrelkit")), 0)
    return tools[i], tools[:i] + tools[i + 1:]


def _ratios(res: dict) -> list[str]:
    if res.get("ratios") is False:  # its "tools" are different paths of one program (bench_startup.py)
        return []
    out = []
    for size in res["sizes"]:
        tools = size["tools"]
        if len(tools) < 2:
            continue
        q, others = reference(tools)
        for p in others:
            fw = ratio(q["first"]["wall_s"], p["first"]["wall_s"]) if q.get("first") and p.get("first") else "n/a"
            out.append(f"- {_label(size)}: {q['tool']} against {p['tool']}: **{ratio(q['warm']['wall_s'], p['warm']['wall_s'])}** "
                       f"in warm wall time, {ratio(q['warm']['cpu_s'], p['warm']['cpu_s'])} in CPU time, "
                       f"{fw} in the first call's wall time.")
    if not out:
        return []
    return ["", "Ratios (qrelkit's time, or the first tool's where none is qrelkit, divided into each other "
            "tool's; both measured in this run on the same input; above 1 means the tool named first is faster):",
            ""] + out


def _growth(res: dict) -> list[str]:
    """The growth of each tool's warm time per unit from the first to the last size of each task."""
    out = []
    for task, sizes in _by_task(res["sizes"]).items():
        if len(sizes) < 2:
            continue
        a, b = sizes[0], sizes[-1]
        if a["unit"] != b["unit"]:  # no time per unit to compare
            continue
        parts = []
        for ta in a["tools"]:
            tb = next((t for t in b["tools"] if t["tool"] == ta["tool"]), None)
            if tb is None:
                continue
            ua, ub = ta["warm"]["wall_s"] / a["units"], tb["warm"]["wall_s"] / b["units"]
            parts.append(f"{ta['tool']} {(ub / ua - 1) * 100:+.0f}%")
        if not parts:
            continue
        what = f"{task}: g" if task else "G"
        out.append(f"{what}rowth of the warm time per {a['unit']} from {a['label']} to {b['label']}: "
                   + ", ".join(parts) + ".")
    if not out:
        return []
    return [""] + out if len(out) == 1 else ["", "Growth of the warm time per unit, per task:", ""] + [f"- {x}" for x in out]


def _targets(res: dict) -> list[str]:
    if not res.get("targets"):
        return []
    out = ["", "Targets:", ""]
    for t in res["targets"]:
        unit = f" {t['unit']}" if t.get("unit") else ""
        mark = "met" if t["met"] else "**not met**"
        out.append(f"- {t['what']}: {t['value']:.3g}{unit} (goal {t['op']} {t['limit']:g}{unit}): {mark}")
    return out


def _checks(res: dict) -> list[str]:
    if not res.get("checks"):
        return []
    out = ["", "Checks:", ""]
    for k, v in res["checks"].items():
        out.append(f"- {k}: {v if not isinstance(v, (dict, list)) else json.dumps(v)}")
    return out


def render(res: dict) -> str:
    m, v = res["machine"], res.get("versions", {})
    soft = ", ".join(f"{k} {val}" for k, val in v.items() if val)
    lines = [f"**Command:** `{res['command'].strip()}`", "",
             f"**Measured** {res['date']} on {m['cores']} cores ({m.get('cpu') or 'unknown CPU'}), "
             f"{m.get('memory_gb')} GB, {m.get('system')}, Python {m.get('python')}, qrelkit at "
             f"{m.get('qrelkit_commit') or 'unknown commit'}; {soft}.", ""]
    lines += _table(res) + _stages(res) + _ratios(res) + _growth(res) + _targets(res) + _checks(res)
    if res.get("notes"):
        lines += [""] + [f"- {n}" for n in res["notes"]]
    return "\n".join(lines)


def summary(results: dict[str, dict]) -> str:
    """README.md's table: per benchmark of :data:`SUMMARY` with a result, its largest size, qrelkit's
    warm wall time (and its first call) beside each peer's and the ratio, all from that one file."""
    lines = ["| job | qrelkit: warm (first call) | peers, same run |", "|---|---|---|"]
    for name in SUMMARY:
        res = results.get(name)
        if res is None:
            continue
        size = res["sizes"][-1]
        q, peers = reference(size["tools"])
        mine = f"{secs(q['warm']['wall_s'])} ({secs(q['first']['wall_s']) if q.get('first') else 'n/a'})"
        others = "; ".join(f"{p['tool']} {secs(p['warm']['wall_s'])} ({ratio(q['warm']['wall_s'], p['warm']['wall_s'])})"
                           for p in peers) or "none"
        lines.append(f"| [{res['title']}](docs/benchmarks.md), {size['label']} | {mine} | {others} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------ the document


def load_results(folder: Path) -> dict[str, dict]:
    out = {}
    for p in sorted(folder.glob("*.json")):
        res = json.loads(p.read_text())
        if not is_result(res):
            raise SystemExit(f"{p}: not a benchmark result (benchmarks/_results.py's shape)")
        if p.stem != res["benchmark"]:
            raise SystemExit(f"{p}: holds benchmark {res['benchmark']!r}; name the file {res['benchmark']}.json")
        out[res["benchmark"]] = res
    return out


def _lost_sizes(stored: dict, new: dict) -> list[str]:
    """What ``new`` lacks of ``stored``: per task (a benchmark measuring several things), the sizes
    of a task it does not hold, or fewer sizes of one (labels are not compared: some carry a
    figure of their run, such as the judgments a soak made). A stored result without tasks is
    compared by its number of sizes."""
    have, got = (Counter(size.get("task") for size in res["sizes"]) for res in (stored, new))
    lost = []
    for task, n in have.items():
        m = got.get(task, 0) if task is not None else sum(got.values())
        if m < n:
            lost.append(f"{n - m} of {n} size(s)" + (f" of task {task!r}" if task is not None else ""))
    return lost


def _under_load(res: dict, limit: float = MAX_OTHER_LOAD) -> list[str]:
    """The tools of ``res`` measured while other processes used more than ``limit`` cores (their
    ``background_cores``: the median over the tool's processes), or with that load unknown, as
    "tool at size: N cores" or "tool at size: other load not recorded"."""
    out = []
    for size in res.get("sizes") or []:
        where = _label(size)
        for t in size.get("tools") or []:
            load = t.get("background_cores")
            if not isinstance(load, (int, float)) or not math.isfinite(load):
                out.append(f"{t.get('tool', '?')} at {where}: other load not recorded")
            elif load > limit:
                out.append(f"{t.get('tool', '?')} at {where}: {load:.2f} cores")
    return out


def _lost_of_stored(stored: Path, new: dict) -> list[str]:
    """:func:`_lost_sizes` of the result stored at ``stored`` (nothing to keep when there is none,
    or when the file holds no result)."""
    try:
        old = json.loads(stored.read_text()) if stored.exists() else None
        return _lost_sizes(old, new) if is_result(old) else []
    except (OSError, ValueError, KeyError, TypeError):
        return []


def collect(folders: list[Path], *, replace: bool = False, allow_load: bool = False) -> int:
    """Copy the results found in ``folders`` (and their subfolders) to benchmarks/results/; returns
    the number refused. Refused, with the reason: two files holding one benchmark (which is the
    run to keep is the user's to say); unless ``allow_load``, a result with a tool measured while
    other processes used more than :data:`MAX_OTHER_LOAD` cores, or with that load unrecorded
    (:func:`_under_load`); and, unless ``replace``, a result
    lacking sizes (or tasks) the stored one has: a partial run (``bench_budget.py --tasks study``,
    ``--one-size``) would otherwise drop the rest of a recorded benchmark."""
    found: dict[str, dict[Path, dict]] = {}
    for folder in folders:
        for p in sorted(folder.rglob("*.json")):  # the web and campaign benchmarks write into subfolders
            try:
                res = json.loads(p.read_text())
            except (OSError, ValueError):
                continue
            if is_result(res):
                found.setdefault(res["benchmark"], {})[p.resolve()] = res  # a file found twice is one file
    refused = 0
    for name, files in found.items():
        stored = RESULTS / f"{name}.json"
        if len(files) > 1:
            print(f"not collected: {name} is in {len(files)} files ({', '.join(map(str, files))}); keep one",
                  file=sys.stderr)
            refused += 1
            continue
        (p, res), = files.items()
        busy = [] if allow_load else _under_load(res)
        lost = [] if replace else _lost_of_stored(stored, res)
        reasons = []
        if busy:
            reasons.append(f"it was measured on a busy machine ({'; '.join(busy[:3])}{'; ...' if len(busy) > 3 else ''}; "
                           f"the limit is {MAX_OTHER_LOAD} cores of other load): run it again on a quiet machine, or "
                           "pass --allow-load to keep it anyway")
        if lost:
            reasons.append(f"it lacks {'; '.join(lost)} that benchmarks/results/{name}.json holds: a partial run; "
                           "pass --replace to keep it anyway")
        if reasons:
            print(f"not collected: {p}: {' And '.join(reasons)}", file=sys.stderr)
            refused += 1
            continue
        RESULTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, stored)
        print(f"collected {p} -> benchmarks/results/{name}.json")
    return refused


def _replace(doc: str, name: str, text: str, where: str) -> str:
    o, c = OPEN.format(name), CLOSE.format(name)
    i, j = doc.find(o), doc.find(c)
    if i < 0 or j < i:
        raise SystemExit(f"{where}: no block {o} ... {c}")
    return doc[: i + len(o)] + "\n" + text + "\n" + doc[j:]


def regenerate(doc: str, results: dict[str, dict]) -> str:
    for name, res in results.items():
        doc = _replace(doc, name, render(res), f"{DOC.name} (for benchmarks/results/{name}.json)")
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--collect", type=Path, action="append", default=[],
                    help="copy the benchmark results (*.json in the shape of benchmarks/_results.py) found in this folder "
                         "and its subfolders first")
    ap.add_argument("--replace", action="store_true",
                    help="let a collected result replace a stored one that holds sizes it lacks (a partial run)")
    ap.add_argument("--allow-load", action="store_true",
                    help=f"collect a result measured while other processes used more than {MAX_OTHER_LOAD} cores")
    ap.add_argument("--check", action="store_true", help="only check that the doc is up to date")
    a = ap.parse_args(argv)
    refused = collect(a.collect, replace=a.replace, allow_load=a.allow_load) if a.collect else 0
    results = load_results(RESULTS)
    stale = 0
    for path, make in ((DOC, lambda d: regenerate(d, results)),
                       (README, lambda d: _replace(d, "summary", summary(results), README.name))):
        doc = path.read_text()
        new = make(doc)
        if new == doc:
            continue
        if a.check:
            print(f"{path.name} is not what benchmarks/results/ gives: run python scripts/gen_benchmarks_doc.py",
                  file=sys.stderr)
            stale += 1
        else:
            path.write_text(new)
            print(f"rewrote {path.relative_to(ROOT)}")
    return 2 if refused else (1 if stale else 0)


if __name__ == "__main__":
    sys.exit(main())
