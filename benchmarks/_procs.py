"""From measurements made in fresh processes to the shared result shape (``_results.py``).

A benchmark child times its work with :func:`_results.measure` (the first call, then warm repeats)
and reports it with :func:`_machine.emit_result` as ``{"first": call, "warm": [call, ...],
"import_s": s, "peak_rss_mb": mb, ...}``; the parent starts it with
:func:`_machine.run_child_process`, which adds the cores other processes used meanwhile
(``background_cores``). :func:`tool_from_processes` turns the children of one tool at one size
(one or more fresh processes) into a :func:`_results.tool_result`.
"""

from __future__ import annotations

import statistics

from _results import call, measure_each, tool_result


def median_call(calls: list[dict]) -> dict | None:
    """The median wall and the median CPU of ``calls`` as one call (None for none)."""
    if not calls:
        return None
    return call(statistics.median(c["wall_s"] for c in calls), statistics.median(c["cpu_s"] for c in calls))


def _median(xs):
    xs = [x for x in xs if x is not None and x == x]
    return statistics.median(xs) if xs else None


def tool_from_processes(tool: str, procs: list[dict], *, note: str | None = None, stages: dict | None = None,
                        **extra) -> dict:
    """One tool at one size, from the results of its fresh processes: ``first`` is the median of
    the processes' first calls, ``warm`` every warm repeat of every process; imports and the
    others' load are medians over the processes, the peak RSS their largest."""
    return tool_result(tool, first=median_call([p["first"] for p in procs if p.get("first")]),
                       warm=[c for p in procs for c in p.get("warm", [])],
                       import_s=_median([p.get("import_s") for p in procs]),
                       peak_rss_mb=max((p["peak_rss_mb"] for p in procs if p.get("peak_rss_mb")), default=None),
                       background_cores=_median([p.get("background_cores") for p in procs]),
                       stages=stages, note=note, processes=len(procs), **extra)


def median_stages(procs: list[dict], key: str | None = "stages") -> dict:
    """The median over processes of each stage's seconds (``key`` of each result; None: the
    results are the stage dicts themselves)."""
    dicts = [p if key is None else p.get(key, {}) for p in procs]
    names = [k for d in dicts for k in d]
    return {k: _median([d.get(k) for d in dicts]) for k in dict.fromkeys(names)}


def measure_all(fn, repeats: int) -> tuple[dict, list[dict], list]:
    """:func:`_results.measure` keeping the value of every call: ``(first, warm, values)``."""
    return measure_each(lambda: None, lambda _: fn(), repeats)


def tool_from_whole_processes(tool: str, runs: list[dict], *, note: str | None = None, **extra) -> dict:
    """One tool measured as whole processes (:func:`_machine.run_process`): the first process is
    the first call, the others the warm ones; the peak RSS the largest, others' load the median."""
    return tool_result(tool, first=call(runs[0]["wall_s"], runs[0]["cpu_s"]),
                       warm=[call(r["wall_s"], r["cpu_s"]) for r in runs[1:]],
                       peak_rss_mb=max(r["peak_rss_mb"] for r in runs),
                       background_cores=_median([r["background_cores"] for r in runs]), note=note, **extra)
