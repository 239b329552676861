"""Real costs: ``torch.save``/``torch.load`` of emulated shards, and an end-to-end check.

* :func:`measure_shard_io` writes every shard (rows + row-wise Adagrad state) to a temporary
  directory with ``torch.save`` (fsync'd) and reads it back with ``torch.load``, ``repeats``
  times; it reports bytes and median seconds per shard and the implied GB/s.
* :func:`end_to_end` trains the DLRM twice on the same data: plainly, then with real checkpoint
  writes of all shards every ``interval`` iterations and injected failures that really load the
  failed shard from disk. Its measured overhead ``(wall - plain) / plain`` is compared with
  :func:`cprsim.sim.engine.simulate_one` for the same settings: job length = the plain run's wall
  time, save/shard-load costs = the ones measured in that run, failures at the wall times they
  struck, strategy ``partial``, no rescheduling delay (a local process "restarts" instantly).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from cprsim.calibrate.emulation import shard_of_rows
from cprsim.calibrate.model import DLRM
from cprsim.calibrate.runner import Preset, Prepared, new_model


def _save(obj: dict, path: Path) -> None:
    with open(path, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())


def measure_shard_io(model: DLRM, n_shards: int, repeats: int = 3) -> dict:
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
    return {"shards": n_shards, "shard_bytes": int(b), "shard_save_s": s, "shard_load_s": lo,
            "save_gbps": b / s / 1e9, "load_gbps": b / lo / 1e9, "repeats": repeats,
            "method": "torch.save + fsync / torch.load of one shard's rows and Adagrad state, "
                      "local temp dir, median"}


def end_to_end(prep: Prepared, p: Preset, seed: int, interval: int,
               failures: list[tuple[int, int]]) -> dict:
    torch.set_num_threads(2)
    B, n = prep.batch, prep.n_iters
    # plain run
    model = new_model(prep, p.model, seed)
    t0 = time.perf_counter()
    for k in range(n):
        sl = slice(k * B, (k + 1) * B)
        model.train_step(prep.dense[sl], prep.grows[sl], prep.label[sl])
    plain = time.perf_counter() - t0
    # run with real checkpoints and failures
    model = new_model(prep, p.model, seed)
    shard = shard_of_rows(model.n_rows, p.n_shards)
    rows = [torch.nonzero(shard == j).squeeze(1) for j in range(p.n_shards)]
    fails = dict()
    for k, j in failures:
        fails.setdefault(k, []).append(j)
    save_t, load_t, fail_wall = [], [], []
    with tempfile.TemporaryDirectory(prefix="cprsim-e2e-") as d:
        def save_all() -> None:
            t = time.perf_counter()
            for j, r in enumerate(rows):
                _save({"emb": model.emb[r].clone(), "state": model.emb_state[r].clone()},
                      Path(d) / f"shard{j}.pt")
            save_t.append(time.perf_counter() - t)

        t0 = time.perf_counter()
        save_all()  # the initial checkpoint (not timed in the overhead: the simulator starts from one)
        t0 += save_t.pop()
        for k in range(n):
            if k > 0 and k % interval == 0:
                save_all()
            for j in fails.get(k, ()):
                fail_wall.append(time.perf_counter() - t0)
                t = time.perf_counter()
                obj = torch.load(Path(d) / f"shard{j}.pt")
                model.emb[rows[j]] = obj["emb"]
                model.emb_state[rows[j]] = obj["state"]
                load_t.append(time.perf_counter() - t)
            sl = slice(k * B, (k + 1) * B)
            model.train_step(prep.dense[sl], prep.grows[sl], prep.label[sl])
        wall = time.perf_counter() - t0
    measured = (wall - plain) / plain
    save_s = statistics.mean(save_t) if save_t else 0.0
    load_s = statistics.mean(load_t) if load_t else 0.0
    predicted, sim_wall = _simulate(plain, n, interval, p.n_shards, save_s, load_s, fail_wall)
    return {"iterations": n, "interval_iterations": interval, "failures": len(failures),
            "plain_wall_s": plain, "wall_s": wall, "measured_overhead": measured,
            "save_s_mean": save_s, "shard_load_s_mean": load_s, "checkpoints": len(save_t),
            "simulated_wall_s": sim_wall, "simulated_overhead": predicted,
            "difference": measured - predicted}


def _simulate(plain: float, n: int, interval: int, n_shards: int, save_s: float, load_s: float,
              fail_wall: list[float]) -> tuple[float, float]:
    from cprsim import scenario as sc
    from cprsim.sim.engine import simulate_one

    HOUR = 3600.0
    raw = {
        "name": "calibrate-e2e", "replications": 1, "seed": 0,
        "cluster": {"trainers": 1, "embedding_servers": n_shards},
        "job": {"duration_h": plain / HOUR},
        "reschedule": {"family": "constant", "mean_s": 1e-9},
        "checkpoint": {"interval_h": plain * interval / n / HOUR},
        "strategy": {"name": "partial"},
        "costs": {"save_s": max(save_s, 1e-9), "shard_load_s": max(load_s, 1e-9)},
    }
    s = sc.validate(raw, "calibrate end-to-end")
    # which shard fails does not change the overhead: any shard loads in shard_load_s
    sched = [(t, (1 + i % n_shards,), (1e-9,)) for i, t in enumerate(fail_wall)]
    res, _ = simulate_one(s, 0, schedule=sched)
    return res.overhead, res.wall_s
