"""Measure every run time that the README and the how-tos state, so that each stated time is a measurement.

    python benchmarks/doc_timings.py            # each command 3 times (the heavy ones once); medians
    python benchmarks/doc_timings.py --quick    # each once, the heavy ones (calibrate, the test suite,
                                                # the 16k-GPU plan, a hand-started Dask cluster) skipped
    python benchmarks/doc_timings.py --only sweep --runs 5

``CLAIMS`` is the table: the document, a pattern that finds the stated time in it (printed as the
doc states it now, or ``NOT FOUND`` when the doc has changed and the table must follow), and the
command that the time is about. Each command runs as ``docs/gen_outputs.py`` runs the docs' own
commands: in a scratch folder with the repository's top-level folders linked in, the venv's
``cprsim`` first on ``PATH``, after the files the document defines (``<!-- file NAME -->`` blocks:
a sweep file, a script) and the claim's own setup commands are in place. The wall time is the
command's alone (setup excluded), from process start to exit, on a fresh output folder each run.

It prints, per claim, the median wall time with the runs beside it, and the machine: the CPU
count and the 1-minute load average before and after (``/proc/loadavg``; above about 0.5 the
machine was shared while it measured, and the figures are upper bounds for an idle one). The docs
quote these medians with "(measured by benchmarks/doc_timings.py on a 2-core machine)".
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _gen_outputs():
    spec = importlib.util.spec_from_file_location("_gen_outputs", REPO / "docs" / "gen_outputs.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


gen = _gen_outputs()


@dataclass
class Claim:
    """A run time a document states, and the command it is about (``{run}``: the run's number)."""

    doc: str
    states: str  #: a regex that finds the stated time in the doc
    command: str
    setup: list[str] = field(default_factory=list)  #: run once in the scratch folder first
    heavy: bool = False  #: skipped by --quick, run once by default
    needs: str = ""  #: as gen_outputs' needs= (shared, torch, dask)
    in_repo: bool = False  #: run in the repository itself (the test suite), not a scratch folder
    remote_dask: bool = False  #: start a Dask scheduler and a 2-process worker on 127.0.0.1 first


FIT = "docs/howto-fit-a-failure-log.md"
PLAN = "docs/howto-plan-your-interval.md"
SWEEP = "docs/howto-sweep-on-dask.md"
CLUSTER = "docs/howto-model-your-cluster.md"

CLAIMS = [
    Claim(
        "README.md",
        r"marked `slow` \([^)]*\)",
        f"{sys.executable} -m pytest -q -p no:cacheprovider -m 'not slow'",
        heavy=True,
        in_repo=True,
    ),
    Claim(
        "README.md",
        r"accuracy loss against PLS \([^)]*\)",
        "cprsim calibrate --preset quick --out out/cal-{run}",
        heavy=True,
        needs="torch",
    ),
    Claim(
        "README.md",
        r"long=\"[^\"]*bootstrap[^\"]*\"",
        'cprsim fit "$CPRSIM_SHARED"/traces/public/InfiniteHBD-Trace/fault_trace.json '
        "--format infinitehbd --filter level=hardware --cluster-size 38",
        needs="shared",
    ),
    Claim(
        PLAN,
        r"plans in\s+[^`]*`-n 40 --search-replications 60` \([^)]*\)",
        "cprsim plan toy --max-accuracy-loss 0.001 -n 40 --search-replications 60",
    ),
    Claim(
        FIT,
        r"This took [^,(]*(?=, almost all of it the bootstrap)",
        "cprsim fit $TRACE --cluster-size 64 --out model.toml --plot fit.png --report report.json",
    ),
    Claim(
        FIT,
        r"This took [^(]*\(400 refits",
        "cprsim fit bad-nodes.csv --bad-nodes --nodes 2000 --out health.toml",
        setup=["python make_bad_nodes.py"],
    ),
    Claim(
        SWEEP,
        r"\([^()]*, the plan included[^()]*\)",
        "cprsim sweep interval.toml --jobs 2 --out out-jobs2-{run}",
    ),
    Claim(
        SWEEP,
        r"\([^()]*, the cluster's start included",
        "cprsim sweep interval.toml --dask-local 2 --out out-dask-{run}",
        needs="dask",
    ),
    Claim(
        SWEEP,
        r"--nworkers 2` \([^)]*\)",
        "cprsim sweep interval.toml --scheduler $DASK_SCHEDULER --out out-remote-{run}",
        needs="dask",
        heavy=True,
        remote_dask=True,
    ),
    Claim(
        SWEEP,
        r"no `\[plan\]`;\s*[^)]*uninterrupted",
        "cprsim sweep interval-big.toml --out out-big-{run}",
        setup=[
            "sed -e 's/^replications = 20$/replications = 1000/' -e '/^\\[plan\\]/,$d' "
            "interval.toml > interval-big.toml"
        ],
    ),
    Claim(
        CLUSTER,
        r"tiered checkpoints\s*\([^)]*\)",
        "cprsim plan llm-16k-gpus --max-accuracy-loss 0.001 -n 40 --search-replications 40 "
        "--confidence mean",
        heavy=True,
    ),
]


def loadavg() -> str:
    """The 1-minute load average, or '?' where /proc/loadavg is missing."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def stated(claim: Claim) -> str:
    """The stated time as the doc has it now."""
    text = (REPO / claim.doc).read_text(encoding="utf-8")
    m = re.search(claim.states, text)
    return " ".join(m.group(0).split()) if m else "NOT FOUND"


@contextlib.contextmanager
def remote_dask(box) -> Iterator[str]:
    """A Dask scheduler on 127.0.0.1 and one worker of 2 single-threaded processes (as the doc
    starts them); yields the scheduler's address; stops both (their process groups) on exit."""
    from distributed import Client

    sched_file = box.path / "scheduler.json"
    bindir = str(Path(sys.executable).parent)
    procs = []
    try:
        procs.append(
            subprocess.Popen(
                [f"{bindir}/dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
                 "--dashboard-address", ":0", "--scheduler-file", str(sched_file)],
                cwd=box.path, env=box.env, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True,
            )
        )  # fmt: skip
        for _ in range(300):
            if sched_file.exists() and sched_file.stat().st_size:
                break
            time.sleep(0.1)
        procs.append(
            subprocess.Popen(
                [f"{bindir}/dask", "worker", "--scheduler-file", str(sched_file),
                 "--nthreads", "1", "--nworkers", "2"],
                cwd=box.path, env=box.env, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True,
            )
        )  # fmt: skip
        with Client(scheduler_file=str(sched_file), timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            address = client.scheduler.address
        yield address
    finally:
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def measure(claim: Claim, runs: int) -> tuple[list[float], str]:
    """Wall seconds of each run, and a failure message ('' when every run exited 0)."""
    if missing := gen.missing_needs({"needs": claim.needs}):
        return [], "skipped: " + "; ".join(missing)
    times: list[float] = []
    with gen.scratch() as box, contextlib.ExitStack() as stack:
        for step in gen.parse(REPO / claim.doc):
            if step.kind == "file":
                gen.run_step(step, box)
            elif step.kind == "run" and step.commands[0].code.startswith("export "):
                gen.run_step(step, box)  # the doc's own export lines (TRACE=...)
        for cmd in claim.setup:
            rc, out, _ = box.run(cmd, "sh")
            if rc != 0:
                return [], f"setup `{cmd}` exited {rc}: {out[-500:]}"
        if claim.remote_dask:
            box.env["DASK_SCHEDULER"] = stack.enter_context(remote_dask(box))
        for i in range(runs):
            command = claim.command.format(run=i)
            if claim.in_repo:
                t0 = time.perf_counter()
                proc = subprocess.run(
                    ["bash", "-c", command], cwd=REPO, env=box.env, capture_output=True, text=True
                )
                seconds, rc, out = (
                    time.perf_counter() - t0,
                    proc.returncode,
                    proc.stdout + proc.stderr,
                )
            else:
                rc, out, seconds = box.run(command, "sh", timeout=3600)
            if rc != 0 and claim.in_repo:  # the suite's duration, whatever its verdict
                times.append(seconds)
                tail = out.strip().splitlines()[-1:] or [""]
                return times, f"note: `{command}` exited {rc} ({tail[0]})"
            if rc != 0:
                return times, f"`{command}` exited {rc}: {out[-500:]}"
            times.append(seconds)
    return times, ""


def main(argv: list[str] | None = None) -> int:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one run each, the heavy ones skipped")
    ap.add_argument("--runs", type=int, default=3, help="runs per command (heavy ones: 1)")
    ap.add_argument("--only", default="", help="only the claims whose doc or command contain this")
    args = ap.parse_args(argv)
    print(f"machine: {os.cpu_count()} CPUs; load average (1 min) before: {loadavg()}", flush=True)
    failed = 0
    for claim in CLAIMS:
        if args.only and args.only not in claim.doc + " " + claim.command:
            continue
        if args.quick and claim.heavy:
            print(f"\n{claim.doc}: skipped (heavy, --quick): {claim.command}", flush=True)
            continue
        runs = 1 if (args.quick or claim.heavy) else args.runs
        load0 = loadavg()
        times, error = measure(claim, runs)
        print(f"\n{claim.doc}: states: {stated(claim)}", flush=True)
        print(f"  command: {claim.command}", flush=True)
        if times:
            each = ", ".join(f"{t:.1f}" for t in times)
            print(
                f"  median {statistics.median(times):.1f} s over {len(times)} run(s) [{each}]; "
                f"load {load0} -> {loadavg()}",
                flush=True,
            )
        if error:
            print(f"  {error}", flush=True)
            failed += not error.startswith(("skipped", "note"))
    print(f"\nload average (1 min) after: {loadavg()}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
