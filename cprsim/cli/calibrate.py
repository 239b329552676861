"""``cprsim calibrate``: measure accuracy loss against PLS on a real PyTorch DLRM."""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import click

from cprsim.cli.common import load_scenario
from cprsim.errors import InputError
from cprsim.io import read_input_bytes


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _fmt(s: float) -> str:
    s = int(round(s))
    return (
        f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )


class _Lines:
    """No terminal: one line per finished run on stderr (runs done, elapsed, ETA), for CI logs."""

    def __init__(self, total: int, label: str) -> None:
        self.total, self.label, self.done, self.ran = total, label, 0, 0
        self.t0 = time.perf_counter()

    def __call__(self, n: int = 1, what: str = "", resumed: bool = False) -> None:
        self.done += n
        if resumed:
            click.echo(f"{self.label}: resuming: {what}", err=True)
            return
        self.ran += n
        el = time.perf_counter() - self.t0
        eta = el / self.ran * (self.total - self.done)
        click.echo(
            f"{self.label}: {self.done}/{self.total} {what}; elapsed {_fmt(el)}, ETA {_fmt(eta)}",
            err=True,
        )


class _Bar:
    """A terminal: a rich progress bar on stderr (runs done, elapsed, ETA, the last run)."""

    def __init__(self, total: int, label: str) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.prog = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[last]}"),
            console=Console(stderr=True),
        )
        self.task = self.prog.add_task(label, total=total, last="")

    def __call__(self, n: int = 1, what: str = "", resumed: bool = False) -> None:
        if resumed:  # not progress made now: keep it out of the rate behind the ETA
            self.prog.reset(self.task, completed=n, last=what)
        else:
            self.prog.advance(self.task, n)
            self.prog.update(self.task, last=what)


#: measured wall times (the same strings as ``runner.RUNTIMES``, which needs torch to import)
RUNTIMES = {
    "quick": "64-71 s measured twice with nothing else running (runs 27-31 s, costs and the end-to-end check 28-31 s); above the 60 s target",
    "standard": "16 min 20 s measured at load 3 (runs 13 min 39 s, costs and end-to-end check 2 min 41 s); not measured idle",
    "paper": "~70 min, extrapolated (not run in full); above the 60 min target",
    "shipped": "1 h 15 min 44 s measured at load 2-4 (284 runs: 8 seeds and 4 rungs, 72 min 37 s; costs and end-to-end check 2 min 43 s); not measured idle",
    "matched": "29 min 15 s measured with --scenario cpr-production --no-costs at load 1-3 (152 runs: 8 seeds x 6 intervals x 3 strategies); not measured idle",
}

HELP = (
    """Train a DLRM with injected partial-recovery failures; fit accuracy loss against PLS.

\b
Independent training runs go to --jobs worker processes with --threads-per-job torch threads
each. Each finished run is appended to OUT/points.csv at once, so a killed calibration is
finished with --resume (finished runs are not redone; OUT/manifest.json's fingerprint of the
configuration must match). calibration.toml is byte-identical whatever --jobs and however often
it was resumed, except [costs] and [end_to_end] (clock measurements; --no-costs drops them).
Progress: a bar on a terminal, else one line per finished run on stderr.

\b
Wall time of `cprsim calibrate --preset P --jobs 2` on the 2-core development machine
(shared and noisy: conditions and commands in docs/calibration.md):
"""
    + "\n".join(f"  {name:9s} {text}" for name, text in RUNTIMES.items())
    + "\n"
)


