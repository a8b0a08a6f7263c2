"""The parameters of reading runs (``[runs]``): declared here, beside :class:`RunsParams`, which
every reader of runs takes (:func:`qrelkit.io.runsets.load_runs`, the campaign's validation)."""

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
