"""Heavy-tailed fits are flagged, the model files get a fit a scenario can simulate, and the
counts a filtered log reports are the selection's.

The tail checks (``cprsim.failures.fit.TailCheck``) are tested against closed forms and
numerical integrals: ``E[X; X > t] / E[X]`` of each family, the log-logistic's missing moments
(no mean for shape <= 1, no variance for shape <= 2), and synthetic logs whose tail is known
(a lognormal with sigma 3: its mean is e^4.5 = 90 times its median; a log-logistic of shape 1.5:
a mean but no variance; one of shape 0.7: no mean). The public logs (skipped without ../shared):
the LANL ranking whose best fit's mean is many times the exponential's, the shipped LANL system
20 model, and Titan's filtered counts checked against the file read independently.
"""

from __future__ import annotations

import csv
import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats

from cprsim.failures.distributions import Distribution
from cprsim.failures.fit import (
    EXTRAPOLATED_SHARE,
    HEAVY_MEAN_RATIO,
    FitReport,
    fit_all,
    tail_check,
)
from cprsim.failures.modelfile import fit_failure_log, fitted_model_toml, log_fit_dict
from cprsim.failures.traces import read_trace

FITTED = Path(__file__).resolve().parents[1] / "traces" / "fitted"


# -- the distributions' tail quantities ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("family", "shape"),
    [
        ("exponential", 1.0),
        ("weibull", 0.4),
        ("weibull", 2.5),
        ("gamma", 0.3),
        ("gamma", 4.0),
        ("lognormal", 1.5),
        ("loglogistic", 1.5),
        ("loglogistic", 3.5),
    ],
)
def test_the_share_of_the_mean_beyond_t_is_the_partial_expectation(family, shape):
    d = Distribution(family, 100.0, shape)
    sp = d.scipy
    for t in (3.0, 100.0, 2000.0):
        num, _ = integrate.quad(lambda x: x * sp.pdf(x), t, np.inf, limit=400)
        assert d.mean_share_beyond(t) == pytest.approx(num / d.mean(), rel=1e-6, abs=1e-9)
    assert d.mean_share_beyond(0.0) == 1.0
    assert d.median() == pytest.approx(float(sp.median()), rel=1e-9)


def test_closed_forms_of_the_tail_quantities():
    x = 2.5  # t / scale
    assert Distribution("exponential", 10.0).mean_share_beyond(25.0) == pytest.approx(
        math.exp(-x) * (1 + x)
    )
    # lognormal: the length-biased lifetime is lognormal(mu + sigma^2, sigma)
    s = 2.0
    assert Distribution("lognormal", 10.0, s).mean_share_beyond(25.0) == pytest.approx(
        stats.norm.cdf(s - math.log(x) / s)
    )
    assert Distribution("constant", 10.0).mean_share_beyond(5.0) == 1.0
    assert Distribution("constant", 10.0).mean_share_beyond(15.0) == 0.0
    # the log-logistic's moments: E[X^r] exists for r < shape only
    assert math.isinf(Distribution("loglogistic", 10.0, 0.9).mean())
    assert Distribution("loglogistic", 10.0, 0.9).mean_share_beyond(1e9) == 1.0
    assert math.isinf(Distribution("loglogistic", 10.0, 1.5).variance())
    assert math.isfinite(Distribution("loglogistic", 10.0, 1.5).mean())
    for fam, k in [("weibull", 0.5), ("gamma", 3.0), ("lognormal", 1.2), ("loglogistic", 3.0)]:
        d = Distribution(fam, 10.0, k)
        assert d.variance() == pytest.approx(float(d.scipy.var()), rel=1e-9)
    assert Distribution("constant", 10.0).variance() == 0.0
    # no overflow far in the tail
    assert Distribution("weibull", 1.0, 3.0).mean_share_beyond(1e300) == 0.0
    assert Distribution("loglogistic", 1.0, 3.0).mean_share_beyond(1e300) == 0.0


