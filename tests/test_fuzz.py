"""The bad-input campaign (``tests/fuzzing.py``) as tests: every hostile input gets a one-line error
naming its source (exit 2) or a clean success, within a time budget; never a traceback.

``make test`` runs a fast, derandomized profile (a couple of hundred inputs); ``make fuzz`` the
long one (``FUZZ_EXAMPLES=5000``: the total across the eight kinds) and prints the counts.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from cprsim.cli import main

import fuzzing as fz

TOTAL = int(os.environ.get("FUZZ_EXAMPLES", "0"))
#: share of the long profile per kind (%), and the fast profile's examples
PROFILE = {
    "scenario": (22, 40),
    "set": (21, 40),
    "sweep": (8, 10),
    "trace": (17, 40),
    "calibration": (12, 12),
    "quick": (8, 8),
    # 19 input slots x 13 special files: 247 distinct inputs, however many are asked for
    "special": (5, 20),
    "resume": (8, 12),
}
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
        total = sum(fz.OUTCOMES.values())
        text = "fuzz outcomes (kind, outcome, count):\n" + "\n".join(lines)
        text += f"\ntotal inputs: {total} (asked for {TOTAL})"
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
                        "total": sum(fz.OUTCOMES.values()),
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


# -- issue 27's kinds: calibration files, quick-form flags, special files, tampered resumes ---------------------
CALIBRATION = fz.calibration_seed()


@_settings("calibration")
@given(data=st.data())
def test_calibration_files(work, data):
    """A mutated calibration file through the commands that read one: shown, drawn, planned with."""
    if data.draw(st.booleans()):
        body = fz.toml_text(data.draw(fz.mutated_table(CALIBRATION))).encode()
    else:
        body = data.draw(fz.mutated_text(fz.toml_text(CALIBRATION)))
    i = next(_COUNTER)
    f = work / f"calibration{i}.toml"
    f.write_bytes(body)
    how = data.draw(st.sampled_from(["show", "show", "show", "plot", "plot", "plan"]))
    args = {
        "show": ["calibrate", "--show", str(f)],
        "plot": ["plot", "calibration", str(f), "--out", str(work / f"calibration{i}.png")],
        "plan": [
            "plan",
            "toy",
            "--max-accuracy-loss",
            "0.001",
            "--calibration",
            str(f),
            *fz.QUICK_TAIL,
        ],
    }[how]
    fz.check("calibration", args, (f.name, "calibration"), BUDGET_S, describe=how)


@pytest.mark.slow
@_settings("quick")
@given(data=st.data())
def test_quick_form_flags(data):
    """``cprsim plan`` without a scenario: the quick form's flags, one or two of them hostile."""
    args, changed = data.draw(fz.quick_args())
    # a hopeless regime is the quick form's as a whole ("quick-form: hopeless: ..."): it says which
    # cost makes it so, in words
    fz.check("quick", args, (*changed, "quick options", "quick-form"), BUDGET_S)


@pytest.fixture(scope="module")
def finished_sweep(work):
    """A finished two-point sweep (its spec file and folder) to resume, plot and tamper with."""
    spec = work / "base-sweep.toml"
    spec.write_text(fz.toml_text(fz.SWEEP_SEED))
    out = work / "base-sweep"
    r = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(out)])
    assert r.exit_code == 0, r.output
    return spec, out


@pytest.fixture(scope="module")
def specials(work, finished_sweep):
    files = fz.special_files(work / "special")
    schema = work / "schema.toml"
    schema.write_text(
        'label = "click"\ncategorical = ["user", "item"]\ndense = ["price"]\nheld_out = 0.25\n'
    )
    data = work / "log.csv"
    data.write_text(
        "user,item,price,click\n"
        + "".join(f"u{i % 7},i{i % 5},{i % 3},{i % 2}\n" for i in range(40))
    )
    return files, fz.special_slots(work, finished_sweep[1], schema, data)


@_settings("special")
@given(data=st.data())
def test_special_files(work, specials, data):
    """A FIFO, a device, a folder, a link, a sparse 3 GiB file, a 12 MB TOML... in every input slot:
    refused at once with one line naming the file, never read to the end, never blocking."""
    files, slots = specials
    what = data.draw(st.sampled_from(sorted(files)))
    slot = data.draw(st.sampled_from(sorted(slots)))
    path = files[what]
    args = slots[slot](path, next(_COUNTER))
    fz.check(
        "special", args, (path.name, fz.short_path(path)), BUDGET_S, describe=f"{what} as {slot}"
    )


@_settings("resume")
@given(data=st.data())
def test_tampered_resumes(work, finished_sweep, data):
    """A finished sweep's folder tampered with, then ``--resume``: refused with one line naming the
    folder or file, or finished with exactly the untampered files (a cut journal is what kill -9
    leaves: resuming it must give the same bytes)."""
    spec0, base = finished_sweep
    what, f = data.draw(fz.tamper())
    i = next(_COUNTER)
    folder = work / f"resume{i}"
    shutil.copytree(base, folder)
    spec = work / f"resume{i}.toml"
    shutil.copyfile(spec0, spec)
    f(folder, spec)
    names = (folder.name, spec.name, *fz.RESUME_FILES, "--resume")
    outcome = fz.check(
        "resume", ["sweep", str(spec), "--out", str(folder), "--resume"], names, BUDGET_S, what
    )
    if outcome == "ok":
        for name in ("results.csv", "summary.csv"):
            got = (folder / name).read_bytes() if (folder / name).is_file() else b"(missing)"
            if got != (base / name).read_bytes():
                fz._fail("resume", "tampering carried into the results", f"{what}: {name} differs")
