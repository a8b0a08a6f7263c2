"""The parameters of reusability studies (``[reuse]``): the leave-out procedure, what counts as
unique, orphans, removal, the measures and the thresholds of the report. Declared here, beside
:class:`ReuseParams`, which :func:`qrelkit.reuse.study.leave_out_options` turns into the keyword
arguments of :func:`~qrelkit.reuse.leaveout.leave_out`."""

from __future__ import annotations

from dataclasses import dataclass

from qrelkit.params import UNIT, Key, Params, declare, param

KEYS = declare(
    "reuse",
    Key("procedure", "str", "group", "leave out one group, one run or one type", choices=("group", "run", "type")),
    Key("uniqueness", "str", "pooled", "'only it contributed' through the pooled or all submitted runs",
        choices=("pooled", "submitted")),
    Key("orphans", "str", "shared", "judged items no run contributed: never removed, or attributed",
        choices=("shared", "retrieved")),
    Key("orphan_depth", "int", 100, "orphans retrieved: attributed within this depth", min=1),
    Key("removal", "str", "remove", "unique judged items: removed, or kept as unjudged",
        choices=("remove", "unjudged")),
    Key("measures", "list[str]", None, "measures of the study; none: AP, nDCG@10, P@10, Bpref, Judged@10",
        optional=True),
    Key("density_threshold", "float", 0.4, "'sufficiently complete' at this relevance density or below", **UNIT),
    Key("voorhees_relevant_share", "float", 0.333, "Voorhees' share of relevant items found by one group",
        **UNIT),
)


@dataclass(frozen=True)
class ReuseParams(Params):
    """``[reuse]``.

    >>> ReuseParams().procedure, ReuseParams.from_config(None, procedure="run").procedure
    ('group', 'run')
    """

    SECTION = "reuse"
    KEYS = KEYS

    procedure: str = param(KEYS, "procedure")
    uniqueness: str = param(KEYS, "uniqueness")
    orphans: str = param(KEYS, "orphans")
    orphan_depth: int = param(KEYS, "orphan_depth")
    removal: str = param(KEYS, "removal")
    measures: list | None = param(KEYS, "measures")
    density_threshold: float = param(KEYS, "density_threshold")
    voorhees_relevant_share: float = param(KEYS, "voorhees_relevant_share")
