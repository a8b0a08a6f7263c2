"""The preference view of the web app (docs/web.md, "Preference tasks"): an assessor answers the
crowd tasks of the preference protocol assigned to them (:mod:`qrelkit.campaign.prefs`), one
comparison at a time — the question, two passages side by side, left or right. Answers are
kept in the campaign store (one transaction each, idempotent); when an assessor finishes a
task the protocol's screening runs (:func:`qrelkit.campaign.prefs.screen_preferences`). Until
then the assessor may undo their last answer (a retraction row in the store, never a deletion:
:meth:`qrelkit.store.interfaces.Preferences.retract`) and answer that comparison again.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from qrelkit.campaign.prefs import excluded_assessors, preference_status, screen_preferences
from qrelkit.web.service import Account, CampaignService, WebError

log = logging.getLogger("qrelkit.web")

#: what a POSTed choice may say (the answers file's words: left/right, l/r, any case)
CHOICES = {"left": "left", "l": "left", "right": "right", "r": "right"}


def by_topic(rows):
    """A task's comparisons grouped by topic (the topics in the order of their first comparison,
    each topic's in slot order): the topic changes as seldom as it can. The index is renumbered.

    >>> import pandas as pd
    >>> by_topic(pd.DataFrame({"slot": [0, 1, 2, 3], "qid": ["b", "a", "b", "a"]}))["slot"].tolist()
    [0, 2, 1, 3]
    """
    rows = rows.sort_values("slot", kind="stable")
    first = {q: i for i, q in reversed(list(enumerate(rows["qid"].astype(str))))}
    rank = rows["qid"].astype(str).map(first)
    return rows.assign(_rank=rank.to_numpy()).sort_values(["_rank", "slot"], kind="stable").drop(
        columns="_rank").reset_index(drop=True)


class PreferenceViews:
    """What the web app does with the preference tasks of one campaign (see the module
    documentation); methods raise :class:`~qrelkit.web.service.WebError` for refused requests."""

    def __init__(self, svc: CampaignService) -> None:
        self.svc = svc
        self.lock = threading.Lock()  # one screening at a time (it may re-issue tasks)
        self.last_error: str | None = None

    def overview(self, acc: Account) -> list[dict[str, Any]]:
        """The preference tasks assigned to ``acc``: ``task_id, comparisons, answered, state``
        (``open``, ``done``, or ``closed`` for an assessor the screening excluded)."""
        s = self.svc.store()
        mine = s.prefs.assignments(acc.name)
        if not len(mine):
            return []
        tasks = s.prefs.tasks()
        size = tasks.groupby("task_id").size().to_dict()
        ans = s.prefs.answers(acc.name)
        answered = ans.groupby("task_id").size().to_dict() if len(ans) else {}
        closed = acc.name in excluded_assessors(s)
        out = []
        for t in mine["task_id"]:
            n, k = int(size.get(t, 0)), int(answered.get(t, 0))
            out.append({"task_id": t, "comparisons": n, "answered": k,
                        "state": "done" if k >= n else ("closed" if closed else "open")})
        return out

    def _task(self, acc: Account, task_id: str):
        """The comparisons of ``acc``'s task ``task_id`` (404 for a task that is not theirs)."""
        s = self.svc.store()
        mine = s.prefs.assignments(acc.name)
        if task_id not in set(mine["task_id"]):
            raise WebError(404, f"no preference task {task_id} for you")
        return s.prefs.tasks(task_id).sort_values("slot", kind="stable")

    def view(self, acc: Account, task_id: str) -> dict[str, Any]:
        """The page of a task: the next comparison ``acc`` has not answered (question, left and
        right passages), progress, ``last`` (``slot, choice`` of the answer an undo would undo,
        while the task is being answered; else None), and the next open task once this one is
        done."""
        rows = self._task(acc, task_id)
        s = self.svc.store()
        ans = s.prefs.answers(acc.name, task_id)
        answered = dict(zip(ans["slot"].astype(int), ans["choice"]))
        total = len(rows)
        out: dict[str, Any] = {"task_id": task_id, "total": total, "answered": len(answered), "item": None,
                               "next_task": None, "last": None}
        rows = by_topic(rows)
        todo = rows[~rows["slot"].astype(int).isin(set(answered))]
        log = s.prefs.answer_log(task_id) if len(ans) else None
        mine = None if log is None else log[(log["worker"] == acc.name) & log["retracted"].isna()]
        last = None if mine is None or not len(mine) else {
            "slot": int(mine["slot"].iloc[-1]), "choice": str(mine["choice"].iloc[-1]), "answer": int(mine["seq"].iloc[-1])}
        if not len(todo):
            out["state"] = "done"
        elif acc.name in excluded_assessors(s):
            out["state"] = "closed"
        else:
            r = todo.iloc[0]
            at = rows.index.get_loc(todo.index[0])
            out["state"] = "answering"
            out["last"] = last  # what "Undo last answer" undoes (None before the first answer)
            out["item"] = {"slot": int(r["slot"]), "position": len(answered) + 1, "qid": r["qid"], "query": r["query"],
                           "left": {"docid": r["left_docid"], "text": r["left_text"]},
                           "right": {"docid": r["right_docid"], "text": r["right_text"]},
                           "topic_changed": bool(at > 0 and str(rows["qid"].iloc[at - 1]) != str(r["qid"])),
                           **self.svc.details.get(str(r["qid"]), {})}
        if out["state"] != "answering":
            nxt = [t["task_id"] for t in self.overview(acc) if t["state"] == "open" and t["task_id"] != task_id]
            out["next_task"] = nxt[0] if nxt else None
        return out

    def answer(self, acc: Account, task_id: str, slot: Any, choice: Any) -> dict[str, Any]:
        """Store ``acc``'s answer to one comparison (one transaction; the same answer again is
        ``repeated`` and writes nothing; another answer to it is a conflict, 409), answered after
        the commit. The answer that finishes the task runs the screening."""
        rows = self._task(acc, task_id)
        side = CHOICES.get(str(choice).strip().lower())
        if side is None:
            raise WebError(400, f"choice {choice!r} is neither left nor right")
        try:
            k = int(str(slot).strip())
        except ValueError:
            raise WebError(400, f"comparison {slot!r} is not a number") from None
        if k not in set(rows["slot"].astype(int)):
            raise WebError(404, f"task {task_id} has no comparison {k}")
        s = self.svc.store()
        closed = acc.name in excluded_assessors(s)
        if closed and not (s.prefs.answers(acc.name, task_id)["slot"].astype(int) == k).any():
            raise WebError(409, f"task {task_id} is closed for you")
        stored = s.prefs.answer(task_id, k, acc.name, side)
        n = len(s.prefs.answers(acc.name, task_id))
        done = n >= len(rows)
        if done:  # a retry of the finishing answer screens again (idempotent): a failed screening is not lost
            self.screen()
        return {"task_id": task_id, "slot": k, "choice": side, "status": "stored" if stored else "repeated",
                "answered": n, "total": len(rows), "done": done}

    def undo(self, acc: Account, task_id: str, slot: Any, answer: Any = None) -> dict[str, Any]:
        """Undo ``acc``'s last answer in force of task ``task_id``, named by its comparison
        ``slot`` and, when given, its number ``answer`` (a retried undo is ``repeated`` and
        undoes nothing more, even after the comparison was answered again; a stale one, naming
        another comparison than the last answered, is 409). Refused (409) once the task is
        finished (the screening has run on it), with nothing to undo, and for an assessor the
        screening excluded. Answers ``slot, choice`` undone, ``status`` and the new progress."""
        rows = self._task(acc, task_id)
        try:
            k = int(str(slot).strip())
        except ValueError:
            raise WebError(400, f"comparison {slot!r} is not a number") from None
        s = self.svc.store()
        if acc.name in excluded_assessors(s) and len(s.prefs.answers(acc.name, task_id)) < len(rows):
            raise WebError(409, f"task {task_id} is closed for you: your answers can no longer be undone")
        try:
            seq = None if answer is None or str(answer).strip() == "" else int(str(answer).strip())
        except ValueError:
            raise WebError(400, f"answer {answer!r} is not a number") from None
        res = s.prefs.retract(task_id, acc.name, k, answer=seq)  # a finished task: [task-finished], 409
        n = len(s.prefs.answers(acc.name, task_id))
        return {"task_id": task_id, "slot": res["slot"], "choice": res["choice"], "status": res["status"],
                "answered": n, "total": len(rows), "done": n >= len(rows)}

    def screen(self) -> dict | None:
        """Run the screening now (one at a time); a failure is logged and kept in
        :attr:`last_error`, never the answer's (which is stored already)."""
        with self.lock:
            try:
                out = screen_preferences(self.svc.store())
                self.last_error = None
                return out
            except Exception as exc:  # the answer is stored: the server goes on, the organizer sees the error
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("screening the preference answers failed")
                return None

    def status(self) -> dict[str, Any]:
        """The organizer's preference figures (:func:`qrelkit.campaign.prefs.preference_status`)."""
        out = preference_status(self.svc.store())
        out["error"] = self.last_error
        return out
