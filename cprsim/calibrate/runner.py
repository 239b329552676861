"""The calibration experiment: paired DLRM runs with and without failures, a fit per strategy.

For every seed: one baseline run (no failures) and one run per setting (strategy x checkpoint
budget) on the *same* data, initialisation and batch order; every strategy at a budget sees the
*same* failures (common random numbers: ``failures_per_run`` failures at uniformly random
iterations on random shards), and the budgets' failures strike in different parts of the run
(:data:`WINDOWS`), so that the failure's position varies independently of the budget.
Accuracy loss = baseline minus failed-run held-out AUC (``d_auc``), and failed-run minus baseline
log-loss (``d_logloss``), so positive means worse. Budgets are given as the vanilla checkpoint
interval (a fraction of the run); MFU/SSU/lookahead get the partial-save interval that writes the
**same bytes**: a full save every ``K`` saves and the top ``r`` rows otherwise, so
``interval = vanilla x (1 + (K - 1) r) / K``.

**Runs are independent.** :func:`plan_runs` lists them (seed-major: a seed's baseline, then its
settings in order); :func:`execute` runs them serially or in ``jobs`` worker processes with
``threads`` torch threads each and yields each :class:`RunResult` as it completes. A run's numbers
depend only on the run (its seed's data, initialisation and failures), never on the worker or on
what ran before it in that worker; :func:`points_from` sorts results by (seed, run) before anything
is derived from them, so the outputs do not depend on ``jobs`` or on completion order. A worker
keeps the last seed's data (and each batch's unique rows) in memory: runs of a seed are submitted
together, so each worker generates a seed's data about once.

Fit (per strategy and metric): least squares through the origin, ``loss = slope x PLS`` (no
failure, no loss), over every (setting, seed) point; the slope's 95% CI from Student's t with
``n - 1`` degrees of freedom; R² = 1 - SS_res / SS_tot (centred).
"""

from __future__ import annotations

import math
import multiprocessing
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch

from cprsim.calibrate import data as D
from cprsim.calibrate import datasets as DS
from cprsim.calibrate.emulation import Emulator, Setting, emulation_of, periodic_actions
from cprsim.calibrate.model import DLRM, ModelConfig
from cprsim.names import CALIBRATION_DEFAULT, EMULATED, PARTIAL


@dataclass(frozen=True)
class Preset:
    """A calibration's settings: training and held-out samples, seeds, checkpoint budgets (vanilla
    intervals, fractions of the run), strategies, batch, table scale, shards, failures per run, the
    MFU/SSU parameters, the model, and the data (``None``: synthetic)."""

    name: str
    train_samples: int
    test_samples: int
    seeds: tuple[int, ...]
    budgets: tuple[float, ...]  #: vanilla checkpoint interval, as a fraction of the run
    strategies: tuple[str, ...] = CALIBRATION_DEFAULT
    batch: int = 512
    scale: float = 1000.0
    n_shards: int = 4
    failures_per_run: int = 4
    top_fraction: float = 0.1
    full_every: int = 4
    sample_rate: float = 0.05
    model: ModelConfig = field(default_factory=ModelConfig)
    runtime: str = ""  #: measured wall time (documentation only: not part of the fingerprint)
    #: real data (``cprsim calibrate --data``; ``datasets.sized`` sets the sample counts to the
    #: data's own); ``None``: the synthetic generator at ``scale``
    data: DS.DataSpec | None = None
    #: names in :data:`RUNGS`: the scale ladder calibrated beside this preset (each into
    #: ``OUT/rungs/NAME``), written to ``[scale]`` (not part of the fingerprint: not this preset's runs)
    rungs: tuple[str, ...] = ()
    #: where the runs train: "cpu" or a torch device ("cuda", "cuda:1"; ``cprsim calibrate
    #: --device``); part of the fingerprint only when not "cpu" (floating point may differ)
    device: str = "cpu"


