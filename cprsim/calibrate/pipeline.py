"""``cprsim calibrate`` end to end: parallel, resumable runs, fits, real costs, the output files.

**Files** (in the output folder):

* ``manifest.json``: the configuration (preset, every run's setting, ``--from-sim`` schedule,
  torch threads per run, cprsim and torch versions), its SHA-256 ``fingerprint``, the number of
  runs and whether the calibration ``finished``. Written first; ``--resume`` compares fingerprints.
* ``points.csv``: one row per training run (a seed's baseline is run 0, strategy ``baseline``):
  ``seed, run, strategy, label, budget, pls, position, age, auc, logloss, d_auc, d_logloss``
  (``position``/``age``: the loss-weighted failure position and restored-state age). While the
  calibration runs it is a *journal*: each finished run is appended as one whole line with a single
  ``write`` + ``fsync``, in completion order, with ``d_auc``/``d_logloss`` empty (they need the
  seed's baseline). At the end it is rewritten (temp file + rename) sorted by seed and run, with
  the deltas filled in.
* ``calibration.toml`` (the planner's input), ``accuracy_vs_pls.png``.
* ``run.json``: when, how long, on how many workers (this invocation's runs only). The only file
  whose content depends on the machine and the clock, with ``calibration.toml``'s ``[costs]`` and
  ``[end_to_end]`` (wall-clock measurements; ``--no-costs`` leaves them out).

**Resume.** A calibration killed at any instant has lost at most the runs under way: the journal
holds whole lines, except possibly a torn last line, which ``--resume`` drops (it validates every
complete line against the configuration, rewrites the journal atomically, then appends). A
resumed calibration runs only the missing runs. Every number is read back exactly (floats are
written as their shortest round-trip ``repr``) and results are sorted before anything is derived,
so a resumed calibration writes the same ``calibration.toml`` bytes as an uninterrupted one, and
so do any ``--jobs``. Resuming a different configuration is refused (fingerprints differ); a
complete line that does not parse is a one-line error naming the file and line.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cprsim.calibrate import datasets as DS
from cprsim.calibrate import runner as R
from cprsim.calibrate.calibration import to_toml
from cprsim.calibrate.datasets import describe as describe_data
from cprsim.calibrate.emulation import Setting, emulation_of, periodic_actions
from cprsim.calibrate.journal import append_line, fingerprint
from cprsim.calibrate.journal import utc_now as _now
from cprsim.errors import InputError, ParameterError
from cprsim.io import (
    atomic_write_json,
    atomic_write_text,
    csv_text,
    read_input_bytes,
    read_toml,
    short,
)
from cprsim.names import FAIL, VANILLA
from cprsim.version import __version__

#: ``progress(n, what, resumed=False)``: ``n`` more runs (or the costs step) done, ``what`` says
#: which; ``resumed=True`` once at the start for the runs a resumed journal already holds
Progress = Callable[..., None]

POINTS_HEADER = (
    "seed",
    "run",
    "strategy",
    "label",
    "budget",
    "pls",
    "position",
    "age",
    "auc",
    "logloss",
    "d_auc",
    "d_logloss",
)
#: the figure ``calibrate`` draws beside calibration.toml (where its caller passes ``figure``)
FIGURE = "accuracy_vs_pls.png"
OUTPUTS = ("calibration.toml", FIGURE, "run.json")


def _noop(n: int = 1, what: str = "", resumed: bool = False) -> None:
    pass


def from_sim_settings(p: R.Preset, scenario) -> tuple[R.Preset, Callable, dict]:
    """Settings whose failures (and vanilla saves) come from the simulator's partial-recovery run."""
    from cprsim.calibrate.fromsim import sim_schedule

    n_iters = p.train_samples // p.batch
    acts, sim_pls, interval, n_e = sim_schedule(scenario, n_iters)
    p = dataclasses.replace(p, n_shards=n_e)
    fails = [(k, j) for k, a in acts.items() for kind, j in a if kind == FAIL]
    iv = max(1, int(round(interval)))
    K, r = p.full_every, p.top_fraction

    def fn(n: int, seed: int) -> list[tuple[float, Setting]]:
        # vanilla CPR: the simulator's own run, its saves and failures as simulated
        out = [(iv / n, Setting(VANILLA, f"{VANILLA}@sim", acts, interval=iv))]
        for st in p.strategies:
            if st == VANILLA:  # the role, not a strategy's emulation: the simulated run above
                continue
            # the others: the simulated failures, saves at the budget of vanilla's interval
            piv, fe = emulation_of(st).schedule(iv, K, r)
            out.append(
                (
                    iv / n,
                    Setting(
                        st,
                        f"{st}@sim",
                        periodic_actions(n, piv, fe, fails),
                        top_fraction=r,
                        sample_rate=p.sample_rate,
                        interval=piv,
                    ),
                )
            )
        return out

    info = {
        "scenario": scenario.name,
        "simulated_pls": sim_pls,
        "failures": len(fails),
        "interval_iterations": iv,
        "embedding_servers": n_e,
    }
    return p, fn, info


