"""CPR's prioritized saving: MFU and SSU (partial recovery with frequent partial saves).

Between full saves, a save writes only the top fraction ``r`` of embedding rows ranked by their
accesses since the last save; every ``K``-th save (``full_every``) is a full one. Ranking:

* **MFU** (most frequently used): exact per-row counters over all the interval's samples;
* **SSU** (sub-sampled used): counters over a sub-sample of the inputs at rate ``s``, so the
  ranking is noisier and the saved rows cover fewer of the updates.

**What a partial save protects.** A save at the end of an interval writes the current values of
the rows it selects, so it protects exactly the interval's updates that landed on them: the
*in-sample* share of the ranked rows, ``c = AccessModel.in_sample_coverage(r, tau x R, s)``
(``R`` samples/s). For MFU this is the top-``r`` share of the interval's own counts, at least the
population coverage ``coverage(r)`` (a sample's top counts over-represent their rows); for SSU the
share of all the interval's accesses on the rows its sub-sample ranks highest (between ``r`` and
MFU's). A failed shard then loses, weighted by access, everything since the last save plus
``(1 - c)`` of the progress between the last full save and the last save: two tiers of the PLS
ledger. Using ``c`` for every saved interval is conservative: an older interval's updates on a row
that a later partial save wrote are protected too, which the model does not credit.

**What it costs** (defaults measured by ``benchmarks/mfu_costs.py`` on the development machine, 2
shared cores, torch 2.13 CPU, one thread; a production server is likely faster, so these overstate
MFU's cost):

* counting: every counted access updates a counter, ``counter_ns_per_access`` (2.4 ns measured),
  on the embedding servers: a slowdown of ``R x T x s x ns / N_e`` (``T`` lookups per sample, all
  servers counting in parallel, the counter on the lookup's critical path); ``counter_overhead``
  overrides the derived slowdown;
* selection: each partial save first selects the top rows, ``select_ns_per_row`` (12.9 ns
  measured, ``torch.topk``) per row a server holds (MFU) or per row the sub-sample touched (SSU);
* scattered rows: the selected rows are gathered into a buffer at ``gather_gbps`` per server
  (1.5 GB/s measured for random 256-byte rows) and written with their ``key_bytes`` row ids;
* restore: a failed shard reads its last full save and then applies the ``j`` partial saves since
  (``j < K``; each a separate read with its own latency).

Failures are recovered as by ``Partial``: with ``trainer_degraded`` (the default) a failed trainer
slows the job to ``(N_t - k)/N_t`` of its rate until its replacement has copied the dense part,
on top of the counting slowdown (the two multiply).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, ClassVar

from pydantic import Field

from cprsim import access, analytic
from cprsim.pls import ShardLedger
from cprsim.sim.emulation_parts import CountedTopRows, Emulation, SubsampledTopRows
from cprsim.sim.planning_parts import PartialPlanning
from cprsim.sim.strategies import (
    Partial,
    PartialParams,
    degraded_trainers,
    job_level_overhead,
    partial_node_overhead,
    register,
)

if TYPE_CHECKING:  # pragma: no cover
    from cprsim.sim.protocol import RunSetup, RunView


class MFUParams(PartialParams):
    """CPR-MFU's parameters; ``trainer_degraded`` comes from ``PartialParams``."""

    top_fraction: float = Field(
        0.05, gt=0, le=1, description="share r of rows written by a partial save"
    )
    full_every: int = Field(8, ge=1, le=10_000, description="every K-th save is a full one")
    counter_overhead: float | None = Field(
        None,
        ge=0,
        lt=1,
        description="slowdown of counting accesses (default: derived from counter_ns_per_access)",
    )
    counter_ns_per_access: float = Field(
        2.4,
        ge=0,
        le=1e6,
        description="one counter update (ns; measured by benchmarks/mfu_costs.py)",
    )
    select_ns_per_row: float = Field(
        12.9,
        ge=0,
        le=1e6,
        description="top-k selection per counted row at a partial save (ns; measured)",
    )
    gather_gbps: float = Field(
        1.5,
        gt=0,
        description="gathering the selected rows into a buffer, per server (GB/s; measured)",
    )
    key_bytes: float = Field(
        8.0, ge=0, le=1024, description="row id written with every row of a partial save"
    )
    differential: bool = Field(
        False, description="hybrid with Check-N-Run: full saves write only dirty rows"
    )


