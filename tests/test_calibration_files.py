"""Corrupted calibration files (issue 27): every key the code reads is checked when the file is
loaded (``cprsim.calibrate.schema``). The shipped matched calibration is corrupted one key at a
time (bad numbers, signs, types, shapes, missing keys); each file is either refused with a one-line
``InputError`` naming the file and the key, or, where the value is legitimate, loaded and planned
with. Never another exception, never a warning; through the CLI, never an internal error."""

from __future__ import annotations

import copy
import math
import tomllib
import warnings
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from cprsim.calibrate.calibration import (
    default_path,
    load_calibration,
    matched_path,
    to_toml,
)
from cprsim.errors import InputError
from cprsim.planner.accuracy import ladder_scale, plan_accuracy

BASE_PATH = matched_path("cpr-production")
assert BASE_PATH is not None
BASE: dict[str, Any] = tomllib.loads(BASE_PATH.read_text())
SHIPPED_PATH = default_path()
assert SHIPPED_PATH is not None
SHIPPED: dict[str, Any] = tomllib.loads(SHIPPED_PATH.read_text())
GONE = object()  #: a value that deletes the key
STRATEGIES = ("partial", "mfu", "ssu")

Mutation = Callable[[dict[str, Any]], Any]  # changes the document, or returns a file's text


def _split(path: str) -> list[str]:
    return path.split(".")


def _parent(doc: dict[str, Any], path: str) -> tuple[Any, str]:
    *head, last = _split(path)
    t = doc
    for k in head:
        t = t[k]
    return t, last


def put(path: str, value: Any) -> Mutation:
    """Set (or, with GONE, delete) the key ``path``."""

    def f(doc: dict[str, Any]) -> None:
        t, last = _parent(doc, path)
        if value is GONE:
            del t[last]
        else:
            t[last] = copy.deepcopy(value)

    return f


def item(path: str, i: int, value: Any) -> Mutation:
    """Set item ``i`` of the array ``path``."""

    def f(doc: dict[str, Any]) -> None:
        t, last = _parent(doc, path)
        t[last][i] = value

    return f


def ragged(path: str) -> Mutation:
    """Drop the last item of the array ``path`` (its strategy's arrays no longer line up)."""

    def f(doc: dict[str, Any]) -> None:
        t, last = _parent(doc, path)
        t[last] = t[last][:-1]

    return f


def chain(*fs: Mutation) -> Mutation:
    def f(doc: dict[str, Any]) -> None:
        for g in fs:
            g(doc)

    return f


def text(s: str | bytes) -> Mutation:
    """The file is this text (not a document)."""
    return lambda doc: s


def with_scale(f: Mutation) -> Mutation:
    """``f`` on the document with the shipped file's scale ladder."""
    return chain(put("scale", SHIPPED["scale"]), f)


def _admissible_negative_age_slope(doc: dict[str, Any]) -> None:
    """mfu's age coefficient negative, yet the loss stays positive and grows with PLS over the
    measured ages: a legitimate model."""
    c = doc["model"]["auc"]["coef"]["mfu"]
    amax = doc["model"]["range"]["mfu"]["age"][1]
    c["b"] = [c["b"][0], -c["b"][0] / (2 * amax)]


def _no_residual_dof(doc: dict[str, Any]) -> None:
    """mfu fitted on as many runs as coefficients (as least squares writes it: dof 0, cov inf)."""
    for m in ("auc", "logloss"):
        a = doc["model"][m]["coef"]["mfu"]
        a.update(n=2, dof=0, cov=[[math.inf, math.inf], [math.inf, math.inf]])
        a.pop("own_terms", None)  # both coefficients free
        del a["resid_var"]


def _fit_only(doc: dict[str, Any]) -> None:
    del doc["model"], doc["points"]


def _points_only(doc: dict[str, Any]) -> None:
    del doc["model"]


