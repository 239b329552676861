"""Real costs: ``torch.save``/``torch.load`` of emulated shards, and an end-to-end check.

* :func:`measure_shard_io` writes every shard (rows + row-wise Adagrad state) to a temporary
  directory with ``torch.save`` (fsync'd) and reads it back with ``torch.load``, ``repeats``
  times; it reports bytes and median seconds per shard and the implied GB/s.
* :func:`end_to_end` checks the simulator's cost model against real training. It trains the DLRM
  ``repeats`` times plainly and ``repeats`` times with real checkpoint writes of all shards
  (``torch.save`` + fsync) every ``interval`` iterations and injected failures that really reload
  the failed shard from disk, the two arms interleaved in counterbalanced pairs (plain,
  checkpointed | checkpointed, plain | ...) so that machine-load drift hits both alike. Each pair
  gives a measured overhead ``(checkpointed - plain) / plain`` and the simulator's prediction for
  that repetition (:func:`_simulate`: :func:`cprsim.sim.engine.simulate_one`, strategy
  ``partial``, job length = the pair's plain wall time, save/shard-load costs = the ones that
  repetition measured, its failures at the iterations where they struck, no rescheduling delay: a
  local process "restarts" instantly). :func:`verdict` turns the paired differences
  measured - simulated into a 95% CI and a verdict.

**Power rule.** Unless ``interval`` is given, a pilot (a warm-up of a few iterations and three
timed saves of all shards) sets it so that the checkpoints' predicted cost is ``target_overhead``
(default 50%) of the plain run: ``interval = round(save_all_s / (target_overhead x iteration_s))``.
The CI half-width is about ``t x sqrt(2) x CV / sqrt(repeats)`` (CV: the plain arm's run-to-run
coefficient of variation: 2-3% measured while the 2-core development machine was quiet, up
to 19% under other users' load) and the tolerance is 20% of the predicted overhead (10 points at
50%), so with 4 repetitions (t = 3.18) the check can confirm while CV <= ~4.4%, i.e. while the
predicted overhead is >= ~11x the CV. The result reports the CV measured, the ratio
(``overhead_to_cv``) and the load average; a CI too wide for the tolerance gives "inconclusive"
rather than "confirmed".

**Verdict** (:func:`verdict`; tolerance ``T = tolerance_rel x mean simulated overhead``, 20%):
"confirmed" when the 95% CI of the mean difference lies within ``[-T, T]`` (a CI holding 0
confirms only if it also fits in the band; one excluding 0 but inside it confirms too: a
detectable but practically irrelevant gap, flagged ``excludes_zero``); "refuted" when it lies
wholly outside the band; else "inconclusive" (the CI is too wide for the tolerance, or straddles
its edge). Why 20% relative:
the planner trades save cost against lost work, and near the optimum the overhead is flat in the
interval: with Young/Daly's ``O(tau) = s/tau + tau/(2M)`` a save cost off by 20% moves the chosen
interval by ~10% and raises the planned overhead by less than 0.5% of itself; an absolute band
(say 2 points) would be meaningless at a 50% overhead and impossible at 1%.
"""

from __future__ import annotations

import gc
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from cprsim.calibrate.emulation import shard_of_rows
from cprsim.calibrate.model import DLRM
from cprsim.calibrate.runner import Prepared, Preset, new_model
from cprsim.names import PARTIAL


def _save(obj: dict, path: Path) -> None:
    with open(path, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())


def measure_shard_io(model: DLRM, n_shards: int, repeats: int = 3) -> dict:
    """Time ``torch.save`` (fsync'd) and ``torch.load`` of each of ``n_shards`` shards of ``model``
    (rows and row-wise Adagrad state) in a temporary folder, ``repeats`` times: the median bytes and
    seconds per shard, and the implied GB/s."""
    shard = shard_of_rows(model.n_rows, n_shards)
    rows = [torch.nonzero(shard == j).squeeze(1) for j in range(n_shards)]
    saves, loads, sizes = [], [], []
    with tempfile.TemporaryDirectory(prefix="cprsim-io-") as d:
        for _ in range(repeats):
            for j, r in enumerate(rows):
                p = Path(d) / f"shard{j}.pt"
                obj = {"rows": r, "emb": model.emb[r].clone(), "state": model.emb_state[r].clone()}
                t = time.perf_counter()
                _save(obj, p)
                saves.append(time.perf_counter() - t)
                sizes.append(p.stat().st_size)
                t = time.perf_counter()
                torch.load(p)
                loads.append(time.perf_counter() - t)
    b = statistics.median(sizes)
    s, lo = statistics.median(saves), statistics.median(loads)
    return {
        "shards": n_shards,
        "shard_bytes": int(b),
        "shard_save_s": s,
        "shard_load_s": lo,
        "save_gbps": b / s / 1e9,
        "load_gbps": b / lo / 1e9,
        "repeats": repeats,
        "method": "torch.save + fsync / torch.load of one shard's rows and Adagrad state, "
        "local temp dir, median",
    }


