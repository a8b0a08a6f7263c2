"""Near-duplicate passages: MinHash signatures, LSH, clustering, run dedupe, qrels expansion.

The names below are loaded at their first use (PEP 562): importing the package, or its
parameters' declarations (:mod:`qrelkit.dedupe.params`), loads no kernel.
"""

import importlib

_WHERE = {
    "expansion_table": "apply", "label_class_members": "apply",
    "DedupeParams": "params", "Normalization": "params",
    "class_stats": "cluster", "cluster_corpus": "cluster", "nist_lines": "cluster", "read_nist": "cluster",
    "shingle_hash": "tokenize", "shingles": "tokenize", "words": "tokenize",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        value = globals()[name] = getattr(importlib.import_module(f"qrelkit.dedupe.{_WHERE[name]}"), name)
        return value
    raise AttributeError(f"module 'qrelkit.dedupe' has no attribute {name!r}")
