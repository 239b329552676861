"""Calibrating a user's own PyTorch model (cprsim.calibrate.user) inside the user's training loop.

The injector shares the DLRM emulator's code path (a row store under ``Emulator``), so on a model
whose tables and lookups are the DLRM's it must book exactly the emulator's PLS. On a model unlike
the DLRM (the two-tower MovieLens example, examples/user_model: multi-hot bags with padding,
sparse gradients, SparseAdam's lazily created per-row state, two optimizers) saves must never
change training, a failure must revert exactly its shard's rows and their optimizer state, PLS
must grow with the checkpoint interval on the same failures, and the end-to-end calibration must
write a file that the loader and ``cprsim plan --calibration`` accept.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
pytest.importorskip("torch")

import torch
from torch import nn

from cprsim.calibrate import datasets as S
from cprsim.calibrate import load_calibration
from cprsim.calibrate import runner as R
from cprsim.calibrate.emulation import Emulator, Setting, periodic_actions, shard_of_rows
from cprsim.calibrate.user import (
    FailureInjector,
    Jagged,
    Lookups,
    calibrate_model,
    embedding_tables,
    kjt_lookups,
    resolve_device,
)
from cprsim.errors import InputError
from cprsim.names import MFU, PARTIAL, SSU

pytestmark = pytest.mark.dlrm

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "user_model"

try:
    S.movielens_root()
    NO_MOVIELENS = ""
except InputError as e:
    NO_MOVIELENS = f"MovieLens-100k is not installed (pip install --no-deps recbole==1.2.1): {e}"
needs_movielens = pytest.mark.skipif(bool(NO_MOVIELENS), reason=NO_MOVIELENS)


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def two_tower() -> Any:
    """The example module (examples/user_model/two_tower.py), imported from its folder."""
    sys.path.insert(0, str(EXAMPLE))
    try:
        import two_tower as mod
    finally:
        sys.path.remove(str(EXAMPLE))
    return mod


#: the end-to-end sizes: 40 iterations of 100 samples, 3,000 held-out samples (a signal above the
#: noise of single runs at these sizes: with 3 epochs on 3,000 samples the model overfits and lost
#: updates *improve* held-out AUC, which the planner rightly refuses)
TINY = {"train_samples": 4000, "test_samples": 3000, "batch": 100}


# -- the DLRM-equivalent model: PLS exactly the emulator's ---------------------------------------------
class TablesOnly(nn.Module):
    """A user's version of the DLRM's embeddings: one ``nn.Embedding`` per table, trained by
    torch's Adagrad (per-row state ``sum``)."""

    def __init__(self, tables: tuple[int, ...], dim: int = 4) -> None:
        super().__init__()
        self.emb = nn.ModuleList(nn.Embedding(n, dim) for n in tables)


@pytest.mark.slow
def test_pls_equals_the_emulators_on_a_dlrm_equivalent_model():
    """Same tables, same batches, same schedule (every strategy, two budgets): the injector
    around the user's ``nn.Embedding`` tables books exactly the emulator's PLS, timing, saves and
    failures (PLS depends on the accesses and the schedule, not on trained values)."""
    p = dataclasses.replace(
        R.PRESETS["quick"],
        train_samples=6144,
        test_samples=256,
        batch=256,
        seeds=(0,),
        budgets=(2.0, 0.25),
        failures_per_run=6,
        sample_rate=0.3,
    )
    prep = R.synthetic_prepared(p, 0)
    n, B = prep.n_iters, prep.batch
    offsets = torch.tensor([0, *list(torch.tensor(prep.tables).cumsum(0)[:-1])])
    dlrm = R.new_model(prep, p.model, 0)
    user = TablesOnly(prep.tables)
    opt = torch.optim.Adagrad(user.parameters(), lr=0.01)
    checked = set()
    for _, st in R.settings_for(p, n, 0):
        emu = Emulator(dlrm, p.n_shards, st, n, "measured", 0, batch=B)
        inj = FailureInjector(user, opt, n_shards=p.n_shards, setting=st, n_iters=n, batch=B)
        for k in range(n):
            g = prep.grows[k * B : (k + 1) * B]
            emu.before(k)
            emu.count_batch(g)
            inj.before(k)
            inj.count([g[:, t] - offsets[t] for t in range(len(prep.tables))])
        assert inj.failures == emu.failures == p.failures_per_run
        assert inj.saves == emu.saves
        assert inj.pls == emu.pls and inj.timing == emu.timing
        assert inj.pls > 0
        checked.add(st.strategy)
    assert checked == {PARTIAL, MFU, SSU}


