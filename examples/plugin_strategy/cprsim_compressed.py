"""A cprsim strategy plugin: full recovery with compressed checkpoints.

Every save writes the checkpoint compressed to ``ratio`` of its size and every restore reads it
back, each paying the codec's ``codec_s`` on top of the (shorter) transfer: it pays off when
storage is slow and the codec fast. A failure rolls back like full recovery: no update is lost.
Installed, it is the strategy ``compressed`` (entry point in pyproject.toml); see README.md.

A strategy is a small spec (name, parameters, label, colour) with parts:

* its simulation hooks (``save_s``, ``load_s``, ...), which see the run through
  :class:`cprsim.sim.protocol.RunView` (and are made from a :class:`~cprsim.sim.protocol.RunSetup`):
  what a strategy may read and call, nothing else of the engine's state (a strategy that draws
  random numbers uses ``setup.rng``/``run.rng``, its own stream per replication). This one needs
  only its own parameters and ``self.costs``;
* its planning part (``Planning``, :mod:`cprsim.sim.planning_parts`): how ``cprsim plan`` plans it.
  Every required member must be defined (registration refuses a part that lacks one);
* its calibration emulation (``emulation``, :mod:`cprsim.sim.emulation_parts`): none here, it loses
  no update, so the calibration has nothing to measure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from cprsim import analytic
from cprsim.sim.planning_parts import EverySaveFull, RollbackPlanning
from cprsim.sim.strategies import Strategy, register

if TYPE_CHECKING:
    from cprsim.sim.protocol import RunSetup, RunView


class CompressedParams(BaseModel):  # the scenario's [strategy] table, validated strictly
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
    ratio: float = Field(0.5, gt=0, le=1, description="compressed size / raw size of a checkpoint")
    codec_s: float = Field(
        20.0, ge=0, description="seconds to compress a checkpoint, or to decompress it"
    )


def compressed_s(transfer_s: float, latency_s: float, p: CompressedParams) -> float:
    """A save or load of the compressed bytes: the latency, ``ratio`` of the transfer, the codec."""
    return latency_s + (transfer_s - latency_s) * p.ratio + p.codec_s


class CompressedPlanning(EverySaveFull, RollbackPlanning):
    """Planned as full recovery is (the interval that minimises the simulated overhead); every
    save is a full checkpoint (EverySaveFull)."""

    rank = 2  # the planner prefers simpler options tied with it (full: 0, CPR-vanilla: 1)

    def variants(self, s) -> list[dict]:
        """The planner tries the scenario's codec if it names this strategy, else the defaults."""
        mine = s.strategy.params if s.strategy.name == self.strategy.name else {}
        return [CompressedParams.model_validate(mine).model_dump()]

    def expected_overhead(self, s, params, tau, rates, costs) -> float:
        """First order, every failure rolls back, at the compressed save and load times."""
        p = CompressedParams.model_validate(params)
        load = compressed_s(costs.load_s, costs.latency_s, p)
        return analytic.full_overhead(
            analytic.Job(
                work_s=s.duration_s, save_s=compressed_s(costs.save_s, costs.latency_s, p)
            ),
            tau,
            analytic.Failures(rate=rates.total, recovery_s=s.reschedule.dist.mean() + load),
        )


@register
class Compressed(Strategy):
    name = "compressed"
    summary = (
        "full recovery with compressed checkpoints: shorter saves and loads, plus the codec's time"
    )
    label = "Compressed full"  # in plans and tables (default: the name)
    colour = "#bcbd22"  # in figures (default: a spare colour picked from the name)
    Params = CompressedParams
    needs_embedding_servers = False  # a rollback restores every node, embedding servers or not
    Planning = CompressedPlanning  # how `cprsim plan` plans it

    params: CompressedParams  # an instance of Params (the engine validates the scenario's with it)

    def make_ledger(self, setup: RunSetup) -> None:
        return None  # every failure rolls back: no update is lost, no PLS

    def save_s(self, run: RunView) -> float:
        return compressed_s(self.costs.save_s, self.costs.latency_s, self.params)

    def load_s(self, run: RunView, nodes: set[int]) -> float:
        return compressed_s(self.costs.load_s, self.costs.latency_s, self.params)

    def full_load_s(self, run: RunView) -> float:
        return self.load_s(run, set())
