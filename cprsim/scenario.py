"""One typed, validated description of a cluster, a job, its costs and a strategy.

Loaded from TOML (a file, or a built-in name), with ``key=value`` overrides (the command line's
``--set``). Unknown keys and impossible values are errors that name the key (``ScenarioError``,
one line; :class:`OverrideError` when an override is at fault). Every default
lives in the models below and nowhere else.

Units: hours for failure-time parameters and the job duration (``*_h``), seconds for costs
(``*_s``), gigabytes (1e9 bytes) and GB/s for sizes and bandwidths (``*_gb``, ``*_gbps``).
Inside the simulator everything is seconds and bytes.
"""

from __future__ import annotations

import copy
import math
import os
import sys
import tomllib
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cprsim import names
from cprsim.errors import InputError, ParameterError, validation_line, validation_parts
from cprsim.failures.distributions import FAMILIES, SHAPED, Distribution
from cprsim.io import parse_toml, read_input_text, read_toml, short

HOUR = 3600.0
GB = 1e9


class ScenarioError(InputError):
    """A bad scenario: the message is one line that names the file and key."""


class OverrideError(ScenarioError, ParameterError):
    """An override the scenario refuses (a dotted key set on it): a ScenarioError that names the
    caller's parameter the overrides come from (``param``: ``overrides``, ``updates``, ...) and the
    key (``key``)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class _DistSpec(_Model):
    """A distribution: ``family`` plus either its mean or its scale, and a shape if it has one."""

    family: Literal["exponential", "weibull", "gamma", "lognormal", "loglogistic", "constant"]
    shape: float | None = Field(None, gt=0, description="Weibull/gamma/log-logistic shape")
    sigma: float | None = Field(None, gt=0, description="lognormal sigma (of ln t)")

    def _build(
        self, mean: float | None, scale: float | None, unit_s: float, where: str
    ) -> Distribution:
        f = self.family
        k = self.sigma if f == "lognormal" else self.shape
        if f in SHAPED and k is None:
            raise ValueError(f"{f} needs `{SHAPED[f]}`")
        if f not in SHAPED and (self.shape is not None or self.sigma is not None):
            raise ValueError(f"{f} takes no shape/sigma")
        if f != "lognormal" and self.sigma is not None:
            raise ValueError(f"`sigma` is for lognormal; {f} takes `shape`")
        if (mean is None) == (scale is None):
            raise ValueError(f"give exactly one of the mean or the scale ({where})")
        kk = k if k is not None else 1.0
        if mean is not None:
            return Distribution.from_mean(f, mean * unit_s, kk)
        return Distribution(f, scale * unit_s, kk)  # type: ignore[operator]


class FailureDist(_DistSpec):
    """Time between failures of one node (or one failure domain); parameters in hours."""

    mtbf_h: float | None = Field(None, gt=0, description="mean time between failures, hours")
    scale_h: float | None = Field(None, gt=0, description="scale parameter, hours")

    @model_validator(mode="after")
    def _check(self) -> FailureDist:
        self.dist  # noqa: B018 - validates
        return self

    @property
    def dist(self) -> Distribution:
        """The time between failures as a :class:`~cprsim.failures.distributions.Distribution` in
        seconds."""
        return self._build(self.mtbf_h, self.scale_h, HOUR, "mtbf_h or scale_h")


class RescheduleDist(_DistSpec):
    """Time to reschedule a failed node's work onto a replacement; parameters in seconds."""

    family: Literal["exponential", "weibull", "gamma", "lognormal", "loglogistic", "constant"] = (
        "constant"
    )
    mean_s: float | None = Field(None, gt=0, description="mean rescheduling time, seconds")
    scale_s: float | None = Field(None, gt=0, description="scale parameter, seconds")

    @model_validator(mode="after")
    def _check(self) -> RescheduleDist:
        self.dist  # noqa: B018
        return self

    @property
    def dist(self) -> Distribution:
        """The rescheduling time as a :class:`~cprsim.failures.distributions.Distribution` in
        seconds."""
        return self._build(self.mean_s, self.scale_s, 1.0, "mean_s or scale_s")


class Cluster(_Model):
    """The cluster and the model it trains: trainers, embedding servers, the parameters' sizes (GB)
    and how the dense part is held."""

    trainers: int = Field(
        20,
        ge=1,
        le=1_000_000,
        description="trainer nodes (dense MLP, replicated; or the shards of a sharded dense model)",
    )
    embedding_servers: int = Field(
        18,
        ge=0,
        le=1_000_000,
        description="embedding parameter servers (0: a dense "
        "model without embedding tables; then embedding_gb = 0)",
    )
    embedding_gb: float = Field(
        1000.0, ge=0, description="embedding tables, all shards, parameters only (GB)"
    )
    dense_gb: float = Field(1.0, ge=0, description="dense (MLP) parameters (GB)")
    optimizer_multiplier: float = Field(
        2.0, ge=1, description="saved bytes / parameter bytes (optimizer state)"
    )
    dense: Literal["replicated", "sharded"] = Field(
        "replicated",
        description="replicated: every trainer holds the dense parameters (DLRM's data-parallel "
        "MLP: a failed trainer copies them from a peer); sharded: the dense model is split across the trainers "
        "with no replica (FSDP / tensor / pipeline parallel LLM or MoE training): a failed trainer's shard "
        'comes from a checkpoint (or a peer\'s in-memory snapshot, checkpoint.mode = "tiered")',
    )

    @model_validator(mode="after")
    def _embedding(self) -> Cluster:
        if (self.embedding_servers == 0) != (self.embedding_gb == 0):
            raise ValueError(
                "embedding_servers = 0 goes with embedding_gb = 0 (a model without embedding tables), "
                f"got {self.embedding_servers} servers and {self.embedding_gb} GB"
            )
        if self.embedding_gb == 0 and self.dense_gb == 0:
            raise ValueError("the model has no parameters: give dense_gb or embedding_gb")
        return self


