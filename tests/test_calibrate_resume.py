"""Parallel, resumable calibration: same bytes whatever --jobs, after a kill, refusals, progress."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

# as `cprsim calibrate` does: OpenMP threads sleep rather than spin while waiting (read when torch
# loads OpenMP; the 2-thread costs check was 25x slower with spinning threads on a busy machine)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
torch = pytest.importorskip("torch")

from click.testing import CliRunner  # noqa: E402

from cprsim.calibrate import pipeline as P  # noqa: E402
from cprsim.calibrate import runner as R  # noqa: E402
from cprsim.errors import InputError, ParameterError  # noqa: E402

pytestmark = pytest.mark.dlrm

#: the smallest configuration that still has baselines, two strategies and two seeds: 6 runs
TINY_CHANGES = dict(
    name="tiny",
    train_samples=12_000,
    test_samples=4_000,
    batch=256,
    seeds=(0, 1),
    budgets=(0.5,),
    strategies=("partial", "mfu"),
)
TINY = dataclasses.replace(R.PRESETS["quick"], **TINY_CHANGES)
OUTPUTS = ("calibration.toml", "points.csv", "manifest.json")


def _bytes(out):
    return {n: (out / n).read_bytes() for n in OUTPUTS}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted serial calibration of TINY (no wall-clock costs: reproducible bytes)."""
    out = tmp_path_factory.mktemp("ref")
    P.calibrate(TINY, out, measure_costs=False, jobs=1)
    return out


@pytest.mark.slow
def test_reference_outputs(reference):
    head, *rows = (reference / "points.csv").read_text().splitlines()
    assert head == ",".join(P.POINTS_HEADER) and len(rows) == R.n_steps(TINY) == 6
    keys = [tuple(int(x) for x in r.split(",")[:2]) for r in rows]
    assert keys == sorted(keys)  # sorted by seed and run, whatever the completion order
    assert all(r.split(",")[8] != "" for r in rows)  # the deltas are filled in at the end
    m = json.loads((reference / "manifest.json").read_text())
    assert m["finished"] and m["runs"] == 6 and len(m["fingerprint"]) == 64
    run = json.loads((reference / "run.json").read_text())
    assert run["runs_run_now"] == 6 and run["jobs"] == 1


@pytest.mark.slow
def test_two_jobs_write_the_same_bytes(reference, tmp_path):
    P.calibrate(TINY, tmp_path, measure_costs=False, jobs=2)
    assert _bytes(tmp_path) == _bytes(reference)
    assert json.loads((tmp_path / "run.json").read_text())["jobs"] == 2


