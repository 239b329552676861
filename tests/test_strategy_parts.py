"""A strategy in parts (issue 28, item 1): its own random stream, its planning part, its calibration
emulation part.

* **Stream**: a strategy that draws from ``setup.rng``/``run.rng`` (the stochastic test plugin
  tests/plugins/cprsim_jitter.py) gives the same bytes for a sweep at ``--jobs 1`` and ``--jobs 2``
  and on a rerun, as the example plugin does (tests/test_plugin.py); its draws depend on the seed
  and the replication only.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from test_plugin import cprsim, example_site, make_dist, ok

from cprsim import scenario as sc
from cprsim.sim import engine, strategies

JITTER_FILE = Path(__file__).resolve().parent / "plugins" / "cprsim_jitter.py"
JITTER = JITTER_FILE.read_text()


@pytest.fixture
def registered():
    """Register strategies at test time (``load(path, module_name)``); the registry is restored
    after."""
    strategies.ensure_loaded()
    saved = dict(strategies.REGISTRY)
    added: list[str] = []

    def load(path: Path, name: str):
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        added.append(name)
        spec.loader.exec_module(module)
        return module

    yield load
    strategies.REGISTRY.clear()
    strategies.REGISTRY.update(saved)
    for name in added:
        sys.modules.pop(name, None)


# -- the strategy's own random stream ------------------------------------------------------------------
def test_a_strategy_draws_from_its_own_stream_per_replication(registered):
    registered(JITTER_FILE, "cprsim_jitter_parts_test")
    s = sc.load("toy", {"strategy.name": "jitter"})
    full = sc.load("toy", {"strategy.name": "full"})

    def run(s, rep):
        return engine.simulate_one(s, rep)[0]

    a, b, again = run(s, 0), run(s, 1), run(s, 0)
    assert a == again  # the seed and the replication decide the draws
    assert a.save_s != b.save_s  # one stream per replication
    # the draws change the saves' times, and nothing else: the failures are full recovery's
    f = run(full, 0)
    assert a.save_s != f.save_s
    assert (a.failures_trainer, a.failures_embedding) == (f.failures_trainer, f.failures_embedding)
    # a strategy that never draws makes no generator
    r = engine.Run(
        scenario=full,
        costs=engine.costs_of(full),
        env=engine.Env(),
        record=False,
        n_trainers=full.cluster.trainers,
        n_embedding=full.cluster.embedding_servers,
        W=full.duration_s,
        tau=full.interval_s,
    )
    assert r.stream._rng is None


SWEEP = """
name = "stochastic"
scenario = "toy"
replications = 3
strategies = ["full", "jitter", { name = "jitter", label = "j9", spread = 0.9 }, "compressed"]
[grid]
"checkpoint.interval_h" = [0.25, 0.5]
"""


@pytest.mark.slow
def test_a_stochastic_plugin_sweeps_to_the_same_bytes_whatever_the_workers(tmp_path):
    site = example_site(tmp_path / "site")
    make_dist(site, {"jitter": "cprsim_jitter"}, {"cprsim_jitter": JITTER}, name="cprsim-jitter")
    sweep = tmp_path / "s.toml"
    sweep.write_text(SWEEP)
    outs = {}
    for label, jobs in (("j1", "1"), ("j2", "2"), ("j1-again", "1")):
        outs[label] = tmp_path / label
        ok(cprsim("sweep", sweep, "--jobs", jobs, "--out", outs[label], site=site, cwd=tmp_path))
    rows = (outs["j1"] / "summary.csv").read_text().splitlines()
    assert [row.split(",")[1] for row in rows[1:]] == ["full", "jitter", "j9", "compressed"] * 2
    for name in ("results.csv", "summary.csv"):
        ref = (outs["j1"] / name).read_bytes()
        assert (outs["j2"] / name).read_bytes() == ref, name
        assert (outs["j1-again"] / name).read_bytes() == ref, name
