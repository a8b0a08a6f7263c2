"""Near-duplicate passages: MinHash signatures, LSH, clustering, run dedupe, qrels expansion."""

from qrelkit.dedupe.apply import expansion_table, label_class_members
from qrelkit.dedupe.cluster import DedupeParams, class_stats, cluster_corpus, nist_lines, read_nist
from qrelkit.dedupe.tokenize import Normalization, shingle_hash, shingles, words

__all__ = [
    "DedupeParams", "Normalization", "class_stats", "cluster_corpus", "expansion_table", "label_class_members",
    "nist_lines", "read_nist", "shingle_hash", "shingles", "words",
]