def _killed_copy(reference, out, k, torn):
    """``out`` as a calibration killed after ``k`` runs: the journal of those runs (completion
    order differs from the final order), deltas empty, plus ``torn`` bytes of the next line."""
    out.mkdir()
    m = json.loads((reference / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps(dict(m, finished=False)))
    head, *rows = (reference / "points.csv").read_text().splitlines()
    journal = [",".join(r.split(",")[:10] + ["", ""]) for r in rows]
    order = [3, 0, 5, 1, 4, 2]
    text = head + "\n" + "".join(journal[i] + "\n" for i in order[:k]) + journal[order[k]][:torn]
    (out / "points.csv").write_text(text)


@pytest.mark.slow
@pytest.mark.parametrize("k, torn", [(0, 0), (2, 17), (5, 0)])
def test_a_killed_calibration_resumes_to_the_same_bytes(reference, tmp_path, k, torn):
    out = tmp_path / "killed"
    _killed_copy(reference, out, k, torn)
    # without --resume an unfinished calibration is not overwritten
    with pytest.raises(InputError, match=rf"unfinished calibration \({k} of 6 runs"):
        P.calibrate(TINY, out, measure_costs=False)
    seen = []
    P.calibrate(
        TINY,
        out,
        lambda n=1, what="", resumed=False: seen.append((n, resumed)),
        measure_costs=False,
        jobs=1,
        resume=True,
    )
    assert _bytes(out) == _bytes(reference)
    run = json.loads((out / "run.json").read_text())
    assert run["runs_run_now"] == 6 - k and run["runs_resumed"] == k  # nothing redone
    assert seen == ([(k, True)] if k else []) + [(1, False)] * (6 - k)


def _copy_of(reference, out):
    """``out``: a copy of the finished calibration ``reference``'s outputs."""
    out.mkdir()
    for n in OUTPUTS:
        (out / n).write_bytes((reference / n).read_bytes())
    return out


def test_resuming_a_finished_calibration_runs_nothing(reference, tmp_path):
    out = _copy_of(reference, tmp_path / "again")
    P.calibrate(TINY, out, measure_costs=False, resume=True)
    assert _bytes(out) == _bytes(reference)
    assert json.loads((out / "run.json").read_text())["runs_run_now"] == 0


@pytest.mark.parametrize(
    "change, what",
    [
        ({"seeds": (0, 2)}, "preset.seeds"),
        ({"seeds": (0,)}, "preset.seeds"),
        ({"budgets": (0.25,)}, "preset.budgets"),
        ({"name": "other"}, "preset.name"),
    ],
)
def test_resume_refuses_another_configuration(reference, tmp_path, change, what):
    out = tmp_path / "other"
    _killed_copy(reference, out, 2, 0)
    with pytest.raises(InputError, match=rf"another configuration \(differs in .*{what}") as e:
        P.calibrate(dataclasses.replace(TINY, **change), out, measure_costs=False, resume=True)
    assert "\n" not in str(e.value)


@pytest.mark.slow
def test_resuming_with_more_seeds_extends_to_the_bytes_of_a_run_with_all_of_them(
    reference, tmp_path
):
    more = dataclasses.replace(TINY, seeds=(0, 1, 2))
    direct = tmp_path / "direct"
    P.calibrate(more, direct, measure_costs=False)
    out = _copy_of(reference, tmp_path / "extended")
    P.calibrate(more, out, measure_costs=False, resume=True)
    assert _bytes(out) == _bytes(direct)
    run = json.loads((out / "run.json").read_text())
    assert (run["runs_resumed"], run["runs_run_now"]) == (6, 3)  # the old seeds are not redone
    # once extended, the old seed count is another configuration (its journal has seed 2's runs)
    with pytest.raises(InputError, match="another configuration"):
        P.calibrate(TINY, out, measure_costs=False, resume=True)


@pytest.mark.slow
def test_extend_a_calibration_file_to_the_bytes_of_a_run_with_all_its_seeds(reference, tmp_path):
    """`--extend FILE`: no journal, only the calibration file (as the shipped ones are): its runs
    are rebuilt from its points and baselines, only the new seed trains, and the outputs are the
    bytes of a calibration run with all the seeds; through the API and the CLI."""
    more = dataclasses.replace(TINY, seeds=(0, 1, 2))
    direct = tmp_path / "direct"
    P.calibrate(more, direct, measure_costs=False)
    src = tmp_path / "src" / "calibration.toml"  # the file alone, away from its journal
    src.parent.mkdir()
    src.write_bytes((reference / "calibration.toml").read_bytes())
    out = tmp_path / "extended"
    P.calibrate(more, out, measure_costs=False, extend=src)
    assert _bytes(out) == _bytes(direct)
    run = json.loads((out / "run.json").read_text())
    assert (run["runs_resumed"], run["runs_run_now"]) == (6, 3)  # the file's runs not redone
    from cprsim.cli import main

    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(R.PRESETS, "quick", TINY)
        cli_out = tmp_path / "cli"
        args = ["calibrate", "--extend", str(src), "--seeds", "3", "--out", str(cli_out)]
        r = CliRunner().invoke(main, [*args, "--no-costs", "--jobs", "1"])
        assert r.exit_code == 0, r.output
        assert _bytes(cli_out) == _bytes(direct)
        # an extension cannot start over a folder that holds one; --resume finishes it instead
        r = CliRunner().invoke(main, [*args, "--no-costs"])
        assert r.exit_code != 0 and "already holds a calibration" in r.output
        for extra, why in ((["--resume"], "--resume it without --extend"),):
            r = CliRunner().invoke(main, [*args, *extra])
            assert r.exit_code == 2 and why in r.output
        r = CliRunner().invoke(main, ["calibrate", "--extend", str(src), "--out", str(cli_out)])
        assert r.exit_code == 2 and "give --seeds N" in r.output


@pytest.mark.slow
def test_extend_refuses_another_configuration_fewer_seeds_and_foreign_points(reference, tmp_path):
    src = tmp_path / "calibration.toml"
    text = (reference / "calibration.toml").read_text()
    src.write_text(text)
    more = dataclasses.replace(TINY, seeds=(0, 1, 2))
    with pytest.raises(InputError, match=r"another configuration than this one") as e:
        P.calibrate(dataclasses.replace(more, budgets=(0.25,)), tmp_path / "a", extend=src)
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match=r"holds 2 seeds and this calibration 2: extending adds"):
        P.calibrate(TINY, tmp_path / "b", extend=src)
    import tomllib

    from cprsim.calibrate.calibration import to_toml

    doc = tomllib.loads(text)
    doc["points"]["mfu"] = {k: v[:-1] for k, v in doc["points"]["mfu"].items()}  # a run fewer
    bad = tmp_path / "bad.toml"
    bad.write_text(to_toml(doc, "tampered"))
    with pytest.raises(InputError, match=r"points\.mfu: no point 2 of seed 1"):
        P.calibrate(more, tmp_path / "c", extend=bad)
    doc = tomllib.loads(text)
    del doc["provenance"]["fingerprint"]  # optional in a calibration file, needed to extend one
    bad.write_text(to_toml(doc, "tampered"))
    with pytest.raises(InputError, match=r"provenance: expected seeds, fingerprint"):
        P.calibrate(more, tmp_path / "d", extend=bad)
    doc = tomllib.loads(text)
    del doc["points"]["mfu"]["age"]  # a file without the timing covariates: not 0, refused
    bad.write_text(to_toml(doc, "tampered"))
    with pytest.raises(InputError, match=r"points\.mfu\.age: expected an array"):
        P.calibrate(more, tmp_path / "e", extend=bad)
    doc = tomllib.loads(text)
    doc["points"]["partial"]["d_auc"][0] = 0.6  # a run's AUC under half its baseline's
    bad.write_text(to_toml(doc, "tampered"))
    with pytest.raises(InputError, match=r"more than a factor 2 from its seed's baseline"):
        P.calibrate(more, tmp_path / "f", extend=bad)
    doc = tomllib.loads(text)
    doc["points"]["mfu"]["d_logloss"][0] = math.nan  # the calibration schema's check
    bad.write_text(to_toml(doc, "tampered"))
    with pytest.raises(InputError, match=r"points\.mfu\.d_logloss"):
        P.calibrate(more, tmp_path / "h", extend=bad)
    assert not any((tmp_path / x).exists() for x in "abcdefh")  # nothing written on a refusal
    from cprsim.cli import main

    for args, why in (
        (["--extend", "shipped:", "--seeds", "3"], "name the scenario after 'shipped:'"),
        (["--extend", str(src), "--seeds", "3", "--show", "shipped"], "does not go with"),
    ):
        r = CliRunner().invoke(main, ["calibrate", *args, "--out", str(tmp_path / "g")])
        assert r.exit_code == 2 and why in r.output, r.output


