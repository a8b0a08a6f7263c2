"""One interface per aggregate of a store, whatever keeps it (the SQLite implementations:
:mod:`qrelkit.store.topics`, :mod:`~qrelkit.store.batches`, :mod:`~qrelkit.store.judgments`,
:mod:`~qrelkit.store.state`, :mod:`~qrelkit.store.accounts`, :mod:`~qrelkit.store.prefs`).

==================  ==========================================================================
:class:`Topics`        the topics of a campaign and their CAL threads (``fractional``, ``local``,
                       ``all``, docs/protocol.md section 1) with their states
:class:`Batches`       the batches issued to assessors and their items, in issue order
:class:`Assignments`   who judges a batch, and what each assessor still owes (a campaign's)
:class:`JudgmentLog`   the append-only judgment log: imports, retractions and re-judgments, the
                       log in judging order, exports
:class:`CampaignState` a campaign's inputs, configuration rows, stages done, state values,
                       warnings, failure, CAL rounds and per-topic decisions
:class:`Accounts`      the web app's accounts (login token hashes) and its signing secret
:class:`Preferences`   preference tasks answered in the web app: tasks, assessors, answers, undo
==================  ==========================================================================

A store composes them over one file (:class:`~qrelkit.store.judging.JudgingStore`: topics,
batches, judgments; :class:`~qrelkit.store.campaign.CampaignStore`: all of them), each an
attribute (``store.judgments.import_files(...)``, ``store.state.get("paths")``); an operation
spanning two aggregates runs in one transaction of the store (``with store.transaction(): ...``:
theirs join it). Every write is one transaction; every method raises
:class:`~qrelkit.errors.InputError` for what a user can fix.

Judgments
---------
Input rows are ``qid, docid, assessor, grade, batch_id`` — the judgments table written by
``qrelkit batch import`` or completed batch files (further columns are ignored; rows with an empty
grade are not judged yet and are skipped). Per row:

* the same (topic, passage, assessor, batch) with the same grade already in the store, or twice in
  the input: **repeated**, nothing written — importing a file twice changes nothing;
* the same (topic, passage, assessor) with a *different* grade, in the store (any batch) or
  within the input: **conflict**. Strict mode (default) imports nothing and raises
  :class:`ConflictError` listing every conflict; ``lenient=True`` skips the conflicting rows
  (every grade of an in-input conflict; the stored grade always stays) and reports them;
* the same grade for the same passage from the same assessor in another batch (e.g. a passage
  issued in two threads) is a new log row, so each thread sees it.

Further rules (strict: first one raises :class:`~qrelkit.errors.InputError` with file and line;
lenient: the row is skipped and counted): ``missing-column``, ``missing-value`` (empty qid,
docid, assessor or batch_id), ``grade-outside-scale``, ``unknown-topic`` (not in the store),
``unknown-item`` (the batch is an issued one and the passage was not in it, or it belongs to
another topic). A batch id the store does not know (e.g. ``<qid>-1`` from ``qrelkit batch make``)
is registered on first import as a ``pool`` batch shared by every thread. An import that judges
every item of a batch completes it.

Retraction (undo) and re-judgment
---------------------------------
A judgment is never deleted or updated. :meth:`JudgmentLog.retract` appends a change with no
grade: from then on the judgment is out of every reading of the log (:meth:`JudgmentLog.log`,
exports, labels, batch progress) and its item is owed again. The same assessor judging the item
again in the same batch (through the import path, so a retried identical judgment stays one)
appends another change with the new grade: the judgment is back, with that grade. A conflict is
decided on the grades in force: a retracted grade conflicts with nothing. The original rows and
every change stay in the store for audit.

Judging order and thread views
------------------------------
Judging order is batch issue order, then the item's position in the batch (the CAL rank), then
log order. A thread's view holds the shared ``pool`` batches plus the thread's own ``cal``
batches; the ``all`` thread sees every ``pool`` and ``cal`` batch of the topic (docs/protocol.md: it
uses every judgment available). ``sample`` batches (random samples for the target method) are in
no thread's sequence but are exported as qrels. Times are stored but never exported: exports are
ordered and byte-identical for the same judgments.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

import pandas as pd
import pyarrow as pa

from qrelkit.errors import InputError
from qrelkit.store.combine import DEFAULT_COMBINE

THREADS = ("fractional", "local", "all")
THREAD_STATES = ("active", "accepted", "rejected", "stopped")
BATCH_KINDS = ("cal", "pool", "sample")
#: the source of a judgment copied into a CAL batch from another thread's (an encountered passage)
ENCOUNTERED = "encountered"
BATCH_STATUSES = ("open", "complete")
CAL_PHASES = ("issue", "judge")
#: the judgment log in judging order as :meth:`JudgmentLog.export_log` writes it
LOG_COLUMNS = ["qid", "docid", "assessor", "grade", "batch_id", "thread", "kind", "iteration", "position"]
CONFLICT_COLUMNS = ["qid", "docid", "assessor", "grade", "stored_grade", "batch_id", "file", "line"]


@dataclass
class ImportReport:
    """What an import did.

    ``imported``: log rows written. ``counts``: per rule — ``imported``, ``repeated`` (already
    stored, or twice in the input), ``ungraded`` (empty grade), ``conflict`` and, in lenient
    mode, the rows skipped per rule. ``conflicts``: one row per conflicting input row (qid,
    docid, assessor, grade, stored_grade — empty for a conflict within the input —, batch_id,
    file, line). ``batches_registered``: unknown batch ids registered as pool batches.
    """

    imported: int
    counts: dict[str, int]
    conflicts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CONFLICT_COLUMNS))
    batches_registered: int = 0


class ConflictError(InputError):
    """A strict import found conflicting grades; nothing was written. ``report`` lists them."""

    def __init__(self, report: ImportReport):
        self.report = report
        cf = report.conflicts
        c = cf.iloc[0]
        if pd.isna(c["stored_grade"]):  # within the input: point at the row that contradicts the first
            same = cf[(cf["qid"] == c["qid"]) & (cf["docid"] == c["docid"]) & (cf["assessor"] == c["assessor"])]
            first, c = c, same.iloc[1]
            where = f"line {first['line']}" if first["file"] == c["file"] else f"{first['file']}:{first['line']}"
            other = f"grade {int(first['grade'])} at {where}"
        else:
            other = f"grade {int(c['stored_grade'])} in the store"
        more = len(cf) - 1
        msg = (f"assessor {c['assessor']} gave topic {c['qid']} passage {c['docid']} grade {int(c['grade'])} here and "
               f"{other}; nothing imported" + (f" ({more} more conflicting rows)" if more else "")
               + "; --lenient skips conflicting rows")
        line = None if pd.isna(c["line"]) else int(c["line"])
        super().__init__("conflict", msg, file=c["file"] or None, line=line)

    def __reduce__(self):
        return (ConflictError, (self.report,))


class Topics(ABC):
    """The topics of a store and their CAL threads."""

    @abstractmethod
    def add(self, topics: pd.DataFrame | Mapping[str, str] | Iterable[str], *,
            threads: Sequence[str] = THREADS, collection_size: int | None = None) -> int:
        """Add topics (and their threads); returns how many topics were new.

        A topic already stored with another non-empty text is the error ``topic-conflict``.
        """

    @abstractmethod
    def all(self) -> pd.DataFrame:
        """``qid, text`` in natural topic order."""

    @abstractmethod
    def threads(self, topic: str | None = None) -> pd.DataFrame:
        """``qid, thread, state, reason, collection_size``: per topic (natural order) and thread
        (fractional, local, all)."""

    @abstractmethod
    def set_thread_state(self, topic: str, thread: str, state: str, reason: str = "", *,
                         collection_size: int | None = None) -> None:
        """Record a thread's state (``active``, ``accepted``, ``rejected``, ``stopped``) and why."""

    @abstractmethod
    def thread_rows(self) -> list[tuple[str, str, str, str]]:
        """``(qid, thread, state, reason)`` of every topic's threads (in no particular order)."""

    @abstractmethod
    def thread_states(self, qid: str) -> list[tuple[str, str]]:
        """``(thread, state)`` of a topic's CAL threads, in thread order."""


