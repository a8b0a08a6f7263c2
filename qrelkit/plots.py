"""matplotlib for the plots qrelkit writes (PNG files and figures embedded in reports).

:func:`pyplot` selects the non-interactive ``Agg`` backend before ``matplotlib.pyplot`` is
imported, so plots work on machines without a display, and imports matplotlib only when a plot
is made (it costs start-up time every command would otherwise pay).
"""

from __future__ import annotations

__all__ = ["pyplot"]


def pyplot():
    """``matplotlib.pyplot`` with the ``Agg`` backend (imported on first use).

    >>> from qrelkit.plots import pyplot
    >>> plt = pyplot()
    >>> plt.get_backend().lower()
    'agg'
    """
    import matplotlib  # lazy: see the module docstring

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: after the backend is chosen, see the module docstring

    return plt
