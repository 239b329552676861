"""One TOML writer (cprsim.io.dumps_toml, tomli-w): whatever is written reads back equal.

Hypothesis generates documents with awkward keys and strings (quotes, backslashes, control
characters, unicode) and numpy scalars; scenarios with such names and descriptions, numpy numbers
in their fields and arrays of tables; calibration documents; fitted model tables.
"""

from __future__ import annotations

import math
import tomllib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cprsim import scenario as sc
from cprsim.io import dumps_toml

text = st.text(
    st.characters(blacklist_categories=("Cs",)), max_size=30
)  # any unicode but surrogates
floats = st.floats(allow_nan=False, allow_infinity=False, width=64)
scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    floats,
    text,
    floats.map(np.float64),
    st.integers(-(2**31), 2**31 - 1).map(np.int64),
    st.floats(allow_nan=False, allow_infinity=False, width=32).map(np.float32),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4), max_leaves=8)
docs = st.recursive(
    st.dictionaries(text, values, max_size=5),
    lambda inner: st.dictionaries(text, st.one_of(values, inner), max_size=4),
    max_leaves=12,
)


def plain(v):
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    return v


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs, text)
def test_any_document_written_reads_back_equal(doc, header):
    out = dumps_toml(doc, header)
    assert tomllib.loads(out) == plain(doc)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(
    text,
    text,
    st.floats(0.01, 1e4).map(np.float64),
    st.integers(1, 64).map(np.int64),
    st.booleans(),
)
def test_any_scenario_written_reads_back_equal(name, description, mtbf, servers, two_phase):
    """A built-in scenario with any name and description, numpy numbers in its fields, failure
    domains (an array of tables): written by `cprsim show`'s writer, loaded back, equal."""
    raw = sc.load_raw("cpr-production")[0]
    raw = {
        **raw,
        "name": name,
        "description": description,
        "cluster": {**raw["cluster"], "embedding_servers": int(max(servers, 4))},
        "checkpoint": {**raw["checkpoint"], "mode": "two-phase" if two_phase else "blocking"},
        "failures": {
            "domains": [
                {
                    **raw["failures"]["domains"][0],
                    "failure": {"family": "weibull", "shape": 0.517, "mtbf_h": float(mtbf)},
                }
            ],
            "embedding": {"family": "exponential", "mtbf_h": mtbf},
        },
    }
    s = sc.validate(plain(raw), "test")
    text_out = sc.to_toml(s.model_dump(mode="python", exclude_none=True))
    back = sc.validate(tomllib.loads(text_out), "roundtrip")
    assert back == s


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        text.filter(bool),
        st.tuples(floats, floats).map(lambda t: [np.float64(t[0]), t[1]]),
        min_size=1,
        max_size=4,
    ),
    text,
)
def test_calibration_and_fitted_model_tables_read_back_equal(slopes, source):
    """The shapes `cprsim calibrate` and `cprsim fit` write: nested tables of numpy numbers, with
    provenance strings that may hold anything."""
    from cprsim.calibrate.calibration import to_toml

    doc = {
        "provenance": {"source": source, "calibrated": True, "seed": np.int64(3)},
        "fit": {"auc": {k: {"slope": v[0], "ci": v} for k, v in slopes.items()}},
        "lifecycle": {"health": {"bad_fraction": np.float64(0.05), "bad_multiplier": 20.0}},
    }
    back = tomllib.loads(to_toml(doc, header=f"written by a test\n{source}"))
    assert back == plain(doc)
    assert all(
        isinstance(x, float) and math.isfinite(x)
        for v in back["fit"]["auc"].values()
        for x in v["ci"]
    )


def test_a_multi_line_header_becomes_comment_lines_and_other_control_characters_are_escaped():
    """`fit --out` headers: each line of the header a `#` line (no literal \\x0a), a bell escaped."""
    import tomllib

    from cprsim.io import dumps_toml

    text = dumps_toml({"a": 1}, "first line\nsecond\x07 line\r\nthird")
    assert text.splitlines()[:3] == ["# first line", "# second\\x07 line", "# third"]
    assert "\\x0a" not in text and tomllib.loads(text) == {"a": 1}