# -- configuration and its fingerprint ---------------------------------------------------------------
def _setting_dict(st: Setting | None) -> dict | None:
    if st is None:
        return None
    d = dataclasses.asdict(st)
    d["actions"] = [[k, [list(a) for a in acts]] for k, acts in sorted(st.actions.items())]
    return d


def configuration(
    p: R.Preset, runs: list[R.Run], threads: int, sim_info: dict | None
) -> dict[str, Any]:
    """Everything a run's numbers depend on (the fingerprint's input)."""
    import torch

    preset = R.preset_dict(p)
    preset.pop("runtime", None)  # documentation, not configuration
    preset.pop("rungs", None)  # the ladder's rungs are calibrations of their own (OUT/rungs/NAME)
    if preset.get("device") == "cpu":  # the CPU's fingerprints are those of before --device
        preset.pop("device")
    preset.pop("data", None)  # where the files lie is not configuration: their digests are (below)
    config = {
        "preset": preset,
        "from_sim": sim_info,
        "threads_per_run": threads,
        "cprsim_version": __version__,
        "torch_version": torch.__version__,
        "runs": [[r.seed, r.run, r.budget, _setting_dict(r.setting)] for r in runs],
    }
    if p.data is not None:  # real data (synthetic data adds no key: its fingerprints are unchanged)
        config["data"] = p.data.fingerprint()
    return config


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += [f"{k}.{x}" for x in sorted(set(a) | set(b)) if a.get(x) != b.get(x)]
        elif a != b:
            out.append(k)
    return out


