"""The access-skew model against direct computation and Monte Carlo."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cprsim.access import CRITEO_KAGGLE, AccessModel, gen_harmonic
from cprsim.errors import InputError


@pytest.mark.parametrize("a", [0.0, 0.6, 1.0, 1.3, 2.2])
def test_generalised_harmonic_matches_direct_sum(a):
    ks = np.array([0, 1, 7, 512, 513, 4000, 120_000])
    direct = [float(np.sum(np.arange(1, k + 1, dtype=float) ** -a)) for k in ks]
    np.testing.assert_allclose(gen_harmonic(ks, a), direct, rtol=1e-11, atol=1e-12)


def test_skew_statement_is_met_and_coverage_is_a_cdf():
    m = AccessModel.from_skew(CRITEO_KAGGLE, 0.01, 0.92)
    assert m.coverage(0.01) == pytest.approx(0.92, abs=1e-8)
    r = np.linspace(0, 1, 101)
    c = m.coverage(r)
    assert c[0] == 0 and c[-1] == pytest.approx(1.0, abs=1e-9)
    assert np.all(np.diff(c) >= -1e-15)


def _rows(tables, a):
    """Every row's per-sample access probability, explicitly (small models only)."""
    return [np.arange(1, n + 1, dtype=float) ** -a / gen_harmonic(n, a) for n in tables]


def test_touched_matches_explicit_rows_on_a_binned_model():
    tables = (40, 3_000, 90_000)  # the large table is binned, the small ones exact
    m = AccessModel(tables, 1.05)
    ps = _rows(tables, 1.05)
    for n in (10.0, 1e3, 1e5):
        exact = sum(float(np.sum(-np.expm1(n * np.log1p(-p)))) for p in ps) / sum(tables)
        assert m.touched(n) == pytest.approx(exact, rel=2e-3)


def test_coverage_matches_explicit_ranking():
    tables = (40, 3_000, 90_000)
    m = AccessModel(tables, 1.05)
    share = np.sort(np.concatenate(_rows(tables, 1.05)))[::-1] / len(tables)
    for r in (0.001, 0.01, 0.2):
        k = int(r * sum(tables))
        assert m.coverage(r) == pytest.approx(float(share[:k].sum()), abs=2e-3)


def test_sampled_coverage_against_monte_carlo():
    """Rows ranked by Poisson counts of m samples (Poissonised sampling makes counts independent).

    The model fixes the count threshold at its expectation; the realised threshold varies from
    draw to draw. With ~700 rows that approximation error is small: allowed 0.01 on top of the
    Monte Carlo 95% interval.
    """
    tables = (200, 500)
    a, r, m_samples = 1.1, 0.05, 3_000.0
    model = AccessModel(tables, a)
    p = np.concatenate(_rows(tables, a))
    rng = np.random.default_rng(12345)
    k = int(round(r * p.size))
    cov = []
    for _ in range(600):
        counts = rng.poisson(m_samples * p)
        order = np.lexsort((rng.random(p.size), -counts))  # by count, ties at random
        cov.append(p[order[:k]].sum() / len(tables))
    cov = np.asarray(cov)
    half = 1.96 * cov.std(ddof=1) / math.sqrt(cov.size)
    assert abs(model.sampled_coverage(r, m_samples) - cov.mean()) <= half + 0.01
    # and the noise is real: fewer samples, lower coverage; many samples, the exact ranking
    assert (
        model.sampled_coverage(r, 100.0) < model.sampled_coverage(r, m_samples) < model.coverage(r)
    )
    assert model.sampled_coverage(r, 1e9) == pytest.approx(model.coverage(r), abs=2e-3)


def test_fit_counts_recovers_the_exponent(tmp_path):
    rng = np.random.default_rng(7)
    tables, a = (800, 2_000), 1.15
    lines = ["table,count,rows"]
    for t, p in enumerate(_rows(tables, a)):
        counts = rng.multinomial(200_000, p)
        lines += [f"t{t},{c},{len(p)}" for c in counts]
    f = tmp_path / "counts.csv"
    f.write_text("\n".join(lines) + "\n")
    fit = AccessModel.fit_counts(f)
    # standard error from the observed information of the same likelihood
    h = 1e-4
    from cprsim.access import gen_harmonic as H

    def nll(x):
        tot = 0.0
        for t, _ in enumerate(_rows(tables, a)):
            c = np.sort(
                np.asarray([int(ln.split(",")[1]) for ln in lines[1:] if ln.startswith(f"t{t},")])
            )[::-1]
            tot += x * float(np.sum(c * np.log(np.arange(1, c.size + 1)))) + c.sum() * math.log(
                float(H(c.size, x))
            )
        return tot

    info = (nll(fit.alpha + h) - 2 * nll(fit.alpha) + nll(fit.alpha - h)) / h**2
    se = 1 / math.sqrt(info)
    assert abs(fit.alpha - a) <= 3 * se + 1e-3