# -- synthetic logs with a known tail --------------------------------------------------------------
def _censored(life: np.ndarray, window: float) -> tuple[np.ndarray, np.ndarray]:
    return np.minimum(life, window), life <= window


def test_a_lognormal_with_sigma_3_is_flagged_heavy():
    rng = np.random.default_rng(1)
    t, obs = _censored(rng.lognormal(math.log(100.0), 3.0, 2000), 1e4)
    rep = fit_all(t, obs)
    best = rep.best
    assert best.family == "lognormal" and best.shape_ == pytest.approx(3.0, abs=0.15)
    tc = rep.tail(best)
    # mean / median = e^(sigma^2 / 2)
    assert tc.mean_over_median == pytest.approx(math.exp(best.shape_**2 / 2), rel=1e-9)
    assert rep.exponential_mean == pytest.approx(t.sum() / obs.sum())
    assert rep.t_max == t.max() == 1e4
    assert tc.mean_over_exponential == pytest.approx(best.mean_ / rep.exponential_mean)
    assert tc.mean_over_exponential >= HEAVY_MEAN_RATIO and tc.heavy
    assert tc.mean_finite and tc.variance_finite
    assert tc.cv == pytest.approx(math.sqrt(math.expm1(best.shape_**2)), rel=1e-9)
    # the share of the mean beyond the data, against a numerical integral of the fitted model
    # (in u = ln x: E[X; X > t] = integral of e^u phi((u - mu) / sigma) / sigma from ln t)
    mu, sg = math.log(best.scale_), best.shape_
    num, _ = integrate.quad(
        lambda u: math.exp(u) * stats.norm.pdf((u - mu) / sg) / sg,
        math.log(1e4),
        mu + sg * sg + 15 * sg,
        limit=400,
    )
    assert tc.mean_beyond_data == pytest.approx(num / best.mean_, rel=1e-6)
    assert tc.mean_beyond_data >= EXTRAPOLATED_SHARE and tc.extrapolated
    assert any("x the exponential's" in n for n in tc.notes)
    assert any("longer than any in the data" in n for n in tc.notes)
    # the exponential fit of the same data is neither
    exp = next(f for f in rep.fits if f.family == "exponential")
    assert not rep.tail(exp).heavy and rep.tail(exp).notes == ()
    assert rep.model_fit() == (best, None)  # finite mean: the model file keeps the best


def test_a_log_logistic_of_shape_1_5_has_a_mean_but_no_variance():
    rng = np.random.default_rng(2)
    u = rng.random(3000)
    life = 100.0 * (u / (1 - u)) ** (1 / 1.5)
    rep = fit_all(life, np.ones(life.size, bool))
    best = rep.best
    assert best.family == "loglogistic"
    assert best.shape_ci_[0] < 1.5 < best.shape_ci_[1]
    tc = rep.tail(best)
    assert tc.mean_finite and not tc.variance_finite and tc.heavy and math.isinf(tc.cv)
    assert tc.notes[0] == f"infinite variance (loglogistic shape {best.shape_:.3g} <= 2)"
    assert tc.as_dict()["cv"] is None


def test_a_pareto_of_shape_1_5_is_flagged_by_its_fit():
    """Lomax (Pareto II) lifetimes of shape 1.5: no family fits them exactly; the log-logistic,
    whose tail is a power law too, wins and has no variance."""
    rng = np.random.default_rng(3)
    life = 100.0 * rng.pareto(1.5, 3000)
    rep = fit_all(life, np.ones(life.size, bool))
    assert rep.best.family == "loglogistic"
    tc = rep.tail(rep.best)
    assert not tc.variance_finite and tc.heavy


