"""benchmarks/_child.run_tools_in_rounds: tools take turns in fresh processes (A B, then B A, ...)
so that a ratio between them is not one slow spell's, and each tool's processes merge into one
result (the median first call, every warm call, stage medians, the largest peak, the raw results)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _child  # noqa: E402


def _proc(first: float, warm: list[float], rss: float, stages: list[dict] | None = None) -> dict:
    st = stages if stages is not None else [{"read": w / 2} for w in warm]
    return {"first": {"wall_s": first, "cpu_s": first}, "warm": [{"wall_s": w, "cpu_s": w} for w in warm],
            "import_s": 0.1, "peak_rss_mb": rss, "background_cores": 0.0, "first_stages": {"read": first / 2},
            "stages": {}, "warm_stages": st, "process_wall_s": first + sum(warm), "rows": 7}


def test_turns_and_merge(monkeypatch, capsys):
    calls = []
    results = {"A": [_proc(3.0, [1.0, 1.2], 100), _proc(5.0, [2.0], 300), _proc(4.0, [1.4], 200)],
               "B": [_proc(1.0, [0.5], 50), _proc(1.0, [0.7], 60), _proc(2.0, [0.6], 70)]}

    def fake(cmd, idle_wait):
        calls.append(cmd[0])
        return results[cmd[0]][sum(c == cmd[0] for c in calls) - 1]

    monkeypatch.setattr(_child, "run_child_process", fake)
    a, b = _child.run_tools_in_rounds([("A", ["A"], "note a"), ("B", ["B"], None)], 3, idle_wait=0)
    assert calls == ["A", "B", "B", "A", "A", "B"]
    assert a["first"]["wall_s"] == 4.0 and a["warm"]["n"] == 4 and a["warm"]["wall_s"] == pytest.approx(1.3)
    assert a["peak_rss_mb"] == 300 and a["processes"] == 3 and a["note"] == "note a"
    assert a["stages"] == {"read": pytest.approx(0.65)} and a["first_stages"] == {"read": 2.0}
    assert a["process_wall_s"] == 5.4 and [r["rows"] for r in a["raw"]] == [7, 7, 7]
    assert b["first"]["wall_s"] == 1.0 and b["warm"]["wall_s"] == 0.6


def test_without_repeats_the_stages_are_the_first_calls(monkeypatch, capsys):
    monkeypatch.setattr(_child, "run_child_process", lambda cmd, idle_wait: _proc(2.0, [], 10, stages=[]))
    (a,) = _child.run_tools_in_rounds([("A", ["A"], None)], 1, idle_wait=0)
    assert a["stages"] == {"read": 1.0}
    with pytest.raises(SystemExit, match="at least 1"):
        _child.run_tools_in_rounds([("A", ["A"], None)], 0, idle_wait=0)


def test_measure_keeps_only_the_last_value_measure_each_every_one():
    """A child reads its peak RSS after measure(): the values of earlier calls must be gone by then
    (at most two alive at once, as before the loops were one); measure_each keeps every value."""
    import gc
    import weakref

    import _results

    class Big:
        pass

    made = []

    def fn():
        made.append(weakref.ref(b := Big()))
        return b

    first, warm, last = _results.measure(fn, 3)
    gc.collect()
    assert [r() is not None for r in made] == [False, False, False, True] and last is made[-1]()
    assert len(warm) == 3 and first["wall_s"] >= 0
    _, _, values = _results.measure_each(lambda: None, lambda _: Big(), 2)
    assert len(values) == 3