def test_bad_inputs_are_one_line_errors(tmp_path):
    with pytest.raises(InputError, match="less than uniform"):
        AccessModel.from_skew((100, 100), 0.5, 0.2)
    bad = tmp_path / "c.csv"
    bad.write_text("table,count\nt,1\nt,x\n")
    with pytest.raises(InputError, match=r"c.csv: line 3"):
        AccessModel.fit_counts(bad)
    with pytest.raises(InputError, match="expected columns"):
        (tmp_path / "d.csv").write_text("a,b\n1,2\n")
        AccessModel.fit_counts(tmp_path / "d.csv")


@pytest.mark.parametrize("rows", ["abc", "1.5", "-3", "0"])
def test_a_bad_rows_value_is_one_line_naming_the_file_and_line(tmp_path, cli, one_line_error, rows):
    """``cprsim access --counts``: a table size that is not a whole number >= 1 is the reader's
    one-line error (exit 2, file and line named), like a bad count, never an internal error."""
    f = tmp_path / "counts.csv"
    f.write_text(f"table,count,rows\nt,5,10\nt,3,{rows}\n")
    line = one_line_error(cli("access", "--counts", f))
    assert "counts.csv: line 3: column rows: expected a whole number >= 1" in line
    assert repr(rows) not in line  # the cell itself is never shown


# -- in-sample coverage: what MFU's and SSU's partial saves protect -------------------------------------
_MC_TABLES = (20_000, 5_000, 50_000)


@pytest.mark.slow
@pytest.mark.parametrize(
    "m_samples,r,rate",
    [
        (20_000, 0.01, 1.0),
        (20_000, 0.05, 1.0),
        (2_000, 0.01, 1.0),  # MFU: exact counts of the window
        (200_000, 0.05, 0.05),
        (20_000, 0.1, 0.2),  # SSU: counts of a sub-sample
    ],
)
def test_in_sample_coverage_matches_monte_carlo_of_zipf_counts(m_samples, r, rate):
    """A direct Monte Carlo of the real process: every sample looks up one row per table
    (multinomial counts per table, not the model's Poisson), SSU counts a Bernoulli(rate) thinning
    of them, the top k rows by count are saved (ties at random), and the share of *all* the
    window's accesses on them is what the save protects. The model (Poisson counts, the count
    threshold at its expectation) must fall in the Monte Carlo mean's 99.99% interval (5 cases);
    the out-of-sample (population) share too."""
    model = AccessModel.from_skew(_MC_TABLES, 0.01, 0.92)
    probs = _rows(_MC_TABLES, model.alpha)
    pop = np.concatenate(probs) / len(_MC_TABLES)
    rows = pop.size
    k = int(round(r * rows))
    rng = np.random.default_rng(20261123)
    inside, outside = [], []
    for _ in range(300):
        x = np.concatenate([rng.multinomial(m_samples, p) for p in probs])
        y = rng.binomial(x, rate) if rate < 1 else x
        chosen = np.lexsort((rng.random(rows), -y))[:k]
        inside.append(x[chosen].sum() / (m_samples * len(_MC_TABLES)))
        outside.append(pop[chosen].sum())
    got = model.ranked_share(k / rows, m_samples, rate)
    z = 3.89  # two-sided 99.99%
    for mc, value in (
        (np.asarray(inside), got.in_sample),
        (np.asarray(outside), got.out_of_sample),
    ):
        half = z * mc.std(ddof=1) / math.sqrt(mc.size)
        assert abs(value - mc.mean()) <= max(half, 1e-9), (value, mc.mean(), half)


