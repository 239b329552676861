"""Repairs that cure (issue 26, item 1): a bad machine's repair may make it good again, and a
false repair (reported success, the fault stays) applies to bad machines only.

The oracle is :func:`cprsim.analytic.health_chain`, each machine a continuous-time Markov chain.
The fleet (:class:`cprsim.sim.lifecycle.Fleet`) runs on its own here, without a job, for a fixed
time ``T``: with no detection, selection or spare pool, a repaired machine goes straight back
to the slot that waits for it, so the machines are independent copies of the chain. Per
replication we count the bad machines and the slots filled (availability) at ``T``, the failures
of bad and of good machines and the cures; the 95% CI of each mean over replications (fixed seed) must cover ``N`` times the chain's
expectation, and, so that the test can fail, must exclude what the chain without cures says.
"""

from __future__ import annotations

import math

import pytest

from cprsim import analytic
from cprsim import scenario as sc
from cprsim.scenario import HOUR
from cprsim.sim.engine import _urgent_timeout
from cprsim.sim.lifecycle import Fleet
from cprsim.sim.replicate import estimate
from cprsim.sim.simpy_adapter import Env

N = 40  #: embedding servers (slots and machines)
#: 5 means compared per case, 2 cases: each CI at 1 - 0.05/10 (Bonferroni), so that the whole test
#: is wrong at most 5% of the time when the model is right
LEVEL = 1 - 0.05 / 10
MTBF_H = 10.0