class Job(_Model):
    """The training job: its failure-free duration ``W`` (hours), or its samples and throughput
    (samples/s)."""

    duration_h: float | None = Field(None, gt=0, description="failure-free training time W (hours)")
    samples: float | None = Field(None, gt=0, description="training samples S (with samples_per_s)")
    samples_per_s: float | None = Field(
        None, gt=0, description="failure-free throughput R (samples/s)"
    )

    @model_validator(mode="after")
    def _one_form(self) -> Job:
        if self.duration_h is None and (self.samples is None or self.samples_per_s is None):
            raise ValueError("give duration_h, or samples and samples_per_s")
        if (
            self.duration_h is not None
            and self.samples is not None
            and self.samples_per_s is not None
        ):
            if not math.isclose(
                self.duration_h * HOUR, self.samples / self.samples_per_s, rel_tol=1e-9
            ):
                raise ValueError("duration_h disagrees with samples / samples_per_s")
        return self

    @property
    def duration_s(self) -> float:
        """The failure-free training time ``W`` (s): from ``duration_h``, else
        ``samples / samples_per_s``."""
        if self.duration_h is not None:
            return self.duration_h * HOUR
        return self.samples / self.samples_per_s  # type: ignore[operator]

    @property
    def throughput(self) -> float:
        """Samples per second (needed by the access-aware strategies)."""
        if self.samples_per_s is None:
            raise ValueError("job.samples_per_s is needed (MFU/SSU/differential count samples)")
        return self.samples_per_s


class Access(_Model):
    """Embedding-access skew: Zipf per table (see cprsim/access.py), and the row count.

    The rows follow from the bytes: ``rows = cluster.embedding_gb / (dim x bytes_per_param)``
    (``embedding_gb`` counts parameters only; the optimizer state multiplies the saved bytes, not
    the rows), spread over tables in the proportions of ``tables`` ("criteo-kaggle": Criteo
    Kaggle's 26 cardinalities, scaled up or down). A tables file gives its rows as they are (each
    divided by ``table_scale``) and then ``dim`` is what the bytes imply; ``rows`` fixes the total
    instead of ``dim`` (the shape of ``tables`` kept).
    """

    tables: str = Field(
        "criteo-kaggle",
        description="'criteo-kaggle' (the shape of its 26 tables) or a CSV file "
        "with a `rows` column",
    )
    dim: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="embedding dimension: parameters per row "
        "(default 64 when the rows come from the bytes)",
    )
    bytes_per_param: float = Field(
        4.0, gt=0, le=64, description="bytes per parameter (4 = fp32, 2 = fp16)"
    )
    rows: int | None = Field(
        None,
        ge=1,
        le=10**15,
        description="total embedding rows (instead of deriving them from the bytes and dim)",
    )
    table_scale: float = Field(
        1.0, ge=1, description="divide a tables file's cardinalities by this"
    )
    top_fraction: float = Field(
        0.01, gt=0, lt=1, description="skew statement: this top fraction of rows ..."
    )
    top_share: float = Field(
        0.92, gt=0, lt=1, description="... takes this share of accesses (BagPipe: 1% -> 92%)"
    )
    alpha: float | None = Field(
        None, ge=0, le=5, description="Zipf exponent; overrides the skew statement"
    )

    @model_validator(mode="after")
    def _one_row_count(self) -> Access:
        given_file = self.tables != "criteo-kaggle"
        if self.rows is not None and self.dim is not None:
            raise ValueError(
                "give rows or dim, not both (the other follows from cluster.embedding_gb)"
            )
        if self.table_scale != 1.0 and not given_file:
            raise ValueError(
                "table_scale divides a tables file's rows; with 'criteo-kaggle' the rows come "
                "from the bytes: set access.dim or access.rows instead"
            )
        if given_file and self.dim is not None:
            raise ValueError(
                "a tables file gives the rows, and dim follows from the bytes: drop dim"
            )
        return self


class CostOverrides(_Model):
    """Measured costs that replace the ones derived from sizes and bandwidths (seconds)."""

    save_s: float | None = Field(None, gt=0, description="blocking full checkpoint")
    load_s: float | None = Field(None, gt=0, description="every node reloads the last checkpoint")
    shard_load_s: float | None = Field(None, gt=0, description="one embedding shard restored")
    snapshot_s: float | None = Field(None, ge=0, description="two-phase snapshot stall")


class Storage(_Model):
    """Checkpoint storage and the network: aggregate write and read bandwidths (GB/s), a fixed
    latency per save or load (s) and one node's bandwidth (GB/s)."""

    write_gbps: float = Field(10.0, gt=0, description="aggregate checkpoint write bandwidth (GB/s)")
    read_gbps: float = Field(20.0, gt=0, description="aggregate checkpoint read bandwidth (GB/s)")
    latency_s: float = Field(5.0, ge=0, description="fixed cost per checkpoint save or load (s)")
    node_gbps: float = Field(
        3.125, gt=0, description="one node's network bandwidth (GB/s; 25 Gbit/s)"
    )


class Tiers(_Model):
    """Tiered checkpoints (``checkpoint.mode = "tiered"``, Gemini-style): every ``interval_h`` each node
    snapshots its state into its own memory (a stall at ``snapshot_gbps``), sends copies to ``replicas``
    peers' memory in the background (``storage.node_gbps``), and every ``persist_every``-th snapshot
    is also written to remote storage in the background (``storage.write_gbps``, shared by every
    writer). A restore reads from the fastest tier that survived the failure."""

    replicas: int = Field(1, ge=0, le=8, description="peers holding a copy of each node's snapshot")
    peer_stride: int = Field(
        1,
        ge=1,
        description="node i's peers are i+stride, i+2*stride, ... among its "
        "type (a stride of the domain size puts them in other domains)",
    )
    persist_every: int = Field(
        4, ge=1, le=1_000_000, description="persist every k-th snapshot to storage"
    )
    memory_latency_s: float = Field(
        0.05, ge=0, description="fixed cost of a snapshot or a memory restore (s)"
    )