def test_exponential_lifetimes_raise_no_flag():
    rng = np.random.default_rng(4)
    t, obs = _censored(rng.exponential(100.0, 2000), 1000.0)
    rep = fit_all(t, obs)
    for f in rep.fits:
        if f.family in ("exponential", "weibull", "gamma"):
            tc = rep.tail(f)
            assert not tc.heavy and not tc.extrapolated and tc.notes == ()
            assert tc.mean_over_exponential == pytest.approx(1.0, abs=0.05)


def _loglogistic_log(path: Path, shape: float, n: int = 400, window: float = 5000.0) -> Path:
    """A log in the CSV schema: n nodes, one lifetime each, log-logistic(scale 100 h, shape),
    censored at the window."""
    rng = np.random.default_rng(5)
    u = rng.random(n)
    life = 100.0 * (u / (1 - u)) ** (1 / shape)
    rows = ["node,node_type,event,time_h,cause"]
    for i, x in enumerate(life):
        rows.append(f"n{i},node,start,0,")
        if x < window:
            rows.append(f"n{i},node,fail,{x:.6f},hw")
        rows.append(f"n{i},node,end,{window},")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_an_infinite_mean_best_fit_is_not_what_the_model_file_gets(tmp_path):
    from cprsim.scenario import load, with_model

    log = _loglogistic_log(tmp_path / "ll.csv", 0.7)
    fit = fit_failure_log(log, bootstrap=0)
    rep = fit.lifetimes
    assert rep.best.family == "loglogistic" and math.isinf(rep.best.mean_)
    model, why = rep.model_fit()
    assert model is next(f for f in rep.fits if math.isfinite(f.mean_))
    assert why is not None and "infinite mean" in why and model.family in why
    tc = rep.tail(rep.best)
    assert not tc.mean_finite and tc.heavy and tc.mean_beyond_data == 1.0
    assert tc.notes == (
        f"infinite mean and variance (loglogistic shape {rep.best.shape_:.3g} <= 1)",
    )
    out = tmp_path / "model.toml"
    out.write_text(fitted_model_toml(fit, out.name))
    doc = tomllib.loads(out.read_text())
    assert doc["failures"]["embedding"]["family"] == model.family
    assert doc["failures"]["trainer"]["scale_h"] == model.scale_
    assert doc["provenance"]["family_ranking"][0] == "loglogistic"
    assert doc["provenance"]["model_family"] == model.family
    assert doc["provenance"]["model_note"] == why
    assert "not loglogistic, the best by AIC" in out.read_text()
    # a default (stationary-start) scenario takes it
    s = with_model(load("toy"), out)
    assert s.failures.start == "stationary" and s.failures.embedding.family == model.family
    # the JSON says the same
    d = log_fit_dict(fit)
    assert d["model_family"] == model.family and d["model_note"] == why
    assert d["fits"][0]["tail"]["mean_finite"] is False and d["fits"][0]["mean"] is None
    assert d["t_max"] == rep.t_max and d["exponential_mean"] == rep.exponential_mean


def test_the_report_round_trips_and_older_reports_still_read():
    rng = np.random.default_rng(6)
    t, obs = _censored(rng.weibull(0.7, 500) * 100.0, 400.0)
    rep = fit_all(t, obs)
    d = json.loads(json.dumps(rep.as_dict()))
    back = FitReport.from_dict(d)
    assert back.t_max == rep.t_max and back.exponential_mean == rep.exponential_mean
    assert [back.tail(f).as_dict() for f in back.fits] == [f["tail"] for f in d["fits"]]
    for k in ("t_max", "exponential_mean"):
        d.pop(k)
    old = FitReport.from_dict(d)  # a report written before these keys
    assert math.isnan(old.t_max) and math.isnan(old.exponential_mean)
    tc = old.tail(old.best)
    assert math.isnan(tc.mean_beyond_data) and not tc.extrapolated
    assert tc.as_dict()["mean_over_exponential"] is None


