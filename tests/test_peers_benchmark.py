"""benchmarks/peers.py: its cases are the ones issue 26 names, its scenarios validate, and both
models agree with the exact overhead on a few replications (a check of the wiring, not a timing)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
try:
    import peers
finally:
    sys.path.pop(0)


def test_the_cases_are_issue_26s_same_work_cases():
    assert 100 * peers.exact_overhead(peers.CASES["3min"], "job") == pytest.approx(11.259, abs=5e-4)
    assert 100 * peers.exact_overhead(peers.CASES["15min"], "job") == pytest.approx(
        17.306, abs=5e-4
    )
    # node failures at the same total rate: only the failures during a reschedule add a little
    for case in peers.CASES.values():
        job, node = (peers.exact_overhead(case, f) for f in peers.FAILURES)
        assert job < node < job * 1.001


@pytest.mark.parametrize("failures", peers.FAILURES)
@pytest.mark.parametrize("case", list(peers.CASES))
def test_both_models_match_the_exact_overhead(case, failures):
    c, n = peers.CASES[case], 25
    exact = peers.exact_overhead(c, failures)
    s = peers.cprsim_scenario(n, c, failures)
    _, wc = peers.run_cprsim(s, n)
    _, wh = peers.run_handwritten(n, c, failures)
    for walls in (wc, wh):
        m = peers.Mean.of(walls, exact)
        assert m.n == n and abs(m.z) < 4.5  # fixed seeds: deterministic


def test_main_prints_and_writes_the_figures(tmp_path, capsys):
    out = tmp_path / "peers.json"
    args = ["--reps", "6", "--rounds", "1", "--case", "3min", "--failures", "node"]
    peers.main([*args, "--json", str(out)])
    text = capsys.readouterr().out
    assert "case 3min, node failures" in text and "z = " in text and "ratio" in text
    doc = json.loads(out.read_text())
    assert doc["command"].endswith(" ".join(args + ["--json", str(out)]))
    (r,) = doc["results"]
    assert r["replications"] == 6 and r["failures"] == "node"
    assert set(r["cprsim"]) == {"mean", "se", "n", "z"}
