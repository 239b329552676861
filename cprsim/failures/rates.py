"""Long-run failure-event rates of a scenario (renewal rate = 1 / mean), by what they interrupt.

Used by the planner (analytic figures) and by strategies that weigh expected restore costs
(Check-N-Run's re-baselining rule). A replayed trace has no closed-form rate: the planner's
:func:`cprsim.planner.rates.failure_rates` estimates it from 20 replications."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cprsim.scenario import Scenario


@dataclass(frozen=True)
class Rates:
    """A scenario's long-run failure-event rates (per second) by what they interrupt, the mean
    embedding servers per embedding event, and whether every lifetime is exponential."""

    total: float  #: every event that interrupts the job (node and job-level), per second
    nodes: float  #: node failure events (trainers and embedding servers), per second
    embedding: float  #: events that take down embedding servers, per second
    k: float  #: embedding servers per such event (mean)
    job: float  #: job-level interruptions (roll every strategy back to its last full checkpoint)
    exponential: bool


def failure_rates(
    s: Scenario, replayed: Callable[[Scenario], tuple[float, float, float]] | None = None
) -> Rates:
    """The scenario's rates; ``replayed(s)`` gives, for a scenario with a replayed trace, its node
    failure events, the events among them that take down embedding servers, and the embedding
    servers those take down, per second, counted as for parametric failures (an event: the nodes
    that fail together), the scenario's own failure processes included
    (:func:`cprsim.planner.rates.failure_rates` measures them by simulation)."""
    f, c = s.failures, s.cluster
    nodes = emb = emb_nodes = job = 0.0
    expo = True
    if f.trainer is not None:
        nodes += c.trainers / f.trainer.dist.mean()
        expo &= f.trainer.family == "exponential"
    if f.embedding is not None:
        r = c.embedding_servers / f.embedding.dist.mean()
        nodes += r
        emb += r
        emb_nodes += r
        expo &= f.embedding.family == "exponential"
    for d in f.domains:
        total = c.trainers if d.node_type == "trainer" else c.embedding_servers
        sizes = [d.nodes] if d.membership == "random" else [size for _, size in d.groups(total)]
        expo &= d.failure.family == "exponential"
        for size in sizes:
            r = 1.0 / d.failure.dist.mean()
            nodes += r
            if d.node_type == "embedding":
                emb += r
                emb_nodes += r * size
    for inj in f.injected:
        r = inj.count / s.duration_s
        nodes += r
        if inj.node_type == "embedding":
            emb += r
            emb_nodes += r * inj.nodes
    if f.job is not None:
        job = 1.0 / f.job.dist.mean()
        expo &= f.job.family == "exponential"
    if f.replay:
        if replayed is None:
            raise ValueError(
                f"{s.name}: a replayed trace's rates are measured by simulation: use "
                "cprsim.planner.rates.failure_rates"
            )
        expo = False
        nodes, emb, emb_nodes = replayed(s)
    k = emb_nodes / emb if emb > 0 else 1.0
    return Rates(nodes + job, nodes, emb, k, job, expo)
