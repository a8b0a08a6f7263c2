"""Storage: every store of qrelkit, split by concern, composed, in one package.

A store file is one SQLite database (:mod:`qrelkit.store.sqlite`: one connection, transactions,
locks, durability, SQLite's errors as one-line :class:`~qrelkit.errors.InputError`). Its content is
split into aggregates, each with one interface (:mod:`qrelkit.store.interfaces`) and its SQLite
implementation in a module of its own:

=====================  ====================================  ===================================
aggregate              interface                             SQLite
=====================  ====================================  ===================================
topics and threads     :class:`~.interfaces.Topics`          :mod:`qrelkit.store.topics`
batches, assignments   :class:`~.interfaces.Batches`,        :mod:`qrelkit.store.batches`
                       :class:`~.interfaces.Assignments`
judgment log           :class:`~.interfaces.JudgmentLog`     :mod:`qrelkit.store.judgments`
campaign state         :class:`~.interfaces.CampaignState`   :mod:`qrelkit.store.state`
accounts, secret       :class:`~.interfaces.Accounts`        :mod:`qrelkit.store.accounts`
preference tasks       :class:`~.interfaces.Preferences`     :mod:`qrelkit.store.prefs`
=====================  ====================================  ===================================

Two kinds of store file compose them: a **judging store** (:class:`JudgingStore`,
:mod:`qrelkit.store.judging`: ``store.topics``, ``store.batches``, ``store.judgments``; what
``qrelkit cal ...`` works on) and a **campaign store** (:class:`CampaignStore`,
:mod:`qrelkit.store.campaign`: the same plus ``store.assignments``, ``store.state``,
``store.accounts``, ``store.prefs``), each with its own schema version and migrations. An
operation that spans two aggregates is one transaction (``with store.transaction(): ...``). The
web app's passage text index is a SQLite file too (:mod:`qrelkit.store.textindex`); how several
assessors' grades combine into one is :mod:`qrelkit.store.combine`.

No module outside this package uses SQLite (a test says so): a new backend implements the
interfaces and composes them as :class:`JudgingStore` and :class:`CampaignStore` do.
"""

from qrelkit.store.campaign import CAMPAIGN_SCHEMA_VERSION, STORE_NAME, CampaignStore, campaign_path, open_campaign_store
from qrelkit.store.combine import combine_log, combined_grades, judgments_to_qrels
from qrelkit.store.interfaces import (
    BATCH_KINDS, CAL_PHASES, ENCOUNTERED, LOG_COLUMNS, THREADS, Accounts, Assignments, Batches, CampaignState, ConflictError,
    ImportReport, JudgingAggregates, JudgmentLog, Preferences, Topics,
)
from qrelkit.store.judging import SCHEMA_VERSION, STORE_FORMAT, JudgingStore, init_store, open_store
from qrelkit.store.rows import INPUT_COLUMNS, read_judgment_file
from qrelkit.store.sqlite import io_error, store_errors
from qrelkit.store.textindex import TextIndex, open_text_index

__all__ = [
    "Accounts", "Assignments", "BATCH_KINDS", "Batches", "CAL_PHASES", "CAMPAIGN_SCHEMA_VERSION", "CampaignState",
    "CampaignStore", "ConflictError", "ENCOUNTERED", "INPUT_COLUMNS", "ImportReport", "JudgingAggregates", "JudgingStore",
    "JudgmentLog", "LOG_COLUMNS", "Preferences", "SCHEMA_VERSION", "STORE_FORMAT", "STORE_NAME", "THREADS", "TextIndex",
    "Topics", "campaign_path", "combine_log", "combined_grades", "init_store", "io_error", "judgments_to_qrels",
    "open_campaign_store", "open_store", "open_text_index", "read_judgment_file", "store_errors",
]