class Checkpoint(_Model):
    """When and how checkpoints are taken: the interval (hours of progress), the mode (blocking,
    two-phase or tiered) and its parameters."""

    interval_h: float = Field(
        1.0, gt=0, description="checkpoint (tiered: snapshot) every interval_h hours of progress"
    )
    mode: Literal["blocking", "two-phase", "tiered"] = Field(
        "blocking",
        description="blocking save; snapshot then background persist; or tiered: snapshot, replicate "
        "to peers' memory, persist every k-th",
    )
    snapshot_gbps: float = Field(
        50.0, gt=0, description="two-phase/tiered: in-memory snapshot bandwidth per node (GB/s)"
    )
    persist_slowdown: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="two-phase/tiered: training slowdown while a "
        "background persist competes for bandwidth",
    )
    tiers: Tiers | None = Field(
        None, description="tiered mode's parameters (defaults when the mode is tiered)"
    )

    @model_validator(mode="after")
    def _tiers(self) -> Checkpoint:
        if self.tiers is not None and self.mode != "tiered":
            raise ValueError(f'[checkpoint.tiers] is for mode = "tiered" (mode is {self.mode!r})')
        return self

    @property
    def tier_spec(self) -> Tiers:
        """The tiered mode's parameters: ``tiers``, else the defaults."""
        return self.tiers if self.tiers is not None else Tiers()


class Domain(_Model):
    """Failure domains: groups of nodes of one type that fail together (hosts, racks, power, ToR).

    ``membership = "fixed"`` (default): the type's nodes, in id order, form consecutive groups of
    ``nodes`` (the last one smaller when they do not divide), each group a failure domain with its
    own renewal process (``failure``) that takes down all its members. ``"random"``: one process
    for the whole cluster, each failure taking ``nodes`` randomly chosen nodes (the CPR paper's
    "failures of 4 randomly selected servers").
    """

    name: str = Field(..., min_length=1)
    node_type: Literal["trainer", "embedding"]
    nodes: int = Field(
        1, ge=1, description="nodes per domain (fixed), or taken down by one failure (random)"
    )
    failure: FailureDist
    membership: Literal["fixed", "random"] = Field(
        "fixed", description="fixed groups of named nodes, or random nodes at each failure"
    )

    def groups(self, total: int) -> list[tuple[int, int]]:
        """(first index, size) of each fixed group among ``total`` nodes of the type."""
        return [(g, min(self.nodes, total - g)) for g in range(0, total, self.nodes)]


class Injected(_Model):
    """Exactly ``count`` failures at uniformly random wall-clock times in [0, duration)."""

    count: int = Field(..., ge=0, le=10_000_000)
    node_type: Literal["trainer", "embedding"] = "embedding"
    nodes: int = Field(1, ge=1, description="nodes taken down by each failure")


class JobFailure(FailureDist):
    """Job-level interruptions: a software crash, a NaN or loss spike, a network or storage outage,
    a preemption. No node is lost, but the job's state cannot be trusted: every strategy rolls back
    to its last *full* (globally consistent) checkpoint, restarts and reloads it in full."""

    restart_s: float | None = Field(
        None,
        gt=0,
        description="time to restart the job (s); default: a draw of the [reschedule] distribution",
    )


#: when a machine's time to failure runs (``[failures.clock]``)
ClockPolicy = Literal["powered", "in-service", "computing"]


class FailureClock(_Model):
    """Which states a machine wears in, per node type: its time to failure (the lifetimes of
    ``[failures.trainer]``/``[failures.embedding]``, and of its failure domains) runs

    * ``"in-service"`` (default): while it fills a job slot, whatever the job is doing (computing,
      saving, restoring, waiting for another node): wall time in service. A machine in repair, or
      idle in a pool, does not wear.
    * ``"powered"``: whenever it is not in repair: in service or idle as a standby or spare ("hot"
      spares: an idle machine fails too, and goes to repair). Without ``[lifecycle]`` there are no
      idle machines: the same as ``"in-service"``.
    * ``"computing"``: only while the job computes (trains, at whatever rate); not while it saves
      (a blocking save or snapshot), restores, or waits for nodes. Failures then never strike a
      save or a recovery, which is what simulators that stop the clock outside compute assume.

    ``job``: the same for job-level interruptions (``[failures.job]``): ``"in-service"`` (the
    job's wall time) or ``"computing"``. Injected and replayed failures keep their wall times."""

    trainer: ClockPolicy = Field("in-service", description="when a trainer's failure clock runs")
    embedding: ClockPolicy = Field(
        "in-service", description="when an embedding server's failure clock runs"
    )
    job: Literal["in-service", "computing"] = Field(
        "in-service", description="when the clock of job-level interruptions runs"
    )

    def of(self, node_type: str) -> str:
        """The policy of ``"trainer"``, ``"embedding"`` or ``"job"``."""
        return str(getattr(self, node_type))

    @property
    def computing(self) -> bool:
        """Some failure clock runs only while the job computes."""
        return "computing" in (self.trainer, self.embedding, self.job)


