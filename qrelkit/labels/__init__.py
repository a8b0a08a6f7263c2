"""Labels: several assessors' grades -> one label, binarization schemes, propagation to
near-duplicates and documents, and agreement between label sets. See
``docs/labels-and-evaluation.md``.

Its names are loaded at their first use (:mod:`qrelkit.lazy`): importing the package, or its
parameters' declarations, loads none of its machinery."""

from qrelkit.lazy import attach

__getattr__ = attach(__name__, {
    "aggregate": (
        "Aggregation", "VoteRule", "aggregate_judgments", "aggregation_options", "assessor_agreement",
        "labels_to_table",
    ),
    "binarize": ("available_schemes", "binarize", "register_scheme", "scheme_grades", "threshold_of",),
    "relevance": ("relevance_level",),
    "propagate": (
        "DocumentLabels", "Expansion", "compare_labels", "expand_qrels", "max_rule_feasibility", "parse_grade_map",
        "passage_document_map", "propagate_to_documents",
    ),
})

__all__ = [
    "Aggregation", "DocumentLabels", "Expansion", "VoteRule", "aggregate_judgments", "aggregation_options",
    "assessor_agreement", "available_schemes",
    "binarize", "compare_labels", "expand_qrels", "labels_to_table", "max_rule_feasibility", "parse_grade_map",
    "passage_document_map", "propagate_to_documents", "register_scheme", "relevance_level", "scheme_grades",
    "threshold_of",
]