def _read_manifest(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    data = read_input_bytes(path, "calibration manifest")  # a regular file within the cap
    try:
        m = json.loads(data.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        m = None
    if not isinstance(m, dict) or not isinstance(m.get("fingerprint"), str):
        raise InputError(f"{short(path)}: not a cprsim calibration manifest")
    return m


def _complete_lines(path: Path) -> int:
    if not path.exists():
        return 0
    return max(0, read_input_bytes(path, "calibration journal").count(b"\n") - 1)


def extends(old: Any, new: dict[str, Any]) -> bool:
    """Whether configuration ``new`` only adds seeds to ``old`` (``--seeds`` raised on a
    ``--resume``): equal but for the preset's seeds and the runs, every old seed still there and
    every old run planned unchanged. Each run's numbers depend on its own seed and setting only,
    so the old runs stand and the extended calibration equals one run with all the seeds."""
    if not isinstance(old, dict):
        return False
    a = json.loads(json.dumps(old, sort_keys=True, allow_nan=True))
    b = json.loads(json.dumps(new, sort_keys=True, allow_nan=True))
    ra, rb = a.pop("runs", None), b.pop("runs", None)
    pa, pb = a.pop("preset", None), b.pop("preset", None)
    if not (isinstance(pa, dict) and isinstance(pb, dict) and isinstance(ra, list)):
        return False
    sa, sb = pa.pop("seeds", None), pb.pop("seeds", None)
    if a != b or pa != pb or not isinstance(sa, list) or not isinstance(sb, list):
        return False
    planned = {json.dumps(r, sort_keys=True) for r in rb or []}
    return set(sa) < set(sb) and all(json.dumps(r, sort_keys=True) in planned for r in ra)


def check_out(out: Path, config: dict[str, Any], resume: bool) -> bool:
    """Whether to resume the calibration in ``out`` (else start afresh); refuses to mix results."""
    manifest, journal = out / "manifest.json", out / "points.csv"
    old = _read_manifest(manifest)
    fp = fingerprint(config)
    if not resume:
        if old is not None and not old.get("finished") and journal.exists():
            raise ParameterError(
                "out",
                f"holds an unfinished calibration ({_complete_lines(journal)} of "
                f"{old.get('runs', '?')} runs in points.csv); pass `resume` to finish it, "
                "or choose another folder",
                str(out),
                also=("resume",),
            )
        return False
    if old is None:
        if journal.exists():
            raise ParameterError(
                "resume",
                "no manifest.json beside it, so its configuration is unknown; cannot resume it "
                "(choose another `out`)",
                str(journal),
                also=("out",),
            )
        return False
    if old["fingerprint"] != fp and not extends(old.get("config"), config):
        diff = (
            _differences(old.get("config", {}), config)
            if isinstance(old.get("config"), dict)
            else []
        )
        raise ParameterError(
            "resume",
            f"holds a calibration of another configuration (differs in "
            f"{', '.join(diff[:6]) or 'the fingerprint'}); resuming needs the same preset, "
            "`scenario`, `threads` and versions, and the same seeds or more: choose another `out`",
            str(out),
            also=("scenario", "threads", "out"),
        )
    return True


# -- the journal ---------------------------------------------------------------------------------------
def _row(r: R.RunResult, d_auc: Any = "", d_logloss: Any = "") -> list[Any]:
    return [
        r.seed,
        r.run,
        r.strategy,
        r.label,
        r.budget,
        r.pls,
        r.position,
        r.age,
        r.auc,
        r.logloss,
        d_auc,
        d_logloss,
    ]


def journal_rows(results: list[R.RunResult] | Any) -> list[list[Any]]:
    """``points.csv``'s rows of finished runs: sorted by seed and run, each with its accuracy loss
    against its seed's baseline (``d_auc``: baseline minus the run; ``d_logloss``: the run minus
    the baseline)."""
    base = {r.seed: r for r in results if r.run == 0}
    return [
        _row(r, base[r.seed].auc - r.auc, r.logloss - base[r.seed].logloss)
        for r in sorted(results, key=lambda r: r.key)
    ]


def _number(path: Path, line: int, name: str, text: str, empty_ok: bool = False) -> float:
    if empty_ok and text == "":
        return float("nan")
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{short(path)}: line {line}: {name}: expected a number") from None


def read_journal(path: Path, planned: dict[tuple[int, int], R.Run]) -> list[R.RunResult]:
    """The finished runs in ``points.csv`` (file order); a torn last line (no newline) is dropped."""
    data = read_input_bytes(path, "calibration journal")
    text_b = data[: data.rfind(b"\n") + 1]
    try:
        lines = text_b.decode("utf-8").split("\n")[:-1]
    except UnicodeDecodeError:
        raise InputError(f"{short(path)}: not a UTF-8 text file") from None
    if not lines:
        return []  # the header itself was torn
    if lines[0] != ",".join(POINTS_HEADER):
        raise InputError(
            f"{path}: line 1: not a calibration points table (expected the header "
            f"{','.join(POINTS_HEADER)!r})"
        )
    out: list[R.RunResult] = []
    seen: dict[tuple[int, int], int] = {}
    for i, line in enumerate(lines[1:], start=2):
        row = next(csv.reader([line]), [])
        if len(row) != len(POINTS_HEADER):
            raise InputError(
                f"{path}: line {i}: expected {len(POINTS_HEADER)} comma-separated fields, "
                f"got {len(row)}"
            )
        try:
            key = (int(row[0]), int(row[1]))
        except ValueError:
            raise InputError(f"{short(path)}: line {i}: seed and run must be integers") from None
        run = planned.get(key)
        if run is None:
            raise InputError(
                f"{path}: line {i}: seed {key[0]} run {key[1]} is not a run of this calibration"
            )
        budget = _number(path, i, "budget", row[4])
        if (row[2], row[3], budget) != (run.strategy, run.label, run.budget):
            raise InputError(
                f"{path}: line {i}: seed {key[0]} run {key[1]} is {run.label} at budget "
                f"{run.budget!r} in this calibration, not this line's strategy, label or budget"
            )
        if key in seen:
            raise InputError(
                f"{path}: line {i}: seed {key[0]} run {key[1]} is already on line {seen[key]}"
            )
        seen[key] = i
        pls, pos, age, auc, ll = (
            _number(path, i, n, row[c])
            for n, c in (("pls", 5), ("position", 6), ("age", 7), ("auc", 8), ("logloss", 9))
        )
        _number(path, i, "d_auc", row[10], empty_ok=True)
        _number(path, i, "d_logloss", row[11], empty_ok=True)
        out.append(
            R.RunResult(key[0], key[1], run.strategy, run.label, run.budget, pls, auc, ll, pos, age)
        )
    return out


def _n_dense(p: R.Preset) -> int:
    """The data's dense features (the bottom MLP's input width)."""
    from cprsim.calibrate import datasets as DS
    from cprsim.calibrate.data import N_DENSE

    return N_DENSE if p.data is None else DS.load(p.data, p.scale).n_dense


# -- the use case ----------------------------------------------------------------------------------------


def calibration_doc(points: list[R.Point], provenance: dict[str, Any]) -> dict[str, Any]:
    """A calibration document from measured points: ``[provenance]`` (as given), ``[fit]`` (loss =
    slope x PLS per strategy, with its CI), ``[points]`` (per strategy: budget, seed, pls, position,
    age, d_auc, d_logloss) and ``[model]``, the planner's model with its stability check
    (:func:`cprsim.calibrate.accuracy.model_table`). ``cprsim calibrate`` and the user-model API
    (:mod:`cprsim.calibrate.user`) both write it; ``load_calibration`` reads it."""
    from cprsim.calibrate.accuracy import model_table

    doc: dict[str, Any] = {"provenance": provenance, "fit": {}, "points": {}}
    for st, f in R.fits(points).items():
        d: dict[str, Any] = {}
        for metric, ft in f.items():
            d.update(
                {
                    f"{metric}_slope": ft.slope,
                    f"{metric}_slope_lo": ft.lo,
                    f"{metric}_slope_hi": ft.hi,
                    f"{metric}_r2": ft.r2,
                }
            )
        d["n_points"] = f["auc"].n
        ps = [pt for pt in points if pt.strategy == st]
        d["mean_pls"] = float(np.mean([pt.pls for pt in ps]))
        d["mean_d_auc"] = float(np.mean([pt.d_auc for pt in ps]))
        d["mean_d_logloss"] = float(np.mean([pt.d_logloss for pt in ps]))
        doc["fit"][st] = d
        doc["points"][st] = {
            "budget": [pt.budget for pt in ps],
            "seed": [pt.seed for pt in ps],
            "pls": [pt.pls for pt in ps],
            "position": [pt.position for pt in ps],
            "age": [pt.age for pt in ps],
            "d_auc": [pt.d_auc for pt in ps],
            "d_logloss": [pt.d_logloss for pt in ps],
        }
    doc["model"] = model_table(doc["points"], check_stability=True)
    return doc


def _slope_row(fit: dict[str, Any]) -> dict[str, float]:
    return {
        "auc_slope": fit["auc_slope"],
        "auc_slope_lo": fit["auc_slope_lo"],
        "auc_slope_hi": fit["auc_slope_hi"],
        "logloss_slope": fit["logloss_slope"],
        "logloss_slope_lo": fit["logloss_slope_lo"],
        "logloss_slope_hi": fit["logloss_slope_hi"],
        "n_points": fit["n_points"],
    }


def scale_table(
    p: R.Preset, doc: dict[str, Any], rungs: dict[str, tuple[R.Preset, dict[str, Any]]]
) -> dict[str, Any]:
    """``[scale]``: the loss per unit PLS of vanilla CPR on each rung of the ladder beside the
    reference (this calibration), and its ratio to the reference's. ``ratio_lo``/``ratio_hi`` take
    the ends of both 95% CIs (the rung's low over the reference's high, and the reverse): a range
    at least as wide as the ratio's own CI."""
    ref = doc["fit"][VANILLA]
    table: dict[str, Any] = {
        "note": (
            "vanilla CPR's loss per unit PLS (slope through the origin, 95% CI) on each rung; "
            "ratio = rung / reference, ratio_lo/hi from the ends of both CIs. MFU/SSU/lookahead "
            "were measured on the reference only: the planner scales them by vanilla's ratio "
            "(an assumption)"
        ),
        "reference": {
            "preset": p.name,
            "data": doc["provenance"]["data"],
            "embedding_rows": doc["provenance"]["embedding_rows"],
            "train_samples": p.train_samples,
            "real_data": p.data is not None,
            "seeds": list(p.seeds),
            **_slope_row(ref),
        },
    }
    for name, (rp, rd) in rungs.items():
        f = rd["fit"][VANILLA]
        row = {
            "preset": rp.name,
            "data": rd["provenance"]["data"],
            "embedding_rows": rd["provenance"]["embedding_rows"],
            "train_samples": rp.train_samples,
            "real_data": rp.data is not None,
            "seeds": list(rp.seeds),
            **_slope_row(f),
        }
        for metric in ("auc", "logloss"):
            s0, lo0, hi0 = (ref[f"{metric}_slope{k}"] for k in ("", "_lo", "_hi"))
            s1, lo1, hi1 = (f[f"{metric}_slope{k}"] for k in ("", "_lo", "_hi"))
            row[f"{metric}_ratio"] = s1 / s0 if s0 > 0 else math.inf
            row[f"{metric}_ratio_lo"] = max(0.0, lo1) / hi0 if hi0 > 0 else math.inf
            row[f"{metric}_ratio_hi"] = hi1 / lo0 if lo0 > 0 else math.inf
        table[name] = row
    return table


def calibrate(
    p: R.Preset,
    out: Path,
    progress: Progress = _noop,
    scenario=None,
    measure_costs: bool = True,
    jobs: int = 1,
    threads: int = 1,
    resume: bool = False,
    match: bool = False,
    figure: Callable[[dict, Path], None] | None = None,
    extend: Path | None = None,
) -> dict:
    """Run (or, with ``resume``, finish) the preset into ``out``: ``calibration.toml``,
    ``points.csv``, ``manifest.json`` and ``run.json``, and the plot where ``figure`` is given
    (``figure(doc, path)`` draws it: figures belong to a higher layer, so the caller passes
    :func:`cprsim.plots.calibration.write_calibration_figure`). Returns the calibration doc.
    ``scenario``: the failure schedule of its partial-recovery run (``--from-sim``), or with
    ``match`` its own schedules at a grid of intervals (``--scenario``,
    :mod:`cprsim.calibrate.matched`). ``extend``: a calibration file of fewer seeds of this
    configuration to start ``out`` from (:func:`extend_from`), its runs not trained again."""
    import torch  # noqa: F401  (every step below needs it: without it, fail before any output)

    if jobs < 1 or threads < 1:
        raise InputError(f"jobs and threads per job must be >= 1, got {jobs} and {threads}")
    started, t0 = _now(), time.perf_counter()
    if p.rungs and (scenario is not None or p.data is not None):
        raise InputError(
            f"preset {p.name}: a scale ladder's rungs are measured against this preset's own "
            "runs; it takes neither a scenario's failure schedules nor other data"
        )
    p, fn, sim_info = _scenario_settings(p, scenario, match)
    runs = R.plan_runs(p, fn)
    planned = {r.key: r for r in runs}
    config = configuration(p, runs, threads, sim_info)
    if extend is not None:
        extend_from(extend, p, fn, threads, sim_info, out)
        resume = True
    resuming = check_out(out, config, resume)  # before any rung trains: a refusal costs nothing
    rung_docs, offset = _calibrate_rungs(p, out, progress, jobs, threads, resume, figure)
    journal, manifest, done = _start_journal(out, config, len(runs), planned, resuming)
    if done:
        progress(
            len(done) + offset,
            f"{len(done)} of {len(runs)} runs already in {journal}",
            resumed=True,
        )
    have = {r.key for r in done}
    todo = [r for r in runs if r.key not in have]
    run_s: list[list[Any]] = []
    for res, secs, cpu in R.execute(p, todo, jobs, threads):
        append_line(journal, csv_text(None, [_row(res)]))
        done.append(res)
        run_s.append([res.seed, res.run, secs, cpu])
        progress(1, f"{planned[res.key].describe()} ({secs:.1f} s)")
    runs_s = time.perf_counter() - t0

    points, facts = R.points_from(done)
    prov = _provenance(p, facts, threads, manifest["fingerprint"], sim_info)
    doc = calibration_doc(points, prov)
    if rung_docs:
        doc["scale"] = scale_table(p, doc, rung_docs)
    costs_s = _measure_costs(p, doc, threads, progress) if measure_costs else 0.0
    rows = journal_rows(done)
    atomic_write_text(journal, csv_text(POINTS_HEADER, rows))
    atomic_write_text(
        out / "calibration.toml",
        to_toml(
            doc,
            "cprsim calibration: accuracy loss vs PLS on a PyTorch DLRM (written by `cprsim calibrate`)",
        ),
    )
    if figure is not None:
        figure(doc, out / FIGURE)
    atomic_write_json(out / "manifest.json", dict(manifest, finished=True))
    atomic_write_json(
        out / "run.json",
        _run_record(started, t0, runs_s, costs_s, jobs, threads, len(runs), len(todo), run_s),
    )
    return doc


def extend_from(
    source: Path, p: R.Preset, fn: Any, threads: int, sim_info: dict | None, out: Path
) -> int:
    """Start ``out`` from the calibration file ``source`` (``calibrate(extend=...)``): the
    manifest and journal ``out`` would hold had it run ``source``'s seeds itself, rebuilt from the
    file's points and baselines (a run's accuracy is its seed's baseline less ``d_auc``, plus
    ``d_logloss``: exact, the two being within a factor 2 of each other), so that resuming with
    ``p``'s seeds trains only the new ones and ends with the bytes of a calibration run with all of
    them. ``source`` must have been calibrated with this configuration (its fingerprint is that of
    ``p`` with its seeds: the same preset, data, scenario, threads and versions), ``p`` must have
    more seeds, and ``out`` must not hold a calibration yet. Returns the runs rebuilt."""
    if (out / "manifest.json").exists() or (out / "points.csv").exists():
        raise ParameterError(
            "out",
            f"already holds a calibration: `extend` starts a new folder from {short(source)} (to "
            "finish this one, `resume` it without `extend`)",
            short(out),
            also=("extend", "resume"),
        )
    from cprsim.calibrate.schema import check_document

    doc = read_toml(source, "calibration file")
    check_document(doc, short(source))  # every array a number per run, seeds whole, ...
    seeds, base, fp = _extend_source(doc, short(source))
    old = dataclasses.replace(p, seeds=tuple(seeds))
    runs = R.plan_runs(old, fn)
    config = configuration(old, runs, threads, sim_info)
    if (have := fingerprint(config)) != fp:
        import torch

        prov = doc["provenance"]
        versions = [
            f"{k} {prov.get(k)!r} (this installation: {v!r})"
            for k, v in (("cprsim_version", __version__), ("torch_version", torch.__version__))
            if prov.get(k) != v
        ]
        raise ParameterError(
            "extend",
            f"calibrated with another configuration than this one with its seeds {seeds} "
            f"(fingerprint {fp[:12]}, not {have[:12]}): "
            + (
                f"made with {', '.join(versions)}: extend it with those versions"
                if versions
                else "extending needs the preset, `scenario`, `threads` and device it was made with"
            ),
            short(source),
            also=("scenario", "threads"),
        )
    if not set(seeds) < set(p.seeds):
        raise InputError(
            f"{short(source)}: holds {len(seeds)} seeds and this calibration {len(p.seeds)}: "
            "extending adds seeds"
        )
    done = _rebuilt_runs(doc, runs, base, short(source))
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "manifest.json", _manifest(config, len(runs)))
    atomic_write_text(out / "points.csv", csv_text(POINTS_HEADER, [_row(r) for r in done]))
    return len(done)


def _extend_source(doc: dict[str, Any], where: str) -> tuple[list[int], dict, str]:
    """A calibration file's seeds, each seed's baseline ``(auc, logloss)`` and its fingerprint,
    which the calibration schema leaves optional (:func:`extend_from`)."""
    prov = doc.get("provenance")
    prov = prov if isinstance(prov, dict) else {}
    seeds, fp = prov.get("seeds"), prov.get("fingerprint")
    b_auc, b_ll = prov.get("baseline_auc"), prov.get("baseline_logloss")
    if not (
        isinstance(seeds, list)
        and seeds
        and all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
        and isinstance(fp, str)
        and isinstance(b_auc, list)
        and isinstance(b_ll, list)
        and len(b_auc) == len(b_ll) == len(seeds)
        and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            for x in b_auc + b_ll
        )
    ):
        raise InputError(
            f"{where}: provenance: expected seeds, fingerprint, baseline_auc and baseline_logloss "
            "(one per seed), as a calibration writes them"
        )
    # the baselines are in seed order (points_from), whatever the order of the preset's seeds
    base = {s: (float(a), float(ll)) for s, a, ll in zip(sorted(seeds), b_auc, b_ll)}
    return seeds, base, fp