def test_multi_hot_lookups_spread_a_sample_over_its_accesses():
    """A sample with three ids counts 1/3 of a sample per id; padding ids count nothing; the
    EmbeddingBag (input, offsets) form, (B, L) and Jagged agree."""
    bag = nn.EmbeddingBag(10, 2, mode="mean", padding_idx=0)
    one = nn.Embedding(6, 2)
    n, B = 4, 2
    fail = Setting(PARTIAL, "t", {3: (("fail", 0), ("fail", 1), ("fail", 2))})
    forms: dict[str, Callable[[], Lookups]] = {
        "2d": lambda: {"bag": torch.tensor([[1, 2, 3], [4, 0, 0]]), "one": torch.tensor([1, 2])},
        "offsets": lambda: {
            "bag": (torch.tensor([1, 2, 3, 4]), torch.tensor([0, 3])),
            "one": torch.tensor([1, 2]),
        },
        "jagged": lambda: {
            "bag": Jagged(torch.tensor([1, 2, 3, 4]), torch.tensor([3, 1])),
            "one": torch.tensor([1, 2]),
        },
    }
    pls = {}
    for name, lookups in forms.items():
        inj = FailureInjector(
            {"bag": bag, "one": one}, None, n_shards=3, setting=fail, n_iters=n, batch=B
        )
        for k in range(3):
            inj.before(k)
            inj.count(lookups())
        inj.before(3)  # every shard fails: every update of batches 0..2 is lost
        pls[name] = inj.pls
    # per batch: sample 0 makes 4 accesses (3 ids + 1), sample 1 makes 2 (the padding ids are
    # not counted): all of both samples' updates are lost, 3 batches of 2 samples out of 4 x 2
    assert pls == pytest.approx({k: 3 * 2 / (n * B) for k in forms}, rel=1e-12)
    tables = embedding_tables({"bag": bag, "one": one})
    assert [(t.name, t.offset, t.n_rows, t.padding_idx, t.bag) for t in tables] == [
        ("bag", 0, 10, 0, True),
        ("one", 10, 6, None, False),
    ]


def test_kjt_lookups_reads_torchrec_collections_through_their_documented_api():
    """TorchRec is not installed here: stand-ins with the attributes TorchRec's source defines
    (``embedding_bag_configs()``, configs with ``name``/``feature_names``, ``to_dict()`` of
    jagged tensors with ``values()``/``lengths()``). This checks the mapping only, not TorchRec."""

    class Cfg:
        def __init__(self, name: str, features: list[str]) -> None:
            self.name, self.feature_names = name, features

    class JT:
        def __init__(self, v: list[int], n: list[int]) -> None:
            self.v, self.n = torch.tensor(v), torch.tensor(n)

        def values(self) -> torch.Tensor:
            return self.v

        def lengths(self) -> torch.Tensor:
            return self.n

    class EBC:
        def embedding_bag_configs(self) -> list[Cfg]:
            return [Cfg("t1", ["f1", "f3"]), Cfg("t2", ["f2"])]

    class KJT:
        def to_dict(self) -> dict[str, JT]:
            return {"f1": JT([0, 1], [2, 0]), "f2": JT([3], [0, 1]), "f3": JT([4, 5], [1, 1])}

    got = kjt_lookups(EBC(), KJT(), prefix="sparse")
    assert sorted(got) == ["sparse.embedding_bags.t1", "sparse.embedding_bags.t2"]
    assert [j.values.tolist() for j in got["sparse.embedding_bags.t1"]] == [[0, 1], [4, 5]]  # type: ignore[union-attr]


