"""The bad-input campaign as code: Hypothesis generators of hostile inputs and the CLI contract.

Eight kinds of input, most of them a mutation of something valid:

* **scenario files** (mutations of the built-in scenarios) through ``cprsim simulate FILE -n 2``;
* **``--set`` values** (any scenario key, or an unknown one, set to a hostile value) through
  ``cprsim simulate toy -n 2 --set KEY=VALUE``;
* **sweep files** (mutations of a two-point sweep of ``toy``) through ``cprsim sweep FILE``;
* **failure logs** (mutations of small logs in each reader's format) through ``cprsim fit``;
* **calibration files** (mutations of the shipped matched calibration) through ``calibrate
  --show``, ``plot calibration`` and ``plan --calibration``;
* **quick-form flags** (``cprsim plan`` without a scenario, one or two flags hostile or missing);
* **special files** (a FIFO, devices, a folder, links, a 3 GiB sparse file, a 12 MB TOML, ...)
  in every input slot of the CLI;
* **tampered resumes** (a finished sweep's folder changed, then ``--resume``: refused in one line,
  or finished with exactly the untampered files).

Mutations: a leaf replaced by a hostile value (wrong type, a string for a number, ``true``, non-finite
or extreme numbers, huge integers, nested arrays, long strings, paths to devices, folders or
``..``), a key deleted, an unknown key added, a key duplicated, the text truncated, bytes flipped,
re-encoded (latin-1, UTF-16), deeply nested, emptied.

The contract (``check``): the command ends within the time budget and either succeeds (exit 0,
no NaN printed) or exits 2 with exactly one line on stderr, ``Error: ...``, that names
the input (file name, key or ``--set``); never a traceback, never an internal error.
"""

from __future__ import annotations

import collections
import copy
import json
import math
import re
import signal
import string
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import strategies as st

from cprsim import scenario as sc
from cprsim.cli import main

#: what the campaign saw, by kind and outcome (``make fuzz`` prints it)
OUTCOMES: collections.Counter = collections.Counter()
#: the first failing example of each kind of failure (for the report)
FAILURES: dict[str, str] = {}

LONG_PATH = "/tmp/" + "d" * 2500 + "/x.csv"
HOSTILE_STRINGS = [
    "",
    " ",
    "1.5",
    "1e3",
    "true",
    "nan",
    "inf",
    "-1",
    "../x",
    "/",
    "/dev/zero",
    "/dev/null",
    "/proc/self/mem",
    "/etc/passwd",
    "/tmp",
    LONG_PATH,
    "a\nb",
    "é",
    "\x00",
    "'",
    '"',
    "\\",
    "${HOME}",
    "x" * 5000,
]
HOSTILE_NUMBERS = [
    0,
    -1,
    1,
    2,
    -0.0,
    0.0,
    1e-300,
    5e-324,
    1e-9,
    1e300,
    1.7976931348623157e308,
    1e12,
    10**18,
    2**63,
    -(2**63),
    10**30,
    math.inf,
    -math.inf,
    math.nan,
    0.5,
    3.0,
]


def hostile_values() -> st.SearchStrategy:
    leaf = st.one_of(
        st.sampled_from(HOSTILE_NUMBERS),
        st.sampled_from(HOSTILE_STRINGS),
        st.booleans(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.text(alphabet=string.printable, max_size=12),
    )
    return st.one_of(
        leaf,
        st.lists(leaf, max_size=3),
        st.dictionaries(st.sampled_from(["a", "family", "x"]), leaf, max_size=2),
        st.sampled_from([[[[[1]]]], [], {}, [{}], [[1, 2], "x"]]),
    )


# -- TOML text of arbitrary (hostile) tables ---------------------------------------------------------------
def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return (
            "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(x)}" for k, x in v.items()) + "}"
        )
    return json.dumps(str(v))


