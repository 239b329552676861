"""The calibration DLRM, its emulated embedding servers, PLS against the simulator, the CLI."""

from __future__ import annotations

import dataclasses
import os
import tomllib

import numpy as np
import pytest

# as `cprsim calibrate` does: OpenMP threads sleep rather than spin while waiting (read when torch
# loads OpenMP; the 2-thread costs check was 25x slower with spinning threads on a busy machine)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from cprsim import scenario as sc  # noqa: E402
from cprsim.calibrate import load_calibration  # noqa: E402
from cprsim.calibrate import runner as R  # noqa: E402
from cprsim.calibrate.emulation import Emulator, Setting, periodic_actions, shard_of_rows  # noqa: E402
from cprsim.calibrate.fromsim import sim_schedule  # noqa: E402

pytestmark = pytest.mark.dlrm

SMALL = dataclasses.replace(
    R.PRESETS["quick"],
    name="test",
    train_samples=60_000,
    test_samples=20_000,
    batch=256,
    seeds=(0,),
    budgets=(0.5,),
)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One torch thread, as calibration runs use: two OpenMP threads on a busy 2-core machine
    can be several times slower than one."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def prep():
    return R.synthetic_prepared(SMALL, 0)


@pytest.fixture(scope="module")
def base(prep):
    return R.train(prep, SMALL.model, 0)[0].state_tensors()


def _emu(prep, setting, mode="measured"):
    n = prep.n_iters
    fut = prep.grows[: n * prep.batch].reshape(n, -1)
    return lambda m: Emulator(
        m, SMALL.n_shards, setting, n, mode, 0, future_rows=fut, batch=prep.batch
    )


@pytest.mark.slow
def test_model_learns(prep):
    model, _ = R.train(prep, SMALL.model, 0)
    auc, ll = R.evaluate(model, prep)
    assert auc > 0.7, auc
    base_rate = float(prep.test_label.mean())
    entropy = -(base_rate * np.log(base_rate) + (1 - base_rate) * np.log(1 - base_rate))
    assert ll < entropy


@pytest.mark.slow
def test_training_is_deterministic(prep):
    a, _ = R.train(prep, SMALL.model, 0)
    b, _ = R.train(prep, SMALL.model, 0)
    for k, v in a.state_tensors().items():
        assert torch.equal(v, b.state_tensors()[k]), k


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["partial", "mfu", "ssu", "lookahead"])
def test_failure_with_fresh_checkpoint_changes_nothing(prep, base, strategy):
    n = prep.n_iters
    # a full save at every 10th iteration; failures of every shard right after the save at 20
    acts = periodic_actions(n, 10, 1, [(20, j) for j in range(SMALL.n_shards)])
    st = Setting(strategy, "fresh", acts, top_fraction=0.1, sample_rate=0.5, interval=10)
    model, emu = R.train(prep, SMALL.model, 0, _emu(prep, st))
    assert emu.failures == SMALL.n_shards and emu.pls == 0.0
    for k, v in base.items():
        assert torch.equal(v, model.state_tensors()[k]), k


@pytest.mark.slow
def test_stale_failure_reverts_the_shard_and_books_exact_lost_updates(prep):
    n = prep.n_iters
    st = Setting("partial", "stale", periodic_actions(n, 40, 1, [(70, 1)]))
    captured = {}

    def grab(k, m):
        if k == 40:
            captured["emb"] = m.emb.clone()

    model, emu = R.train(prep, SMALL.model, 0, _emu(prep, st))
    base, _ = R.train(prep, SMALL.model, 0, on_iter=grab)
    assert not torch.equal(model.emb, base.emb)
    # exact count: accesses to shard 1's rows by batches 40..69, 26 lookups per sample
    shard = shard_of_rows(model.n_rows, SMALL.n_shards)
    g = prep.grows[40 * prep.batch : 70 * prep.batch].reshape(-1)
    lost_samples = float((shard[g] == 1).sum()) / 26
    assert emu.ledger.lost * prep.batch == pytest.approx(lost_samples, rel=1e-9)
    assert emu.pls == pytest.approx(lost_samples / (n * prep.batch), rel=1e-9)
    # and the checkpoint really held the iteration-40 rows
    rows = torch.nonzero(shard == 1).squeeze(1)
    m2, _ = R.train(
        prep,
        SMALL.model,
        0,
        _emu(prep, Setting("partial", "x", {40: (("full", -1),), 41: (("fail", 1),)})),
    )
    assert not torch.equal(m2.emb[rows], base.emb[rows])


