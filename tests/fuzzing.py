"""The bad-input campaign as code: Hypothesis generators of hostile inputs and the CLI contract.

Four kinds of input, each a mutation of something valid:

* **scenario files** (mutations of the built-in scenarios) through ``cprsim simulate FILE -n 2``;
* **``--set`` values** (any scenario key, or an unknown one, set to a hostile value) through
  ``cprsim simulate toy -n 2 --set KEY=VALUE``;
* **sweep files** (mutations of a two-point sweep of ``toy``) through ``cprsim sweep FILE``;
* **failure logs** (mutations of small logs in each reader's format) through ``cprsim fit``.

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