def _one_run_each(doc: dict[str, Any]) -> None:
    for p in doc["points"].values():
        for k in p:
            p[k] = p[k][:1]


def _negated_points(doc: dict[str, Any]) -> None:
    for p in doc["points"].values():
        p["d_auc"] = [-x for x in p["d_auc"]]


#: (case, mutation, the key the refusal names; None: a legitimate file that loads)
CASES: list[tuple[str, Mutation, str | None]] = []


def refuse(path: str, values: list[Any], key: str | None = None, wrap: Any = None) -> None:
    for v in values:
        f = put(path, v)
        CASES.append((f"{path}={_label(v)}", wrap(f) if wrap else f, key or path))


def accept(path: str, values: list[Any], wrap: Any = None) -> None:
    for v in values:
        f = put(path, v)
        CASES.append((f"{path}={_label(v)} (legitimate)", wrap(f) if wrap else f, None))


def _label(v: Any) -> str:
    return "missing" if v is GONE else repr(v)[:40]


NOT_NUMBERS = ["0.1", True, [0.1], {"x": 1.0}, 10**400]  # the last: no float holds it
NONFINITE = [math.nan, math.inf, -math.inf]

# -- the file as a whole ------------------------------------------------------------------------
CASES += [
    ("empty file", text(""), "provenance"),
    ("only a comment", text("# nothing\n"), "provenance"),
    ("not TOML", text("[[[\n"), ""),
    ("one line of text", text("hello\n"), ""),
    ("not UTF-8", text(b"\xff\xfe[provenance]\n"), ""),
    ("a list at the top", text("provenance = [1, 2]\n"), "provenance"),
]
refuse("provenance", [GONE, 3, "x", [1]])
refuse("fit", [GONE, {}, 3, "x"])
refuse("fit.partial", [3, "x", [1.0]])
refuse("model", [3, "x", [1]])
refuse("model.auc", [3, "slope"])
refuse("model.range", [3, [0.0, 1.0]])
refuse("points", [3, "x"])
refuse("points.mfu", [[0.1, 0.2], 3])
accept("extra", [{"anything": [1, "x"]}])  # a table cprsim does not read
accept("provenance.comment", [3])

# -- [provenance] -------------------------------------------------------------------------------
refuse("provenance.calibrated", ["false", 0, 1.0])
refuse("provenance.seeds", ["0-15", [0.5], [-1], [0, "1"], 3])
refuse("provenance.preset", [3, ["matched"]])
refuse("provenance.model", [3])
refuse("provenance.embedding_rows", [-1, 1.5, "x", math.inf])
refuse("provenance.embedding_servers", [0, 2.5])
refuse("provenance.matched", [3, "cpr-production"])
refuse("provenance.matched.scenario_digest", [3])
refuse("provenance.matched.intervals_h", [[-1.0], [0.0], ["x"], [math.nan], 1.0])
refuse("provenance.matched.full_interval_h", [0.0, math.inf, "25"])
refuse("provenance.matched.strategy_params", [3])
refuse("provenance.matched.strategy_params.mfu", [0.1])
refuse("provenance.matched.strategy_params.mfu.top_fraction", [0.0, 1.5, "x", math.nan])
refuse("provenance.matched.strategy_params.ssu.sample_rate", [-0.01, math.inf])
accept("provenance.calibrated", [False, GONE])
accept("provenance.seeds", [GONE, []])

# -- [fit.<strategy>] ---------------------------------------------------------------------------
refuse("fit.partial.auc_slope", [*NONFINITE, *NOT_NUMBERS, GONE])
refuse("fit.mfu.logloss_slope_hi", [math.nan, 0.0, -1.0, "x", GONE])
refuse("fit.partial.auc_slope_lo", [math.nan, math.inf, 1.0, "x"])
refuse("fit.ssu.auc_r2", [2.0, math.inf, "x"])
refuse("fit.partial.n_points", [0, -1, 1.5, math.inf, "96"])
refuse("fit.partial.mean_pls", [-0.1, 1.5, math.nan])
# [model] exists: the [fit] slopes are a summary the planner does not read; a noisy strategy's
# slope may be negative, and a one-run fit's CI infinite
CASES.append(("fit.partial.auc_slope=-0.001 (legitimate)",
              chain(put("fit.partial.auc_slope", -0.001), put("fit.partial.auc_slope_lo", -0.003)),
              None))  # fmt: skip
