"""One place for the built-in strategies' names (issue 17, item 4): :mod:`cprsim.names`.

* every strategy constant names a registered built-in strategy, and every built-in has one;
* the groups hold built-ins only, in the roles their comments give them;
* the planner (``cprsim/plan``), the calibration (``cprsim/calibrate``) and the sweep spec
  (``cprsim/sweep/spec.py``) spell no strategy name as a string literal: an AST walk finds none
  (the walk is shown to find one when there is one);
* the module imports nothing, so that every layer may use it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import cprsim
from cprsim import names, registry

ROOT = Path(cprsim.__file__).parent
#: where no strategy name may be spelt out (folders: every .py below them)
WALKED = ("planner", "calibrate", "sweep/spec.py")
#: the strategy constants, by attribute name
STRATEGY_CONSTANTS = ("FULL", "PARTIAL", "MFU", "SSU", "LOOKAHEAD", "ECRM", "CHECKNRUN")
#: the module's other constants: the groups, an alias, and the emulator's action kinds
GROUPS = ("BUILTIN", "PLAN_ORDER", "PLAN_DEFAULT", "EMULATED", "CALIBRATION_DEFAULT")
ALIASES = {"VANILLA": "PARTIAL"}
#: the DLRM emulator's action kinds: two are spelt like strategies but are kinds of save (every
#: emulated strategy but vanilla CPR makes both), so they are constants of their own, not FULL
#: and PARTIAL
ACTION_KINDS = {"SAVE_FULL": "full", "SAVE_PARTIAL": "partial", "FAIL": "fail"}
#: (file relative to cprsim/, literal) pairs the walk accepts, each with its reason. None is
#: needed: the emulator's action kinds, the only "full"/"partial" literals that are not strategy
#: names, are spelt through cprsim.names' SAVE_FULL / SAVE_PARTIAL.
ALLOWED: dict[tuple[str, str], str] = {}


def _constants() -> dict[str, object]:
    return {k: v for k, v in vars(names).items() if k.isupper() and not k.startswith("_")}


def test_every_strategy_constant_names_a_registered_builtin():
    for attr in STRATEGY_CONSTANTS:
        value = getattr(names, attr)
        cls = registry.get(value)
        assert cls.name == value, attr
        assert cls.__module__ in registry.BUILTIN_MODULES, (attr, cls.__module__)


def test_every_builtin_strategy_has_a_constant():
    values = [getattr(names, a) for a in STRATEGY_CONSTANTS]
    assert sorted(values) == registry.builtin_names()
    assert tuple(values) == names.BUILTIN  # full recovery first, then the planner's order


def test_the_module_holds_only_the_documented_constants():
    """A constant added to cprsim.names is classified here (a strategy, a group, an alias or an
    action kind), so that none of them is taken for another."""
    known = {*STRATEGY_CONSTANTS, *GROUPS, *ALIASES, *ACTION_KINDS}
    assert set(_constants()) == known
    for alias, target in ALIASES.items():
        assert getattr(names, alias) == getattr(names, target)
    for attr, value in ACTION_KINDS.items():
        assert getattr(names, attr) == value


def test_the_groups():
    builtin = set(names.BUILTIN)
    for g in GROUPS:
        group = getattr(names, g)
        assert isinstance(group, tuple) and group, g
        assert set(group) <= builtin, g
        assert len(set(group)) == len(group), g
    # the planner lists every built-in but full recovery, in the built-ins' order
    assert tuple(n for n in names.BUILTIN if n != names.FULL) == names.PLAN_ORDER
    # what the planner weighs by default, and what a calibration measures, lose updates (PLS)
    for n in {*names.PLAN_DEFAULT, *names.EMULATED, *names.CALIBRATION_DEFAULT, names.VANILLA}:
        assert registry.get(n).planning.kind == "pls", n
    assert set(names.CALIBRATION_DEFAULT) <= set(names.EMULATED)
    assert names.VANILLA in names.PLAN_DEFAULT and names.VANILLA in names.CALIBRATION_DEFAULT


def test_the_users_of_the_groups_read_them():
    """The defaults the constants replaced are the constants (not copies that could drift)."""
    import inspect

    from cprsim.planner import _BUILTIN_ORDER, make_plan
    from cprsim.sweep.spec import PlanSpec

    assert _BUILTIN_ORDER is names.PLAN_ORDER
    assert inspect.signature(make_plan).parameters["strategies"].default is names.PLAN_DEFAULT
    assert PlanSpec.model_fields["strategies"].default is names.PLAN_DEFAULT


def test_the_module_imports_nothing():
    tree = ast.parse((ROOT / "names.py").read_text())
    imports = [
        n.module if isinstance(n, ast.ImportFrom) else ", ".join(a.name for a in n.names)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
    ]
    assert imports == ["__future__", "typing"]


def _files(root: Path) -> list[Path]:
    out: list[Path] = []
    for w in WALKED:
        p = root / w
        out += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return out


def _literals(root: Path) -> list[str]:
    """``file:line: 'name'`` for every string literal equal to a built-in strategy name in the
    walked files (f-string pieces included), but for the :data:`ALLOWED` pairs."""
    builtin = {getattr(names, a) for a in STRATEGY_CONSTANTS}
    out = []
    for p in _files(root):
        rel = p.relative_to(root).as_posix()
        hits = [
            node
            for node in ast.walk(ast.parse(p.read_text(), str(p)))
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value in builtin
            and (rel, node.value) not in ALLOWED
        ]
        hits.sort(key=lambda n: (n.lineno, n.col_offset))
        out += [f"{rel}:{n.lineno}: {n.value!r}" for n in hits]
    return out


def test_no_strategy_name_is_spelt_out():
    files = _files(ROOT)
    assert len(files) >= 15 and all(p.is_file() for p in files)  # the walk sees the modules
    assert _literals(ROOT) == []


def test_the_walk_finds_a_literal_when_there_is_one(tmp_path, monkeypatch):
    """The test can fail: literals in a default, a comparison, a dict key and a call are reported;
    docstrings and comments that mention a name, and other strings, are not."""
    (tmp_path / "planner").mkdir()
    (tmp_path / "calibrate" / "sub").mkdir(parents=True)
    (tmp_path / "sweep").mkdir()
    (tmp_path / "planner" / "a.py").write_text(
        '"""Uses "full" and partial recovery."""\n'
        'def f(s="mfu"):  # "ssu"\n'
        '    return s == "checknrun"\n'
    )
    (tmp_path / "calibrate" / "sub" / "b.py").write_text('x = {"lookahead": 1}\ny = "CPR-MFU"\n')
    (tmp_path / "sweep" / "spec.py").write_text('get("ecrm")\nz = f"{x}@sim"\n')
    (tmp_path / "sweep" / "results.py").write_text('w = "partial"\n')  # not walked
    assert _literals(tmp_path) == [
        "planner/a.py:2: 'mfu'",
        "planner/a.py:3: 'checknrun'",
        "calibrate/sub/b.py:1: 'lookahead'",
        "sweep/spec.py:1: 'ecrm'",
    ]
    monkeypatch.setitem(ALLOWED, ("planner/a.py", "mfu"), "a test of the allow list")
    assert _literals(tmp_path)[0] == "planner/a.py:3: 'checknrun'"


def test_a_wrong_constant_fails(monkeypatch):
    """The test can fail: a constant that names no registered strategy, or a missing built-in."""
    monkeypatch.setattr(names, "MFU", "mfu-typo")
    with pytest.raises((AssertionError, ValueError)):
        test_every_strategy_constant_names_a_registered_builtin()
    with pytest.raises(AssertionError):
        test_every_builtin_strategy_has_a_constant()
