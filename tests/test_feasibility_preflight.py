"""Issue 27: a scenario whose numbers no simulation reaches, or whose job cannot progress at its own
interval, is refused before any replication, at once, in one line naming the key; `show`, the
planner's quick form and a sweep refuse it too; the engine stops a job that does not progress."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from cprsim import scenario as sc
from cprsim.cli import main
from cprsim.errors import InputError
from cprsim.planner import feasibility
from cprsim.sim import engine


def _refused(args: list[str], one_line_error, seconds: float = 5.0) -> str:
    t0 = time.perf_counter()
    r = CliRunner().invoke(main, args)
    took = time.perf_counter() - t0
    line = one_line_error(r)
    assert took < seconds, f"{took:.1f} s: {line}"
    return line


SIMULATE_REFUSED = [
    # (scenario, --set, a key the line names)
    ("toy", "costs.save_s=1e308", "costs.save_s"),
    ("toy", "storage.write_gbps=5e-324", "storage.write_gbps"),
    ("toy", "storage.latency_s=1e308", "storage.latency_s"),
    ("toy", "cluster.embedding_gb=1e300", "cluster.embedding_gb"),
    ("toy", "cluster.optimizer_multiplier=1e300", "cluster.optimizer_multiplier"),
    ("toy", "job.duration_h=1e308", "events"),  # the event budget says it first
    ("toy", "reschedule.mean_s=1e9", "reschedule.mean_s"),
    ("llm-16k-gpus", "checkpoint.tiers.memory_latency_s=1e9", "checkpoint.tiers.memory_latency_s"),
    ("dlrm-spares", "lifecycle.detection.mean_s=1e6", "lifecycle.detection"),
    ("dlrm-spares", "lifecycle.swap.mean_s=1e9", "lifecycle.swap"),
    ("dlrm-spares", "lifecycle.select.mean_s=1e300", "lifecycle.select.mean_s"),
]


@pytest.mark.parametrize("name, setting, key", SIMULATE_REFUSED)
def test_simulate_refuses_before_any_replication_naming_the_key(name, setting, key, one_line_error):
    line = _refused(["simulate", name, "-n", "2", "--set", setting], one_line_error)
    assert key in line and "replication 0" not in line  # not the engine's


def test_no_spares_and_no_standbys_cannot_progress(one_line_error):
    line = _refused(
        [
            "simulate",
            "llm-16k-gpus",
            "-n",
            "2",
            "--set",
            "lifecycle.spares=0",
            "--set",
            "lifecycle.standbys=0",
        ],
        one_line_error,
    )
    assert "lifecycle.spares = 0" in line and "repair" in line


def test_a_strategy_whose_own_saves_never_end_is_refused_and_forced_it_stops(one_line_error):
    args = ["simulate", "toy", "-n", "2", "--set", "strategy.name=mfu"]
    args += ["--set", "strategy.gather_gbps=1e-300"]
    line = _refused(args, one_line_error)
    assert "strategy.gather_gbps" in line
    line = _refused([*args, "--force"], one_line_error)  # the engine's second line
    assert "replication 0" in line and "not progressing" in line


def test_force_does_not_pass_a_cost_no_simulation_reaches(one_line_error):
    line = _refused(
        ["simulate", "toy", "-n", "2", "--force", "--set", "costs.save_s=1e308"], one_line_error
    )
    assert "costs.save_s" in line


def test_the_engine_stops_a_forced_job_that_does_not_progress(one_line_error):
    line = _refused(
        ["simulate", "toy", "-n", "1", "--force", "--set", "costs.save_s=1e5"],
        one_line_error,
    )
    assert "not progressing" in line and f"{engine.MAX_WALL_RATIO:.0f}x" in line


def test_an_unused_snapshot_bandwidth_is_no_reason_to_refuse():
    """Blocking saves take no snapshot: the result is the scenario's own."""
    r = CliRunner().invoke(
        main, ["simulate", "toy", "-n", "2", "--json", "--set", "checkpoint.snapshot_gbps=1e-12"]
    )
    assert r.exit_code == 0, r.output