@click.command("calibrate", help=HELP)
@click.option(
    "--preset",
    type=click.Choice(list(RUNTIMES)),
    default="quick",
    show_default=True,
    help="Size of the experiment (times above; docs/calibration.md). shipped: the calibration "
    "cprsim ships, 8 seeds of the standard size (the shipped file has 24: --seeds 24) and a ladder "
    "of rungs (10x and 100x the rows, half the training, MovieLens-100k) in OUT/rungs/, written to "
    "[scale].",
)
@click.option(
    "--seeds",
    "n_seeds",
    type=click.IntRange(min=2),
    default=None,
    help="Train seeds 0..N-1 instead of the preset's [default: the preset's: quick 2, standard "
    "3, paper 5, shipped 8, matched 8]. With --resume, more seeds than OUT holds extend it: its "
    "finished runs are kept and the result is the same as a calibration run with all N.",
)
@click.option(
    "--jobs",
    "-j",
    type=click.IntRange(min=1),
    default=None,
    help="Worker processes running training runs in parallel [default: the cores available].",
)
@click.option(
    "--threads-per-job",
    "threads",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Torch threads per worker (part of the fingerprint: thread count may change rounding).",
)
@click.option(
    "--resume",
    is_flag=True,
    help="Finish the calibration in --out: keep its finished runs, run the rest.",
)
@click.option(
    "--from-sim",
    "scenario",  # the library's parameter (calibrate's scenario)
    metavar="NAME|FILE",
    help="Take the failure schedule from simulating this scenario with partial recovery.",
)
@click.option(
    "--scenario",
    "matched",
    metavar="NAME|FILE",
    help="Calibrate on this scenario's own schedules: its failures (simulated), shards and the "
    "planner's strategy parameters, at 6 intervals from 1/8 to 4x Young's; `cprsim plan` of the "
    "same scenario can then use it (--calibration; docs/calibration.md, Matched calibration).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("out/calibrate"),
    show_default=True,
    help="Write calibration.toml, points.csv, manifest.json, run.json and the plot here.",
)
@click.option(
    "--no-costs", is_flag=True, help="Skip the save/load timing and the end-to-end check."
)
@click.option(
    "--data",
    default="synthetic",
    show_default=True,
    metavar="synthetic|movielens-100k|FILE",
    help="Training data: the synthetic Criteo-like generator; MovieLens-100k (pip install "
    "--no-deps recbole==1.2.1); a Criteo .tsv; or a .csv/.parquet file with --schema. Real data is trained "
    "one epoch, at its own size (docs/calibration.md, Data).",
)
@click.option(
    "--schema",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="schema.toml of a --data .csv/.parquet file: its label, categorical and dense columns.",
)
@click.option(
    "--extend",
    "extend",
    metavar="FILE|shipped|shipped:SCENARIO",
    default=None,
    help="Start --out from this calibration file (its journal not needed) and train only the seeds "
    "--seeds adds: its runs are rebuilt from its points and baselines, and the result equals a "
    "calibration run with all the seeds. Give the --preset, --data, --scenario and "
    "--threads-per-job it was made with (its fingerprint is checked); an interrupted extension "
    "finishes with --resume, without --extend.",
)
@click.option(
    "--refit",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Train nothing: rewrite this calibration.toml's [model] from its measured points with "
    "the current model selection (admissible fits, a single run's scatter).",
)
@click.option(
    "--device",
    default="cpu",
    show_default=True,
    metavar="auto|cpu|cuda[:N]",
    help="Where the training runs: auto takes a CUDA GPU when torch sees one. The data stay on "
    "the CPU (each batch is copied over) and so does the PLS bookkeeping (exact on any device); a "
    "GPU's accuracy figures differ from the CPU's in the last bits and are not bit-reproducible "
    "(atomic adds in the backward pass). The device is part of the fingerprint; --jobs defaults to "
    "1 on a GPU; the costs step and --validate train on the CPU.",
)
@click.option(
    "--show",
    "show_file",
    metavar="FILE|shipped|shipped:SCENARIO",
    default=None,
    help="Train nothing: print a calibration's fits, the planner's model, its stability and its "
    "scale ladder ('shipped': the calibration cprsim ships; 'shipped:NAME': the one it ships "
    "matched to scenario NAME, made by --scenario).",
)
@click.option(
    "--validate",
    "plan_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="PLAN.json",
    help="Check this plan's promise on held-out runs: simulate --runs fresh replications of its "
    "scenario with the recommended option, replay each on a DLRM of a fresh seed (baseline and "
    "failed run), count the runs within the bound; writes validation.json and validation.csv to "
    "--out (default out/validate; --preset default: the plan's calibration's).",
)
@click.option(
    "--runs",
    type=click.IntRange(min=1),
    default=40,
    show_default=True,
    help="With --validate: validation runs (each trains a baseline and a failed run).",
)
@click.option(
    "--limit-samples",
    "limit",
    nargs=2,
    type=click.IntRange(min=1),
    default=None,
    hidden=True,
    help="At most TRAIN training and TEST held-out samples (the earliest; for tests).",
)
def command(
    preset: str,
    n_seeds: int | None,
    jobs: int | None,
    threads: int,
    resume: bool,
    scenario: str | None,
    matched: str | None,
    out: Path,
    no_costs: bool,
    data: str,
    schema: Path | None,
    limit: tuple[int, int] | None,
    refit: Path | None,
    show_file: str | None,
    device: str,
    plan_file: Path | None,
    runs: int,
    extend: str | None,
) -> None:
    if extend is not None and (plan_file or show_file or refit):
        raise click.UsageError("--extend trains: it does not go with --validate, --show or --refit")
    if plan_file is not None:
        _validate(
            plan_file, preset, jobs, threads, resume, scenario, out, data, schema, limit, runs
        )
        return
    if show_file is not None:
        _show(show_file)
        return
    if refit is not None:
        from cprsim.calibrate.calibration import refit as refit_file

        _print_models(refit_file(refit))
        click.echo(f"refitted the [model] of {refit}")
        return
    extend_path = None
    if extend is not None:
        if n_seeds is None:
            raise click.UsageError("--extend adds seeds: give --seeds N, more than the file's")
        if resume:
            raise click.UsageError(
                "--extend starts a new --out from the file; to finish an interrupted extension, "
                "--resume it without --extend"
            )
        extend_path = _calibration_path(extend, "--extend")
    _need_torch()
    p = _preset(preset, n_seeds, scenario, matched, data, schema, limit, device)
    jobs = jobs if jobs is not None else (_cores() if p.device == "cpu" else 1)
    t0 = time.perf_counter()
    doc = _run(p, preset, out, scenario, matched, no_costs, jobs, threads, resume, extend_path)
    for st, f in doc["fit"].items():
        click.echo(
            f"{st:10s} AUC loss = {f['auc_slope']:.4g} x PLS "
            f"[{f['auc_slope_lo']:.3g}, {f['auc_slope_hi']:.3g}] R²={f['auc_r2']:.2f}; "
            f"log-loss +{f['logloss_slope']:.4g} x PLS; mean PLS {f['mean_pls']:.4f}"
        )
    _print_models(doc)
    _wrote(out, t0, jobs, threads)


