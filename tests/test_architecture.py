"""ARCHITECTURE.md kept true: its layer table, read from the file, against every import in
``cprsim/``. A module imports its own layer or lower ones, at module level or inside a function
alike, and there is no import cycle, lazy imports included. Imports under ``if TYPE_CHECKING:``
never run and are left out."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "cprsim"
DOC = ROOT / "ARCHITECTURE.md"


def layers() -> dict[str, int]:
    """The layer table of ARCHITECTURE.md: module prefix -> layer number."""
    out: dict[str, int] = {}
    for line in DOC.read_text().splitlines():
        m = re.match(r"\|\s*(\d+)\s+[a-z ]+\|([^|]+)\|", line)
        if m:
            for name in re.findall(r"`([\w.]+)`", m.group(2)):
                out[name] = int(m.group(1))
    return out


LAYERS = layers()


def modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = modules()


def layer_of(module: str) -> int:
    if module == "cprsim":  # the package's own names; a prefix of every module, so only exact
        return LAYERS[module]
    parts = module.split(".")
    for i in range(len(parts), 1, -1):
        key = ".".join(parts[:i])
        if key in LAYERS:
            return LAYERS[key]
    raise AssertionError(f"{module}: in no layer of ARCHITECTURE.md's table: add it there")


def _type_only(tree: ast.Module) -> set[int]:
    """The import nodes under ``if TYPE_CHECKING:`` (they never run)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def imports(module: str, path: Path) -> list[tuple[str, bool]]:
    """The cprsim modules ``module`` imports when it runs, each with whether the import is at
    module level (else inside a function: lazy)."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    typing_only = _type_only(tree)
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("cprsim")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                pkg = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join(pkg + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            if not base.startswith("cprsim"):
                continue
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names
            ]
        else:
            continue
        out += [(n, id(node) in top) for n in names]
    return out


def test_the_table_lists_every_top_level_package_and_module():
    tops = {".".join(m.split(".")[:2]) for m in MODULES}
    missing = sorted(
        m
        for m in tops
        if not any(m == k or (k != "cprsim" and m.startswith(k + ".")) for k in LAYERS)
    )
    assert not missing, f"not in ARCHITECTURE.md's layer table: {missing}"
    assert set(LAYERS.values()) == set(range(8)), LAYERS
    stale = sorted(
        k for k in LAYERS if k not in MODULES and not any(m.startswith(k + ".") for m in MODULES)
    )
    assert not stale, f"ARCHITECTURE.md names modules that do not exist: {stale}"


def test_imports_go_down_the_layers():
    upward = sorted(
        (module, dst, "module level" if top else "lazy")
        for module, path in MODULES.items()
        for dst, top in imports(module, path)
        if layer_of(dst) > layer_of(module)
    )
    assert not upward, f"imports that go up a layer: {upward}"


def import_cycles(lazy: bool = True) -> list[list[str]]:
    """The strongly connected components (of more than one module) of the import graph."""
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in MODULES.items():
        for dst, top in imports(module, path):
            if (top or lazy) and dst != module:
                graph[module].add(dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(MODULES):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycle_lazy_or_not():
    cycles = import_cycles()
    assert not cycles, f"import cycles (lazy imports included): {cycles}"


def test_the_checker_sees_a_lazy_import_and_skips_a_type_only_one(tmp_path):
    fake = tmp_path / "engine_extra.py"
    fake.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from cprsim.api import Runs\n"
        "def f():\n    from cprsim.planner import make_plan\n"
    )
    assert imports("cprsim.sim.engine_extra", fake) == [("cprsim.planner", False)]


def test_the_checker_sees_an_upward_import(tmp_path, monkeypatch):
    """The walk can fail: a module-level import of the API from the engine is caught."""
    fake = tmp_path / "engine_extra.py"
    fake.write_text("from cprsim.api import simulate\n")
    found = imports("cprsim.sim.engine_extra", fake)
    assert found == [("cprsim.api", True)]
    assert layer_of("cprsim.api") > layer_of("cprsim.sim.engine_extra")