refuse("fit.partial.auc_slope", [0.0], "fit.partial.auc_slope_lo")  # its CI's low end above it
accept("fit.mfu.logloss_slope_hi", [math.inf])
accept("fit.partial.auc_slope_lo", [-math.inf, GONE])
accept("fit.ssu.auc_r2", [math.nan, -25.0])

# -- [points.<strategy>] ------------------------------------------------------------------------
for key in ("pls", "position", "age", "d_auc", "d_logloss", "seed", "budget"):
    # a shorter pls: the first array after it is named, against pls
    named = "points.mfu.budget" if key == "pls" else f"points.mfu.{key}"
    CASES.append((f"points.mfu.{key} ragged", ragged(f"points.mfu.{key}"), named))
for key in ("pls", "d_auc", "d_logloss"):
    refuse(f"points.ssu.{key}", [GONE])
accept("points.ssu.seed", [GONE])  # a file written before seeds: one seed, as Data reads it
for key in ("pls", "position", "age", "d_auc", "d_logloss", "budget"):
    for v in (math.nan, math.inf, "0.1", True):
        CASES.append((f"points.partial.{key}[3]={v!r}", item(f"points.partial.{key}", 3, v),
                      f"points.partial.{key}[3]"))  # fmt: skip
for key in ("pls", "position", "age"):
    for v in (-0.01, 1.5):
        CASES.append((f"points.mfu.{key}[0]={v!r}", item(f"points.mfu.{key}", 0, v),
                      f"points.mfu.{key}[0]"))  # fmt: skip
for v in (1.5, -1, "0", math.inf):
    CASES.append((f"points.ssu.seed[2]={v!r}", item("points.ssu.seed", 2, v), "points.ssu.seed[2]"))
for v in (0.0, -1.0):
    CASES.append((f"points.ssu.budget[2]={v!r}", item("points.ssu.budget", 2, v),
                  "points.ssu.budget[2]"))  # fmt: skip
refuse("points.mfu.pls", [[], "x", 0.1])
refuse("points.mfu.extra", [3, "x", [1.0]])  # the stability check slices every array by run
accept("points.mfu.age", [GONE])  # written before the timing covariates
accept("points.mfu.budget", [GONE])
CASES.append(("points.mfu.d_auc[0]=-0.01 (legitimate)", item("points.mfu.d_auc", 0, -0.01), None))
CASES.append(
    (
        "points.mfu.extra array (legitimate)",
        put("points.mfu.extra", [1] * len(BASE["points"]["mfu"]["pls"])),
        None,
    )
)