class SSUParams(MFUParams):
    """CPR-SSU's parameters: MFU's, and the share ``sample_rate`` of samples whose accesses are
    counted."""

    sample_rate: float = Field(
        0.01, gt=0, le=1, description="share s of samples whose accesses are counted"
    )


class MFUPlanning(PartialPlanning):
    """CPR-MFU's planning (and SSU's, lookahead's: the strategy's own model of what a partial save
    protects and costs): one variant per saved fraction, a full save every ``full_every``."""

    strategy: type[MFU]  #: MFU or a subclass (SSU, lookahead): their model of a partial save
    rank = 3
    #: the saved fractions the planner tries; the full-save period follows from the full interval
    top_fractions: tuple[float, ...] = (0.01, 0.05, 0.1, 0.2)

    def variants(self, s) -> list[dict]:
        """One variant per saved fraction of :attr:`top_fractions`."""
        return [{"top_fraction": r} for r in self.top_fractions]

    def with_full_interval(self, params, tau, full_interval) -> dict:
        """``full_every``: the most saves every ``tau`` within ``full_interval`` (1 .. 10,000)."""
        return {
            **params,
            "full_every": max(1, min(10_000, int(math.floor(full_interval / tau * (1 + 1e-9))))),
        }

    def full_interval(self, params, tau) -> float:
        """``full_every x tau``: progress between two full saves (s)."""
        return tau * params.get("full_every", MFUParams.model_fields["full_every"].default)

    def expected_pls(self, s, params, tau, rates) -> float:
        """First-order E[PLS] with partial saves every ``tau`` that protect :meth:`protected_share`
        and a full save every ``full_every`` (:func:`cprsim.analytic.expected_pls_prioritized`)."""
        cls = self.strategy
        p = cls._params(params)
        cov = cls.protected_share(s, p, tau)
        return analytic.expected_pls_prioritized(
            s.duration_s,
            tau,
            analytic.ShardFailures(
                rate=rates.embedding, per_event=rates.k, shards=s.cluster.embedding_servers
            ),
            cov,
            analytic.PrioritizedSaves(full_every=p.full_every),
        )

    def expected_overhead(self, s, params, tau, rates, costs) -> float:
        """First-order E[wall]/W - 1: partial recovery at the mean save cost, each restore reading
        on average half of the ``full_every - 1`` partial saves, slowed by counting, plus job-level
        rollbacks to the last full save."""
        cls = self.strategy
        p = cls._params(params)
        K = p.full_every
        counter = cls.counter_slowdown(s, p)
        delta = analytic.prioritized_save_s(
            cls.full_save_cost(s, p, tau, costs), cls.partial_save_cost(s, p, tau, costs), K
        )
        # a failure finds j = 0..K-1 partial saves since the last full one, each read on restore
        overlays = (K - 1) / 2.0 * cls.overlay_s(s, p, costs, max(1, round(rates.k)))
        node = partial_node_overhead(
            s,
            tau,
            delta,
            rates,
            costs,
            degraded=degraded_trainers(s, params),
            shard_extra_s=overlays,
        )
        return (1.0 + node) * (1.0 + counter) - 1.0 + job_level_overhead(s, K * tau, rates, costs)

    def note(self, s, costs) -> str:
        """The share of rows a partial save writes and of the updates it protects, what it and a
        full save cost (s), and the counting slowdown."""
        cls = self.strategy
        p, tau = cls.Params(**s.strategy.params), s.interval_s
        share = cls.protected_share(s, p, tau)
        return (
            f"a partial save writes {100 * p.top_fraction:.3g}% of the rows and protects {100 * share:.4g}% of an "
            f"interval's updates; it takes {cls.partial_save_cost(s, p, tau, costs):.3g} s (a full one "
            f"{cls.full_save_cost(s, p, tau, costs):.3g} s); counting slows training by "
            f"{100 * cls.counter_slowdown(s, p):.2g}%"
        )


