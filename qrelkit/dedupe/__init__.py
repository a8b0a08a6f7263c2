"""Near-duplicate passages: MinHash signatures, LSH, clustering, run dedupe, qrels expansion."""

from qrelkit.dedupe.apply import expand_qrels, expansion_table
from qrelkit.dedupe.cluster import DedupeParams, class_stats, cluster_corpus, nist_lines, read_nist
from qrelkit.dedupe.tokenize import Normalization, shingle_hash, shingles, words

__all__ = [
    "DedupeParams", "Normalization", "class_stats", "cluster_corpus", "expand_qrels", "expansion_table",
    "nist_lines", "read_nist", "shingle_hash", "shingles", "words",
]