@pytest.mark.slow
def test_mfu_saves_hot_rows_and_loses_less(prep):
    n = prep.n_iters
    fails = [(55, 0), (75, 2), (95, 3)]
    van = Setting("partial", "v", periodic_actions(n, 40, 1, fails))
    mfu = Setting("mfu", "m", periodic_actions(n, 10, 4, fails), top_fraction=0.1, interval=10)
    _, ev = R.train(prep, SMALL.model, 0, _emu(prep, van))
    _, em = R.train(prep, SMALL.model, 0, _emu(prep, mfu))
    assert em.saves["partial"] > 0 and em.pls < ev.pls


def test_pls_of_emulation_equals_simulator(tmp_path):
    s = sc.load(
        "toy",
        {
            "strategy.name": "partial",
            "checkpoint.interval_h": 1.0,
            "failures.embedding.mtbf_h": 5.0,
        },
    )
    n_iters = 3600  # 10 h job: one iteration is 10 s of progress, so the mapping is exact
    checked = 0
    for rep in range(5):
        acts, sim_pls, _interval, n_e = sim_schedule(s, n_iters, rep)
        if not any(kind == "fail" for a in acts.values() for kind, _ in a):
            continue
        from cprsim.calibrate.model import DLRM, ModelConfig

        model = DLRM((10, 10), ModelConfig(dim=2), torch.Generator().manual_seed(0))
        emu = Emulator(model, n_e, Setting("partial", "sim", acts), n_iters, "nominal")
        for k in range(n_iters):
            emu.before(k)
        assert emu.pls == pytest.approx(sim_pls, abs=2.0 / n_iters / n_e), rep
        assert sim_pls > 0
        checked += 1
    assert checked >= 2


@pytest.mark.slow
def test_costs_and_end_to_end(prep):
    from cprsim.calibrate.costs import end_to_end, measure_shard_io

    model, _ = R.train(prep, SMALL.model, 0)
    io = measure_shard_io(model, SMALL.n_shards, repeats=1)
    assert io["shard_bytes"] > model.n_rows // SMALL.n_shards * 16 * 4
    assert io["shard_save_s"] > 0 and io["shard_load_s"] > 0
    e = end_to_end(prep, SMALL, 0, 50, [(60, 1), (150, 2)])
    assert e["checkpoints"] == len(range(50, prep.n_iters, 50)) and e["failures"] == 2
    assert e["simulated_overhead"] > 0 and np.isfinite(e["measured_overhead"])


@pytest.mark.slow
def test_emulated_pls_is_what_a_training_run_measures(prep):
    """PLS, position and age do not depend on the trained values: the emulation without training
    gives exactly what run_one measures (every strategy, one budget of the SMALL preset)."""
    p = dataclasses.replace(
        SMALL, strategies=("partial", "mfu", "ssu", "lookahead"), failures_per_run=8
    )
    emulated = R.emulated_pls(p, 0, prep)
    R._PREP[(p, 0)] = prep
    try:
        for i, run in enumerate(R.plan_runs(p)[1:]):
            res, _, _ = R.run_one(p, run)
            assert (res.strategy, res.pls, res.position, res.age) == pytest.approx(
                (emulated[i][0], emulated[i][2], emulated[i][3], emulated[i][4])
            )
            assert 0 < res.position <= 1 and 0 < res.age <= res.position
    finally:
        R._PREP.clear()


