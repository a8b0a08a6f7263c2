"""The one shape every benchmark's JSON result takes, so that ``scripts/gen_benchmarks_doc.py``
can turn it into docs/benchmarks.md's tables (a figure in the docs is always one a command wrote).

A benchmark measures one or more **sizes** of its input (two at least: the growth per unit between
them is reported); at each size, qrelkit and every peer (a **tool**) run on the same input, in the
same invocation of the script. For each tool:

* ``first``: the first call in a fresh process (imports apart, in ``import_s``): what a user's
  command pays, compiling and cache loading included;
* ``warm``: the repeats after it in the same process (median, min, max over ``n``);
* wall **and** CPU seconds for both, the cores used (CPU / wall of the warm median), the peak RSS
  of the process, and the cores *other* processes used meanwhile (``background_cores``).

Ratios are computed by the doc generator only between tools of the same size of the same result
file, i.e. measured in the same run on the same input.

    res = benchmark_result("pool", "Reading runs and a depth-10 pool", [
        size_result("2.5M lines", 2_500_000, "line", [
            tool_result("qrelkit", first=first, warm=warm, peak_rss_mb=..., stages={...}),
            tool_result("trectools", first=..., warm=[...], note="its own TrecRun reader")]),
        size_result("5M lines", 5_000_000, "line", [...])],
        targets=[target("depth-10 pool of 5M lines, warm wall", 0.93, "<=", 1.0, "s")])
    write_result(res, "bench-out/pool.json", "bench_pool.py", argv)
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

SCHEMA = 1
ROOT = Path(__file__).resolve().parent.parent


def call(wall_s: float, cpu_s: float) -> dict:
    """One measured call: wall and CPU seconds (CPU of the process, threads included; add the
    children's CPU for forked workers)."""
    return {"wall_s": float(wall_s), "cpu_s": float(cpu_s)}


def _summary(calls: list[dict]) -> dict:
    walls = [c["wall_s"] for c in calls]
    cpus = [c["cpu_s"] for c in calls]
    return {"n": len(calls), "wall_s": statistics.median(walls), "wall_min_s": min(walls),
            "wall_max_s": max(walls), "cpu_s": statistics.median(cpus)}


def tool_result(tool: str, *, first: dict | None, warm: list[dict], import_s: float | None = None,
                peak_rss_mb: float | None = None, background_cores: float | None = None,
                stages: dict | None = None, note: str | None = None, **extra) -> dict:
    """One tool at one size. ``first`` and each of ``warm`` are :func:`call` dicts (``first`` None
    only for a tool that cannot be called twice in one process: say why in ``note``).
    ``stages`` maps a stage name to its seconds (warm median). ``extra`` keys are kept as they are."""
    if not warm and first is None:
        raise ValueError(f"{tool}: no call measured")
    w = _summary(warm) if warm else _summary([first])
    out = {"tool": tool, "first": first, "warm": w,
           "cores": (w["cpu_s"] / w["wall_s"]) if w["wall_s"] > 0 else None,
           "import_s": import_s, "peak_rss_mb": peak_rss_mb, "background_cores": background_cores,
           "stages": stages or {}, "note": note}
    out.update(extra)
    return out


def size_result(label: str, units: int, unit: str, tools: list[dict], *, task: str | None = None,
                **extra) -> dict:
    """The tools measured on one input: ``units`` of ``unit`` (lines, passages, runs ...).

    ``task`` names what is measured when one benchmark measures several things (an import and a
    status, a pool and a replay): the doc generator then compares tools only within a size (as
    always), and computes the growth per unit between the first and the last size *of each task*;
    tools of different tasks are never compared."""
    out = {"label": label, "units": int(units), "unit": unit, "tools": tools, **extra}
    if task is not None:
        out["task"] = task
    return out


def target(what: str, value: float, op: str, limit: float, unit: str = "") -> dict:
    """A goal the benchmark checks (``op`` is ``<=`` or ``>=``), recorded with its measured value."""
    met = value <= limit if op == "<=" else value >= limit
    return {"what": what, "value": float(value), "op": op, "limit": float(limit), "unit": unit,
            "met": bool(met)}


def machine() -> dict:
    """The machine and software the figures come from."""
    model = ""
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        pass
    mem_gb = None
    try:
        mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        pass
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = bool(subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "qrelkit"],
                                    capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "", False
    return {"cores": os.cpu_count(), "cpu": model, "memory_gb": round(mem_gb, 1) if mem_gb else None,
            "system": f"{platform.system()} {platform.release()}", "python": platform.python_version(),
            "qrelkit_commit": commit + ("+changes" if dirty else "")}


def versions(*dists: str) -> dict:
    """Installed versions of the named distributions (qrelkit and the peers)."""
    from importlib import metadata  # lazy: only when a result is written

    out = {}
    for d in ("qrelkit", "numpy", "pandas", "pyarrow", "numba", *dists):
        try:
            out[d] = metadata.version(d)
        except metadata.PackageNotFoundError:
            out[d] = None
    return out


def benchmark_result(name: str, title: str, sizes: list[dict], *, peers: tuple[str, ...] = (),
                     targets: list[dict] | None = None, checks: dict | None = None,
                     notes: list[str] | None = None, **extra) -> dict:
    """A whole benchmark's result. ``name`` keys its section of docs/benchmarks.md; ``checks``
    holds what the benchmark verified (outputs equal to the peers' or to references ...);
    ``notes`` are sentences printed under the table (what each tool is given, what it does)."""
    if len(sizes) < 1:
        raise ValueError("a benchmark result needs at least one size")
    return {"schema": SCHEMA, "benchmark": name, "title": title,
            "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": machine(), "versions": versions(*peers), "sizes": sizes,
            "targets": targets or [], "checks": checks or {}, "notes": notes or [], **extra}


def write_result(res: dict, out_file, script: str, argv: list[str] | None) -> Path:
    """Record the exact command, write ``res`` as JSON to ``out_file`` and return its path."""
    res["command"] = f"python benchmarks/{script} " + " ".join(argv if argv is not None else sys.argv[1:])
    out = Path(out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2, sort_keys=False) + "\n")
    print(f"(result written to {out}; `python scripts/gen_benchmarks_doc.py --collect {out.parent}` "
          "puts it into docs/benchmarks.md)", file=sys.stderr)
    return out