def _calibration_path(spec: str, option: str) -> Path:
    """A calibration FILE, or ``shipped`` (the one cprsim ships), or ``shipped:NAME`` (the one it
    ships matched to scenario NAME)."""
    from cprsim.calibrate.calibration import default_path, matched_path

    kind, colon, scen_name = spec.partition(":")
    if kind == "shipped" and colon and not scen_name:
        raise click.UsageError(f"{option} {spec}: name the scenario after 'shipped:'")
    if kind == "shipped" and scen_name:
        path = matched_path(scen_name)
        if path is None:
            raise click.ClickException(
                f"{option} {spec}: this installation ships no calibration matched to "
                f"scenario {scen_name!r} (cprsim/data/calibrations/)"
            )
        return path
    if spec == "shipped":
        path = default_path()
        if path is None:
            raise click.ClickException(f"{option} shipped: this installation ships no calibration")
        return path
    return Path(spec)


def _show(show_file: str) -> None:
    """``--show``: print a calibration's provenance, fits and models (a file or a shipped one)."""
    from cprsim.calibrate.calibration import load_calibration

    kind, _, scen_name = show_file.partition(":")
    path = _calibration_path(show_file, "--show")
    name: str | Path
    if kind == "shipped" and scen_name:  # a packaged calibration matched to a scenario
        name = (
            f"the shipped calibration matched to scenario {scen_name!r} "
            f"(cprsim/data/calibrations/{path.name})"
        )
    elif show_file == "shipped":
        name = "the shipped calibration (cprsim/data/calibration.toml)"
    else:
        name = path
    cal = load_calibration(path)
    prov = cal.provenance
    click.echo(f"{name}: preset {prov.get('preset', '?')}, seeds {prov.get('seeds', '?')}")
    click.echo(f"model: {prov.get('model', '?')}")
    click.echo(f"data: {prov.get('data', '?')}")
    if isinstance(prov.get("matched"), dict):
        from cprsim.calibrate.matched import describe as describe_matched

        click.echo(f"schedules: {describe_matched(prov['matched'])}")
    for st, f in cal.raw.get("fit", {}).items():
        lo = f.get("auc_slope_lo", -math.inf)  # optional (load_calibration checks the rest)
        click.echo(
            f"{st:10s} AUC loss = {f['auc_slope']:.4g} x PLS "
            f"[{lo:.3g}, {f['auc_slope_hi']:.3g}] over {f.get('n_points', '?')} runs"
        )
    _print_models(cal.raw)