def test_misuse_is_a_one_line_error():
    emb = nn.Embedding(8, 2)
    st = Setting(PARTIAL, "t", periodic_actions(4, 2, 1, []))
    inj = FailureInjector(emb, None, n_shards=2, setting=st, n_iters=4, batch=2)
    with pytest.raises(InputError, match="before"):
        inj.count([torch.tensor([1, 2])])
    inj.before(0)
    with pytest.raises(InputError, match="iterations of 2 samples"):
        inj.count([torch.tensor([1, 2, 3])])
    with pytest.raises(InputError, match=r"ids must lie in \[0, 8\)"):
        inj.count([torch.tensor([1, 9])])
    with pytest.raises(InputError, match="no table named 'x'"):
        inj.count({"x": torch.tensor([1, 2])})
    inj.count([torch.tensor([1, 2])])
    with pytest.raises(InputError, match="count each batch once"):
        inj.count([torch.tensor([1, 2])])
    with pytest.raises(InputError, match="expected iteration 1"):
        inj.before(2)
    with pytest.raises(InputError, match="lookahead"):
        FailureInjector(
            emb, None, n_shards=2, setting=Setting("lookahead", "t"), n_iters=4, batch=2
        )
    with pytest.raises(InputError, match="no embedding table"):
        embedding_tables(nn.Linear(2, 2))
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        assert resolve_device("auto") == torch.device("cpu")
        with pytest.raises(InputError, match="CUDA is not available"):
            resolve_device("cuda")


def _toy_callables(reshuffle: bool = False) -> dict[str, Any]:
    """The smallest user model: one table and a linear head on its embedding (for the driver's
    checks); ``reshuffle``: batches() gives another order every call (a bug it must catch)."""
    calls = [0]

    def build(seed: int, device: torch.device) -> tuple[nn.Module, torch.optim.Optimizer]:
        m = nn.Sequential(nn.Embedding(50, 4), nn.Flatten(), nn.Linear(4, 1)).to(device)
        return m, torch.optim.Adagrad(m.parameters(), lr=0.1)

    def batches(seed: int, device: torch.device) -> list[torch.Tensor]:
        calls[0] += 1
        g = torch.Generator().manual_seed(seed + (calls[0] if reshuffle else 0))
        return list(torch.randint(0, 50, (20, 8, 1), generator=g).to(device))

    def step(m: nn.Module, opt: torch.optim.Optimizer, b: torch.Tensor) -> None:
        opt.zero_grad()
        m(b).pow(2).mean().backward()
        opt.step()

    def evaluate(m: nn.Module, seed: int, device: torch.device) -> dict[str, float]:
        emb = next(x for x in m.modules() if isinstance(x, nn.Embedding))
        w = emb.weight.detach()
        return {"auc": float(-w.pow(2).mean()), "logloss": float(w.pow(2).mean())}

    return {
        "build": build,
        "batches": batches,
        "step": step,
        "lookups": lambda b: [b[:, 0]],
        "evaluate": evaluate,
    }


@pytest.mark.slow
def test_the_driver_refuses_batches_that_change_between_runs_and_unknown_metrics():
    with pytest.raises(InputError, match="same batches in the same order"):
        calibrate_model(**_toy_callables(reshuffle=True), batch=8, seeds=(0,), budgets=(0.5,))
    with pytest.raises(InputError, match="no 'recall'"):
        calibrate_model(
            **_toy_callables(), batch=8, seeds=(0,), budgets=(0.5,), auc_metric="recall"
        )


# -- the two-tower example ---------------------------------------------------------------------------
def _state(model: nn.Module, opts: list[Any]) -> dict[str, torch.Tensor]:
    """Every parameter and every optimizer state tensor (clones)."""
    out = {f"p:{k}": v.detach().clone() for k, v in model.state_dict().items()}
    for i, o in enumerate(opts):
        for j, p in enumerate(o.param_groups[0]["params"]):
            for key, v in o.state.get(p, {}).items():
                out[f"o{i}:{j}:{key}"] = torch.as_tensor(v).detach().clone()
    return out