def _rebuilt_runs(
    doc: dict[str, Any], runs: list[R.Run], base: dict, where: str
) -> list[R.RunResult]:
    """The results of ``runs`` (a file's configuration's runs) rebuilt from its ``[points]`` and
    the seeds' baselines ``base``; a point that is not the run's, or cannot be rebuilt exactly, is
    a one-line error (:func:`extend_from`)."""
    pts: dict[str, Any] = doc["points"] if isinstance(doc.get("points"), dict) else {}
    nxt = {st: 0 for st in pts}
    done = []
    for r in runs:
        a0, ll0 = base[r.seed]
        if r.setting is None:
            done.append(R.RunResult(r.seed, r.run, r.strategy, r.label, r.budget, 0.0, a0, ll0))
            continue
        cols, i = pts.get(r.strategy), nxt.get(r.strategy, 0)
        key = f"{where}: points.{r.strategy}"
        if not isinstance(cols, dict):
            raise InputError(f"{key}: missing, where the configuration has run {r.describe()}")
        for k in ("seed", "budget", "position", "age"):  # optional in the schema, needed here
            if k not in cols:
                raise InputError(f"{key}.{k}: expected an array (one value per run)")
        # the schema checked every array: a finite number per run, whole seeds
        if not (
            i < len(cols["pls"]) and (cols["seed"][i], cols["budget"][i]) == (r.seed, r.budget)
        ):
            raise InputError(
                f"{key}: no point {i + 1} of seed {r.seed} at budget {r.budget!r} where the "
                f"configuration has run {r.describe()}: not the points this configuration writes"
            )
        x = {k: float(cols[k][i]) for k in ("pls", "position", "age", "d_auc", "d_logloss")}
        auc, ll = a0 - x["d_auc"], ll0 + x["d_logloss"]
        # exact only where a run's value is within a factor 2 of its baseline's (Sterbenz): then
        # the rebuilt run gives back the file's deltas bit for bit
        if not (0.5 * a0 <= auc <= 2.0 * a0 and 0.5 * ll0 <= ll <= 2.0 * ll0):
            raise InputError(
                f"{key}: point {i + 1} (seed {r.seed}) lies more than a factor 2 from its seed's "
                "baseline: its run cannot be rebuilt exactly from the file (resume the folder it "
                "was made in instead)"
            )
        nxt[r.strategy] = i + 1
        done.append(
            R.RunResult(
                r.seed,
                r.run,
                r.strategy,
                r.label,
                r.budget,
                x["pls"],
                auc,
                ll,
                x["position"],
                x["age"],
            )
        )
    extra = [st for st, cols in pts.items() if nxt.get(st, 0) != len(cols["pls"])]
    if extra:
        raise InputError(
            f"{where}: points.{extra[0]}: more points than the runs of its configuration"
        )
    return done


