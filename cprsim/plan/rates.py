"""Failure-event rates (moved to ``cprsim.failures.rates``, where the strategies read them too)."""

from cprsim.failures.rates import Rates, failure_rates

__all__ = ["Rates", "failure_rates"]