class Batches(ABC):
    """The batches issued to assessors (and those registered by an import) with their items."""

    @abstractmethod
    def issue(self, topic: str, thread: str | None, passages: Sequence[str], *, kind: str = "cal",
              iteration: int | None = None, batch_id: str | None = None) -> str:
        """Record a batch issued to assessors, its items in the given order; returns its id.

        ``thread`` is None for a batch shared by every thread (``pool``) and for ``sample``
        batches. ``iteration`` defaults to one more than the topic's and thread's last batch of
        this kind (0 first). The id defaults to ``<topic>/<thread or kind>/<iteration>`` with the
        iteration zero-padded to four digits.
        """

    @abstractmethod
    def all(self, topic: str | None = None, thread: str | None = None, *, counts: bool = True) -> pd.DataFrame:
        """Issued and registered batches in issue order: ``batch_id, qid, thread, iteration, kind,
        status, items, judged`` (distinct judged items; without those two with ``counts=False``,
        which spares a count over every batch's items and judgments)."""

    @abstractmethod
    def issued_passages(self, topic: str, thread: str | None = None, *, max_batch_seq: int | None = None) -> list[str]:
        """Passages issued in the thread's view (pool batches and the thread's cal batches;
        every cal batch of the topic for ``all``), judged or not, in issue order."""

    @abstractmethod
    def issued_items(self, topic: str | None = None) -> pd.DataFrame:
        """Every item of every issued batch but the samples (of ``topic``, or of every topic), in
        issue order: ``qid, thread, kind, passage`` (the issued passages of all threads at once;
        see :meth:`issued_passages`)."""

    @abstractmethod
    def items(self) -> pd.DataFrame:
        """``batch_id, qid, docid`` of every issued batch item (samples included), in issue order."""

    @abstractmethod
    def lost_copies(self) -> pd.DataFrame:
        """Items of open CAL batches with no judgment in the batch but one in an earlier batch of
        the topic: encountered passages whose copied judgments a kill lost (``batch_id, qid, docid``)."""