def _scenario_settings(p: R.Preset, scenario, match: bool) -> tuple[R.Preset, Any, dict | None]:
    """The preset, failure schedule and ``sim_info`` of a calibration against ``scenario``: its
    partial-recovery run's schedule, or with ``match`` its own at a grid of intervals (the preset
    unchanged, no schedule and no info without a scenario)."""
    fn, sim_info = None, None
    if scenario is not None and match:
        from cprsim.calibrate.matched import matched_settings

        p, fn, sim_info = matched_settings(p, scenario)
        sim_info = {"matched": sim_info}
    elif scenario is not None:
        p, fn, sim_info = from_sim_settings(p, scenario)
    return p, fn, sim_info


def _calibrate_rungs(
    p: R.Preset,
    out: Path,
    progress: Progress,
    jobs: int,
    threads: int,
    resume: bool,
    figure: Callable[[dict, Path], None] | None,
) -> tuple[dict, int]:
    """Calibrate the preset's scale-ladder rungs, each into ``out/rungs/<name>`` (every rung's
    data found before the first trains); returns their (preset, doc) by name and their run count."""
    rung_presets = []
    for name in p.rungs:  # every rung's data found before the first one trains
        rp, data = R.RUNGS[name]
        rp = dataclasses.replace(rp, device=p.device)
        rung_presets.append((name, DS.sized(rp, DS.resolve(data)) if data is not None else rp))
    rung_docs = {}
    offset = 0  # runs of the rungs before this one (a resumed rung's count starts there)
    for name, rp in rung_presets:  # the scale ladder first: each rung a calibration of its own

        def rung_progress(n: int = 1, what: str = "", resumed: bool = False, at=offset) -> None:
            progress(n + at if resumed else n, what, resumed)

        rung_docs[name] = (
            rp,
            calibrate(
                rp,
                out / "rungs" / name,
                rung_progress,
                None,
                False,
                jobs,
                threads,
                resume=resume,
                figure=figure,
            ),
        )
        offset += R.n_steps(rp)
    return rung_docs, offset