def _need_torch() -> None:
    """Import torch (with passive OpenMP waits), or stop with how to install it."""
    # OpenMP threads that sleep instead of spinning while they wait: on a busy machine, torch with 2
    # threads spinning on a core another process holds was 25x slower than with 1 thread (the
    # costs step's 2 threads); read once, when torch loads OpenMP (a value already set is kept)
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch  # noqa: F401
    except ImportError:
        raise click.ClickException("calibrate needs torch: pip install 'cprsim[dlrm]'") from None


def _preset(
    preset: str,
    n_seeds: int | None,
    scenario: str | None,
    matched: str | None,
    data: str,
    schema: Path | None,
    limit: tuple[int, int] | None,
    device: str,
) -> Any:  # a cprsim.calibrate.runner.Preset (runner imports torch)
    """Check the options that go together, and size the preset to the data, device and seeds."""
    from cprsim.calibrate.datasets import resolve, sized
    from cprsim.calibrate.runner import PRESETS, resolve_device

    if PRESETS[preset].rungs and (limit is not None or data != "synthetic" or scenario or matched):
        raise click.UsageError(
            f"--preset {preset} measures its scale ladder against its own runs: it takes no "
            "--data, --from-sim, --scenario or --limit-samples"
        )
    if scenario and matched:
        raise click.UsageError(
            "--from-sim takes one simulated schedule, --scenario a grid of them: give one"
        )
    p = sized(PRESETS[preset], resolve(data, schema), limit)
    p = dataclasses.replace(p, device=resolve_device(device))
    if n_seeds is not None:
        p = dataclasses.replace(p, seeds=tuple(range(n_seeds)))
    return p


def _run(
    p: Any,
    preset: str,
    out: Path,
    scenario: str | None,
    matched: str | None,
    no_costs: bool,
    jobs: int,
    threads: int,
    resume: bool,
    extend: Path | None = None,
) -> dict:
    """Run the calibration with progress on stderr; an interrupt says how to resume."""
    from cprsim.calibrate.pipeline import calibrate
    from cprsim.calibrate.runner import n_steps
    from cprsim.plots.calibration import write_calibration_figure

    named = scenario or matched
    scen = load_scenario(named, ()) if named else None
    if matched:  # one run per interval of the grid (cprsim.calibrate.matched) and strategy
        from cprsim.calibrate.matched import FACTORS

        total = n_steps(dataclasses.replace(p, budgets=FACTORS)) + (0 if no_costs else 1)
    else:
        total = n_steps(p) + (0 if no_costs else 1)
    label = f"calibrate {preset}" + ("" if p.data is None else f" on {p.data.name}")

    def run(progress: Any) -> Any:
        return calibrate(
            p,
            out,
            progress,
            scen,
            measure_costs=not no_costs,
            jobs=jobs,
            threads=threads,
            resume=resume,
            match=matched is not None,
            figure=write_calibration_figure,
            extend=extend,
        )

    try:
        if sys.stderr.isatty():
            bar = _Bar(total, label)
            with bar.prog:
                return run(bar)
        return run(_Lines(total, label))
    except KeyboardInterrupt:
        pts = out / "points.csv"
        try:
            k = max(0, read_input_bytes(pts, "calibration journal").count(b"\n") - 1)
        except InputError:  # not written yet
            k = 0
        raise click.ClickException(
            f"interrupted: {k} finished runs are in {pts}; finish with --resume"
        ) from None