class Failures(_Model):
    """What fails and when: per-node lifetimes of trainers and embedding servers, failure domains,
    injected failures, job-level interruptions, a replayed trace, how the processes start, and
    in which states machines wear (``clock``)."""

    trainer: FailureDist | None = Field(None, description="per-trainer inter-failure time")
    embedding: FailureDist | None = Field(
        None, description="per-embedding-server inter-failure time"
    )
    domains: tuple[Domain, ...] = Field((), strict=False)  # TOML gives arrays: lists
    injected: tuple[Injected, ...] = Field((), strict=False)
    job: JobFailure | None = Field(
        None, description="job-level interruptions (rollback to the last full checkpoint)"
    )
    replay: str | None = Field(
        None, description="failure trace file (CSV schema in traces/README.md)"
    )
    start: Literal["fresh", "stationary"] = Field(
        "stationary",
        description="at t=0 every node (and failure domain) starts a fresh lifetime, or is "
        "observed in steady state: its first failure comes after the equilibrium residual life "
        "(density S(t)/mean), so that failures arrive at the long-run rate 1/mean from the start",
    )
    clock: FailureClock = Field(
        FailureClock(),
        description="per node type, the states in which a machine's time to failure runs",
    )
    # `model = "fitted.toml"` is also accepted in a scenario file: merged at load (see load_raw)


class Delay(_DistSpec):
    """A duration in seconds (detection, swap-in, host selection, repair): a distribution, or a
    constant (``mean_s = 0`` is allowed for a constant: instantaneous)."""

    family: Literal["exponential", "weibull", "gamma", "lognormal", "loglogistic", "constant"] = (
        "constant"
    )
    mean_s: float | None = Field(None, ge=0, description="mean duration, seconds")
    scale_s: float | None = Field(None, gt=0, description="scale parameter, seconds")

    @model_validator(mode="after")
    def _check(self) -> Delay:
        if self.mean_s == 0 and self.family != "constant":
            raise ValueError('mean_s = 0 is only for family = "constant" (no delay)')
        self.dist  # noqa: B018
        return self

    @property
    def zero(self) -> bool:
        """True for ``mean_s = 0``: no delay (never sampled)."""
        return self.mean_s == 0

    @property
    def dist(self) -> Distribution:
        """The duration as a :class:`~cprsim.failures.distributions.Distribution` in seconds (a
        placeholder constant when :attr:`zero`)."""
        if self.mean_s == 0:
            return Distribution("constant", 1.0)  # never sampled: see `zero`
        return self._build(self.mean_s, self.scale_s, 1.0, "mean_s or scale_s")


class Repair(_Model):
    """The repair pipeline a failed machine enters once its failure is detected."""

    auto: Delay = Field(
        Delay(family="lognormal", mean_s=4 * HOUR, sigma=1.0), description="automatic repair"
    )
    escalate_p: float = Field(
        0.0, ge=0, le=1, description="probability that automatic repair escalates to manual"
    )
    manual: Delay = Field(
        Delay(family="lognormal", mean_s=72 * HOUR, sigma=1.0),
        description="manual repair, after the automatic one when it escalates",
    )
    cure_auto_p: float = Field(
        0.0,
        ge=0,
        le=1,
        description="probability that an automatic repair cures a bad machine (it becomes good: "
        "fails at the base rate from then on)",
    )
    cure_manual_p: float = Field(
        0.0,
        ge=0,
        le=1,
        description="probability that a manual repair (after an escalation) cures a bad machine "
        "the automatic one did not",
    )
    false_success_p: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="probability that a bad machine's repair reports success while its fault "
        "stays (it is not cured, and fails again after a draw of recur once back in service); "
        "good machines are not affected",
    )
    recur: FailureDist = Field(
        FailureDist(family="exponential", mtbf_h=1.0),
        description="a falsely repaired bad machine's time to fail again once back in service",
    )
    crews: int | None = Field(
        None, ge=1, le=1_000_000, description="repairs at once (None: unlimited)"
    )


class Health(_Model):
    """Bad machines: a fraction that fails ``bad_multiplier`` times as often as a good one (its
    lifetimes are a good machine's divided by k: ``S_bad(t) = S(k t)``, so the long-run failure
    rate is k times whatever the lifetime family; what ``cprsim fit --bad-nodes`` estimates from
    failure counts); good machines may turn bad with age."""

    bad_fraction: float = Field(
        0.0, ge=0, lt=1, description="share of machines that are bad at the start"
    )
    bad_multiplier: float = Field(
        1.0,
        ge=1,
        le=10_000,
        description="how many times as often a bad machine fails (its lifetimes divided by it)",
    )
    turn_bad_per_h: float = Field(
        0.0, ge=0, description="rate (per hour in service) at which a good machine turns bad"
    )


class Retirement(_Model):
    """Remove a machine from the fleet after ``failures`` failures within ``window_h`` hours."""

    failures: int = Field(..., ge=1, le=1000)
    window_h: float = Field(..., gt=0)


class Lifecycle(_Model):
    """The node lifecycle: a failed node's machine leaves the job for repair; a warm standby (swap
    time), else a spare (host-selection time), else the first repaired machine replaces it; the job
    waits meanwhile (a strategy that does not wait for the node goes on). Detection precedes it all.
    Without this table a failed node is rescheduled after a draw of ``[reschedule]`` (no pools)."""

    detection: Delay = Field(Delay(mean_s=0.0), description="time from a failure to its detection")
    standbys: int = Field(0, ge=0, le=1_000_000, description="warm standby machines")
    swap: Delay | None = Field(
        None, description="a standby's swap-in time (default: the [reschedule] distribution)"
    )
    spares: int = Field(0, ge=0, le=1_000_000, description="spare (cold) machines")
    select: Delay | None = Field(
        None,
        description="a spare's (or a repaired machine's) host-selection and "
        "provisioning time (default: the [reschedule] distribution)",
    )
    repair: Repair = Repair()
    health: Health = Health()
    retirement: Retirement | None = None


