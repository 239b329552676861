"""Failure clocks (``[failures.clock]``, issue 26 item 2): in which states a machine wears.

* ``in-service`` (the default) and ``powered`` against the machine-repair model with spares: cold
  spares (only machines in service fail, :func:`cprsim.analytic.machine_repair_availability`) and
  hot spares (idle machines fail too, :func:`~cprsim.analytic.machine_repair_availability_powered`).
* ``computing`` against the renewal argument of :func:`cprsim.analytic.full_wall_computing`
  (failures strike compute only: a segment of ``a`` seconds costs ``expm1(lam a) (1/lam + R)``),
  which the wall-clock form (:func:`~cprsim.analytic.full_wall`) does not match; and, on a
  recorded timeline, no failure inside a save, a restore or a wait.

Statistical tests: the 95% CI of the mean over replications (fixed seed) must cover the closed
form and exclude the other policy's.
"""

from __future__ import annotations

import pytest
from scenario_builder import GONE, small, validated

from cprsim import analytic
from cprsim import scenario as sc
from cprsim.costs import costs_of
from cprsim.errors import InputError
from cprsim.scenario import HOUR
from cprsim.sim.engine import simulate_one
from cprsim.sim.replicate import estimate, run_replications

BASE = small(
    replications=GONE,
    name="clock",
    seed=21,
    cluster={"embedding_servers": 8, "embedding_gb": 40.0, "dense_gb": 0.4},
    job={"duration_h": 20.0, "samples_per_s": 10000.0},
    reschedule={"mean_s": 900.0},
    strategy={"name": "full"},
)


def scen(**upd) -> sc.Scenario:
    return validated(BASE, **upd)


ALL_COMPUTING = {
    "failures.clock.trainer": "computing",
    "failures.clock.embedding": "computing",
    "failures.clock.job": "computing",
}


@pytest.mark.slow
@pytest.mark.parametrize("streams", ["bulk", "per-node"])
def test_node_failures_on_the_compute_clock_follow_the_renewal_form(streams):
    """12 nodes failing every 30 h each (a job MTBF of 2.5 h), full recovery, a 1 h reschedule:
    with the compute clock, failures only strike compute, each costing the reschedule and the
    load, so E[wall] = full_wall_computing; the wall clock's exact form (failures during saves and
    waits too) is rejected."""
    s = scen(**{"failures.embedding": {"family": "exponential", "mtbf_h": 30.0}}).with_updates(
        {
            **ALL_COMPUTING,
            "failures.trainer": {"family": "exponential", "mtbf_h": 30.0},
            "reschedule.mean_s": 3600.0,
        }
    )
    c = costs_of(s)
    lam = 12 / (30.0 * HOUR)
    R = 3600.0 + c.load_s
    res = [simulate_one(s, i, streams=streams)[0] for i in range(400)]
    e = estimate([r.wall_s for r in res])
    job = analytic.Job(work_s=s.duration_s, save_s=c.save_s)
    exact = analytic.full_wall_computing(
        job, s.interval_s, analytic.Failures(rate=lam, recovery_s=R)
    )
    assert e.lo <= exact <= e.hi, (e, exact)
    lam_wait = analytic.lam_recovery_nodes(3600.0, lam / 12, 12)
    failures = analytic.Failures(rate=lam, recovery_s=R, wait_rate=lam_wait, restore_s=c.load_s)
    wall = analytic.full_wall(job, s.interval_s, failures)
    assert not e.lo <= wall <= e.hi, (e, wall)


@pytest.mark.slow
def test_job_failures_on_the_compute_clock_follow_the_renewal_form():
    """Job-level interruptions every 2 h of compute, a 600 s restart: full_wall_computing with
    R = restart + load; the in-service clock gives full_wall (the oracle of test_job_failures)."""
    upd = {"failures.job": {"family": "exponential", "mtbf_h": 2.0, "restart_s": 600.0}}
    c = costs_of(scen(**upd))
    lam, R = 1 / (2.0 * HOUR), 600.0 + c.load_s
    on = scen(**upd, **{"failures.clock.job": "computing"})
    off = scen(**upd)
    e_on = estimate([r.wall_s for r in run_replications(on, 400)[0]])
    e_off = estimate([r.wall_s for r in run_replications(off, 400)[0]])
    W, tau = on.duration_s, on.interval_s
    job, failures = (
        analytic.Job(work_s=W, save_s=c.save_s),
        analytic.Failures(rate=lam, recovery_s=R),
    )
    assert e_on.lo <= analytic.full_wall_computing(job, tau, failures) <= e_on.hi
    assert e_off.lo <= analytic.full_wall(job, tau, failures) <= e_off.hi
    assert not e_on.lo <= analytic.full_wall(job, tau, failures) <= e_on.hi