#: measured wall time of ``cprsim calibrate --preset P --jobs 2`` on the 2-core development machine
#: (shared and noisy; the commands and conditions are in docs/calibration.md); the CLI's --help says
#: the same (tests/test_calibrate_resume.py checks it)
RUNTIMES = {
    "quick": "64-71 s measured twice with nothing else running (runs 27-31 s, costs and the end-to-end check 28-31 s); above the 60 s target",
    "standard": "16 min 20 s measured at load 3 (runs 13 min 39 s, costs and end-to-end check 2 min 41 s); not measured idle",
    "paper": "~70 min, extrapolated (not run in full); above the 60 min target",
    "shipped": "1 h 15 min 44 s measured at load 2-4 (284 runs: 8 seeds and 4 rungs, 72 min 37 s; costs and end-to-end check 2 min 43 s); not measured idle",
    "matched": "29 min 15 s measured with --scenario cpr-production --no-costs at load 1-3 (152 runs: 8 seeds x 6 intervals x 3 strategies); not measured idle",
}

#: budgets from "no save in the run" (2: MFU/SSU save partially once, never fully) down to
#: 1/16 of the run: with 8 failures per run every strategy's PLS reaches 0.3 (the range the planner
#: needs; :func:`emulated_pls` computes it without training, tests/test_calibrate_dlrm.py checks it)
BUDGETS = (2.0, 1.0, 0.5, 0.25, 0.125, 0.0625)
PRESETS = {
    "quick": Preset(
        "quick",
        200_000,
        50_000,
        (0, 1),
        (2.0, 0.125),
        failures_per_run=8,
        runtime=RUNTIMES["quick"],
    ),
    "standard": Preset(
        "standard",
        1_000_000,
        200_000,
        (0, 1, 2),
        BUDGETS,
        EMULATED,
        failures_per_run=8,
        runtime=RUNTIMES["standard"],
    ),
    "paper": Preset(
        "paper",
        4_000_000,
        500_000,
        (0, 1, 2, 3, 4),
        BUDGETS,
        EMULATED,
        scale=100.0,
        n_shards=8,
        failures_per_run=16,
        runtime=RUNTIMES["paper"],
    ),
}


#: The scale ladder of the shipped calibration: how the loss per unit PLS moves with the table
#: size, the training length and the data, each rung against the ``shipped`` preset's reference
#: (synthetic Criteo-like data, 1/1000 of Criteo Kaggle's rows, 1M samples). Vanilla CPR only
#: (the MFU/SSU and lookahead slopes are scaled by vanilla's ratio: an assumption, written beside
#: the ratios), 3 seeds each, the reference's budgets and failures. ``name -> (preset, data)``:
#: ``data`` is a ``--data`` name (resolved when the rung runs; the samples become the data's own)
#: or None (synthetic).
RUNGS: dict[str, tuple[Preset, str | None]] = {
    "rows-x10": (
        Preset(
            "rows-x10",
            1_000_000,
            200_000,
            (0, 1, 2),
            BUDGETS,
            (PARTIAL,),
            scale=100.0,
            failures_per_run=8,
        ),
        None,
    ),
    "rows-x100": (
        Preset(
            "rows-x100",
            1_000_000,
            200_000,
            (0, 1, 2),
            BUDGETS,
            (PARTIAL,),
            scale=10.0,
            failures_per_run=8,
        ),
        None,
    ),
    "half-length": (
        Preset("half-length", 500_000, 200_000, (0, 1, 2), BUDGETS, (PARTIAL,), failures_per_run=8),
        None,
    ),
    "movielens-100k": (
        Preset("movielens-100k", 1, 1, (0, 1, 2), BUDGETS, (PARTIAL,), failures_per_run=8),
        "movielens-100k",
    ),
}
PRESETS["shipped"] = Preset(
    "shipped",
    1_000_000,
    200_000,
    tuple(range(8)),
    BUDGETS,
    EMULATED,
    failures_per_run=8,
    runtime=RUNTIMES["shipped"],
    rungs=tuple(RUNGS),
)
#: the shipped preset's reference without its ladder, for ``cprsim calibrate --scenario`` (the
#: schedules, intervals and shards come from the scenario: :mod:`cprsim.calibrate.matched`); the
#: strategies the planner plans by default
PRESETS["matched"] = replace(
    PRESETS["shipped"],
    name="matched",
    strategies=CALIBRATION_DEFAULT,
    runtime=RUNTIMES["matched"],
    rungs=(),
)