def _validate(
    plan_file: Path,
    preset: str,
    jobs: int | None,
    threads: int,
    resume: bool,
    scenario: str | None,
    out: Path,
    data: str,
    schema: Path | None,
    limit: tuple[int, int] | None,
    runs: int,
) -> None:
    """``--validate``: the plan's recommended option on held-out runs (cprsim.calibrate.validate)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as calibrate (above)
    try:
        import torch  # noqa: F401
    except ImportError:
        raise click.ClickException("calibrate needs torch: pip install 'cprsim[dlrm]'") from None
    from cprsim.calibrate import validate as V
    from cprsim.calibrate.datasets import resolve, sized
    from cprsim.calibrate.runner import PRESETS

    plan = V.read_plan(plan_file)
    if ctx.get_parameter_source("preset") is not ParameterSource.COMMANDLINE:
        cal_preset = (plan.get("calibration") or {}).get("preset")
        preset = cal_preset if cal_preset in PRESETS else preset
    if ctx.get_parameter_source("out") is not ParameterSource.COMMANDLINE:
        out = Path("out/validate")
    t = V.target_of(plan, plan_file, load_scenario(scenario, ()) if scenario else None)
    p = sized(PRESETS[preset], resolve(data, schema), limit)
    jobs = jobs if jobs is not None else _cores()
    label = f"validate {t.label} ({preset})"
    t0 = time.perf_counter()
    try:
        if sys.stderr.isatty():
            bar = _Bar(runs, label)
            with bar.prog:
                doc = V.validate(t, p, out, runs, bar, jobs, threads, resume)
        else:
            doc = V.validate(t, p, out, runs, _Lines(runs, label), jobs, threads, resume)
    except KeyboardInterrupt:
        raise click.ClickException(
            f"interrupted: the finished runs are in {out / 'validation.csv'}; finish with --resume"
        ) from None
    for line in V.summary_lines(doc):
        click.echo(line)
    click.echo(
        f"wrote {out / 'validation.json'} and {out / 'validation.csv'} "
        f"({_fmt(time.perf_counter() - t0)} on {jobs} job{'s' if jobs > 1 else ''})"
    )


def _points_of(doc: dict, metric: str, m: dict) -> Any:
    """The document's measured runs for ``metric`` (:class:`cprsim.calibrate.accuracy.Data`), for
    the checks of ``m``'s chosen model; None without points, with a model that is not a
    candidate, or with a legacy points table without this metric."""
    from cprsim.calibrate.accuracy import CANDIDATES, Data

    pts = doc.get("points")
    if not isinstance(pts, dict) or m.get("chosen") not in CANDIDATES:
        return None
    try:
        return Data.from_points(pts, metric)
    except (KeyError, ValueError, InputError):
        return None


def _scatter_note(doc: dict, metric: str, m: dict, key: str) -> str:
    """What the runs with the smallest PLS say of the scatter model of ``m``'s coefficients
    ``key`` (a strategy, or ``*`` pooled): :func:`cprsim.calibrate.accuracy.scatter_check`, '' where
    the document has no points for it or too few runs."""
    from cprsim.calibrate.accuracy import CANDIDATES, Coef, scatter_check, scatter_underestimated

    d = _points_of(doc, metric, m)
    if d is None:
        return ""
    if key != "*":
        d = d.take(d.strategy == key)
    chk = scatter_check(Coef.from_dict(m["coef"][key], key), CANDIDATES[m["chosen"]], d)
    if chk is None:
        return ""
    under = scatter_underestimated(chk)
    return (
        f"; its runs with PLS <= {chk['pls_max']:.3g} (the smallest quarter, {chk['n']:.0f}) "
        f"scatter {chk['ratio']:.3g}x that, {chk['above']:.0f} above their variance (P = "
        f"{chk['p']:.2g} were it right)" + (": UNDERESTIMATED at small PLS" if under else "")
    )


def _coverage_lines(doc: dict, metric: str, m: dict) -> list[str]:
    """The per-run promise of ``m`` checked on held-out seeds
    (:func:`cprsim.calibrate.accuracy.held_out_coverage`), as the planner makes it (quantiles
    from the other seeds' held-out residuals) and with the Student-t scatter alone: a line for
    all runs with PLS > 0 and one for the smallest quarter of PLS, each; none where the document
    has no points for ``metric``."""
    from cprsim.calibrate.accuracy import held_out_coverage

    d = _points_of(doc, metric, m)
    if d is None or len(set(d.seed.tolist())) < 3:  # too few seeds to leave one out
        return []
    out = []
    for residuals, how in ((True, "as planned"), (False, "Student-t scatter")):
        cov = held_out_coverage(d, m["chosen"], residuals=residuals)
        if residuals and not all(r["nested"] for r in cov["all"]):
            how = "as planned, but Student-t here: too few seeds to nest the residuals"
        for key, what in (
            ("all", "all runs with PLS > 0"),
            ("small", "the smallest quarter of PLS"),
        ):
            cells = []
            for r in cov[key]:
                if not r["n"]:
                    continue
                flag = f", P = {r['p']:.2g}: OPTIMISTIC" if r["p"] < 0.05 else ""
                cells.append(
                    f"q {r['q']:g}: {r['share']:.3f} ({r['within']:.0f}/{r['n']:.0f}{flag})"
                )
            if cells:
                out.append(
                    f"  {metric} per-run promise on held-out seeds ({how}), {what}: "
                    + "; ".join(cells)
                )
    return out


def _stability_lines(metric: str, m: dict) -> list[str]:
    """The calibration's record of how one seed or one run left out moves ``m``'s choice
    (``[model.<metric>.stability]``); none where the file has no record."""
    stab = m.get("stability")
    if not isinstance(stab, dict):
        return []
    out = []
    for key, what in (("leave_one_seed_out", "seed"), ("leave_one_run_out", "run")):
        r = stab.get(key)
        if isinstance(r, dict):
            out.append(
                f"  {metric} stability, one {what} left out: {r['kept']} of {r['refits']} refits "
                f"keep the choice; PLS bounds move up to {r['max_pls_bound_ratio']:.3g}x"
            )
    verdict = (
        "stable"
        if stab.get("stable")
        else "NOT stable (a refit flips it or moves the plan by more than one grid step): "
        "calibrate with more seeds"
    )
    return out + [f"  {metric} model choice {verdict}"]


def _print_models(doc: dict) -> None:
    rng = doc.get("model", {}).get("range", {})
    if rng:
        click.echo(
            "PLS range measured: "
            + ", ".join(f"{st} {r['pls'][0]:.3g}-{r['pls'][1]:.3g}" for st, r in rng.items())
        )
    for metric in ("auc", "logloss"):
        m = doc.get("model", {}).get(metric)
        if m:
            # the keys the planner does not need are optional (load_calibration checks their types)
            pw = m.get("pooling_weight", 1.0 if "*" in m["coef"] else 0.0)
            pool = (
                "pooled over the strategies"
                if "*" in m["coef"]
                else "per strategy"
                if pw <= 0
                else f"per strategy, shrunk toward the pooled fit with weight {pw:.2f}"
            )
            pv = m.get("pooling_f_test_p", {}).get(m["chosen"])
            test = "" if pv is None else f", F-test p = {pv:.3g}"  # optional: absent, not NaN
            click.echo(
                f"planner's {metric} model: {m.get('formula', m['chosen'])} ({pool}{test}; chosen by {m.get('selection', '?')} among "
                f"{', '.join(m.get('cv_mse', {})) or '?'})"
            )
            for line in _stability_lines(metric, m) + _coverage_lines(doc, metric, m):
                click.echo(line)
            for name, why in m.get("inadmissible", {}).items():
                click.echo(f"  {metric} candidate '{name}' not eligible: {why}")
            for k, c in m.get("coef", {}).items():
                rv = c.get("resid_var")
                if rv is not None:
                    click.echo(
                        f"  {metric} {k}: a single run's scatter around the mean: variance "
                        f"{rv[0]:.3g} PLS + {rv[1]:.3g} PLS^2" + _scatter_note(doc, metric, m, k)
                    )
    sc = doc.get("scale")
    if isinstance(sc, dict):
        click.echo(
            "scale ladder: CPR-vanilla's AUC loss per unit PLS [95% CI], and its ratio to the "
            "reference [from the ends of both CIs]:"
        )

        def num(v: object, fmt: str) -> str:
            return format(v, fmt) if isinstance(v, (int, float)) else "?"

        for name, r in sc.items():
            if not isinstance(r, dict) or "embedding_rows" not in r:
                continue
            ratio = (
                "reference"
                if name == "reference"
                else f"ratio {num(r.get('auc_ratio'), '.3g')} [{num(r.get('auc_ratio_lo'), '.3g')}, "
                f"{num(r.get('auc_ratio_hi'), '.3g')}]"
            )
            click.echo(
                f"  {name:15s} {num(r['embedding_rows'], '>10,')} rows, "
                f"{num(r.get('train_samples'), '>9,')} samples, "
                f"{'real' if r.get('real_data') else 'synthetic'}, {_count(r.get('seeds'))} seeds: "
                f"{num(r.get('auc_slope'), '.4g')} [{num(r.get('auc_slope_lo'), '.3g')}, "
                f"{num(r.get('auc_slope_hi'), '.3g')}]; {ratio}"
            )


def _count(v: object) -> str:
    """How many items a list holds ('?' for anything else: a hand-edited file)."""
    return str(len(v)) if isinstance(v, list) else "?"


def _wrote(out: Path, t0: float, jobs: int, threads: int) -> None:
    click.echo(
        f"wrote {out / 'calibration.toml'} ({_fmt(time.perf_counter() - t0)} on {jobs} "
        f"job{'s' if jobs > 1 else ''} x {threads} thread{'s' if threads > 1 else ''})"
    )