class Assignments(ABC):
    """Who judges a batch (several assessors per item) and what each assessor still owes. An item
    is owed by an assigned assessor until their judgment of it in that batch is in force; an item
    judged in an earlier batch of the topic (a CAL batch's encountered passages) is owed by
    nobody; a retracted judgment is owed again."""

    @abstractmethod
    def issue(self, topic: str, passages: list[str], batch_id: str, assessors: list[str], *,
              kind: str = "pool", thread: str | None = None) -> str:
        """Issue a batch (unless it exists: idempotent) and record its assessors."""

    @abstractmethod
    def assign(self, assessors: Mapping[str, list[str]]) -> None:
        """Record the assessors of several batches (batch id -> names), in one transaction. A
        batch that has assessors keeps them (assigning it again changes nothing); the claims of the
        batch's topic (:meth:`claim`) apply in the order they were made, each giving its
        assessor's place to its claimer unless the claimer has one already."""

    @abstractmethod
    def claim(self, topic: str, assessor: str, claimer: str) -> int:
        """``claimer`` takes ``assessor``'s place on ``topic``, in one transaction: recorded for
        the batches of the topic assigned later (:meth:`assign`), and given now in those of its
        batches where ``assessor`` has judged nothing and ``claimer`` is not an assessor already
        (:meth:`reassign`'s rule); idempotent. Returns how many batches changed hands."""

    @abstractmethod
    def claims(self, topic: str | None = None) -> pd.DataFrame:
        """``qid, assessor, claimer`` of every claim (of ``topic`` when given), in claim order."""

    @abstractmethod
    def all(self) -> pd.DataFrame:
        """``batch_id, assessor, qid, thread, kind`` of every assignment, in issue order."""

    @abstractmethod
    def import_files(self, files: Iterable[str | os.PathLike], *, lenient: bool = False,
                     scale: Iterable[int] | None = (0, 1, 2, 3)) -> ImportReport:
        """Import assessors' files (:meth:`JudgmentLog.import_files`: one transaction, idempotent,
        conflicts reported) where every row must name a batch the campaign issued
        (``[unknown-batch]``) and an assessor it was issued to (``[not-assigned]``: a typo
        ``Ann`` for ``ann``, a stranger, the topic's other assessor); strict: nothing imported,
        the first such row named by file and line; ``lenient``: those rows skipped and counted."""

    @abstractmethod
    def pending(self, assessor: str | None = None, topic: str | None = None) -> pd.DataFrame:
        """Items an assigned assessor still owes: ``batch_id, qid, thread, kind, assessor,
        position, docid`` in issue order (of one ``assessor`` and one ``topic`` when given)."""

    @abstractmethod
    def owed_in_batch(self, assessor: str, batch_id: str, docid: str | None = None) -> list[str]:
        """The passages of batch ``batch_id`` that ``assessor`` still owes (as :meth:`pending`),
        in position order; only ``docid`` when given (a cheap check for one item, no table)."""

    @abstractmethod
    def owed_items(self, assessor: str, topic: str) -> list[tuple[str, str, str]]:
        """``(batch_id, kind, docid)`` of the items ``assessor`` owes on ``topic`` (as
        :meth:`pending`), in issue order."""

    @abstractmethod
    def topic_owed(self, qid: str) -> bool:
        """Whether any assigned assessor still owes an item of topic ``qid`` (as :meth:`pending`)."""

    @abstractmethod
    def assigned_topic_set(self, assessor: str) -> set[str]:
        """The topics of the batches assigned to ``assessor`` (unordered: one query, no table)."""

    @abstractmethod
    def assignment(self, batch_id: str, assessor: str) -> dict | None:
        """Batch ``batch_id`` if it is assigned to ``assessor``: ``qid, kind, status, items``
        (its passages in position order); else None."""

    @abstractmethod
    def reassign(self, batch_id: str, old: str, new: str) -> bool:
        """Give ``old``'s place among the assessors of batch ``batch_id`` to ``new`` (one
        transaction), unless ``new`` is one of them already or ``old`` judged in it; returns
        whether it did."""