def _start_journal(
    out: Path, config: dict, n_runs: int, planned: dict, resuming: bool
) -> tuple[Path, dict, list]:
    """Write the run's manifest and start its journal (``points.csv``): a resumed run keeps the
    runs already done (a torn tail dropped), a fresh one clears an earlier calibration's outputs.
    Returns the journal's path, the manifest and the runs done."""
    journal = out / "points.csv"
    manifest = _manifest(config, n_runs)
    if resuming and journal.exists():
        done = read_journal(journal, planned)
        atomic_write_json(out / "manifest.json", manifest)  # the same, or one with more seeds
        atomic_write_text(
            journal, csv_text(POINTS_HEADER, [_row(r) for r in done])
        )  # drop a torn tail
    else:
        out.mkdir(parents=True, exist_ok=True)
        for (
            name
        ) in OUTPUTS:  # a fresh start: no outputs of an earlier calibration beside the new journal
            (out / name).unlink(missing_ok=True)
        atomic_write_json(out / "manifest.json", manifest)
        atomic_write_text(journal, csv_text(POINTS_HEADER, []))
        done = []
    return journal, manifest, done


def _manifest(config: dict, n_runs: int) -> dict:
    """``manifest.json`` of an unfinished calibration of ``config`` (``n_runs`` runs)."""
    return {
        "what": "cprsim calibrate",
        "fingerprint": fingerprint(config),
        "runs": n_runs,
        "finished": False,
        "config": config,
    }


