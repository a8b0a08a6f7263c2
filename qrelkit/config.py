"""Protocol configuration files (TOML).

A config holds every threshold of a judging protocol (see ``configs/trec-dl-2022.toml``).
Commands take ``--config FILE``; an explicit flag overrides the file; the built-in defaults
(the TREC 2022 Deep Learning values, :data:`DEFAULTS`) fill whatever the file leaves out.
"""

from __future__ import annotations

import copy
import os
import tomllib
from pathlib import Path
from typing import Any

from qrelkit.errors import InputError

DEFAULTS: dict[str, dict[str, Any]] = {
    "runs": {"max_depth": None, "expected_depth": None, "lenient": False},
    "selection": {
        "include_baselines": True, "per_group": 3, "by_subtask": True, "priority_order": "ascending",
        "include": [], "exclude": [],
    },
    "pool": {"depth": 10, "dedupe": True, "judged": "mark", "ties": "docid-desc"},
    "top1": {"perfect_min_rel": 1, "perfect": "all"},
    "fused": {"method": "rrf", "take": 100, "rrf_k": 60.0, "rbp_p": 0.8},
    "fractional": {"fraction": 0.1, "seed": 0},
    "batch": {"first_n": 100, "assessors_per_item": 1, "seed": 0},
    "labels": {"scale": [0, 1, 2, 3], "passage_relevant": [2, 3], "document_relevant": [1, 2, 3],
               "document_rule": "max", "grade_map": {}, "schemes": {},
               "vote_threshold": 2, "graded": "ceil_median", "fallback": ["original", "lowest"],
               "original_threshold": 1, "min_assessors": 1, "require_original_relevant": False,
               "label": "graded", "agreement_level": "ordinal"},
    "eval": {"measures": ["nDCG@10", "AP", "RR@10", "P@10", "Judged@10"], "relevant": None, "missing": "zero",
             "k": 10, "tests": ["ttest", "wilcoxon", "ranksum", "randomization"],
             "corrections": ["bonferroni", "holm"], "alpha": 0.05, "randomizations": 10000, "seed": 0,
             "duplicate_measures": ["P@10", "nDCG@10"], "depth": None, "ranking": "trec_eval"},
    "prefs": {"pairs_per_task": 10, "test_pairs": 3, "test_min_rel": 1, "price_per_task": 2.0, "fee_per_task": 0.4,
              "assignments": 1, "alpha": 0.05, "correction": "bonferroni", "measure": "RR@10", "rel": 1,
              "ci": "t", "ci_level": 0.95, "bootstrap_resamples": 10000, "seed": 0, "workers": 5,
              "error_rate": 0.1, "test_error_rate": 0.0, "ties": "latent", "failing_mode": "random"},
}


class Config(dict):
    """A nested dict of sections with :meth:`get_value` for section/key look-ups."""

    source: str | None = None

    def get_value(self, section: str, key: str, override: Any = None) -> Any:
        """``override`` when it is not None, else the config's value, else the default."""
        if override is not None:
            return override
        sec = self.get(section, {})
        if key in sec:
            return sec[key]
        return DEFAULTS.get(section, {}).get(key)


def load_config(path: str | os.PathLike | None = None) -> Config:
    """Load a TOML protocol file merged over :data:`DEFAULTS` (``None`` = defaults only)."""
    cfg = Config(copy.deepcopy(DEFAULTS))
    if path is None:
        return cfg
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError("unreadable", exc.strerror or str(exc), file=str(p)) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError("bad-toml", str(exc), file=str(p)) from None
    for section, values in doc.items():
        if isinstance(values, dict):
            cfg.setdefault(section, {}).update(values)
        else:
            cfg[section] = values
    cfg.source = str(p)
    return cfg
