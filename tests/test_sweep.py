"""`cprsim sweep`: identical results whatever the backend, resume after kill -9, bad sweep files."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cprsim.sim.replicate import METRICS
from cprsim.sweep import load_results, load_sweep
from cprsim.sweep.results import summary_stats

#: why the Dask-backend tests skip when the distributed extra is absent
NO_DASK = "the Dask backends need the distributed extra (pip install 'cprsim[distributed]')"

SWEEP = """
name = "t"
scenario = "toy"
replications = {reps}
strategies = ["full", {{ name = "partial", label = "cpr" }}]
[set]
"storage.write_gbps" = 0.4
[grid]
"checkpoint.interval_h" = {intervals}
"""


def write_sweep(
    tmp_path: Path, reps: int = 6, intervals: str = "[0.25, 0.5, 1.0]", name: str = "s.toml"
) -> Path:
    p = tmp_path / name
    p.write_text(SWEEP.format(reps=reps, intervals=intervals))
    return p


def rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        return list(csv.reader(f))


def test_expansion_is_grid_major_with_strategies_innermost(tmp_path):
    sw = load_sweep(write_sweep(tmp_path))
    assert [(p.values[0][1], p.strategy) for p in sw.points] == [
        (0.25, "full"),
        (0.25, "cpr"),
        (0.5, "full"),
        (0.5, "cpr"),
        (1.0, "full"),
        (1.0, "cpr"),
    ]
    assert all(p.raw["storage"]["write_gbps"] == 0.4 for p in sw.points)
    assert sw.points[1].raw["strategy"]["name"] == "partial"


@pytest.mark.slow
def test_backends_give_identical_files_and_the_simulator_numbers(tmp_path, cli):
    LocalCluster = pytest.importorskip("distributed", reason=NO_DASK).LocalCluster

    sweep = write_sweep(tmp_path)
    outs = {}
    with LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    ) as cluster:  # an existing scheduler, reached by address
        for label, extra in (
            ("j1", ["--jobs", "1"]),
            ("j2", ["--jobs", "2"]),
            ("dask", ["--dask-local", "2"]),
            ("scheduler", ["--scheduler", cluster.scheduler_address]),
        ):
            out = tmp_path / label
            r = cli("sweep", sweep, "--out", out, *extra)
            assert r.exit_code == 0, r.output
            outs[label] = out
    for name in ("results.csv", "summary.csv", "manifest.json", "config.toml", "sweep.toml"):
        ref = (outs["j1"] / name).read_bytes()
        for label in ("j2", "dask", "scheduler"):
            assert (outs[label] / name).read_bytes() == ref, (label, name)
    table = rows(outs["j1"] / "results.csv")
    assert len(table) == 1 + 6 * 6
    keys = [(r[0], r[4]) for r in table[1:]]
    assert len(set(keys)) == len(keys)  # no point x replication twice
    # a point equals `cprsim simulate` of the same scenario, replication by replication
    r = cli(
        "simulate",
        "toy",
        "--set",
        "storage.write_gbps=0.4",
        "--interval",
        "0.5",
        "--strategy",
        "partial",
        "-n",
        "6",
        "--out",
        tmp_path / "sim",
    )
    assert r.exit_code == 0, r.output
    sim = rows(tmp_path / "sim" / "replications.csv")
    point3 = [row for row in table[1:] if row[0] == "3"]
    assert [row[4:] for row in point3] == sim[1:]


@pytest.mark.slow
def test_resume_after_kill_9_loses_nothing_and_duplicates_nothing(tmp_path, one_line_error, cli):
    sweep = write_sweep(tmp_path, reps=400, intervals="[0.2, 0.3, 0.5, 0.7, 1.0, 1.5, 2.0]")
    ref = tmp_path / "ref"
    assert cli("sweep", sweep, "--out", ref).exit_code == 0
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cprsim", "sweep", str(sweep), "--out", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    journal = out / "results.csv"
    deadline = time.monotonic() + 120
    before = 0
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if journal.exists():
                before = len({r[0] for r in rows(journal)[1:]})
                if before >= 2:
                    break
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the sweep finished before it could be killed"
    assert 2 <= before < 14
    one_line_error(cli("sweep", sweep, "--out", out))  # no silent overwrite without --resume
    r = cli("sweep", sweep, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    ran = int(r.output.split("(")[1].split()[0])
    assert ran <= 14 - before  # the points complete before the kill were not run again
    for name in ("results.csv", "summary.csv"):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name


def test_resume_discards_a_torn_tail_and_an_incomplete_point(tmp_path, cli):
    sweep = write_sweep(tmp_path)
    ref = tmp_path / "ref"
    assert cli("sweep", sweep, "--out", ref).exit_code == 0
    out = tmp_path / "torn"
    out.mkdir()
    for name in ("manifest.json", "config.toml", "journal.sha256"):
        (out / name).write_bytes((ref / name).read_bytes())
    lines = (ref / "results.csv").read_text().splitlines(keepends=True)
    # points 0-1 whole, point 2 with 4 of its 6 rows, then half a line (a write cut by kill -9)
    torn = lines[: 1 + 12] + lines[13:17] + [lines[17][:25]]
    (out / "results.csv").write_text("".join(torn))
    r = cli("sweep", sweep, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    assert "4 run now, 2 already done" in r.output
    assert (out / "results.csv").read_bytes() == (ref / "results.csv").read_bytes()


def test_resume_refuses_a_changed_sweep(tmp_path, cli, one_line_error):
    sweep = write_sweep(tmp_path)
    out = tmp_path / "o"
    assert cli("sweep", sweep, "--out", out).exit_code == 0
    changed = write_sweep(tmp_path, reps=7, name="s2.toml")
    assert "different sweep" in one_line_error(cli("sweep", changed, "--out", out, "--resume"))
    r = cli("sweep", sweep, "--out", out, "--resume")  # same sweep, complete: nothing to run
    assert r.exit_code == 0 and "0 run now, 6 already done" in r.output


@pytest.mark.parametrize(
    "text, expected",
    [
        ('scenario = "toy"\n[grid\n', "invalid TOML"),
        ('scenario = "toy"\nreplicatons = 3\n', "replicatons: unknown key"),
        (
            'scenario = "toy"\n[grid]\n"checkpoint.interval_h" = 0.5\n',
            "grid.checkpoint.interval_h: expected a non-empty list",
        ),
        (
            'scenario = "toy"\n[grid]\n"cluster.trainers" = [2, -1]\n',
            "point 1 (cluster.trainers=-1",
        ),
        ('scenario = "toy"\n[grid]\n"cluster.trainres" = [2]\n', "cluster.trainres: unknown key"),
        ('scenario = "nope"\n', "scenario: "),
        ('scenario = "toy"\nstrategies = ["full", "nosuch"]\n', "nosuch"),
        ('scenario = "toy"\nstrategies = ["full", "full"]\n', "share the label"),
        # a [plan] that cannot prove its confidence with the replications it would have: refused
        # before any point runs (issue 27), not after all of them
        (
            'scenario = "toy"\nreplications = 4\n[plan]\nmax_accuracy_loss = 0.001\n'
            "replications = 10\n",
            "plan.replications: proving P(PLS <= bound) >= 0.9 takes at least 29",
        ),
    ],
)
def test_a_malformed_sweep_file_is_a_one_line_error(tmp_path, text, expected, one_line_error, cli):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    line = one_line_error(cli("sweep", p, "--out", tmp_path / "o"))
    assert str(p) in line and expected in line, line
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_unreachable_scheduler_is_a_one_line_error(tmp_path, one_line_error, cli):
    pytest.importorskip("distributed", reason=NO_DASK)
    line = one_line_error(
        cli(
            "sweep",
            write_sweep(tmp_path),
            "--out",
            tmp_path / "o",
            "--scheduler",
            "tcp://127.0.0.1:9",
        )
    )
    assert "cannot connect" in line
    assert not (tmp_path / "o").exists()  # nothing created before the backend was checked


def test_missing_sweep_file(tmp_path, one_line_error, cli):
    assert "no such sweep file" in one_line_error(cli("sweep", tmp_path / "none.toml"))


def test_results_read_back_match_the_summary(tmp_path, cli):
    sweep = write_sweep(tmp_path)
    out = tmp_path / "o"
    assert cli("sweep", sweep, "--out", out).exit_code == 0
    res = load_results(out)
    summ = rows(out / "summary.csv")
    head = summ[0]
    assert [p.strategy for p in res.points] == [r[1] for r in summ[1:]]
    for p, r in zip(res.points, summ[1:]):
        assert p["overhead"].mean == float(r[head.index("overhead_mean")])
        assert p["pls"].hi == float(r[head.index("pls_hi")])
        for m in ("ettr", "failures_job", "overhead"):  # the journal's new columns round-trip
            for stat in summary_stats(m):
                assert getattr(p[m], stat) == float(r[head.index(f"{m}_{stat}")]), (m, stat)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["replications"] == 6 and len(manifest["points"]) == 6


def test_summary_carries_percentiles_of_single_runs_and_ettr(tmp_path, cli):
    out = tmp_path / "o"
    assert cli("sweep", write_sweep(tmp_path), "--out", out).exit_code == 0
    table = rows(out / "results.csv")
    col = {c: i for i, c in enumerate(table[0])}
    assert {"failures_job", "ettr"} <= set(col) and {"failures_job", "ettr"} <= set(METRICS)
    summ = rows(out / "summary.csv")
    head = summ[0]
    for m in METRICS:
        assert [c for c in head if c.startswith(f"{m}_")][:6] == [
            f"{m}_{s}" for s in summary_stats(m)
        ], m
    spread = 0
    for r in summ[1:]:
        point = [row for row in table[1:] if row[0] == r[0]]
        assert len(point) == 6 == int(r[head.index("n")])
        for row in point:  # ETTR is W / wall, replication by replication
            assert float(row[col["ettr"]]) == pytest.approx(
                float(row[col["useful_s"]]) / float(row[col["wall_s"]])
            )
        for m in ("overhead", "ettr", "pls", "wall_s", "failures_job"):
            x = np.array([float(row[col[m]]) for row in point])
            for q in (50, 10, 1) if m == "ettr" else (50, 90, 99):  # the bad tail
                assert float(r[head.index(f"{m}_p{q}")]) == pytest.approx(
                    np.percentile(x, q), rel=1e-12, abs=0
                )
            assert float(r[head.index(f"{m}_mean")]) == pytest.approx(x.mean(), rel=1e-12, abs=0)
        p50, p90 = (float(r[head.index(f"overhead_p{q}")]) for q in (50, 90))
        spread += p90 > p50
    assert spread > 0  # the runs differ, so the percentiles are not the mean under another name


def test_a_sweep_over_a_replayed_trace_writes_plain_numbers(tmp_path, cli):
    trace = Path(__file__).resolve().parents[1] / "traces" / "examples" / "exponential-16.csv"
    p = tmp_path / "replay.toml"
    p.write_text(
        f'scenario = "toy"\nreplications = 3\n[set]\n"failures.replay" = "{trace}"\n'
        '[grid]\n"checkpoint.interval_h" = [0.5, 1.0]\n'
    )
    r = cli("sweep", p, "--out", tmp_path / "o")
    assert r.exit_code == 0, r.output
    for name in ("results.csv", "summary.csv"):
        text = (tmp_path / "o" / name).read_text()
        assert "np." not in text and "float64" not in text, name
    assert len(load_results(tmp_path / "o").points) == 2


class _Killed(BaseException):
    """Stands for kill -9 in-process: nothing after it runs (not even the writer's cleanup)."""


@pytest.mark.parametrize(
    "step", ["sweep.toml", "config.toml", "manifest.json", "append", "rewrite", "summary.csv"]
)
def test_a_sweep_killed_at_each_write_step_resumes_to_identical_files(
    tmp_path, monkeypatch, step, cli
):
    """Kill the sweep inside one write (its temporary file half-written and left behind, or half a
    journal append written), then `--resume`: the files are byte-identical to an uninterrupted
    run's, and no temporary file is left."""
    import cprsim.io as cio
    import cprsim.sweep.files as files
    import cprsim.sweep.runner as runner

    f = write_sweep(tmp_path, reps=3, intervals="[0.5, 1.0]")
    ref = tmp_path / "ref"
    assert cli("sweep", f, "--out", ref).exit_code == 0
    out = tmp_path / "killed"
    real_atomic, real_append = cio.atomic_write_bytes, runner.Journal.append
    state = {"appends": 0, "rewrites": 0}

    def dying_atomic(path, data):
        p = Path(path)
        target = {
            "sweep.toml": "sweep.toml",
            "config.toml": "config.toml",
            "manifest.json": "manifest.json",
            "summary.csv": "summary.csv",
            "rewrite": "results.csv",
        }.get(step)
        if p.name == target:
            if step == "rewrite":
                state["rewrites"] += 1
                if state["rewrites"] < 2:  # the first rewrite is the empty journal's creation
                    return real_atomic(path, data)
            (p.parent / f".{p.name}.dead.tmp").write_bytes(data[: len(data) // 2])
            raise _Killed()
        return real_atomic(path, data)

    def dying_append(self, text):
        state["appends"] += 1
        if state["appends"] == 2:
            real_append(self, text[: len(text) // 2])
            raise _Killed()
        return real_append(self, text)

    monkeypatch.setattr(files, "atomic_write_bytes", dying_atomic)  # every write of the folder
    monkeypatch.setattr(cio, "atomic_write_bytes", dying_atomic)
    monkeypatch.setattr(files, "atomic_write_text", lambda p, t: dying_atomic(p, t.encode()))
    monkeypatch.setattr(
        files, "atomic_write_json", lambda p, o: dying_atomic(p, cio.dumps_json(o).encode())
    )
    if step == "append":
        monkeypatch.setattr(runner.Journal, "append", dying_append)
    with pytest.raises(_Killed):
        from cprsim.sweep import load_sweep as _load

        runner.run_sweep(_load(f), out, sweep_text=f.read_bytes())
    monkeypatch.undo()
    r = cli("sweep", f, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in ref.iterdir())
    assert sorted(p.name for p in out.iterdir()) == names  # nothing extra: no temporaries
    for name in names:
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_replication_that_cannot_run_names_its_point_and_replication(
    tmp_path, jobs, one_line_error, cli
):
    """A fleet the retirement policy exhausts (point 0): one line naming the point's settings, the
    replication (to rerun it alone) and why, whichever process ran it."""
    p = tmp_path / "s.toml"
    p.write_text(
        'scenario = "toy"\nreplications = 2\n[set]\n"failures.embedding.family" = "exponential"\n'
        '"failures.embedding.mtbf_h" = 1.0\n"lifecycle.retirement.window_h" = 1000.0\n'
        '[grid]\n"lifecycle.retirement.failures" = [1, 1000]\n'
    )
    line = one_line_error(cli("sweep", p, "--out", tmp_path / "o", "--jobs", jobs))
    assert "point 0 (full, lifecycle.retirement.failures=1)" in line, line
    assert "toy, replication 0:" in line and "add lifecycle.spares" in line, line