def _provenance(
    p: R.Preset, facts: dict, threads: int, fingerprint: str, sim_info: dict | None
) -> dict:
    """The calibration's ``[provenance]``: the model, data, seeds, method and baseline, and the
    scenario it was matched to or its failures taken from."""
    import torch

    m = p.model
    prov = {
        "calibrated": True,
        "preset": p.name,
        "cprsim_version": __version__,
        "torch_version": torch.__version__,
        "model": (
            f"DLRM: embedding dim {m.dim}, bottom MLP {_n_dense(p)}-{m.bottom_hidden}-{m.dim}, "
            f"pairwise dot interaction, top MLP {m.top_hidden}-1, BCE; embeddings "
            f"{m.emb_optimizer} lr {m.emb_lr}, dense Adagrad lr {m.dense_lr}"
        ),
        "data": describe_data(p),
        "seeds": list(p.seeds),
        "embedding_servers": p.n_shards,
        "sharding": "row hash (Knuth multiplicative) over all tables",
        "failures_per_run": p.failures_per_run,
        "mfu_ssu": (
            f"top_fraction {p.top_fraction}, full save every {p.full_every}, ssu sample "
            f"rate {p.sample_rate}; same bytes written as vanilla at each budget"
        ),
        "pls": "measured: lost sample-updates through cprsim.pls.ShardLedger (docs/calibration.md)",
        "fit": (
            "[fit]: loss = slope x PLS per strategy, least squares through the origin, 95% CI (Student t); "
            "[model]: the model the planner uses, chosen among slope/position/age/curvature/position+age by "
            "leave-one-seed-out cross-validation (cprsim.calibrate.accuracy)"
        ),
        "baseline_auc": facts["baseline_auc"],
        "baseline_logloss": facts["baseline_logloss"],
        "iterations": R.n_iters_of(p),
        "embedding_rows": DS.table_rows(p),
        "torch_threads_per_run": threads,
        "device": p.device,
        "fingerprint": fingerprint,
    }
    if sim_info and "matched" in sim_info:
        from cprsim.calibrate.matched import describe as describe_matched

        prov["matched"] = sim_info["matched"]
        prov["failures_per_run"] = "the scenario's (simulated)"
        prov["mfu_ssu"] = describe_matched(sim_info["matched"])
    elif sim_info:
        prov["from_sim"] = sim_info
    return prov