def toml_text(d: dict, prefix: str = "") -> str:
    out, tables, arrays = [], [], []
    for k, v in d.items():
        if (
            isinstance(v, dict)
            and v
            and all(isinstance(x, (dict, list, str, int, float, bool)) for x in v.values())
            and not prefix.count(".") > 6
        ):
            tables.append((k, v))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            arrays.append((k, v))
        else:
            out.append(f"{json.dumps(str(k))} = {toml_value(v)}")
    for k, v in tables:
        name = f"{prefix}{json.dumps(str(k))}"
        out.append(f"\n[{name}]")
        out.append(toml_text(v, name + "."))
    for k, v in arrays:
        name = f"{prefix}{json.dumps(str(k))}"
        for x in v:
            out.append(f"\n[[{name}]]")
            out.append(toml_text(x, name + "."))
    return "\n".join(out) + "\n"


def _leaf_paths(d: Any, pre: tuple = ()) -> list[tuple]:
    out: list[tuple] = []
    if isinstance(d, dict):
        for k, v in d.items():
            out.append(pre + (k,))
            out.extend(_leaf_paths(v, pre + (k,)))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            if isinstance(v, dict):
                out.extend(_leaf_paths(v, pre + (i,)))
    return out


def _at(d: Any, path: tuple) -> Any:
    for k in path:
        d = d[k]
    return d


@st.composite
def mutated_table(draw: Any, base: dict) -> dict:
    """``base`` with one to three structural mutations."""
    raw = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = _leaf_paths(raw)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _at(raw, path[:-1]), path[-1]
        op = draw(st.sampled_from(["replace", "replace", "replace", "delete", "unknown"]))
        if op == "replace":
            parent[key] = draw(hostile_values())
        elif op == "delete":
            del parent[key]
        elif isinstance(parent, dict):
            parent[draw(st.sampled_from(["bogus", "interval", "mtbf", "Trainers"]))] = draw(
                hostile_values()
            )
    return raw


@st.composite
def mutated_text(draw: Any, text: str) -> bytes:
    """Text-level damage: truncation, byte flips, other encodings, deep nesting, duplicates, nothing."""
    op = draw(
        st.sampled_from(
            [
                "truncate",
                "flip",
                "latin1",
                "utf16",
                "nest",
                "duplicate",
                "empty",
                "comment",
                "binary",
            ]
        )
    )
    data = text.encode()
    if op == "truncate":
        return data[: draw(st.integers(0, max(0, len(data) - 1)))]
    if op == "flip":
        b = bytearray(data)
        for _ in range(draw(st.integers(1, 6))):
            b[draw(st.integers(0, len(b) - 1))] = draw(st.integers(0, 255))
        return bytes(b)
    if op == "latin1":
        return b"\xef\xbb\xbf" * draw(st.booleans()) + text.replace("=", "= \xe9", 1).encode(
            "latin-1", "replace"
        )
    if op == "utf16":
        return text.encode("utf-16")
    if op == "nest":
        depth = draw(st.sampled_from([40, 1000, 100_000]))
        kind = draw(st.sampled_from(["array", "inline", "header"]))
        if kind == "array":
            return data + b"\nzz = " + b"[" * depth + b"]" * depth + b"\n"
        if kind == "inline":
            return data + b"\nzz = " + b"{a = " * depth + b"1" + b"}" * depth + b"\n"
        return data + b"\n[" + b".".join([b"a"] * min(depth, 20_000)) + b"]\n"
    if op == "duplicate":
        lines = text.splitlines()
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        return "\n".join(lines[: i + 1] + lines[i : i + 1] + lines[i + 1 :]).encode()
    if op == "empty":
        return b""
    if op == "comment":
        return b"# nothing but a comment\n"
    return draw(st.binary(min_size=1, max_size=400))


# -- running the CLI under the contract ---------------------------------------------------------------------
class OverBudget(Exception):
    pass


@contextmanager
def time_budget(seconds: int):
    def alarm(*_: Any) -> None:
        raise OverBudget()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


#: a NaN printed is a bug (an infinite mean, e.g. a log-logistic with shape <= 1, is a true answer)
_NONFINITE = re.compile(r"(?<![\w.])nan(?![\w.])", re.IGNORECASE)


