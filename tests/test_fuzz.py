"""The bad-input campaign (``tests/fuzzing.py``) as tests: every hostile input gets a one-line error
naming its source (exit 2) or a clean success, within a time budget; never a traceback.

``make test`` runs a fast, derandomized profile (a couple of hundred inputs); ``make fuzz`` the
long one (``FUZZ_EXAMPLES=5000``: the total across the four kinds) and prints the counts.
"""

from __future__ import annotations

import itertools
import json
import os
import random

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import fuzzing as fz

TOTAL = int(os.environ.get("FUZZ_EXAMPLES", "0"))
#: share of the long profile per kind (%), and the fast profile's examples
PROFILE = {"scenario": (30, 40), "set": (30, 40), "sweep": (10, 10), "trace": (30, 40)}
BUDGET_S = 60
#: the fuzz lowers the events budget so that an accepted scenario stays within BUDGET_S
MAX_EVENTS = ["--max-events", "2e5"]
_COUNTER = itertools.count()


def examples(kind: str) -> int:
    share, fast = PROFILE[kind]
    return max(fast, TOTAL * share // 100) if TOTAL else fast


def _settings(kind: str):
    # no shrinking: a failing CLI run is reported as drawn (shrinking re-runs the CLI for minutes)
    return settings(
        max_examples=examples(kind),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        phases=(Phase.explicit, Phase.generate),
    )


@pytest.fixture(scope="module", autouse=True)
def report():
    yield
    if TOTAL:
        lines = [f"{k[0]:8s} {k[1]:28s} {v}" for k, v in sorted(fz.OUTCOMES.items())]
        text = "fuzz outcomes (kind, outcome, count):\n" + "\n".join(lines)
        if fz.FAILURES:
            text += "\nfirst failure of each kind:\n" + "\n".join(
                f"- {k}: {v[:600]}" for k, v in fz.FAILURES.items()
            )
        print("\n" + text)
        path = os.environ.get("FUZZ_REPORT")
        if path:
            with open(path, "w") as f:
                json.dump(
                    {
                        "outcomes": {f"{k[0]}/{k[1]}": v for k, v in fz.OUTCOMES.items()},
                        "failures": fz.FAILURES,
                    },
                    f,
                    indent=2,
                )


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


SEEDS = fz.scenario_seeds()
KEYS = fz.scenario_keys()


@_settings("scenario")
@given(data=st.data())
def test_scenario_files(work, data):
    name = data.draw(st.sampled_from(sorted(SEEDS)))
    if data.draw(st.booleans()):
        raw = data.draw(fz.mutated_table(SEEDS[name]))
        body = fz.toml_text(raw).encode()
    else:
        body = data.draw(fz.mutated_text(fz.toml_text(SEEDS[name])))
    f = work / f"scenario{next(_COUNTER)}.toml"
    f.write_bytes(body)
    fz.check(
        "scenario",
        ["simulate", str(f), "-n", "2", *MAX_EVENTS],
        (f.name, name, "scenario"),
        BUDGET_S,
        describe=body[:300].decode("utf-8", "replace"),
    )


@_settings("set")
@given(data=st.data())
def test_set_values(data):
    args = [
        "simulate",
        data.draw(st.sampled_from(["toy", "cpr-production"])),
        "-n",
        "2",
        *MAX_EVENTS,
    ]
    keys = []
    for _ in range(data.draw(st.integers(1, 2))):
        key = data.draw(st.sampled_from(KEYS))
        value = data.draw(fz.hostile_values())
        text = (
            value if isinstance(value, str) and data.draw(st.booleans()) else fz.toml_value(value)
        )
        args += ["--set", f"{key}={text}"]
        keys.append(key)
    fz.check("set", args, ("--set", *keys, "toy", "cpr-production"), BUDGET_S)


@_settings("sweep")
@given(data=st.data())
def test_sweep_files(work, data):
    if data.draw(st.booleans()):
        body = fz.toml_text(data.draw(fz.mutated_table(fz.SWEEP_SEED))).encode()
    else:
        body = data.draw(fz.mutated_text(fz.toml_text(fz.SWEEP_SEED)))
    i = next(_COUNTER)
    f = work / f"sweep{i}.toml"
    f.write_bytes(body)
    fz.check(
        "sweep",
        ["sweep", str(f), "--out", str(work / f"out{i}"), *MAX_EVENTS],
        (f.name, "sweep", "toy", "--out"),
        BUDGET_S,
        describe=body[:300].decode("utf-8", "replace"),
    )


SEED_TRACES = fz.trace_seeds(None)  # type: ignore[arg-type]
OPTIONS = [
    [],
    [],
    ["--json"],
    ["--interarrival", "failure-to-failure"],
    ["--as", "job", "--cluster-size", "64"],
    ["--node-type", "embedding"],
    ["--bootstrap", "0"],
]


@st.composite
def mutated_log(draw, fmt_name):
    fmt, body, extra = SEED_TRACES[fmt_name]
    text = body.decode()
    op = draw(st.sampled_from(["cell", "cell", "table", "text"]))
    if op == "cell" and fmt in ("csv", "lanl", "titan"):
        lines = text.splitlines()
        rng = random.Random(draw(st.integers(0, 2**32)))
        for _ in range(draw(st.integers(1, 4))):
            i = rng.randrange(len(lines))
            cells = lines[i].split(",")
            j = rng.randrange(len(cells))
            v = draw(fz.hostile_values())
            cells[j] = v if isinstance(v, str) else fz.toml_value(v)
            if draw(st.booleans()) and len(cells) > 1:
                del cells[rng.randrange(len(cells))]
            lines[i] = ",".join(cells)
        return "\n".join(lines).encode() + b"\n", fmt, extra
    if op in ("cell", "table") and fmt in ("philly", "infinitehbd"):
        doc = {"root": json.loads(text)}
        doc = draw(fz.mutated_table(doc))
        try:
            return json.dumps(doc.get("root", doc), allow_nan=True).encode(), fmt, extra
        except (TypeError, ValueError):
            return b"[]", fmt, extra
    return draw(fz.mutated_text(text)), fmt, extra


@pytest.mark.slow
@_settings("trace")
@given(data=st.data())
def test_failure_logs(work, data):
    body, fmt, extra = data.draw(mutated_log(data.draw(st.sampled_from(sorted(SEED_TRACES)))))
    f = work / f"log{next(_COUNTER)}.{'json' if fmt in ('philly', 'infinitehbd') else 'csv'}"
    f.write_bytes(body)
    opts = list(data.draw(st.sampled_from(OPTIONS)))
    if data.draw(st.integers(0, 4)) == 0:
        col = data.draw(
            st.sampled_from(
                [
                    "node",
                    "cause",
                    "system",
                    "batch",
                    "num_gpus",
                    "min_gpus",
                    "level",
                    "bogus",
                    "nodenum",
                    "location",
                ]
            )
        )
        val = data.draw(st.sampled_from(["1", "x", "", "-3", "dbe", "1e9", "é"]))
        opts += ["--filter", f"{col}={val}"]
    fz.check(
        "trace",
        ["fit", str(f), "--format", fmt, *extra, *opts],
        (f.name, "--filter", "--cluster-size", "--node-type", "--format", "--node-count"),
        BUDGET_S,
        describe=body[:300].decode("utf-8", "replace"),
    )
