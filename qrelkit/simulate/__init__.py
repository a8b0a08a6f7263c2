"""Synthetic data for testing and benchmarking qrelkit: whole judging campaigns with text
(:mod:`qrelkit.simulate.campaign`) and TREC-8-shaped ad hoc collections without text
(:mod:`qrelkit.simulate.collection`)."""

from qrelkit.simulate.campaign import simulate_campaign
from qrelkit.simulate.collection import simulate_collection

__all__ = ["simulate_campaign", "simulate_collection"]