def test_extends_only_adds_seeds():
    runs = [[0, 0, 0.0, None], [0, 1, 0.5, {"x": 1}]]
    old = {"preset": {"seeds": [0], "name": "t"}, "threads_per_run": 1, "runs": runs}
    new = {
        "preset": {"seeds": [0, 1], "name": "t"},
        "threads_per_run": 1,
        "runs": runs + [[1, 0, 0.0, None]],
    }
    assert P.extends(old, new)
    assert not P.extends(new, old) and not P.extends(old, old)  # fewer or the same seeds
    assert not P.extends(old, dict(new, threads_per_run=2))
    assert not P.extends(old, dict(new, preset={"seeds": [0, 1], "name": "u"}))
    changed = dict(new, runs=[[0, 0, 0.0, None], [0, 1, 0.25, {"x": 1}], [1, 0, 0.0, None]])
    assert not P.extends(old, changed)  # an old run planned differently
    assert not P.extends(None, new) and not P.extends({"runs": 3}, new)


def test_help_states_each_presets_default_seed_count():
    from cprsim.cli import main

    r = CliRunner().invoke(main, ["calibrate", "--help"])
    text = " ".join(r.output.split())
    for name, p in R.PRESETS.items():
        assert f"{name} {len(p.seeds)}" in text, name