def test_tail_check_without_the_data_skips_what_needs_it():
    rep = fit_all(np.array([1.0, 2.0, 3.0, 10.0]), np.ones(4, bool))
    tc = tail_check(rep.best, math.nan, math.nan)
    assert math.isnan(tc.mean_beyond_data) and math.isnan(tc.mean_over_exponential)
    assert tc.notes == () or all("exponential" not in n for n in tc.notes)


def test_fit_prints_the_heavy_tails_and_what_out_writes(tmp_path, cli):
    log = _loglogistic_log(tmp_path / "ll.csv", 0.7)
    r = cli("fit", log, "--bootstrap", "0")
    assert r.exit_code == 0, r.output
    text = " ".join(r.output.split())
    assert "lifetimes: heavy tails and extrapolated means" in text
    assert "loglogistic (best): infinite mean and variance" in text
    assert "the best fit's mean rests on its tail" in text
    assert "lifetimes: --out writes" in text
    r = cli("fit", log, "--bootstrap", "0", "--json")
    d = json.loads(r.output)
    assert d["fits"][0]["tail"]["heavy"] is True and d["model_note"]


# -- the shipped model files --------------------------------------------------------------------------
SHIPPED = sorted(FITTED.glob("*.toml"))


def test_there_are_shipped_model_files():
    assert len(SHIPPED) >= 5 and FITTED / "lanl-system20-hardware.toml" in SHIPPED


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_model_loads_into_a_default_scenario(path):
    from cprsim.scenario import load, with_model

    doc = tomllib.loads(path.read_text())
    emb = doc["failures"]["embedding"]
    fit = doc["fits"][emb["family"]]
    assert fit["scale_h"] == emb["scale_h"] and math.isfinite(fit["mean_h"])
    prov = doc["provenance"]
    best = min(doc["fits"], key=lambda k: doc["fits"][k]["aic"])
    assert prov["best_by_aic"] == best
    # the best by AIC unless its mean is infinite, and then the reason is written beside it
    if emb["family"] != best:
        assert math.isinf(doc["fits"][best]["mean_h"])
        assert "infinite mean" in prov["model_note"]
        assert "# Not the best fit by AIC" in path.read_text()
    s = with_model(load("toy"), path)
    assert s.failures.start == "stationary"
    assert s.failures.embedding.family == emb["family"]
    assert math.isfinite(s.failures.embedding.dist.mean())


def test_the_shipped_lanl_model_is_the_weibull_because_the_log_logistic_has_no_mean():
    doc = tomllib.loads((FITTED / "lanl-system20-hardware.toml").read_text())
    assert doc["provenance"]["best_by_aic"] == "loglogistic"
    assert doc["fits"]["loglogistic"]["shape"] < 1 and math.isinf(
        doc["fits"]["loglogistic"]["mean_h"]
    )
    assert doc["failures"]["embedding"]["family"] == "weibull"
    assert doc["fits"]["loglogistic"]["heavy_tail"] is True


# -- the public logs -------------------------------------------------------------------------------------
@pytest.mark.shared
@pytest.mark.slow
def test_lanl_best_fit_mean_is_flagged_against_the_exponential(public_traces):
    tr = read_trace(public_traces / "SimEDC" / "trace.csv", "lanl")
    rep = fit_all(*tr.lifetimes())
    tc = rep.tail(rep.best)
    assert rep.best.family == "lognormal"
    assert tc.heavy and tc.mean_over_exponential > 10  # 13.7x: 70,570 h against 5,145 h
    assert tc.extrapolated and tc.mean_beyond_data > 0.9
    assert any("x the exponential's" in n for n in tc.notes)
    assert rep.model_fit() == (rep.best, None)  # heavy, but a finite mean: kept


