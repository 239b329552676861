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
rescheduled and copies them from a peer while the others train on at ``(N_t - k)/N_t`` of the rate
(``trainer_degraded``, the default, as under partial recovery; ``false``: the job stalls).

ECRM's stripes (:func:`stripe_layout`): ``ceil(N_e / (k + m))`` of at most ``k + m`` servers.
``placement = "domain-aware"`` (the default) puts no two servers of one group of the embedding
servers' first fixed failure domain in a stripe (:func:`spread`, the Gale-Ryser construction: it
finds such a layout whenever one exists), keeping full stripes of ``k + m`` and one shorter
remainder when the groups allow it and shortening as few stripes as they require otherwise
(:func:`domain_aware_layout`); :meth:`ECRM.check` refuses a scenario where no layout can.
``"contiguous"``: consecutive servers. The parity's memory (``m/k`` of the embedding tables,
:meth:`ECRMPlanning.extra_memory`) is reported by the planner per option and capped by its
``max_extra_memory``.

**Check-N-Run** (``checknrun``). Full-recovery semantics. A checkpoint writes only the rows
modified since the last one (the access model's ``touched(tau x samples/s)`` share of the rows),
quantized to ``bits`` (of 32); every ``full_every``-th checkpoint is a full baseline. A restore
reads the baseline and every increment since.

**Lookahead** (``lookahead``). MFU whose partial saves rank rows by the *next* window's accesses
(the training data is known ahead): no counters on the servers, but a save protects *past*
updates, which the future ranks only out of sample (``ranked_share(r, tau x R).out_of_sample``,
below MFU's in-sample share): a cheaper, weaker MFU, not an upper bound on it. Trainer-side embedding caches (``cache_fraction`` of the hottest rows, written back every
``writeback_s`` of progress) lose their dirty rows when a trainer fails:
``(progress since the last write-back) x coverage(cache_fraction) / N_t`` joins PLS. The hybrid
``mfu`` + ``differential = true`` writes only the dirty rows in its full saves.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cprsim import access
from cprsim.pls import ShardLedger
from cprsim.sim.emulation_parts import LookaheadTopRows
from cprsim.sim.planning_parts import EverySaveFull, RollbackOverhead, RollbackPlanning
from cprsim.sim.prioritized import MFU, MFUParams, MFUPlanning
from cprsim.sim.strategies import DegradedTrainers, Strategy, register

if TYPE_CHECKING:  # pragma: no cover
    from cprsim.sim.protocol import RunSetup, RunView

QUANT_BITS = (32, 16, 8, 4)


class ECRMParams(BaseModel):
    """ECRM's parameters: the stripe (``k`` data + ``m`` parity servers), the parity-update slowdown
    (a fraction of throughput, given or derived), the training speed while a server is rebuilt, the
    fallback when a stripe is lost, the stripes' placement and ``trainer_degraded``."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
    k: int = Field(4, ge=1, description="data servers per stripe")
    m: int = Field(
        1, ge=1, description="parity per stripe (servers' worth, spread over the stripe)"
    )
    parity_slowdown: float | None = Field(
        None, ge=0, lt=1, description="steady slowdown from parity updates"
    )
    update_bytes_per_sample: float | None = Field(
        None,
        gt=0,
        description="embedding gradient bytes per sample "
        "(default: tables x dim x bytes_per_param of [access])",
    )
    rebuild_throughput: float = Field(
        0.9, gt=0, le=1, description="training speed while a server is rebuilt"
    )
    stripe_loss: Literal["full", "partial"] = Field(
        "full", description="recovery when > m servers of a stripe are down"
    )
    placement: Literal["domain-aware", "contiguous"] = Field(
        "domain-aware",
        description="no stripe holds two servers of one group of the embedding servers' first "
        "fixed [[failures.domains]] (refused when no layout can), or consecutive servers",
    )
    trainer_degraded: bool = Field(
        True,
        description="a failed trainer leaves the job running on the others at (N_t - k)/N_t throughput "
        "until its replacement has copied the dense parameters (as under partial recovery; false: the job stalls)",
    )


def embedding_domain(s):
    """The failure domain ECRM's stripes are placed across: the embedding servers' first
    ``[[failures.domains]]`` of fixed membership (None when there is none)."""
    return next(
        (d for d in s.failures.domains if d.node_type == "embedding" and d.membership == "fixed"),
        None,
    )


def spread(domain_of: Sequence[Hashable], sizes: Sequence[int]) -> list[int] | None:
    """Servers to stripes with no two members of one failure domain in a stripe, or None when no
    such assignment exists.

    ``domain_of[j]``: the domain of server ``j`` (any hashable ids, any group sizes);
    ``sizes[i]``: the servers stripe ``i`` holds (they sum to ``len(domain_of)``). Returns the
    stripe of each server. The constructive proof of the Gale-Ryser theorem: the domains, largest
    first (ties: the one whose first server comes first), each put their servers in the stripes
    with the most room left (ties: the lower stripe index; a domain's servers in id order go to
    those stripes in index order). Giving any domain the stripes with the most room never turns
    a solvable layout into an unsolvable one (an exchange argument), so this finds an assignment
    whenever one exists. Deterministic: the same inputs give the same layout.
    """
    if sum(sizes) != len(domain_of) or any(c < 0 for c in sizes):
        raise ValueError(f"stripe sizes {list(sizes)} do not hold {len(domain_of)} servers")
    members: dict[Hashable, list[int]] = {}
    for j, d in enumerate(domain_of):
        members.setdefault(d, []).append(j)
    room = list(sizes)
    out = [-1] * len(domain_of)
    for d in sorted(members, key=lambda d: (-len(members[d]), members[d][0])):
        js = members[d]
        if len(js) > len(room):
            return None
        chosen = sorted(sorted(range(len(room)), key=lambda i: (-room[i], i))[: len(js)])
        if any(room[i] <= 0 for i in chosen):
            return None
        for j, i in zip(js, chosen, strict=True):
            out[j] = i
            room[i] -= 1
    return out


def stripe_sizes(n: int, k: int, m: int, full: int | None = None) -> list[int]:
    """The servers of each stripe when ``n`` servers form ``ceil(n / (k + m))`` stripes of at most
    ``k + m``: ``full`` stripes of ``k + m`` (default: as many as fit, ``n // (k + m)``: the
    remainder, if any, is one shorter stripe), the rest as equal as possible, larger first."""
    size = k + m
    count = -(-n // size)
    f = n // size if full is None else full
    rest, left = count - f, n - f * size
    if not (0 <= f <= n // size) or (rest == 0) != (left == 0):
        raise ValueError(f"{f} full stripes of {size} do not fit {n} servers")
    return [size] * f + [left // rest + (i < left % rest) for i in range(rest)]


def domain_aware_layout(domain_of: Sequence[Hashable], k: int, m: int) -> list[int] | None:
    """Domain-aware stripes (:func:`spread`) with the fewest stripes shorter than ``k + m``: the
    usual sizes (full stripes and one shorter remainder, :func:`stripe_sizes`) when the domains
    allow them, else one full stripe fewer, its servers spread over the shorter ones, and so on
    down to stripes as equal as possible; None when even those cannot keep every domain's
    members apart (``ceil(N / (k + m))`` stripes: more would only add parity)."""
    n, size = len(domain_of), k + m
    # without a remainder every stripe is full whatever the split: one layout to try
    for f in [n // size] if n % size == 0 else range(n // size, -1, -1):
        got = spread(domain_of, stripe_sizes(n, k, m, f))
        if got is not None:
            return got
    return None


def _why_not(domain_of: Sequence[Hashable], sizes: Sequence[int]) -> str:
    """Why no assignment keeps each domain's members in distinct stripes (the Gale-Ryser condition
    the sizes break): a domain larger than the stripes, or the largest stripes needing more
    servers than the domains can give them one apiece."""
    counts = sorted((list(domain_of).count(d) for d in dict.fromkeys(domain_of)), reverse=True)
    if counts and counts[0] > len(sizes):
        return f"a group of {counts[0]} needs {counts[0]} stripes"
    top = sorted(sizes, reverse=True)
    for t in range(1, len(top) + 1):
        cap = sum(min(c, t) for c in counts)
        if sum(top[:t]) > cap:
            return (
                f"its {t} largest stripes hold {sum(top[:t])} servers, the groups can give "
                f"them at most {cap} without two of one group in a stripe"
            )
    return "no assignment exists"  # pragma: no cover - spread found none, so a condition fails


def stripe_layout(s, k: int, m: int, placement: str) -> list[int]:
    """The stripe of each embedding server (index 0 .. N_e - 1).

    ``ceil(N_e / (k + m))`` stripes of at most ``k + m`` servers. Contiguous, or domain-aware
    without a fixed embedding domain: the servers in id order, cut into stripes of ``k + m`` (the
    last one shorter when ``k + m`` does not divide ``N_e``). Domain-aware: no stripe holds two
    servers of one group of the domain (:func:`embedding_domain`), with the fewest stripes shorter
    than ``k + m`` that allows (:func:`domain_aware_layout`); a layout that cannot is refused
    (ValueError; :meth:`ECRM.check` refuses such a scenario).
    """
    ne = s.cluster.embedding_servers
    dom = embedding_domain(s)
    if placement == "domain-aware" and dom is not None:
        got = domain_aware_layout([j // dom.nodes for j in range(ne)], k, m)
        if got is None:
            raise ValueError(
                f"no domain-aware layout of {ne} servers in groups of {dom.nodes} into stripes "
                f"of at most {k + m}"
            )
        return got
    out: list[int] = []
    for i, c in enumerate(stripe_sizes(ne, k, m)):
        out += [i] * c
    return out


class ECRMPlanning(RollbackOverhead, EverySaveFull, RollbackPlanning):
    """ECRM's planning: it loses no update (a stripe loss rolls back, first order), stripes of a
    few shapes, its parity's memory reported, intervals up to 12x Daly's (it rarely rolls back)."""

    strategy: type[ECRM]
    rank = 5
    interval_range = (0.5, 12.0)

    def variants(self, s) -> list[dict]:
        """Stripes of 4 + 1, 4 + 2 and 2 + 2 servers."""
        return [{"k": 4, "m": 1}, {"k": 4, "m": 2}, {"k": 2, "m": 2}]

    def extra_memory(self, s, params: dict[str, Any]) -> float:
        """The parity's memory, a fraction of the embedding tables: ``m/k`` (the code's rate; a
        stripe shorter than ``k + m`` holds relatively more)."""
        p = self.strategy.Params.model_validate(params)
        return p.m / p.k

    def note(self, s, costs) -> str:
        """The parity's extra memory and training slowdown, and a server's rebuild time."""
        f = self.strategy.describe(s, costs)
        return (
            f"parity takes {100 * f['memory_overhead']:.3g}% extra memory and slows training by "
            f"{100 * f['parity_slowdown']:.3g}%; a server is rebuilt in {f['rebuild_s']:.3g} s"
        )


@register
class ECRM(DegradedTrainers, Strategy):
    """ECRM (module docstring): a failed embedding server is rebuilt from its stripe's parity while
    training goes on; only more than ``m`` servers of one stripe down at once fall back to the last
    checkpoint (or to partial recovery of the lost shards)."""

    name = "ecrm"
    colour = "#ff7f0e"
    summary = "ECRM: erasure-coded embedding servers; rebuild from parity while training continues"
    Params = ECRMParams
    params: ECRMParams  #: an instance of Params (the engine validates the scenario's with it)
    plan_label = "ECRM"
    Planning = ECRMPlanning

    def __init__(self, params: ECRMParams, setup: RunSetup) -> None:
        super().__init__(params, setup)
        s = setup.scenario
        self.stripe_size = params.k + params.m
        self.rate = 1.0 - type(self).parity_slowdown(s, params, self.costs)
        self.rebuild_s = params.k * self.costs.shard_bytes / self.costs.node_bps
        self.rebuild_end: dict[int, float] = {}  # embedding node -> end of its rebuild
        self.fallback = False
        self._init_degraded(params, setup)
        stripe_of = setup.shared.get("ecrm.stripe_of")
        if stripe_of is None:  # the same for every replication of the scenario
            layout = stripe_layout(s, params.k, params.m, params.placement)
            stripe_of = setup.shared["ecrm.stripe_of"] = {
                setup.n_trainers + j: st for j, st in enumerate(layout)
            }
        self.stripe_of: dict[int, int] = stripe_of

    def make_ledger(self, setup: RunSetup) -> ShardLedger | None:
        """A ledger only if a stripe loss restores the lost shards alone (``stripe_loss = "partial"``):
        otherwise ECRM loses no update."""
        return super().make_ledger(setup) if self.params.stripe_loss == "partial" else None

    @classmethod
    def check(cls, params: ECRMParams, s) -> None:
        """The stripe must fit the embedding servers (``m < N_e``, ``k + m <= N_e``); domain-aware
        placement across a fixed domain needs ``k + m`` distinct groups and a layout with no two
        servers of one group in a stripe (:func:`domain_aware_layout`; contiguous placement is the
        user's choice, unchecked); a derived parity slowdown needs ``job.samples_per_s``."""
        ne = s.cluster.embedding_servers
        if params.m >= ne:
            raise ValueError(
                f"strategy.m ({params.m}) must be less than the {ne} embedding servers"
            )
        if params.k + params.m > ne:
            raise ValueError(
                f"strategy.k + strategy.m ({params.k + params.m}) exceeds the {ne} embedding servers"
            )
        if params.parity_slowdown is None and s.job.samples_per_s is None:
            raise ValueError(
                "strategy 'ecrm' derives its parity slowdown from job.samples_per_s: "
                "give it, or strategy.parity_slowdown"
            )
        dom = embedding_domain(s)
        if params.placement == "domain-aware" and dom is not None:
            size = params.k + params.m
            n_dom = len(dom.groups(ne))
            if size > n_dom:
                raise ValueError(
                    f"strategy.k + strategy.m ({size}) exceeds the {n_dom} embedding "
                    f"failure domains of {dom.name!r}: a stripe cannot span distinct domains; "
                    'set strategy.placement = "contiguous"'
                )
            groups = [j // dom.nodes for j in range(ne)]
            if domain_aware_layout(groups, params.k, params.m) is None:
                even = stripe_sizes(ne, params.k, params.m, 0)  # the sizes most likely to work
                raise ValueError(
                    f'strategy.placement = "domain-aware": {ne} embedding servers in groups of '
                    f"{dom.nodes} (failure domain {dom.name!r}) cannot form {len(even)} stripes "
                    f"of at most strategy.k + strategy.m ({size}) with no two servers of one "
                    f"group in a stripe ({_why_not(groups, even)}); set "
                    'strategy.placement = "contiguous", or a smaller strategy.k + strategy.m'
                )

    def stripe(self, run: RunView, node: int) -> int:
        """The stripe of embedding server ``node`` (a node id, not a shard index)."""
        return self.stripe_of[node]

    @classmethod
    def parity_slowdown(cls, s, p, costs) -> float:
        """``m x samples/s x update bytes per sample / (N_e x node bandwidth)`` unless given; the
        update bytes default to one gradient row per table lookup (``tables x dim x bytes``)."""
        if p.parity_slowdown is not None:
            return p.parity_slowdown
        per_sample = p.update_bytes_per_sample
        if per_sample is None:
            from cprsim import access

            lay = access.layout(s)
            per_sample = len(lay.tables) * lay.row_bytes
        return min(
            0.99,
            p.m * s.job.throughput * per_sample / (s.cluster.embedding_servers * costs.node_bps),
        )

    @classmethod
    def describe(cls, s, costs) -> dict[str, float]:
        """Extra memory m/k of the parity, and the steady parity-update slowdown."""
        p = cls.Params.model_validate(s.strategy.params)
        return {
            "memory_overhead": cls.planning.extra_memory(s, s.strategy.params),
            "parity_slowdown": cls.parity_slowdown(s, p, costs),
            "rebuild_s": p.k * costs.shard_bytes / costs.node_bps,
        }

    def on_failure(self, run: RunView, nodes: list[int]) -> set[int] | None:
        """Rebuild each failed embedding server from parity once it is back, without stalling the
        job; more than ``m`` servers of one stripe down or rebuilding lose the stripe: back to the
        last checkpoint, or (``stripe_loss = "partial"``) its shards' updates since their last save
        lost. Trainers, and a lost dense part (a rollback), as under partial recovery."""
        now = run.now
        if self._dense_lost(run, nodes):  # no trainer holds the dense part: the last checkpoint
            self.fallback = True
            run.rollback()
            self.on_rollback(run)
            return {n for n, t in run.up_at.items() if t > now and n != run.job_node}
        emb = [n for n in nodes if n >= run.n_trainers]
        trainers = set()
        for n in nodes:
            if n >= run.n_trainers:
                continue
            if (
                self.trainer_degraded
            ):  # the others train on; it copies the dense part once it is back
                self._degrade(run, n)
            else:
                trainers.add(n)
        for n in emb:
            self.rebuild_end[n] = run.up_at.get(n, now) + self.rebuild_s
            run.log("rebuild_start", n, self.rebuild_end[n])
        busy = {n for n, t in self.rebuild_end.items() if t > now}
        lost_stripes = {
            self.stripe(run, n)
            for n in emb
            if sum(1 for b in busy if self.stripe(run, b) == self.stripe(run, n)) > self.params.m
        }
        if not lost_stripes:
            return trainers
        victims = {b for b in busy if self.stripe(run, b) in lost_stripes}
        for b in victims:
            self.rebuild_end.pop(b, None)
        run.log("stripe_loss", -1, float(len(lost_stripes)))
        if self.params.stripe_loss == "partial":
            for b in victims:
                run.lose_shard(b - run.n_trainers)
            return trainers | victims
        self.fallback = True
        run.rollback()
        self.rebuild_end.clear()  # every server reloads the checkpoint: no rebuild from parity goes on
        self.degraded.clear()  # every trainer too (the job waits for those still down)
        return (
            trainers | victims | {n for n, t in run.up_at.items() if t > now and n != run.job_node}
        )

    def load_s(self, run: RunView, nodes: set[int]) -> float:
        """After a rollback, the full load; else the shards of a lost stripe restored partially, and
        at least a waited-for trainer's dense copy (s)."""
        if self.fallback:
            self.fallback = False
            return self.costs.load_s
        k = sum(1 for n in nodes if n >= run.n_trainers)
        t = self.costs.shard_load_s(k) if k else 0.0
        if any(n < run.n_trainers and n not in self.degraded for n in nodes):
            t = max(t, self.costs.dense_copy_s)
        return t

    def on_node_back(self, run: RunView, n: int, up: float) -> bool:
        """A server being rebuilt starts its rebuild from parity at ``up`` (``rebuild_s`` long);
        degraded trainers as under partial recovery."""
        if n in self.rebuild_end:  # the rebuild from parity starts once the server is back
            self.rebuild_end[n] = up + self.rebuild_s
        return super().on_node_back(run, n, up)

    def on_rollback(self, run: RunView) -> None:
        """Every node reloads the checkpoint: no rebuild goes on and no trainer is degraded."""
        self.rebuild_end.clear()  # every node reloads the checkpoint: no rebuild from parity goes on
        self.degraded.clear()  # nor is any trainer degraded (a job-level rollback keeps those still down)

    def on_job_failure(self, run: RunView) -> None:
        """Roll back; trainers still down stay degraded (they copy the dense part once back)."""
        degraded = dict(self.degraded)
        super().on_job_failure(run)
        self.degraded = degraded
        self._keep_degraded_down(run)

    def _rebuilding(self, now: float) -> bool:
        return any(t > now for t in self.rebuild_end.values())

    def rate_varies(self) -> bool:
        """Always: the parity-slowed rate is not :attr:`rate`'s base (and rebuilds change it)."""
        return True

    def rate_at(self, run: RunView, now: float) -> float:
        """The parity-slowed rate, times ``rebuild_throughput`` while a server is rebuilt and the
        share of trainers at work."""
        r = self.rate * (self.params.rebuild_throughput if self._rebuilding(now) else 1.0)
        return r * self._trainer_share(run, now)

    def next_rate_change(self, run: RunView, now: float) -> float:
        """The end of the next rebuild or of the first degraded trainer's window (wall s; ``inf``:
        none)."""
        ends = [t for t in self.rebuild_end.values() if t > now]
        return min(min(ends) if ends else float("inf"), self._next_trainer_back(now))

    @property
    def memory_overhead(self) -> float:
        """The parity's extra memory, a fraction of the embedding tables': ``m/k``."""
        return self.params.m / self.params.k


class CheckNRunParams(BaseModel):
    """Check-N-Run's parameters: the quantization ``bits``, the baseline period ``full_every``, the
    increment ``policy`` and its re-baselining rule, and the dequantization bandwidth (GB/s per
    server)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
    bits: int = Field(32, description="quantization of saved rows: 32 (none), 16, 8 or 4 bits")
    full_every: int = Field(
        8, ge=1, le=10_000, description="a full baseline at least every K-th checkpoint"
    )
    policy: Literal["intermittent", "one-shot", "consecutive"] = Field(
        "intermittent",
        description="one-shot: each increment holds every row modified since the baseline "
        "(restore = baseline + latest increment); consecutive: rows modified since the previous checkpoint "
        "(restore = baseline + every increment); intermittent: one-shot, re-baselined by a rule",
    )
    rebaseline_at: float | None = Field(
        None,
        gt=0,
        le=1,
        description="intermittent: a new baseline when the increment would exceed this share "
        "of the rows; unset: when a baseline is expected to cost less (save + failure rate x interval x restore)",
    )
    dequant_gbps: float = Field(
        2.0,
        gt=0,
        description="dequantization per embedding server, GB/s of restored "
        "rows (assumed; quantized restores only)",
    )

    @model_validator(mode="after")
    def _bits(self) -> CheckNRunParams:
        if self.bits not in QUANT_BITS:
            raise ValueError(
                f"bits must be one of {', '.join(map(str, QUANT_BITS))}, got {self.bits}"
            )
        return self


class CheckNRunPlanning(RollbackOverhead, EverySaveFull, RollbackPlanning):
    """Check-N-Run's planning: it loses no update; every checkpoint (a baseline plus increments)
    restores consistently, so every save counts as a full one; first order, at full saves' cost."""

    strategy: type[CheckNRun]
    rank = 2

    def variants(self, s) -> list[dict]:
        """Unquantized and 8-bit increments, a baseline at least every 8 checkpoints."""
        return [{"bits": 32, "full_every": 8}, {"bits": 8, "full_every": 8}]

    def note(self, s, costs) -> str:
        """How much less it writes and stores than full checkpoints at the scenario's interval."""
        f = self.strategy.describe(s, costs)
        return (
            f"writes {f['write_ratio']:.3g}x less and stores {f['capacity_ratio']:.3g}x less than full "
            "checkpoints at this interval; quantization's accuracy cost is not modelled"
        )


@register
class CheckNRun(Strategy):
    """Check-N-Run (Eisenman et al., NSDI 2022): differential + quantized checkpoints, full recovery.

    Increment ``j`` after a baseline holds the rows modified since the baseline (one-shot,
    intermittent: ``touched(j tau R)`` of the rows) or since the previous checkpoint (consecutive:
    ``touched(tau R)``), quantized to ``bits``; the dense part is written whole (unquantized) by
    every checkpoint. A save of embedding share ``x`` costs ``latency + (delta - latency) x
    (q x E + D) / (E + D)``; a restore reads the baseline and the latest increment (one-shot,
    intermittent) or every increment (consecutive), plus the dense part once, at the full load's
    bandwidth, and dequantizes the rows read (``dequant_gbps`` per server). The intermittent rule
    writes a baseline when ``save_full - save_increment <= lam x tau x (restore_increment -
    restore_full)``: the save it spares does not pay for the longer restore it risks before the
    next checkpoint (``lam`` the rate of failure events, all of which roll back), or, with
    ``rebaseline_at``, when the increment would exceed that share of the rows.
    """

    name = "checknrun"
    colour = "#17becf"
    summary = (
        "Check-N-Run: differential (dirty rows only) and quantized checkpoints; one-shot, consecutive "
        "or intermittent re-baselining; full recovery"
    )
    Params = CheckNRunParams
    needs_throughput = True
    plan_label = "Check-N-Run"
    Planning = CheckNRunPlanning

    def __init__(self, params: CheckNRunParams, setup: RunSetup) -> None:
        super().__init__(params, setup)
        self._setup(setup.scenario, setup.tau, params, setup.shared)
        self.since = 0  # increments since the baseline, as of the last committed checkpoint
        self.has_baseline = False
        self.next_baseline = True

    def make_ledger(self, setup: RunSetup) -> None:
        """No ledger: full recovery loses no update."""
        return None  # full recovery: no update is lost

    def _setup(self, s, tau: float, params: CheckNRunParams, shared: dict | None = None) -> None:
        """The byte model; ``shared`` (``setup.shared``) keeps what it computes for every replication
        of the scenario: the dirty shares and the re-baselining decisions depend on it alone."""
        shared = {} if shared is None else shared
        self.model = access.of(s)
        self.samples_per_interval = tau * s.job.throughput
        self.tau = tau
        self.q = params.bits / 32.0
        self.K = params.full_every
        self.policy = params.policy
        self.rebaseline_at = params.rebaseline_at
        c = self.costs
        self.E, self.D = c.embedding_bytes, c.dense_bytes
        self.s_per_byte = (c.load_s - c.latency_s) / c.bytes_total if c.bytes_total else 0.0
        self.dequant_bps = params.dequant_gbps * 1e9 * s.cluster.embedding_servers
        self._dirty: dict[int, float] = shared.setdefault("checknrun.dirty", {})
        self._baseline: dict[int, bool] = shared.setdefault("checknrun.baseline", {})
        if "checknrun.lam" not in shared:
            lam = 0.0
            if (
                self.policy == "intermittent"
                and self.rebaseline_at is None
                and not s.failures.replay
            ):
                from cprsim.failures.rates import failure_rates

                lam = failure_rates(s).total
            shared["checknrun.lam"] = lam
        self.lam = shared["checknrun.lam"]

    # -- the byte model ------------------------------------------------------------------------------
    def dirty(self, j: int) -> float:
        """Share of the rows modified during j intervals of progress."""
        if j not in self._dirty:
            self._dirty[j] = float(self.model.touched(j * self.samples_per_interval))
        return self._dirty[j]

    def increment_share(self, j: int) -> float:
        """Embedding share (of the rows) written by increment j >= 1 after the baseline."""
        return self.dirty(1) if self.policy == "consecutive" else self.dirty(j)

    def restore_share(self, j: int) -> float:
        """Embedding share read to restore the checkpoint that is increment j (0: the baseline)."""
        if j == 0:
            return 1.0
        return 1.0 + (j * self.dirty(1) if self.policy == "consecutive" else self.dirty(j))

    def save_time(self, share: float) -> float:
        """Seconds to save ``share`` of the embedding rows (quantized to ``bits``) with the dense
        part whole."""
        return self.costs.save_fraction_s(self.q * share)

    def load_time(self, share: float) -> float:
        """Seconds to read ``share`` of the embedding rows (quantized; above 1 for a baseline and
        its increments) and the dense part once, at the full load's bandwidth, plus the
        dequantization of the rows read."""
        c = self.costs
        t = c.latency_s + self.s_per_byte * (self.q * share * self.E + self.D)
        if self.q < 1.0:
            t += share * self.E / self.dequant_bps
        return t

    def baseline_next(self, since: int) -> bool:
        """Is the checkpoint after ``since`` increments a new baseline?"""
        got = self._baseline.get(since)
        if got is None:
            got = self._baseline[since] = self._baseline_rule(since)
        return got

    def _baseline_rule(self, since: int) -> bool:
        j = since + 1
        if j >= self.K:
            return True
        if self.policy != "intermittent":
            return False
        if self.rebaseline_at is not None:
            return self.increment_share(j) > self.rebaseline_at
        spared = self.save_time(1.0) - self.save_time(self.increment_share(j))
        risk = self.lam * self.tau * (self.load_time(self.restore_share(j)) - self.load_time(1.0))
        return spared <= risk

    # -- the strategy ------------------------------------------------------------------------------
    def save_s(self, run: RunView) -> float:
        """A baseline when one is due, else the next increment (s)."""
        self.next_baseline = not self.has_baseline or self.baseline_next(self.since)
        return (
            self.save_time(1.0)
            if self.next_baseline
            else self.save_time(self.increment_share(self.since + 1))
        )

    def on_commit(self, run: RunView, progress: float) -> None:
        """Count the increment (or start a new baseline cycle), then commit in full: every
        Check-N-Run checkpoint is a consistent one."""
        self.since = 0 if self.next_baseline else self.since + 1
        self.has_baseline = True
        super().on_commit(run, progress)

    def on_failure(self, run: RunView, nodes: list[int]) -> set[int] | None:
        """Roll back to the last checkpoint, as full recovery does; the job waits for every failed
        node."""
        run.rollback()
        return None

    def load_s(self, run: RunView, nodes: set[int]) -> float:
        """Seconds to read the baseline and the increments the last checkpoint needs
        (:meth:`restore_share`)."""
        return self.load_time(self.restore_share(self.since))

    def full_load_s(self, run: RunView) -> float:
        """As :meth:`load_s`: every restore reads the last checkpoint in full."""
        return self.load_s(run, set())

    # -- what it saves against full checkpoints --------------------------------------------------------
    def cycle(self) -> list[float]:
        """Embedding shares written by the checkpoints of one baseline cycle (failure-free)."""
        shares, since = [1.0], 0
        while len(shares) < self.K and not self.baseline_next(since):
            since += 1
            shares.append(self.increment_share(since))
        return shares

    def footprint(self) -> dict[str, float]:
        """Write bandwidth and storage capacity against full checkpoints at the same interval.

        Written: mean bytes per checkpoint over a baseline cycle. Stored: the most bytes kept to be
        able to restore the latest checkpoint (one-shot/intermittent: the baseline and the latest
        increment; consecutive: the baseline and every increment), against one full checkpoint.
        """
        shares = self.cycle()
        full = self.E + self.D
        written = [self.q * x * self.E + self.D for x in shares]
        stored = max(
            self.q * self.restore_share(j) * self.E + self.D * (2 if j else 1)
            for j in range(len(shares))
        )
        return {
            "cycle_checkpoints": float(len(shares)),
            "write_ratio": full / (sum(written) / len(written)),
            "capacity_ratio": full / stored,
            "dirty_per_interval": self.dirty(1),
        }

    @classmethod
    def describe(cls, s, costs) -> dict[str, float]:
        """The footprint of a scenario's Check-N-Run, without a simulation."""
        self = cls.__new__(cls)
        self.params = cls.Params.model_validate(s.strategy.params)
        self.costs = costs
        self._setup(s, s.interval_s, self.params)
        return self.footprint()

    def bytes_per_save(self) -> float:
        """Mean embedding bytes written per checkpoint over a baseline cycle (failure-free)."""
        shares = self.cycle()
        return self.q * sum(shares) / len(shares) * self.E


class LookaheadParams(MFUParams):
    """Lookahead's parameters: MFU's without counters (``counter_overhead`` 0), and the trainer-side
    cache: ``cache_fraction`` of the rows, written back every ``writeback_s`` s of progress."""

    counter_overhead: float | None = Field(
        0.0,
        ge=0,
        lt=1,
        description="no counters on the servers: the data "
        "loader reads the next window ahead (off the critical path)",
    )
    cache_fraction: float = Field(
        0.0, ge=0, le=1, description="trainer-side cache: share of rows cached"
    )
    writeback_s: float = Field(
        60.0, gt=0, description="trainer cache write-back period (s of progress)"
    )


class LookaheadPlanning(MFUPlanning):
    """Lookahead's planning: MFU's, with its own model of what a save protects (the strategy's)."""

    rank = 5

    def note(self, s, costs) -> str:
        """MFU's note, after the protection that ranking by the next window gives up."""
        return (
            "ranked by the next window's accesses (no counters): protects less of the past interval than "
            "MFU would; " + super().note(s, costs)
        )


@register
class Lookahead(MFU):
    """BagPipe's lookahead applied to CPR's partial saves.

    The data loader knows the next window's batches, so a partial save can write the top-``r`` rows
    by the *next* window's accesses without counters on the servers. But a save protects past
    updates, and the next window's counts predict the past window's only as far as both follow the
    same popularity: the protected share is the *out-of-sample* share of a ranking by ``tau x R``
    samples, at most ``coverage(r)`` and below MFU's in-sample share. Lookahead is therefore not an
    upper bound on MFU (MFU's exact counts are the best ranking for what one save protects); it is
    a counter-free alternative that protects less. What BagPipe's lookahead really buys is a cache
    that knows what will be needed: the trainer-side cache (``cache_fraction``, written back every
    ``writeback_s``) whose dirty rows a trainer failure loses.
    """

    name = "lookahead"
    colour = "#8c564b"
    summary = (
        "BagPipe-style: partial saves of the rows the next window will use most (no counters; protects less "
        "than MFU); trainer caches"
    )
    Params = LookaheadParams
    params: LookaheadParams  #: an instance of Params (the engine validates the scenario's with it)
    needs_throughput = True
    emulation = LookaheadTopRows()  #: partial saves of the rows the next interval uses most
    plan_label = "Lookahead"
    Planning = LookaheadPlanning

    @classmethod
    def protected_share(cls, s, params, tau: float) -> float:
        """Access share of an interval's updates that its partial save writes: out of sample (rows
        ranked by the next window's accesses)."""
        return access.of(s).ranked_share(params.top_fraction, tau * s.job.throughput).out_of_sample

    @classmethod
    def selected_from(cls, s, params, tau: float) -> float:
        """The selection ranks the rows the next window touches."""
        model = access.of(s)
        return (
            float(model.touched(tau * s.job.throughput)) * model.rows / s.cluster.embedding_servers
        )

    def __init__(self, params: LookaheadParams, setup: RunSetup) -> None:
        super().__init__(params, setup)
        self.cache_cov = (
            access.of(setup.scenario).coverage(params.cache_fraction)
            if params.cache_fraction > 0
            else 0.0
        )

    def on_failure(self, run: RunView, nodes: list[int]) -> set[int] | None:
        """Partial recovery as MFU's; each failed trainer also loses its cache's dirty rows since
        the last write-back, booked as PLS:
        ``(progress mod writeback_s) x coverage(cache_fraction) / N_t``."""
        stall = super().on_failure(
            run, nodes
        )  # the nodes partial recovery waits for (not degraded trainers)
        if self.cache_cov > 0:
            assert run.ledger is not None, "make_ledger (MFU's) gave lookahead a ledger"
            wb = self.params.writeback_s
            for n in nodes:
                if n < run.n_trainers:
                    age = run.progress % wb
                    lost = age * self.cache_cov / run.n_trainers
                    run.ledger.book(run.progress - age, run.progress, lost)
                    run.log("pls", n, lost / run.W)
        return stall