class JudgmentLog(ABC):
    """The append-only judgment log (see the module documentation: the import rules, undo, the
    judging order and the thread views)."""

    @abstractmethod
    def import_judgments(self, judgments: pd.DataFrame, *, source: str = "api", lenient: bool = False,
                         scale: Iterable[int] | None = (0, 1, 2, 3),
                         on_transaction: Callable[[str], None] | None = None) -> ImportReport:
        """Append judgments (columns ``qid, docid, assessor, grade, batch_id``) in one transaction.

        See the module documentation for the rules. ``on_transaction`` is called with
        ``"begin"`` once the write lock is held and ``"commit"`` just before ``COMMIT`` (progress
        reporting; the durability tests kill the process there).
        """

    @abstractmethod
    def import_files(self, files: Sequence[str | os.PathLike], *, lenient: bool = False,
                     scale: Iterable[int] | None = (0, 1, 2, 3),
                     on_transaction: Callable[[str], None] | None = None,
                     progress: Callable[[int], None] | None = None, vet: Any = None) -> ImportReport:
        """Import judgments tables / completed batch files (CSV, TSV, JSONL, Parquet), every
        file in one transaction: all of them or nothing. ``progress(1)`` is called after each
        file is read (before the write lock is taken). ``vet``: further rules a row must meet,
        checked in the transaction, in the implementation's terms (SQLite:
        :data:`qrelkit.store.judgments.Vet`)."""

    @abstractmethod
    def import_judgment(self, qid: str, docid: str, assessor: str, grade: int, batch_id: str, *,
                        source: str = "api", scale: Iterable[int] | None = (0, 1, 2, 3)) -> ImportReport:
        """One judgment through the import path: the rules and the one transaction of
        :meth:`import_judgments` (strict), without building tables — what a web request writes.

        >>> import tempfile
        >>> from pathlib import Path
        >>> from qrelkit import init_store
        >>> with init_store(Path(tempfile.mkdtemp(), "one.db"), ["1"]) as store:
        ...     b = store.batches.issue("1", None, ["p1"], kind="pool")
        ...     first = store.judgments.import_judgment("1", "p1", "ann", 2, b).imported
        ...     again = store.judgments.import_judgment("1", "p1", "ann", 2, b).counts["repeated"]
        >>> first, again
        (1, 1)
        """

    @abstractmethod
    def retract(self, topic: str, passage: str, assessor: str, batch: str, *, source: str = "undo") -> int | None:
        """Retract the judgment in force of ``assessor`` for ``topic``/``passage`` in ``batch``: one
        change appended (see the module documentation), the batch open again when an item of it
        is left without a judgment. Returns the grade retracted, or None when there was none in
        force (retracting twice changes nothing)."""

    @abstractmethod
    def change_judgments(self, items: Iterable[tuple], *, source: str) -> dict[str, int]:
        """Change the grade in force of items, in one transaction: ``items`` are ``(topic, passage,
        assessor, grade, file, line)`` (``grade`` None: retract). Every judgment in force of the
        item (its copies in other batches too) takes the new grade — a retracted one is brought
        back — or is retracted, by changes appended to the log (source ``source``); batches are
        marked open or complete again as their items are. ``[unknown-judgment]`` (strict:
        nothing changed) when the assessor never judged the item. Returns ``changed`` and
        ``unchanged`` (judgments)."""

    @abstractmethod
    def records(self, *, topic: str | None = None, assessor: str | None = None, batch: str | None = None,
                history: bool = False) -> pd.DataFrame:
        """The judgments in force (``seq, qid, docid, assessor, grade, batch_id, source, time``) of
        ``topic``/``assessor``/``batch`` when given, in log order; with ``history``, every judgment
        and each of its changes (``change``: 0 for the judgment, then 1, 2, ...; ``grade`` None for
        a retraction), in log order."""

    @abstractmethod
    def last(self, assessor: str, topic: str | None = None, *, source: str | None = None) -> dict | None:
        """The judgment in force that ``assessor`` made (or made again) last, of ``topic`` when
        given and from ``source`` when given: ``qid, docid, grade, batch_id, time`` — or None."""

    @abstractmethod
    def log(self, topic: str | None = None, thread: str | None = None, *,
            include_sample: bool = False, max_batch_seq: int | None = None) -> pd.DataFrame:
        """The judgment log in judging order (see the module documentation): :data:`LOG_COLUMNS`
        plus ``batch_seq`` (issue order of the batch). ``thread`` None or ``"all"``: every pool
        and cal judgment; ``"local"``/``"fractional"``: shared pool batches plus that thread's.
        ``include_sample`` adds the sample batches; ``max_batch_seq`` keeps batches issued up to
        that one (a replay's prefix)."""

    def judged_passages(self, topic: str, thread: str | None = None) -> set[str]:
        """Every passage of ``topic`` with at least one judgment in the thread's view (samples
        included: they are judged too)."""
        return set(self.log(topic, thread, include_sample=True)["docid"])

    @abstractmethod
    def labels(self, topic: str, thread: str | None = None, *, combine: Any = DEFAULT_COMBINE) -> pd.DataFrame:
        """One grade per judged passage of the thread's view, in judging order (first judgment):
        ``docid, grade, batch_id, batch_seq``; several assessors' grades combined by ``combine``
        (median_high | max | min, or a rule object: :func:`qrelkit.store.combine.combined_grades`)."""

    @abstractmethod
    def export_qrels(self, *, combine: Any = DEFAULT_COMBINE, thread: str = "all") -> pa.Table:
        """Qrels (``qid, docid, rel``, qrels order) from the thread's view; ``all`` exports every
        judgment in the store, samples included. Several assessors' grades are combined by
        ``combine`` (:func:`qrelkit.store.combine.combined_grades`)."""

    @abstractmethod
    def export_log(self, *, thread: str = "all") -> pa.Table:
        """The judgment log (no times, no sources) in topic order, then judging order: columns
        ``qid, docid, assessor, grade, batch_id, thread, kind, iteration, position`` — importable
        into another store (``qrelkit cal import``)."""

    @abstractmethod
    def topic_grades(self, qid: str) -> list[tuple[str, str, int]]:
        """``(docid, assessor, grade)`` of the judgments in force of a topic (pool and CAL
        batches, as :meth:`log` with ``"all"``)."""

    @abstractmethod
    def judged_since(self, assessor: str, since: str, source: str | None = None) -> int:
        """How many judgments in force ``assessor`` made at or after ``since`` (an ISO 8601 UTC
        time, as the log's), of ``source`` when given."""

    @abstractmethod
    def judged_in_batch(self, assessor: str, batch_id: str, exclude_sources: Iterable[str] = ()) -> int:
        """How many judgments in force ``assessor`` has in batch ``batch_id`` (those of the sources
        ``exclude_sources`` left out: ``(ENCOUNTERED,)`` counts only what she judged there)."""

    @abstractmethod
    def assessor_grades(self, assessor: str, *, topic: str | None = None, batch: str | None = None) -> pd.DataFrame:
        """The judgments in force of ``assessor`` (of ``topic``/``batch`` when given), in log
        order: ``qid, docid, batch_id, grade, source``."""

    @abstractmethod
    def judged_counts(self, exclude_sources: Iterable[str] = ()) -> dict[str, int]:
        """Judgments in force per assessor, leaving out those of the given sources."""