@pytest.mark.shared
def test_lanl_system20_refit_gives_the_shipped_model(public_traces):
    doc = tomllib.loads((FITTED / "lanl-system20-hardware.toml").read_text())
    tr = read_trace(
        public_traces / "SimEDC" / "trace.csv", "lanl", {"system": "20", "cause": "hardware"}
    )
    rep = fit_all(*tr.lifetimes())
    model, why = rep.model_fit()
    assert rep.best.family == doc["provenance"]["best_by_aic"] == "loglogistic"
    assert why == doc["provenance"]["model_note"]
    emb = doc["failures"]["embedding"]
    assert model.family == emb["family"] and model.scale_ == pytest.approx(emb["scale_h"], rel=1e-6)
    assert rep.n == doc["provenance"]["lifetimes"] and rep.censored == doc["provenance"]["censored"]


def _titan_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.shared
@pytest.mark.parametrize(
    "filters",
    [{"batch": "new"}, {"batch": "old"}, {"batch": "old", "cause": "dbe"}, {"cage": "1"}],
    ids=lambda f: ",".join(f"{k}={v}" for k, v in f.items()),
)
def test_titan_counts_are_the_filtered_records(public_traces, filters):
    path = public_traces / "TitanGPULife" / "gc_summary_loc.csv"
    rows = _titan_rows(path)
    gpu = {k: v for k, v in filters.items() if k != "cause"}
    sel = [r for r in rows if all(r[k].strip().lower() == v for k, v in gpu.items())]
    dead = sum(r["dead"].upper() == "TRUE" for r in sel)
    tr = read_trace(path, "titan", filters)
    assert tr.counts["rows"] == len(rows) == 30207
    assert tr.counts["gpus"] == len(sel) < len(rows)
    assert tr.counts["dead"] == dead and tr.counts["censored"] == len(sel) - dead
    _t, obs = tr.lifetimes()
    if "cause" in filters:
        kept = sum(r["dead_dbe"].upper() == "TRUE" for r in sel)
        assert tr.counts["failures"] == kept == obs.sum()
    else:
        assert "failures" not in tr.counts and obs.sum() == dead
    assert obs.size == len(sel)


@pytest.mark.shared
def test_titan_fit_json_counts_are_the_batch(public_traces, cli):
    path = public_traces / "TitanGPULife" / "gc_summary_loc.csv"
    r = cli("fit", path, "--format", "titan", "--filter", "batch=new", "--bootstrap", "0", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    sel = [x for x in _titan_rows(path) if x["batch"] == "new"]
    dead = sum(x["dead"] == "TRUE" for x in sel)
    assert d["counts"]["gpus"] == len(sel) and d["counts"]["dead"] == dead == d["events"]
    assert d["counts"]["censored"] == len(sel) - dead == d["censored"]


@pytest.mark.shared
def test_philly_counts_are_the_selected_jobs(public_traces):
    path = public_traces / "philly-traces" / "jobs.json"
    jobs = json.loads(path.read_text())
    sel = [j for j in jobs if int(j["num_gpus"]) >= 8]
    tr = read_trace(path, "philly", {"min_gpus": "8"})
    assert tr.counts["jobs"] == len(jobs) and tr.counts["selected_jobs"] == len(sel)
    assert tr.counts["multi_attempt_jobs"] == sum(len(j["attempts"]) > 1 for j in sel)
    assert tr.counts["reattempts"] == sum(len(j["attempts"]) - 1 for j in sel)


@pytest.mark.shared
def test_lanl_counts_say_what_the_filters_select(public_traces):
    path = public_traces / "SimEDC" / "trace.csv"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    sys20 = [r for r in rows if r["System"].strip() == "20"]
    causes = ("Facilities", "Hardware", "Human Error", "Network", "Undetermined", "Software")
    # a record's category: the first of the cause columns it fills (LA-UR-05-7318)
    hw = [r for r in sys20 if next((c for c in causes if r[c].strip()), None) == "Hardware"]
    tr = read_trace(path, "lanl", {"system": "20", "cause": "hardware"})
    assert tr.counts["records"] == len(rows)
    assert tr.counts["selected_records"] == len(sys20)
    assert tr.counts["kept_failures"] == len(hw)
