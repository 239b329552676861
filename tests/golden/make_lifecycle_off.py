"""Regenerate ``lifecycle_off.json``: the results of every built-in scenario under every strategy
that accepts it, as the engine gave them BEFORE the node lifecycle existed (issue 16).

The file holds the *values* (the result fields that existed then, ``FIELDS``, for ``REPS``
replications, and the event log of the first), not only a digest of their bytes: the test
``tests/test_lifecycle.py`` recomputes them with today's engine and compares at a stated relative
tolerance (``RTOL``), so that it holds on any x86-64 machine, not only the one the file was made on
(issue 23: NumPy dispatches transcendental functions to CPU-specific kernels, whose results differ
in the last bits between CPUs). Integers and event kinds and nodes are compared exactly.

Provenance: the first version of this file held sha256 digests of ``repr()`` of these values,
made at commit 50ea55a (the last commit without ``[lifecycle]``) on a machine whose NumPy used
AVX-512 kernels; on an AMD EPYC without AVX-512 (NumPy's X86_V3 kernels) 15 of the 40 digests
differed, at 50ea55a as at 4c7984e. The values stored now were computed by the 50ea55a engine on
that second machine (``--engine``, below); there 4c7984e gives the very same bytes, and the other
25 cases still hash to the first version's digests (kept under ``sha256_at_50ea55a``).

Regenerate (only when a change of results is intended, or to re-anchor on the pre-lifecycle
engine)::

    git worktree add /tmp/wt50 50ea55a
    python tests/golden/make_lifecycle_off.py --engine /tmp/wt50
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

FIELDS = [
    "replication",
    "wall_s",
    "useful_s",
    "save_s",
    "load_s",
    "lost_s",
    "reschedule_s",
    "degraded_s",
    "failures_trainer",
    "failures_embedding",
    "failures_job",
    "failure_events",
    "checkpoints",
    "pls",
    "overhead",
    "ckpt_overhead",
    "ettr",
    "pls_position",
    "pls_age",
]
REPS = 3
#: variants per scenario: (label, --set overrides)
VARIANTS = [("blocking", {}), ("two-phase", {"checkpoint.mode": "two-phase"})]
#: relative tolerance of the cross-machine comparison. Last-bit differences of exp/log/power
#: (a few ULP, ~1e-16 relative) accumulate over at most ~1e5 event times and sums: < 1e-10
#: relative; 1e-9 leaves a margin, while any change of the model moves results by far more.
RTOL = 1e-9


def values(s, reps: int = REPS) -> dict:
    """The compared values of scenario ``s``: result rows and the first replication's events."""
    from cprsim.sim.engine import simulate_one

    rows, events = [], []
    for rep in range(reps):
        res, ev = simulate_one(s, rep, record=rep == 0)
        d = res.as_dict()
        rows.append([d[f] for f in FIELDS])
        if rep == 0:
            events = [list(tuple(e)) for e in ev]
    return {"rows": rows, "events": events}


def digest(v: dict) -> str:
    """The sha256 the first version of this file stored: ``repr`` of each row, then of each event."""
    h = hashlib.sha256()
    for rep, row in enumerate(v["rows"]):
        h.update(repr(list(row)).encode())
        if rep == 0:
            for e in v["events"]:
                h.update(repr(tuple(e)).encode())
    return h.hexdigest()


def cases():
    """(key, scenario) for every built-in x strategy x variant the scenario model accepts."""
    from cprsim import scenario as sc
    from cprsim.errors import InputError
    from cprsim.sim import strategies

    strategies.ensure_loaded()
    for name in sc.builtin_names():
        if name not in ("toy", "cpr-production", "infinitehbd-hardware"):
            continue  # the built-ins that existed before the lifecycle
        for strat in sorted(strategies.names()):
            for label, sets in VARIANTS:
                try:
                    s = sc.load(name, {"strategy.name": strat, **sets})
                except InputError:
                    continue
                yield f"{name}/{strat}/{label}", s


def _use_engine(tree: str) -> None:
    """Import ``cprsim`` from the source tree ``tree`` instead of the installed (editable) one."""
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()]
    sys.path.insert(0, tree)
    import cprsim

    if not Path(cprsim.__file__).resolve().is_relative_to(Path(tree).resolve()):
        sys.exit(f"could not import cprsim from {tree} (got {cprsim.__file__})")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--engine":
        _use_engine(sys.argv[2])
    path = Path(__file__).with_name("lifecycle_off.json")
    old = json.loads(path.read_text())
    digests = old.get("sha256_at_50ea55a", old)  # the first version was {key: digest}
    cases_out = {k: values(s) for k, s in cases()}
    same = sorted(k for k, v in cases_out.items() if digest(v) == digests.get(k))
    out = {
        "fields": FIELDS,
        "rtol": RTOL,
        "sha256_at_50ea55a": digests,
        "hash_to_sha256_at_50ea55a": same,
        "cases": cases_out,
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, sort_keys=True, separators=(",", ":")) + "\n")
    tmp.replace(path)
    print(f"{len(cases_out)} cases, {len(same)} hash to the 50ea55a digests", file=sys.stderr)
