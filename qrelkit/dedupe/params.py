"""The parameters of near-duplicate clustering (``[dedupe]``): declared here, beside
:class:`DedupeParams`, which every clustering run takes (and stores in its output's metadata);
importing this module loads no kernel."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from qrelkit.errors import InputError
from qrelkit.params import UNIT, Key, Params, declare, param

KEYS = declare(
    "dedupe",
    Key("ngram", "int", 3, "words per shingle", min=1),
    Key("num_perm", "int", 128, "MinHash permutations", min=1),
    Key("bands", "int", 32, "LSH bands", min=1),
    Key("rows", "int", 4, "rows per LSH band", min=1),
    Key("seed", "int", 1, "seed of the MinHash permutations", min=0),
    Key("threshold", "float", 0.6, "Jaccard a pair (and a member vs. its canonical) must reach", **UNIT),
    Key("verify", "str", "exact", "check of candidate pairs and members: exact Jaccard of the shingle sets, "
        "the signatures' estimate, or none", choices=("none", "signature", "exact")),
    Key("mode", "str", "components", "classes: connected components or NIST's first claims",
        choices=("components", "greedy")),
    Key("linkage", "str", "canonical", "members verified against the canonical, or single linkage",
        choices=("canonical", "single")),
    Key("canonical", "str", "first", "canonical passage: first in corpus order, or judged first",
        choices=("first", "priority")),
    Key("lower", "bool", True, "lower-case the text"),
    Key("strip_html", "bool", True, "strip HTML tags"),
    Key("keep_digits", "bool", True, "digits form words (false: letters only, as NIST)"),
)
VERIFY = KEYS["verify"].choices
MODES = KEYS["mode"].choices
CANONICAL = KEYS["canonical"].choices
LINKAGE = KEYS["linkage"].choices
CHUNK_ROWS = 100_000  # passages read and signed at a time (memory, not results)


@dataclass(frozen=True)
class Normalization:
    """How text becomes words (:mod:`qrelkit.dedupe.tokenize`): lower-cased, HTML tags stripped,
    digits kept as word characters (the tokenizer's own defaults: NIST's letters-only words;
    a clustering run's come from ``[dedupe]``, :attr:`DedupeParams.norm`)."""

    lower: bool = True
    strip_html: bool = True
    keep_digits: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class DedupeParams(Params):
    """Every parameter of a clustering run (stored in the output's metadata): ``[dedupe]``.

    >>> DedupeParams().bands, DedupeParams.from_config({"dedupe": {"bands": 16}}).bands
    (32, 16)
    """

    SECTION = "dedupe"
    KEYS = KEYS

    ngram: int = param(KEYS, "ngram")
    num_perm: int = param(KEYS, "num_perm")
    bands: int = param(KEYS, "bands")
    rows: int = param(KEYS, "rows")
    seed: int = param(KEYS, "seed")
    threshold: float = param(KEYS, "threshold")
    verify: str = param(KEYS, "verify")
    mode: str = param(KEYS, "mode")
    linkage: str = param(KEYS, "linkage")
    canonical: str = param(KEYS, "canonical")
    lower: bool = param(KEYS, "lower")
    strip_html: bool = param(KEYS, "strip_html")
    keep_digits: bool = param(KEYS, "keep_digits")
    chunk_rows: int = CHUNK_ROWS

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.bands * self.rows > self.num_perm:
            raise InputError("bad-option", f"bands x rows = {self.bands * self.rows} exceeds num_perm = {self.num_perm}")

    @property
    def norm(self) -> Normalization:
        return Normalization(lower=self.lower, strip_html=self.strip_html, keep_digits=self.keep_digits)

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("chunk_rows")
        return d

    def s_curve(self) -> dict[float, float]:
        from qrelkit.dedupe import lsh  # lazy: the LSH kernels (numba); declaring parameters loads none

        return lsh.s_curve(self.bands, self.rows)