def measure(fn, repeats: int, *, children: bool = False):
    """Call ``fn()`` once (the first call) and ``repeats`` more times (warm), timing each:
    returns ``(first, warm, last_value)`` as :func:`call` dicts. CPU is this process's (all its
    threads), plus its reaped children's when ``children`` (forked workers)."""
    first, warm, values = measure_each(lambda: None, lambda _: fn(), repeats, children=children, keep=False)
    return first, warm, values[-1]


def measure_each(setup, fn, repeats: int, teardown=None, *, children: bool = False,
                 keep: bool = True) -> tuple[dict, list[dict], list]:
    """The one timing loop of the benchmarks: ``setup()`` untimed before each call, its value given
    to ``fn`` (a fresh store for each import ...), ``teardown(that value)`` untimed after it; the
    first call, then ``repeats`` warm ones. Returns ``(first, warm, the value of every call)`` (with
    ``keep=False`` the last call's only: each value is released once the next is made, so that a
    peak RSS read afterwards counts at most two); CPU as :func:`measure` says."""
    import resource  # lazy: Unix only, and only where a benchmark measures
    import time  # lazy: likewise

    def cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_SELF)
        t = r.ru_utime + r.ru_stime
        if children:
            c = resource.getrusage(resource.RUSAGE_CHILDREN)
            t += c.ru_utime + c.ru_stime
        return t

    calls, values = [], []
    for _ in range(1 + repeats):
        arg = setup()
        c0, t0 = cpu(), time.perf_counter()
        v = fn(arg)
        if keep:
            values.append(v)
        else:  # the previous value released now, inside the timed call, once the new one is made
            values[:] = [v]
        calls.append(call(time.perf_counter() - t0, cpu() - c0))
        if teardown is not None:
            teardown(arg)
    return calls[0], calls[1:], values


def tool_named(size: dict, name: str) -> dict | None:
    """The tool called ``name`` among a size's (None when it did not run there)."""
    return next((t for t in size["tools"] if t["tool"] == name), None)