def check(
    kind: str, args: list[str], names: tuple[str, ...], budget_s: int, describe: str = ""
) -> str:
    """Run ``cprsim ARGS`` in-process and assert the contract; return the outcome ("ok"/"error")."""
    runner = CliRunner()
    try:
        with time_budget(budget_s):
            r = runner.invoke(main, args, catch_exceptions=True)
    except OverBudget:
        _fail(kind, "over budget", f"over {budget_s} s: {args} {describe}")
    if isinstance(r.exception, OverBudget):
        _fail(kind, "over budget", f"over {budget_s} s: {args} {describe}")
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        tb = "".join(traceback.format_exception(r.exception))[-2500:]
        _fail(kind, f"traceback {type(r.exception).__name__}", f"{args} {describe}\n{tb}")
    if r.exit_code == 0:
        if _NONFINITE.search(r.stdout):
            _fail(kind, "non-finite output", f"{args} {describe}\n{r.stdout[-1500:]}")
        OUTCOMES[(kind, "ok")] += 1
        return "ok"
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    if r.exit_code != 2 or len(lines) != 1 or not lines[0].startswith("Error: "):
        _fail(
            kind,
            f"exit {r.exit_code}, {len(lines)} lines",
            f"{args} {describe}\n{r.stderr[-1500:]}",
        )
    line = lines[0]
    if names and not any(n in line for n in names):
        _fail(kind, "error names no source", f"{args} {describe}\n{line}")
    OUTCOMES[(kind, "error")] += 1
    return "error"


def _fail(kind: str, what: str, detail: str) -> None:
    OUTCOMES[(kind, what)] += 1
    FAILURES.setdefault(f"{kind}: {what}", detail)
    raise AssertionError(f"{kind}: {what}: {detail}")


# -- seeds ----------------------------------------------------------------------------------------------------
def scenario_seeds() -> dict[str, dict]:
    return {name: sc.load_raw(name)[0] for name in ("toy", "cpr-production")}


def scenario_keys() -> list[str]:
    """Every dotted key of the toy scenario's effective config, and some it does not have."""

    def walk(d: Any, pre: str) -> list[str]:
        out = []
        for k, v in d.items():
            key = f"{pre}{k}"
            out.append(key)
            if isinstance(v, dict):
                out.extend(walk(v, key + "."))
        return out

    keys = walk(sc.effective_dict(sc.load("toy")), "")
    keys += [
        "failures.embedding.shape",
        "failures.job.mtbf_h",
        "failures.job.family",
        "failures.replay",
        "failures.model",
        "access.tables",
        "access.rows",
        "access.dim",
        "strategy.top_fraction",
        "strategy.k",
        "strategy.m",
        "strategy.cache_fraction",
        "failures.injected",
        "failures.domains",
        "bogus",
        "cluster.bogus",
        "strategy.bogus",
        "job.samples",
    ]
    return sorted(set(keys))


SWEEP_SEED = {
    "name": "fz",
    "scenario": "toy",
    "replications": 2,
    "strategies": ["full", "partial"],
    "set": {"job": {"duration_h": 5.0}},
    "grid": {"checkpoint": {"interval_h": [0.5, 1.0]}},
}


