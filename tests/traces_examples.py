"""A small trace in cprsim's schema for the tests (generated, known truth)."""

from __future__ import annotations

from pathlib import Path

from cprsim.failures.distributions import Distribution
from cprsim.failures.traces import write_csv


def example(folder: Path) -> Path:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "make_examples", Path(__file__).parents[1] / "traces" / "make_examples.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    tr = mod.generate(
        24,
        4000.0,
        Distribution("weibull", 800.0, 0.8),
        Distribution("exponential", 1.0),
        "embedding",
        7,
    )
    p = folder / "example.csv"
    p.write_text(write_csv(tr))
    return p