class _Stub:
    """What the fleet needs of a run: ``fail`` (a slot's machine failed) and ``node_back``."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.fails = 0

    def fail(self, nodes, rhos) -> None:
        for n in nodes:
            self.fails += 1
            self.fleet.on_fail(n)

    def node_back(self, n: int, up: float) -> None:
        pass


def _scenario(repair: dict, health: dict) -> sc.Scenario:
    return sc.load("toy").with_updates(
        {
            "cluster.trainers": 1,
            "cluster.embedding_servers": N,
            "failures": {
                "embedding": {"family": "exponential", "mtbf_h": MTBF_H},
                "start": "fresh",
            },
            "lifecycle": {
                "select": {"mean_s": 0.0},
                "repair": repair,
                "health": health,
            },
        }
    )


def _run_fleet(s: sc.Scenario, rep: int, T: float) -> dict[str, float]:
    env = Env()
    f = s.failures
    assert f.embedding is not None
    fleet = Fleet(env, s, rep, (None, f.embedding.dist), False, _urgent_timeout)
    stub = _Stub(fleet)
    fleet.start(stub)  # type: ignore[arg-type]
    env.run(until=T)
    nt = s.cluster.trainers
    machines = range(nt, fleet.n_machines)
    in_slot = {m: slot for slot, m in enumerate(fleet.machine) if m is not None}
    bad = sum(
        1 for m in machines if fleet.bad[m] or (m in in_slot and fleet.turn_at[in_slot[m]] <= T)
    )
    return {
        "bad": bad,
        "in_service": sum(
            1 for slot in range(nt, fleet.n_slots) if fleet.machine[slot] is not None
        ),
        "failures_bad": fleet.failures_bad,
        "failures_good": stub.fails - fleet.failures_bad,
        "cures": fleet.cured,
    }


CASES = {  # name -> (repair, health, T in hours: where much is still to cure)
    # bad machines from the start, cured by automatic repairs only
    "auto": (
        {"auto": {"family": "exponential", "mean_s": 2 * HOUR}, "cure_auto_p": 0.5},
        {"bad_fraction": 0.4, "bad_multiplier": 8.0},
        6.0,
    ),
    # escalations to manual repair that cure, false repairs of bad machines, machines turning bad
    "manual+false+aging": (
        {
            "auto": {"family": "exponential", "mean_s": 1 * HOUR},
            "escalate_p": 0.5,
            "manual": {"family": "exponential", "mean_s": 4 * HOUR},
            "cure_auto_p": 0.2,
            "cure_manual_p": 0.6,
            "false_success_p": 0.5,
            "recur": {"family": "exponential", "mtbf_h": 0.5},
        },
        {"bad_fraction": 0.3, "bad_multiplier": 5.0, "turn_bad_per_h": 0.01},
        12.0,
    ),
}


def _chain(repair: dict, health: dict, T: float, cures: bool = True) -> dict[str, float]:
    mean_s = {k: v["mean_s"] for k, v in repair.items() if isinstance(v, dict) and "mean_s" in v}
    return analytic.health_chain(
        1 / (MTBF_H * HOUR),
        health["bad_multiplier"],
        1 / mean_s["auto"],
        T,
        bad0=health["bad_fraction"],
        turn_bad=health.get("turn_bad_per_h", 0.0) / HOUR,
        escalate_p=repair.get("escalate_p", 0.0),
        mu_manual=1 / mean_s.get("manual", 1.0),
        cure_auto_p=repair.get("cure_auto_p", 0.0) if cures else 0.0,
        cure_manual_p=repair.get("cure_manual_p", 0.0) if cures else 0.0,
        false_success_p=repair.get("false_success_p", 0.0),
        recur_rate=1 / (repair.get("recur", {}).get("mtbf_h", 1.0) * HOUR),
    )


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_cures_follow_the_health_chain(case):
    repair, health, hours = CASES[case]
    s = _scenario(repair, health)
    T = hours * HOUR
    runs = [_run_fleet(s, rep, T) for rep in range(150)]
    want = _chain(repair, health, T)
    without = _chain(repair, health, T, cures=False)
    for key, exact, wrong in (
        ("bad", N * want["bad_share"], N * without["bad_share"]),
        ("failures_bad", N * want["failures_bad"], N * without["failures_bad"]),
        ("failures_good", N * want["failures_good"], N * without["failures_good"]),
        ("cures", N * want["cures"], 0.0),
        ("in_service", N * want["in_service"], N * without["in_service"]),
    ):
        m = estimate([r[key] for r in runs], LEVEL, non_negative=False)
        assert m.lo <= exact <= m.hi, (case, key, exact, m)
        if key not in ("failures_good", "in_service") or case == "auto":  # without cures: rejected
            assert not m.lo <= wrong <= m.hi, (case, key, wrong, m)


def test_the_health_chain_by_hand():
    """No cure and no aging: the bad share stays the initial one; a certain cure at the first
    automatic repair of an immediate-repair machine: a bad machine is good after its first
    failure, P(bad at t) = bad0 exp(-k lam t) as the repair time goes to 0."""
    lam, k = 1.0, 4.0
    c = analytic.health_chain(lam, k, 5.0, 2.0, bad0=0.3)
    assert c["bad_share"] == pytest.approx(0.3)
    assert c["bad_share_stationary"] == pytest.approx(0.3)
    assert c["cures"] == 0.0
    fast = analytic.health_chain(lam, k, 1e6, 0.5, bad0=0.3, cure_auto_p=1.0)
    assert fast["bad_share"] == pytest.approx(0.3 * math.exp(-k * lam * 0.5), rel=1e-4)
    assert fast["cures"] == pytest.approx(0.3 * (1 - math.exp(-k * lam * 0.5)), rel=1e-4)
    # aging and cures balance: a good machine turns bad at theta, a bad one is cured after a
    # geometric number of failures (1/c on average, each k lam apart): share (1/(c k lam)) /
    # (1/(c k lam) + 1/theta) as repairs become instantaneous
    theta, cure = 0.1, 0.25
    st = analytic.health_chain(lam, k, 1e6, 1.0, turn_bad=theta, cure_auto_p=cure)
    tb, tg = 1 / (cure * k * lam), 1 / theta
    assert st["bad_share_stationary"] == pytest.approx(tb / (tb + tg), rel=1e-4)


def test_a_false_repair_no_longer_touches_good_machines():
    """false_success_p applies to bad machines only: with none, it changes nothing (the same
    failures, byte for byte, as without it)."""
    T = 40 * HOUR
    base = {"auto": {"family": "exponential", "mean_s": 2 * HOUR}}
    plain = _scenario(base, {"bad_fraction": 0.0})
    false = _scenario(
        {**base, "false_success_p": 0.9, "recur": {"family": "exponential", "mtbf_h": 0.1}},
        {"bad_fraction": 0.0},
    )
    for rep in range(3):
        assert _run_fleet(plain, rep, T) == _run_fleet(false, rep, T)


def test_cure_settings_are_validated():
    from cprsim.errors import InputError

    s = sc.load("dlrm-spares")
    for key, bad in (
        ("lifecycle.repair.cure_auto_p", 1.5),
        ("lifecycle.repair.cure_manual_p", -0.1),
        ("lifecycle.repair.cure_auto_p", math.nan),
    ):
        with pytest.raises(InputError, match=key.rsplit(".", 1)[1]):
            s.with_updates({key: bad})
    ok = s.with_updates({"lifecycle.repair.cure_auto_p": 0.3})
    assert ok.lifecycle is not None and ok.lifecycle.repair.cure_auto_p == 0.3