class StrategyConfig(_Model):
    """The recovery strategy by registry name, with its own parameters (validated by it)."""

    model_config = ConfigDict(extra="allow", frozen=True)
    name: str = names.FULL

    @model_validator(mode="after")
    def _known(self) -> StrategyConfig:
        from cprsim.registry import validate_params

        validate_params(self.name, self.params)
        return self

    @property
    def params(self) -> dict[str, Any]:
        """The strategy's own parameters: every key of the table but ``name``."""
        return dict(self.model_extra or {})


class Scenario(_Model):
    """One validated description of a cluster, a job, its checkpoint costs, failures and a
    recovery strategy (:func:`load_scenario`). Units: ``*_h`` hours (failure-time parameters, the
    job's ``job.duration_h``, ``checkpoint.interval_h``), ``*_s`` seconds (costs), ``*_gb`` GB,
    ``*_gbps`` GB/s. ``duration_s`` (W, the failure-free training time) and ``interval_s`` are in
    seconds; ``with_updates({"dotted.key": value})`` is a validated copy with changes;
    ``cprsim show NAME`` prints every key with its default (docs/concepts.md)."""

    name: str = "custom"
    description: str = ""
    seed: int = Field(1, ge=0, lt=2**63, description="root of every random stream")
    replications: int = Field(20, ge=1, le=1_000_000)
    cluster: Cluster = Cluster()
    job: Job = Job(duration_h=50.0)
    storage: Storage = Storage()
    reschedule: RescheduleDist = RescheduleDist(family="constant", mean_s=300.0)
    failures: Failures = Failures()
    checkpoint: Checkpoint = Checkpoint()
    strategy: StrategyConfig = StrategyConfig()
    access: Access = Access()
    costs: CostOverrides = CostOverrides()
    lifecycle: Lifecycle | None = Field(
        None,
        description="node lifecycle: detection, standbys, spares, repair, "
        "bad machines (absent: a failed node is rescheduled after [reschedule])",
    )
    sources: dict[str, str] = Field(
        default_factory=dict,
        description="where keys came from: a fitted model file's tables (`failures.model`, "
        "`--model`) and the fits it holds that the scenario does not use; set at load",
    )

    @model_validator(mode="after")
    def _consistent(self) -> Scenario:
        from cprsim.registry import get, validate_params

        cls = get(self.strategy.name)
        cls.check(validate_params(self.strategy.name, self.strategy.params), self)
        if self.cluster.embedding_servers == 0 and cls.needs_embedding_servers:
            raise ValueError(
                f"strategy {self.strategy.name!r} recovers embedding shards, and this model has none "
                '(cluster.embedding_servers = 0): use strategy "full"'
            )
        if self.checkpoint.mode == "tiered" and not cls.supports_tiers:
            from cprsim.registry import REGISTRY

            able = ", ".join(sorted(n for n, c in REGISTRY.items() if c.supports_tiers))
            raise ValueError(
                f'strategy {self.strategy.name!r} does not support checkpoint.mode = "tiered" '
                f"(strategies that do: {able})"
            )
        if self.checkpoint.interval_h * HOUR > self.job.duration_s:
            raise ValueError(
                f"checkpoint.interval_h ({self.checkpoint.interval_h} h) is longer than the job "
                f"({self.job.duration_s / HOUR:.4g} h)"
            )
        for d in self.failures.domains:
            total = (
                self.cluster.trainers
                if d.node_type == "trainer"
                else self.cluster.embedding_servers
            )
            if d.nodes > total:
                raise ValueError(
                    f"failures.domains[{d.name}].nodes ({d.nodes}) exceeds the {total} {d.node_type} nodes"
                )
        if self.failures.start == "stationary":
            specs = [
                ("failures.trainer", self.failures.trainer),
                ("failures.embedding", self.failures.embedding),
            ]
            specs += [
                (f"failures.domains[{d.name}].failure", d.failure) for d in self.failures.domains
            ]
            specs += [("failures.job", self.failures.job)]
            for where, spec in specs:
                if spec is not None and not math.isfinite(spec.dist.mean()):
                    raise ValueError(
                        f"{where}: a lifetime with an infinite mean has no stationary start "
                        '(failures.start = "stationary")'
                    )
        if self.failures.replay is not None:
            from cprsim.io import check_input_file

            check_input_file(self.failures.replay, "failure trace (failures.replay)")
        for i, inj in enumerate(self.failures.injected):
            total = (
                self.cluster.trainers
                if inj.node_type == "trainer"
                else self.cluster.embedding_servers
            )
            if inj.nodes > total:
                raise ValueError(
                    f"failures.injected[{i}].nodes ({inj.nodes}) exceeds the {total} {inj.node_type} nodes"
                )
        return self

    # -- derived -----------------------------------------------------------------------------
    @property
    def duration_s(self) -> float:
        """The job's failure-free training time ``W`` (s)."""
        return self.job.duration_s

    @property
    def interval_s(self) -> float:
        """The checkpoint interval ``tau`` (s of progress)."""
        return self.checkpoint.interval_h * HOUR

    def with_updates(
        self, updates: dict[str, Any], source: str | None = None, *, param: str = "updates"
    ) -> Scenario:
        """A copy with dotted-key updates applied and re-validated. An update the scenario refuses
        raises :class:`OverrideError` naming ``param`` (the caller's parameter the
        updates come from) and the key, located at ``source`` (default: the scenario's name)."""
        raw = self.model_dump(mode="python", exclude_none=True)
        for key, value in updates.items():
            set_dotted(raw, key, value, param)
        drop_stale_tiers(raw, updates)
        try:
            return Scenario.model_validate(raw)
        except ValidationError as e:
            raise _refused(e, source or self.name, updates, param) from None


