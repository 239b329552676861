"""Derive traces/fitted/*.toml from the public failure logs in ../shared (never copied here).

Each file holds the best fit by AIC with a finite mean (as scenario keys, usable with
`[failures] model = "..."`; when the best by AIC has an infinite mean, which a scenario's default
stationary start refuses, the file says so beside the table and in `model_note`), every family's
parameters with 95% CIs, its mean and its tail notes (`FitReport.tail`: infinite mean or
variance, a mean many times the exponential's, a mean mostly from lifetimes longer than any in
the log), and the provenance: repository, commit and path of the source (from its SOURCE.md),
the filters, the counts and the fit date.
Usage: CPRSIM_SHARED=../shared python traces/fit_public.py [NAME ...]  (default: every file)
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import sys
import textwrap
from pathlib import Path

from cprsim import __version__
from cprsim.failures.fit import fit_all
from cprsim.failures.traces import read_trace
from cprsim.io import atomic_write_text

HERE = Path(__file__).parent
SHARED = Path(os.environ.get("CPRSIM_SHARED", HERE.parent.parent / "shared")) / "traces" / "public"

JOBS = [
    # out name, folder, file, format, filters, node_count
    ("infinitehbd-hardware", "InfiniteHBD-Trace", "fault_trace.json", "infinitehbd", {"level": "hardware"}, 400),
    ("infinitehbd-all", "InfiniteHBD-Trace", "fault_trace.json", "infinitehbd", {}, 400),
    ("lanl-system20-hardware", "SimEDC", "trace.csv", "lanl", {"system": "20", "cause": "hardware"}, None),
    ("titan-gpu", "TitanGPULife", "gc_summary_loc.csv", "titan", {}, None),
    ("philly-jobs", "philly-traces", "jobs.json", "philly", {}, None),
]


def source_info(folder: str) -> tuple[str, str]:
    text = (SHARED / folder / "SOURCE.md").read_text()
    repo = re.search(r"Repository: (\S+)", text)
    commit = re.search(r"Commit: ([0-9a-f]{40})", text)
    return (repo.group(1) if repo else "?"), (commit.group(1) if commit else "?")


def q(v: object) -> str:
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)  # a TOML basic string
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(q(x) for x in v) + "]"
    return repr(v)


def comment(text: str, width: int = 98) -> list[str]:
    """``text`` as TOML comment lines of at most ``width`` characters."""
    return ["# " + line for line in textwrap.wrap(text, width - 2)]


def main(names: list[str]) -> None:
    unknown = set(names) - {j[0] for j in JOBS}
    if unknown:
        raise SystemExit(f"no such fitted file: {', '.join(sorted(unknown))} (one of {', '.join(j[0] for j in JOBS)})")
    for name, folder, file, fmt, flt, nc in JOBS:
        if names and name not in names:
            continue
        tr = read_trace(SHARED / folder / file, fmt, flt, nc)
        t, obs = tr.lifetimes()
        rep = fit_all(t, obs)
        repo, commit = source_info(folder)
        b, why = rep.model_fit()
        lines = [f"# {name}: fitted by traces/fit_public.py (cprsim {__version__}) from a public log.",
                 "# The log itself is not in this repository: see the provenance.", "",
                 "[provenance]", f"repository = {q(repo)}", f"commit = {q(commit)}", f"path = {q(file)}",
                 f"format = {q(fmt)}", f"filters = {q([f'{k}={v}' for k, v in flt.items()])}"]
        if nc:
            lines.append(f"node_count = {nc}")
        lines += [f"lifetimes = {rep.n}", f"failures = {rep.events}", f"censored = {rep.censored}",
                  f"longest_h = {rep.t_max!r}", f"exponential_mean_h = {rep.exponential_mean!r}",
                  f"best_by_aic = {q(rep.best.family)}"]
        if why:
            lines.append(f"model_note = {q(why)}")
        lines += [f"fitted = {q(dt.date.today().isoformat())}", f"unit = {q('hours')}", ""]
        params = {"family": b.family, "scale_h": b.scale_}
        if b.family == "lognormal":
            params["sigma"] = b.shape_
        elif b.family != "exponential":
            params["shape"] = b.shape_
        if why:
            lines += comment(f"Not the best fit by AIC: {why}. The {rep.best.family} fit is below, "
                             f"in [fits.{rep.best.family}]; to simulate it, copy it into a scenario "
                             'with [failures] start = "fresh".')
        tail = rep.tail(b)
        if tail.notes:
            lines += comment(f"{b.family}'s tail: " + "; ".join(tail.notes) + ".")
        lines += ["[failures.embedding]"] + [f"{k} = {q(v)}" for k, v in params.items()] + [""]
        for f in rep.fits:
            tc = rep.tail(f)
            lines += [f"[fits.{f.family}]", f"scale_h = {f.scale_!r}", f"scale_h_ci95 = {q(list(f.scale_ci_))}",
                      f"shape = {f.shape_!r}", f"shape_ci95 = {q(list(f.shape_ci_))}",
                      f"mean_h = {f.mean_!r}", f"heavy_tail = {str(tc.heavy).lower()}",
                      f"mean_beyond_data = {tc.mean_beyond_data!r}"]
            if tc.notes:
                lines.append(f"tail_notes = {q(list(tc.notes))}")
            lines += [f"log_likelihood = {f.log_likelihood_!r}", f"aic = {f.AIC_!r}", f"bic = {f.BIC_!r}", ""]
        atomic_write_text(HERE / "fitted" / f"{name}.toml", "\n".join(lines))
        note = f" ({rep.best.family} is best by AIC: infinite mean)" if why else ""
        print(f"{name}: {b.family} scale {b.scale_:.4g} h shape {b.shape_:.3g} (n={rep.n}, {rep.censored} censored){note}")


if __name__ == "__main__":
    main(sys.argv[1:])