def trace_seeds(folder: Path | None = None) -> dict[str, tuple[str, bytes, list[str]]]:
    """Small logs in each reader's format: name -> (format, bytes, extra fit arguments)."""
    csv_text = (
        "node,node_type,event,time_h,cause\n"
        + "".join(
            f"n{i},embedding,fail,{10 + 7 * i + 3 * j},disk\nn{i},embedding,repair,{11 + 7 * i + 3 * j},\n"
            for i in range(6)
            for j in range(3)
        )
        + "n9,embedding,start,0,\nn9,embedding,end,100,\n"
    )
    lanl_head = (
        "System,machine type,nodes,procstot,procsinnode,nodenum,nodenumz,node install,node prod,"
        "node decom,fru type,mem,cputype,memtype,num intercon,purpose,Prob Started (mm/dd/yy hh:mm),"
        "Prob Fixed (mm/dd/yy hh:mm),Down Time,Facilities,Hardware,Human Error,Network,Undetermined,"
        "Software,Same Event\n"
    )
    lanl = lanl_head + "".join(
        f"20,cluster,8,16,2,{n},{n},1-Jan,1-Jan,current,part,4,1,1,1,compute,0{m}/1{n}/03 10:00,0{m}/1{n}/03 12:00,"
        f"120,,Memory Dimm,,,,,No\n"
        for n in range(4)
        for m in (2, 5)
    )
    titan = (
        "SN,time,nlife,nloc,last,col,row,cage,slot,node,max_loc_events,time_max_loc,dbe,dbe_loc,otb,otb_loc,"
        "out,batch,days,years,dead,dead_otb,dead_dbe\n"
        + "".join(
            f"g{i},{3600 * (10 + i)},1,1,x,{i % 3},{i % 2},0,1,0,0,1,0,,0,,FALSE,old,1,1,{'TRUE' if i % 2 else 'FALSE'},"
            f"{'TRUE' if i % 3 else 'FALSE'},FALSE\n"
            for i in range(8)
        )
    )
    att = lambda a, b: {
        "start_time": f"2017-10-01 0{a}:00:00",
        "end_time": f"2017-10-01 0{b}:00:00",
    }
    philly = json.dumps(
        [
            {"id": f"j{i}", "num_gpus": 8, "attempts": [att(0, 1), att(2, 3 + i % 5)]}
            for i in range(5)
        ]
    )
    ev = lambda n, t, k: {
        "node_id": n,
        "event_time": t,
        "event_type": k,
        "fault_type": {"Level": "Hardware Failure", "Class": "GPU", "Desc": "x"},
    }
    ihbd = json.dumps(
        [
            ev(f"n{i}", 100 * i + j, k)
            for i in range(4)
            for j, k in ((1, "fault_start"), (5, "fault_end"))
        ]
    )
    return {
        "csv": ("csv", csv_text.encode(), []),
        "lanl": ("lanl", lanl.encode(), []),
        "titan": ("titan", titan.encode(), []),
        "philly": ("philly", philly.encode(), []),
        "infinitehbd": ("infinitehbd", ihbd.encode(), ["--node-count", "6"]),
    }


# -- calibration files, quick-form flags, special files, tampered resumes (issue 27) ---------------------------
def calibration_seed() -> dict:
    """The shipped matched calibration of cpr-production, as a table to mutate."""
    import tomllib

    from cprsim.calibrate.calibration import matched_path

    path = matched_path("cpr-production")
    assert path is not None
    return tomllib.loads(path.read_text())


#: the quick form's required flags (valid values) and its optional ones
QUICK_BASE = {
    "--node-mtbf-h": "10",
    "--embedding-servers": "4",
    "--save-s": "60",
    "--load-s": "60",
    "--max-accuracy-loss": "0.001",
}
QUICK_OPTIONAL = {
    "--trainers": "8",
    "--shard-load-s": "15",
    "--reschedule-s": "300",
    "--duration-h": "50",
    "--samples-per-s": "100000",
    "--job-mtbf-h": "100",
}
#: a quick plan small enough for thousands of runs (29 replications prove a 90% bound)
QUICK_TAIL = ["-n", "29", "--search-replications", "29", "--strategies", "partial"]


@st.composite
def quick_args(draw: Any) -> tuple[list[str], list[str]]:
    """Quick-form flags with one or two hostile values (or a required flag missing); returns the
    arguments and the flags changed."""
    flags = dict(QUICK_BASE)
    for k, v in QUICK_OPTIONAL.items():
        if draw(st.booleans()):
            flags[k] = v
    changed = []
    for _ in range(draw(st.integers(1, 2))):
        k = draw(st.sampled_from(sorted({**QUICK_BASE, **QUICK_OPTIONAL})))
        if draw(st.integers(0, 9)) == 0:
            flags.pop(k, None)
        else:
            v = draw(hostile_values())
            flags[k] = v if isinstance(v, str) else toml_value(v)
        changed.append(k)
    args = ["plan"]
    for k, v in flags.items():
        args += [k, v]
    return args + QUICK_TAIL, changed