def test_resume_refuses_other_threads_and_an_unknown_journal(reference, tmp_path):
    out = tmp_path / "threads"
    _killed_copy(reference, out, 2, 0)
    with pytest.raises(InputError, match="threads_per_run"):
        P.calibrate(TINY, out, measure_costs=False, threads=2, resume=True)
    (out / "manifest.json").unlink()
    with pytest.raises(InputError, match=r"points.csv: resume: no manifest.json beside it") as e:
        P.calibrate(TINY, out, measure_costs=False, resume=True)
    assert isinstance(e.value, ParameterError) and e.value.param == "resume"
    assert "--" not in str(e.value)
    (out / "manifest.json").write_text("{not json")
    with pytest.raises(InputError, match=r"manifest.json: not a cprsim calibration manifest"):
        P.calibrate(TINY, out, measure_costs=False, resume=True)


@pytest.mark.parametrize(
    "line, msg",
    [
        (
            "0,1,partial,partial@0.5,0.5,abc,0.5,0.1,0.7,0.4,,",
            r"line 3: pls: expected a number$",
        ),
        (
            "0,1,partial,partial@0.5,0.5,0.1,x,0.1,0.7,0.4,,",
            r"line 3: position: expected a number$",
        ),
        (
            "0,1,partial,partial@0.5,0.5,0.1,0.7",
            r"line 3: expected 12 comma-separated fields, got 7",
        ),
        (
            "0,9,partial,partial@0.5,0.5,0.1,0.5,0.1,0.7,0.4,,",
            r"line 3: seed 0 run 9 is not a run of this calibration",
        ),
        (
            "0,1,mfu,mfu@0.5,0.5,0.1,0.5,0.1,0.7,0.4,,",
            r"line 3: seed 0 run 1 is partial@0.5 at budget 0.5",
        ),
        (
            "x,1,partial,partial@0.5,0.5,0.1,0.5,0.1,0.7,0.4,,",
            r"line 3: seed and run must be integers",
        ),
        (
            "0,0,baseline,baseline,0.0,0.0,0.0,0.0,0.7,0.4,,",
            r"line 3: seed 0 run 0 is already on line 2",
        ),
    ],
)
def test_a_malformed_journal_line_is_a_one_line_error_naming_file_and_line(
    reference, tmp_path, line, msg
):
    out = tmp_path / "bad"
    _killed_copy(reference, out, 0, 0)
    good = "0,0,baseline,baseline,0.0,0.0,0.0,0.0,0.7,0.4,,"
    (out / "points.csv").write_text(",".join(P.POINTS_HEADER) + "\n" + good + "\n" + line + "\n")
    with pytest.raises(InputError, match=rf"points.csv: {msg}") as e:
        P.calibrate(TINY, out, measure_costs=False, resume=True)
    assert "\n" not in str(e.value)


