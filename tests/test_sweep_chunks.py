"""A sweep's tasks: the chunk-size rule by hand, and the same bytes however the replications are cut
into tasks and in whatever order the tasks come back (fixed and adaptive replication)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from cprsim.sweep import load_sweep, run_sweep
from cprsim.sweep import points as P

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

SWEEP = """
name = "chunks"
scenario = "toy"
replications = {reps}
strategies = ["full", "partial"]
[grid]
"checkpoint.interval_h" = [0.25, 0.5, 1.0]
"""


def test_the_chunk_size_rule_by_hand():
    inf = math.inf
    # one process: a chunk per point, whatever the work
    assert P.task_units(1e9, 1, 0.5, 1e-5, 10.0) == inf
    # guided: the work left over GUIDE x workers, above the floor, below the cap
    assert P.task_units(1e6, 4, 0.001, 1e-5, inf) == pytest.approx(1e6 / (P.GUIDE * 4))
    assert P.task_units(1e6, 4, 0.001, 1e-5, 20_000.0) == 20_000.0
    # the floor: OVERHEAD_FACTOR x a 1 ms overhead = 50 ms of work = 5,000 units at 10 us each
    assert P.task_units(1_000, 4, 0.001, 1e-5, 10.0) == pytest.approx(
        P.OVERHEAD_FACTOR * 0.001 / 1e-5
    )
    # a Dask-like 10 ms overhead: tasks of half a second at least
    assert P.task_units(0, 16, 0.01, 1e-3, inf) == pytest.approx(P.OVERHEAD_FACTOR * 0.01 / 1e-3)
    # an overhead next to nothing: MIN_TASK_S still holds
    assert P.task_units(0, 2, 1e-9, 1e-3, inf) == pytest.approx(P.MIN_TASK_S / 1e-3)


def test_the_sizer_learns_seconds_per_unit_and_counts_down_the_work():
    s = P.TaskSizer(slots=4, left=1e6, cap=1e5)
    assert (s.s_per_unit, s.overhead_s) == (P.PRIOR_S_PER_UNIT, P.PRIOR_OVERHEAD_S)
    s.measured(1_000, 2.0, 2.5)  # back 0.5 s after it was handed out: it waited in a queue
    s.measured(3_000, 2.0, 2.001)
    assert s.s_per_unit == pytest.approx(1e-3)
    assert s.overhead_s == pytest.approx(0.001)  # the fastest task's time outside its work
    assert s.target() == pytest.approx(1e6 / (P.GUIDE * 4))
    s.handed(1e6 - 100)
    assert s.target() == pytest.approx(50.0)  # the floor: 50 ms at 1 ms a unit
    s.handed(1e9)
    assert s.left == 0.0


def test_a_sweep_is_cut_into_shrinking_tasks_that_cover_every_replication_once():
    """96 points of 600 replications on 16 workers (issue 29's sweep, not run): tasks of the cap
    first, then ever smaller, down to the floor; every replication handed out exactly once."""
    from types import SimpleNamespace

    runs = []
    for i in range(96):
        r = P.PointRun(SimpleNamespace(index=i), 600, None)  # type: ignore[arg-type]
        r._cost = P.BASE_EVENTS + 50.0
        runs.append(r)
    sizer = P.sizer_for(runs, 16)
    assert sizer.cap == pytest.approx(96 * 600 * 250.0 / (P.TASKS_PER_WORKER * 16))
    pending, active, tasks = list(reversed(runs)), [], []
    while items := P._next_task(active, pending, sizer):
        tasks.append(sum(n for _, _, n in items))
        for r, first, n in items:  # as if back at once
            r.add([(j,) for j in range(first, first + n)])
            if r.stop is not None:
                active.remove(r)
    assert sum(tasks) == 96 * 600 and all(r.ready == 600 for r in runs)
    assert tasks[0] == pytest.approx(sizer.cap / 250.0, abs=1)
    assert tasks[-2] < tasks[0] / 10  # the last tasks are small: the workers end together
    assert 16 * P.TASKS_PER_WORKER <= len(tasks) <= 3 * 16 * P.TASKS_PER_WORKER


class _Reversed:
    """In-process 'workers' that hand back the latest task first (out of order), recording each
    task's chunks."""

    def __init__(self, slots: int) -> None:
        self.slots, self.done, self.n, self.tasks = slots, {}, 0, []

    def submit(self, fn, *args):
        self.n += 1
        self.done[self.n] = fn(*args)
        self.tasks.append([(i, first, count) for i, _, first, count in args[1]])
        return self.n

    def wait(self, handles):
        h = max(handles)
        return [(h, self.done.pop(h))]


def _files(out: Path) -> bytes:
    return (out / "results.csv").read_bytes() + (out / "summary.csv").read_bytes()


@pytest.mark.parametrize("precision", [None, 0.2], ids=["fixed", "adaptive"])
def test_any_chunk_size_and_order_gives_the_bytes_of_one_process(tmp_path, monkeypatch, precision):
    f = tmp_path / "s.toml"
    f.write_text(SWEEP.format(reps=12))
    run_sweep(load_sweep(f, precision=precision), tmp_path / "one")
    want = _files(tmp_path / "one")
    monkeypatch.setattr(P, "_cost", lambda p: 0.0)  # every replication weighs BASE_EVENTS
    for chunk in (1, 5, 12, 1000):  # replications per chunk: 1000 batches every point in a task
        monkeypatch.setattr(P, "task_units", lambda *a, c=chunk: c * P.BASE_EVENTS)
        backend = _Reversed(slots=3)
        out = tmp_path / f"c{chunk}"
        run_sweep(load_sweep(f, precision=precision), out, workers=backend)  # type: ignore[arg-type]
        assert _files(out) == want, chunk
        chunks = [c for t in backend.tasks for c in t]
        counts = {n for _, _, n in chunks}
        if chunk < 12:  # points split into chunks of at most `chunk` replications
            assert max(counts) <= chunk and len(chunks) > 6
        elif precision is None:  # a point a chunk; past its 12 replications, several a task
            assert counts == {12} and len(chunks) == 6
            assert max(len(t) for t in backend.tasks) == (1 if chunk == 12 else 6)


def test_resume_then_finish_gives_the_bytes_of_one_run(tmp_path):
    """The final journal is rebuilt from the points read back and those run since."""
    f = tmp_path / "s.toml"
    f.write_text(SWEEP.format(reps=4))
    run_sweep(load_sweep(f), tmp_path / "one")
    part = tmp_path / "part"
    run_sweep(load_sweep(f), part, jobs=2)
    text = (part / "results.csv").read_text().splitlines(keepends=True)
    keep = [r for r in text if not r.startswith(("3,", "4,", "5,"))]  # points 3..5 lost
    (part / "results.csv").write_text("".join(keep))
    (part / "summary.csv").unlink()
    run_sweep(load_sweep(f), part, resume=True, workers=_Reversed(slots=2))  # type: ignore[arg-type]
    assert _files(part) == _files(tmp_path / "one")


def test_the_scaling_benchmark_skips_counts_above_the_cores_and_runs_quick(capsys):
    import sweep_scaling

    runs, skipped = sweep_scaling.runs_of([1, 2, 4, 32], dask=True, have=4)
    assert list(runs) == ["local 1 (baseline)", "dask 1", "local 2", "dask 2", "local 4", "dask 4"]
    assert skipped == ["32 workers: this machine has 4 cores"]
    ups = sweep_scaling.main(["--quick", "--no-dask", "--workers", "1,2"])
    assert set(ups) <= {"local 1 (baseline)", "local 2"}
    assert "identical across runs: yes" in capsys.readouterr().out