#: a 12 MB TOML file of 750,000 unknown keys (the TOML parser alone takes most of a minute)
def huge_toml(path: Path) -> Path:
    with path.open("w") as f:
        for i in range(750_000):
            f.write(f"k{i} = {i}\n")
    return path


def special_files(folder: Path) -> dict[str, Path]:
    """Things that are not a readable regular file of a sensible size, by name: a FIFO, devices,
    a folder, symbolic links (to a device, dangling, a loop), a 3 GiB sparse file, a 12 MB TOML,
    an empty file, binary garbage, a name too long."""
    import os

    folder.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    fifo = folder / "fifo.csv"
    if not fifo.exists():
        os.mkfifo(fifo)
    out["fifo"] = fifo
    out["dev-zero"] = Path("/dev/zero")
    out["dev-null"] = Path("/dev/null")
    out["dev-urandom"] = Path("/dev/urandom")
    out["folder"] = folder
    link = folder / "zero-link.toml"
    if not link.is_symlink():
        link.symlink_to("/dev/zero")
    out["link-to-device"] = link
    dangling = folder / "dangling.toml"
    if not dangling.is_symlink():
        dangling.symlink_to(folder / "nothing-here")
    out["dangling-link"] = dangling
    loop = folder / "loop.toml"
    if not loop.is_symlink():
        loop.symlink_to(loop)
    out["link-loop"] = loop
    sparse = folder / "sparse.csv"
    if not sparse.exists():
        with sparse.open("wb") as f:
            f.truncate(3 * 2**30)
    out["sparse-3GiB"] = sparse
    big = folder / "huge.toml"
    if not big.exists():
        huge_toml(big)
    out["toml-12MB"] = big
    empty = folder / "empty.toml"
    empty.write_bytes(b"")
    out["empty"] = empty
    garbage = folder / "garbage.toml"
    garbage.write_bytes(bytes(range(256)) * 64)
    out["garbage"] = garbage
    out["name-too-long"] = Path(LONG_PATH)
    return out


def special_slots(work: Path, results: Path, schema: Path, data: Path) -> dict[str, Any]:
    """Every place the CLI reads a file, as ``name -> f(path, i) -> arguments``; ``results`` is a
    finished sweep folder, ``schema`` and ``data`` a valid calibration schema and data file."""
    n2 = ["-n", "2", "--max-events", "2e5"]
    return {
        "simulate FILE": lambda p, i: ["simulate", str(p), *n2],
        "show FILE": lambda p, i: ["show", str(p)],
        "sweep FILE": lambda p, i: ["sweep", str(p), "--out", str(work / f"sp{i}")],
        "fit LOG": lambda p, i: ["fit", str(p)],
        "fit LOG --format lanl": lambda p, i: ["fit", str(p), "--format", "lanl"],
        "fit LOG --format philly": lambda p, i: ["fit", str(p), "--format", "philly"],
        "plot fit FILE": lambda p, i: ["plot", "fit", str(p), "--out", str(work / f"sp{i}.png")],
        "plot calibration FILE": lambda p, i: [
            "plot",
            "calibration",
            str(p),
            "--out",
            str(work / f"sp{i}.png"),
        ],
        "plot timeline FILE": lambda p, i: [
            "plot",
            "timeline",
            str(p),
            "--out",
            str(work / f"sp{i}.png"),
        ],
        "plot overhead --plan FILE": lambda p, i: [
            "plot",
            "overhead",
            str(results),
            "--plan",
            str(p),
            "--out",
            str(work / f"sp{i}.png"),
        ],
        "calibrate --show FILE": lambda p, i: ["calibrate", "--show", str(p)],
        "calibrate --data FILE": lambda p, i: [
            "calibrate",
            "--data",
            str(p),
            "--schema",
            str(schema),
            "--no-costs",
            "--jobs",
            "1",
            "--out",
            str(work / f"sp{i}"),
        ],
        "calibrate --schema FILE": lambda p, i: [
            "calibrate",
            "--data",
            str(data),
            "--schema",
            str(p),
            "--no-costs",
            "--jobs",
            "1",
            "--out",
            str(work / f"sp{i}"),
        ],
        "calibrate --validate FILE": lambda p, i: [
            "calibrate",
            "--validate",
            str(p),
            "--runs",
            "1",
            "--out",
            str(work / f"sp{i}"),
        ],
        "plan --calibration FILE": lambda p, i: [
            "plan",
            "toy",
            "--max-accuracy-loss",
            "0.001",
            "--calibration",
            str(p),
            *QUICK_TAIL,
        ],
        "failures.replay": lambda p, i: [
            "simulate",
            "toy",
            *n2,
            "--set",
            f"failures.replay={json.dumps(str(p))}",
        ],
        "simulate --model FILE": lambda p, i: ["simulate", "toy", *n2, "--model", str(p)],
        "access --counts FILE": lambda p, i: ["access", "--counts", str(p)],
        "access --tables FILE": lambda p, i: ["access", "--tables", str(p)],
    }