@register
class MFU(Partial):
    """CPR-MFU (module docstring): partial recovery with partial saves of the top ``top_fraction``
    of the rows by exact access counts, a full save every ``full_every``."""

    supports_tiers = False  #: its partial saves are not modelled on the tiers
    name = "mfu"
    colour = "#2ca02c"
    summary = "CPR-MFU: partial recovery; partial saves of the top-r rows by exact access counts, a full save every K"
    Params = MFUParams
    needs_throughput = True
    emulation: ClassVar[Emulation | None] = CountedTopRows()  #: top rows by exact access counts
    plan_label = "CPR-MFU"
    Planning = MFUPlanning

    # -- the model of what a partial save protects and costs (shared by the engine and the planner)
    @classmethod
    def ranking_rate(cls, params) -> float:
        """Share of the samples whose accesses are counted (1 for MFU)."""
        return 1.0

    @classmethod
    def protected_share(cls, s, params, tau: float) -> float:
        """Access share of an interval's updates that its partial save writes (in-sample)."""
        return coverage_of(s, tau, params.top_fraction, cls.ranking_rate(params))

    @classmethod
    def counter_slowdown(cls, s, params) -> float:
        """Training slowdown of counting: ``R x T x s x ns / N_e`` unless given."""
        if params.counter_overhead is not None:
            return params.counter_overhead
        per_server = (
            s.job.throughput
            * access.of(s).n_tables
            * cls.ranking_rate(params)
            / s.cluster.embedding_servers
        )
        return min(0.99, per_server * params.counter_ns_per_access * 1e-9)

    @classmethod
    def selected_from(cls, s, params, tau: float) -> float:
        """Rows a server's top-k selection scans at a partial save (MFU: every row it holds)."""
        return access.layout(s).rows / s.cluster.embedding_servers

    @classmethod
    def _key_share(cls, s, params, fraction: float, costs) -> float:
        """Row ids written with ``fraction`` of the rows, as a share of the embedding bytes."""
        if costs.embedding_bytes <= 0:
            return 0.0
        return fraction * access.layout(s).rows * params.key_bytes / costs.embedding_bytes

    @classmethod
    def _rows_save_s(cls, s, params, fraction: float, costs, scanned: float) -> float:
        """Select, gather and write ``fraction`` of the rows with their ids (and the dense part)."""
        from cprsim.scenario import GB

        write = costs.save_fraction_s(fraction + cls._key_share(s, params, fraction, costs))
        gather = (
            fraction
            * costs.embedding_bytes
            / s.cluster.embedding_servers
            / (params.gather_gbps * GB)
        )
        return write + gather + scanned * params.select_ns_per_row * 1e-9

    @classmethod
    def partial_save_cost(cls, s, params, tau: float, costs) -> float:
        """Seconds a partial save blocks: select the top rows among those scanned, gather them and
        write them with their ids (and the dense part)."""
        return cls._rows_save_s(
            s, params, params.top_fraction, costs, cls.selected_from(s, params, tau)
        )

    @classmethod
    def full_save_cost(cls, s, params, tau: float, costs) -> float:
        """Seconds a full save blocks: a full checkpoint, or (``differential``) the rows modified
        since the last full save, with their ids."""
        if not params.differential:
            return costs.save_s
        # rows modified since the last full save, K intervals ago (written with their ids)
        dirty = float(access.of(s).touched(params.full_every * tau * s.job.throughput))
        return cls._rows_save_s(s, params, dirty, costs, 0.0)

    @classmethod
    def overlay_s(cls, s, params, costs, k: int) -> float:
        """Reading one partial save's part of ``k`` failed shards (its own latency, its rows and ids)."""
        share = params.top_fraction + cls._key_share(s, params, params.top_fraction, costs)
        return costs.latency_s + (costs.shard_load_s(k) - costs.latency_s) * share

    @classmethod
    def _params(cls, params: dict):
        return cls.Params(**params)

    def __init__(self, params: MFUParams, setup: RunSetup) -> None:
        super().__init__(params, setup)
        s, cls, tau = setup.scenario, type(self), setup.tau
        self.K = params.full_every
        self.coverage = cls.protected_share(s, params, tau)
        self.partial_save_s = cls.partial_save_cost(s, params, tau, self.costs)
        self.full_save_s = cls.full_save_cost(s, params, tau, self.costs)
        self.rate = 1.0 / (1.0 + cls.counter_slowdown(s, params))
        self._overlay: dict[int, float] = {}
        self.saves = 0

    def make_ledger(self, setup: RunSetup) -> ShardLedger:
        """Two tiers per shard: the rows the partial saves write (their access share) and the rest."""
        return ShardLedger(setup.n_embedding, tiers=(self.coverage, 1.0 - self.coverage))

    def save_s(self, run: RunView) -> float:
        """Every ``full_every``-th save is full, the others partial (s)."""
        return self.full_save_s if (self.saves + 1) % self.K == 0 else self.partial_save_s

    def shard_extra_s(self, run: RunView, k: int) -> float:
        """The partial saves since the last full one, applied on top of it (one read each)."""
        j = self.saves % self.K
        if not j:
            return 0.0
        if k not in self._overlay:
            self._overlay[k] = type(self).overlay_s(run.scenario, self.params, self.costs, k)
        return j * self._overlay[k]

    def on_commit(self, run: RunView, progress: float) -> None:
        """A full save commits in full; a partial one marks only the saved rows' ledger tier."""
        self.saves += 1
        if self.saves % self.K == 0:
            super().on_commit(run, progress)
        else:
            assert run.ledger is not None, "make_ledger gave MFU/SSU a ledger"
            run.ledger.saved(progress, tier=0)

    def on_rollback(self, run: RunView) -> None:
        """Back at the last full save: the saves count from it again."""
        self.saves -= self.saves % self.K  # back at a full save: the next K - 1 saves are partial