def test_a_snapshot_that_never_ends_is_refused_where_it_is_taken(one_line_error):
    line = _refused(
        [
            "simulate",
            "toy",
            "-n",
            "2",
            "--set",
            "checkpoint.mode=two-phase",
            "--set",
            "checkpoint.snapshot_gbps=1e-12",
        ],
        one_line_error,
    )
    assert "checkpoint.snapshot_gbps" in line


@pytest.mark.parametrize(
    "setting, key",
    [
        ("costs.save_s=1e308", "costs.save_s"),
        ("cluster.embedding_gb=1e300", "cluster.embedding_gb"),
        ("access.bytes_per_param=5e-324", "access.bytes_per_param"),
        ("failures.embedding.mtbf_h=0.05", "hopeless"),
    ],
)
def test_show_refuses_what_simulate_refuses(setting, key, one_line_error):
    line = _refused(["show", "toy", "--set", setting], one_line_error)
    assert key in line


def test_show_still_shows_every_builtin_scenario():
    for name in sc.builtin_names():
        r = CliRunner().invoke(main, ["show", name])
        assert r.exit_code == 0, (name, r.output)


QUICK = ["plan", "--node-mtbf-h", "10", "--embedding-servers", "4"]
QUICK += ["--max-accuracy-loss", "0.001"]


@pytest.mark.parametrize(
    "costs, option",
    [
        (["--save-s", "1e308", "--load-s", "60"], "--save-s"),
        (["--save-s", "60", "--load-s", "1e308"], "--load-s"),
        (["--save-s", "60", "--load-s", "60", "--reschedule-s", "1e308"], "--reschedule-s"),
        (["--save-s", "60", "--load-s", "60", "--duration-h", "1e308"], "--duration-h"),
    ],
)
def test_the_planners_quick_form_names_the_option(costs, option, one_line_error):
    line = _refused([*QUICK, *costs], one_line_error)
    assert option in line


def test_the_quick_forms_hopeless_regime_names_the_option(one_line_error):
    line = _refused([*QUICK, "--save-s", "60", "--load-s", "1e9"], one_line_error)
    assert "hopeless" in line and "--load-s 1e+09" in line


def test_a_sweep_refuses_a_point_that_cannot_progress_before_running_any(tmp_path, one_line_error):
    f = tmp_path / "sweep.toml"
    f.write_text('scenario = "toy"\nreplications = 2\n[grid]\n"storage.write_gbps" = [0.5, 1e-9]\n')
    out = tmp_path / "out"
    line = _refused(["sweep", str(f), "--out", str(out)], one_line_error)
    assert "point 1" in line and "storage.write_gbps" in line
    assert not (out / "results.csv").exists()


def test_the_builtin_scenarios_can_progress():
    from cprsim.sim import strategies as registry

    for name in sc.builtin_names():
        s = sc.load(name)
        feasibility.check_numbers(s)
        feasibility.check_progress(s, registry.get(s.strategy.name).planning.kind)


def test_check_progress_blames_the_save_at_the_scenarios_own_interval():
    """At its best interval (no checkpoint at all) the job finishes; at its own it never does."""
    s = sc.load("toy", {"costs.save_s": 1e9})
    feasibility.check(s, "rollback")  # no error: the best interval takes no save
    with pytest.raises(InputError, match=r"costs\.save_s"):
        feasibility.check_progress(s, "rollback")


LOGLOGISTIC = 'reschedule={family="loglogistic",scale_s=60,shape=0.9}'


def test_a_delay_without_a_finite_mean_is_hopeless_but_forceable(cli, one_line_error):
    """A log-logistic of shape <= 1 has no finite mean but finite draws: hopeless by the analytic
    check (refused at once, not looping on an infinite recovery), and simulated with --force."""
    t = time.monotonic()
    line = one_line_error(cli("simulate", "toy", "-n", "2", "--set", LOGLOGISTIC))
    assert "hopeless" in line and "reschedule" in line and time.monotonic() - t < 5, line
    r = cli("simulate", "toy", "-n", "2", "--set", LOGLOGISTIC, "--force")
    assert r.exit_code == 0, r.output