# --------------------------------------------------------------------------------------------
def set_dotted(raw: dict[str, Any], key: str, value: Any, param: str = "overrides") -> None:
    """Set the dotted ``key`` of the TOML table ``raw`` (tables created as needed; a number indexes
    an array of tables). A key that cannot be set raises
    :class:`OverrideError` naming ``param`` and the key."""
    parts = key.split(".")
    cur: Any = raw
    for p in parts[:-1]:
        if isinstance(cur, list):
            try:
                cur = cur[int(p)]
            except (ValueError, IndexError):
                raise OverrideError(param, f"`{p}` is not an index of the list", key=key) from None
            continue
        nxt = cur.get(p)
        if nxt is None:
            nxt = cur[p] = {}
        elif isinstance(nxt, tuple):  # a dumped model holds arrays of tables as tuples
            nxt = cur[p] = list(nxt)
        elif not isinstance(nxt, (dict, list)):
            raise OverrideError(param, f"`{p}` is a value, not a table", key=key)
        cur = nxt
    if not isinstance(cur, dict):
        raise OverrideError(param, "cannot replace a list item (set the whole list)", key=key)
    cur[parts[-1]] = value


def drop_stale_tiers(raw: dict[str, Any], updates: dict[str, Any]) -> None:
    """After ``updates`` (dotted keys) were set in ``raw``: when they move ``checkpoint.mode`` off
    ``"tiered"`` and set nothing under ``checkpoint.tiers``, drop the ``[checkpoint.tiers]`` the
    scenario had (the tiered mode's parameters go with it: ``--set checkpoint.mode=blocking``);
    tiers set in the same updates stay, and the scenario's validation refuses the mix."""
    mode = updates.get("checkpoint.mode")
    if mode is None or mode == "tiered":
        return
    if any(k == "checkpoint.tiers" or k.startswith("checkpoint.tiers.") for k in updates):
        return
    ck = raw.get("checkpoint")
    if isinstance(ck, dict):
        ck.pop("tiers", None)


def parse_set(items: tuple[str, ...] | list[str], param: str = "overrides") -> dict[str, Any]:
    """``key=value`` strings to a dict; values are TOML literals, else plain strings. A string
    that is not ``key=value`` raises :class:`OverrideError` naming ``param`` (the
    caller's parameter the strings come from) and the string."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise OverrideError(param, "expected key=value", key=repr(item))
        key, text = item.split("=", 1)
        key = key.strip()
        if not key:
            raise OverrideError(param, "empty key", key=repr(item))
        try:
            value = tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError:
            value = text
        except ValueError:  # an integer of more than sys.get_int_max_str_digits() digits
            raise OverrideError(
                param, f"an integer of more than {sys.get_int_max_str_digits()} digits", key=key
            ) from None
        out[key] = value
    return out


def validate(raw: dict[str, Any], source: str) -> Scenario:
    """``raw`` as a :class:`Scenario`; a bad one raises :class:`ScenarioError`, one line naming
    ``source`` and the key."""
    try:
        return Scenario.model_validate(raw)
    except ValidationError as e:
        raise ScenarioError(validation_line(e, source)) from None
    except ScenarioError:
        raise


def builtin_names() -> list[str]:
    """The names of the built-in scenarios, sorted."""
    files = resources.files("cprsim") / "scenarios"
    return sorted(p.name[:-5] for p in files.iterdir() if p.name.endswith(".toml"))


def is_builtin(name: str) -> bool:
    """Whether ``name`` is a built-in scenario."""
    return _builtin_text(name) is not None


def _builtin_text(name: str) -> str | None:
    f = resources.files("cprsim") / "scenarios" / f"{name}.toml"
    return f.read_text() if f.is_file() else None


def load_raw(name_or_path: str) -> tuple[dict[str, Any], str]:
    """The TOML table of a built-in scenario name or a file path, and a label for errors."""
    text = _builtin_text(name_or_path)
    source = short(name_or_path)
    if text is None:
        try:
            exists = Path(name_or_path).exists()
        except (OSError, ValueError):
            exists = True  # let the reader say what is wrong with the name
        if not exists:
            raise ScenarioError(
                f"{source}: no such file or built-in scenario (built-ins: {', '.join(builtin_names())})"
            )
        try:
            text = read_input_text(name_or_path, "scenario file")
        except InputError as e:
            raise ScenarioError(str(e)) from None
    try:
        raw = parse_toml(text, source)
    except InputError as e:
        raise ScenarioError(str(e)) from None
    if not raw:
        raise ScenarioError(
            f"{source}: no settings (an empty scenario file; name a built-in scenario to "
            "start from one, or copy one with `cprsim show NAME > file.toml`)"
        )
    base = Path(name_or_path).parent if _builtin_text(name_or_path) is None else None
    _resolve_relative(raw, base, source)
    return raw, source


def _resolve_relative(raw: dict[str, Any], base: Path | None, source: str) -> None:
    """Paths in a scenario are relative to its file and become absolute (so a sweep's worker in
    another folder finds them); ``failures.model`` merges a fitted model file.

    A model file (``cprsim fit --out``) is merged by :func:`merge_model`; the scenario's own keys
    win over the model's.
    """

    def resolved(name: str, key: str) -> str:
        try:
            return str((base / name).resolve())  # type: ignore[operator]
        except (ValueError, OSError) as e:  # a NUL byte, a name too long, a link loop
            raise ScenarioError(f"{source}: {key}: not a usable file name ({e})") from None

    acc = raw.get("access")
    if isinstance(acc, dict):
        tab = acc.get("tables")
        if isinstance(tab, str) and tab != "criteo-kaggle" and base is not None:
            acc["tables"] = resolved(tab, "access.tables")
    fail = raw.get("failures")
    if not isinstance(fail, dict):
        return
    rep = fail.get("replay")
    if isinstance(rep, str) and base is not None:
        fail["replay"] = resolved(rep, "failures.replay")
    model = fail.pop("model", None)
    if model is None:
        return
    if not isinstance(model, str):
        raise ScenarioError(f"{source}: failures.model: expected a file name")
    mp = Path(model) if base is None or Path(model).is_absolute() else base / model
    try:
        merge_model(raw, mp)
    except InputError as e:
        raise ScenarioError(f"{source}: failures.model: {e}") from None


def _table(d: dict[str, Any], key: str) -> dict[str, Any]:
    """``d[key]`` where it is a table, else an empty one."""
    v = d.get(key)
    return v if isinstance(v, dict) else {}


def _model_origin(m: dict[str, Any], name: str) -> str:
    """Where a fitted model file's tables came from, for ``raw["sources"]``."""
    prov = _table(m, "provenance")
    return f"{name}: " + (
        f"fitted by cprsim fit to {short(str(prov['source']), 60)}"
        + (
            f" (filters {', '.join(map(str, prov.get('filters') or []))})"
            if prov.get("filters")
            else ""
        )
        if prov.get("source")
        else "a failure model file"
    )


