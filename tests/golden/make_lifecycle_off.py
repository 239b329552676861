"""Regenerate ``lifecycle_off.json``: the results of every built-in scenario under every strategy
that accepts it, as the engine gave them BEFORE the node lifecycle existed (issue 16).

Run once, at commit 50ea55a (the last commit without ``[lifecycle]``), with
``python tests/golden/make_lifecycle_off.py``. The test ``tests/test_lifecycle.py`` recomputes the
same digests with today's engine: a scenario without ``[lifecycle]`` must give the same bytes.
The digest covers the result fields that existed then (``FIELDS``), in that order, and the event log
of the first replication; new result fields (lifecycle breakdowns) are not part of it.
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


def digest(s, reps: int = REPS) -> str:
    from cprsim.sim.engine import simulate_one

    h = hashlib.sha256()
    for rep in range(reps):
        res, ev = simulate_one(s, rep, record=rep == 0)
        d = res.as_dict()
        h.update(repr([d[f] for f in FIELDS]).encode())
        for e in ev:
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


if __name__ == "__main__":
    out = {k: digest(s) for k, s in cases()}
    Path(__file__).with_name("lifecycle_off.json").write_text(
        json.dumps(out, indent=1, sort_keys=True) + "\n"
    )
    print(f"{len(out)} digests", file=sys.stderr)
