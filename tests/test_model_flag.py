"""A fitted failure model in one flag (``--model FILE``), and each fit used only where it means
that: lifetimes replace the node failures, a log's repair times go to a lifecycle's repair
pipeline (never to the job's ``[reschedule]``), and ``[sources]`` says where each came from."""

from __future__ import annotations

import json
import tomllib

import pytest
from click.testing import CliRunner

from cprsim import api
from cprsim import scenario as sc
from cprsim.cli import main
from cprsim.errors import InputError
from cprsim.failures.modelfile import fit_failure_log, write_fitted_model


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    """A model fitted to the generated example trace (it has repairs, of hours)."""
    import traces_examples

    d = tmp_path_factory.mktemp("model")
    fit = fit_failure_log(traces_examples.example(d), "csv", bootstrap=0)
    return write_fitted_model(d / "m.toml", fit), fit


def test_the_model_file_writes_repairs_as_a_lifecycle_repair_not_a_reschedule(model_file):
    path, fit = model_file
    doc = tomllib.loads(path.read_text())
    assert "reschedule" not in doc
    auto = doc["lifecycle"]["repair"]["auto"]
    assert auto["family"] == fit.repairs.best.family
    assert auto["scale_s"] == pytest.approx(fit.repairs.best.scale_ * 3600.0)
    assert (
        "[lifecycle.repair.auto]" in path.read_text().split("[provenance]")[0]
    )  # the header says so


def test_model_replaces_node_failures_and_leaves_reschedule_alone(model_file):
    path, fit = model_file
    own = sc.load("cpr-production")
    assert own.failures.domains  # the built-in's random 4-server failures
    s = sc.load("cpr-production", model=path)
    assert not s.failures.domains and not s.failures.injected and s.failures.replay is None
    assert s.failures.embedding is not None and s.failures.trainer is not None
    assert s.failures.embedding.family == fit.lifetimes.best.family
    assert s.failures.job == own.failures.job  # not a node failure: kept
    assert s.reschedule == own.reschedule and s.lifecycle is None
    assert set(s.sources) == {"failures.trainer", "failures.embedding", "unused.repair", "replaced"}
    assert "failures.domains" in s.sources["replaced"]
    assert "not used" in s.sources["unused.repair"] and str(path.name) in s.sources["unused.repair"]


def test_with_a_lifecycle_the_repair_fit_is_the_machines_repair(model_file):
    path, fit = model_file
    own = sc.load("dlrm-spares")
    assert own.lifecycle is not None
    s = sc.load("dlrm-spares", model=path)
    assert s.lifecycle is not None and s.lifecycle.repair.auto.family == fit.repairs.best.family
    assert s.lifecycle.repair.manual == own.lifecycle.repair.manual
    assert s.reschedule == own.reschedule
    assert "repair times" in s.sources["lifecycle.repair.auto"]


def test_a_scenario_file_model_keeps_its_own_keys_and_reads_old_files_repairs_as_repairs(
    model_file, tmp_path
):
    path, _ = model_file
    doc = tomllib.loads(path.read_text())
    legacy = tmp_path / "old.toml"  # cprsim 0.1 wrote the repair fit as [reschedule]
    legacy.write_text(
        path.read_text().replace("[lifecycle.repair.auto]", "[reschedule]"), encoding="utf-8"
    )
    scen = tmp_path / "s.toml"
    scen.write_text(
        'name = "m"\nreplications = 3\n[job]\nduration_h = 50.0\n'
        '[failures]\nmodel = "old.toml"\n[failures.trainer]\nfamily = "exponential"\nmtbf_h = 7.0\n'
    )
    s = sc.load(str(scen))
    assert s.failures.trainer is not None and s.failures.trainer.mtbf_h == 7.0  # the scenario's
    assert s.failures.embedding is not None
    assert s.failures.embedding.family == doc["failures"]["embedding"]["family"]
    assert s.reschedule == sc.Scenario().reschedule  # not the repair fit
    assert "unused.repair" in s.sources and "failures.trainer" not in s.sources


def test_the_api_takes_a_model_for_a_name_and_for_a_scenario(model_file):
    path, _ = model_file
    a = api.load_scenario("toy", model=path, replications=2)
    b = api.load_scenario(api.load_scenario("toy"), model=path, replications=2)
    assert a.failures == b.failures and a.sources == b.sources and a.replications == 2