def _replace_failures(
    fail: dict[str, Any],
    mf: dict[str, Any],
    lifetimes: Sequence[str],
    sources: dict[str, Any],
    name: str,
) -> None:
    """Drop the scenario's failure tables that the model's (``mf``) replace (``--model``)."""
    # the model's node types replace the scenario's failures of those types (per-node, domains,
    # injected; a replayed trace, which mixes both, only when the model gives both)
    gone: list[str] = [k for k in lifetimes if fail.pop(k, None) is not None]
    for k in ("domains", "injected"):
        items = fail.get(k)
        if isinstance(items, (list, tuple)) and lifetimes:
            keep = [
                x
                for x in items
                if isinstance(x, dict) and x.get("node_type", "embedding") not in lifetimes
            ]
            if len(keep) != len(items):
                gone.append(k)
                fail[k] = keep
    if len(lifetimes) == 2 and fail.pop("replay", None) is not None:
        gone.append("replay")
    if "job" in mf and fail.pop("job", None) is not None:
        gone.append("job")
    for k in gone:
        sources.pop(f"failures.{k}", None)
    if gone:
        sources["replaced"] = (
            f"{name}: the scenario's "
            + ", ".join(f"failures.{k}" for k in gone)
            + " replaced by the model's"
        )


def _merge_lifecycle(
    lc: Any,
    m: dict[str, Any],
    lc_m: dict[str, Any],
    sources: dict[str, Any],
    origin: str,
    replace: bool,
) -> None:
    """Merge the model's repair-time and bad-machine fits into the scenario's ``[lifecycle]``."""
    repair: dict[str, Any] | None = _table(_table(lc_m, "repair"), "auto") or None
    if repair is None and _table(m, "reschedule"):
        repair = _table(m, "reschedule")  # cprsim 0.1's files: the log's repair times, by that name
    if repair is not None:
        fam = repair.get("family", "?")
        if not isinstance(lc, dict):
            sources["unused.repair"] = (
                f"{origin}; its repair-time fit ({fam}) is not used: the scenario has no "
                "[lifecycle], so a failed node is back after [reschedule] (the scenario's own)"
            )
        else:
            rp = lc.setdefault("repair", {})
            if isinstance(rp, dict) and ("auto" not in rp or replace):
                rp["auto"] = repair
                sources["lifecycle.repair.auto"] = f"{origin}; repair times, {fam}"
    health = lc_m.get("health")
    if health is not None:
        if isinstance(lc, dict) and ("health" not in lc or replace):
            lc["health"] = health  # `cprsim fit --bad-nodes`: only into a scenario with a lifecycle
            sources["lifecycle.health"] = f"{origin}; bad machines"
        elif not isinstance(lc, dict):
            sources["unused.health"] = (
                f"{origin}; its bad-machine fit is not used: the scenario has no [lifecycle]"
            )


def merge_model(raw: dict[str, Any], path: Path, replace: bool = False) -> None:
    """Merge the fitted model file ``path`` (``cprsim fit --out``) into the scenario table ``raw``.

    A model file holds ``[failures.<type>]`` (lifetimes), and where its log had repairs, the
    machines' repair times as ``[lifecycle.repair.auto]``, or (``--bad-nodes``)
    ``[lifecycle.health]``. Each goes only where it means that: lifetimes into ``[failures]``,
    repair times and bad machines into the scenario's ``[lifecycle]`` (without one, a failed node
    comes back after the scenario's own ``[reschedule]``: repairing a machine is not the job's
    rescheduling, so the repair fit is left out). Without ``replace`` (``failures.model``) the
    scenario's own keys win; with it (``--model``) the model's failure tables replace the
    scenario's: lifetimes of a node type replace the scenario's failures of that type (per-node,
    failure domains, injected; a replayed trace when the model gives both types), a ``job`` table
    the job's. Files of cprsim 0.1 wrote the repair fit as ``[reschedule]``: it is read as the
    repair fit it is. ``raw["sources"]`` records what came from the file and what was left out.
    A file that cannot be read raises :class:`InputError` naming it.
    """
    m = read_toml(path, "fitted model file")
    fail = raw.setdefault("failures", {})
    if not isinstance(fail, dict):
        raise InputError("the scenario's [failures] is not a table")
    name = short(str(path), 60)
    origin = _model_origin(m, name)
    sources = raw.setdefault("sources", {})
    if not isinstance(sources, dict):
        raise InputError("the scenario's `sources` is not a table (cprsim sets it at load)")
    mf = _table(m, "failures")
    lc_m = _table(m, "lifecycle")
    if not any(k in mf for k in ("trainer", "embedding", "job")) and not lc_m:
        raise InputError(
            f"{name}: holds no fit ([failures.trainer], [failures.embedding], [failures.job] or "
            "[lifecycle.*]): not a failure model file (cprsim fit writes them)"
        )
    for key in ("repair", "health"):
        if key in lc_m and not isinstance(lc_m[key], dict):
            raise InputError(f"{name}: lifecycle.{key}: expected a table")
    lifetimes = [k for k in ("trainer", "embedding") if k in mf]
    if replace:
        _replace_failures(fail, mf, lifetimes, sources, name)
    for key in ("trainer", "embedding", "job"):
        if key in mf and key not in fail:
            fail[key] = mf[key]
            fam = mf[key].get("family", "?") if isinstance(mf[key], dict) else "?"
            what = "job interruptions" if key == "job" else "lifetimes"
            sources[f"failures.{key}"] = f"{origin}; {what}, {fam}"
    _merge_lifecycle(raw.get("lifecycle"), m, lc_m, sources, origin, replace)


