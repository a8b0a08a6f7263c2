"""The organizer page's figures, from the store's tables (no HTTP): throughput per assessor (from
the judgments' times), who owes what, and per topic two small charts — passages judged over time
and the relevance density against the stopping rule's line — drawn as plain SVG on the server
(no front-end build, no plotting package; every text in them escaped).

>>> svg = line_chart([(0, 0.0), (1, 0.5), (2, 0.25)], y_max=1.0, line=0.4, title="1001 <b>")
>>> svg.startswith("<svg") and "1001 &lt;b&gt;" in svg and "<b>" not in svg
True
"""

from __future__ import annotations

import html
from datetime import datetime, timezone
from typing import Any, Iterable

import numpy as np
import pandas as pd

#: a gap between two judgments of one assessor longer than this is a pause, not a judgment's time
BREAK_S = 600.0
#: points of a chart at most (a topic's thousands of judgments thinned evenly, the last one kept)
MAX_POINTS = 200


def _times(values: Iterable[Any]) -> pd.Series:
    return pd.to_datetime(pd.Series(list(values), dtype=object), utc=True, format="ISO8601")


def throughput(records: pd.DataFrame, now: datetime | None = None) -> list[dict[str, Any]]:
    """Per assessor, from judgment ``records`` (``assessor, time``): ``judged``, ``per_hour``
    (judgments per hour of judging: the gaps between consecutive judgments, pauses over
    :data:`BREAK_S` left out), ``median_s`` (the median of those gaps: seconds per judgment),
    ``last_active`` (the time of the last judgment, ISO 8601 UTC) and ``idle_min`` (minutes since).
    Rates are None below two judgments.

    >>> r = pd.DataFrame({"assessor": ["ann"] * 4, "time": ["2026-01-01T10:00:00+00:00",
    ...     "2026-01-01T10:00:10+00:00", "2026-01-01T10:00:30+00:00", "2026-01-01T12:00:00+00:00"]})
    >>> row = throughput(r, now=datetime(2026, 1, 1, 12, 30, tzinfo=timezone.utc))[0]
    >>> row["judged"], row["per_hour"], row["median_s"], row["idle_min"]
    (4, 240.0, 15.0, 30)
    """
    now = now or datetime.now(timezone.utc)
    out = []
    for name, g in records.groupby("assessor", sort=True):
        t = _times(g["time"]).sort_values(kind="stable")
        gaps = t.diff().dt.total_seconds().dropna()
        work = gaps[gaps <= BREAK_S]
        busy = float(work.sum())
        last = t.iloc[-1].to_pydatetime()
        out.append({"assessor": str(name), "judged": int(len(t)),
                    "per_hour": round(len(work) / busy * 3600, 1) if busy > 0 else None,
                    "median_s": round(float(work.median()), 1) if len(work) else None,
                    "last_active": last.isoformat(timespec="seconds"),
                    "idle_min": max(int((now - last).total_seconds() // 60), 0)})
    return out


def owed(pending: pd.DataFrame, accounts: dict[str, str]) -> list[dict[str, Any]]:
    """Who owes what: per assessor, topic and batch (in issue order) the items owed, from the
    store's pending items (``batch_id, qid, kind, assessor``); ``account``: the assessor's
    account (``none`` for a name without one: nobody will judge those items until one is added
    or, with free topic choice, someone takes the topic)."""
    if not len(pending):
        return []
    g = pending.groupby(["assessor", "qid", "batch_id", "kind"], sort=False).size().reset_index(name="owed")
    g = g.sort_values("assessor", kind="stable")
    return [{"assessor": str(a), "account": accounts.get(str(a), "none"), "qid": str(q), "batch_id": str(b),
             "kind": str(k), "owed": int(n)} for a, q, b, k, n in zip(g["assessor"], g["qid"], g["batch_id"],
                                                                     g["kind"], g["owed"])]


def _thin(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    if len(points) <= MAX_POINTS:
        return points
    keep = np.unique(np.linspace(0, len(points) - 1, MAX_POINTS).round().astype(int))
    return [points[i] for i in keep]


def topic_series(records: pd.DataFrame, labels: pd.DataFrame, relevant: set[int]) -> dict[str, dict[str, Any]]:
    """Per topic, the two charts' points: ``judged`` — (minutes since the topic's first judgment,
    passages judged by then), from judgment ``records`` (``qid, docid, time``), with ``start``
    and ``end`` times; ``density`` — (passages judged, relevance density so far) in judging
    order, from ``labels`` (one grade per passage: ``qid, grade``, as the stopping rule sees it)."""
    out: dict[str, dict[str, Any]] = {}
    if len(records):
        timed = records.assign(t=_times(records["time"]).set_axis(records.index))
        first = timed.groupby(["qid", "docid"])["t"].min().reset_index()
        for q, g in first.groupby("qid", sort=False):
            t = g["t"].sort_values(kind="stable")
            mins = ((t - t.iloc[0]).dt.total_seconds() / 60).round(2).tolist()
            out.setdefault(str(q), {})["judged"] = _thin([(m, float(i + 1)) for i, m in enumerate(mins)])
            out[str(q)]["start"] = t.iloc[0].isoformat(timespec="seconds")
            out[str(q)]["end"] = t.iloc[-1].isoformat(timespec="seconds")
    for q, g in labels.groupby("qid", sort=False):
        rel = np.cumsum(g["grade"].isin(relevant).to_numpy())
        n = np.arange(1, len(g) + 1)
        out.setdefault(str(q), {})["density"] = _thin([(float(i), round(float(d), 4)) for i, d in zip(n, rel / n)])
    return out


def line_chart(points: list[tuple[float, float]], *, width: int = 170, height: int = 56, y_max: float | None = None,
               line: float | None = None, title: str = "", x_label: str = "", y_label: str = "") -> str:
    """A small line chart as SVG text: ``points`` (x, y) scaled into ``width`` x ``height`` (y from
    0 to ``y_max``, else the largest y), a dashed horizontal ``line`` (the stopping rule's
    density) when given, the last value and the labels as text (escaped), ``title`` as the
    chart's accessible name. Nothing but a frame when there is no point."""
    pad, top = 4, 12
    w, h = width - 2 * pad, height - top - pad
    esc = html.escape
    ys = [y for _, y in points]
    ymax = y_max if y_max is not None else max(ys + [line or 0.0, 1.0])
    xs = [x for x, _ in points]
    xmin, xmax = (min(xs), max(xs)) if xs else (0.0, 1.0)
    span = (xmax - xmin) or 1.0

    def px(x: float, y: float) -> str:
        return f"{pad + (x - xmin) / span * w:.1f},{top + h - min(y, ymax) / ymax * h:.1f}"

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}"><title>{esc(title)}</title>',
             f'<rect x="{pad}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#ccc"/>']
    if line is not None:
        y = f"{top + h - min(line, ymax) / ymax * h:.1f}"
        parts.append(f'<line class="rule-line" x1="{pad}" x2="{pad + w}" y1="{y}" y2="{y}" stroke="#c00" '
                     f'stroke-dasharray="3,2"/>')
    if points:
        path = " ".join(px(x, y) for x, y in (points if len(points) > 1 else points * 2))
        parts.append(f'<polyline fill="none" stroke="#36c" stroke-width="1.5" points="{path}"/>')
        last = points[-1][1]
        parts.append(f'<text x="{width - pad}" y="10" font-size="9" text-anchor="end">'
                     f'{esc(y_label)} {last:.3g}</text>')
    parts.append(f'<text x="{pad}" y="10" font-size="9">{esc(x_label)}</text></svg>')
    return "".join(parts)
