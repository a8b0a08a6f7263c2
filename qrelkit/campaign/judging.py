"""Judging in a campaign: who judges what (the assessors of a topic's batches), what is owed,
the oracle that answers in a simulated campaign, and the batch files an assessor fills in."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import pandas as pd
import pyarrow as pa

from qrelkit.campaign.inputs import Inputs
from qrelkit.campaign.settings import Settings
from qrelkit.campaign.store import campaign_corpus
from qrelkit.config import assessor_file_name
from qrelkit.errors import InputError
from qrelkit.io.keys import stable_int
from qrelkit.io.qrels import read_qrels
from qrelkit.io.tables import write_table
from qrelkit.simulate.oracle import judge_batches, truth_map
from qrelkit.store import ENCOUNTERED, CampaignStore, TextIndex, combine_log, open_text_index

WAITING = "waiting for judgments"
ORACLE_ASSESSOR_SOURCE = "oracle"


@dataclass
class Waiting:
    """Judgments are missing: ``batches`` lists what is out (batch, topic, assessor, items, file)."""

    stage: str
    batches: list[dict] = field(default_factory=list)


def stable_seed(*parts: object) -> int:
    """A seed in [0, 2**32) from ``parts``: the low 32 bits of :func:`qrelkit.io.keys.stable_int`
    (the same parts give the same seed in every process and Python version, unlike ``hash``)."""
    return stable_int(*parts) & 0xFFFFFFFF


TEXT_INDEX = "text-index.sqlite"


def corpus_sha256(store: CampaignStore) -> str:
    """The SHA-256 of the campaign's corpus recorded at init ("" when none is recorded)."""
    rec = store.state.inputs()
    sha = rec.loc[rec["name"] == "corpus", "sha256"]
    return str(sha.iat[0]) if len(sha) else ""


def text_index(directory: str | os.PathLike, store: CampaignStore) -> TextIndex:
    """The campaign's passage text index, ``DIR/text-index.sqlite``
    (:func:`qrelkit.store.textindex.open_text_index`): built at its first need from the corpus,
    recorded with the corpus's SHA-256 of init, built again when missing or not the corpus's.
    The batch files and the web app's pages read passage texts there, never scanning the corpus."""
    return open_text_index(campaign_corpus(store), Path(directory) / TEXT_INDEX, sha256=corpus_sha256(store))


_safe = assessor_file_name  # an assessor's (or a batch's) file and folder name


def _answers_in(path: Path) -> int:
    """How many grades an assessor filled into a batch file the campaign wrote (-1 when the
    file is no longer a table the campaign can read: edited, it is not the campaign's any more)."""
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (ValueError, OSError, UnicodeDecodeError):
        return -1
    if "grade" not in df.columns:
        return -1
    return int((df["grade"].str.strip() != "").sum())


def batch_file(directory: str | os.PathLike, assessor: str, batch_id: str) -> Path:
    """The file of batch ``batch_id`` for ``assessor``: ``DIR/batches/ASSESSOR/BATCH.csv``
    (names made file-safe: other characters than letters, digits, ``-_.`` become ``_``)."""
    return Path(directory) / "batches" / _safe(assessor) / f"{_safe(batch_id)}.csv"




