"""One measured tool in a fresh process, for the benchmarks that time whole tools side by side
(bench_pool.py, bench_eval.py): the child measures the first call beside the warm repeats
(:func:`_results.measure`), its imports apart, and prints one result line; the parent turns it into
a :func:`_results.tool_result` with the load other processes put on the machine meanwhile."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import ChildFailed, emit_result, peak_rss_mb, run_child_process  # noqa: E402
from _procs import median_stages, tool_from_processes  # noqa: E402
from _results import measure  # noqa: E402


def child_run(imports, work, repeats: int, extra=None) -> None:
    """In the child: ``imports()`` (timed apart), then ``work()`` once and ``repeats`` more times.
    ``work`` returns a dict of stage seconds (may be empty); ``extra()``, called after the last
    call, adds keys to the result (what the work produced: pool size, ...)."""
    t0 = time.perf_counter()
    imports()
    import_s = time.perf_counter() - t0
    stages: list[dict] = []

    def call():
        st = work()
        stages.append(st or {})
        return st

    first, warm, _ = measure(call, repeats)
    res = {"import_s": import_s, "first": first, "warm": warm, "peak_rss_mb": peak_rss_mb(),
           "first_stages": stages[0], "stages": median_stages(stages[1:] or stages[:1], key=None),
           "warm_stages": stages[1:]}
    if extra is not None:
        res.update(extra())
    emit_result(res)


def run_tool(name: str, cmd: list[str], *, idle_wait: float, note: str | None = None, **keep) -> dict:
    """One child of one tool: :func:`run_tools_in_rounds` with one round (``keep``: keys added)."""
    out = run_tools_in_rounds([(name, cmd, note)], 1, idle_wait=idle_wait)[0]
    out.update(keep)
    return out


_MERGED = ("first", "warm", "stages", "first_stages", "warm_stages")  # a child's keys the merged result holds


def run_tools_in_rounds(tools: list[tuple[str, list[str], str | None]], rounds: int, *, idle_wait: float) -> list[dict]:
    """Each ``(name, command, note)`` run ``rounds`` times in fresh processes, the tools taking turns
    (A B, then B A, ...), so that a slow spell of a shared machine falls on every tool alike and a
    ratio between them is not one spell's; each tool's processes merged
    (:func:`_procs.tool_from_processes`: the median first call, every warm call; stages: the median
    over every warm call, and over the first calls)."""
    if rounds < 1:
        raise SystemExit(f"--rounds must be at least 1, got {rounds}")
    procs: dict[str, list[dict]] = {name: [] for name, _, _ in tools}
    for r in range(rounds):
        for name, cmd, _ in (tools if r % 2 == 0 else tools[::-1]):
            try:
                procs[name].append(run_child_process(cmd, idle_wait=idle_wait))
            except ChildFailed as exc:
                raise SystemExit(f"{name}: {exc}") from None
    out = []
    for name, _, note in tools:
        ps = procs[name]
        warm_stages = [s for p in ps for s in p.get("warm_stages", [])]
        firsts = [p.get("first_stages", {}) for p in ps]
        t = tool_from_processes(name, ps, note=note,
                                stages=median_stages(warm_stages or firsts, key=None),  # no repeats: the first calls'
                                first_stages=median_stages(firsts, key=None),
                                process_wall_s=statistics.median(p["process_wall_s"] for p in ps))
        t["raw"] = [{k: v for k, v in p.items() if k not in _MERGED} for p in ps]
        _print_tool(t)
        out.append(t)
    return out


def _print_tool(out: dict) -> None:
    name, first, warm = out["tool"], out["first"], out["warm"]
    bg = out["background_cores"]
    print(f"  {name:22s} first {first['wall_s']:.2f} s wall / {first['cpu_s']:.2f} s CPU; warm median "
          f"{warm['wall_s']:.2f} s wall ({warm['wall_min_s']:.2f}-{warm['wall_max_s']:.2f}) / {warm['cpu_s']:.2f} s CPU "
          f"over {warm['n']}; peak {out['peak_rss_mb']:.0f} MB"
          + ("" if bg is None else f"; other load {bg:.2f} cores"), flush=True)


def per_unit_growth(small: dict, large: dict, units_small: int, units_large: int) -> float:
    """(time per unit at the large size) / (time per unit at the small size), warm median wall."""
    return (large["warm"]["wall_s"] / units_large) / (small["warm"]["wall_s"] / units_small)


def markdown(res: dict) -> str:
    """A benchmark result as a Markdown table (one row per size and tool) and its targets."""
    lines = ["| size | tool | first call wall / CPU | warm wall (min-max) / CPU | cores | peak RSS | stages (warm; first) "
             "| other load |", "|---|---|---|---|---|---|---|---|"]
    for size in res["sizes"]:
        for t in size["tools"]:
            f, w = t["first"], t["warm"]
            st = ", ".join(f"{k} {v:.2f}" for k, v in t["stages"].items())
            fs = ", ".join(f"{k} {v:.2f}" for k, v in (t.get("first_stages") or {}).items())
            bg = t["background_cores"]
            lines.append(f"| {size['label']} | {t['tool']} | {f['wall_s']:.2f} / {f['cpu_s']:.2f} s | "
                         f"{w['wall_s']:.2f} ({w['wall_min_s']:.2f}-{w['wall_max_s']:.2f}) / {w['cpu_s']:.2f} s | "
                         f"{t['cores']:.2f} | {t['peak_rss_mb']:.0f} MB | {st}" + (f"; first: {fs}" if fs else "")
                         + " | " + ("" if bg is None else f"{bg:.2f} cores") + " |")
    lines.append("")
    for tg in res["targets"]:
        lines.append(f"- {tg['what']}: {tg['value']:.3f} {tg['unit']} ({tg['op']} {tg['limit']:g}: "
                     + ("met" if tg["met"] else "**missed**") + ")")
    return "\n".join(lines)
