"""The parameters of reading inputs, declared here: of runs (``[runs]``, :class:`RunsParams`, which
every reader of runs takes: :func:`qrelkit.io.runsets.load_runs`, the campaign's validation) and
of ``irds:`` sources (``[sources]``, :class:`SourcesParams`: which fields of an ir_datasets record
are a passage's text, its document, a topic's text; :mod:`qrelkit.io.irds`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from qrelkit.params import Key, Params, declare, param

KEYS = declare(
    "runs",
    Key("max_depth", "int", None, "at most this many items per topic in a run (rule max-depth); none: no limit",
        min=1, optional=True),
    Key("expected_depth", "int", None, "fewer items than this per topic is reported (warning shallow-topics)",
        min=1, optional=True),
    Key("lenient", "bool", False, "repair run defects (counted) instead of failing on the first"),
)


@dataclass(frozen=True)
class RunsParams(Params):
    """How runs are validated when read: ``[runs]`` (:func:`qrelkit.io.runs.read_runs`' keyword
    arguments, :meth:`read_args`).

    >>> RunsParams.from_config({"runs": {"lenient": True}}, max_depth=100).read_args()
    {'max_depth': 100, 'expected_depth': None, 'lenient': True}
    """

    SECTION = "runs"
    KEYS = KEYS

    max_depth: int | None = param(KEYS, "max_depth")
    expected_depth: int | None = param(KEYS, "expected_depth")
    lenient: bool = param(KEYS, "lenient")

    def read_args(self) -> dict:
        """The keyword arguments of :func:`qrelkit.io.runs.read_runs` these parameters set."""
        return asdict(self)


SOURCES_KEYS = declare(
    "sources",
    Key("text_fields", "list[str]", [], "irds: corpora: the document fields joined (a space between, empty ones left out) "
        "as a passage's text; empty: the dataset's own text (its default_text(): the text field of most, "
        "title and body of documents)"),
    Key("docid_field", "str", "auto", "irds: corpora: the field naming a passage's document; auto: "
        "msmarco_document_id or docid when the records have one (else none); none: no document"),
    Key("query_field", "str", "text", "irds: topics: the query field taken as a topic's text (title, description "
        "... of TREC topics)"),
)


@dataclass(frozen=True)
class SourcesParams(Params):
    """How records of an ``irds:<dataset-id>`` input become passages and topics: ``[sources]``
    (:mod:`qrelkit.io.irds`; files name their fields themselves).

    >>> SourcesParams.from_config({"sources": {"text_fields": ["title", "text"]}}).docid_field
    'auto'
    """

    SECTION = "sources"
    KEYS = SOURCES_KEYS

    text_fields: list[str] = param(SOURCES_KEYS, "text_fields")
    docid_field: str = param(SOURCES_KEYS, "docid_field")
    query_field: str = param(SOURCES_KEYS, "query_field")
