"""Recovery strategies: small objects behind one interface, found in a registry by name.

A strategy decides four things and nothing else; the engine (``engine.py``) owns time:

* ``save_s(run)``: how long the next checkpoint blocks (it may vary, e.g. MFU's partial saves);
* ``on_commit(run, progress)``: a checkpoint taken at ``progress`` became durable;
* ``on_failure(run, nodes)``: nodes failed: roll progress back and/or count lost updates (PLS);
  it returns the nodes the job must wait for (``None``: all of them; an empty set: training
  goes on, e.g. while ECRM rebuilds a server from parity);
* ``load_s(run, nodes)``: how long the restore takes once every failed node is rescheduled.

``rate`` (progress per second of wall time while computing, 1 unless the strategy slows
training down) is an attribute; ``rate_at``/``next_rate_change`` let it vary over time. Register a new strategy with ``@register``; its ``Params`` is a
pydantic model of its scenario parameters (``[strategy]`` table), validated strictly.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

if TYPE_CHECKING:  # pragma: no cover
    from cprsim.sim.engine import Run


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Strategy:
    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    Params: ClassVar[type[BaseModel]] = NoParams
    needs_throughput: ClassVar[bool] = False  #: counts samples: the job must give samples_per_s
    rate: float = 1.0

    # -- planning hooks (read by cprsim.plan: a new strategy is planned without editing it) -------
    plan_label: ClassVar[str] = ""  #: its name in plans (default: the registry name)
    #: "rollback": loses no update, its interval minimises overhead; "pls": loses updates, its
    #: interval is the largest that keeps PLS within the bound
    plan_kind: ClassVar[Literal["rollback", "pls"]] = "rollback"
    plan_rank: ClassVar[int] = 50  #: simplicity: options tied within their CIs go to the lowest
    plan_oracle: ClassVar[bool] = False  #: knows the future: labelled, never recommended
    plan_interval_range: ClassVar[tuple[float, float]] = (0.5, 3.0)  #: "rollback": grid x Daly's

    @classmethod
    def plan_variants(cls, s) -> list[dict[str, Any]]:  # noqa: ANN001
        """The parameter sets the planner tries (each validated against the scenario)."""
        return [{}]

    @classmethod
    def plan_with_full_interval(cls, params: dict[str, Any], tau: float, full_interval: float) -> dict[str, Any]:
        """The parameters that keep a full (consistent) checkpoint at least every ``full_interval``
        when saving every ``tau`` (every save of a plain strategy is a full one)."""
        return dict(params)

    @classmethod
    def plan_full_interval(cls, params: dict[str, Any], tau: float) -> float:
        """Progress between two full checkpoints at interval ``tau``."""
        return tau

    @classmethod
    def plan_expected_pls(cls, s, params: dict[str, Any], tau: float, rates) -> float:  # noqa: ANN001
        """First-order E[PLS] (0 for strategies that lose no update)."""
        return 0.0

    @classmethod
    def plan_expected_overhead(cls, s, params: dict[str, Any], tau: float, rates, costs) -> float:  # noqa: ANN001
        """First-order E[wall]/W - 1 (rates: cprsim.plan.rates.Rates; every failure rolls back)."""
        from cprsim import analytic

        return analytic.full_overhead(s.duration_s, tau, costs.save_s, rates.total,
                                      s.reschedule.dist.mean() + costs.load_s)

    def __init__(self, params: BaseModel, run: "Run") -> None:
        self.params = params
        self.costs = run.costs

    @classmethod
    def check(cls, params: BaseModel, scenario) -> None:  # noqa: ANN001
        """Checks that need the whole scenario; raise ValueError with a one-line message."""
        if cls.needs_throughput and scenario.job.samples_per_s is None:
            raise ValueError(f"strategy {cls.name!r} counts samples: give job.samples_per_s")

    # defaults: full-recovery semantics
    def save_s(self, run: "Run") -> float:
        return self.costs.save_s

    def on_commit(self, run: "Run", progress: float) -> None:
        run.ckpt_progress = progress
        run.ledger.saved(progress)

    def on_failure(self, run: "Run", nodes: list[int]) -> set[int] | None:
        run.rollback()
        return None

    def rate_at(self, run: "Run", now: float) -> float:
        return self.rate

    def next_rate_change(self, run: "Run", now: float) -> float:
        return float("inf")

    def load_s(self, run: "Run", nodes: set[int]) -> float:
        return self.costs.load_s

    # job-level interruptions: every strategy rolls back to its last full (consistent) checkpoint
    def on_job_failure(self, run: "Run") -> None:
        run.rollback()
        self.on_rollback(run)

    def on_rollback(self, run: "Run") -> None:
        """Progress went back to the last full checkpoint (a strategy resets its own counters)."""

    def full_load_s(self, run: "Run") -> float:
        """Every node reloads the last full checkpoint (after a job-level interruption)."""
        return self.costs.load_s


REGISTRY: dict[str, type[Strategy]] = {}


def register(cls: type[Strategy]) -> type[Strategy]:
    REGISTRY[cls.name] = cls
    return cls


def get(name: str) -> type[Strategy]:
    ensure_loaded()
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r} (known: {', '.join(sorted(REGISTRY))})") from None


def validate_params(name: str, params: dict[str, Any]) -> BaseModel:
    cls = get(name)
    try:
        return cls.Params.model_validate(params)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
        raise ValueError(f"{loc + ': ' if loc else ''}{msg} (strategy {name!r})") from None


@register
class Full(Strategy):
    name = "full"
    summary = "any failure: reschedule, every node reloads the last checkpoint, re-execute since it"
    plan_label = "full"
    plan_rank = 0


@register
class Partial(Strategy):
    name = "partial"
    summary = (
        "CPR partial recovery: only failed nodes are restored (an embedding server from its shard's "
        "checkpoint, a trainer from a peer); nothing is re-executed; lost updates count as PLS"
    )
    plan_label = "CPR-vanilla"
    plan_kind = "pls"
    plan_rank = 1

    @classmethod
    def plan_expected_pls(cls, s, params, tau, rates) -> float:  # noqa: ANN001
        from cprsim import analytic
        from cprsim.costs import costs_of

        c = costs_of(s)
        k = max(1, round(rates.k))
        stall = analytic.recovery_time(s.reschedule.dist.mean() + c.shard_load_s(k), rates.nodes)
        return analytic.expected_pls(s.duration_s, tau, c.save_s, rates.embedding, rates.k,
                                     s.cluster.embedding_servers, stall_s=stall, lam_stall=rates.nodes)

    @classmethod
    def plan_expected_overhead(cls, s, params, tau, rates, costs) -> float:  # noqa: ANN001
        return partial_node_overhead(s, tau, costs.save_s, rates, costs) + \
            job_level_overhead(s, cls.plan_full_interval(params, tau), rates, costs)

    full_restore = False  #: the next restore is a full load (no trainer survived to copy from)

    def on_failure(self, run: "Run", nodes: list[int]) -> set[int] | None:
        if run.dense_lost(nodes):  # no surviving replica of the dense part: back to the last full checkpoint
            return self.restore_all(run)
        for n in nodes:
            if n >= run.n_trainers:
                run.lose_shard(n - run.n_trainers)
        return None

    def restore_all(self, run: "Run") -> set[int]:
        """Roll back to the last full checkpoint; the job waits for every node still down."""
        run.rollback()
        self.on_rollback(run)
        self.full_restore = True
        now = run.env.now
        return {n for n, t in run.up_at.items() if t > now and n != run.job_node}

    def load_s(self, run: "Run", nodes: set[int]) -> float:
        if self.full_restore:
            self.full_restore = False
            return self.full_load_s(run)
        k = sum(1 for n in nodes if n >= run.n_trainers)
        t = self.costs.shard_load_s(k) if k else 0.0
        if len(nodes) > k:
            t = max(t, self.costs.dense_copy_s)
        return t


def partial_node_overhead(s, tau: float, delta: float, rates, costs) -> float:  # noqa: ANN001
    """Exact-Poisson form of partial recovery's node failures: an embedding failure costs
    rescheduling + a shard load, a trainer failure rescheduling + a dense copy from a peer."""
    from cprsim import analytic

    W = s.duration_s
    wait = s.reschedule.dist.mean()
    lam_tr = max(0.0, rates.nodes - rates.embedding)
    wall = analytic.partial_wall_split(W, tau, delta, rates.embedding, wait + costs.shard_load_s(max(1, round(rates.k))),
                                       lam_tr, wait + costs.dense_copy_s, wait_s=wait)
    return wall / W - 1.0


def job_level_overhead(s, full_interval: float, rates, costs) -> float:  # noqa: ANN001
    """First order: each job-level interruption re-executes half a full interval, restarts, reloads."""
    if rates.job <= 0:
        return 0.0
    restart = s.failures.job.restart_s if s.failures.job.restart_s is not None else s.reschedule.dist.mean()
    return rates.job * (min(full_interval, s.duration_s) / 2.0 + restart + costs.load_s)


def names() -> list[str]:
    ensure_loaded()
    return sorted(REGISTRY)


def _load_plugins() -> None:
    """Import the modules that register further strategies (fixed list: no dynamic user imports)."""
    import importlib

    for mod in ("cprsim.sim.prioritized", "cprsim.sim.beyond"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as e:  # a module not written yet
            if e.name != mod:
                raise


_load_plugins_done = False


def ensure_loaded() -> None:
    global _load_plugins_done
    if not _load_plugins_done:
        _load_plugins()
        _load_plugins_done = True