def _measure_costs(p: R.Preset, doc: dict, threads: int, progress: Progress) -> float:
    """Measure the shard save/load costs and the end-to-end check into ``doc`` (``costs``,
    ``end_to_end``); returns the seconds it took."""
    import torch

    from cprsim.calibrate.costs import e2e_repeats, end_to_end, measure_shard_io

    t, threads_before = time.perf_counter(), torch.get_num_threads()
    seed = p.seeds[0]
    prep = R.prepared(p, seed)
    # torch.save/load time depends on the shard's bytes, not on the trained values
    doc["costs"] = measure_shard_io(R.new_model(prep, p.model, seed), p.n_shards)
    n = prep.n_iters
    try:  # e2e_repeats(p) plain and checkpointed runs, interleaved, here after the workers are done
        doc["end_to_end"] = end_to_end(
            prep,
            p,
            seed,
            None,
            R.failure_schedule(n, p.n_shards, p.failures_per_run, seed),
            repeats=e2e_repeats(p),
            threads=threads,
        )
    finally:
        torch.set_num_threads(threads_before)
    costs_s = time.perf_counter() - t
    progress(1, f"costs and end-to-end check ({costs_s:.1f} s)")
    return costs_s


def _run_record(
    started: str,
    t0: float,
    runs_s: float,
    costs_s: float,
    jobs: int,
    threads: int,
    n_runs: int,
    n_todo: int,
    run_s: list[list[Any]],
) -> dict:
    """``run.json``: when and how long this invocation ran (runs and costs), how many runs it ran
    and resumed, and each run's wall and CPU seconds."""
    return {
        "started": started,
        "finished": _now(),
        "wall_s": time.perf_counter() - t0,
        "runs_s": runs_s,
        "costs_s": costs_s,
        "jobs": jobs,
        "threads_per_job": threads,
        "runs": n_runs,
        "runs_resumed": n_runs - n_todo,
        "runs_run_now": n_todo,
        "runs_cpu_s": sum(r[3] for r in run_s),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "run_seconds": sorted(run_s),
        "note": "each run this invocation ran: [seed, run, wall s, CPU s "
        "of its worker] (data generation of a worker's first run of a seed and evaluation included); "
        "machine- and load-dependent",
    }
