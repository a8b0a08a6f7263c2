"""qrelkit: build TREC-style test collections.

The objects a notebook user needs are importable from the top::

    from qrelkit import read_runs, read_qrels, depth_pool, evaluate, leave_out

Runs, qrels, topics and corpora are read by :mod:`qrelkit.io`; judgments are kept by the stores
of :mod:`qrelkit.store`; pools and assessor batches are made by :mod:`qrelkit.pooler`;
near-duplicates by :mod:`qrelkit.dedupe`; continuous active learning on a judging store by
:mod:`qrelkit.cal`; labels by :mod:`qrelkit.labels`; scores and comparisons by
:mod:`qrelkit.evaluate`; reusability studies by :mod:`qrelkit.reuse`; preference judging by
:mod:`qrelkit.prefs`. The command line (:mod:`qrelkit.cli`) is a thin layer over them.
"""

import importlib as _importlib
import sys as _sys
import types as _types

__version__ = "0.1.0"

from qrelkit.errors import InputError, QrelkitError  # noqa: E402

# Every public name and the module that defines it. The names are resolved on first use by the
# module ``__getattr__`` below (PEP 562), not imported here: ``import qrelkit`` (and so the
# start-up of the ``qrelkit`` command) stays cheap, and the heavy packages behind some names
# (ir-measures, numba kernels, scikit-learn, Dask, matplotlib) are imported only by the user who
# needs them. A name maps to ``module`` or to ``(module, attribute)`` when it is an alias.
_LAZY: dict[str, str | tuple[str, str]] = {
    # reading and writing (qrelkit.io)
    "read_runs": "qrelkit.io.runs",
    "read_qrels": "qrelkit.io.qrels",
    "read_topics": "qrelkit.io.topics",
    "read_corpus": "qrelkit.io.corpus",
    "read_manifest": "qrelkit.io.manifest",
    "read_classes": "qrelkit.io.classes",
    "write_trec_run": "qrelkit.io.runs",
    "write_qrels": "qrelkit.io.qrels",
    # pools and batches (qrelkit.pooler)
    "select_runs": ("qrelkit.pooler.select", "select_pool_runs"),
    "depth_pool": "qrelkit.pooler.pools",
    "top1_pool": "qrelkit.pooler.pools",
    "fused_pool": "qrelkit.pooler.pools",
    "make_batches": "qrelkit.pooler.batches",
    "import_batches": "qrelkit.pooler.batches",
    # near-duplicates (qrelkit.dedupe)
    "cluster_corpus": "qrelkit.dedupe.cluster",
    # judging stores (qrelkit.store)
    "JudgingStore": "qrelkit.store.judging",
    "init_store": "qrelkit.store.judging",
    "open_store": "qrelkit.store.judging",
    # labels (qrelkit.labels); ``expand_qrels`` is the labels one (with provenance), not
    # ``qrelkit.dedupe.apply.label_class_members`` which it wraps
    "aggregate_judgments": "qrelkit.labels.aggregate",
    "binarize": "qrelkit.labels.binarize",
    "expand_qrels": "qrelkit.labels.propagate",
    "propagate_to_documents": "qrelkit.labels.propagate",
    # evaluation (qrelkit.evaluate)
    "evaluate": "qrelkit.evaluate.core",
    "compare": ("qrelkit.evaluate.compare", "significance"),
    # reusability and preference judging
    "leave_out": "qrelkit.reuse.leaveout",
    "tournament": "qrelkit.prefs.tournament",
    # whole judging campaigns (qrelkit.campaign)
    "Campaign": "qrelkit.campaign.runner",
    # protocol files and synthetic campaigns
    "load_config": "qrelkit.config",
    "simulate_campaign": "qrelkit.simulate.campaign",
    "simulate_collection": "qrelkit.simulate.collection",
}

__all__ = ["InputError", "QrelkitError", "__version__", *_LAZY]


def __getattr__(name: str):
    """Resolve a public name on first use (PEP 562) and cache it in the module."""
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = (target, name) if isinstance(target, str) else target
    value = getattr(_importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({n for n in globals() if not n.startswith("_")} | set(__all__))


class _TopModule(_types.ModuleType):
    """``qrelkit.evaluate`` is both the function :func:`evaluate` and the subpackage
    :mod:`qrelkit.evaluate`. Importing a subpackage makes it an attribute of its parent, which
    would make ``from qrelkit import evaluate`` return the package or the function depending on
    what was imported before; this keeps the function. The subpackage is still imported as
    usual (``from qrelkit.evaluate import ...``, ``importlib.import_module``), but not as
    ``import qrelkit.evaluate.core as m`` (that form reads the attribute; tests/test_api.py
    checks that no code uses it)."""

    def __setattr__(self, name: str, value) -> None:
        if name in _LAZY and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _TopModule