@pytest.mark.parametrize(
    "strategy,lifecycle", [("full", False), ("partial", False), ("full", True)]
)
def test_no_failure_strikes_a_save_a_restore_or_a_wait_on_the_compute_clock(strategy, lifecycle):
    """On recorded timelines: every failure falls outside the saves, restores and waits (it may
    fall on their ends); with the in-service clock some fall inside (the check can fail). With
    a lifecycle the machines' lifetimes run on the compute clock too."""

    def inside(s: sc.Scenario) -> tuple[int, int]:
        """(failures while a save, restore or wait was under way, all failures); a failure ends
        the phase it interrupts (no end event then)."""
        n_in = n_all = 0
        for rep in range(12):
            _, ev = simulate_one(s, rep, record=True)
            opened: dict[str, float] = {}
            for x in ev:
                what, _, edge = x.kind.rpartition("_")
                if what in ("save", "load", "resched") and edge in ("start", "end"):
                    if edge == "start":
                        opened[what] = x.time_s
                    else:
                        opened.pop(what, None)
                elif x.kind == "fail":
                    n_all += 1
                    n_in += any(t < x.time_s for t in opened.values())
                    opened.clear()
        return n_in, n_all

    upd = {
        "failures.embedding": {"family": "exponential", "mtbf_h": 8.0},
        "failures.job": {"family": "exponential", "mtbf_h": 6.0, "restart_s": 1800.0},
        "strategy.name": strategy,
        "costs.save_s": 600.0,
        "costs.load_s": 900.0,
    }
    if lifecycle:  # rarer failures: the lifecycle's waits make the in-service clock's job long
        upd["failures.embedding"] = {"family": "exponential", "mtbf_h": 30.0}
        upd["failures.job"] = {"family": "exponential", "mtbf_h": 12.0, "restart_s": 1800.0}
        upd["lifecycle"] = {
            "standbys": 1,
            "spares": 2,
            "detection": {"family": "exponential", "mean_s": 120.0},
            "swap": {"mean_s": 300.0},
            "select": {"mean_s": 900.0},
            "health": {"bad_fraction": 0.2, "bad_multiplier": 4.0, "turn_bad_per_h": 0.01},
        }
    n_in, n_all = inside(scen(**upd, **ALL_COMPUTING))
    assert n_all > 50 and n_in == 0
    n_in, n_all = inside(scen(**upd))
    assert n_in > 0


@pytest.mark.slow
@pytest.mark.parametrize("spares,crews", [(2, None), (1, 2)])
def test_powered_spares_fail_as_the_hot_standby_machine_repair_model_says(spares, crews):
    """The lifecycle's spares, idle, wear too (``powered``): 4 embedding slots failing at 1/h, each
    spare too, exponential repairs of 1.5 h: the share of wall time with every slot filled is the
    hot-standby chain's; the cold-standby chain (the in-service clock) is rejected."""
    N, lam, repair_h = 4, 1 / HOUR, 1.5
    s = scen(
        **{
            "seed": 5,
            "cluster.embedding_servers": N,
            "job.duration_h": 150.0,
            "failures": {
                "embedding": {"family": "exponential", "mtbf_h": 1.0},
                "start": "fresh",
                "clock": {"embedding": "powered"},
            },
            "costs.save_s": 1.0,
            "costs.load_s": 1.0,
            "checkpoint.interval_h": 0.02,
            "lifecycle": {
                "spares": spares,
                "select": {"mean_s": 0.0},
                "repair": {
                    "auto": {"family": "exponential", "mean_s": repair_h * HOUR},
                    "crews": crews,
                },
            },
        }
    )
    res, _ = run_replications(s, 60)
    avail = estimate([1.0 - r.unfilled_s / r.wall_s for r in res], non_negative=False)
    mu = 1 / (repair_h * HOUR)
    hot = analytic.machine_repair_availability_powered(N, spares, lam, mu, crews)
    cold = analytic.machine_repair_availability(N, spares, lam, mu, crews)
    assert avail.lo <= hot <= avail.hi, (hot, avail)
    assert not avail.lo <= cold <= avail.hi, (cold, avail)


def test_the_closed_forms_by_hand():
    # no spare: hot and cold spares are the same chain
    assert analytic.machine_repair_availability_powered(3, 0, 0.5, 2.0) == pytest.approx(
        analytic.machine_repair_availability(3, 0, 0.5, 2.0)
    )
    # one slot, one hot spare, one crew: states 0, 1, 2 failed with births 2 lam, lam
    lam, mu = 1.0, 3.0
    p = [1.0, 2 * lam / mu, 2 * lam / mu * lam / mu]
    assert analytic.machine_repair_availability_powered(1, 1, lam, mu, 1) == pytest.approx(
        (p[0] + p[1]) / sum(p)
    )
    # one segment with no failure rate: its length; a segment of a with rate lam: expm1(lam a)(1/lam + R)
    job = analytic.Job(work_s=10.0, save_s=1.0)
    assert (
        analytic.full_wall_computing(job, 20.0, analytic.Failures(rate=0.0, recovery_s=5.0)) == 10.0
    )
    assert analytic.full_wall_computing(
        job, 20.0, analytic.Failures(rate=0.1, recovery_s=5.0)
    ) == pytest.approx((2.718281828459045 - 1) * (10 + 5))
    # with failures: the compute clock costs less than the wall clock (no failure in a recovery)
    job, failures = (
        analytic.Job(work_s=3600, save_s=30),
        analytic.Failures(rate=1e-3, recovery_s=300),
    )
    assert analytic.full_wall_computing(job, 600, failures) < analytic.full_wall(job, 600, failures)
    # it has no wait or restore to strike: a failures object that sets them is refused
    with pytest.raises(ValueError, match="no failure strikes a recovery"):
        analytic.full_wall_computing(
            job, 600, analytic.Failures(rate=1e-3, recovery_s=300, restore_s=100)
        )


def test_the_default_clock_changes_nothing_and_bad_values_are_refused():
    s = scen(**{"failures.embedding": {"family": "exponential", "mtbf_h": 5.0}})
    same = s.with_updates(
        {"failures.clock.trainer": "in-service", "failures.clock.embedding": "in-service"}
    )
    for rep in range(3):
        assert simulate_one(s, rep)[0] == simulate_one(same, rep)[0]
    with pytest.raises(InputError, match="clock"):
        s.with_updates({"failures.clock.embedding": "sometimes"})
    with pytest.raises(InputError, match="clock"):
        s.with_updates({"failures.clock.job": "powered"})
