"""Near-duplicate passages: MinHash signatures, LSH, clustering, run dedupe, qrels expansion.

Its names are loaded at their first use (:mod:`qrelkit.lazy`): importing the package, or its
parameters' declarations (:mod:`qrelkit.dedupe.params`), loads no kernel."""

from qrelkit.lazy import attach

__getattr__ = attach(__name__, {
    "apply": ("expansion_table", "label_class_members",),
    "params": ("DedupeParams", "Normalization",),
    "cluster": ("class_stats", "cluster_corpus", "nist_lines", "read_nist",),
    "tokenize": ("shingle_hash", "shingles", "word_spans", "words",),
})

__all__ = ["DedupeParams", "Normalization", "class_stats", "cluster_corpus", "expansion_table", "label_class_members",
           "nist_lines", "read_nist", "shingle_hash", "shingles", "word_spans", "words"]
