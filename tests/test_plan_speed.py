"""The planner's speed-ups keep its answers (issue 29 item 4): the search's share in closed form,
each run scored once, the search aiming at the top of its bracket after a failure, and progress
counted in replications."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scenario_builder import FakeRuns
from scipy import optimize, stats

from cprsim import scenario as sc
from cprsim.planner import estimated_replications, make_plan
from cprsim.planner import search as se
from cprsim.scenario import HOUR


def _share_by_root(q: float, n_confirm: int, n_search: int) -> float:
    """search_share as it was computed before: the root of scipy.stats' binomial survival."""
    need = se.min_successes(n_confirm, q)
    if need is None:
        return q

    def pass_prob(p: float) -> float:
        return float(stats.binom.sf(need - 1, n_confirm, p)) - 0.5

    half = 1.0 if pass_prob(1.0 - 1e-12) < 0 else float(optimize.brentq(pass_prob, 1e-9, 1 - 1e-12))
    k = min(n_search, math.ceil(half * n_search - 1e-9))
    base = se.min_successes(n_search, q)
    if base is not None and k <= base:
        return q
    return max(q, se.cp_lower(k, n_search))


def test_search_share_in_closed_form_is_the_root_it_replaces():
    for q in (0.5, 0.8, 0.9, 0.95, 0.99):
        for n_confirm in (2, 10, 29, 40, 59, 100, 200, 500):
            for n_search in (20, 40, 100, 199, 200, 1000):
                assert se.search_share.__wrapped__(q, n_confirm, n_search) == _share_by_root(
                    q, n_confirm, n_search
                ), (q, n_confirm, n_search)


@pytest.mark.parametrize("complete_pass", [False, True])
def test_curtailed_scores_each_run_once_and_keeps_its_verdict(complete_pass):
    rng = np.random.default_rng(11)
    for trial in range(60):
        x = np.where(rng.random(200) < rng.uniform(0.85, 1.0), 0.5, 2.0)
        scored: list[int] = []

        def score(rs: list, scored: list[int] = scored) -> np.ndarray:
            scored.append(len(rs))
            return np.array([r.pls for r in rs])

        runs = FakeRuns(x)
        pred = None if complete_pass else 0.05
        v, res = se.curtailed(runs, 200, 0.9, score, predictive=pred, complete_pass=complete_pass)
        assert sum(scored) == len(res) == runs.asked, trial  # every run scored once, none twice
        if complete_pass:
            full = se.judge(x, 1.0, 0.9)
            assert v.passed == full.passed
            if v.passed:
                assert v == full


def _search(exponent: float, star_h: float) -> tuple[float | None, float | None, list[bool]]:
    """A search on runs whose scores grow as ``(tau / star)^exponent`` (the same replications at
    every interval, as common random numbers give): (its answer, the largest interval whose
    verdict and every smaller one's pass, the verdicts it took, in order)."""
    cands = se.grid_below(8 * HOUR, 0.05 * HOUR)
    z = np.random.default_rng(3).lognormal(0.0, 0.3, 200)
    z = z / z.max()
    runs: dict[float, FakeRuns] = {}

    def runs_of(t: float) -> FakeRuns:
        if t not in runs:
            runs[t] = FakeRuns(z * (t / (star_h * HOUR)) ** exponent)
        return runs[t]

    s = se.PlsSearch(None, "x", lambda t: {}, 1.0, 0.9, 200, lambda k: None, runs_of=runs_of)  # type: ignore[arg-type]
    answer = s.run(cands, 2 * HOUR)
    verdicts = [s.cache[t].passed for t in s.cache]
    ok = [c for c in cands if all(s.ok(d).passed for d in cands if d <= c)]
    return answer, (max(ok) if ok else None), verdicts


@pytest.mark.parametrize("exponent", [0.5, 1.0, 2.0, 3.0])
def test_the_search_finds_the_largest_passing_interval(exponent):
    for star_h in (0.3, 0.7, 1.1, 1.9, 3.3, 5.0):
        answer, truth, verdicts = _search(exponent, star_h)
        assert answer == truth, star_h
        assert sum(verdicts) <= 3


def test_after_a_failure_near_the_top_the_search_passes_once():
    """PLS growing as the interval squared: the first verdict (8 h) fails, the rule's next target
    lies within two grid steps of the bracket's top, which the search tries first: one pass
    (the expensive verdict), not a pass below the answer and then the answer's."""
    answer, truth, verdicts = _search(2.0, 3.3)
    assert answer == truth
    assert verdicts[0] is False and sum(verdicts) == 1


def test_plan_progress_counts_every_replication_it_runs(monkeypatch, linear_accuracy):
    s = sc.load("toy", {"replications": 40})
    ran: list[int] = []
    real = se.run_replications

    def counting(sc_, n, **kw):
        ran.append(n)
        return real(sc_, n, **kw)

    monkeypatch.setattr(se, "run_replications", counting)
    ticks: list[int] = []
    make_plan(
        s,
        0.001,
        calibration=linear_accuracy(),
        replications=40,
        search_replications=40,
        progress=ticks.append,
    )
    assert ticks and set(ticks) == {1}
    assert len(ticks) == sum(ran) > 40
    # the progress display's total: an estimate, within a factor of two here
    est = estimated_replications(s, replications=40, search_replications=40)
    assert 0.5 * len(ticks) <= est <= 2 * len(ticks), (est, len(ticks))