def _rows(model: nn.Module, opts: list[Any]) -> dict[str, dict[str, torch.Tensor]]:
    """Per embedding table: its weight and the sparse optimizer's per-row state (clones)."""
    out = {}
    for t in embedding_tables(model):
        st = opts[0].state.get(t.weight, {})
        out[t.name] = {"weight": t.weight.detach().clone()} | {
            k: v.clone() for k, v in st.items() if isinstance(v, torch.Tensor) and v.dim() >= 1
        }
    return out


def _train(ex: Any, setting: Setting | None, hook: Any = None) -> tuple[Any, Any, Any]:
    """Train the example's seed-0 model on its batches with an injector (``setting``) or none;
    ``hook(k, phase, model, opts)`` just before (``pre``) and after (``post``) ``before(k)``."""
    dev = torch.device("cpu")
    model, opts = ex.build(0, dev)
    data = ex.batches(0, dev)
    inj = None
    if setting is not None:
        inj = FailureInjector(
            model, opts, n_shards=4, setting=setting, n_iters=len(data), batch=ex.batch
        )
    for k, b in enumerate(data):
        if hook is not None:
            hook(k, "pre", model, opts)
        if inj is not None:
            inj.before(k)
        if hook is not None:
            hook(k, "post", model, opts)
        ex.step(model, opts, b)
        if inj is not None:
            inj.count(ex.lookups(b))
    return model, opts, inj


@needs_movielens
@pytest.mark.slow
def test_saves_and_fresh_failures_leave_training_bit_exact(two_tower):
    """Saves only read the rows, and a failure right after a full save restores what is already
    there: training is bit-identical to the failure-free run (weights and optimizer state)."""
    ex = two_tower.MovieLensTwoTower(**TINY)
    m0, o0, _ = _train(ex, None)
    base = _state(m0, o0)
    n = len(ex.batches(0, torch.device("cpu")))
    fresh = [(8, j) for j in range(4)] + [(24, 1)]  # right after full saves (every 4th)
    for st in (
        Setting(PARTIAL, "saves", periodic_actions(n, 4, 1, [])),
        Setting(MFU, "mfu", periodic_actions(n, 2, 4, fresh), top_fraction=0.1, interval=2),
        Setting(SSU, "ssu", periodic_actions(n, 2, 4, fresh), top_fraction=0.1, sample_rate=0.5),
    ):
        m, o, inj = _train(ex, st)
        assert inj.pls == 0.0 and inj.saves["full"] > 0
        got = _state(m, o)
        assert got.keys() == base.keys()
        for k, v in base.items():
            assert torch.equal(v, got[k]), (st.label, k)


@needs_movielens
@pytest.mark.slow
def test_a_failure_reverts_its_shards_rows_and_their_optimizer_state(two_tower):
    """Shard 2 fails at 5, before any save: its rows go back to their initial values and their
    SparseAdam moments (created at step 0, after the injector's first copy) to zero. Shard 1 fails
    at 23, its last save at 10: its rows (weights, exp_avg, exp_avg_sq) are again the saved ones.
    The other shards' rows and the dense optimizer's state are untouched by a restore."""
    ex = two_tower.MovieLensTwoTower(**TINY)
    acts: dict[int, tuple[tuple[str, int], ...]] = {
        5: (("fail", 2),),
        10: (("full", -1),),
        23: (("fail", 1),),
    }
    seen: dict[tuple[int, str], Any] = {}

    def grab(k: int, phase: str, model: nn.Module, opts: list[Any]) -> None:
        if k in (0, 5, 10, 23):
            seen[k, phase] = (_rows(model, opts), _state(model, opts))

    model, _, inj = _train(ex, Setting(PARTIAL, "t", acts), grab)
    assert inj.failures == 2 and inj.pls > 0
    tables = embedding_tables(model)
    shard = shard_of_rows(sum(t.n_rows for t in tables), 4)
    for k, j, ref in ((5, 2, None), (23, 1, seen[10, "post"][0])):
        pre, post = seen[k, "pre"][0], seen[k, "post"][0]
        for t in tables:
            mine = shard[t.offset : t.offset + t.n_rows] == j
            assert mine.any() and (~mine).any()
            for key, after in post[t.name].items():
                if ref is not None:
                    want = ref[t.name][key][mine]
                elif key == "weight":
                    want = seen[0, "pre"][0][t.name]["weight"][mine]  # the initial rows
                else:
                    want = torch.zeros_like(after[mine])  # state created after the first copy
                assert torch.equal(after[mine], want), (k, t.name, key)
                assert torch.equal(after[~mine], pre[t.name][key][~mine]), (k, t.name, key)
            assert not torch.equal(pre[t.name]["weight"][mine], post[t.name]["weight"][mine])
        dense_pre, dense_post = seen[k, "pre"][1], seen[k, "post"][1]
        for key in dense_pre:
            if key.startswith("o1:") or key.startswith("p:user_tower"):
                assert torch.equal(dense_pre[key], dense_post[key]), key