def test_a_missing_or_broken_model_is_one_line_naming_the_flag(tmp_path):
    with pytest.raises(InputError, match="model"):
        sc.load("toy", model=tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text('[failures.embedding]\nfamily = "weibull"\nmtbf_h = -1.0\n')
    with pytest.raises(InputError, match="model"):
        sc.load("toy", model=bad)
    for cmd in (["simulate", "toy"], ["show", "toy"]):
        r = CliRunner().invoke(main, [*cmd, "--model", str(tmp_path / "nope.toml")])
        assert r.exit_code != 0 and "--model" in r.output and "Traceback" not in r.output
        assert len(r.output.strip().splitlines()) == 1, r.output


@pytest.mark.slow
def test_simulate_with_model_reschedules_as_the_scenario_says(model_file):
    """The rescheduling a run pays per failure is the scenario's (exponential, mean 120 s), not the
    repair fit's (a mean of hours): on a fixed seed the mean over the runs' failures is within a
    wide band of 120 s that a repair-time draw (thousands of seconds) cannot reach."""
    path, fit = model_file
    r = CliRunner().invoke(
        main,
        ["simulate", "toy", "--model", str(path), "--set", "job.duration_h=2000", "-n", "10"]
        + ["--json"],
    )
    assert r.exit_code == 0, r.output
    out = r.output[r.output.index("{") :]
    d = json.loads(out)["metrics"]
    failures = d["failures_trainer"]["mean"] + d["failures_embedding"]["mean"]
    assert failures > 10
    per_failure = d["reschedule_s"]["mean"] / failures
    repair_mean_s = fit.repairs.best.mean_ * 3600.0
    assert repair_mean_s > 3000  # the example's repairs take hours
    assert per_failure < 3 * 120.0 < repair_mean_s / 10
    assert "--model: unused.repair" in r.output  # said on stderr


@pytest.mark.slow
def test_plan_with_model_notes_where_failures_came_from(model_file):
    path, _ = model_file
    r = CliRunner().invoke(
        main,
        [
            "plan",
            "toy",
            "--model",
            str(path),
            "--max-accuracy-loss",
            "0.001",
            "-n",
            "30",
            "--search-replications",
            "30",
            "--strategies",
            "partial",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    plan = json.loads(r.output[r.output.index("{") :])
    notes = " ".join(plan["notes"])
    assert "failures.embedding from" in notes and "repair-time fit" in notes


@pytest.mark.slow
@pytest.mark.shared
def test_the_infinitehbd_fit_with_model_stalls_the_job_as_the_scenario_says(
    public_traces, tmp_path
):
    """The issue's case: the InfiniteHBD hardware faults' repair fit (a mean of about 200 h) must
    not become the job's stall on every failure. cpr-production's own [reschedule] is a constant
    300 s; its 4-server failure domains are replaced by the fitted per-node lifetimes."""
    m = tmp_path / "ihbd.toml"
    r = CliRunner().invoke(
        main,
        [
            "fit",
            str(public_traces / "InfiniteHBD-Trace" / "fault_trace.json"),
            "--format",
            "infinitehbd",
            "--filter",
            "level=hardware",
            "--bootstrap",
            "0",
            "--out",
            str(m),
        ],
    )
    assert r.exit_code == 0, r.output
    repair = tomllib.loads(m.read_text())["lifecycle"]["repair"]["auto"]
    s = sc.load("infinitehbd-hardware", model=m)
    own = sc.load("infinitehbd-hardware").reschedule
    assert s.reschedule == own and s.lifecycle is None
    assert "unused.repair" in s.sources and repair["family"] in s.sources["unused.repair"]
    r = CliRunner().invoke(
        main,
        ["simulate", "infinitehbd-hardware", "--model", str(m), "--set", "job.duration_h=500"]
        + ["-n", "20", "--json"],
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output[r.output.index("{") :])["metrics"]
    failures = d["failures_trainer"]["mean"] + d["failures_embedding"]["mean"]
    assert failures > 0.5  # about 2 a run
    repair_mean_h = sc.Delay.model_validate(repair).dist.mean() / 3600.0
    assert repair_mean_h > 100  # the log's repairs: about 200 h
    per_failure_s = d["reschedule_s"]["mean"] / failures
    assert per_failure_s < 3 * own.dist.mean() < repair_mean_h * 3600.0 / 100


def test_a_one_type_model_replaces_only_that_types_failures(model_file, tmp_path):
    path, _ = model_file
    text = path.read_text()
    emb_only = tmp_path / "emb.toml"
    emb_only.write_text(
        text.split("[failures.trainer]")[0]
        + "[failures.embedding]"
        + text.split("[failures.embedding]")[1]
    )
    own = sc.load("toy")
    s = sc.load("toy", model=emb_only)
    assert s.failures.trainer == own.failures.trainer  # kept: the model says nothing of trainers
    assert s.failures.embedding != own.failures.embedding
    assert "failures.trainer" not in s.sources and "failures.embedding" in s.sources
    assert "failures.embedding" in s.sources["replaced"]
    # cpr-production's embedding failures are domains: replaced; its trainers have none of their own
    p = sc.load("cpr-production", model=emb_only)
    assert not p.failures.domains and "failures.domains" in p.sources["replaced"]


def test_a_file_that_is_no_model_is_refused(tmp_path):
    for body, needle in (
        ('[provenance]\nsource = "x"\n', "holds no fit"),
        ("failures = 3\n", "holds no fit"),
        (
            '[failures.embedding]\nfamily = "exponential"\nmtbf_h = 9.0\n[lifecycle]\nrepair = 5\n',
            "lifecycle.repair: expected a table",
        ),
    ):
        f = tmp_path / "m.toml"
        f.write_text(body)
        with pytest.raises(InputError, match=needle):
            sc.load("toy", model=f)


def test_a_sweeps_fingerprint_does_not_depend_on_how_the_model_path_is_spelled(
    model_file, tmp_path, monkeypatch
):
    from cprsim.sweep import load_sweep

    path, _ = model_file
    f = tmp_path / "sw.toml"
    f.write_text(
        'scenario = "toy"\nreplications = 2\n[grid]\n"checkpoint.interval_h" = [0.5, 1.0]\n'
    )
    monkeypatch.chdir(path.parent)
    a = load_sweep(f, model=path.name)
    b = load_sweep(f, model=path)
    assert a.fingerprint == b.fingerprint
    assert a.points[0].raw["failures"] == b.points[0].raw["failures"]
    assert a.fingerprint != load_sweep(f).fingerprint  # the model's failures do count


def test_an_override_can_fix_what_the_model_breaks(model_file, tmp_path):
    """The model's tables are merged first, the overrides after: a --set that repairs the merged
    scenario is enough; without it the error names the model."""
    bad = tmp_path / "m.toml"
    bad.write_text('[failures.embedding]\nfamily = "weibull"\nmtbf_h = 50.0\n')  # no shape
    with pytest.raises(InputError, match="model"):
        sc.load("toy", model=bad)
    s = sc.load("toy", {"failures.embedding.shape": 0.7}, model=bad)
    assert s.failures.embedding is not None and s.failures.embedding.shape == 0.7