class CampaignState(ABC):
    """A campaign's own records: its inputs and configuration as recorded at init (or adopted
    since), the stages done, state values (JSON), warnings, the last failure, each topic's CAL
    round and its decisions."""

    @abstractmethod
    def record_inputs(self, records: Iterable[tuple[str, str, int, int, str]], config_rows: list[dict]) -> None:
        """Record the input files (``name, path, size, mtime_ns, sha256``) and the effective
        configuration's rows (``section, key, value, origin, where``), in one transaction."""

    @abstractmethod
    def inputs(self) -> pd.DataFrame:
        """``name, path, size, mtime_ns, sha256`` of every recorded input, by name and path."""

    @abstractmethod
    def config_rows(self) -> pd.DataFrame:
        """``section, key, value, origin, location`` of the recorded configuration (values decoded)."""

    @abstractmethod
    def adopt_config(self, record: tuple[str, str, int, int, str], config_rows: list[dict],
                     adoption: Mapping[str, Any]) -> None:
        """Make ``config_rows`` the campaign's configuration and ``record`` its protocol file's,
        and append ``adoption`` to the state's ``config_adoptions``: one transaction."""

    @abstractmethod
    def stages_done(self) -> dict[str, dict]:
        """The completed stages (name -> summary), in the order they were done."""

    @abstractmethod
    def finish_stage(self, name: str, summary: Mapping[str, Any], seconds: float | None = None) -> None:
        """Record a completed stage (its first completion stays)."""

    @abstractmethod
    def stage_seconds(self) -> dict[str, float]:
        """Seconds of each completed stage's last attempt (kept apart from every output)."""

    @abstractmethod
    def forget_stages(self, names: Sequence[str]) -> list[str]:
        """Forget the completed stages among ``names`` (the next run makes them again); returns
        those forgotten, in the order they were done."""

    @abstractmethod
    def get(self, key: str, default: Any = None) -> Any:
        """The state value ``key`` (``default`` when unset)."""

    @abstractmethod
    def update(self, **values: Any) -> None:
        """Set state values (JSON-serializable), in one transaction."""

    @abstractmethod
    def record_failure(self, info: Mapping[str, Any]) -> None:
        """Record the campaign's last failure (``stage, time, rule, message, by``): what
        ``campaign status`` shows until an advance gets through (:meth:`clear_failure`)."""

    @abstractmethod
    def failure(self) -> dict | None:
        """The campaign's last failure not yet behind it (:meth:`record_failure`), or None."""

    @abstractmethod
    def clear_failure(self) -> None:
        """The last failure is behind the campaign."""

    @abstractmethod
    def warn(self, stage: str, message: str) -> None:
        """Record a warning of ``stage`` (once)."""

    @abstractmethod
    def warnings(self) -> pd.DataFrame:
        """``stage, message`` of every warning, in the order they were met."""

    @abstractmethod
    def cal_rounds(self) -> dict[str, tuple[int, str]]:
        """qid -> (CAL round, phase) of every topic (``(0, "judge")`` for a topic not in CAL yet)."""

    @abstractmethod
    def set_cal_rounds(self, rows: Iterable[tuple[str, int, str]]) -> None:
        """Record (qid, round, phase) of some topics, in one transaction."""

    @abstractmethod
    def set_topics(self, rows: list[dict]) -> None:
        """Upsert per-topic campaign columns (only the keys each row gives: ``screening, screened,
        screened_relevant, decision, rule, reason``)."""

    @abstractmethod
    def topics(self) -> pd.DataFrame:
        """``qid, screening, screened, screened_relevant, decision, rule, reason`` of every topic,
        in natural topic order."""

    @abstractmethod
    def decided_topics(self, decision: str | None = None) -> set[str]:
        """The topics with a decision (that ``decision`` when given): one query, no table."""

    def decision_counts(self) -> dict[str, int]:
        """How many topics have each decision (``open``: none yet), by decision name."""
        ct = self.topics()
        return {str(k): int(v) for k, v in ct["decision"].fillna("open").value_counts().sort_index().items()}

    @abstractmethod
    def topic_row(self, qid: str) -> dict[str, str | None]:
        """``screening, decision, rule, reason`` of a topic (None where unset)."""