@pytest.mark.parametrize("m_samples", [1e4, 1e6, 1e8])
@pytest.mark.parametrize("r", [0.001, 0.01, 0.05, 0.2])
def test_protected_share_mfu_above_ssu_above_unranked_at_equal_bytes(m_samples, r):
    """At the same saved fraction r: MFU's exact counts protect at least SSU's sub-sampled ones,
    which protect at least r (rows picked without ranking); MFU's in-sample share is at least the
    population coverage, and a ranking's out-of-sample share at most it."""
    model = AccessModel.from_skew(CRITEO_KAGGLE, 0.01, 0.92)
    mfu = model.ranked_share(r, m_samples)
    ssu = model.ranked_share(r, m_samples, 0.01)
    ssu_coarse = model.ranked_share(r, m_samples, 0.0001)
    assert mfu.in_sample >= ssu.in_sample - 1e-12 >= ssu_coarse.in_sample - 2e-12 >= r - 3e-12
    assert mfu.in_sample >= model.coverage(r) - 1e-9 >= mfu.out_of_sample - 2e-9


def test_ranking_by_nothing_is_random_rows():
    model = AccessModel((1000, 300), 1.0)
    assert model.ranked_share(0.1, 0.0) == model.ranked_share(0.1, 0.0, 0.5)
    assert model.ranked_share(0.1, 0.0).in_sample == pytest.approx(0.1)


# -- rows consistent with the bytes ------------------------------------------------------------------
def _scen(**upd):
    from cprsim import scenario as sc

    return sc.load("cpr-production").with_updates(upd) if upd else sc.load("cpr-production")


@pytest.mark.parametrize(
    "upd",
    [
        {},
        {"access.dim": 128},
        {"access.dim": 16, "access.bytes_per_param": 2.0},
        {"cluster.embedding_gb": 3.3},
    ],
)
def test_rows_times_dim_times_bytes_is_the_embedding_bytes(upd):
    from cprsim import access
    from cprsim.scenario import GB

    s = _scen(**upd)
    lay = access.layout(s)
    dim = upd.get("access.dim", access.DEFAULT_DIM)
    assert lay.derived == "rows" and lay.dim == dim
    assert lay.rows * dim * lay.bytes_per_param == pytest.approx(
        s.cluster.embedding_gb * GB, rel=1e-9, abs=dim * 4
    )
    # the shape is Criteo Kaggle's, scaled: the largest table keeps its share of the rows
    assert max(lay.tables) / lay.rows == pytest.approx(
        max(CRITEO_KAGGLE) / sum(CRITEO_KAGGLE), rel=1e-6
    )
    assert access.of(s).rows == lay.rows


def test_given_rows_or_tables_imply_the_dim(tmp_path):
    from cprsim import access
    from cprsim.scenario import GB

    s = _scen(**{"access.rows": 10_000_000})
    lay = access.layout(s)
    assert lay.rows == 10_000_000 and lay.derived == "dim"
    assert lay.rows * lay.dim * lay.bytes_per_param == pytest.approx(s.cluster.embedding_gb * GB)
    f = tmp_path / "tables.csv"
    f.write_text("rows\n1000\n250000\n")
    s = _scen(**{"access.tables": str(f)})
    assert access.layout(s).tables == (1000, 250_000)
    assert access.layout(s).dim == pytest.approx(400e9 / (251_000 * 4))


@pytest.mark.parametrize(
    "upd,needle",
    [
        ({"access.rows": 10, "access.dim": 8}, "rows or dim"),
        ({"access.table_scale": 10.0}, "table_scale"),
        ({"access.dim": 0}, "access.dim"),
    ],
)
def test_inconsistent_row_counts_are_one_line_errors(upd, needle):
    from cprsim.scenario import ScenarioError

    with pytest.raises(ScenarioError, match=needle):
        _scen(**upd)


def test_show_prints_rows_touched_fraction_and_coverage():
    from click.testing import CliRunner

    from cprsim import access
    from cprsim.cli import main

    r = CliRunner().invoke(main, ["show", "cpr-production"])
    assert r.exit_code == 0, r.output
    s = _scen()
    model, n = access.of(s), s.interval_s * s.job.samples_per_s
    assert f"embedding rows: {access.layout(s).rows:,}" in r.output
    assert f"{100 * model.coverage(0.01):.1f}% of accesses" in r.output
    assert f"{100 * float(model.touched(n)):.3g}%" in r.output