#: the predicted checkpoint cost the power rule aims at, as a fraction of the plain run
TARGET_OVERHEAD = 0.5
#: the verdict's practical tolerance: |measured - simulated| within this fraction of the simulated
TOLERANCE_REL = 0.2
#: repetitions of each arm in ``cprsim calibrate`` per preset (others: DEFAULT_REPEATS); chosen so
#: the check costs <= ~20 s at quick (~17 s idle: 1.75 s plain runs at 50% overhead), ~3 min at
#: standard (33 s a pair measured at load ~1), ~8 min at paper (estimated) (docs/calibration.md)
E2E_REPEATS = {"quick": 4, "standard": 5, "paper": 4}
DEFAULT_REPEATS = 3  #: for a preset not in E2E_REPEATS

NOTES = (
    "Not modelled by the simulator but present in the real run: the Python loop and tensor "
    "allocation around the timed saves and loads; the page cache (fsync forces the data out, but "
    "written pages stay cached, and the reload reads them from memory, not from the disk); CPU "
    "cache and memory-bandwidth interference of the copies on the next iterations; garbage "
    "collection and allocator effects; the timer calls. Whatever of these slows the iterations "
    "between saves shows as measured minus simulated (the simulator gets the time inside each "
    "save and load, nothing else). The check also simplifies the system: one process on one "
    "machine, one local disk, synchronous saves of the embedding shards only (no dense part), no "
    "failure detection, no process restart and no rescheduling delay (the simulator gets 1 ns), "
    "shards saved one after another rather than in parallel by servers. On a shared machine the "
    "run also meets CPU contention the simulator knows nothing of, and it can go either way: "
    "other processes take the core while this one waits in fsync (at a load average of 1.7-2.9 "
    "the iteration right after a save took 5.5 ms, the others 9.3 ms, median), while at a load "
    "around 1 the checkpointed arm's iterations ran slower than the plain arm's; compare the "
    "load averages."
)


def e2e_repeats(p: Preset) -> int:
    """Repetitions of each arm of the end-to-end check for preset ``p`` in ``cprsim calibrate``."""
    return E2E_REPEATS.get(p.name, DEFAULT_REPEATS)


def _stats(x: list[float]) -> dict:
    a = np.asarray(x, float)
    return {
        "values": [float(v) for v in a],
        "mean": float(a.mean()),
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "min": float(a.min()),
        "max": float(a.max()),
    }


def verdict(
    diffs: list[float],
    simulated: list[float],
    tolerance_rel: float = TOLERANCE_REL,
    level: float = 0.95,
) -> dict:
    """Mean of the paired differences (measured - simulated overhead), its ``level`` CI (Student t
    with n - 1 degrees of freedom over the repetitions) and the verdict against the tolerance
    ``tolerance_rel x mean(simulated)`` (see the module docstring).

    Student t rather than a bootstrap: with 3-10 repetitions a percentile bootstrap's interval is
    too narrow (it cannot see beyond the few values drawn), while t is exact for normal differences
    and each difference is a sum over hundreds of iterations' times."""
    from scipy import stats

    d = np.asarray(diffs, float)
    n = len(d)
    if n == 0:
        raise ValueError("verdict: no repetitions")
    mean = float(d.mean())
    if n >= 2:
        sd = float(d.std(ddof=1))
        t = float(stats.t.ppf(0.5 + level / 2, n - 1))
        half = t * sd / math.sqrt(n)
    else:
        sd, t, half = float("nan"), float("inf"), float("inf")
    lo, hi = mean - half, mean + half
    tol = tolerance_rel * abs(float(np.mean(simulated)))
    if -tol <= lo and hi <= tol:
        v = "confirmed"
    elif lo > tol or hi < -tol:
        v = "refuted"
    else:
        v = "inconclusive"
    return {
        "n": n,
        "mean": mean,
        "sd": sd,
        "t_quantile": t,
        "lo": lo,
        "hi": hi,
        "half_width": half,
        "level": level,
        "tolerance": tol,
        "tolerance_rel": tolerance_rel,
        "verdict": v,
        "excludes_zero": bool(lo > 0 or hi < 0),
    }