@needs_movielens
def test_pls_grows_with_the_interval_on_the_same_failures(two_tower):
    """Vanilla CPR on the same failures with nested save grids (every 40, 10, 5 iterations of 40):
    every restore's save is at least as recent on the finer grid, so PLS falls strictly."""
    ex = two_tower.MovieLensTwoTower(**TINY)
    data = ex.batches(0, torch.device("cpu"))
    n = len(data)
    fails = R.failure_schedule(n, 4, 8, 0)
    model, opts = ex.build(0, torch.device("cpu"))
    pls = []
    for iv in (n, 10, 5):
        inj = FailureInjector(
            model,
            opts,
            n_shards=4,
            setting=Setting(PARTIAL, f"@{iv}", periodic_actions(n, iv, 1, fails)),
            n_iters=n,
            batch=ex.batch,
        )
        for k, b in enumerate(data):
            inj.before(k)
            inj.count(ex.lookups(b))
        pls.append(inj.pls)
    assert pls[0] > pls[1] > pls[2] > 0


@needs_movielens
@pytest.mark.slow
def test_calibrating_the_two_tower_model_end_to_end(two_tower, tmp_path, cli):
    """2 seeds x (baseline + 2 budgets x 3 strategies) on 4,000 MovieLens ratings: PLS > 0 for
    every failure run, the files are written and agree, the loader reads the calibration and
    ``cprsim plan --calibration`` plans with it."""
    ex = two_tower.MovieLensTwoTower(**TINY)
    lines: list[str] = []
    res = calibrate_model(
        ex.build,
        ex.batches,
        ex.step,
        ex.lookups,
        ex.evaluate,
        batch=ex.batch,
        out=tmp_path / "cal",
        seeds=(0, 1),
        budgets=(2.0, 0.25),
        failures_per_run=8,
        device="cpu",
        model_description="two-tower MovieLens example",
        progress=lines.append,
    )
    assert len(res.results) == 14 and len(res.points) == 12 and len(lines) == 14
    assert all(r.pls == 0 for r in res.baselines.values())
    assert all(pt.pls > 0 and 0 < pt.age <= pt.position <= 1 for pt in res.points)
    assert res.refused == ""
    # the file: what calibrate_model returned, the metrics named, points.csv beside it
    path = res.files["calibration.toml"]
    doc = tomllib.loads(path.read_text())
    assert doc["fit"].keys() == res.doc["fit"].keys()
    for st, f in res.doc["fit"].items():
        assert doc["fit"][st] == pytest.approx(f, rel=1e-12), st
    assert doc["provenance"]["model"] == "two-tower MovieLens example"
    assert doc["provenance"]["embedding_rows"] == 944 + 8 + 3 + 22 + 12 + 1683 + 17 + 20
    assert doc["provenance"]["metrics"]["auc"].startswith("auc (higher is better)")
    rows = res.files["points.csv"].read_text().splitlines()
    assert len(rows) == 15 and rows[0].startswith("seed,run,strategy,label,budget,pls")
    cal = load_calibration(path)
    assert cal.calibrated and set(cal.models) == {"auc", "logloss"}
    assert all(cal.slopes[st]["auc"] > 0 for st in (PARTIAL, MFU, SSU))
    r = cli(
        "plan",
        "toy",
        "--max-accuracy-loss",
        "0.002",
        "--calibration",
        path,
        "-n",
        "30",
        "--search-replications",
        "30",
    )
    assert r.exit_code == 0, r.output
    assert "Recommendation" in r.output and "two-tower MovieLens example" in r.output