class Judging:
    """The judging of one campaign run: ``oracle`` (None: judgments come from assessors) answers
    what is owed in a simulated campaign; else what is out is written as batch files. ``cache``
    is the run's (a long-lived runner keeps the text index and the batch files it wrote)."""

    def __init__(self, directory: Path, store: CampaignStore, settings: Settings, inputs: Inputs,
                 oracle: dict | None, cache: dict) -> None:
        self.dir, self.store, self.settings, self.inputs = directory, store, settings, inputs
        self.oracle, self.cache = oracle, cache
        self.repaired = False  # lost copies of encountered passages looked for in this run

    def assessors_for(self, qid: str, round_: int = 0) -> list[str]:
        """The assessors of a batch of topic ``qid``: its owner (topic i -> assessor i mod n),
        then the next ones, ``[batch] assessors_per_item`` distinct names; CAL rounds rotate the
        owner unless ``[campaign] owner_judges_cal``."""
        # rules assessors-empty and assessors-too-few refuse what is left here for stores recorded before them
        names = list(self.settings.campaign.assessors) or ["A01"]
        k = min(self.settings.batch.assessors_per_item, len(names))
        owner = self.inputs.topic_ids.index(str(qid))
        if round_ and not self.settings.campaign.owner_judges_cal:
            owner += round_
        return [names[(owner + i) % len(names)] for i in range(k)]

    def labels(self) -> pd.DataFrame:
        """One grade per judged (topic, passage) in judging order (every batch)."""
        return combine_log(self.store.judgments.log(None, "all"), combine=self.settings.combine)

    def repair_encountered(self) -> int:
        """A CAL batch whose encountered passages lost their copied judgments (a kill between
        issuing the batch and copying them) gets them now, as the CAL loop would have. Once per
        run (:attr:`repaired`, reset by the runner at each advance): only a kill loses copies,
        and a kill ends the run."""
        if self.repaired:
            return 0
        self.repaired = True
        s = self.store
        rows = s.batches.lost_copies()
        if not len(rows):
            return 0
        logs = {q: s.judgments.log(q, "all") for q in dict.fromkeys(rows["qid"])}  # those topics' logs only
        copies = []
        for (bid, qid), g in rows.groupby(["batch_id", "qid"], sort=False):
            log = logs[qid]
            c = log[log["docid"].isin(set(g["docid"]))][["qid", "docid", "assessor", "grade"]].copy()
            c["batch_id"] = bid
            copies.append(c)
        s.judgments.import_judgments(pd.concat(copies, ignore_index=True), source=ENCOUNTERED)
        return len(rows)

    def owed(self) -> pd.DataFrame:
        """The items assigned assessors still owe (:meth:`~qrelkit.store.interfaces.Assignments.pending`), after the
        copies of encountered passages a kill lost are made again."""
        self.repair_encountered()
        return self.store.assignments.pending()

    def judge(self, stage: str) -> Waiting | None:
        """Have every assigned batch judged: by the oracle (:meth:`answer`), else report what is
        out and write its files."""
        pend = self.owed()
        if not len(pend):
            return None
        if self.oracle is None:
            return self._waiting(stage, pend)
        self.answer(pend)
        return None

    def answer(self, pend: pd.DataFrame) -> None:
        """The oracle answers the owed items ``pend`` (:meth:`owed`): one seeded simulated
        assessor per batch and assessor, every answer in one transaction."""
        truth = self._oracle_truth
        scale = tuple(self.settings.labels.scale)
        answers = []
        for (bid, assessor), g in pend.groupby(["batch_id", "assessor"], sort=False):
            rows = g[["qid", "docid"]].reset_index(drop=True)
            done = judge_batches(rows, truth, error_rate=float(self.oracle["error_rate"]), scale=scale,
                                 seed=stable_seed(self.oracle["seed"], bid, assessor))
            done["assessor"] = assessor
            done["batch_id"] = bid
            answers.append(done)
        # every answer in one transaction (each batch's are seeded by the batch alone)
        self.store.judgments.import_judgments(pd.concat(answers, ignore_index=True), source=ORACLE_ASSESSOR_SOURCE,
                                              scale=scale)

    @cached_property
    def _oracle_truth(self) -> dict:
        return truth_map(read_qrels(self.oracle["path"]))

    def check_oracle(self) -> None:
        """Refuse, before any work, an oracle that holds a grade (>= 0) for one of the campaign's
        topics outside the campaign's scale: it would fail at the first such item asked, weeks in."""
        if self.oracle is None:
            return
        scale = set(self.settings.labels.scale)
        topics = set(self.inputs.topic_ids)
        for (q, d), g in self._oracle_truth.items():
            if q in topics and g >= 0 and g not in scale:
                raise InputError("grade-outside-scale", f"the oracle grades topic {q}'s {d} {g}, outside the "
                                 f"campaign's scale {sorted(scale)} ([labels] scale)", file=str(self.oracle["path"]))

    def texts(self) -> TextIndex:
        """The campaign's passage text index (:func:`text_index`), opened once per context."""
        if "texts" not in self.cache:
            self.cache["texts"] = text_index(self.dir, self.store)
        return self.cache["texts"]

    def _waiting(self, stage: str, pend: pd.DataFrame) -> Waiting:
        """What is out, each batch's file for its assessor written (again only when the items
        it lists changed since this context wrote it: a long-lived runner rewrites no file
        that is already right)."""
        written = self.cache.setdefault("batch_files", {})
        out, todo = [], []
        for (bid, assessor), g in pend.groupby(["batch_id", "assessor"], sort=False):
            f = batch_file(self.dir, assessor, bid)
            out.append({"batch_id": bid, "qid": str(g["qid"].iat[0]), "assessor": assessor, "items": int(len(g)),
                        "kind": str(g["kind"].iat[0]), "file": str(f)})
            key = (tuple(g["docid"]), tuple(g["position"]))
            if written.get(f) != key or not f.is_file():
                kept = _answers_in(f) if f.is_file() else 0
                if kept:  # an assessor filled it in place: never overwritten, to be imported
                    out[-1]["note"] = (f"the file holds {kept} grade(s): import it ('qrelkit campaign import "
                                       f"{self.dir} {f}')" if kept > 0 else "the file was edited and is not a table "
                                       "any more: it is left as it is (move it away for a new one)")
                    continue
                todo.append((f, bid, assessor, g, key))
        if not todo:
            return Waiting(stage, out)
        texts: dict[str, str] = {}
        try:
            texts = {k: v[0] for k, v in self.texts().texts({d for *_, g, _ in todo for d in g["docid"]}).items()}
        except InputError:
            pass
        tdf = self.store.topics.all()
        topics = dict(zip(tdf["qid"], tdf["text"]))
        for f, bid, assessor, g, key in todo:
            t = pa.table({"batch_id": [bid] * len(g), "qid": g["qid"].tolist(), "query": [topics.get(q, "") for q in g["qid"]],
                          "position": g["position"].astype("int32").tolist(), "docid": g["docid"].tolist(),
                          "text": [texts.get(d, "") for d in g["docid"]], "assessor": [assessor] * len(g),
                          "grade": pa.nulls(len(g), pa.int32())})
            write_table(t, f, kind="campaign-batch", params={})
            written[f] = key
        return Waiting(stage, out)
