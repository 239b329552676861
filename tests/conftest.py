"""Shared fixtures and markers of the test suite.

The helpers live in plain modules beside this file (``cli_helpers``, ``planner_helpers``,
``conftest_shared``, ``traces_examples``), which stay importable; the fixtures below hand them to a
test by name instead:

* ``cli``: invoke ``cprsim`` in-process (``cli("simulate", "toy", "-n", "2")`` -> click's ``Result``);
* ``one_line_error``: check that a run is a bad-input error (exit 2, one ``Error:`` line) and return it;
* ``linear_accuracy``: the planner tests' linear accuracy model (``linear_accuracy(0.01)``);
* ``jobbed_scenario``: a fresh copy of the small DLRM job with job-level interruptions;
* ``public_traces``: the public failure logs in ``../shared`` (the test is skipped when they are absent);
* ``example_trace``: a small generated trace in cprsim's schema, written under ``tmp_path``.

Markers (``pytest -m "not slow"`` is ``make test-fast``):

* ``slow``: takes more than about 2 s on the 2-core CI machine;
* ``shared``: reads ``../shared`` (skipped when it is absent; ``CPRSIM_SHARED`` points elsewhere);
* ``dlrm``: needs torch (the dlrm extra).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable
from typing import Any

import pytest

import conftest_shared  # the helper modules beside this file (tests/ is on sys.path)

MARKERS = {
    "slow": "takes more than about 2 s on a 2-core machine (make test-fast deselects it: -m 'not slow')",
    "shared": "reads ../shared (CPRSIM_SHARED overrides; skipped when the public traces are absent)",
    "dlrm": "needs torch (the dlrm extra)",
}


def pytest_configure(config: pytest.Config) -> None:
    # The CLI tests read tables laid out for output that is not a terminal (cprsim.cli.common's
    # PIPED_WIDTH columns); COLUMNS would change that width: pytest-xdist sets it to 80 in its
    # workers, and a user's shell may export it. Tests that want a width pass COLUMNS themselves.
    os.environ.pop("COLUMNS", None)
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked ``shared`` is skipped, with the reason, when ../shared has no public traces."""
    if conftest_shared.PUBLIC.is_dir():
        return
    skip = pytest.mark.skip(
        reason=f"the public traces are not at {conftest_shared.PUBLIC} "
        "(set CPRSIM_SHARED to the shared/ folder to run these)"
    )
    for item in items:
        if "shared" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cli() -> Callable[..., Any]:
    """``cli(*args)``: ``cprsim *args`` in-process through click's CliRunner (arguments made ``str``)."""
    import cli_helpers  # imports cprsim.cli: only when a test asks for it

    return cli_helpers.run


@pytest.fixture(scope="session")
def one_line_error() -> Callable[[Any], str]:
    """``one_line_error(result)``: assert exit 2 with one ``Error:`` line and no traceback; return it."""
    import cli_helpers

    return cli_helpers.one_line_error


@pytest.fixture(scope="session")
def linear_accuracy() -> type:
    """The class ``planner_helpers.LinearAccuracy``: ``linear_accuracy(slope=0.016)`` has loss = slope x PLS."""
    import planner_helpers

    return planner_helpers.LinearAccuracy


@pytest.fixture
def jobbed_scenario() -> dict[str, Any]:
    """A deep copy of ``planner_helpers.JOBBED_SCENARIO`` (a test may change it freely)."""
    import planner_helpers

    return copy.deepcopy(planner_helpers.JOBBED_SCENARIO)


@pytest.fixture(scope="session")
def public_traces():
    """The folder of the public failure logs; skips the test when it is absent."""
    if not conftest_shared.PUBLIC.is_dir():
        pytest.skip(
            f"the public traces are not at {conftest_shared.PUBLIC} "
            "(set CPRSIM_SHARED to the shared/ folder to run these)"
        )
    return conftest_shared.PUBLIC


@pytest.fixture
def example_trace(tmp_path):
    """A generated 24-node Weibull trace (``traces/make_examples.py``) written to ``tmp_path/example.csv``."""
    import traces_examples

    return traces_examples.example(tmp_path)
