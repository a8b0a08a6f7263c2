"""qrelkit: build TREC-style test collections.

The public data model lives in :mod:`qrelkit.io`; pools and assessor batches in
:mod:`qrelkit.pooler`; the command line in :mod:`qrelkit.cli` is a thin layer over both.
"""

__version__ = "0.1.0"

from qrelkit.errors import InputError, QrelkitError  # noqa: E402

__all__ = ["InputError", "QrelkitError", "__version__"]