class Accounts(ABC):
    """The web app's accounts (docs/web.md) and the campaign's secret for signing sessions. An
    account is ``name, organizer, topics, created, revoked, generation``; its login token is
    never stored, only its SHA-256."""

    @abstractmethod
    def add(self, name: str, token_hash: str, *, organizer: bool = False, topics: Iterable[str] = (),
            renew: bool = False) -> dict:
        """Record an account with the SHA-256 of its login token (a new link, issued now). An
        active account of that name is ``[assessor-exists]``; a revoked one is given the new token
        and comes back with its sessions' generation moved on. ``renew``: an active account is
        given the new token (its old link stops working; its role, topics and sessions stay);
        ``[unknown-assessor]`` when there is no active account of that name."""

    @abstractmethod
    def revoke(self, name: str) -> dict:
        """Revoke an account: its link and every session of it stop working at once
        (``[unknown-assessor]`` when there is no such account)."""

    @abstractmethod
    def get(self, name: str) -> dict | None:
        """The account ``name`` (revoked or not), or None when there is none."""

    @abstractmethod
    def by_token(self, token_hash: str) -> dict | None:
        """The active account whose login token has this SHA-256, or None."""

    @abstractmethod
    def link(self, token_hash: str) -> dict | None:
        """The login link of this token hash when it is an active account's current one:
        ``account`` (as :meth:`get`), ``issued`` and ``used`` (UTC times; ``used`` None until it
        is exchanged for a session); None otherwise."""

    @abstractmethod
    def open_session(self, token_hash: str, sid: str, *, issued_after: str) -> tuple[str, dict | None]:
        """Exchange a login link for the session ``sid``, in one transaction: ``("ok", account)``
        (the link is marked used, the session recorded), else ``("unknown" | "used" | "expired",
        None)`` — ``expired``: issued before ``issued_after`` (a UTC time)."""

    @abstractmethod
    def session(self, sid: str) -> dict | None:
        """The session ``sid``: ``sid, account, generation, created, last_seen, ended``; None when unknown."""

    @abstractmethod
    def touch_session(self, sid: str) -> None:
        """Record that the session ``sid`` was seen now (its idle time starts again)."""

    @abstractmethod
    def end_session(self, sid: str) -> None:
        """End the session ``sid`` (logout): it is refused from now on."""

    @abstractmethod
    def all(self) -> list[dict]:
        """Every account, by name (no token hashes)."""

    @abstractmethod
    def web_secret(self) -> str:
        """The campaign's secret for signing web sessions: made once (random, 256 bits), kept in
        the store, never in a file of the repository."""


