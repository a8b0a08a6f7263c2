"""What the web app does with a campaign, without HTTP: who sees which topic, the next passage of
an assessor, a judgment through the store's import path, review and change, skip, progress, the organizer's
figures. Every method raises :class:`WebError` (an HTTP status and a message) for a request it
refuses; the app turns it into a 4xx answer.

One :class:`CampaignService` per server process; it keeps one store connection per thread (a
:class:`~qrelkit.campaign.CampaignStore` is one SQLite connection).
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import io
import json
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import numpy as np
import pandas as pd

from qrelkit.cal import JudgingState
from qrelkit.campaign import Campaign, CampaignStore, open_campaign_store
from qrelkit.campaign.corrections import apply_changes
from qrelkit.campaign.door import read_guidelines
from qrelkit.campaign.lock import advance_lock
from qrelkit.campaign.rounds import campaign_rule, describe_protocol, topic_stopping
from qrelkit.campaign.judging import TEXT_INDEX, corpus_sha256
from qrelkit.campaign.settings import Settings
from qrelkit.campaign.store import campaign_config, campaign_corpus
from qrelkit.errors import InputError
from qrelkit.io.qrels import write_qrels
from qrelkit.io.sources import is_irds
from qrelkit.io.topics import read_topic_details
from qrelkit.labels.aggregate import assessor_agreement
from qrelkit.store import ENCOUNTERED, ConflictError, TextIndex, combine_log, open_text_index
from qrelkit.web.organizer import owed as owed_table, throughput, topic_series
from qrelkit.web.view import grade_definitions, highlight_spans, plain_view, query_terms, render_markdown
from qrelkit.web.worker import Advancer

#: the TREC Deep Learning names of the grades 0-3 (docs/protocol.md); other grades show as numbers
GRADE_NAMES = {0: "Irrelevant", 1: "Related", 2: "Highly relevant", 3: "Perfectly relevant"}
WEB_SOURCE = "web"
CHANGE_SOURCE = "web-change"
#: the campaign's correction command (docs/campaign.md): a change once a topic is decided
CORRECTION_COMMAND = "qrelkit campaign judgments set"
SNIPPET = 160  # characters of a passage in the review of one's judgments
_NOT_ASSESSORS = ("encountered", "initial-qrels", "oracle")


class WebError(Exception):
    """A refused request: ``status`` (4xx), a message for the person who made it and ``links``
    (``(href, label)`` pairs) to go on from there."""

    def __init__(self, status: int, message: str, links: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.links = tuple(links)


@dataclass(frozen=True)
class Account:
    """A logged-in account (re-read from the store on every request)."""

    name: str
    organizer: bool
    topics: tuple[str, ...]
    generation: int


class PassageTexts:
    """Passage texts of a campaign from its text index (:func:`qrelkit.store.textindex.open_text_index`,
    ``DIR/text-index.sqlite``: built at the first need, never a corpus scan per request), cached."""

    def __init__(self, directory: str | os.PathLike, corpus: Any, sha256: str, limit: int = 200_000) -> None:
        """``corpus``: a corpus spec or source, or a function giving one (called at the first text
        asked for)."""
        self.path, self.corpus, self.sha256, self.limit = Path(directory) / TEXT_INDEX, corpus, sha256, limit
        self._index: TextIndex | None = None
        self._texts: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def get(self, docid: str, wanted: set[str]) -> str | None:
        """The text of ``docid`` (None when the corpus lacks it); ``wanted``: fetched with it."""
        if docid in self._texts:
            return self._texts[docid]
        with self._lock:
            if self._index is None:
                corpus = self.corpus() if callable(self.corpus) else self.corpus
                self._index = open_text_index(corpus, self.path, sha256=self.sha256)
            if len(self._texts) > self.limit:
                self._texts.clear()
            want = {d for d in wanted if d not in self._texts} | {docid}
            found = self._index.texts(want)
            for d in want:
                self._texts[d] = found[d][0] if d in found else None
            return self._texts[docid]

    def close(self) -> None:
        with self._lock:
            if self._index is not None:
                self._index.close()
                self._index = None


class CampaignService:
    """The web app's view of one campaign folder (see the module documentation)."""

    def __init__(self, directory: str | os.PathLike, advancer: Advancer | None = None) -> None:
        self.dir = Path(directory)
        Campaign(self.dir)  # [not-a-campaign] before anything else
        self._local = threading.local()
        self._stores: list[CampaignStore] = []
        self._stores_lock = threading.Lock()
        s = self.store()
        self.secret = s.accounts.web_secret()
        self.cfg = campaign_config(s)
        paths = s.state.get("paths") or {}
        tdf = s.topics.all()
        self.topic_text = dict(zip(tdf["qid"].astype(str), tdf["text"].astype(str)))
        self.topic_order = list(self.topic_text)
        self.details: dict[str, dict[str, str]] = {}
        self.settings = Settings.from_config(self.cfg)  # every component's parameters, read once
        if paths.get("topics") and (is_irds(paths["topics"]) or Path(paths["topics"]).is_file()):
            with contextlib.suppress(InputError):  # descriptions are a help: a dataset not at hand has none
                self.details = read_topic_details(paths["topics"])
        # the corpus as recorded (a folder's recorded shards), opened at the first text asked for
        self.texts = PassageTexts(self.dir, lambda: campaign_corpus(self.store()), corpus_sha256(s))
        self.rule = campaign_rule(self.cfg)  # the campaign's stopping rule, made once
        self.scale = [int(g) for g in self.settings.labels.scale]
        self.relevant = self.settings.relevant
        self.free_choice = self.settings.web.free_topic_choice
        self.skipped = set(self.settings.campaign.skip)  # stages the campaign leaves out
        #: the campaign's name: the protocol's ([protocol] name), else its folder's
        self.name = self.settings.protocol.name or self.dir.name
        self.combine = self.settings.combine
        self.norm = self.settings.dedupe.norm  # the words of the CAL features: what highlighting matches
        self.terms = {q: query_terms(t, self.norm) for q, t in self.topic_text.items()}
        self.definitions = grade_definitions(self.settings.web.grade_definitions, self.scale)
        self.advancer = advancer or Advancer(self.dir)
        self._skips: dict[str, list[tuple[str, str]]] = {}
        self._skip_lock = threading.Lock()

    # -- plumbing ----------------------------------------------------------------------------------

    def store(self) -> CampaignStore:
        """This thread's store connection (opened on first use)."""
        s = getattr(self._local, "store", None)
        if s is None:
            s = open_campaign_store(self.dir)
            self._local.store = s
            with self._stores_lock:
                self._stores.append(s)
        return s

    def close(self) -> None:
        """Close this thread's store connection and let go of the others' (SQLite closes a
        connection only in the thread that made it; the others close when collected)."""
        with self._stores_lock:
            for s in self._stores:
                s.close(from_any_thread=True)
            self._stores.clear()
        self._local = threading.local()
        self.texts.close()

    def grade_names(self) -> list[tuple[int, str]]:
        return [(g, GRADE_NAMES.get(g, str(g)) if self.scale == [0, 1, 2, 3] else str(g)) for g in self.scale]

    @property
    def guidelines_path(self) -> str | None:
        """The guidelines file recorded for the campaign (``[web] guidelines``, checked by
        ``campaign init`` or ``campaign adopt-config``; read from the store each time, so an
        adopted change shows without a restart)."""
        return (self.store().state.get("paths") or {}).get("guidelines")

    def guidelines(self) -> Any:
        """The guidelines page's HTML (``[web] guidelines``, checked at init; read now, so an edit
        shows at once); 404 when the campaign names none, 503 when the file went unreadable."""
        if not self.guidelines_path:
            raise WebError(404, "this campaign has no guidelines ([web] guidelines names no file)")
        try:
            return render_markdown(read_guidelines(self.guidelines_path))
        except InputError as exc:
            raise WebError(503, f"the guidelines cannot be shown now ({exc.message}): tell the organizer") from None

    def my_progress(self, acc: Account, batch_left: int) -> dict[str, int]:
        """``acc``'s own progress: judged today (in the web app, since the server's midnight),
        left in the batch at hand, topics open to her (not decided)."""
        s = self.store()
        midnight = _dt.datetime.now().astimezone().replace(hour=0, minute=0, second=0, microsecond=0)
        today = s.judgments.judged_since(acc.name, midnight.astimezone(_dt.timezone.utc).isoformat(), WEB_SOURCE)
        decided = s.state.decided_topics()
        return {"judged_today": today, "batch_left": batch_left,
                "topics_open": sum(1 for q in self.visible_topics(acc) if q not in decided)}

    # -- accounts ----------------------------------------------------------------------------------

    def account(self, name: str, generation: int) -> Account | None:
        """The account of a session, if it is still active and of the same generation."""
        acc = self.store().accounts.get(name)
        if acc is None or acc["revoked"] is not None or acc["generation"] != generation:
            return None
        return Account(acc["name"], acc["organizer"], tuple(acc["topics"]), acc["generation"])

    # -- topics ------------------------------------------------------------------------------------

    def visible_topics(self, acc: Account) -> list[str]:
        """The topics ``acc`` may open: those of the batches assigned to it (every topic with
        ``[web] free_topic_choice``), limited to the account's topics when it has some."""
        seen = set(self.topic_order) if self.free_choice else self.store().assignments.assigned_topic_set(acc.name)
        if acc.topics:
            seen &= set(acc.topics)
        return [q for q in self.topic_order if q in seen]

    def check_topic(self, acc: Account, qid: str) -> None:
        """404 unless ``acc`` may open topic ``qid`` (another's topic is not found, as a topic
        that does not exist)."""
        if qid not in self.visible_topics(acc):
            raise WebError(404, f"no topic {qid} for you")

    def topic_status(self, qid: str) -> dict[str, Any]:
        """Stage and rule status of a topic: screening, decision (rule, reason), threads, judged,
        relevant and density over the grades in force, and the campaign's stopping rule on it
        (``stopping``: what it needs, where the topic stands; :func:`qrelkit.campaign.rounds.topic_stopping`)."""
        s = self.store()
        ct = self._topic_row(qid)
        n, r = self._label_counts(qid)
        out = {"qid": qid, **{k: ct[k] for k in ("screening", "decision", "rule", "reason")},
               **({} if ct["screening"] or "screening" not in self.skipped else {"screening": "skipped"}),
               "threads": [{"thread": t, "state": st} for t, st in s.topics.thread_states(qid)],
               "judged": n, "relevant": r, "density": round(r / n, 4) if n else None,
               "stopping": topic_stopping(s, self.settings, self.rule, qid).as_dict()}
        return out

    def protocol(self) -> dict[str, Any]:
        """The campaign's pool kind and stopping rule in words (:func:`qrelkit.campaign.rounds.describe_protocol`)."""
        return describe_protocol(self.cfg)

    def _label_counts(self, qid: str) -> tuple[int, int]:
        """Judged passages of a topic and how many are relevant, one grade per passage by
        ``[campaign] combine``: read as plain rows; combined by the store's rule
        (:meth:`~qrelkit.store.interfaces.JudgmentLog.labels`) only when some passage has several assessors."""
        rows = self.store().judgments.topic_grades(qid)
        by: dict[str, dict[str, int]] = {}
        for d, a, g in rows:
            by.setdefault(d, {})[a] = g
        if all(len(v) == 1 for v in by.values()):  # one assessor per passage: every rule gives that grade
            return len(by), sum(1 for v in by.values() if next(iter(v.values())) in self.relevant)
        lab = self.store().judgments.labels(qid, "all", combine=self.combine)
        return len(lab), int(lab["grade"].isin(self.relevant).sum()) if len(lab) else 0

    def topics_overview(self, acc: Account) -> list[dict[str, Any]]:
        """The topic picker's rows: topic, query, items owed by ``acc``, judged by ``acc``, decision."""
        s = self.store()
        owed = s.assignments.pending(acc.name)
        by_topic = owed.groupby("qid").size().to_dict() if len(owed) else {}
        g = s.judgments.assessor_grades(acc.name)
        mine = g.loc[g["source"] == WEB_SOURCE, "qid"].value_counts().to_dict() if len(g) else {}
        ct = s.state.topics()
        dec = {q: (None if pd.isna(d) else d) for q, d in zip(ct["qid"], ct["decision"])}
        return [{"qid": q, "query": self.topic_text.get(q, ""), "owed": int(by_topic.get(q, 0)),
                 "judged": int(mine.get(q, 0)), "decision": dec.get(q)} for q in self.visible_topics(acc)]

    # -- free topic choice: taking over a topic from an assessor without an account ---------------

    def _takeable(self, acc: Account, qid: str) -> list[tuple[str, str]]:
        """(batch, assessor) places on topic ``qid`` that ``acc`` may take: assessors with no
        active account who still owe items there, in batches ``acc`` is not an assessor of."""
        s = self.store()
        staffed = {a["name"] for a in s.accounts.all() if a["revoked"] is None}
        pend = s.assignments.pending(None, qid)
        a = s.assignments.all()
        mine = set(a.loc[a["assessor"] == acc.name, "batch_id"])
        out = []
        for bid, who in dict.fromkeys(zip(pend["batch_id"], pend["assessor"])):
            if who not in staffed and bid not in mine and who != acc.name:
                out.append((str(bid), str(who)))
                mine.add(bid)
        return out

    def take(self, acc: Account, qid: str) -> dict[str, Any]:
        """With ``[web] free_topic_choice``: ``acc`` takes the places on topic ``qid`` of
        assessors who have no account (their open batches, and the topic's later batches as the
        runner issues them: the claim is kept in the store). 409 when there is none to take."""
        if not self.free_choice:
            raise WebError(404, "topics are assigned in this campaign ([web] free_topic_choice is off)")
        self.check_topic(acc, qid)
        with self._runner_quiet(5.0):
            return self._take(acc, qid)

    @contextlib.contextmanager
    def _runner_quiet(self, wait: float) -> Iterator[None]:
        """No runner works while the block runs: this server's (its lock, 409 after ``wait``
        seconds) nor another process's (the campaign's advance lock: ``[campaign-busy]``, 409)."""
        if not self.advancer.lock.acquire(timeout=wait):
            raise WebError(409, "the next batch is being computed: try again in a moment")
        try:
            with advance_lock(self.dir, wait=wait, what="the web app (a change of a judgment or a topic taken)"):
                yield
        finally:
            self.advancer.lock.release()

    def _take(self, acc: Account, qid: str) -> dict[str, Any]:
        """:meth:`take` under the runner's lock: one claim in the store per assessor whose place
        is taken (:meth:`~qrelkit.store.interfaces.Assignments.claim`), honoured by the runner
        whenever it assigns a batch of the topic."""
        places = self._takeable(acc, qid)
        if not places:
            raise WebError(409, f"topic {qid} has no place to take: its assessors all have accounts")
        s = self.store()
        taken = sum(s.assignments.claim(qid, who, acc.name) for who in dict.fromkeys(w for _, w in places))
        return {"qid": qid, "status": "taken", "batches": int(taken)}

    # -- the queue of one assessor on one topic ----------------------------------------------------

    def _queue(self, acc: Account, qid: str, session: str) -> list[tuple[str, str]]:
        owed = self.store().assignments.owed_items(acc.name, qid)
        if not owed:
            return []
        owed = sorted(owed, key=lambda r: r[1] != "pool")  # stable: pool batches first, then CAL, each in issue order
        items = list(dict.fromkeys((b, d) for b, _, d in owed))
        present = set(items)
        with self._skip_lock:
            skipped = [k for k in self._skips.get(session, []) if k in present]
        skipped_set = set(skipped)
        return [k for k in items if k not in skipped_set] + skipped

    def next_item(self, acc: Account, qid: str, session: str) -> dict[str, Any]:
        """The page of a topic for ``acc``: query, description/narrative, the next passage (or
        why there is none: computing, waiting for others, decided), progress and rule status."""
        self.check_topic(acc, qid)
        s = self.store()
        queue = self._queue(acc, qid, session)
        out: dict[str, Any] = {"qid": qid, "query": self.topic_text.get(qid, ""), **self.details.get(qid, {}),
                               "status": self.topic_status(qid), "owed": len(queue), "item": None,
                               "computing": self.advancer.busy, "can_take": False,
                               "reviewable": int(s.judgments.assessor_grades(acc.name, topic=qid)["docid"].nunique())}
        if queue:
            bid, docid = queue[0]
            wanted = {d for _, d in queue[:200]}
            b = s.assignments.assignment(bid, acc.name)
            done, left = self._batch_progress(acc, bid)
            text = self.texts.get(docid, wanted)
            out["item"] = {"batch_id": bid, "docid": docid, "text": text, "kind": b["kind"],
                           "batch_items": done + left, "batch_judged": done,
                           "highlights": highlight_spans(text, self.terms.get(qid, set()), self.norm)}
            out["state"] = "judging"
        elif out["status"]["decision"]:
            out["state"] = "decided"
        elif self.free_choice and self._takeable(acc, qid):
            out["state"], out["can_take"] = "free", True
        else:
            out["state"] = self._idle_state()
        out["waiting"] = self.waiting_for(acc, qid, out["state"])
        out["mine"] = self.my_progress(acc, left if queue else 0)
        out["grade_definitions"] = {str(g): t for g, t in self.definitions.items()}
        return out if acc.organizer else plain_view(out)

    def _batch_progress(self, acc: Account, batch_id: str) -> tuple[int, int]:
        """``acc``'s part of a batch: the passages she judged in it herself, and those she still
        owes there. A CAL batch's encountered passages, whose judgments were copied in from
        another thread, are neither: she never judges them in this batch."""
        s = self.store()
        done = s.judgments.judged_in_batch(acc.name, batch_id, exclude_sources=(ENCOUNTERED,))
        return done, len(s.assignments.owed_in_batch(acc.name, batch_id))

    def poll(self, acc: Account, qid: str, session: str) -> dict[str, Any]:
        """The small JSON a waiting page polls: ``state`` (judging, computing, waiting, paused,
        decided) and what it waits for (``waiting``: :meth:`waiting_for`)."""
        self.check_topic(acc, qid)
        owed = len(self.store().assignments.owed_items(acc.name, qid))
        state = "judging" if owed else ("decided" if self._topic_row(qid)["decision"] else self._idle_state())
        out = {"qid": qid, "state": state, "owed": owed, "runner": self.advancer.state,
               "waiting": self.waiting_for(acc, qid, state)}
        return out if acc.organizer else plain_view(out)

    # -- waiting: what for ---------------------------------------------------------------------------

    def _idle_state(self) -> str:
        """The state of a topic with nothing to judge and no decision: ``paused`` while the
        runner's last run failed (the campaign moves on only once a run goes through),
        ``computing`` while a run is going on or asked for, else ``waiting`` (for assessors)."""
        return "paused" if self.advancer.paused else ("computing" if self.advancer.busy else "waiting")

    def waiting_for(self, acc: Account, qid: str, state: str) -> dict[str, Any] | None:
        """What a topic page with nothing to judge waits for, in words (``text``) and as
        ``reason``: ``decided``, ``paused`` (the runner fails), ``computing`` (the next round,
        with the runner's :meth:`~qrelkit.web.worker.Advancer.estimate`), ``assessor`` (others
        owe items of this topic), ``topics`` (the next stage waits for other topics' batches) or
        ``runner`` (nothing owed anywhere: a run is due). An organizer also sees who owes what
        (``who``: assessor and items owed) and the runner's error; a plain assessor sees no name.
        None while there is something to judge (or a place to take)."""
        if state in ("judging", "free"):
            return None
        if state == "decided":
            return {"reason": "decided", "text": "This topic is decided: nothing more to judge on it."}
        if state == "paused":
            out = {"reason": "paused", "text": "Nothing to judge right now: the campaign is paused; the organizer has "
                                               "been told."}
            return {**out, "error": self.advancer.last_error} if acc.organizer else out
        if state == "computing":
            return {"reason": "computing", "text": "The next round is being computed.",
                    **self.advancer.estimate()}
        pend = self.store().assignments.pending(None, qid)
        reason, text = "assessor", "Another assessor is finishing this topic's batch."
        if not len(pend):
            pend = self.store().assignments.pending()
            reason, text = ("topics", "The next stage starts when the other topics' batches are judged.") if len(pend) \
                else ("runner", "Nothing is owed on any topic: the next round is on its way.")
        out = {"reason": reason, "text": text}
        if acc.organizer and len(pend):
            owed = pend[pend["assessor"] != acc.name].groupby("assessor").size()
            out["who"] = [{"assessor": str(a), "owed": int(n)} for a, n in owed.items()]
        return out

    def runner_view(self) -> dict[str, Any]:
        """The background runner for the organizer: ``state`` (idle, computing), ``paused`` (its
        last run failed), ``last_error``, ``error_at``, ``retry_at`` (the next automatic try),
        ``failures`` in a row, ``runs``, ``last_seconds`` and the run going on (``estimate``)."""
        a = self.advancer
        return {"state": a.state, "paused": a.paused, "last_error": a.last_error, "error_at": a.error_at,
                "retry_at": a.retry_at if a.paused else None, "failures": a.failures, "runs": a.runs,
                "last_seconds": a.last_seconds, "estimate": a.estimate()}

    def organizer_figures(self) -> dict[str, Any]:
        """The organizer page's live figures (:mod:`qrelkit.web.organizer`): ``throughput`` per
        assessor over the judgments made in the web app, ``owed`` (who owes what), and per topic
        the ``charts``' points (judged over time; density against the stopping rule's
        ``density_line``, None for a rule without one)."""
        s = self.store()
        rec = s.judgments.records()
        accounts = self._account_kinds()
        labels = combine_log(s.judgments.log(None, "all"), combine=self.combine)
        line = self.rule.describe(JudgingState((), np.zeros(0, bool))).density_line
        return {"throughput": throughput(rec[rec["source"] == WEB_SOURCE]),
                "owed": owed_table(s.assignments.pending(), accounts),
                "charts": topic_series(rec, labels, set(self.relevant)), "density_line": line}

    def organizer_stamp(self) -> str:
        """A short digest of what the organizer page shows that moves: judgments per assessor,
        items owed, decisions, the runner's state, runs and error (a few cheap reads)."""
        s = self.store()
        a = self.advancer
        key = json.dumps([s.judgments.judged_counts(), len(s.assignments.pending()), s.state.decision_counts(),
                          a.state, a.runs, a.last_error, a.retry_at], sort_keys=True, default=str)
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def retry_runner(self) -> dict[str, Any]:
        """The organizer's retry: a run now (not at the next automatic try); the runner's view."""
        self.advancer.request()
        return {"status": "requested", "runner": self.runner_view()}

    # -- judging -----------------------------------------------------------------------------------

    def _check_item(self, acc: Account, qid: str, batch_id: str, docid: str) -> None:
        b = self._my_batch(acc, qid, batch_id)
        if docid not in b["items"]:
            raise WebError(404, f"passage {docid} is not in this batch")

    def _my_batch(self, acc: Account, qid: str, batch_id: str) -> dict:
        self.check_topic(acc, qid)
        b = self.store().assignments.assignment(batch_id, acc.name)
        if b is None or b["qid"] != qid:
            raise WebError(404, f"no batch {batch_id} of topic {qid} for you")
        return b

    def _topic_row(self, qid: str) -> dict[str, Any]:
        return {k: (None if v is None else str(v)) for k, v in self.store().state.topic_row(qid).items()}

    def parse_grade(self, grade: Any) -> int:
        """An integer grade of the scale; 400 otherwise."""
        text = str(grade) if isinstance(grade, (int, str)) and not isinstance(grade, bool) else ""
        if not re.fullmatch(r"-?[0-9]+", text):  # plain ASCII digits: not " 2", "٣", "2.0", true
            raise WebError(400, f"grade {grade!r} is not an integer of the scale {self.scale}")
        g = int(text)
        if g not in self.scale:
            raise WebError(400, f"grade {g} is outside the scale {self.scale}")
        return g

    def judge(self, acc: Account, qid: str, batch_id: str, docid: str, grade: Any, session: str) -> dict[str, Any]:
        """Store one judgment through the store's import path (one transaction, idempotent: the
        same judgment again is ``repeated``, nothing written); answered after the commit. 409
        for another grade of the same item (changed in the review: :meth:`change`) or an item no
        longer asked for; the 409 links the topic and the review."""
        self._check_item(acc, qid, batch_id, docid)
        g = self.parse_grade(grade)
        s = self.store()
        # read before one's own grades: a judgment by another tab in between is seen
        if not s.assignments.owed_in_batch(acc.name, batch_id, docid):
            mine = s.judgments.assessor_grades(acc.name, topic=qid, batch=batch_id)
            if not (mine["docid"] == docid).any():
                raise WebError(409, f"passage {docid} of batch {batch_id} is no longer asked for (judged in an earlier "
                                    "batch); reload the page", links=topic_links(qid))
        try:
            rep = s.judgments.import_judgment(qid, docid, acc.name, g, batch_id, source=WEB_SOURCE, scale=self.scale)
        except ConflictError as exc:
            stored = exc.report.conflicts["stored_grade"].iat[0]
            raise WebError(409, f"you gave passage {docid} grade {stored} already: change it in the review of your "
                                "judgments", links=topic_links(qid)) from None
        batch_done = not s.assignments.owed_in_batch(acc.name, batch_id)
        if batch_done and not s.assignments.topic_owed(qid):  # only then can a run move the topic on (a run asked for
            self.advancer.request()                # earlier would delay the one that can)
        return {"qid": qid, "batch_id": batch_id, "docid": docid, "grade": g,
                "status": "stored" if rep.imported else "repeated", "batch_done": bool(batch_done)}

    def skip(self, acc: Account, qid: str, batch_id: str, docid: str, session: str) -> dict[str, Any]:
        """Move an item to the end of this session's queue (nothing is stored)."""
        self._check_item(acc, qid, batch_id, docid)
        with self._skip_lock:
            lst = self._skips.setdefault(session, [])
            if (batch_id, docid) in lst:
                lst.remove((batch_id, docid))
            lst.append((batch_id, docid))
        return {"qid": qid, "batch_id": batch_id, "docid": docid, "status": "skipped"}

    # -- review and change: one's own judgments of a topic, until its decision -------------------

    def review(self, acc: Account, qid: str) -> dict[str, Any]:
        """``acc``'s judgments in force on ``qid``, one per passage, the newest first: ``docid,
        grade, name, batch_id`` (where it was judged), ``time`` (UTC, ISO 8601: of the judgment or
        of its last change), ``changed`` (it has changes), ``snippet`` (the passage's first characters);
        ``decided``: the topic's decision, after which nothing changes here."""
        self.check_topic(acc, qid)
        s = self.store()
        hist = s.judgments.records(topic=qid, assessor=acc.name, history=True)
        live = s.judgments.records(topic=qid, assessor=acc.name).drop_duplicates("docid")  # first: where judged
        last = hist.groupby("docid")["time"].max().to_dict() if len(hist) else {}
        changed = set(hist.loc[hist["change"] > 0, "docid"]) if len(hist) else set()
        names = dict(self.grade_names())
        wanted = set(live["docid"])
        rows = []
        for d, g, b in zip(live["docid"][::-1], live["grade"][::-1], live["batch_id"][::-1]):
            text = self.texts.get(d, wanted) or ""
            rows.append({"qid": qid, "docid": d, "grade": int(g), "name": names.get(int(g), str(g)), "batch_id": b,
                         "time": str(last.get(d, "")), "changed": d in changed,
                         "snippet": text[:SNIPPET] + ("…" if len(text) > SNIPPET else "")})
        decision = self._topic_row(qid)["decision"]
        return {"qid": qid, "query": self.topic_text.get(qid, ""), "decided": decision is not None,
                "decision": decision, "correction_command": CORRECTION_COMMAND, "judgments": rows}

    def change(self, acc: Account, qid: str, docid: str, grade: Any) -> dict[str, Any]:
        """Change ``acc``'s grade of passage ``docid`` of topic ``qid`` — also once the runner
        used it (a CAL round, screening) — by a row of the judgments' change log (source
        ``web-change``: :func:`qrelkit.campaign.corrections.apply_changes`); the grade in force
        is what the next CAL round, the stopping rule and the qrels read. 404 for a passage
        ``acc`` never judged there; 409 once the topic is decided (then a correction is the
        organizer's, with :data:`CORRECTION_COMMAND`) or while a runner works too long."""
        self.check_topic(acc, qid)
        g = self.parse_grade(grade)
        with self._runner_quiet(5.0):  # the decision read and the change written with no run in between
            decision = self._topic_row(qid)["decision"]
            if decision:
                raise WebError(409, f"topic {qid} is decided ({decision}): your judgments on it can no longer be "
                                    "changed here. A correction now is the organizer's, with the campaign's "
                                    f"correction command '{CORRECTION_COMMAND}'", links=topic_links(qid))
            s = self.store()
            mine = s.judgments.assessor_grades(acc.name, topic=qid)
            before = mine.loc[mine["docid"] == docid, "grade"]
            if not len(before):
                raise WebError(404, f"you have no judgment of passage {docid} on topic {qid}", links=topic_links(qid))
            res = apply_changes(s, [(qid, docid, acc.name, g, CHANGE_SOURCE, 1)], source=CHANGE_SOURCE)
        return {"qid": qid, "docid": docid, "grade": g, "previous": int(before.iat[0]),
                "status": "changed" if res["changed"] else "unchanged"}

    def my_judgments(self, acc: Account, qid: str | None = None) -> list[dict[str, Any]]:
        """``acc``'s own judgments in force (of ``qid`` when given), in judging order."""
        log = self.store().judgments.log(qid, "all")
        log = log[log["assessor"] == acc.name]
        if qid is None:
            log = log[log["qid"].isin(set(self.visible_topics(acc)))]
        return [{"qid": q, "docid": d, "grade": int(g), "batch_id": b}
                for q, d, g, b in zip(log["qid"], log["docid"], log["grade"], log["batch_id"])]

    def batch_view(self, acc: Account, qid: str, batch_id: str) -> dict[str, Any]:
        """One of ``acc``'s batches: its items and ``acc``'s grades (404 for another's batch)."""
        b = self._my_batch(acc, qid, batch_id)
        g = self.store().judgments.assessor_grades(acc.name, batch=batch_id)
        grades = {d: int(x) for d, x in zip(g["docid"], g["grade"])}
        return {"batch_id": batch_id, "qid": qid, "kind": b["kind"], "status": b["status"],
                "items": [{"docid": d, "grade": grades.get(d)} for d in b["items"]]}

    # -- health and the organizer ------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """The store's state: schema versions, stages done, topics decided, batches out, runner."""
        s = self.store()
        pend = s.assignments.pending()
        dec = int(s.state.topics()["decision"].notna().sum())
        return {"status": "ok", "campaign": str(self.dir), **s.schema_versions(),
                "stages_done": list(s.state.stages_done()), "topics": len(self.topic_order), "topics_decided": int(dec),
                "batches_out": int(pend["batch_id"].nunique()) if len(pend) else 0, "runner": self.advancer.state,
                "runner_error": self.advancer.last_error, "runner_runs": self.advancer.runs,
                "runner_last_s": self.advancer.last_seconds, "runner_recent": self.advancer.recent}

    def assessor_progress(self) -> list[dict[str, Any]]:
        """Per assessor (accounts and assigned names): judged (in force, copies aside), items owed,
        batches with items owed."""
        s = self.store()
        judged = s.judgments.judged_counts(_NOT_ASSESSORS)
        pend = s.assignments.pending()
        owed = pend.groupby("assessor").size().to_dict() if len(pend) else {}
        batches = pend.groupby("assessor")["batch_id"].nunique().to_dict() if len(pend) else {}
        accounts = self._account_kinds()
        names = sorted(set(judged) | set(owed) | set(accounts) | set(s.assignments.all()["assessor"]))
        return [{"assessor": n, "judged": int(judged.get(n, 0)), "owed": int(owed.get(n, 0)),
                 "batches_out": int(batches.get(n, 0)), "account": accounts.get(n, "none")}
                for n in names]

    def _account_kinds(self) -> dict[str, str]:
        """Each account's kind: ``assessor``, ``organizer`` or ``revoked`` (a name without an
        account is ``none`` to its readers)."""
        return {a["name"]: "revoked" if a["revoked"] else ("organizer" if a["organizer"] else "assessor")
                for a in self.store().accounts.all()}

    def agreement(self) -> dict[str, Any]:
        """Inter-assessor agreement so far (:func:`qrelkit.labels.aggregate.assessor_agreement`)
        over the items two or more assessors judged; ``note`` when there are none yet."""
        log = self.store().judgments.log(None, "all")[["qid", "docid", "assessor", "grade"]].drop_duplicates()
        multi = log.groupby(["qid", "docid"])["assessor"].transform("nunique") >= 2
        if not multi.any():
            return {"note": "no passage has been judged by two assessors yet", "summary": {}, "pairs": []}
        try:
            summary, pairs = assessor_agreement(log[multi], threshold=min(self.relevant), scale=self.scale,
                                                level=self.settings.labels.agreement_level)
        except InputError as exc:
            return {"note": exc.message, "summary": {}, "pairs": []}
        return {"note": None, "summary": summary, "pairs": json.loads(pairs.to_json(orient="records"))}

    def status_rows(self) -> list[dict[str, Any]]:
        """The campaign's status table (:meth:`qrelkit.campaign.Campaign.status`), one row per topic."""
        df = Campaign(self.dir).status()
        return json.loads(df.to_json(orient="records"))

    def report(self) -> Path:
        """Write the campaign's report now (its report function) as ``DIR/report-live.html`` (and
        ``.md``); returns the HTML file."""
        out = self.dir / "report-live.html"
        Campaign(self.dir).report(out)
        return out

    def qrels(self, kind: str = "passages") -> tuple[str, bytes]:
        """Qrels to export: the final ones (``qrels-{kind}.txt``) once the qrels stage is done,
        else the current labels of every judged passage (``[campaign] combine``) as TREC qrels."""
        if kind not in ("passages", "expanded", "documents"):
            raise WebError(400, f"qrels kind must be passages, expanded or documents, got {kind!r}")
        s = self.store()
        final = self.dir / f"qrels-{kind}.txt"
        if "qrels" in s.state.stages_done() and final.is_file():
            return final.name, final.read_bytes()
        if kind != "passages":
            raise WebError(409, f"the {kind} qrels are written by the qrels stage, which is not done yet")
        table = s.judgments.export_qrels(combine=self.combine)
        with tempfile.TemporaryDirectory() as tmp:
            p = Path(tmp) / "qrels.txt"
            write_qrels(table, p)
            data = p.read_bytes()
        return "qrels-current.txt", data


def topic_links(qid: str) -> tuple[tuple[str, str], ...]:
    """Where a refused request on topic ``qid`` goes on from: the topic, the review of one's
    judgments on it, one's topics."""
    q = quote(qid, safe="")
    return ((f"/topics/{q}", f"topic {qid}"), (f"/topics/{q}/review", "your judgments on it"), ("/", "your topics"))


def records_csv(rows: list[dict[str, Any]]) -> str:
    """Rows as CSV text (the organizer's tables, downloadable)."""
    buf = io.StringIO()
    pd.DataFrame(rows).to_csv(buf, index=False)
    return buf.getvalue()
