"""Derive traces/fitted/*.toml from the public failure logs in ../shared (never copied here).

Each file holds the best fit by AIC (as scenario keys, usable with `[failures] model = "..."`),
every family's parameters with 95% CIs, and the provenance: repository, commit and path of the
source (from its SOURCE.md), the filters, the counts and the fit date.
Usage: CPRSIM_SHARED=../shared python traces/fit_public.py
"""

from __future__ import annotations

import datetime as dt
import os
import re
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
        return '"' + v + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(q(x) for x in v) + "]"
    return repr(v)


def main() -> None:
    for name, folder, file, fmt, flt, nc in JOBS:
        tr = read_trace(SHARED / folder / file, fmt, flt, nc)
        t, obs = tr.lifetimes()
        rep = fit_all(t, obs)
        repo, commit = source_info(folder)
        b = rep.best
        lines = [f"# {name}: fitted by traces/fit_public.py (cprsim {__version__}) from a public log.",
                 "# The log itself is not in this repository: see the provenance.", "",
                 "[provenance]", f"repository = {q(repo)}", f"commit = {q(commit)}", f"path = {q(file)}",
                 f"format = {q(fmt)}", f"filters = {q([f'{k}={v}' for k, v in flt.items()])}"]
        if nc:
            lines.append(f"node_count = {nc}")
        lines += [f"lifetimes = {rep.n}", f"failures = {rep.events}", f"censored = {rep.censored}",
                  f"fitted = {q(dt.date.today().isoformat())}", f"unit = {q('hours')}", ""]
        params = {"family": b.family, "scale_h": b.scale_}
        if b.family == "lognormal":
            params["sigma"] = b.shape_
        elif b.family != "exponential":
            params["shape"] = b.shape_
        lines += ["[failures.embedding]"] + [f"{k} = {q(v)}" for k, v in params.items()] + [""]
        for f in rep.fits:
            lines += [f"[fits.{f.family}]", f"scale_h = {f.scale_!r}", f"scale_h_ci95 = {q(list(f.scale_ci_))}",
                      f"shape = {f.shape_!r}", f"shape_ci95 = {q(list(f.shape_ci_))}",
                      f"log_likelihood = {f.log_likelihood_!r}", f"aic = {f.AIC_!r}", f"bic = {f.BIC_!r}", ""]
        atomic_write_text(HERE / "fitted" / f"{name}.toml", "\n".join(lines))
        print(f"{name}: {b.family} scale {b.scale_:.4g} h shape {b.shape_:.3g} (n={rep.n}, {rep.censored} censored)")


if __name__ == "__main__":
    main()
