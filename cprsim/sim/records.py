"""Typed records the engine returns (it never prints or writes files)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # pragma: no cover
    import pandas


class Event(NamedTuple):
    """One thing that happened in a replication. ``node`` is -1 when no node is concerned.

    kinds: ``fail`` (node -1: a job-level interruption; value = seconds until the node, or the
    job, is back, as known at the failure: the rescheduling draw, or the job's restart; with a node
    lifecycle, detection + restart for the job, and ``inf`` for a node, whose return ``back``
    gives once a machine is chosen), ``back`` (a node lifecycle chose failed node ``node`` a
    machine: value = the wall time in seconds it is back in service), ``restore`` (partial recovery: value =
    progress in seconds at which shard ``node`` was restored from its last save), ``save_start``/``save_end``/``save_abort``
    (value = progress), ``persist_end`` (two-phase: the checkpoint became durable), ``rollback``
    (value = seconds of work to re-execute), ``pls`` (value = portion of samples lost),
    ``resched_start``/``resched_end``, ``load_start``/``load_end`` (value = load seconds),
    ``degraded`` (a trainer out under partial recovery: value = end of its window), ``stripe_loss``,
    ``rebuild_start``, ``done``.
    """

    time_s: float
    kind: str
    node: int
    value: float


# wide by design (issue 28 caps state objects at ~20 fields, not records): one field per metric,
# each a column of the results files and data frames (public output formats); no behaviour
@dataclass(frozen=True, slots=True)
class ReplicationResult:
    """One replication. Identity: wall = useful + save + load + lost + reschedule + degraded."""

    replication: int
    wall_s: float
    useful_s: float
    save_s: float
    load_s: float
    lost_s: float
    reschedule_s: float
    degraded_s: float
    failures_trainer: int
    failures_embedding: int
    failures_job: int  #: job-level interruptions (crash, NaN, outage, preemption): roll back to a full checkpoint
    failure_events: int
    checkpoints: int
    pls: float
    overhead: float  #: (wall - useful) / useful
    #: (save + load + lost + degraded) / useful: the terms the strategy controls
    ckpt_overhead: float
    ettr: float  #: effective training time ratio: useful / wall
    #: where and how old the lost updates were (:meth:`cprsim.pls.ShardLedger.timing`): loss-weighted
    #: mean failure position and restored-state age, as fractions of the job (0 when nothing is lost)
    pls_position: float = 0.0
    pls_age: float = 0.0
    #: the node lifecycle ([lifecycle]; 0 without it): of reschedule_s, the seconds spent waiting for
    #: failures to be detected and for a free machine (the rest: swap-in or host selection)
    detection_s: float = 0.0
    wait_s: float = 0.0
    unfilled_s: float = 0.0  #: wall time with at least one node slot lacking a machine in service
    machines_retired: int = 0  #: machines removed by the retirement policy
    machines_cured: int = 0  #: bad machines a repair made good
    failures_bad: int = 0  #: node failures of bad machines
    #: tiered checkpoints (checkpoint.mode = "tiered"): rollbacks restored from peers' memory / storage
    memory_restores: int = 0
    storage_restores: int = 0

    @property
    def badput(self) -> dict[str, float]:
        """Wall time lost, by cause (seconds): they add up to ``wall_s - useful_s``."""
        replace = self.reschedule_s - self.detection_s - self.wait_s
        return {
            "detection": self.detection_s,
            "waiting for a machine": self.wait_s,
            "replacement": replace,
            "load": self.load_s,
            "re-execution": self.lost_s,
            "save stalls": self.save_s,
            "degraded progress": self.degraded_s,
        }

    def as_dict(self) -> dict:
        """The fields as a plain dict (seconds, counts and fractions, as in ``replications.csv``)."""
        return asdict(self)

    @classmethod
    def columns(cls) -> list[str]:
        """The field names, in ``replications.csv``'s column order."""
        return [f.name for f in fields(cls)]

    @classmethod
    def to_frame(cls, results: Iterable[ReplicationResult]) -> pandas.DataFrame:
        """A pandas DataFrame of replications: one row per result, the columns of :meth:`columns`
        (times in seconds; ``pls``, ``overhead``, ``ckpt_overhead`` and ``ettr`` fractions).

        ``ReplicationResult.to_frame(results)`` for a list; pandas is optional: without it this
        raises an ImportError that names ``pip install pandas``."""
        from cprsim.optional import require_pandas

        pd = require_pandas("ReplicationResult.to_frame()")
        cols = cls.columns()
        return pd.DataFrame([[getattr(r, c) for c in cols] for r in results], columns=cols)