# -- [model.<metric>] ---------------------------------------------------------------------------
refuse("model.auc.chosen", ["cubic", 3, GONE])
refuse("model.auc.chosen", ["slope"], "model.auc.coef.partial.b")  # b has two coefficients
refuse("model.auc.coef", [{}, 3, GONE])
refuse("model.auc.coef.partial", [GONE], "model.auc.coef")  # neither '*' nor 'partial'
refuse("model.auc.coef.mfu", [3, "x"])
refuse("model.auc.coef.mfu.b", [[-0.01, 0.01], [0.0, 0.0], [0.01], [0.01, 0.01, 0.01], "x", []])
refuse(
    "model.auc.coef.mfu.b", [[math.inf, 0.01], [math.nan, 0.01], ["0.01", 0.01], [10**400, 0], GONE]
)
refuse("model.logloss.coef.ssu.b", [[0.0], [-0.002], [math.inf], [[0.002]]])
refuse(
    "model.auc.coef.mfu.cov",
    [
        [[math.nan, 0.0], [0.0, 1e-6]],
        [[math.inf, 0.0], [0.0, 1e-6]],
        [[1e-6, 1e-7], [0.0, 1e-6]],  # not symmetric
        [[-1e-6, 0.0], [0.0, 1e-6]],  # a negative variance
        [[1e-6, 2e-6], [2e-6, 1e-6]],  # not positive semi-definite
        [[1e-6], [0.0, 1e-6]],  # ragged
        [[1e-6]],
        "x",
        GONE,
    ],
)
refuse("model.auc.coef.mfu.dof", [0, -1, 94, 95.5, 95.0, math.inf, math.nan, "95", GONE])
# mfu's own fit frees PLS alone (own_terms = []): its dof is n - 1; its terms are the model's
refuse("model.auc.coef.mfu.own_terms", [["bogus"], ["pls"], ["age", "age"], "age", [1]])
refuse("model.auc.coef.mfu.own_terms", [["age"]], "model.auc.coef.mfu.dof")  # then dof is n - 2
refuse("model.auc.pooling_weight", [1.5, -0.1, "x", 1.0])  # 1 only when pooled (coef '*')
refuse("model.auc.pooling_weights.age", [1.5, -0.1, "x"])
refuse("model.auc.coef.mfu.n", [math.inf, 0, -1, 96.0, "96", GONE])
refuse("model.auc.coef.mfu.dof", [10**400])  # whole, but not n - 2
refuse("model.logloss.coef.partial.dof", [0])
refuse("model.auc.coef.mfu.rss", [-1.0, math.nan, math.inf, "x", GONE])
refuse("model.auc.coef.mfu.resid_var", [[-1e-7, 0.0], [0.0, 0.0], [math.nan, 1.0], [1e-7], "x"])
refuse("model.auc.pooling_f_test_p.age", [1.5, -0.1, "x"])
refuse("model.auc.cv_mse.age", [-1.0, math.nan, "x"])
refuse("model.auc.pooled", ["yes", 1])
refuse("model.auc.runs", [0, 1.5])
refuse("model.auc.terms", ["pls", [1]])
refuse("model.auc.inadmissible.curvature", [3])
refuse("model.auc.stability", [3])
refuse("model.auc.stability.stable", ["no"])
refuse("model.auc.stability.leave_one_seed_out", [3])
_SEED_REFITS = BASE["model"]["auc"]["stability"]["leave_one_seed_out"]["refits"]
refuse("model.auc.stability.leave_one_seed_out.kept", [_SEED_REFITS + 1, -1, "x", GONE])
refuse("model.auc.stability.leave_one_seed_out.refits", [-1, 1.5, GONE])
refuse("model.auc.stability.leave_one_seed_out.max_pls_bound_ratio", [0.5, math.nan, "x", GONE])
refuse("model.auc.stability.leave_one_run_out.other_choices", [3])
accept("model.auc.coef.mfu.resid_var", [GONE])  # written before the single-run scatter
accept("model.auc.coef.mfu.rss", [0.0])
accept("model.auc.pooling_f_test_p.age", [math.nan])
accept("model.auc.cv_mse.age", [math.inf])
accept("model.auc.stability.leave_one_seed_out.max_pls_bound_ratio", [math.inf])
accept("model.auc.stability", [GONE])
accept("model.logloss", [GONE])  # fitted from the points when planned
CASES.append(("negative age coefficient, positive loss (legitimate)",
              _admissible_negative_age_slope, None))  # fmt: skip
CASES.append(("no residual degrees of freedom (legitimate)", _no_residual_dof, None))
CASES.append(("huge coefficient (legitimate)", put("model.logloss.coef.mfu.b", [1e300, 0.0]), None))