@dataclass
class Prepared:
    """One seed's tensors: training batches in order and the held-out set."""

    dense: torch.Tensor
    grows: torch.Tensor
    label: torch.Tensor
    test_dense: torch.Tensor
    test_grows: torch.Tensor
    test_label: np.ndarray
    tables: tuple[int, ...]
    batch: int
    _unique: list[tuple[torch.Tensor, torch.Tensor]] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def n_iters(self) -> int:
        """Training iterations: whole batches of the training samples."""
        return self.label.shape[0] // self.batch

    @property
    def n_dense(self) -> int:
        """Dense features per sample."""
        return self.dense.shape[1]

    def unique(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Batch ``k``'s ``torch.unique(rows, return_inverse=True)``, computed once for every run."""
        if self._unique is None:
            B = self.batch
            out = []
            for i in range(self.grows.shape[0] // B):
                u, inv = torch.unique(self.grows[i * B : (i + 1) * B], return_inverse=True)
                out.append((u, inv.to(torch.int32)))
            self._unique = out
        return self._unique[k]


def prepare(train: D.Dataset, test: D.Dataset, tables: tuple[int, ...], batch: int) -> Prepared:
    """A training and a held-out split as tensors, categorical ids made global rows (the tables'
    offsets), trained ``batch`` samples an iteration."""
    off = np.concatenate([[0], np.cumsum(tables)[:-1]]).astype(np.int64)
    return Prepared(
        torch.from_numpy(train.dense),
        torch.from_numpy(train.cat + off),
        torch.from_numpy(train.label),
        torch.from_numpy(test.dense),
        torch.from_numpy(test.cat + off),
        test.label,
        tables,
        batch,
    )


def synthetic_prepared(p: Preset, seed: int) -> Prepared:
    """Seed ``seed``'s synthetic data at the preset's sample counts and table scale, prepared."""
    s = DS.synthetic_split(p.train_samples, p.test_samples, seed, p.scale)
    return prepare(s.train, s.test, s.tables, p.batch)


def prepared(p: Preset, seed: int) -> Prepared:
    """Seed ``seed``'s data: synthetic, or ``p.data``'s (``datasets.seed_data``)."""
    if p.data is None:
        return synthetic_prepared(p, seed)
    train, test, tables = DS.seed_data(p.data, seed, p.train_samples, p.test_samples, p.scale)
    return prepare(train, test, tables, p.batch)


def new_model(prep: Prepared, cfg: ModelConfig, seed: int, device: str = "cpu") -> DLRM:
    """A fresh DLRM for the prepared data's tables and dense features, initialised from ``seed``
    (torch's global seed is set too) on the CPU, on ``device``."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    return DLRM(prep.tables, cfg, gen, n_dense=prep.n_dense, device=device)


def train(
    prep: Prepared,
    cfg: ModelConfig,
    seed: int,
    emu_factory: Callable[[DLRM], Emulator] | None = None,
    on_iter: Callable[[int, DLRM], None] | None = None,
    device: str = "cpu",
) -> tuple[DLRM, Emulator | None]:
    """Train a fresh model (initialised from ``seed``) on every batch once, in order; an emulator
    from ``emu_factory`` acts before each batch (saves, failures) and counts its accesses after it,
    and ``on_iter(k, model)`` is called before batch ``k``. Returns the model and the emulator (None
    without a factory). ``device``: where the model trains; the data stay on the CPU and each
    batch is copied over, and the emulator's bookkeeping stays on the CPU."""
    model = new_model(prep, cfg, seed, device)
    emu = emu_factory(model) if emu_factory else None
    B = prep.batch
    on_cpu = torch.device(device).type == "cpu"
    for k in range(prep.n_iters):
        if emu is not None:
            emu.before(k)
        if on_iter is not None:
            on_iter(k, model)
        sl = slice(k * B, (k + 1) * B)
        uniq, inv = prep.unique(k)
        if on_cpu:
            model.train_step_unique(prep.dense[sl], uniq, inv, prep.label[sl])
        else:
            model.train_step_unique(
                prep.dense[sl].to(device),
                uniq.to(device),
                inv.to(device),
                prep.label[sl].to(device),
            )
        if emu is not None:
            emu.count_batch(prep.grows[sl])
    return model, emu


def emulated_pls(
    p: Preset, seed: int, prep: Prepared | None = None
) -> list[tuple[str, float, float, float, float]]:
    """Each setting's ``(strategy, budget, PLS, position, age)`` for one seed, without training:
    the measured PLS depends only on the accesses, the ranking counters and the schedule, never on
    the trained values, so emulating the saves and failures over the batches gives exactly what
    the calibration run will measure (in a fraction of its time). ``prep``: the seed's prepared
    data (default :func:`prepared`: the preset's own, ``p.data`` or synthetic, as the runs use)."""
    if prep is None:
        prep = prepared(p, seed)
    n, B = prep.n_iters, prep.batch
    future = prep.grows[: n * B].reshape(n, -1)
    model = new_model(prep, p.model, seed)
    out = []
    for b, st in settings_for(p, n, seed):
        emu = Emulator(model, p.n_shards, st, n, "measured", seed, future_rows=future, batch=B)
        for k in range(n):
            emu.before(k)
            emu.count_batch(prep.grows[k * B : (k + 1) * B])
        position, age = emu.timing
        out.append((st.strategy, float(b), float(emu.pls), float(position), float(age)))
    return out


def evaluate(model: DLRM, prep: Prepared) -> tuple[float, float]:
    """Held-out AUC and log-loss of ``model``."""
    p = model.predict(prep.test_dense, prep.test_grows)
    return D.auc(prep.test_label, p), D.logloss(prep.test_label, p)


#: where in the run a setting's failures strike (fractions of the run): the whole run after the
#: first 5%, its first half, its second half. Budget ``i`` of seed ``s`` uses window ``(i + s) mod 3``
#: (a Latin square): every strategy at a budget shares the failures (common random numbers for the
#: strategy comparison), and the failure position varies within each seed and each budget, so the
#: accuracy model can separate *when* the loss happens from *how much* is lost.
WINDOWS = ((0.05, 1.0), (0.05, 0.5), (0.5, 1.0))


def failure_schedule(
    n_iters: int, n_shards: int, count: int, seed: int, window: int = 0
) -> list[tuple[int, int]]:
    """``count`` failures at uniformly random iterations of :data:`WINDOWS` ``[window]`` on random shards."""
    rng = np.random.default_rng(
        np.random.SeedSequence([seed, 0xFA11] + ([window] if window else []))
    )
    a, b = WINDOWS[window]
    its = np.sort(rng.integers(max(1, int(n_iters * a)), max(2, int(n_iters * b)), count))
    shards = rng.integers(0, n_shards, count)
    return [(int(k), int(j)) for k, j in zip(its, shards)]


def settings_for(p: Preset, n_iters: int, seed: int) -> list[tuple[float, Setting]]:
    """Every (budget, strategy) setting of a seed; budget ``i``'s failures strike in window
    ``(i + seed) mod 3`` (:data:`WINDOWS`)."""
    out = []
    K, r = p.full_every, p.top_fraction
    for i, b in enumerate(p.budgets):
        failures = failure_schedule(
            n_iters, p.n_shards, p.failures_per_run, seed, (i + seed) % len(WINDOWS)
        )
        vanilla = max(1, int(round(b * n_iters)))
        for st in p.strategies:
            iv, fe = emulation_of(st).schedule(vanilla, K, r)
            out.append(
                (
                    b,
                    Setting(
                        st,
                        f"{st}@{b:g}",
                        periodic_actions(n_iters, iv, fe, failures),
                        top_fraction=r,
                        sample_rate=p.sample_rate,
                        interval=iv,
                    ),
                )
            )
    return out


@dataclass(frozen=True)
class Point:
    """One calibration point: a failed run's strategy, budget, seed and PLS, its accuracy loss
    against the seed's baseline (``d_auc``: AUC drop, ``d_logloss``: log-loss rise, positive is
    worse), its own AUC and log-loss, and when and how old the loss was."""

    strategy: str
    budget: float
    seed: int
    pls: float
    d_auc: float
    d_logloss: float
    auc: float
    logloss: float
    position: float = 0.0  #: loss-weighted failure position, fraction of the run (Emulator.timing)
    age: float = 0.0  #: loss-weighted restored-state age, fraction of the run


# -- runs ------------------------------------------------------------------------------------------
BASELINE = "baseline"  #: the strategy name of a seed's run without failures (run 0)


@dataclass(frozen=True)
class Run:
    """One training run: ``run`` 0 is the seed's baseline, ``run`` i its i-th setting."""

    seed: int
    run: int
    budget: float
    setting: Setting | None = None

    @property
    def strategy(self) -> str:
        """The strategy of the run's setting, or ``baseline``."""
        return BASELINE if self.setting is None else self.setting.strategy

    @property
    def label(self) -> str:
        """The setting's label (e.g. ``mfu@0.5``), or ``baseline``."""
        return BASELINE if self.setting is None else self.setting.label

    @property
    def key(self) -> tuple[int, int]:
        """``(seed, run)``: the run's identity and sort key."""
        return (self.seed, self.run)

    def describe(self) -> str:
        """One line naming the run: its seed and label."""
        return f"seed {self.seed} {self.label}"


@dataclass(frozen=True)
class RunResult:
    """What a run measured (the accuracy deltas need the seed's baseline: :func:`points_from`)."""

    seed: int
    run: int
    strategy: str
    label: str
    budget: float
    pls: float
    auc: float
    logloss: float
    position: float = 0.0  #: see :class:`Point`
    age: float = 0.0

    @property
    def key(self) -> tuple[int, int]:
        """``(seed, run)``: the run's identity and sort key."""
        return (self.seed, self.run)


def n_iters_of(p: Preset) -> int:
    """Training iterations of a preset: whole batches of its training samples."""
    return p.train_samples // p.batch


def plan_runs(
    p: Preset,
    settings_fn: Callable[[int, int], list[tuple[float, Setting]]] | None = None,
) -> list[Run]:
    """Every run of the preset, seed-major. ``settings_fn(n_iters, seed)`` replaces the preset's
    settings (``--from-sim``)."""
    n = n_iters_of(p)
    runs: list[Run] = []
    for seed in p.seeds:
        runs.append(Run(seed, 0, 0.0))
        sets = settings_fn(n, seed) if settings_fn is not None else settings_for(p, n, seed)
        runs += [Run(seed, i, float(b), st) for i, (b, st) in enumerate(sets, start=1)]
    return runs


_PREP: dict[tuple[Preset, int], Prepared] = {}  #: this process's last seed's data


def _prepared(p: Preset, seed: int) -> Prepared:
    key = (p, seed)
    if key not in _PREP:
        _PREP.clear()  # one seed at a time: a paper-preset seed is about 2 GB
        _PREP[key] = prepared(p, seed)
    return _PREP[key]


def run_one(p: Preset, run: Run) -> tuple[RunResult, float, float]:
    """Train and evaluate one run; returns its result, its wall and its CPU seconds (this process;
    data generation included when the run is the first of its seed here)."""
    t0, c0 = time.perf_counter(), time.process_time()
    prep = _prepared(p, run.seed)
    n = prep.n_iters
    if run.setting is None:
        model, _ = train(prep, p.model, run.seed, device=p.device)
        pls, position, age = 0.0, 0.0, 0.0
    else:
        st = run.setting
        future = prep.grows[: n * p.batch].reshape(n, -1)
        fac = lambda m: Emulator(
            m, p.n_shards, st, n, "measured", run.seed, future_rows=future, batch=p.batch
        )
        model, emu = train(prep, p.model, run.seed, fac, device=p.device)
        assert emu is not None  # train made one with fac
        pls = emu.pls
        position, age = emu.timing
    a, ll = evaluate(model, prep)
    res = RunResult(
        run.seed,
        run.run,
        run.strategy,
        run.label,
        run.budget,
        float(pls),
        float(a),
        float(ll),
        float(position),
        float(age),
    )
    return res, time.perf_counter() - t0, time.process_time() - c0


def _init_worker(threads: int) -> None:
    """A worker's initializer: ignore SIGINT (the parent handles Ctrl-C and stops the workers),
    die with the parent (``kill -9`` of ``cprsim calibrate`` included: no orphaned workers,
    forkserver or resource tracker), ``threads`` torch threads."""
    from cprsim.workers import die_with_parent

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()
    torch.set_num_threads(threads)


def _context() -> multiprocessing.context.BaseContext:
    # forkserver: workers fork from a fresh server process that has imported torch and this module
    # once (fast start, no threads or locks inherited from the caller); spawn where unavailable
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["cprsim.calibrate.runner"])
        return ctx
    return multiprocessing.get_context("spawn")


def execute(
    p: Preset,
    runs: Sequence[Run],
    jobs: int = 1,
    threads: int = 1,
) -> Iterator[tuple[RunResult, float, float]]:
    """Run ``runs``; yield ``(result, wall s, CPU s)`` as each completes (in completion order).

    ``jobs == 1`` runs here, in order, with ``threads`` torch threads (restored afterwards);
    otherwise ``jobs`` worker processes with ``threads`` threads each. Stopping the iteration
    (an exception, Ctrl-C, ``close()``) cancels the runs not started and ends the workers.
    """
    if not runs:
        return
    if jobs <= 1 or len(runs) == 1:
        old = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            for r in runs:
                yield run_one(p, r)
        finally:
            torch.set_num_threads(old)
            _PREP.clear()
        return
    ex = ProcessPoolExecutor(
        max_workers=min(jobs, len(runs)),
        mp_context=_context(),
        initializer=_init_worker,
        initargs=(threads,),
    )
    clean = False
    try:
        pending = {ex.submit(run_one, p, r) for r in runs}  # in order: a worker keeps a seed's data
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in sorted(done, key=lambda f: f.result()[0].key):
                yield f.result()
        clean = True
    finally:
        if clean:
            ex.shutdown(wait=True)
        else:  # stop the runs under way too (the executor would wait for them)
            procs = list((getattr(ex, "_processes", None) or {}).values())
            ex.shutdown(wait=False, cancel_futures=True)
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.join(5)


def points_from(results: Sequence[RunResult]) -> tuple[list[Point], dict]:
    """Points (sorted by seed and run, whatever order the results came in) and the baselines."""
    res = sorted(results, key=lambda r: r.key)
    base = {r.seed: r for r in res if r.run == 0}
    points = [
        Point(
            r.strategy,
            r.budget,
            r.seed,
            r.pls,
            base[r.seed].auc - r.auc,
            r.logloss - base[r.seed].logloss,
            r.auc,
            r.logloss,
            r.position,
            r.age,
        )
        for r in res
        if r.run != 0
    ]
    seeds = sorted(base)
    facts = {
        "baseline_auc": [base[s].auc for s in seeds],
        "baseline_logloss": [base[s].logloss for s in seeds],
    }
    return points, facts


def _no_progress(n: int = 1) -> None:
    """The progress callback when none is given."""


def run_preset(
    p: Preset,
    progress: Callable[[int], None] = _no_progress,
    settings_fn: Callable[[int, int], list[tuple[float, Setting]]] | None = None,
    jobs: int = 1,
    threads: int = 1,
) -> tuple[list[Point], dict]:
    """Every run of the preset (no files); returns the points and facts (baselines, n_iters)."""
    results = []
    for r, _, _ in execute(p, plan_runs(p, settings_fn), jobs, threads):
        results.append(r)
        progress(1)
    points, facts = points_from(results)
    facts["n_iters"] = n_iters_of(p)
    return points, facts


def n_steps(p: Preset) -> int:
    """Runs of a preset: per seed, a baseline and one per budget and strategy (and its ladder's
    rungs' runs)."""
    own = len(p.seeds) * (1 + len(p.budgets) * len(p.strategies))
    return own + sum(n_steps(RUNGS[name][0]) for name in p.rungs)


# -- fit -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fit:
    """``loss = slope x PLS`` fitted through the origin: the slope (loss per unit PLS), its 95% CI
    (``lo``, ``hi``), R² (centred) and the points ``n``."""

    slope: float
    lo: float
    hi: float
    r2: float
    n: int


def fit_origin(x: np.ndarray, y: np.ndarray) -> Fit:
    """Least squares ``y = b x`` through the origin: the slope, its 95% Student-t CI (``n - 1``
    degrees of freedom; infinite for one point), R² and ``n`` (NaN if ``x`` is empty or all 0)."""
    from scipy import stats

    x, y = np.asarray(x, float), np.asarray(y, float)
    n = len(x)
    sxx = float(np.dot(x, x))
    if n == 0 or sxx == 0:
        return Fit(float("nan"), float("nan"), float("nan"), float("nan"), n)
    b = float(np.dot(x, y)) / sxx
    res = y - b * x
    ss_res = float(np.dot(res, res))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")
    if n > 1:
        se = math.sqrt(ss_res / (n - 1) / sxx)
        h = float(stats.t.ppf(0.975, n - 1)) * se
    else:
        h = float("inf")
    return Fit(b, b - h, b + h, r2, n)


def fits(points: list[Point]) -> dict[str, dict[str, Fit]]:
    """Per strategy (in order of first appearance), the ``auc`` and ``logloss`` fits of its points
    (:func:`fit_origin`)."""
    out: dict[str, dict[str, Fit]] = {}
    for st in dict.fromkeys(pt.strategy for pt in points):
        ps = [pt for pt in points if pt.strategy == st]
        x = np.array([pt.pls for pt in ps])
        out[st] = {
            "auc": fit_origin(x, np.array([pt.d_auc for pt in ps])),
            "logloss": fit_origin(x, np.array([pt.d_logloss for pt in ps])),
        }
    return out


def preset_dict(p: Preset) -> dict:
    """The preset as plain data (tuples as lists) for the provenance and the fingerprint."""
    d = asdict(p)
    d["seeds"] = list(p.seeds)
    d["budgets"] = list(p.budgets)
    d["strategies"] = list(p.strategies)
    return d


def resolve_device(device: str) -> str:
    """``device`` (``cprsim calibrate --device``): ``auto`` is ``cuda`` where torch sees a GPU,
    else ``cpu``; ``cuda`` (or ``cuda:N``) without one is a one-line error (a
    :class:`~cprsim.errors.ParameterError` of ``device``)."""
    from cprsim.errors import ParameterError

    d = device.strip().lower()
    if d == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if d == "cpu":
        return "cpu"
    want = "expected auto, cpu, cuda or cuda:N"
    if not d.startswith("cuda"):
        raise ParameterError("device", f"{want}, got {device!r}")
    try:
        dev = torch.device(d)
    except (RuntimeError, ValueError):
        raise ParameterError("device", f"{want}, got {device!r}") from None
    if not torch.cuda.is_available():
        raise ParameterError(
            "device",
            f"{device}: torch sees no CUDA GPU here (torch {torch.__version__}; a CPU-only build, "
            "or no driver): use cpu or auto",
        )
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ParameterError(
            "device", f"{device}: this machine has {torch.cuda.device_count()} CUDA device(s)"
        )
    return "cuda" if d == "cuda:0" else d  # one name per device (the fingerprint's)