def test_a_journal_with_another_header_is_refused(reference, tmp_path):
    out = tmp_path / "head"
    _killed_copy(reference, out, 0, 0)
    (out / "points.csv").write_text("strategy,budget,seed,pls,d_auc,d_logloss,auc,logloss\n")
    with pytest.raises(InputError, match=r"points.csv: line 1: not a calibration points table"):
        P.calibrate(TINY, out, measure_costs=False, resume=True)


@pytest.mark.slow
def test_cli_jobs_resume_and_progress_lines(reference, tmp_path, monkeypatch):
    """The CLI (TINY in place of the quick preset): a line per finished run on a non-terminal."""
    from cprsim.cli import main

    monkeypatch.setitem(R.PRESETS, "quick", TINY)
    out = tmp_path / "cli"
    _killed_copy(reference, out, 3, 5)
    r = CliRunner().invoke(
        main, ["calibrate", "--out", str(out), "--no-costs", "--jobs", "2", "--resume"]
    )
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    assert lines[0].startswith("calibrate quick: resuming: 3 of 6 runs already in")
    assert [x.split()[2] for x in lines[1:]] == ["4/6", "5/6", "6/6"]
    assert all("ETA" in x and "elapsed" in x for x in lines[1:])
    assert "wrote" in r.stdout and "2 jobs x 1 thread" in r.stdout
    assert _bytes(out) == _bytes(reference)
    r = CliRunner().invoke(
        main,
        [
            "calibrate",
            "--out",
            str(out),
            "--no-costs",
            "--jobs",
            "1",
            "--resume",
            "--threads-per-job",
            "2",
        ],
    )
    assert r.exit_code == 2 and r.stderr.count("\n") == 1 and "another configuration" in r.stderr


@pytest.mark.slow
def test_sigkill_then_resume(reference, tmp_path):
    """A real kill -9 of a two-worker calibration mid-run; --resume ends with the same bytes."""
    out = tmp_path / "sigkill"
    code = (
        "import dataclasses, pathlib\n"
        "from cprsim.calibrate import pipeline as P, runner as R\n"
        f"T = dataclasses.replace(R.PRESETS['quick'], **{TINY_CHANGES!r})\n"
        f"P.calibrate(T, pathlib.Path({str(out)!r}), measure_costs=False, jobs=2)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            p = out / "points.csv"
            if p.exists() and p.read_bytes().count(b"\n") >= 3:  # header + 2 finished runs
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()
        os.killpg(
            proc.pid, signal.SIGKILL
        )  # the process group this test started: parent and workers
    finally:
        proc.wait(30)
    assert not json.loads((out / "manifest.json").read_text())["finished"]
    P.calibrate(TINY, out, measure_costs=False, jobs=2, resume=True)
    assert _bytes(out) == _bytes(reference)
    assert json.loads((out / "run.json").read_text())["runs_resumed"] >= 2


def test_help_states_the_measured_times_of_every_preset():
    from cprsim.cli import main
    from cprsim.cli.calibrate import RUNTIMES

    r = CliRunner().invoke(main, ["calibrate", "--help"])
    assert r.exit_code == 0
    assert {k: p.runtime for k, p in R.PRESETS.items()} == RUNTIMES
    for name, text in RUNTIMES.items():
        assert f"{name:9s} {text}" in r.output
    assert "--jobs" in r.output and "--threads-per-job" in r.output and "--resume" in r.output


def test_terminal_progress_bar_counts_resumed_runs_apart():
    from cprsim.cli.calibrate import _Bar

    bar = _Bar(6, "calibrate tiny")
    with bar.prog:
        bar(2, "2 of 6 runs already in points.csv", resumed=True)
        bar(1, "seed 0 mfu@0.5 (1.0 s)")
        task = bar.prog.tasks[0]
        assert (task.completed, task.total, task.fields["last"]) == (3, 6, "seed 0 mfu@0.5 (1.0 s)")