#: how a finished sweep's folder is tampered with before ``--resume``
RESUME_FILES = ("results.csv", "manifest.json", "sweep.toml", "config.toml", "summary.csv")


@st.composite
def tamper(draw: Any) -> tuple[str, Any]:
    """One tampering of a sweep folder: ``(description, f(folder, sweep_file))``."""
    import os
    import random

    name = draw(st.sampled_from(RESUME_FILES))
    op = draw(
        st.sampled_from(
            ["truncate", "flip", "cell", "cell", "drop-line", "dup-line", "swap-lines", "mutate",
             "delete", "fifo", "folder", "device-link", "empty", "spec"]
        )
    )  # fmt: skip
    rng = random.Random(draw(st.integers(0, 2**32)))
    value = draw(hostile_values())
    cell = value if isinstance(value, str) else toml_value(value)
    mutation = draw(mutated_text("x = 1\n")) if op == "mutate" else b""

    def f(folder: Path, spec: Path) -> None:
        p = folder / name
        data = p.read_bytes() if p.is_file() else b""
        lines = data.split(b"\n")
        if op == "truncate":
            p.write_bytes(data[: rng.randrange(len(data) + 1)])
        elif op == "flip" and data:
            i = rng.randrange(len(data))
            p.write_bytes(data[:i] + bytes([rng.randrange(256)]) + data[i + 1 :])
        elif op == "cell" and len(lines) > 1:
            i = rng.randrange(len(lines))
            cells = lines[i].split(b",")
            cells[rng.randrange(len(cells))] = cell.encode("utf-8", "surrogatepass")
            lines[i] = b",".join(cells)
            p.write_bytes(b"\n".join(lines))
        elif op == "drop-line" and len(lines) > 1:
            del lines[rng.randrange(len(lines))]
            p.write_bytes(b"\n".join(lines))
        elif op == "dup-line" and len(lines) > 1:
            i = rng.randrange(len(lines))
            lines.insert(i, lines[i])
            p.write_bytes(b"\n".join(lines))
        elif op == "swap-lines" and len(lines) > 2:
            i, j = rng.sample(range(len(lines)), 2)
            lines[i], lines[j] = lines[j], lines[i]
            p.write_bytes(b"\n".join(lines))
        elif op == "mutate":
            # a random edit of the text: a mutated line appended, or the text cut and re-encoded
            p.write_bytes(data[: rng.randrange(len(data) + 1)] + mutation)
        elif op == "delete" and p.exists():
            p.unlink()
        elif op == "fifo":
            p.unlink(missing_ok=True)
            os.mkfifo(p)
        elif op == "folder":
            p.unlink(missing_ok=True)
            p.mkdir()
        elif op == "device-link":
            p.unlink(missing_ok=True)
            p.symlink_to("/dev/zero")
        elif op == "empty":
            p.write_bytes(b"")
        elif op == "spec":
            # the sweep file itself changed since the first run
            text = spec.read_text()
            spec.write_text(
                text.replace('"replications" = 2', '"replications" = 3')
                if rng.random() < 0.5
                else text.replace("[0.5, 1.0]", "[0.5, 2.0]")
            )

    return f"{op} {name}", f


def short_path(p: Path) -> str:
    """How an error may name ``p`` when its full text is too long: its last 40 characters."""
    return str(p)[-40:]