@pytest.mark.slow
def test_the_standard_preset_reaches_pls_03_for_every_strategy():
    """The planner needs the model up to PLS 0.3 or beyond: the standard preset's budgets reach it
    for every strategy (seed 0 alone already does), and its failures strike early and late."""
    p = R.PRESETS["standard"]
    got = R.emulated_pls(p, 0)
    for st in p.strategies:
        pls = [g[2] for g in got if g[0] == st]
        assert max(pls) >= 0.3, (st, pls)
    pos = [g[3] for g in got]
    assert min(pos) < 0.4 and max(pos) > 0.6  # the failure windows spread the position


def test_fit_origin_recovers_slope():
    x = np.linspace(0.01, 0.3, 20)
    rng = np.random.default_rng(0)
    y = 0.015 * x + rng.normal(0, 1e-4, 20)
    f = R.fit_origin(x, y)
    assert f.lo < 0.015 < f.hi and f.r2 > 0.9 and f.n == 20


@pytest.mark.slow
def test_cli_quick_preset(tmp_path):
    """The quick preset end to end (about a minute on 2 cores)."""
    from cprsim.cli import main

    out = tmp_path / "cal"
    r = CliRunner().invoke(main, ["calibrate", "--preset", "quick", "--out", str(out)])
    assert r.exit_code == 0, r.output
    doc = tomllib.loads((out / "calibration.toml").read_text())
    assert doc["provenance"]["calibrated"] and doc["provenance"]["preset"] == "quick"
    assert min(doc["provenance"]["baseline_auc"]) > 0.7
    assert set(doc["fit"]) == {"partial", "mfu", "ssu"}
    assert doc["costs"]["shard_save_s"] > 0 and "simulated_overhead" in doc["end_to_end"]
    assert (out / "points.csv").is_file() and (out / "accuracy_vs_pls.png").is_file()
    c = load_calibration(out / "calibration.toml")
    assert c.calibrated and np.isfinite(c.accuracy_loss(0.1))


def test_fast_forward_and_gradients_match_the_reference_formulation(prep):
    """index_select lookup and flat upper-triangle gather = EmbeddingBag + advanced indexing."""
    from torch.nn import functional as F

    model = R.new_model(prep, SMALL.model, 0)
    dense, grows = prep.dense[:256], prep.grows[:256]
    uniq, inv = torch.unique(grows, return_inverse=True)

    def reference(sub):
        x = model.bottom(dense)
        e = F.embedding_bag(inv.reshape(-1), sub, torch.arange(inv.numel()), mode="sum").view(
            256, 26, -1
        )
        z = torch.cat([x.unsqueeze(1), e], dim=1)
        inter = torch.bmm(z, z.transpose(1, 2))[:, model.tri[0], model.tri[1]]
        return model.top(torch.cat([x, inter], dim=1)).squeeze(1)

    grads = []
    for fwd in (reference, lambda sub: model._forward(dense, inv, sub)):
        sub = model.emb[uniq].clone().requires_grad_(True)
        out = fwd(sub)
        model.opt.zero_grad()
        out.sum().backward()
        grads.append((out.detach(), sub.grad.clone(), model.opt.grad.clone()))
    for a, b in zip(*grads):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-7)


@pytest.mark.slow
def test_flat_adagrad_is_torch_adagrad_bitwise(prep):
    a = R.new_model(prep, SMALL.model, 0)
    b = R.new_model(prep, SMALL.model, 0)
    ref = torch.optim.Adagrad(b.parameters(), lr=SMALL.model.dense_lr, foreach=False)
    b.opt = type(
        "TorchOpt",
        (),
        {
            "zero_grad": lambda self: ref.zero_grad(set_to_none=True),
            "step": lambda self: ref.step(),
        },
    )()
    B = prep.batch
    for k in range(40):
        sl = slice(k * B, (k + 1) * B)
        a.train_step(prep.dense[sl], prep.grows[sl], prep.label[sl])
        b.train_step(prep.dense[sl], prep.grows[sl], prep.label[sl])
    sb = b.state_tensors()
    for k, v in a.state_tensors().items():
        assert torch.equal(v, sb[k]), k
    a.zero_grad()  # nn.Module's: sets the gradients to None, detaching them from the flat buffer
    with pytest.raises(RuntimeError, match="gradient was replaced"):
        a.opt.step()
