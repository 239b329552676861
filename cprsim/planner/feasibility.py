"""Hopeless regimes, detected analytically before anything is simulated.

A job whose failures come faster than it can save and recover never finishes in any useful
sense, and simulating it costs about ``lam x ratio x W`` failure events per replication. Before
simulating, the exact Poisson forms (``analytic.hopeless``, at the best interval) say whether the
expected wall time exceeds ``limit`` times the work, and ``analytic.mtbf_for_ratio`` what MTBF
would let the job finish within twice its work.

* strategies that roll back on every failure (``kind = "rollback"``, the planning part's
  ``kind``: :mod:`cprsim.sim.planning_parts`): every failure event;
* partial recovery: only job-level interruptions roll back; node failures cost a recovery each
  (``W x exp(lam x R)``, which is hopeless when the cluster fails faster than it recovers).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from cprsim import analytic
from cprsim.costs import Costs, costs_of
from cprsim.errors import InputError, ParameterError
from cprsim.failures.distributions import Distribution
from cprsim.planner.rates import Rates, failure_rates
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
        R_parts = [(resched, _resched_keys(s))]
    else:
        lam = rates.job
        restart = (
            s.failures.job.restart_s
            if s.failures.job is not None and s.failures.job.restart_s
            else resched
        )
        R, what = restart + c.load_s, "job-level interruptions roll the job back"
        R_parts = [(restart, "failures.job.restart_s" if restart != resched else _resched_keys(s))]
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
    job = analytic.Job(work_s=W, save_s=c.save_s)
    f = analytic.hopeless(job, analytic.Failures(rate=lam, recovery_s=R), limit=limit)
    if not f.hopeless:
        return
    items = {it.what: it for it in cost_items(s, c)}
    R_parts.append((c.load_s, items["a full load"].keys))
    rkeys = max(R_parts, key=lambda p: p[0])[1]
    ratio = f"{f.ratio:.3g}x" if math.isfinite(f.ratio) else f"10^{f.log10_ratio:.3g} times"
    try:
        need = analytic.mtbf_for_ratio(job, recovery_s=R, ratio=2.0)
        would = (
            f"It would finish within 2x its work with an MTBF of {dur_text(need)} or more between "
            "those events (fewer or more reliable nodes), or with faster saves and restarts"
        )
    except ValueError:  # no MTBF does: the saves or the recovery alone take longer than the job
        would = "No MTBF lets it finish within 2x its work: it needs faster saves and restarts"
    raise InputError(
        f"{s.name}: hopeless: {what} and they come every {dur_text(1 / lam)} while a save takes {dur_text(c.save_s)} "
        f"({items['a save'].keys}) and a recovery {dur_text(R)} ({rkeys}); even at its best interval ({dur_text(f.tau)}) the job would need about {ratio} its "
        f"{dur_text(W)} of work. {would}"
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


# -- the scenario's own numbers: finite costs, and a job that can progress at its own interval ------
#: a single cost or delay longer than this (s, about 31,700 years) is no time a simulation can
#: reach: refused whatever ``force`` says (a simulated clock this far out loses its seconds)
MAX_COST_S = 1e12
#: embedding rows beyond this (``access.rows``' own bound) are no table a layout can hold
MAX_ROWS = 1e15


class Item(NamedTuple):
    """One cost or delay of a scenario: what it is, its seconds and the keys it comes from (each
    ``key = value``)."""

    what: str
    seconds: float
    keys: str


def _g(x: float) -> str:
    return f"{x:.3g}"


def _largest(terms: list[tuple[float, str]]) -> tuple[float, str]:
    """The term that makes a ``max``: the largest, a non-finite one first."""
    return max(terms, key=lambda t: math.inf if not math.isfinite(t[0]) else t[0])


def _transfer(s: Scenario, measured: str, value: float, terms: list[tuple[float, str]]) -> str:
    """The keys a transfer's cost comes from: the measured ``[costs]`` key when the scenario gives
    one, else the latency or the bottleneck that dominates it."""
    if getattr(s.costs, measured) is not None:
        return f"costs.{measured} = {_g(value)}"
    lat = s.storage.latency_s
    t, keys = _largest(terms)
    if math.isfinite(t) and lat >= t:
        return f"storage.latency_s = {_g(lat)}"
    return keys


def _sizes(s: Scenario, dense: bool = True, embedding: bool = True) -> str:
    c = s.cluster
    parts = ([f"cluster.embedding_gb = {_g(c.embedding_gb)}"] if embedding else []) + (
        [f"cluster.dense_gb = {_g(c.dense_gb)}"] if dense else []
    )
    return ", ".join(parts + [f"cluster.optimizer_multiplier = {_g(c.optimizer_multiplier)}"])


def cost_items(s: Scenario, c: Costs | None = None) -> list[Item]:
    """The costs and delays a replication of ``s`` runs into, each with the keys it comes from:
    the save (the snapshot's stall as well in two-phase and tiered modes), the loads, the
    rescheduling, a job-level restart and the lifecycle's delays (means, seconds)."""
    c = c or costs_of(s)
    st, ck = s.storage, s.checkpoint
    ne = s.cluster.embedding_servers
    server, trainer, write, read = _transfer_terms(s, c)
    items = [
        Item("a save", c.save_s, _transfer(s, "save_s", c.save_s, [write, server, trainer])),
        Item("a full load", c.load_s, _transfer(s, "load_s", c.load_s, [read, server, trainer])),
        Item("a dense copy", c.dense_copy_s, trainer[1]),
    ]
    if ne:
        k1 = c.shard_load_s(1)
        shard = (
            c.shard_bytes / min(c.read_bps, c.node_bps),
            f"storage.read_gbps = {_g(st.read_gbps)}, storage.node_gbps = {_g(st.node_gbps)}, "
            + _sizes(s, dense=False),
        )
        items.append(Item("a shard load", k1, _transfer(s, "shard_load_s", k1, [shard])))
    if ck.mode != "blocking":
        snap = s.costs.snapshot_s is not None
        items.append(
            Item(
                "a snapshot",
                c.snapshot_s,
                f"costs.snapshot_s = {_g(c.snapshot_s)}"
                if snap
                else f"checkpoint.snapshot_gbps = {_g(ck.snapshot_gbps)}, " + _sizes(s),
            )
        )
    if ck.mode == "tiered":
        lat = ck.tier_spec.memory_latency_s
        items.append(
            Item(
                "a memory snapshot's fixed cost",
                lat,
                f"checkpoint.tiers.memory_latency_s = {_g(lat)}",
            )
        )
    return items + _delay_items(s)


def _transfer_terms(s: Scenario, c: Costs) -> tuple[tuple[float, str], ...]:
    """(server, trainer, write, read): the seconds each transfer term of a save or load takes
    (an embedding server's share over its link, a trainer's, the write and the read of the
    whole checkpoint), each with the keys it comes from."""
    st, cl = s.storage, s.cluster
    GBs = 1e9
    with np.errstate(all="ignore"):
        emb, dense = c.embedding_bytes, c.dense_bytes
        node = st.node_gbps * GBs
        ne = cl.embedding_servers
        server = (
            emb / (ne * node) if ne else 0.0,
            f"storage.node_gbps = {_g(st.node_gbps)}, " + _sizes(s, dense=False),
        )
        trainer = (
            c.trainer_bytes / node,
            f"storage.node_gbps = {_g(st.node_gbps)}, " + _sizes(s, embedding=False),
        )
        write = (
            (emb + dense) / (st.write_gbps * GBs),
            f"storage.write_gbps = {_g(st.write_gbps)}, " + _sizes(s),
        )
        read = (
            (emb + (dense if cl.dense == "sharded" else cl.trainers * dense))
            / (st.read_gbps * GBs),
            f"storage.read_gbps = {_g(st.read_gbps)}, " + _sizes(s),
        )
    return server, trainer, write, read


def _delay_items(s: Scenario) -> list[Item]:
    """The delays a failure runs into besides the loads: the rescheduling, a job-level restart
    and the lifecycle's delays (means, or a scale where there is no finite mean)."""
    items = [Item("a rescheduling", _typical(s.reschedule.dist), _resched_keys(s))]
    job = s.failures.job
    if job is not None and job.restart_s:
        items.append(
            Item("a job restart", job.restart_s, f"failures.job.restart_s = {_g(job.restart_s)}")
        )
    lc = s.lifecycle
    if lc is not None:
        for what, key, d in (
            ("a detection", "lifecycle.detection", lc.detection),
            ("a standby's swap", "lifecycle.swap", lc.swap),
            ("a spare's selection", "lifecycle.select", lc.select),
            ("an automatic repair", "lifecycle.repair.auto", lc.repair.auto),
            ("a manual repair", "lifecycle.repair.manual", lc.repair.manual),
        ):
            if d is not None and not d.zero:
                m = _typical(d.dist)
                how = "on average" if m == d.dist.mean() else "its scale (it has no finite mean)"
                items.append(Item(what, m, f"{key} = {_g(m)} s {how}"))
    return items


def _typical(d: Distribution) -> float:
    """A delay's mean, or, for a family without a finite mean (a log-logistic of shape <= 1, whose
    draws are all finite), its scale: the numbers check asks whether a draw can be simulated; the
    hopeless checks (skipped by ``force``) judge the infinite mean."""
    m = d.mean()
    return m if math.isfinite(m) or not math.isfinite(d.scale) else d.scale


def _resched_keys(s: Scenario) -> str:
    m = s.reschedule.dist.mean()
    if s.reschedule.mean_s is not None:
        return f"reschedule.mean_s = {_g(m)}"
    return f"reschedule = {_g(m)} s on average"


def _recovery_delay(s: Scenario) -> tuple[float, str]:
    """The mean wait before a failed node is back (the lifecycle's first pool: detection, then a
    standby's swap, a spare's selection or a repair), and what it comes from."""
    lc = s.lifecycle
    resched = s.reschedule.dist.mean()
    if lc is None:
        return resched, _resched_keys(s)

    def mean(d, default: float) -> float:
        return default if d is None else (0.0 if d.zero else d.dist.mean())

    det = mean(lc.detection, 0.0)
    select = mean(lc.select, resched)
    swap = "lifecycle.swap" if lc.swap is not None else "reschedule (a standby's swap)"
    sel = "lifecycle.select" if lc.select is not None else "reschedule (a spare's selection)"
    if lc.standbys:
        wait, what = mean(lc.swap, resched), f"{swap} = {_g(mean(lc.swap, resched))} s on average"
    elif lc.spares:
        wait, what = select, f"{sel} = {_g(select)} s on average"
    else:
        r = lc.repair
        wait = mean(r.auto, 0.0) + r.escalate_p * mean(r.manual, 0.0) + select
        what = (
            "lifecycle.standbys = 0 and lifecycle.spares = 0: every failed node waits for its "
            f"repair (lifecycle.repair, then {sel}): {_g(wait)} s on average"
        )
    if det > wait:
        return det + wait, f"lifecycle.detection = {_g(det)} s on average"
    return det + wait, what


def _save_stall(s: Scenario, c: Costs) -> tuple[float, str]:
    """What a checkpoint stalls the job for (blocking: the save; two-phase and tiered: the
    snapshot, and a persist longer than the interval(s) it has), and the keys of its largest part."""
    items = {it.what: it for it in cost_items(s, c)}
    ck, tau = s.checkpoint, s.interval_s
    if ck.mode == "blocking":
        return c.save_s, items["a save"].keys
    every = ck.tier_spec.persist_every if ck.mode == "tiered" else 1
    parts = [(c.snapshot_s, items["a snapshot"].keys)]
    parts.append((max(0.0, c.save_s - every * tau) / every, items["a save"].keys))
    if ck.mode == "tiered":
        it = items["a memory snapshot's fixed cost"]
        parts.append((it.seconds, it.keys))
    return sum(x for x, _ in parts), _largest(parts)[1]


def check_numbers(s: Scenario, c: Costs | None = None) -> None:
    """Refuse (InputError naming the keys) a scenario whose numbers no simulation can reach: a
    failure-free time, a cost or a delay that is not finite or longer than :data:`MAX_COST_S`, or
    embedding rows (from the bytes) beyond :data:`MAX_ROWS`. Whatever ``force`` says: the
    arithmetic downstream would overflow."""
    W = s.duration_s
    if not (W <= MAX_COST_S):
        key = (
            "job.duration_h" if s.job.duration_h is not None else "job.samples / job.samples_per_s"
        )
        raise InputError(
            f"{s.name}: {key}: a failure-free time of {_g(W)} s, more than any simulated time "
            f"({MAX_COST_S:.0e} s)"
        )
    for it in cost_items(s, c):
        if not (it.seconds <= MAX_COST_S):
            raise InputError(
                f"{s.name}: {it.keys}: {it.what} would take {_g(it.seconds)} s, "
                + (
                    "not a finite time"
                    if not math.isfinite(it.seconds)
                    else "more than any simulated time"
                )
                + f" (at most {MAX_COST_S:.0e} s)"
            )
    # failure-free, the saves alone: a job they stretch past MAX_WALL_RATIO x its work is
    # stopped by the engine anyway (cprsim.sim.engine.MAX_WALL_RATIO)
    from cprsim.sim.engine import MAX_WALL_RATIO

    stall, keys = _save_stall(s, c or costs_of(s))
    k = analytic.n_saves(W, s.interval_s)
    if k and not (W + k * stall <= MAX_WALL_RATIO * max(W, HOUR)):
        raise InputError(
            f"{s.name}: {keys}: a save takes {dur_text(stall)}, and {k:,} of them (one every "
            f"checkpoint.interval_h = {_g(s.checkpoint.interval_h)}) would stretch the job's "
            f"{dur_text(W)} of work past {MAX_WALL_RATIO:.0f}x, even without a failure"
        )
    a = s.access
    if a.rows is None and a.tables == "criteo-kaggle" and s.cluster.embedding_gb > 0:
        dim = a.dim if a.dim is not None else 64
        with np.errstate(all="ignore"):
            rows = s.cluster.embedding_gb * 1e9 / (dim * a.bytes_per_param)
        if not (rows <= MAX_ROWS):
            raise InputError(
                f"{s.name}: cluster.embedding_gb = {_g(s.cluster.embedding_gb)}, access.dim = {dim}, "
                f"access.bytes_per_param = {_g(a.bytes_per_param)}: {_g(rows)} embedding rows, more "
                f"than a layout holds ({MAX_ROWS:.0e}; set access.rows, or check the units)"
            )


def _own_interval_log_ratio(
    s: Scenario, kind: str, delta: float, R: float, rates, c: Costs
) -> float:
    """log(E[wall] / W) at the scenario's own interval (first order, Poisson failures): every
    failure rolls back (``kind = "rollback"``), or (partial recovery) a failure costs a recovery
    and aborts a save under way, which starts again."""
    W, tau = s.duration_s, s.interval_s
    lam = rates.total
    if lam <= 0:
        return math.log(W + analytic.n_saves(W, tau) * delta) - math.log(W)
    if kind == "rollback":
        return analytic._log_full_wall(W, tau, delta, lam, R) - math.log(W)
    k = analytic.n_saves(W, tau)
    log_wall = math.log(W) + rates.nodes * R
    if k:
        log_wall = analytic._logadd(
            log_wall, math.log(k) + analytic._log_segment_time(delta, lam, R)
        )
    return log_wall - math.log(W)


def check_progress(
    s: Scenario, kind: str = "rollback", c: Costs | None = None, limit: float = LIMIT
) -> None:
    """Refuse (InputError naming the keys that drive it) a scenario whose job, at its own
    checkpoint interval, would need more than ``limit`` times its work ``W``: a save, a restore or
    a delay too long for the time between failures, or for the job (:func:`check` asks the same at
    the best interval). Blocking saves also ask the strategy's own first-order overhead
    (its planning part's ``expected_overhead``: its partial saves, its restores)."""
    c = c or costs_of(s)
    rates = failure_rates(s)
    W, ck = s.duration_s, s.checkpoint
    save, rec = _stall_and_recovery(s, kind, c, rates)

    def ratio(sv: list[tuple[float, str]], rc: list[tuple[float, str]]) -> float:
        with np.errstate(all="ignore"):
            return _own_interval_log_ratio(
                s, kind, sum(x for x, _ in sv), sum(x for x, _ in rc), rates, c
            )

    log_limit = math.log(limit)
    lr = ratio(save, rec)
    if lr > log_limit:
        # blame the part whose removal lowers the ratio most
        best, keys, what = -math.inf, "", ""
        for i, (x, k) in enumerate(save):
            drop = lr - ratio(save[:i] + [(0.0, "")] + save[i + 1 :], rec)
            if x > 0 and drop > best:
                best, keys, what = drop, k, f"a save takes {dur_text(sum(v for v, _ in save))}"
        for i, (x, k) in enumerate(rec):
            drop = lr - ratio(save, rec[:i] + [(0.0, "")] + rec[i + 1 :])
            if x > 0 and drop > best:
                best, keys, what = drop, k, f"a recovery takes {dur_text(sum(v for v, _ in rec))}"
        mtbf = (
            f"failures come every {dur_text(1 / rates.total)}"
            if rates.total > 0
            else "nothing fails"
        )
        if not best > math.log(2.0):
            keys = f"checkpoint.interval_h = {_g(ck.interval_h)}"
            what = f"a save takes {dur_text(sum(v for v, _ in save))}"
        times = f"{math.exp(lr):.3g}x" if lr < 700 else f"10^{lr / math.log(10):.3g} times"
        raise InputError(
            f"{s.name}: {keys}: {what} and {mtbf}: at checkpoint.interval_h = {_g(ck.interval_h)} "
            f"the job would need about {times} its {dur_text(W)} of work (the job cannot progress; "
            "shorter saves and restores, or fewer failures)"
        )
    if ck.mode == "blocking":
        _check_own_overhead(s, c, rates, limit)


def _stall_and_recovery(
    s: Scenario, kind: str, c: Costs, rates: Rates
) -> tuple[list[tuple[float, str]], list[tuple[float, str]]]:
    """(save, recovery): the parts of a save's stall and of a recovery at the scenario's own
    interval (seconds, and the keys each comes from)."""
    tau, ck = s.interval_s, s.checkpoint
    items = {it.what: it for it in cost_items(s, c)}
    # the save's stall and the recovery, as parts (seconds, keys)
    save: list[tuple[float, str]] = []
    if ck.mode == "blocking":
        save.append((c.save_s, items["a save"].keys))
    else:
        save.append((c.snapshot_s, items["a snapshot"].keys))
        if ck.mode == "tiered":
            it = items["a memory snapshot's fixed cost"]
            save.append((it.seconds, it.keys))
        # a persist longer than the interval(s) it has makes the next snapshot wait for it
        every = ck.tier_spec.persist_every if ck.mode == "tiered" else 1
        save.append((max(0.0, c.save_s - every * tau) / every, items["a save"].keys))
    delay, delay_keys = _recovery_delay(s)
    restart = (
        s.failures.job.restart_s if s.failures.job is not None and s.failures.job.restart_s else 0.0
    )
    if kind == "rollback":
        load = (c.load_s, items["a full load"].keys)
    elif "a shard load" in items:
        load = (items["a shard load"].seconds, items["a shard load"].keys)
    else:
        load = (c.dense_copy_s, items["a dense copy"].keys)
    rec: list[tuple[float, str]] = [(delay, delay_keys), load]
    if restart and rates.job > 0:
        rec.append((restart, items["a job restart"].keys))
    return save, rec


def _check_own_overhead(s: Scenario, c: Costs, rates: Rates, limit: float) -> None:
    """Refuse a scenario whose strategy's own first-order overhead at its interval (its planning
    part's ``expected_overhead``) would need more than ``limit`` times the job's work."""
    from cprsim.sim import strategies as registry

    W, tau, ck = s.duration_s, s.interval_s, s.checkpoint
    cls = registry.get(s.strategy.name)
    try:
        with np.errstate(all="ignore"):
            own = 1.0 + float(cls.planning.expected_overhead(s, s.strategy.params, tau, rates, c))
    except (ArithmeticError, ValueError):
        own = math.inf
    if not (own <= limit):
        params = ", ".join(f"strategy.{k} = {v!r}" for k, v in s.strategy.params.items())
        raise InputError(
            f"{s.name}: strategy.name = {s.strategy.name!r}"
            + (f" ({params})" if params else "")
            + f": its saves and restores at checkpoint.interval_h = {_g(ck.interval_h)} would "
            f"need about {own:.3g}x the job's {dur_text(W)} of work (the job cannot progress)"
        )
