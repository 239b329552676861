"""What each metric of a replication is, in one table.

The summaries (:func:`cprsim.sim.replicate.summarize`), the terminal table and ``summary.json``
(:mod:`cprsim.report`), the sweep files (:mod:`cprsim.sweep.results`) and the figures
(:mod:`cprsim.plots`) read their metric names, labels, kinds, definitions and directions (which
tail is the bad one) from here. The metrics are fields of
:class:`cprsim.sim.records.ReplicationResult` (a test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

#: how a value is shown: ``time`` seconds (tables: hours and % of W), ``count``, ``frac`` a
#: fraction shown as is, ``pct`` a fraction shown in percent
Kind = Literal["time", "count", "frac", "pct"]
#: where the terminal table shows a metric: every run, with a node lifecycle, with tiered
#: checkpoints
Table = Literal["core", "lifecycle", "tiers"]


@dataclass(frozen=True)
class Metric:
    """One summarized metric of a replication."""

    name: str  #: the :class:`~cprsim.sim.records.ReplicationResult` field
    label: str  #: short label (tables, legends, figure components)
    kind: Kind
    table: Table = "core"
    #: the terminal table's label when it differs from ``label`` (a sub-row of rescheduling)
    table_label: str | None = None
    #: what it means, for ``summary.json``'s ``definitions`` ("" : its label says it)
    definition: str = ""
    #: a figure's axis label (the metrics a figure can plot against the interval; "" : none)
    axis: str = ""
    #: added after the first results tables were written: a table without the column reads 0
    optional: bool = False
    #: more is better (ETTR): its bad tail, the one reported beside the mean, is the low one (P10,
    #: P1); every other metric is a cost, reported with its P90 and P99
    higher_is_better: bool = False

    @property
    def row_label(self) -> str:
        """The label of its row in the terminal table."""
        return self.table_label or self.label


#: every metric summarized over replications, in report order
ALL: tuple[Metric, ...] = (
    Metric("wall_s", "wall time", "time"),
    Metric("save_s", "checkpoint saves", "time"),
    Metric("load_s", "checkpoint loads", "time"),
    Metric("lost_s", "re-executed work", "time"),
    Metric("reschedule_s", "rescheduling", "time"),
    Metric("degraded_s", "degraded / slowed", "time"),
    Metric("failures_trainer", "trainer failures", "count"),
    Metric("failures_embedding", "embedding-server failures", "count"),
    Metric("failures_job", "job-level interruptions", "count"),
    Metric("checkpoints", "checkpoints completed", "count"),
    Metric(
        "pls",
        "PLS (portion of lost samples)",
        "frac",
        definition="sum over failures of samples since the failed shard's last save x the shard's "
        "share of updates, divided by the samples of the job",
    ),
    Metric(
        "overhead",
        "total overhead",
        "pct",
        definition="(wall - W) / W, W the failure-free training time",
        axis="total overhead (% of failure-free time W)",
    ),
    Metric(
        "ckpt_overhead",
        "checkpoint-related overhead",
        "pct",
        definition="(save + load + re-executed + degraded) / W: the terms that the checkpoint "
        "and recovery strategy control (rescheduling excluded: every strategy pays it)",
        axis="checkpoint-related overhead (% of W)",
    ),
    Metric(
        "ettr",
        "ETTR (useful / wall)",
        "frac",
        definition="effective training time ratio: W / wall (higher is better: its tail is the "
        "P10 and P1)",
        higher_is_better=True,
    ),
    Metric(
        "detection_s",
        "failure detection",
        "time",
        "lifecycle",
        "  of which detection",
        optional=True,
    ),
    Metric(
        "wait_s",
        "waiting for a machine",
        "time",
        "lifecycle",
        "  of which no machine free",
        optional=True,
    ),
    Metric("unfilled_s", "a slot without a machine", "time", "lifecycle", optional=True),
    Metric("failures_bad", "failures of bad machines", "count", "lifecycle", optional=True),
    Metric("machines_retired", "machines retired", "count", "lifecycle", optional=True),
    Metric("machines_cured", "bad machines cured", "count", "lifecycle", optional=True),
    Metric("memory_restores", "restores from peers' memory", "count", "tiers", optional=True),
    Metric("storage_restores", "restores from storage", "count", "tiers", optional=True),
)

#: name -> metric
BY_NAME: dict[str, Metric] = {m.name: m for m in ALL}
#: the names, in report order
NAMES: tuple[str, ...] = tuple(m.name for m in ALL)
#: the columns a results table written before the lifecycle and the tiers lacks (read as 0)
OPTIONAL: tuple[str, ...] = tuple(m.name for m in ALL if m.optional)
#: the metrics where higher is better: their bad tail is the low one (P10, P1)
HIGHER_IS_BETTER: frozenset[str] = frozenset(m.name for m in ALL if m.higher_is_better)
#: the metrics a figure plots against the checkpoint interval, with their axis labels
AXES: dict[str, str] = {m.name: m.axis for m in ALL if m.axis}
#: the parts of the wall time beyond the useful work, in stacking order (figures)
COMPONENTS: tuple[str, ...] = ("save_s", "load_s", "lost_s", "reschedule_s", "degraded_s")
#: rescheduling's parts with a node lifecycle; ``replacement_s`` = reschedule - detection - wait
#: (swap-in or host selection) is derived, not a metric
LIFECYCLE_PARTS: tuple[tuple[str, str], ...] = (
    ("detection_s", BY_NAME["detection_s"].label),
    ("wait_s", BY_NAME["wait_s"].label),
    ("replacement_s", "swap-in / host selection"),
)


def definitions() -> dict[str, str]:
    """``summary.json``'s definitions of the metrics that need one."""
    return {m.name: m.definition for m in ALL if m.definition}