class Preferences(ABC):
    """Preference tasks answered in the web app (:mod:`qrelkit.campaign.prefs`, docs/web.md):
    the tasks (rows of :data:`qrelkit.prefs.TASK_SCHEMA`), their assessors, the append-only log
    of answers and of their retractions (undo); at most one answer *in force* per (task,
    comparison, assessor)."""

    @abstractmethod
    def add_tasks(self, tasks: pd.DataFrame, assignments: Mapping[str, list[str]]) -> int:
        """Store preference tasks and their assessors (``task_id -> names``) in one transaction;
        a task id already stored is ``[tasks-exist]`` and nothing is written. Returns the number
        of tasks stored."""

    @abstractmethod
    def tasks(self, task_id: str | None = None) -> pd.DataFrame:
        """The preference tasks (of ``task_id`` when given) in the task table's columns, in the
        order they were stored, slots in order; ``exclude_workers`` as lists."""

    @abstractmethod
    def assignments(self, assessor: str | None = None) -> pd.DataFrame:
        """``task_id, assessor, position`` of every preference task's assessors (of one assessor
        when given), in task order."""

    @abstractmethod
    def assign(self, task_id: str, assessor: str, *, instead_of: str | None = None) -> bool:
        """Give preference task ``task_id`` to ``assessor`` (in place of ``instead_of`` when given:
        one transaction); returns whether anything changed."""

    @abstractmethod
    def answer(self, task_id: str, slot: int, assessor: str, choice: str) -> bool:
        """Record one answer (``left``/``right``) in one transaction; True when stored, False
        when the same answer is in force already (a retry: nothing written). Another answer to
        the same slot by the same assessor while one is in force is ``[conflict]`` (undo it
        first: :meth:`retract`); a slot that was not issued ``[unknown-item]``."""

    @abstractmethod
    def retract(self, task_id: str, assessor: str, slot: int, *, answer: int | None = None,
                source: str = "web-undo") -> dict[str, Any]:
        """Undo ``assessor``'s most recent answer in force of task ``task_id``, which must be
        the answer to comparison ``slot`` (the undo names what it undoes: a retried undo never
        undoes a second answer), by appending a retraction (one transaction; the answer stays in
        the log). Returns ``task_id, slot, choice, answer`` (its log seq) and ``status``:
        ``retracted``, or ``repeated`` when that answer was undone already and nothing was
        answered in the task since (a retry: nothing written). Refused: ``[task-finished]`` once
        every comparison of the task is answered (the screening has used the answers),
        ``[nothing-to-undo]`` without an answer in force, ``[conflict]`` when the last answer in
        force is to another comparison, ``[unknown-item]`` for a task that does not exist.
        ``answer``, when given, is the log seq of the answer the undo means (what the page
        showed): an undo replayed after that comparison was answered again is then
        ``repeated``, never an undo of the new answer."""

    @abstractmethod
    def answers(self, assessor: str | None = None, task_id: str | None = None) -> pd.DataFrame:
        """The answers in force (``task_id, slot, worker, choice``: the columns ``qrelkit prefs
        import`` reads; undone answers left out) of one assessor and/or task when given, in
        answering order."""

    @abstractmethod
    def answer_log(self, task_id: str | None = None) -> pd.DataFrame:
        """The audit trail: every answer ever given (of ``task_id`` when given), in log order —
        ``seq, task_id, slot, worker, choice, answered`` and, for an undone one, ``retracted``
        (time), ``retracted_by`` and ``source`` (None for an answer in force)."""


class JudgingAggregates(Protocol):
    """What the CAL code reads and writes: a store's topics and threads, batches and judgment log
    (a :class:`~qrelkit.store.judging.JudgingStore`, a :class:`~qrelkit.store.campaign.CampaignStore`)."""

    topics: Topics
    batches: Batches
    judgments: JudgmentLog
