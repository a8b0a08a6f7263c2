"""Synthetic data for testing and benchmarking qrelkit (see :mod:`qrelkit.simulate.campaign`)."""

from qrelkit.simulate.campaign import simulate_campaign

__all__ = ["simulate_campaign"]