class SSUPlanning(MFUPlanning):
    """CPR-SSU's planning: MFU's, each variant counting 1% of the samples."""

    rank = 4

    def variants(self, s) -> list[dict]:
        """MFU's variants, each counting 1% of the samples."""
        return [{**v, "sample_rate": 0.01} for v in super().variants(s)]


@register
class SSU(MFU):
    """CPR-SSU: as MFU, but rows ranked by access counts over a sub-sample (``sample_rate``) of the
    samples."""

    name = "ssu"
    colour = "#9467bd"
    summary = "CPR-SSU: as MFU, but rows ranked by counts from a sub-sample (rate s) of the inputs"
    Params = SSUParams
    emulation = SubsampledTopRows()  #: partial saves of the top rows by sub-sampled counts
    plan_label = "CPR-SSU"
    Planning = SSUPlanning

    @classmethod
    def ranking_rate(cls, params) -> float:
        """``sample_rate``: the share of samples whose accesses are counted."""
        return params.sample_rate

    @classmethod
    def selected_from(cls, s, params, tau: float) -> float:
        """SSU selects among the rows its sub-sample touched."""
        model = access.of(s)
        return (
            float(model.touched(tau * s.job.throughput * params.sample_rate))
            * model.rows
            / s.cluster.embedding_servers
        )


def coverage_of(s, tau: float, top_fraction: float, sample_rate: float) -> float:
    """Access share of an interval's updates on the rows its partial save writes, ranked by the
    counts of ``sample_rate`` of the interval's samples (tau seconds of progress): in-sample."""
    return access.of(s).in_sample_coverage(top_fraction, tau * s.job.throughput, sample_rate)