# -- [model.range.<strategy>] -------------------------------------------------------------------
refuse(
    "model.range.mfu.pls",
    [[0.5, 0.1], [0.0, math.inf], [math.nan, 0.1], [0.1], "x", [-0.1, 0.5], [0.1, 1.5], GONE],
)
refuse("model.range.ssu.age", [GONE, [0.0, 2.0], [0.3, 0.1]])
refuse("model.range.partial.position", [GONE, [0.0, "1"]])
refuse("model.range.mfu", [3, [0.0, 0.1]])

# -- without [model]: the planner reads the points or the [fit] slopes ---------------------------
CASES.append(("no [model] (legitimate: fitted from the points)", _points_only, None))
CASES.append(("no [model], no [points] (legitimate: the [fit] slopes)", _fit_only, None))
CASES.append(("no [model], points losing less with PLS",
              chain(_points_only, _negated_points), "points"))  # fmt: skip


def _slopes(st: str, m: str, slope: float, hi: float) -> Mutation:
    """``[fit.<st>]``'s ``m`` slope and its CI (``lo`` below both)."""
    f = f"fit.{st}.{m}_slope"
    return chain(put(f, slope), put(f + "_lo", min(slope, hi) - 0.01), put(f + "_hi", hi))


for st, m, slope, hi in (("partial", "auc", 0.0, 0.001), ("mfu", "auc", -0.001, 0.001),
                         ("ssu", "logloss", -0.002, -0.001)):  # fmt: skip
    CASES.append((f"no [model] nor [points], fit.{st}.{m}_slope={slope}, hi={hi}",
                  chain(_fit_only, _slopes(st, m, slope, hi)), f"fit.{st}.{m}_slope"))  # fmt: skip
CASES.append(("no [model], one run per strategy, fit.partial.auc_slope=-0.001",
              chain(_points_only, _one_run_each, _slopes("partial", "auc", -0.001, 0.001)),
              "fit.partial.auc_slope"))  # fmt: skip
CASES.append(("no [model], points, fit.partial.auc_slope=-0.001 (legitimate: not read)",
              chain(_points_only, _slopes("partial", "auc", -0.001, 0.001)), None))  # fmt: skip

# -- [scale] (the shipped ladder on this file) ---------------------------------------------------
refuse("scale", [3])
refuse("scale", [{"note": "x"}], "scale.reference")
refuse("scale.rows-x10.auc_ratio", [0.0, -1.0, math.inf, math.nan, "x", GONE], wrap=with_scale)
# a CI end on the wrong side of its ratio: computed from the shipped file's own ratios
_X10, _ML = SHIPPED["scale"]["rows-x10"], SHIPPED["scale"]["movielens-100k"]
refuse("scale.rows-x10.auc_ratio_lo", [-0.1, 1.01 * _X10["auc_ratio"], math.nan], wrap=with_scale)
refuse(
    "scale.movielens-100k.logloss_ratio_hi",
    [0.99 * _ML["logloss_ratio"], math.nan, "x"],
    wrap=with_scale,
)
refuse("scale.rows-x100.embedding_rows", [0, 1.5, GONE, "x"], wrap=with_scale)
refuse("scale.half-length.train_samples", [0, 1e6], wrap=with_scale)
refuse("scale.movielens-100k.real_data", ["yes", 1], wrap=with_scale)
refuse("scale.reference", [GONE, 3], wrap=with_scale)
refuse("scale.note", [3], wrap=with_scale)
accept("scale.rows-x10.auc_ratio_lo", [0.0], wrap=with_scale)
accept("scale.rows-x10.auc_ratio_hi", [math.inf], wrap=with_scale)

# -- [costs] ------------------------------------------------------------------------------------
refuse("costs", [3, "x"])
refuse("costs.shard_save_s", [-1.0, math.inf, math.nan])
refuse("costs.shard_bytes", [-1])
accept("costs.shard_save_s", [0.0])
accept("costs.method", ["torch.save"])


