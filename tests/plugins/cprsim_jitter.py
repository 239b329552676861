"""A stochastic test plugin: full recovery whose every save takes a random time, drawn from the
strategy's own stream (``setup.rng`` / ``run.rng``). Used by tests/test_strategy_parts.py and
tests/test_strategy_protocol.py to check that a strategy that draws random numbers keeps common
random numbers and a sweep's bytes whatever the number of workers."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from cprsim.sim.strategies import Full, register


class JitterParams(BaseModel):
    """How much a save's time varies."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
    spread: float = Field(
        0.5, ge=0, lt=1, description="a save takes save_s x U(1 - spread, 1 + spread)"
    )


@register
class Jitter(Full):
    """Full recovery; each save blocks ``save_s x U(1 - spread, 1 + spread)`` (its own stream)."""

    name = "jitter"
    summary = "full recovery whose saves take a random time (a test of the strategy's stream)"
    Params = JitterParams

    def __init__(self, params: JitterParams, setup) -> None:
        super().__init__(params, setup)
        #: the first save's factor, drawn when the strategy is made (the setup's stream)
        self.next_factor = float(setup.rng.uniform(1 - params.spread, 1 + params.spread))

    def save_s(self, run) -> float:
        """This save's time; the next one's factor is drawn now (the run's stream: the same one)."""
        factor = self.next_factor
        spread = self.params.spread
        self.next_factor = float(run.rng.uniform(1 - spread, 1 + spread))
        return self.costs.save_s * factor
