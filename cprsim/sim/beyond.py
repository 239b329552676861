"""Beyond CPR: erasure coding (ECRM), differential + quantized checkpoints (Check-N-Run), and
lookahead-prioritized saving with trainer-side caches (BagPipe-inspired).

**ECRM** (``ecrm``). Embedding servers form stripes of ``k`` data + ``m`` parity (the parity is
spread over the stripe: extra memory ``m/k``). Every embedding update also sends a delta to the
``m`` parities: a steady slowdown, given as ``parity_slowdown`` or derived from a network model,
``m x samples/s x update bytes per sample / (N_e x node bandwidth)`` (the share of the servers'
network time the parity deltas take). A failed server is rescheduled and rebuilt from ``k`` peers
at the node bandwidth (``k x shard bytes / node bandwidth``) while training goes on at
``rebuild_throughput`` (ECRec measured 7-13% slower: 0.9). Nothing is lost unless more than
``m`` servers of one stripe are down or rebuilding at once: then it falls back to the last
checkpoint (``stripe_loss = "full"``: rollback, every node reloads) or, as a hybrid, restores the
lost shards alone (``stripe_loss = "partial"``: CPR's partial recovery, counted in PLS). ECRM
still checkpoints, rarely. Trainers hold replicated dense parameters: a failed trainer is
rescheduled and copies them from a peer.

**Check-N-Run** (``checknrun``). Full-recovery semantics. A checkpoint writes only the rows
modified since the last one (the access model's ``touched(tau x samples/s)`` share of the rows),
quantized to ``bits`` (of 32); every ``full_every``-th checkpoint is a full baseline. A restore
reads the baseline and every increment since.

**Lookahead** (``lookahead``). MFU whose partial saves rank rows by their *future* accesses (the
training data is known ahead), so the ranking carries no counting noise: the saved rows cover
``coverage(r)``, the upper bound of MFU/SSU's ``sampled_coverage``; no counters to maintain.
Trainer-side embedding caches (``cache_fraction`` of the hottest rows, written back every
``writeback_s`` of progress) lose their dirty rows when a trainer fails:
``(progress since the last write-back) x coverage(cache_fraction) / N_t`` joins PLS. The hybrid
``mfu`` + ``differential = true`` writes only the dirty rows in its full saves.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cprsim import access
from cprsim.sim.prioritized import MFU, MFUParams, coverage_of
from cprsim.sim.strategies import Strategy, register

if TYPE_CHECKING:  # pragma: no cover
    from cprsim.sim.engine import Run

QUANT_BITS = (32, 16, 8, 4)


class ECRMParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    k: int = Field(4, ge=1, description="data servers per stripe")
    m: int = Field(1, ge=1, description="parity per stripe (servers' worth, spread over the stripe)")
    parity_slowdown: float | None = Field(None, ge=0, lt=1, description="steady slowdown from parity updates")
    update_bytes_per_sample: float = Field(26 * 64 * 4.0, gt=0, description="embedding gradient bytes per sample")
    rebuild_throughput: float = Field(0.9, gt=0, le=1, description="training speed while a server is rebuilt")
    stripe_loss: Literal["full", "partial"] = Field("full", description="recovery when > m servers of a stripe are down")


@register
class ECRM(Strategy):
    name = "ecrm"
    summary = "ECRM: erasure-coded embedding servers; rebuild from parity while training continues"
    Params = ECRMParams
    plan_label = "ECRM"
    plan_rank = 5
    plan_interval_range = (0.5, 12.0)

    @classmethod
    def plan_variants(cls, s) -> list[dict]:  # noqa: ANN001
        return [{"k": 4, "m": 1}, {"k": 4, "m": 2}, {"k": 2, "m": 2}]

    def __init__(self, params: ECRMParams, run: "Run") -> None:
        super().__init__(params, run)
        s = run.scenario
        ne = s.cluster.embedding_servers
        self.stripe_size = params.k + params.m
        if params.parity_slowdown is not None:
            slow = params.parity_slowdown
        else:
            slow = params.m * s.job.throughput * params.update_bytes_per_sample / (ne * self.costs.node_bps)
            slow = min(slow, 0.99)
        self.rate = 1.0 - slow
        self.rebuild_s = params.k * self.costs.shard_bytes / self.costs.node_bps
        self.rebuild_end: dict[int, float] = {}  # embedding node -> end of its rebuild
        self.fallback = False

    @classmethod
    def check(cls, params: ECRMParams, s) -> None:  # noqa: ANN001
        ne = s.cluster.embedding_servers
        if params.m >= ne:
            raise ValueError(f"strategy.m ({params.m}) must be less than the {ne} embedding servers")
        if params.k + params.m > ne:
            raise ValueError(f"strategy.k + strategy.m ({params.k + params.m}) exceeds the {ne} embedding servers")
        if params.parity_slowdown is None and s.job.samples_per_s is None:
            raise ValueError("strategy 'ecrm' derives its parity slowdown from job.samples_per_s: "
                             "give it, or strategy.parity_slowdown")

    def stripe(self, run: "Run", node: int) -> int:
        return (node - run.n_trainers) // self.stripe_size

    def on_failure(self, run: "Run", nodes: list[int]) -> set[int] | None:
        now = run.env.now
        if run.dense_lost(nodes):  # no trainer left to copy the dense part from: the last checkpoint
            self.fallback = True
            run.rollback()
            self.on_rollback(run)
            return {n for n, t in run.up_at.items() if t > now and n != run.job_node}
        emb = [n for n in nodes if n >= run.n_trainers]
        trainers = {n for n in nodes if n < run.n_trainers}
        for n in emb:
            self.rebuild_end[n] = run.up_at.get(n, now) + self.rebuild_s
            run.log("rebuild_start", n, self.rebuild_end[n])
        busy = {n for n, t in self.rebuild_end.items() if t > now}
        lost_stripes = {self.stripe(run, n) for n in emb
                        if sum(1 for b in busy if self.stripe(run, b) == self.stripe(run, n)) > self.params.m}  # type: ignore[attr-defined]
        if not lost_stripes:
            return trainers
        victims = {b for b in busy if self.stripe(run, b) in lost_stripes}
        for b in victims:
            self.rebuild_end.pop(b, None)
        run.log("stripe_loss", -1, float(len(lost_stripes)))
        if self.params.stripe_loss == "partial":  # type: ignore[attr-defined]
            for b in victims:
                run.lose_shard(b - run.n_trainers)
            return trainers | victims
        self.fallback = True
        run.rollback()
        return trainers | victims | {n for n, t in run.up_at.items() if t > now}

    def load_s(self, run: "Run", nodes: set[int]) -> float:
        if self.fallback:
            self.fallback = False
            return self.costs.load_s
        k = sum(1 for n in nodes if n >= run.n_trainers)
        t = self.costs.shard_load_s(k) if k else 0.0
        if len(nodes) > k:
            t = max(t, self.costs.dense_copy_s)
        return t

    def on_rollback(self, run: "Run") -> None:
        self.rebuild_end.clear()  # every node reloads the checkpoint: no rebuild from parity goes on

    def _rebuilding(self, now: float) -> bool:
        return any(t > now for t in self.rebuild_end.values())

    def rate_at(self, run: "Run", now: float) -> float:
        return self.rate * (self.params.rebuild_throughput if self._rebuilding(now) else 1.0)  # type: ignore[attr-defined]

    def next_rate_change(self, run: "Run", now: float) -> float:
        ends = [t for t in self.rebuild_end.values() if t > now]
        return min(ends) if ends else float("inf")

    @property
    def memory_overhead(self) -> float:
        return self.params.m / self.params.k  # type: ignore[attr-defined]


class CheckNRunParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    bits: int = Field(32, description="quantization of saved rows: 32 (none), 16, 8 or 4 bits")
    full_every: int = Field(8, ge=1, le=10_000, description="every K-th checkpoint is a full baseline")

    @model_validator(mode="after")
    def _bits(self) -> "CheckNRunParams":
        if self.bits not in QUANT_BITS:
            raise ValueError(f"bits must be one of {', '.join(map(str, QUANT_BITS))}, got {self.bits}")
        return self


@register
class CheckNRun(Strategy):
    name = "checknrun"
    summary = "Check-N-Run: differential (dirty rows only) and quantized checkpoints, full baseline every K; full recovery"
    Params = CheckNRunParams
    needs_throughput = True
    plan_label = "Check-N-Run"
    plan_rank = 2

    @classmethod
    def plan_variants(cls, s) -> list[dict]:  # noqa: ANN001
        return [{"bits": 32, "full_every": 8}, {"bits": 8, "full_every": 8}]

    def __init__(self, params: CheckNRunParams, run: "Run") -> None:
        super().__init__(params, run)
        s = run.scenario
        model = access.from_config(s.access)
        self.dirty = float(model.touched(run.tau * s.job.throughput))
        self.q = params.bits / 32.0
        self.K = params.full_every
        self.saves = 0
        self.since_baseline = 0  # increments written since the last baseline
        c = self.costs
        self.full_s = c.save_fraction_s(self.q)
        self.incr_s = c.save_fraction_s(self.q * self.dirty)
        self.s_per_byte = (c.load_s - c.latency_s) / c.bytes_total if c.bytes_total else 0.0

    def save_s(self, run: "Run") -> float:
        # saves are numbered from 0: save 0, K, 2K, ... are full baselines
        return self.full_s if self.saves % self.K == 0 else self.incr_s

    def on_commit(self, run: "Run", progress: float) -> None:
        self.since_baseline = 0 if self.saves % self.K == 0 else self.since_baseline + 1
        self.saves += 1
        super().on_commit(run, progress)

    def on_failure(self, run: "Run", nodes: list[int]) -> set[int] | None:
        run.rollback()
        return None

    def load_s(self, run: "Run", nodes: set[int]) -> float:
        c = self.costs
        share = self.q * (1.0 + self.since_baseline * self.dirty)
        return c.latency_s + self.s_per_byte * share * c.bytes_total

    def full_load_s(self, run: "Run") -> float:
        return self.load_s(run, set())

    def bytes_per_save(self) -> float:
        return self.q * ((1.0 + (self.K - 1) * self.dirty) / self.K) * self.costs.embedding_bytes


class LookaheadParams(MFUParams):
    counter_overhead: float = Field(0.0, ge=0, lt=1, description="no counters: the future is read, not counted")
    cache_fraction: float = Field(0.0, ge=0, le=1, description="trainer-side cache: share of rows cached")
    writeback_s: float = Field(60.0, gt=0, description="trainer cache write-back period (s of progress)")


@register
class Lookahead(MFU):
    name = "lookahead"
    summary = "BagPipe-style: partial saves of the rows the next window will use (no ranking noise); trainer caches"
    Params = LookaheadParams
    needs_throughput = False
    plan_label = "Lookahead"
    plan_rank = 90
    plan_oracle = True

    @classmethod
    def _plan_rate(cls, params) -> float:  # noqa: ANN001
        return math.inf

    @classmethod
    def check(cls, params, scenario) -> None:  # noqa: ANN001
        super().check(params, scenario)
        if params.differential and scenario.job.samples_per_s is None:
            raise ValueError("strategy 'lookahead' with differential = true counts dirty rows: give job.samples_per_s")

    def __init__(self, params: LookaheadParams, run: "Run") -> None:
        super().__init__(params, run)
        self.cache_cov = access.from_config(run.scenario.access).coverage(params.cache_fraction) \
            if params.cache_fraction > 0 else 0.0

    def _coverage(self, s, tau: float, r: float) -> float:  # noqa: ANN001
        return coverage_of(s, tau, r, math.inf)

    def on_failure(self, run: "Run", nodes: list[int]) -> set[int] | None:
        super().on_failure(run, nodes)
        if self.cache_cov > 0:
            wb = self.params.writeback_s  # type: ignore[attr-defined]
            for n in nodes:
                if n < run.n_trainers:
                    age = run.progress % wb
                    lost = age * self.cache_cov / run.n_trainers
                    run.ledger.lost += lost
                    run.log("pls", n, lost / run.W)
        return None