def _load_average() -> float:
    """The 1-minute load average (nan where the OS has none): 2.0 = both cores of the 2-core
    development machine busy."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def _train(model: DLRM, prep: Prepared, k: int) -> None:
    B = prep.batch
    sl = slice(k * B, (k + 1) * B)
    uniq, inv = prep.unique(k)
    model.train_step_unique(prep.dense[sl], uniq, inv, prep.label[sl])


class _TimedRuns:
    """The end-to-end check's timed runs of ``prep``: plain ones, and checkpointed ones saving
    each shard's rows to its file in ``d`` and reloading a shard at each of ``fails``."""

    def __init__(
        self,
        prep: Prepared,
        p: Preset,
        seed: int,
        d: Path,
        n_rows: int,
        fails: dict[int, list[int]],
    ) -> None:
        self.prep, self.p, self.seed, self.fails, self.n = prep, p, seed, fails, prep.n_iters
        shard = shard_of_rows(n_rows, p.n_shards)
        self.rows = [torch.nonzero(shard == j).squeeze(1) for j in range(p.n_shards)]
        self.files = [d / f"shard{j}.pt" for j in range(p.n_shards)]

    def save_all(self, model: DLRM) -> float:
        """Save every shard of ``model``; the seconds it took."""
        t = time.perf_counter()
        for r, f in zip(self.rows, self.files):
            _save({"emb": model.emb[r].clone(), "state": model.emb_state[r].clone()}, f)
        return time.perf_counter() - t

    def pilot(self, model: DLRM) -> tuple[float, float]:
        """Warm up on the pilot ``model``: the batches' unique rows, some iterations, three saves;
        returns the median iteration's seconds (of the later half) and the median save's."""
        prep, n = self.prep, self.n
        prep.unique(0)
        its = []
        for k in range(min(n, max(20, min(200, n // 10)))):
            t = time.perf_counter()
            _train(model, prep, k)
            its.append(time.perf_counter() - t)
        iter_s = statistics.median(its[len(its) // 2 :])  # the first half warms up
        return iter_s, statistics.median(self.save_all(model) for _ in range(3))

    def paired(
        self, repeats: int, iv: int, failures: list[tuple[int, int]]
    ) -> list[dict[str, float]]:
        """``repeats`` counterbalanced pairs of a plain and a checkpointed run (every ``iv``
        iterations): each pair's wall seconds, mean save and load, measured and simulated overhead."""
        reps = []
        for i in range(repeats):
            if i % 2 == 0:  # counterbalanced pairs: P C | C P | P C | ...
                pw = self.plain()
                cw, saves, loads = self.checkpointed(iv)
            else:
                cw, saves, loads = self.checkpointed(iv)
                pw = self.plain()
            save_s = statistics.mean(saves) if saves else 0.0
            load_s = statistics.mean(loads) if loads else 0.0
            so, _, sim_ck = _simulate(pw, self.n, iv, self.p.n_shards, save_s, load_s, failures)
            m = (cw - pw) / pw
            reps.append(
                {
                    "plain": pw,
                    "ckpt": cw,
                    "measured": m,
                    "simulated": so,
                    "diff": m - so,
                    "save_s": save_s,
                    "load_s": load_s,
                    "sim_ck": sim_ck,
                }
            )
        return reps

    def plain(self) -> float:
        """A run without checkpoints from a fresh model; its wall seconds."""
        prep = self.prep
        model = new_model(prep, self.p.model, self.seed)
        gc.collect()
        t0 = time.perf_counter()
        for k in range(self.n):
            _train(model, prep, k)
        return time.perf_counter() - t0

    def checkpointed(self, iv: int) -> tuple[float, list[float], list[float]]:
        """A run saving every ``iv`` iterations and reloading the failed shards; its wall
        seconds and each save's and load's."""
        prep, rows, files = self.prep, self.rows, self.files
        model = new_model(prep, self.p.model, self.seed)
        self.save_all(model)  # the initial checkpoint, untimed: the simulator starts from one
        gc.collect()
        saves, loads = [], []
        t0 = time.perf_counter()
        for k in range(self.n):
            if k > 0 and k % iv == 0:
                saves.append(self.save_all(model))
            for j in self.fails.get(k, ()):
                t = time.perf_counter()
                obj = torch.load(files[j])
                model.emb[rows[j]] = obj["emb"]
                model.emb_state[rows[j]] = obj["state"]
                loads.append(time.perf_counter() - t)
            _train(model, prep, k)
        return time.perf_counter() - t0, saves, loads


def _e2e_table(
    reps: list[dict[str, float]],
    *,
    repeats: int,
    threads: int,
    n: int,
    iv: int,
    rule: str,
    target_overhead: float,
    n_failures: int,
    tolerance_rel: float,
    checks_s: float,
    load_before: float,
    iter_s: float,
    pilot_save_s: float,
) -> dict:
    """The ``[end_to_end]`` table of the repeats ``reps``: the verdict and its interval, the
    measured and simulated overheads, the settings and the costs measured."""

    def col(key: str) -> list[float]:
        return [float(r[key]) for r in reps]

    v = verdict(col("diff"), col("simulated"), tolerance_rel)
    pa = np.asarray(col("plain"))
    cv = float(pa.std(ddof=1) / pa.mean()) if repeats > 1 else float("nan")
    sim_mean = float(np.mean(col("simulated")))
    return {
        "verdict": v["verdict"],
        "measured_overhead": float(np.mean(col("measured"))),
        "simulated_overhead": sim_mean,
        "difference": v["mean"],
        "difference_lo": v["lo"],
        "difference_hi": v["hi"],
        "tolerance": v["tolerance"],
        "tolerance_rel": tolerance_rel,
        "excludes_zero": v["excludes_zero"],
        "ci_half_width": v["half_width"],
        "t_quantile": v["t_quantile"],
        "ci": (
            f"{v['level']:.0%} Student t over the {repeats} paired differences measured - "
            f"simulated overhead ({repeats - 1} degrees of freedom)"
        ),
        "rule": (
            "confirmed: the CI lies within +-tolerance (tolerance = tolerance_rel x simulated "
            "overhead); refuted: the CI lies wholly outside it; else inconclusive"
        ),
        "repeats": repeats,
        "threads": threads,
        "order": "counterbalanced pairs: plain, checkpointed | checkpointed, plain | ...",
        "iterations": n,
        "interval_iterations": iv,
        "interval_rule": rule,
        "target_overhead": target_overhead,
        "checkpoints": len(range(iv, n, iv)),
        "simulated_checkpoints": int(max(col("sim_ck"))),
        "failures": n_failures,
        "save_s_mean": float(np.mean(col("save_s"))),
        "shard_load_s_mean": float(np.mean(col("load_s"))),
        "plain_cv": cv,
        "overhead_to_cv": sim_mean / cv if cv > 0 else float("inf"),
        "duration_s": checks_s,
        "load_average_before": load_before,
        "load_average_after": _load_average(),
        "notes": NOTES,
        "plain_wall_s": dict(_stats(col("plain")), cv=cv),
        "checkpointed_wall_s": _stats(col("ckpt")),
        "measured": _stats(col("measured")),
        "simulated": _stats(col("simulated")),
        "paired_difference": dict(_stats(col("diff")), sd=v["sd"]),
        "costs": {
            "save_s": col("save_s"),
            "shard_load_s": col("load_s"),
            "pilot_iteration_s": iter_s,
            "pilot_save_all_s": pilot_save_s,
        },
    }


def end_to_end(
    prep: Prepared,
    p: Preset,
    seed: int,
    interval: int | None = None,
    failures: list[tuple[int, int]] | None = None,
    repeats: int = 2,
    threads: int = 1,
    target_overhead: float = TARGET_OVERHEAD,
    tolerance_rel: float = TOLERANCE_REL,
) -> dict:
    """The end-to-end check (module docstring): ``repeats`` plain and ``repeats`` checkpointed
    runs of ``prep``'s iterations on ``threads`` torch threads, interleaved (2 by default, the
    fewest with a spread: too few for a conclusive verdict unless the noise is tiny; ``cprsim
    calibrate`` uses :func:`e2e_repeats`); ``interval`` None chooses it by the power rule;
    ``failures`` are ``(iteration, shard)``. Returns the ``[end_to_end]`` table."""
    if repeats < 1 or threads < 1:
        raise ValueError(f"end_to_end: repeats and threads must be >= 1, got {repeats}, {threads}")
    n = prep.n_iters
    failures = sorted((int(k), int(j)) for k, j in (failures or []) if 0 <= k < n)
    fails: dict[int, list[int]] = {}
    for k, j in failures:
        fails.setdefault(k, []).append(j)
    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with tempfile.TemporaryDirectory(prefix="cprsim-e2e-") as d:
            model = new_model(prep, p.model, seed)  # the pilot's
            runs = _TimedRuns(prep, p, seed, Path(d), model.n_rows, fails)
            iter_s, pilot_save_s = runs.pilot(model)
            if interval is None:
                iv = max(1, round(pilot_save_s / (target_overhead * iter_s)))
                rule = (
                    f"power rule: round(pilot save of all shards {pilot_save_s:.4g} s / "
                    f"({target_overhead:g} x pilot iteration {iter_s:.4g} s))"
                )
            else:
                iv, rule = int(interval), "given by the caller"
            if iv < 1:
                raise ValueError(f"end_to_end: interval must be >= 1, got {iv}")
            t_all, load_before = time.perf_counter(), _load_average()
            reps = runs.paired(repeats, iv, failures)
            checks_s = time.perf_counter() - t_all
    finally:
        torch.set_num_threads(threads_before)
    return _e2e_table(
        reps,
        repeats=repeats,
        threads=threads,
        n=n,
        iv=iv,
        rule=rule,
        target_overhead=target_overhead if interval is None else float("nan"),
        n_failures=len(failures),
        tolerance_rel=tolerance_rel,
        checks_s=checks_s,
        load_before=load_before,
        iter_s=iter_s,
        pilot_save_s=pilot_save_s,
    )


def _simulate(
    plain: float,
    n: int,
    interval: int,
    n_shards: int,
    save_s: float,
    load_s: float,
    failures: list[tuple[int, int]],
) -> tuple[float, float, int]:
    """``simulate_one``'s (overhead, wall seconds, checkpoints) for a job of ``plain`` seconds and
    ``n`` iterations saving every ``interval`` iterations in ``save_s``, each failure ``(iteration,
    shard)`` reloading its shard in ``load_s``.

    A failure at iteration ``k`` struck (in the real run) after that iteration's save and before
    its batch: it is scheduled at the simulated wall time at which the simulated job is 1% of an
    iteration past ``k`` (its progress, plus the saves and reloads simulated before it). Using the
    real wall times instead would make comparison artefacts: when the real iterations ran slower
    than the plain run, a failure near the end would strike after the simulated job had ended
    (dropped), and one just after a save could strike during the simulated save (aborted, redone).
    The interval is stretched by 1e-9 so that float rounding cannot add a save at the very end."""
    from cprsim import scenario as sc
    from cprsim.sim.engine import Scheduled, simulate_one

    HOUR = 3600.0
    save_s, load_s, resched = max(save_s, 1e-9), max(load_s, 1e-9), 1e-9
    raw = {
        "name": "calibrate-e2e",
        "replications": 1,
        "seed": 0,
        "cluster": {"trainers": 1, "embedding_servers": n_shards},
        "job": {"duration_h": plain / HOUR},
        "reschedule": {"family": "constant", "mean_s": resched},
        "checkpoint": {"interval_h": plain * interval / n * (1 + 1e-9) / HOUR},
        "strategy": {"name": PARTIAL},
        "costs": {"save_s": save_s, "shard_load_s": load_s},
    }
    s = sc.validate(raw, "calibrate end-to-end")
    it_s = plain / n
    sched: list[Scheduled] = []
    same, prev = 0, None
    for i, (k, j) in enumerate(sorted(failures)):
        same = same + 1 if k == prev else 0
        prev = k
        t = (k + 0.01 * (1 + same)) * it_s + (k // interval) * save_s + i * (load_s + resched)
        sched.append((t, (1 + j,), (resched,)))  # node 0 is the trainer, 1 + j embedding server j
    res, _ = simulate_one(s, 0, schedule=sched)
    return res.overhead, res.wall_s, res.checkpoints