def with_model(s: Scenario, model: str | os.PathLike[str]) -> Scenario:
    """``s`` with its node failures replaced by the fitted ``model`` file's (:func:`merge_model`
    with ``replace``); an unreadable file or an invalid result raises :class:`ParameterError`
    naming ``model``."""
    raw = s.model_dump(mode="json", exclude_none=True)
    _merge_for(raw, model)
    return _validate_with(raw, model)


def _merge_for(raw: dict[str, Any], model: str | os.PathLike[str]) -> None:
    """:func:`merge_model` with ``replace`` for the ``model`` parameter (its errors name it)."""
    try:
        merge_model(raw, Path(model), replace=True)
    except InputError as e:
        raise ParameterError("model", str(e)) from None


def _validate_with(raw: dict[str, Any], model: str | os.PathLike[str]) -> Scenario:
    """``raw`` (a scenario with ``model`` merged) validated; an error names ``model``."""
    try:
        return Scenario.model_validate(copy.deepcopy(raw))
    except ValidationError as e:
        raise ParameterError("model", validation_line(e, short(os.fspath(model)))) from None


def load(
    name_or_path: str,
    overrides: dict[str, Any] | None = None,
    model: str | os.PathLike[str] | None = None,
) -> Scenario:
    """The scenario of a built-in name or a TOML file, with its node failures replaced by the
    fitted ``model`` file's (:func:`merge_model`; ``--model``) and dotted-key ``overrides``
    applied. An error of the file itself raises ScenarioError naming the file and key (checked
    first: an override or a model never hides one); an override the scenario refuses raises
    :class:`OverrideError` naming ``overrides``."""
    raw, source = load_raw(name_or_path)
    if overrides or model is not None:
        # the file as written must be valid on its own, as `cprsim show FILE` says: an override
        # or a model must not hide a bad value of the file (replications = nan)
        validate(copy.deepcopy(raw), source)
    if model is not None:
        _merge_for(raw, model)
    if not overrides:
        if model is not None:
            _validate_with(raw, model)
        return validate(copy.deepcopy(raw), source)
    updated = copy.deepcopy(raw)
    for key, value in overrides.items():
        set_dotted(updated, key, value)
    drop_stale_tiers(updated, overrides)
    try:
        return Scenario.model_validate(updated)
    except ValidationError as e:
        refused = _refused(e, source, overrides, "overrides")
    if refused.key is None:  # not about a key overridden: the file's own error, if it has one
        if model is not None:  # or the model's, before the overrides (which did not fix it)
            _validate_with(raw, model)
        validate(copy.deepcopy(raw), source)
    raise refused


def _refused(e: ValidationError, source: str, updates: dict[str, Any], param: str) -> OverrideError:
    """The updates ``param`` of a valid scenario ``source`` made it invalid: the error names the
    key it is about, after ``param`` when it is one of the updates' keys or within one (the key
    updated, when the error is about the one table holding it)."""
    loc, what = validation_parts(e)
    if loc and any(loc == k or loc.startswith(f"{k}.") for k in updates):
        return OverrideError(param, what, source, key=loc)
    inside = [k for k in updates if loc and k.startswith(f"{loc}.")]
    if len(inside) == 1:
        return OverrideError(param, what, source, key=inside[0])
    return OverrideError(param, f"{loc}: {what}" if loc else what, source)


def describe_builtin(name: str) -> str:
    """The first sentence of a built-in scenario's description (one line)."""
    raw, _ = load_raw(name)
    text = " ".join(str(raw.get("description", "")).split())
    # a sentence ends at ". " (not inside a parenthesis, where "e.g. " and "arXiv:2407. " live)
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch == "(") - (ch == ")")
        if ch == "." and depth == 0 and text[i + 1 : i + 2] in (" ", ""):
            return text[: i + 1]
    return text


# --------------------------------------------------------------------------------------------
def to_toml(data: dict[str, Any]) -> str:
    """A scenario's TOML (tables, arrays of tables; see :func:`cprsim.io.dumps_toml`); a
    description with newlines as a multi-line string, its lines as written."""
    from cprsim.io import dumps_toml

    return dumps_toml(data, multiline=True)


def effective_dict(s: Scenario) -> dict[str, Any]:
    """The scenario with every default filled in, as JSON-ready values (unset optional keys left
    out)."""
    d = s.model_dump(mode="json", exclude_none=True)
    if not d.get("sources"):
        d.pop("sources", None)  # nothing came from a model file
    return d


__all__ = [
    "Scenario",
    "ScenarioError",
    "OverrideError",
    "load",
    "parse_set",
    "builtin_names",
    "to_toml",
    "FAMILIES",
]
