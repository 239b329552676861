"""Hopeless regimes, detected analytically before anything is simulated.

A job whose failures come faster than it can save and recover never finishes in any useful
sense, and simulating it costs about ``lam x ratio x W`` failure events per replication. Before
simulating, the exact Poisson forms (``analytic.hopeless``, at the best interval) say whether the
expected wall time exceeds ``limit`` times the work, and ``analytic.mtbf_for_ratio`` what MTBF
would let the job finish within twice its work.

* strategies that roll back on every failure (``plan_kind = "rollback"``): every failure event;
* partial recovery: only job-level interruptions roll back; node failures cost a recovery each
  (``W x exp(lam x R)``, which is hopeless when the cluster fails faster than it recovers).
"""

from __future__ import annotations

import math

from cprsim import analytic
from cprsim.costs import Costs, costs_of
from cprsim.errors import InputError, ParameterError
from cprsim.plan.rates import failure_rates
from cprsim.scenario import HOUR, Scenario

LIMIT = 10.0  #: expected wall / W beyond which a regime is hopeless
#: default budget of simulated events per replication (``max_events``)
MAX_EVENTS = 1e7


def dur_text(sec: float) -> str:
    """A duration in seconds as text, 3 significant digits: seconds under 2 min, minutes under 2 h,
    else hours."""
    if sec < 120:
        return f"{sec:.3g} s"
    if sec < 2 * HOUR:
        return f"{sec / 60:.3g} min"
    return f"{sec / HOUR:.3g} h"


def check(
    s: Scenario, kind: str = "rollback", costs: Costs | None = None, limit: float = LIMIT
) -> None:
    """Raise a one-line InputError (why, and what would let the job finish) for a hopeless regime."""
    c = costs or costs_of(s)
    rates = failure_rates(s)
    W = s.duration_s
    resched = s.reschedule.dist.mean()
    if kind == "rollback":
        lam, R, what = rates.total, resched + c.load_s, "every failure rolls the job back"
    else:
        lam = rates.job
        restart = (
            s.failures.job.restart_s
            if s.failures.job is not None and s.failures.job.restart_s
            else resched
        )
        R, what = restart + c.load_s, "job-level interruptions roll the job back"
        R_node = resched + c.shard_load_s(1)
        if rates.nodes * R_node > math.log(limit):
            raise InputError(
                f"{s.name}: hopeless: node failures come every {dur_text(1 / rates.nodes)} while each recovery takes "
                f"{dur_text(R_node)}: the job would need about {math.exp(min(rates.nodes * R_node, 700)):.3g}x its "
                f"{dur_text(W)} of work. It finishes only when the cluster's MTBF is well above a recovery "
                f"(fewer or more reliable nodes, faster rescheduling)"
            )
    if lam <= 0:
        return
    f = analytic.hopeless(W, c.save_s, lam, R, limit=limit)
    if not f.hopeless:
        return
    need = analytic.mtbf_for_ratio(W, c.save_s, R, ratio=2.0)
    ratio = f"{f.ratio:.3g}x" if math.isfinite(f.ratio) else f"10^{f.log10_ratio:.3g} times"
    raise InputError(
        f"{s.name}: hopeless: {what} and they come every {dur_text(1 / lam)} while a save takes {dur_text(c.save_s)} and a "
        f"recovery {dur_text(R)}; even at its best interval ({dur_text(f.tau)}) the job would need about {ratio} its "
        f"{dur_text(W)} of work. It would finish within 2x its work with an MTBF of {dur_text(need)} or more between "
        "those events (fewer or more reliable nodes), or with faster saves and restarts"
    )


def events_per_replication(s: Scenario) -> tuple[float, dict[str, float]]:
    """A first-order count of the events one replication simulates, and what drives it:
    checkpoints (``W / tau``), failures (every source at its long-run rate over the failure-free
    time ``W``, plus the injected ones), and the nodes whose processes start."""
    W = s.duration_s
    parts = {"checkpoints": W / s.interval_s}
    rates = failure_rates(s)
    parts["failures"] = rates.total * W + sum(inj.count for inj in s.failures.injected)
    parts["nodes"] = float(s.cluster.trainers + s.cluster.embedding_servers)
    return sum(parts.values()), parts


def check_budget(s: Scenario, max_events: float = MAX_EVENTS) -> None:
    """Refuse, before simulating, a scenario whose replications would each simulate more than
    ``max_events`` events, naming the keys that drive the count
    (:class:`~cprsim.errors.ParameterError` about ``max_events``, located at the scenario)."""
    total, parts = events_per_replication(s)
    if total <= max_events:
        return
    why = {
        "checkpoints": f"{parts['checkpoints']:.3g} checkpoints (job {dur_text(s.duration_s)} / "
        f"checkpoint.interval_h = {s.checkpoint.interval_h:.3g})",
        "failures": f"{parts['failures']:.3g} failures (the [failures] rates or injected counts)",
        "nodes": f"{parts['nodes']:.3g} nodes ([cluster])",
    }
    top = max(parts, key=parts.__getitem__)
    raise ParameterError(
        "max_events",
        f"about {total:.3g} events a replication, more than the budget of {max_events:.3g}: "
        f"mostly {why[top]}",
        s.name,
    )