def _write(tmp_path: Path, i: int, mutate: Mutation) -> Path:
    doc = copy.deepcopy(BASE)
    doc.setdefault("costs", {"shards": 18, "shard_bytes": 1000, "shard_save_s": 0.01})
    out = mutate(doc)
    path = tmp_path / f"case{i}.toml"
    if isinstance(out, bytes):
        path.write_bytes(out)
    else:
        path.write_text(out if isinstance(out, str) else to_toml(doc))
    return path


def _plan_with(cal: Any) -> None:
    """What the planner asks of a calibration, at PLS 0 too (a run that lost nothing)."""
    runs = [
        SimpleNamespace(pls=p, pls_position=pos, pls_age=a, replication=i)
        for i, (p, pos, a) in enumerate([(0.0, 0.0, 0.0), (0.01, 0.5, 0.0), (0.05, 0.9, 0.02)])
    ]
    for m in ("auc", "logloss"):
        acc = plan_accuracy(cal, m)
        for st in (*STRATEGIES, "lookahead"):
            for q in (0.9, None):
                assert acc.pls_bound(0.001, st, q) >= 0
            assert not np.any(np.isnan(acc.run_draws(runs, st, 7)))
            acc.run_losses(runs, st)
            acc.mean_loss(runs, st)
            assert acc.loss(0.0, st)[0] == 0.0
            acc.covariate_checks(st)
        ladder_scale(cal.raw, m, 10**6)
        ladder_scale(cal.raw, m, None)
        assert cal.accuracy_loss(0.1, m) >= 0 and cal.max_pls(0.001, m) >= 0


def test_there_are_enough_cases_of_both_kinds():
    refused = sum(key is not None for _, _, key in CASES)
    assert refused >= 100 and len(CASES) - refused >= 20, (refused, len(CASES))
    assert len({name for name, _, _ in CASES}) == len(CASES)  # each case once


