"""One direction of dependencies (issue 17): the model layer never imports the layers above it.

Walks every import statement (module level and inside functions) of the model layer's modules:
no arrow from ``cprsim.scenario``, ``cprsim.failures``, ``cprsim.costs``, ``cprsim.access`` (or the
strategy registry and the random streams they use) up to ``cprsim.sim``, ``cprsim.planner``,
``cprsim.sweep``, ``cprsim.plots`` or ``cprsim.cli``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import cprsim

ROOT = Path(cprsim.__file__).parent
LOW = (
    "cprsim.scenario",
    "cprsim.failures",
    "cprsim.costs",
    "cprsim.access",
    "cprsim.registry",
    "cprsim.streams",
    "cprsim.metrics",
    "cprsim.names",
    "cprsim.errors",
)
HIGH = ("cprsim.sim", "cprsim.planner", "cprsim.sweep", "cprsim.plots", "cprsim.cli")


def _module(p: Path) -> str:
    parts = p.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _arrows() -> list[str]:
    out = []
    for p in sorted(ROOT.rglob("*.py")):
        mod = _module(p)
        if not mod.startswith(LOW):
            continue
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            out += [f"{mod} -> {t} (line {node.lineno})" for t in targets if t.startswith(HIGH)]
    return out


def test_the_model_layer_imports_nothing_above_it():
    assert _arrows() == []


def test_the_walk_finds_an_arrow_when_there_is_one(tmp_path, monkeypatch):
    """The test can fail: a model module with a function-level import of the engine is reported."""
    pkg = tmp_path / "cprsim"
    (pkg / "failures").mkdir(parents=True)
    (pkg / "failures" / "bad.py").write_text(
        "def f():\n    from cprsim.sim.engine import simulate_one\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "ROOT", pkg)
    assert _arrows() == ["cprsim.failures.bad -> cprsim.sim.engine (line 2)"]


def test_validating_a_scenario_loads_the_strategies_without_the_engine():
    """At run time too: loading and validating a scenario imports the strategies (they register
    themselves) but not the engine, the planner, sweeps, plots or the CLI."""
    code = (
        "import sys, cprsim.scenario as sc; sc.load('cpr-production'); "
        "print(sorted(m for m in sys.modules if m.startswith(('cprsim.sim.engine', 'cprsim.planner', "
        "'cprsim.sweep', 'cprsim.plots', 'cprsim.cli'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
