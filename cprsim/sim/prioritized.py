"""CPR's prioritized saving: MFU and SSU (partial recovery with frequent partial saves).

Between full saves, a save writes only the top fraction ``r`` of embedding rows ranked by their
accesses since the last save; every ``K``-th save (``full_every``) is a full one. Ranking:

* **MFU** (most frequently used): exact per-row counters over all the interval's samples;
* **SSU** (sub-sampled used): counters over a sub-sample of the inputs at rate ``s``, so the
  ranking is noisier and the saved rows cover fewer of the updates.

The access share covered by the saved rows, ``c``, is the access model's
``sampled_coverage(r, m)`` with ``m = tau x throughput x s`` samples counted (``s = 1`` for MFU):
finite counts make even MFU's ranking imperfect. A failed shard then loses, weighted by access,
``c x (progress since the last save) + (1 - c) x (progress since the last full save)``: two tiers
of the PLS ledger. A partial save costs ``latency + (delta - latency) x bytes share``; counting
slows every iteration by ``counter_overhead`` (MFU) or ``counter_overhead x s`` (SSU).

Failures are recovered as by ``Partial``: with ``trainer_degraded`` (the default) a failed trainer
slows the job to ``(N_t - k)/N_t`` of its rate until its replacement has copied the dense part,
on top of the counting slowdown (the two multiply).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from pydantic import Field

from cprsim import access, analytic
from cprsim.pls import ShardLedger
from cprsim.sim.strategies import (Partial, PartialParams, degraded_trainers, job_level_overhead,
                                   partial_node_overhead, register)

if TYPE_CHECKING:  # pragma: no cover
    from cprsim.sim.engine import Run


class MFUParams(PartialParams):
    """CPR-MFU's parameters; ``trainer_degraded`` comes from ``PartialParams``."""

    top_fraction: float = Field(0.05, gt=0, le=1, description="share r of rows written by a partial save")
    full_every: int = Field(8, ge=1, le=10_000, description="every K-th save is a full one")
    counter_overhead: float = Field(0.002, ge=0, lt=1, description="slowdown of counting every access")
    differential: bool = Field(False, description="hybrid with Check-N-Run: full saves write only dirty rows")


class SSUParams(MFUParams):
    sample_rate: float = Field(0.01, gt=0, le=1, description="share s of samples whose accesses are counted")


@register
class MFU(Partial):
    name = "mfu"
    summary = "CPR-MFU: partial recovery; partial saves of the top-r rows by exact access counts, a full save every K"
    Params = MFUParams
    needs_throughput = True
    plan_label = "CPR-MFU"
    plan_rank = 3
    #: the saved fractions the planner tries; the full-save period follows from the full interval
    plan_top_fractions: tuple[float, ...] = (0.01, 0.05, 0.1, 0.2)

    @classmethod
    def plan_variants(cls, s) -> list[dict]:  # noqa: ANN001
        return [{"top_fraction": r} for r in cls.plan_top_fractions]

    @classmethod
    def plan_with_full_interval(cls, params, tau, full_interval) -> dict:  # noqa: ANN001
        return {**params, "full_every": max(1, min(10_000, int(math.floor(full_interval / tau * (1 + 1e-9)))))}

    @classmethod
    def plan_full_interval(cls, params, tau) -> float:  # noqa: ANN001
        return tau * params.get("full_every", MFUParams.model_fields["full_every"].default)

    @classmethod
    def _plan_rate(cls, params) -> float:  # noqa: ANN001
        return 1.0

    @classmethod
    def plan_expected_pls(cls, s, params, tau, rates) -> float:  # noqa: ANN001
        K = params.get("full_every", MFUParams.model_fields["full_every"].default)
        cov = coverage_of(s, tau, params["top_fraction"], cls._plan_rate(params))
        return analytic.expected_pls_prioritized(s.duration_s, tau, rates.embedding, rates.k,
                                                 s.cluster.embedding_servers, cov, K)

    @classmethod
    def plan_expected_overhead(cls, s, params, tau, rates, costs) -> float:  # noqa: ANN001
        K = params.get("full_every", MFUParams.model_fields["full_every"].default)
        rate = cls._plan_rate(params)
        counter = cls.Params.model_fields["counter_overhead"].default * (1.0 if math.isinf(rate) else rate)
        delta = analytic.prioritized_save_s(costs.save_s, costs.save_fraction_s(params["top_fraction"]), K)
        node = partial_node_overhead(s, tau, delta, rates, costs, degraded=degraded_trainers(s, params))
        return (1.0 + node) * (1.0 + counter) - 1.0 + job_level_overhead(s, K * tau, rates, costs)

    def __init__(self, params: MFUParams, run: "Run") -> None:
        super().__init__(params, run)
        s = run.scenario
        self.K = params.full_every
        self.coverage = self._coverage(s, run.tau, params.top_fraction)
        self.partial_save_s = self.costs.save_fraction_s(params.top_fraction)
        self.full_save_s = self.costs.save_s
        if params.differential:  # rows modified since the last full save, K intervals ago
            dirty = float(access.from_config(s.access).touched(self.K * run.tau * s.job.throughput))
            self.full_save_s = self.costs.save_fraction_s(dirty)
        self.rate = 1.0 / (1.0 + params.counter_overhead * self.sample_rate)
        self.saves = 0
        run.ledger = ShardLedger(run.n_embedding, tiers=(self.coverage, 1.0 - self.coverage))

    @property
    def sample_rate(self) -> float:
        return 1.0

    def _coverage(self, s, tau: float, r: float) -> float:  # noqa: ANN001
        return coverage_of(s, tau, r, self.sample_rate)

    def save_s(self, run: "Run") -> float:
        return self.full_save_s if (self.saves + 1) % self.K == 0 else self.partial_save_s

    def on_commit(self, run: "Run", progress: float) -> None:
        self.saves += 1
        if self.saves % self.K == 0:
            super().on_commit(run, progress)
        else:
            run.ledger.saved(progress, tier=0)

    def on_rollback(self, run: "Run") -> None:
        self.saves -= self.saves % self.K  # back at a full save: the next K - 1 saves are partial


@register
class SSU(MFU):
    name = "ssu"
    summary = "CPR-SSU: as MFU, but rows ranked by counts from a sub-sample (rate s) of the inputs"
    Params = SSUParams
    plan_label = "CPR-SSU"
    plan_rank = 4

    @classmethod
    def plan_variants(cls, s) -> list[dict]:  # noqa: ANN001
        return [{**v, "sample_rate": 0.01} for v in super().plan_variants(s)]

    @classmethod
    def _plan_rate(cls, params) -> float:  # noqa: ANN001
        return params.get("sample_rate", SSUParams.model_fields["sample_rate"].default)

    @property
    def sample_rate(self) -> float:
        return self.params.sample_rate  # type: ignore[attr-defined]


def coverage_of(s, tau: float, top_fraction: float, sample_rate: float) -> float:  # noqa: ANN001
    """Access share of the rows a partial save writes (tau seconds of progress between saves)."""
    model = access.from_config(s.access)
    if math.isinf(sample_rate):  # lookahead: ranked by the future accesses themselves, no noise
        return float(model.coverage(top_fraction))
    m = tau * s.job.throughput * sample_rate
    return model.sampled_coverage(top_fraction, m)