@pytest.mark.parametrize(("name", "mutate", "key"), CASES, ids=[c[0] for c in CASES])
def test_a_corrupted_file_is_refused_naming_the_key_or_loads(tmp_path, name, mutate, key):
    path = _write(tmp_path, 0, mutate)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if key is None:
            _plan_with(load_calibration(path))
            return
        with pytest.raises(InputError) as e:
            load_calibration(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{path}:"), msg
    assert not key or f": {key}:" in msg or f": {key}[" in msg, msg  # the key, as a key


@pytest.mark.parametrize(
    "case",
    [
        "model.auc.coef.mfu.n=inf",
        "model.auc.coef.mfu.dof=0",
        "points.mfu.age ragged",
        "model.auc.coef.mfu.b=[-0.01, 0.01]",
        "model.range.mfu.pls=[0.5, 0.1]",
        "scale.rows-x10.auc_ratio=0.0",
        "fit.partial.auc_slope=inf",
        "empty file",
        "model.range=3",
    ],
)
def test_the_plan_command_says_it_in_one_line(tmp_path, cli, one_line_error, case):
    mutate, key = next((f, k) for name, f, k in CASES if name == case)
    path = _write(tmp_path, 0, mutate)
    r = cli(
        "plan", "toy", "--max-accuracy-loss", "0.001", "--calibration", path,
        "-n", "2", "--search-replications", "2",
    )  # fmt: skip
    line = one_line_error(r)
    assert str(path) in line and key in line, line


@pytest.mark.parametrize(
    "case",
    [
        "points.mfu.age ragged",
        "points.partial.budget[3]=nan",
        "fit.partial.auc_slope='0.1'",
        "model.auc.coef.mfu.n=inf",
    ],
)
def test_the_plot_command_says_it_in_one_line(tmp_path, cli, one_line_error, case):
    """``cprsim plot calibration FILE`` reads the points and fits: checked the same way."""
    mutate, key = next((f, k) for name, f, k in CASES if name == case)
    path = _write(tmp_path, 0, mutate)
    line = one_line_error(cli("plot", "calibration", path, "--out", tmp_path / "c.png"))
    assert str(path) in line and key in line, line


@pytest.mark.slow
def test_a_legitimate_corruption_reaches_the_planner_not_an_internal_error(tmp_path, cli):
    for i, case in enumerate(
        ("no residual degrees of freedom (legitimate)", "model.auc.stability=missing (legitimate)")
    ):
        mutate = next(f for name, f, _ in CASES if name == case)
        path = _write(tmp_path, i, mutate)
        r = cli(
            "plan", "toy", "--max-accuracy-loss", "0.001", "--calibration", path,
            "-n", "2", "--search-replications", "2",
        )  # fmt: skip
        assert r.exit_code in (1, 2), r.output
        lines = [ln for ln in r.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and "internal error" not in r.output, r.output
        # and the calibration prints and draws
        r = cli("calibrate", "--show", path)
        assert r.exit_code == 0, r.output
        r = cli("plot", "calibration", path, "--out", tmp_path / f"c{i}.png")
        assert r.exit_code == 0, r.output


def test_show_prints_a_minimal_file(tmp_path, cli):
    """A file with only what the planner needs: ``calibrate --show`` does not ask for more."""
    path = tmp_path / "min.toml"
    path.write_text(
        "[provenance]\ncalibrated = true\n[fit.partial]\nauc_slope = 0.01\nauc_slope_hi = 0.02\n"
        'logloss_slope = 0.01\nlogloss_slope_hi = 0.02\n[model.auc]\nchosen = "slope"\n'
        '[model.auc.coef."*"]\nb = [0.01]\ncov = [[1e-8]]\ndof = 3\nrss = 1e-8\nn = 4\n'
    )
    r = cli("calibrate", "--show", path)
    assert r.exit_code == 0, r.output
    assert "planner's auc model: slope (pooled over the strategies" in r.output
    # and draws, with a points table of a legacy file (no budget, no position or age)
    with path.open("a") as f:
        f.write("[points.partial]\npls = [0.1, 0.2]\nseed = [0, 1]\nd_auc = [0.001, 0.002]\n")
        f.write("d_logloss = [0.001, 0.002]\n")
    r = cli("plot", "calibration", path, "--out", tmp_path / "min.png")
    assert r.exit_code == 0, r.output


def test_show_checks_the_scatter_model_at_small_pls(cli):
    """`calibrate --show` says, per strategy, how the runs with the smallest PLS scatter against
    the single-run model (``scatter_check``), and flags it where they scatter more (5% test)."""
    from cprsim.calibrate.accuracy import CANDIDATES, Coef, Data, scatter_check

    r = cli("calibrate", "--show", "shipped:cpr-production")
    assert r.exit_code == 0, r.output
    doc = load_calibration(BASE_PATH).raw
    for metric in ("auc", "logloss"):
        m = doc["model"][metric]
        for st, c in m["coef"].items():
            d = Data.from_points(doc["points"], metric)
            chk = scatter_check(
                Coef.from_dict(c, st), CANDIDATES[m["chosen"]], d.take(d.strategy == st)
            )
            assert chk is not None
            line = next(x for x in r.output.splitlines() if x.startswith(f"  {metric} {st}: "))
            assert f"scatter {chk['ratio']:.3g}x that" in line
            assert line.endswith("UNDERESTIMATED at small PLS") == (
                chk["ratio"] > 1 and chk["p"] < 0.05
            )


def test_show_checks_the_per_run_promise_on_held_out_seeds(cli):
    """`calibrate --show` gives, per metric, the share of the calibration's runs within their
    predictive q-quantile when their seed is left out of the fit (``held_out_coverage``), as the
    planner makes it and with the Student-t scatter alone, over all runs and over the smallest
    quarter of PLS, flagged OPTIMISTIC where a one-sided binomial test rejects q at 5%: the lines
    carry the function's counts."""
    from cprsim.calibrate.accuracy import Data, held_out_coverage

    r = cli("calibrate", "--show", "shipped:cpr-production")
    assert r.exit_code == 0, r.output
    doc = load_calibration(BASE_PATH).raw
    for metric in ("auc", "logloss"):
        d = Data.from_points(doc["points"], metric)
        for residuals, how in ((True, "as planned"), (False, "Student-t scatter")):
            cov = held_out_coverage(d, doc["model"][metric]["chosen"], residuals=residuals)
            for key, what in (("all", "all runs with PLS > 0"), ("small", "the smallest quarter")):
                head = f"  {metric} per-run promise on held-out seeds ({how}), {what}"
                line = next(x for x in r.output.splitlines() if x.startswith(head))
                for row in cov[key]:
                    cell = f"q {row['q']:g}: {row['share']:.3f} ({row['within']:.0f}/{row['n']:.0f}"
                    assert cell in line
                    flagged = f"{cell}, P = {row['p']:.2g}: OPTIMISTIC)" in line
                    assert flagged == (row["p"] < 0.05), (line, row)


def test_the_shipped_files_load_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for path in (SHIPPED_PATH, BASE_PATH):
            cal = load_calibration(path)
            assert cal.calibrated and set(cal.models) == {"auc", "logloss"}
            _plan_with(cal)


@pytest.mark.slow
def test_a_fresh_calibration_document_loads(tmp_path):
    """A calibration the library's own writer makes (``calibration_doc``, as ``cprsim calibrate``
    and the user-model API do), on a few synthetic runs: loaded, planned with, no warning."""
    from cprsim.calibrate.pipeline import calibration_doc
    from cprsim.calibrate.runner import Point

    rng = np.random.default_rng(3)
    pts = []
    for seed in range(3):
        for x in (0.01, 0.05, 0.1, 0.2):
            for st, slope in (("partial", 0.01), ("mfu", 0.006)):
                pos, age = rng.uniform(0.1, 0.9), rng.uniform(0.0, 0.1)
                y = slope * x * (1 + rng.normal(0, 0.2))
                pts.append(Point(st, x, seed, x, y, 0.7 * y, 0.79, 0.38, pos, age))
    doc = calibration_doc(pts, {"calibrated": True, "preset": "test", "seeds": [0, 1, 2]})
    path = tmp_path / "calibration.toml"
    path.write_text(to_toml(doc))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _plan_with(load_calibration(path))


@pytest.mark.slow
@pytest.mark.dlrm
def test_a_freshly_trained_tiny_calibration_loads(tmp_path):
    """A real (tiny: 6 runs, about 10 s) ``cprsim calibrate`` run on the DLRM: its file loads
    and plans without a warning (two runs per strategy: the smallest fits)."""
    import dataclasses
    import os

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    pytest.importorskip("torch")
    from cprsim.calibrate import pipeline as P
    from cprsim.calibrate import runner as R

    tiny = dataclasses.replace(
        R.PRESETS["quick"],
        name="tiny",
        train_samples=12_000,
        test_samples=4_000,
        batch=256,
        seeds=(0, 1),
        budgets=(0.5,),
        strategies=("partial", "mfu"),
    )
    P.calibrate(tiny, tmp_path, measure_costs=False, jobs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _plan_with(load_calibration(tmp_path / "calibration.toml"))


def test_show_without_the_optional_f_test_prints_no_nan(tmp_path, cli):
    """``pooling_f_test_p`` is optional: a file without it shows no "F-test p = nan" (the fuzz)."""
    doc = copy.deepcopy(BASE)
    for metric in ("auc", "logloss"):
        doc["model"][metric].pop("pooling_f_test_p", None)
    path = tmp_path / "no-f-test.toml"
    path.write_text(to_toml(doc))
    r = cli("calibrate", "--show", path)
    assert r.exit_code == 0, r.output
    assert "planner's auc model" in r.output and "nan" not in r.output.lower(), r.output
